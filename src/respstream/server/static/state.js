// The page's view of one response, built from events in sequence order (a small assembler).
// It keeps what the live UI showed (streamed text) apart from the final text, so a rewrite is visible.
import { canonicalType } from "./event-types.js";

const TERMINAL_STATUS = {
  "response.completed": "completed",
  "response.incomplete": "incomplete",
  "response.failed": "failed",
  error: "error",
};

const HOSTED_TOOL_ITEMS = new Set(["function_call", "web_search_call", "mcp_call", "file_search_call",
  "code_interpreter_call", "custom_tool_call"]);

export class ResponseState {
  constructor() {
    this.id = null;
    this.model = null;
    this.status = "idle";
    this.routing = null;
    this.items = new Map(); // output_index -> item view
    this.rewriteSeen = false;
    this.error = null;
    this.usage = null;
    this.incompleteDetails = null;
    this.terminal = null;
    this.startedAt = 0;
    this.firstTokenAt = 0;
    this.endedAt = 0;
    this.deltaCount = 0;
  }

  start(now) {
    this.startedAt = now;
    this.status = "streaming";
  }

  item(oi, itemId) {
    let key = oi;
    if (key === undefined && itemId !== undefined) {
      for (const [k, it] of this.items) if (it.id === itemId) key = k;
    }
    if (key === undefined) key = itemId ?? 0;
    let it = this.items.get(key);
    if (!it) {
      it = { type: "message", id: itemId ?? null, name: null, callId: null, args: "", status: "in_progress",
        output: null, parts: new Map(), reasoning: "", sources: [] };
      this.items.set(key, it);
    }
    return it;
  }

  part(it, ci) {
    const key = ci ?? 0;
    let p = it.parts.get(key);
    if (!p) {
      p = { streamed: "", final: null, annotations: [] };
      it.parts.set(key, p);
    }
    return p;
  }

  /** Apply one in-order event; `now` is a millisecond clock reading. */
  apply(ev, now) {
    const t = canonicalType(ev.type);
    if (ev.response && typeof ev.response === "object") this._response(ev.response);
    switch (t) {
      case "response.routing.completed":
        this.routing = { model_id: ev.model_id, category: ev.category, source: ev.source, reasoning: ev.reasoning };
        if (ev.model_id) this.model = ev.model_id;
        break;
      case "response.rewrite.in_progress":
        this.rewriteSeen = true;
        break;
      case "response.output_item.added":
      case "response.output_item.done": {
        const it = this.item(ev.output_index, ev.item && ev.item.id);
        this._itemSnapshot(it, ev.item || {}, t.endsWith("done"));
        break;
      }
      case "response.output_text.delta": {
        const it = this.item(ev.output_index, ev.item_id);
        this.part(it, ev.content_index).streamed += ev.delta ?? "";
        this.deltaCount += 1;
        if (!this.firstTokenAt) this.firstTokenAt = now;
        break;
      }
      case "response.output_text.done": {
        const it = this.item(ev.output_index, ev.item_id);
        if (typeof ev.text === "string") this.part(it, ev.content_index).final = ev.text;
        break;
      }
      case "response.output_text.annotation.added":
        if (ev.annotation && typeof ev.annotation === "object") {
          this.part(this.item(ev.output_index, ev.item_id), ev.content_index).annotations.push(ev.annotation);
        }
        break;
      case "response.content_part.done": {
        const p = this.part(this.item(ev.output_index, ev.item_id), ev.content_index);
        if (ev.part && typeof ev.part.text === "string") p.final = ev.part.text;
        if (ev.part && Array.isArray(ev.part.annotations)) p.annotations = ev.part.annotations;
        break;
      }
      case "response.function_call_arguments.delta":
      case "response.mcp_call_arguments.delta":
      case "response.custom_tool_call_input.delta":
        this.item(ev.output_index, ev.item_id).args += ev.delta ?? "";
        break;
      case "response.function_call_arguments.done":
      case "response.mcp_call_arguments.done":
        if (typeof ev.arguments === "string") this.item(ev.output_index, ev.item_id).args = ev.arguments;
        break;
      case "response.reasoning_text.delta":
      case "response.reasoning_summary_text.delta":
        this.item(ev.output_index, ev.item_id).reasoning += ev.delta ?? "";
        break;
      case "error":
        this.error = errorOf(ev);
        break;
      default:
        if (/^response\.(web_search_call|mcp_call|file_search_call|code_interpreter_call)\.\w+$/.test(t)) {
          const it = this.item(ev.output_index, ev.item_id);
          const phase = t.split(".").pop();
          it.status = phase === "completed" ? "completed" : phase === "failed" ? "failed" : phase;
        }
    }
    if (t in TERMINAL_STATUS && this.terminal === null) {
      this.terminal = t;
      this.endedAt = now;
      let status = TERMINAL_STATUS[t];
      const rs = ev.response && ev.response.status;
      if (rs === "incomplete" || rs === "cancelled") status = rs;
      if (t === "error" && this.error && this.error.code === "cancelled") status = "cancelled";
      this.status = status;
    } else if (t === "response.failed") {
      this.status = ev.response && ev.response.status === "cancelled" ? "cancelled" : "failed";
    }
  }

