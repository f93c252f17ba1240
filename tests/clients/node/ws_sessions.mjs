// The official `openai` npm SDK's WebSocket helper (ResponsesWS) against a gateway with a paced upstream: two
// stream_id lanes on one socket, a fork into a new lane, and a response.steer. Prints one JSON report (common.mjs)
// for tests/clients/test_openai_websocket_sessions.py, which asserts what each check saw.
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/beta/responses/ws';
import { apiKey, baseURL, runChecks } from './common.mjs';

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
const TERMINALS = ['response.completed', 'response.incomplete', 'response.failed'];

/** Read messages from `ws` until `done(message)` says stop; returns them all. */
async function readUntil(iterator, done) {
  const seen = [];
  while (true) {
    const { value, done: ended } = await iterator.next();
    if (ended) throw new Error('socket ended');
    if (value.type === 'error') throw value.error;
    if (value.type === 'close') throw new Error(`socket closed: ${value.code} ${value.reason}`);
    if (value.type !== 'message') continue;
    seen.push(value.message);
    if (done(value.message, seen)) return seen;
  }
}

await runChecks({
  async lanes_and_fork() {
    const ws = new ResponsesWS(client);
    const events = ws.stream()[Symbol.asyncIterator]();
    try {
      ws.send({ type: 'response.create', model: 'auto', input: 'Lane A says heron.', stream_id: 'a', store: false });
      ws.send({ type: 'response.create', model: 'auto', input: 'Lane B.', stream_id: 'b', store: false });
      const ends = {};
      const lanes = await readUntil(events, (m) => {
        if (TERMINALS.includes(m.type)) ends[m.stream_id] = m.response;
        return Object.keys(ends).length === 2;
      });
      ws.send({ type: 'response.create', model: 'auto', input: 'Fork.', stream_id: 'fork', store: false,
        previous_response_id: ends.a.id });
      const fork = await readUntil(events, (m) => TERMINALS.includes(m.type));
      return {
        lanes: lanes.map((m) => m.stream_id ?? null),
        statuses: { a: ends.a.status, b: ends.b.status },
        fork_lanes: [...new Set(fork.map((m) => m.stream_id ?? null))],
        fork_status: fork.at(-1).response.status,
        fork_previous: fork.at(-1).response.previous_response_id,
        parent: ends.a.id,
      };
    } finally {
      ws.close({ code: 1000, reason: 'done' });
    }
  },
  async steer() {
    const ws = new ResponsesWS(client);
    const events = ws.stream()[Symbol.asyncIterator]();
    try {
      ws.send({ type: 'response.create', model: 'auto', input: 'Talk for a while.', stream_id: 'main' });
      let deltas = 0;
      const start = await readUntil(events, (m) => (deltas += m.type === 'response.output_text.delta') >= 2);
      const rid = start.find((m) => m.type === 'response.created').response.id;
      ws.send({ type: 'response.steer', previous_response_id: rid, input: 'Now talk about owls.' });
      let terminals = 0;
      const rest = await readUntil(events, (m) => (terminals += TERMINALS.includes(m.type)) === 2);
      const ends = rest.filter((m) => TERMINALS.includes(m.type)).map((m) => m.response);
      return {
        rid,
        accepted: rest.find((m) => m.type === 'response.steer.accepted') ?? null,
        original: { id: ends[0].id, status: ends[0].status, incomplete_details: ends[0].incomplete_details },
        successor: { status: ends[1].status, previous_response_id: ends[1].previous_response_id },
        lanes: [...new Set([...start, ...rest].map((m) => m.stream_id ?? null))],
      };
    } finally {
      ws.close({ code: 1000, reason: 'done' });
    }
  },
});
