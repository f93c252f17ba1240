// The official `openai` npm SDK against the gateway: responses.create with and without stream, a function tool
// round trip, and the WebSocket mode (ResponsesWS: response.create over one socket).
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/beta/responses/ws';
import { apiKey, baseURL, prompt, runChecks, weatherSchema } from './common.mjs';

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
const weatherTool = { type: 'function', name: 'get_weather', description: 'Weather for a city.', parameters: weatherSchema, strict: true };

await runChecks({
  async create_json() {
    const response = await client.responses.create({ model: 'auto', input: prompt });
    return { status: response.status, text: response.output_text };
  },
  async create_stream() {
    const stream = await client.responses.create({ model: 'auto', input: prompt, stream: true });
    let text = '';
    let terminal = null;
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (['response.completed', 'response.failed', 'response.incomplete'].includes(event.type)) terminal = event.type;
    }
    return { status: terminal, text };
  },
  async tool_round_trip() {
    const input = [{ role: 'user', content: prompt }];
    const first = await client.responses.create({ model: 'auto', input, tools: [weatherTool] });
    const call = first.output.find((item) => item.type === 'function_call' && item.name === 'get_weather');
    if (!call) throw new Error(`no function_call in ${JSON.stringify(first.output)}`);
    const second = await client.responses.create({
      model: 'auto',
      tools: [weatherTool],
      input: [...input, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    return { status: second.status, text: second.output_text, tool_calls: [{ name: call.name, arguments: call.arguments }] };
  },
  async websocket() {
    const ws = new ResponsesWS(client);
    try {
      ws.send({ type: 'response.create', model: 'auto', input: prompt });
      let text = '';
      for await (const event of ws.stream()) {
        if (event.type === 'error') throw event.error;
        if (event.type === 'close') throw new Error(`socket closed: ${event.code} ${event.reason}`);
        if (event.type !== 'message') continue;
        const message = event.message;
        if (message.type === 'error') throw new Error(`error event: ${JSON.stringify(message)}`);
        if (message.type === 'response.output_text.delta') text += message.delta;
        if (['response.completed', 'response.failed', 'response.incomplete'].includes(message.type)) {
          return { status: message.type, text };
        }
      }
      throw new Error('stream ended without a terminal event');
    } finally {
      ws.close({ code: 1000, reason: 'done' });
    }
  },
});