  _response(r) {
    if (r.id) this.id = r.id;
    if (r.model) this.model = this.model && this.routing ? this.model : r.model;
    if (r.usage) this.usage = r.usage;
    if (r.incomplete_details) this.incompleteDetails = r.incomplete_details;
    if (r.error && !this.error) this.error = { code: r.error.code ?? "error", message: r.error.message ?? "" };
  }

  _itemSnapshot(it, item, done) {
    if (item.type) it.type = item.type;
    if (item.id) it.id = item.id;
    if (item.name) it.name = item.name;
    if (item.type === "web_search_call") it.name = "web_search";
    if (item.call_id) it.callId = item.call_id;
    if (typeof item.arguments === "string" && (done || item.arguments)) it.args = item.arguments;
    if (item.action && item.action.query && !it.args) it.args = JSON.stringify({ query: item.action.query });
    if (item.action && Array.isArray(item.action.sources)) it.sources = item.action.sources;
    if (item.output !== undefined && item.output !== null) it.output = item.output;
    if (item.error) it.output = typeof item.error === "string" ? item.error : JSON.stringify(item.error);
    if (item.status) it.status = item.status;
    else if (done) it.status = "completed";
    if (done && Array.isArray(item.content)) {
      item.content.forEach((c, ci) => {
        if (c && typeof c.text === "string") this.part(it, ci).final = c.text;
        if (c && Array.isArray(c.annotations)) this.part(it, ci).annotations = c.annotations;
      });
    }
    if (item.type === "reasoning" && done) {
      const text = [...(item.summary || []), ...(item.content || [])].map((p) => p.text || "").join("\n");
      if (text && !it.reasoning) it.reasoning = text;
    }
  }

  /** Tool-like items (function calls, hosted tools), in output order. */
  tools() {
    return [...this.items.values()].filter((it) => HOSTED_TOOL_ITEMS.has(it.type));
  }

  reasoning() {
    return [...this.items.values()].filter((it) => it.reasoning).map((it) => it.reasoning).join("\n\n");
  }

  /** The message parts in output order: {text, annotations} (final text, or streamed with `which`). */
  parts(which = "final") {
    const out = [];
    for (const it of this.items.values()) {
      if (it.type !== "message") continue;
      for (const p of [...it.parts.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1])) {
        const text = which === "streamed" ? p.streamed : p.final ?? p.streamed;
        // Annotations index the final text: on streamed text that a rewrite changed they would point elsewhere.
        const annotations = p.final !== null && text !== p.final ? [] : p.annotations;
        out.push({ text, annotations });
      }
    }
    return out;
  }

  annotations() {
    return this.parts().flatMap((p) => p.annotations);
  }

  _text(which) {
    let out = "";
    for (const it of this.items.values()) {
      if (it.type !== "message") continue;
      for (const p of [...it.parts.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1])) {
        out += which === "streamed" ? p.streamed : p.final ?? p.streamed;
      }
    }
    return out;
  }

  /** What the live stream showed (deltas in order). */
  get streamedText() {
    return this._text("streamed");
  }

  /** The best final text: done values when present, else the streamed deltas. */
  get finalText() {
    return this._text("final");
  }

  /** True when a rewrite pass announced itself or the final text differs from what was streamed. */
  get rewritten() {
    const streamed = this.streamedText;
    return this.rewriteSeen || (this.terminal !== null && streamed !== "" && streamed !== this.finalText);
  }
}

/** Both error shapes: flat {code, message} and nested {error: {code, message}}. */
export function errorOf(ev) {
  const e = ev.error && typeof ev.error === "object" ? ev.error : ev;
  return { code: e.code ?? e.type ?? "error", message: e.message ?? "" };
}
