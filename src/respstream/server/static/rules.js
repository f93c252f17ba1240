// The conformance checker's sequence and lifecycle rules, ported for the live timeline.
// Same violation codes as `respstream check` (DESIGN.md §3), so what the page highlights is what the CLI reports.
// Two stages: Sequencer (dedupe, bounded reorder window, gaps) then Rules (lifecycle, items, text) on the
// events the sequencer releases in order.

export const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"]);

/** Restores sequence_number order within a window; reports sequence.* violations. */
export class Sequencer {
  constructor({ startingAfter = -1, window = 64 } = {}) {
    this.expected = startingAfter + 1;
    this.window = window;
    this.pending = new Map();
    this.declaredGaps = new Set(); // numbers already reported missing: a late straggler is out_of_order
    this.missingReported = false;
  }

  /** Highest number delivered with nothing missing before it (what a resume passes as starting_after). */
  get lastContiguous() {
    return this.expected - 1;
  }

  /** Push one decoded event. Returns {ready: events now in order, violations, dropped: bool}. */
  push(ev) {
    const ready = [];
    const violations = [];
    const seq = ev.sequence_number;
    if (!Number.isInteger(seq)) {
      if (!this.missingReported) {
        this.missingReported = true;
        violations.push(v("sequence.missing", null, "events without sequence_number"));
      }
      ready.push(ev);
      return { ready, violations, dropped: false };
    }
    if (this.declaredGaps.has(seq)) {
      this.declaredGaps.delete(seq);
      violations.push(v("sequence.out_of_order", seq, `event ${seq} arrived after its gap was reported; dropped`));
      return { ready, violations, dropped: true };
    }
    if (seq < this.expected || this.pending.has(seq)) {
      violations.push(v("sequence.duplicate", seq, `sequence_number ${seq} already seen; dropped`));
      return { ready, violations, dropped: true };
    }
    if (seq > this.expected) {
      this.pending.set(seq, ev);
      if (this.pending.size > this.window) this._declareGap(ready, violations);
      return { ready, violations, dropped: false };
    }
    if (this.pending.size > 0) {
      violations.push(v("sequence.out_of_order", seq, `event ${seq} arrived after later events; reordered`));
    }
    ready.push(ev);
    this.expected += 1;
    this._drain(ready);
    return { ready, violations, dropped: false };
  }

  /** End of stream: report every still-missing range and release what waited. */
  finish() {
    const ready = [];
    const violations = [];
    while (this.pending.size > 0) this._declareGap(ready, violations);
    return { ready, violations };
  }

  _declareGap(ready, violations) {
    const next = Math.min(...this.pending.keys());
    const first = this.expected;
    for (let n = first; n < next; n += 1) this.declaredGaps.add(n);
    const range = next - 1 === first ? `${first}` : `${first}..${next - 1}`;
    violations.push(v("sequence.gap", first, `sequence_number ${range} missing`));
    this.expected = next;
    this._drain(ready);
  }

  _drain(ready) {
    while (this.pending.has(this.expected)) {
      ready.push(this.pending.get(this.expected));
      this.pending.delete(this.expected);
      this.expected += 1;
    }
  }
}

// Event-level fields that locate or carry content; reported once per field name (envelope.missing_field).
const REQUIRED_FIELDS = [
  [/^response\.output_item\.(added|done)$/, ["output_index", "item"]],
  [/^response\.content_part\.(added|done)$/, ["item_id", "output_index", "content_index", "part"]],
  [/^response\.(output_text|refusal|reasoning_text)\.delta$/, ["item_id", "output_index", "content_index", "delta"]],
  [/^response\.(output_text|refusal|reasoning_text)\.done$/, ["item_id", "output_index", "content_index"]],
  [/\.delta$/, ["item_id", "output_index", "delta"]],
  [/^response\.(created|queued|in_progress|completed|incomplete|failed)$/, ["response"]],
];

// Events whose text must equal the concatenation of their deltas: done type -> [delta type, done field].
const DONE_TEXT = {
  "response.output_text.done": ["response.output_text.delta", "text"],
  "response.refusal.done": ["response.refusal.delta", "refusal"],
  "response.function_call_arguments.done": ["response.function_call_arguments.delta", "arguments"],
};

const PART_DONE = new Set([
  "response.content_part.done", "response.output_text.done", "response.refusal.done", "response.reasoning_text.done",
]);

/** Lifecycle, item and text rules over events in sequence order. */
export class Rules {
  constructor({ resumed = false } = {}) {
    this.count = 0;
    this.resumed = resumed;
    this.terminal = null; // type of the terminal seen
    this.lastType = null;
    this.items = new Map(); // output_index -> {id, state: "open"|"done"}
    this.parts = new Map(); // "oi:ci" -> "open"|"done"
    this.deltas = new Map(); // "deltaType:oi:ci" -> concatenated text
    this.rewrite = false;
    this.missingFields = new Set();
  }

