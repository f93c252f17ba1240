// The event timeline as a debugger: one row per arrival, violations attached to their rows, a family filter and
// the raw JSON of any row on click. It is a virtual list: every event is kept as a small record, but only the rows
// in (and just around) the visible window exist in the DOM, each of a fixed height. However long the stream, a
// frame lays out and paints a few dozen rows, so a 20,000-event answer keeps the page responsive.
import { canonicalType, eventFamily } from "./event-types.js";
import { highlight } from "./highlight.js";

const $ = (id) => document.getElementById(id);
const MAX_KEPT = 1_000_000; // records kept (memory bound); Export .sse is bounded separately
const OVERSCAN = 12; // rows rendered above and below the visible window
const TERMINALISH = /^(response\.(completed|incomplete|failed)|error)$/;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function preview(value, max) {
  const s = typeof value === "string" ? value : JSON.stringify(value);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function keyFields(ev) {
  const parts = [];
  if (ev.output_index !== undefined) parts.push(`#${ev.output_index}`);
  if (ev.item && ev.item.type) parts.push(ev.item.type + (ev.item.name ? ` ${ev.item.name}` : ""));
  if (typeof ev.delta === "string") parts.push(JSON.stringify(preview(ev.delta, 80)));
  if (typeof ev.text === "string") parts.push(`text ${JSON.stringify(preview(ev.text, 60))}`);
  if (typeof ev.arguments === "string") parts.push(`args ${preview(ev.arguments, 60)}`);
  if (ev.model_id) parts.push(`${ev.model_id} · ${ev.category ?? ""}`);
  if (ev.response && ev.response.status) parts.push(`status ${ev.response.status}`);
  if (ev.annotation && ev.annotation.url) parts.push(preview(ev.annotation.url, 80));
  if (canonicalType(ev.type) === "error") {
    const e = ev.error && typeof ev.error === "object" ? ev.error : ev;
    parts.push(`${e.code ?? ""} ${e.message ?? ""}`);
  }
  return preview(parts.join("  "), 140);
}

/** One timeline record: what a row shows, plus the event's data as it arrived. */
class Entry {
  constructor(index, ev, ms, note, raw) {
    this.index = index;
    this.seq = Number.isInteger(ev.sequence_number) ? ev.sequence_number : "";
    this.name = ev.type ?? "(no type)";
    this.type = canonicalType(ev.type) ?? "";
    this.family = eventFamily(ev.type);
    this.ms = ms;
    this.fields = note ?? keyFields(ev);
    this.raw = raw ?? JSON.stringify(ev);
    this.classes = new Set(TERMINALISH.test(this.type) ? ["terminal"] : []);
    this.codes = [];
    this.messages = [];
  }

  get classList() {
    // the same calls a DOM row takes (app.js marks dropped rows and resume markers)
    return { add: (name) => this.classes.add(name) };
  }

  get dataset() {
    return { seq: String(this.seq), index: String(this.index) };
  }
}

export class Timeline {
  constructor() {
    this.scroller = $("timeline-scroll");
    this.body = $("timeline-body");
    this.scroller.addEventListener("scroll", () => this._paint(), { passive: true });
    this.rowHeight = 0;
    this.reset();
  }

  reset() {
    this.rows = new Map(); // sequence_number -> entry (first arrival)
    this.entries = [];
    this.shown = []; // entries passing the filter, in order
    this.filter = this.body.dataset.filter || "all";
    this.count = 0;
    this.violations = [];
    this.selected = null;
    this.painted = new Map(); // entry -> its row in the DOM and the entry version it shows
    this.dirty = true;
    this.pendingViolations = document.createDocumentFragment();
    $("inspector").hidden = true;
    this.body.replaceChildren();
    $("violations").replaceChildren();
    $("violation-count").textContent = "0";
    $("event-count").textContent = "0";
    $("framing").textContent = "";
    $("timeline-panel").dataset.ok = "true";
    this.repairReport = null;
    $("repairs").hidden = true;
    $("repairs").replaceChildren();
  }

  /**
   * The gateway's repair report for this response (`respstream:repairs` of its Response: what it repaired in a
   * native Responses upstream's stream, violation code -> count): a badge with one chip per code. Text only
   * (textContent), so a code can never be markup; counts that are not whole numbers are not shown.
   */
  repairs(report) {
    if (!report || typeof report !== "object" || Array.isArray(report)) return;
    const codes = Object.entries(report).filter(([, n]) => Number.isInteger(n) && n > 0);
    this.repairReport = Object.fromEntries(codes);
    const badge = $("repairs");
    const total = codes.reduce((sum, [, n]) => sum + n, 0);
    badge.replaceChildren(el("span", "rlabel", codes.length ? `repaired ${total}` : "repaired 0"));
    for (const [code, n] of codes) {
      const chip = el("span", "rcode");
      chip.dataset.code = code;
      chip.append(el("code", null, code), el("span", "rcount", `×${n}`));
      badge.append(chip);
    }
    badge.title = codes.length
      ? `The gateway repaired its upstream's stream: ${codes.map(([c, n]) => `${c} ×${n}`).join(", ")}`
      : "The gateway's upstream sent a clean stream: nothing to repair";
    badge.hidden = false;
  }

  framing(eventName) {
    $("framing").textContent = eventName === "message" ? "event: message" : "event: <type>";
  }

  _passes(entry) {
    if (this.filter === "all") return true;
    if (this.filter === "violation") return entry.codes.length > 0;
    return entry.family === this.filter;
  }

  /** Add a record for an arriving event (`raw`: its data as it came); returns it (null past the memory cap). */
  add(ev, ms, note, raw) {
    this.count += 1;
    if (this.entries.length >= MAX_KEPT) return null;
    const entry = new Entry(this.entries.length, ev, ms, note, raw);
    this.entries.push(entry);
    if (this._passes(entry)) this.shown.push(entry);
    if (entry.seq !== "" && !this.rows.has(entry.seq)) this.rows.set(entry.seq, entry);
    this.dirty = true;
    return entry;
  }

  /** Attach violations to a record (or to the record of their sequence number). */
  flag(violations, entry) {
    for (const vio of violations) {
      this.violations.push(vio);
      const target = entry ?? this.rows.get(vio.sequence_number) ?? null;
      if (target) {
        target.classes.add("violation");
        if (!target.codes.includes(vio.code)) target.codes.push(vio.code);
        target.messages.push(vio.message);
        target.version += 1;
        if (this.filter === "violation" && target.codes.length === 1) this.setFilter("violation");
        this.dirty = true;
      }
      const li = el("li", "violation-item");
      li.dataset.seq = String(vio.sequence_number ?? "");
      li.append(el("code", null, vio.code), el("span", "vseq", vio.sequence_number ?? "–"),
        el("span", "vmsg", vio.message));
      this.pendingViolations.append(li);
    }
  }

  setFilter(filter) {
    this.filter = filter;
    this.body.dataset.filter = filter;
    this.shown = this.entries.filter((e) => this._passes(e));
    this.dirty = true;
    this._paint();
  }

  /** Once per frame: counters, new violations, and the visible rows. */
  flush() {
    $("event-count").textContent = String(this.count);
    $("violation-count").textContent = String(this.violations.length);
    $("timeline-panel").dataset.ok = String(this.violations.length === 0);
    if (this.pendingViolations.childNodes.length) $("violations").append(this.pendingViolations);
    if (this.dirty) this._paint();
  }

  _measure() {
    if (this.rowHeight) return this.rowHeight;
    const probe = this._row(new Entry(0, { type: "probe" }, 0, "x", ""));
    this.body.append(probe);
    this.rowHeight = probe.getBoundingClientRect().height || 36;
    probe.remove();
    return this.rowHeight;
  }

  /** Render the rows of the visible window (plus overscan); keep following the end when it was at the end. */
  _paint() {
    this.dirty = false;
    const h = this._measure();
    const wrap = this.scroller;
    const header = wrap.firstElementChild ? wrap.firstElementChild.getBoundingClientRect().height : 0;
    const total = this.shown.length * h;
    const atEnd = wrap.scrollTop + wrap.clientHeight >= this.body.offsetHeight + header - h * 2;
    this.body.style.height = `${total}px`;
    if (atEnd) wrap.scrollTop = total + header;
    const top = Math.max(0, wrap.scrollTop - header);
    const first = Math.max(0, Math.floor(top / h) - OVERSCAN);
    const last = Math.min(this.shown.length, Math.ceil((top + wrap.clientHeight) / h) + OVERSCAN);
    // Rows still in the window are kept as they are (same node, not even detached): a row rebuilt under the pointer
    // between mousedown and mouseup would turn a click on it into a click on the list, and lose it.
    const painted = new Map();
    const rows = [];
    for (let i = first; i < last; i += 1) {
      const entry = this.shown[i];
      const kept = this.painted.get(entry);
      const row = kept && kept.version === entry.version ? kept.row : this._row(entry);
      const top = `${i * h}px`;
      if (row.style.top !== top) row.style.top = top;
      painted.set(entry, { row, version: entry.version });
      rows.push(row);
    }
    const keep = new Set(rows);
    for (const node of [...this.body.children]) if (!keep.has(node)) node.remove();
    let cursor = this.body.firstElementChild;
    for (const row of rows) {
      if (row === cursor) cursor = cursor.nextElementSibling;
      else this.body.insertBefore(row, cursor);
    }
    this.painted = painted;
  }

  _row(entry) {
    const row = el("li", "ev");
    for (const name of entry.classes) row.classList.add(name);
    if (this.selected === entry) row.classList.add("selected");
    row.dataset.seq = String(entry.seq);
    row.dataset.type = entry.type;
    row.dataset.family = entry.family;
    row.dataset.index = String(entry.index);
    if (entry.codes.length) {
      row.dataset.codes = entry.codes.join(" ");
      row.title = entry.messages.join("\n");
    }
    const cell = el("div", "event");
    const type = el("div", "type");
    type.append(el("span", "tname", entry.name));
    for (const code of entry.codes) type.append(el("span", "vcode", code));
    cell.append(type, el("div", "fields", entry.fields));
    row.append(el("span", "seq", entry.seq), el("span", "ms", `+${Math.round(entry.ms)}`), cell);
    return row;
  }

  /** The record a row (or a sequence number) stands for. */
  entryOf(rowOrSeq) {
    if (typeof rowOrSeq === "number") return this.rows.get(rowOrSeq) ?? null;
    return this.entries[Number(rowOrSeq.dataset.index)] ?? null;
  }

  /** Bring a record's row into view. */
  reveal(entry) {
    const at = this.shown.indexOf(entry);
    if (at >= 0) this.scroller.scrollTop = at * this._measure();
    this._paint();
  }

  /** Show the raw JSON of a record's event. */
  inspect(entry) {
    if (!entry) return;
    let pretty = entry.raw;
    try {
      pretty = JSON.stringify(JSON.parse(entry.raw), null, 2);
    } catch {
      // not JSON: show it as it came
    }
    this.selected = entry;
    for (const r of this.body.querySelectorAll("li.selected")) r.classList.remove("selected");
    const row = this.body.querySelector(`li[data-index="${entry.index}"]`);
    if (row) row.classList.add("selected");
    $("inspector-seq").textContent = entry.seq !== "" ? `#${entry.seq}` : "(no sequence_number)";
    $("inspector-json").innerHTML = highlight(pretty, "json");
    $("inspector-json").dataset.raw = pretty;
    $("inspector").hidden = false;
  }

  /** Every record as plain data (for tests and debugging; not called per frame). */
  snapshot() {
    return this.entries.map((e) => ({ seq: e.seq, type: e.name, codes: [...e.codes], classes: [...e.classes] }));
  }
}
