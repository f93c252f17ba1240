// "View code": the exact request body as curl, Python (openai SDK and respstream.client), JavaScript fetch and
// `respstream stream`. The API key is never written into a snippet: each reads RESPSTREAM_API_KEY instead.

/** Quote for a POSIX shell: single quotes, with each ' written as '\'' . */
export function shellQuote(text) {
  return `'${String(text).replace(/'/g, "'\\''")}'`;
}

function pyString(s) {
  return JSON.stringify(s); // a JSON string is a valid Python string literal (same escapes)
}

/** A JSON value as a Python literal (True/False/None), indented like json.dumps(indent=4). */
export function pyLiteral(value, indent = 0) {
  const pad = "    ".repeat(indent + 1);
  const end = "    ".repeat(indent);
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return pyString(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[\n${value.map((v) => pad + pyLiteral(v, indent + 1)).join(",\n")},\n${end}]`;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return "{}";
  return `{\n${entries.map(([k, v]) => `${pad}${pyString(k)}: ${pyLiteral(v, indent + 1)}`).join(",\n")},\n${end}}`;
}

function withoutStream(body) {
  const copy = { ...body };
  delete copy.stream;
  return copy;
}

export function curlSnippet(base, body, keyed) {
  const lines = [`curl -sN ${shellQuote(`${base}/responses`)}`, "-H 'Content-Type: application/json'",
    "-H 'Accept: text/event-stream'"];
  if (keyed) lines.push('-H "Authorization: Bearer $RESPSTREAM_API_KEY"');
  lines.push(`-d ${shellQuote(JSON.stringify(body, null, 2))}`);
  return lines.join(" \\\n  ");
}

export function openaiSnippet(base, body) {
  return [
    "import os",
    "",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${pyString(base)}, api_key=os.environ.get("RESPSTREAM_API_KEY") or "unused")`,
    `request = ${pyLiteral(withoutStream(body))}`,
    "for event in client.responses.create(stream=True, **request):",
    '    if event.type == "response.output_text.delta":',
    '        print(event.delta, end="", flush=True)',
    "print()",
  ].join("\n");
}

export function respstreamSnippet(base, body) {
  return [
    "import os",
    "",
    "from respstream.client import Client",
    "",
    `request = ${pyLiteral(withoutStream(body))}`,
    `with Client(base_url=${pyString(base)}, api_key=os.environ.get("RESPSTREAM_API_KEY")) as client:`,
    "    with client.stream(**request) as stream:",
    '        stream.on_text(lambda delta: print(delta, end="", flush=True))',
    "        response = stream.result()",
    "print()",
  ].join("\n");
}

export function fetchSnippet(base, body, keyed) {
  const headers = ['"Content-Type": "application/json"', 'Accept: "text/event-stream"'];
  if (keyed) headers.push("Authorization: `Bearer ${API_KEY}`");
  return [
    keyed ? 'const API_KEY = "…"; // your key\n' : "",
    `const request = ${JSON.stringify(body, null, 2)};`,
    "",
    `const res = await fetch(${JSON.stringify(`${base}/responses`)}, {`,
    '  method: "POST",',
    `  headers: { ${headers.join(", ")} },`,
    "  body: JSON.stringify(request),",
    "});",
    "if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);",
    "const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();",
    'let buffer = "";',
    "for (;;) {",
    "  const { value, done } = await reader.read();",
    "  if (done) break;",
    "  buffer += value;",
    "  const blocks = buffer.split(/\\r?\\n\\r?\\n/);",
    "  buffer = blocks.pop();",
    "  for (const block of blocks) {",
    '    const data = block.split(/\\r?\\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\\n");',
    "    if (!data || data === \"[DONE]\") continue;",
    "    const event = JSON.parse(data);",
    '    if (event.type === "response.output_text.delta") console.log(event.delta);',
    "  }",
    "}",
  ].join("\n").replace(/^\n/, "");
}

/** `respstream stream` has flags for part of the request; the rest is named in a comment, not dropped silently. */
export function cliSnippet(base, body, keyed) {
  const text = typeof body.input === "string" ? body.input
    : (body.input[0]?.content || []).filter((p) => p.type === "input_text").map((p) => p.text).join("");
  const args = ["respstream stream", shellQuote(text), `--url ${shellQuote(base)}`];
  if (body.model) args.push(`--model ${shellQuote(body.model)}`);
  if (body.instructions) args.push(`--instructions ${shellQuote(body.instructions)}`);
  for (const tool of body.tools || []) args.push(`--tool ${tool.type}`);
  if (body.max_output_tokens) args.push(`--max-output-tokens ${body.max_output_tokens}`);
  if (body.background) args.push("--background");
  const missing = [];
  for (const key of ["temperature", "top_p", "previous_response_id", "text"]) if (key in body) missing.push(key);
  if (typeof body.input !== "string") missing.push("input images");
  const head = keyed ? ["# reads the key from RESPSTREAM_API_KEY"] : [];
  if (missing.length) {
    head.push(`# respstream stream has no flag for: ${missing.join(", ")} — use the curl or SDK tab for the exact request`);
  }
  return [...head, args.join(" \\\n  ")].join("\n");
}

export const SNIPPETS = {
  curl: { language: "bash", make: curlSnippet },
  openai: { language: "python", make: openaiSnippet },
  respstream: { language: "python", make: respstreamSnippet },
  fetch: { language: "javascript", make: fetchSnippet },
  cli: { language: "bash", make: cliSnippet },
};