  /** Check one event (already in order); returns a list of violations. */
  check(ev) {
    const out = [];
    const seq = Number.isInteger(ev.sequence_number) ? ev.sequence_number : null;
    const type = ev.type;
    this.count += 1;
    if (typeof type !== "string") {
      out.push(v("envelope.missing_type", seq, "event has no type"));
      return out;
    }
    if (this.count === 1 && !this.resumed && type !== "response.created") {
      out.push(v("lifecycle.created_not_first", seq, `first event is ${type}, not response.created`));
    }
    if (this.terminal !== null) {
      const pairedFailure = this.terminal === "error" && this.lastType === "error" && type === "response.failed";
      if (!pairedFailure) {
        const code = TERMINAL.has(type) ? "lifecycle.multiple_terminal" : "lifecycle.terminal_not_last";
        out.push(v(code, seq, `${type} after terminal ${this.terminal}`));
      }
    }
    for (const [pattern, fields] of REQUIRED_FIELDS) {
      if (!pattern.test(type)) continue;
      for (const f of fields) {
        if (ev[f] === undefined && !this.missingFields.has(f)) {
          this.missingFields.add(f);
          out.push(v("envelope.missing_field", seq, `${type} has no ${f}`));
        }
      }
      break;
    }
    if (type === "response.rewrite.in_progress") this.rewrite = true;
    this._items(ev, type, seq, out);
    if (TERMINAL.has(type)) {
      if (type === "response.completed") {
        for (const [oi, item] of this.items) {
          if (item.state === "open") out.push(v("item.not_done", seq, `item ${oi} still open at the terminal`));
        }
      }
      if (this.terminal === null) this.terminal = type;
    }
    this.lastType = type;
    return out;
  }

  /** End of stream. */
  finish(lastSeq) {
    if (this.terminal === null) return [v("lifecycle.no_terminal", lastSeq, "stream ended without a terminal event")];
    return [];
  }

  _items(ev, type, seq, out) {
    const oi = ev.output_index;
    if (type === "response.output_item.added") {
      const prev = this.items.get(oi);
      if (prev) out.push(v("item.duplicate_added", seq, `item ${oi} added twice`));
      else this.items.set(oi, { id: ev.item && ev.item.id, state: "open" });
      return;
    }
    if (type === "response.output_item.done") {
      const item = this.items.get(oi);
      if (!item) out.push(v("item.done_without_added", seq, `item ${oi} done but never added`));
      else if (item.state === "done") out.push(v("item.delta_after_done", seq, `item ${oi} done twice`));
      else item.state = "done";
      if (!item) this.items.set(oi, { id: ev.item && ev.item.id, state: "done" });
      return;
    }
    if (oi === undefined && ev.item_id === undefined) return; // response-level event
    if (!type.startsWith("response.") || TERMINAL.has(type)) return;
    let item = this.items.get(oi);
    if (item === undefined && ev.item_id !== undefined) {
      for (const candidate of this.items.values()) if (candidate.id === ev.item_id) item = candidate;
    }
    const partKey = `${oi}:${ev.content_index ?? ev.summary_index ?? ""}`;
    if (type === "response.content_part.added") this.parts.set(partKey, "open");
    const part = this.parts.get(partKey);
    if (!item && part === undefined) {
      out.push(v("item.delta_before_added", seq, `${type} for item ${oi} before it was added`));
    }
    if (item && item.id && ev.item_id && item.id !== ev.item_id) {
      out.push(v("item.index_mismatch", seq, `item_id ${ev.item_id} is not item ${oi} (${item.id})`));
    }
    if (item && item.state === "done") {
      out.push(v("item.delta_after_done", seq, `${type} after item ${oi} was done`));
    } else if (part === "done" && type !== "response.content_part.done") {
      out.push(v("item.delta_after_done", seq, `${type} after part ${partKey} was done`));
    }
    if (type.endsWith(".delta") && typeof ev.delta === "string") {
      const key = `${type}:${partKey}`;
      this.deltas.set(key, (this.deltas.get(key) ?? "") + ev.delta);
    }
    const done = DONE_TEXT[type];
    if (done) {
      const streamed = this.deltas.get(`${done[0]}:${partKey}`);
      const final = ev[done[1]];
      if (streamed !== undefined && typeof final === "string" && final !== streamed && !this.rewrite) {
        out.push(v("text.done_mismatch", seq, `${type} text differs from its deltas`));
      }
    }
    if (PART_DONE.has(type)) this.parts.set(partKey, "done");
  }
}

function v(code, sequenceNumber, message) {
  return { code, sequence_number: sequenceNumber, message };
}
