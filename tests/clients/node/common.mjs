// Shared by the matrix's Node programs: run named checks against the gateway, print one JSON object
// {check: {ok: true, ...what it saw} | {ok: false, error}} on stdout for tests/clients/test_node_clients.py.
export const baseURL = process.argv[2];
export const apiKey = 'test-key';
// No fresh-facts word ("weather", "today"): the gateway's router would search first (a server tool call).
export const prompt = 'Plan a day in Paris.';
export const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
};

export async function runChecks(checks) {
  if (!baseURL) throw new Error('usage: node <program>.mjs BASE_URL');
  const report = {};
  for (const [name, check] of Object.entries(checks)) {
    try {
      const seen = await withTimeout(check(), 20000, name);
      report[name] = { ok: true, ...seen };
    } catch (err) {
      report[name] = { ok: false, error: `${err?.constructor?.name}: ${err?.message ?? err}`.slice(0, 2000) };
    }
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(0); // a client that keeps a socket or timer open must not hold the test
}

function withTimeout(promise, ms, name) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: no result in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
