// The Vercel AI SDK (`ai` + `@ai-sdk/openai`, its Responses provider `openai.responses(model)`) against the gateway:
// generateText (a tool round trip the SDK runs itself), streamText and generateObject (structured output).
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { apiKey, baseURL, prompt, runChecks } from './common.mjs';

const openai = createOpenAI({ baseURL, apiKey });
const model = openai.responses('auto');

await runChecks({
  async generate_text() {
    const result = await generateText({ model, prompt, maxRetries: 0 });
    return { status: result.finishReason, text: result.text };
  },
  async stream_text() {
    const result = streamText({ model, prompt, maxRetries: 0, onError: () => {} });
    let text = '';
    for await (const part of result.fullStream) {
      if (part.type === 'error') throw part.error;
      if (part.type === 'text-delta') text += part.text;
    }
    return { status: await result.finishReason, text };
  },
  async tool_round_trip() {
    const calls = [];
    const result = await generateText({
      model,
      prompt,
      maxRetries: 0,
      stopWhen: stepCountIs(3),
      tools: {
        get_weather: tool({
          description: 'Weather for a city.',
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            calls.push(city);
            return `sunny in ${city}`;
          },
        }),
      },
    });
    const toolCalls = result.steps.flatMap((step) => step.toolCalls.map((c) => ({ name: c.toolName, arguments: JSON.stringify(c.input) })));
    return { status: result.finishReason, text: result.text, tool_calls: toolCalls, executed: calls };
  },
  async generate_object() {
    const result = await generateObject({
      model,
      prompt,
      maxRetries: 0,
      schema: z.object({ city: z.string(), forecast: z.string() }),
    });
    return { status: result.finishReason, object: result.object };
  },
});
