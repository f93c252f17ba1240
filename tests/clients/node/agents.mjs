// The JS Agents SDK (`@openai/agents`) against the gateway: a run with a function tool over SSE (streamed and not)
// and over its WebSocket transport (OpenAIResponsesWSModel: response.create on one socket).
import { Agent, OpenAIResponsesModel, OpenAIResponsesWSModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { apiKey, baseURL, prompt, runChecks } from './common.mjs';

setTracingDisabled(true); // tracing would upload to the vendor's host
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });

function weatherAgent(model, calls) {
  const getWeather = tool({
    name: 'get_weather',
    description: 'Weather for a city.',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny in ${city}`;
    },
  });
  return new Agent({ name: 'planner', instructions: 'Use get_weather first.', model, tools: [getWeather] });
}

async function runAgent(model, stream) {
  const calls = [];
  const result = await run(weatherAgent(model, calls), prompt, { stream, maxTurns: 4 });
  if (stream) {
    for await (const _event of result) {
      // drain the events; the SDK raises on a stream without a success terminal
    }
    await result.completed;
  }
  const toolCalls = result.newItems
    .filter((item) => item.type === 'tool_call_item')
    .map((item) => ({ name: item.rawItem.name, arguments: item.rawItem.arguments }));
  return { text: result.finalOutput, tool_calls: toolCalls, executed: calls };
}

await runChecks({
  run_sse: () => runAgent(new OpenAIResponsesModel(client, 'auto'), false),
  run_sse_streamed: () => runAgent(new OpenAIResponsesModel(client, 'auto'), true),
  async run_websocket() {
    const model = new OpenAIResponsesWSModel(client, 'auto');
    try {
      return await runAgent(model, true);
    } finally {
      await model.close?.();
    }
  },
});
