// The conformance checker's sequence and lifecycle rules, ported for the live timeline.
// Same violation codes as `respstream check` (DESIGN.md §3), so what the page highlights is what the CLI reports.
// Two stages: Sequencer (dedupe, bounded reorder window, gaps) then Rules (lifecycle, items, text) on the
// events the sequencer releases in order.
import { canonicalType } from "./event-types.js";

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

// Event-level fields that locate or carry content (envelope.missing_field), as in protocol/rules.py.
const PART = ["item_id", "output_index", "content_index"];
const ITEM = ["item_id", "output_index"];
const REQUIRED = {
  "response.created": ["response"], "response.queued": ["response"], "response.in_progress": ["response"],
  "response.completed": ["response"], "response.incomplete": ["response"], "response.failed": ["response"],
  "response.output_item.added": ["output_index", "item"], "response.output_item.done": ["output_index", "item"],
  "response.content_part.added": [...PART, "part"], "response.content_part.done": [...PART, "part"],
  "response.output_text.delta": [...PART, "delta"], "response.output_text.done": PART,
  "response.output_text.annotation.added": PART,
  "response.refusal.delta": [...PART, "delta"], "response.refusal.done": PART,
  "response.function_call_arguments.delta": [...ITEM, "delta"], "response.function_call_arguments.done": ITEM,
  "response.custom_tool_call_input.delta": [...ITEM, "delta"], "response.custom_tool_call_input.done": ITEM,
  "response.reasoning_summary_part.added": [...ITEM, "part"], "response.reasoning_summary_part.done": [...ITEM, "part"],
  "response.reasoning_summary_text.delta": [...ITEM, "delta"], "response.reasoning_summary_text.done": ITEM,
  "response.reasoning_text.delta": [...PART, "delta"], "response.reasoning_text.done": PART,
  "response.code_interpreter_call_code.delta": [...ITEM, "delta"],
  "response.mcp_call_arguments.delta": [...ITEM, "delta"],
  "response.shell_call_command.added": ["output_index"], "response.shell_call_command.delta": ["output_index", "delta"],
  "response.shell_call_command.done": ["output_index"],
  "response.shell_call_output_content.delta": [...ITEM, "delta"],
  "response.audio.delta": ["delta"], "response.audio.transcript.delta": ["delta"],
};
const HOSTED_STATUS = /^response\.(web_search_call|file_search_call|code_interpreter_call|image_generation_call|mcp_list_tools|mcp_call)\.\w+$/;

// What an event does to the life of its item or part (spec §4; the same roles as protocol/rules.py).
const ROLES = {
  "response.output_item.added": "item.added", "response.output_item.done": "item.done",
  "response.content_part.added": "part.added", "response.content_part.done": "part.close",
  "response.output_text.delta": "part", "response.output_text.annotation.added": "part",
  "response.output_text.done": "part.done", "response.refusal.delta": "part", "response.refusal.done": "part.done",
  "response.reasoning_text.delta": "part", "response.reasoning_text.done": "part.done",
  "response.reasoning_summary_part.added": "summary.added", "response.reasoning_summary_text.delta": "summary",
  "response.reasoning_summary_text.done": "summary.done", "response.reasoning_summary_part.done": "summary.close",
};

function requiredFields(type) {
  if (REQUIRED[type]) return REQUIRED[type];
  if (HOSTED_STATUS.test(type) || type === "response.code_interpreter_call_code.done"
    || type === "response.mcp_call_arguments.done" || type === "response.shell_call_output_content.done") return ITEM;
  return null;
}

function roleOf(type) {
  if (ROLES[type]) return ROLES[type];
  const req = requiredFields(type);
  if (req && (req.includes("item_id") || req[0] === "output_index")) return "item";
  return null;
}

// Events whose value must equal their deltas joined: done type -> [delta type, value field].
const DONE_VALUES = {
  "response.output_text.done": ["response.output_text.delta", "text"],
  "response.refusal.done": ["response.refusal.delta", "refusal"],
  "response.function_call_arguments.done": ["response.function_call_arguments.delta", "arguments"],
};

// Item and part states. IMPLICIT: a message opened by content_part.added alone (the seed's flow).
// RESUMED: first seen after a resume point, so its earlier events are not ours to check.
const OPEN = 1;
const IMPLICIT = 2;
const DONE = 3;
const RESUMED = 4;
const PART_OPEN = 1;
const TEXT_DONE = 2;
const PART_DONE = 3;

/** Lifecycle, envelope, item and text rules over events in sequence order (port of protocol/rules.py). */
export class Rules {
  /**
   * @param {{expectCreated?: boolean, dialect?: string|null}} options  dialect "platform" (event: message)
   *   tolerates deltas located by indices alone, as the seed documents them.
   */
  constructor({ expectCreated = true, dialect = null } = {}) {
    this.expectCreated = expectCreated;
    this.dialect = dialect;
    this.terminal = null;
    this.seenAny = false;
    this.lastError = false;
    this.rewrite = false;
    this.reported = new Set();
    this.items = new Map(); // output_index -> state
    this.ids = new Map(); // output_index -> item id
    this.parts = new Map(); // "oi|key" -> state
    this.streamed = new Map(); // "oi|key" -> deltas joined
    this.once = new Set();
    this.lastSeq = null;
  }

  /** Check one event (already in order); returns a list of violations. */
  check(ev) {
    const out = [];
    const seq = Number.isInteger(ev.sequence_number) ? ev.sequence_number : null;
    if (seq !== null) this.lastSeq = seq;
    const type = typeof ev.type === "string" ? canonicalType(ev.type) : "";
    if (!type) out.push(v("envelope.missing_type", seq, "an event has no string `type`"));
    const req = requiredFields(type);
    if (req) this._fields(ev, req, seq, out);
    this._lifecycle(ev, type, seq, out);
    const role = roleOf(type);
    if (role) this._itemRule(ev, type, role, seq, out);
    this._stream(ev, type);
    if (DONE_VALUES[type] && !this.rewrite) this._doneValue(ev, type, seq, out);
    return out;
  }

  /** End of stream: the stream must have had a terminal event. */
  finish() {
    if (this.terminal !== null) return [];
    return [v("lifecycle.no_terminal", this.lastSeq,
      "the stream ended without response.completed, response.incomplete, response.failed or error")];
  }

  _fields(ev, req, seq, out) {
    for (const name of req) {
      if ((ev[name] !== undefined && ev[name] !== null) || this.reported.has(name)) continue;
      if (name === "item_id" && this.dialect === "platform" && Number.isInteger(ev.output_index)
        && (!req.includes("content_index") || ev.content_index != null)) continue; // the seed documents deltas located by indices alone
      this.reported.add(name);
      out.push(v("envelope.missing_field", seq, `\`${name}\` is missing on ${ev.type}`));
    }
  }

  _lifecycle(ev, type, seq, out) {
    const first = !this.seenAny;
    this.seenAny = true;
    if (type === "response.created") {
      if (!first) out.push(v("lifecycle.created_not_first", seq, "response.created is not the first event"));
    } else if (first && this.expectCreated) {
      out.push(v("lifecycle.created_not_first", seq, `the first event is ${type || "typeless"}, not response.created`));
    }
    if (type === "response.rewrite.in_progress") this.rewrite = true;
    const isTerminal = TERMINAL.has(type);
    if (this.terminal !== null) {
      if (this.lastError && type === "response.failed") {
        this.lastError = false; // `error` + `response.failed`: one terminal
        return;
      }
      this.lastError = false;
      out.push(v("lifecycle.terminal_not_last", seq, `${type || "an event"} after the terminal ${this.terminal}`));
      if (isTerminal) {
        out.push(v("lifecycle.multiple_terminal", seq, `a second terminal event (${type}) after ${this.terminal}`));
      }
      return;
    }
    if (!isTerminal) return;
    this.terminal = type;
    this.lastError = type === "error";
    if (type === "response.completed") {
      for (const [oi, state] of [...this.items.entries()].sort((a, b) => a[0] - b[0])) {
        const openPart = [...this.parts.entries()].some(([k, s]) => k.startsWith(`${oi}|`) && s === PART_OPEN);
        if (state === OPEN || state === RESUMED || (state === IMPLICIT && openPart)) {
          out.push(v("item.not_done", seq, `output item ${oi} is still open at response.completed`));
        }
      }
    }
  }

  _locate(ev, role) {
    if (Number.isInteger(ev.output_index)) return ev.output_index;
    const id = role === "item.added" || role === "item.done" ? ev.item && ev.item.id : ev.item_id;
    for (const [oi, known] of this.ids) if (known === id) return oi;
    if (role === "item.added") return Math.max(-1, ...this.items.keys()) + 1;
    return null;
  }

  _itemRule(ev, type, role, seq, out) {
    const oi = this._locate(ev, role);
    if (role === "item.added") {
      const iid = ev.item && typeof ev.item.id === "string" ? ev.item.id : null;
      if (this.items.has(oi) || (iid !== null && [...this.ids.values()].includes(iid))) {
        out.push(v("item.duplicate_added", seq, `output item ${oi} was already added`));
      }
      this.items.set(oi, OPEN);
      if (iid !== null) this.ids.set(oi, iid);
      return;
    }
    if (oi === null) return; // nothing to locate it by; envelope.missing_field said so
    let itemId = typeof ev.item_id === "string" ? ev.item_id : null;
    if (role === "item.done") itemId = ev.item && typeof ev.item.id === "string" ? ev.item.id : null;
    this._indexRule(oi, itemId, seq, out);
    const state = this.items.get(oi);
    if (role === "item.done") {
      if (state === undefined) {
        out.push(v("item.done_without_added", seq, `output item ${oi} is done but was never added`));
      } else if (state === DONE) {
        out.push(v("item.delta_after_done", seq, `output item ${oi} is done a second time`));
      }
      this.items.set(oi, DONE);
      if (itemId !== null && !this.ids.has(oi)) this.ids.set(oi, itemId);
      return;
    }
    if (state === DONE) {
      out.push(v("item.delta_after_done", seq, `${type} for output item ${oi} after its output_item.done`));
      return;
    }
    if (role === "item") {
      if (state === undefined) this._beforeAdded(oi, type, seq, out);
      return;
    }
    const summary = role.startsWith("summary");
    const key = `${oi}|${summary ? `s${ev.summary_index ?? 0}` : ev.content_index ?? 0}`;
    const opening = role === "summary.added" || role === "part.added";
    let part = this.parts.get(key);
    if (opening) {
      if (state === undefined) {
        if (role === "part.added") this.items.set(oi, IMPLICIT);
        else this._beforeAdded(oi, type, seq, out);
      }
      this.parts.set(key, PART_OPEN);
      return;
    }
    if (state === undefined && part === undefined) {
      this._beforeAdded(oi, type, seq, out);
      part = PART_OPEN;
      this.parts.set(key, part);
    } else if (part === undefined) {
      part = PART_OPEN; // inside an added item the part's own added is optional
      this.parts.set(key, part);
    }
    const inText = ["part", "part.done", "summary", "summary.done"].includes(role);
    if (part === PART_DONE || (part === TEXT_DONE && inText)) {
      out.push(v("item.delta_after_done", seq, `${type} for output item ${oi} after that part's done`));
      return;
    }
    if (role === "part.done" || role === "summary.done") this.parts.set(key, TEXT_DONE);
    else if (role === "part.close" || role === "summary.close") this.parts.set(key, PART_DONE);
  }

  _beforeAdded(oi, type, seq, out) {
    if (!this.expectCreated) {
      this.items.set(oi, RESUMED);
      return;
    }
    this.items.set(oi, OPEN); // report once per item, then treat it as open
    out.push(v("item.delta_before_added", seq, `${type} for output item ${oi} before its output_item.added`));
  }

  _indexRule(oi, itemId, seq, out) {
    if (itemId === null) return;
    const known = this.ids.get(oi);
    const key = `${oi}|${itemId}`;
    if (known !== undefined && known !== itemId && !this.once.has(key)) {
      this.once.add(key);
      out.push(v("item.index_mismatch", seq, `item_id '${itemId}' but output item ${oi} is '${known}'`));
    }
  }

  _valueKey(ev, type) {
    const oi = this._locate(ev, "");
    if (oi === null) return null;
    return type.startsWith("response.function_call_arguments") ? `${oi}|arguments` : `${oi}|${ev.content_index ?? 0}`;
  }

  _stream(ev, type) {
    if (typeof ev.delta !== "string") return;
    if (!(type === "response.output_text.delta" || type === "response.refusal.delta"
      || type === "response.function_call_arguments.delta")) return;
    const key = this._valueKey(ev, type);
    if (key !== null) this.streamed.set(`${type}|${key}`, (this.streamed.get(`${type}|${key}`) ?? "") + ev.delta);
  }

  _doneValue(ev, type, seq, out) {
    const [deltaType, field] = DONE_VALUES[type];
    const value = ev[field];
    if (typeof value !== "string") return;
    const key = this._valueKey(ev, type);
    if (key === null || this.items.get(this._locate(ev, "")) === RESUMED) return;
    const streamed = this.streamed.get(`${deltaType}|${key}`);
    if (streamed !== undefined && streamed !== value) {
      out.push(v("text.done_mismatch", seq,
        `${type} ${field} differs from its deltas joined (${value.length} vs ${streamed.length} characters)`));
    }
  }
}

function v(code, sequenceNumber, message) {
  return { code, sequence_number: sequenceNumber, message };
}
