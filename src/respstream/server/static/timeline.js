// The event timeline as a debugger: one row per arrival (built in a fragment and attached once per animation
// frame, so a burst of events costs no layout per event), violations attached to their rows, a family filter
// (pure CSS on a data attribute) and the raw JSON of any row on click.
import { canonicalType, eventFamily } from "./event-types.js";
import { highlight } from "./highlight.js";

const $ = (id) => document.getElementById(id);
const MAX_ROWS = 5000; // rows kept in the DOM; Export .sse has every event
const MAX_KEPT = MAX_ROWS; // raw events kept for the inspector (one per row)
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

/** The live event timeline: one row per arrival, violations attached to the rows they concern. */
export class Timeline {
  constructor() {
    this.rows = new Map(); // sequence_number -> row (first arrival)
    this.count = 0;
    this.violations = [];
    this.raw = [];
    this.pending = document.createDocumentFragment();
    this.pendingViolations = document.createDocumentFragment();
  }

  reset() {
    this.rows.clear();
    this.count = 0;
    this.violations = [];
    this.raw = [];
    this.pending = document.createDocumentFragment();
    this.pendingViolations = document.createDocumentFragment();
    $("inspector").hidden = true;
    $("timeline-body").replaceChildren();
    $("violations").replaceChildren();
    $("violation-count").textContent = "0";
    $("event-count").textContent = "0";
    $("framing").textContent = "";
    $("timeline-panel").dataset.ok = "true";
  }

  framing(eventName) {
    $("framing").textContent = eventName === "message" ? "event: message" : "event: <type>";
  }

  /** Add a row for an arriving event (`raw`: its data as it came); returns the row, or null past the cap. */
  add(ev, ms, note, raw) {
    this.count += 1;
    if (this.count > MAX_ROWS) {
      if (this.count === MAX_ROWS + 1) {
        const more = el("tr", "ev more");
        more.append(el("td", "seq", "…"), el("td", "ms", ""),
          el("td", "event", `only the first ${MAX_ROWS} events are listed here; Export .sse has all of them`));
        this.pending.append(more);
      }
      return null;
    }
    const index = this.raw.length;
    if (index < MAX_KEPT) this.raw.push(raw ?? JSON.stringify(ev));
    const row = el("tr", "ev");
    const seq = Number.isInteger(ev.sequence_number) ? ev.sequence_number : "";
    row.dataset.seq = String(seq);
    row.dataset.type = canonicalType(ev.type) ?? "";
    row.dataset.family = eventFamily(ev.type);
    row.dataset.index = String(index);
    // One cell holds the type (plus violation badges) over its key fields: readable in a narrow panel.
    const cell = el("td", "event");
    const type = el("div", "type");
    type.append(el("span", "tname", ev.type ?? "(no type)"));
    const fields = note ?? keyFields(ev);
    cell.append(type);
    if (fields) cell.append(el("div", "fields", fields));
    if (TERMINALISH.test(canonicalType(ev.type) ?? "")) row.classList.add("terminal");
    row.append(el("td", "seq", seq), el("td", "ms", `+${Math.round(ms)}`), cell);
    this.pending.append(row);
    if (seq !== "" && !this.rows.has(seq)) this.rows.set(seq, row);
    return row;
  }

  /** Attach violations to a row (or to the row of their sequence number). */
  flag(violations, row) {
    for (const vio of violations) {
      this.violations.push(vio);
      const target = row ?? this.rows.get(vio.sequence_number) ?? null;
      if (target) {
        target.classList.add("violation");
        const codes = new Set((target.dataset.codes || "").split(" ").filter(Boolean));
        codes.add(vio.code);
        target.dataset.codes = [...codes].join(" ");
        const badge = el("span", "vcode", vio.code);
        badge.title = vio.message;
        target.querySelector(".type").append(badge);
      }
      const li = el("li", "violation-item");
      li.dataset.seq = String(vio.sequence_number ?? "");
      li.append(el("code", null, vio.code), el("span", "vseq", vio.sequence_number ?? "–"),
        el("span", "vmsg", vio.message));
      this.pendingViolations.append(li);
    }
  }

  /** Attach what was added since the last frame (one layout per frame, not per event). */
  flush() {
    $("event-count").textContent = String(this.count);
    $("violation-count").textContent = String(this.violations.length);
    $("timeline-panel").dataset.ok = String(this.violations.length === 0);
    if (this.pendingViolations.childNodes.length) $("violations").append(this.pendingViolations);
    if (!this.pending.childNodes.length) return;
    const wrap = $("timeline-scroll");
    const stick = wrap.scrollHeight - wrap.scrollTop - wrap.clientHeight < 80;
    $("timeline-body").append(this.pending);
    if (stick) wrap.scrollTop = wrap.scrollHeight;
  }

  /** Show the raw JSON of a row's event. */
  inspect(row) {
    const raw = this.raw[Number(row.dataset.index)];
    if (raw === undefined) return;
    let pretty = raw;
    try {
      pretty = JSON.stringify(JSON.parse(raw), null, 2);
    } catch {
      // not JSON: show it as it came
    }
    for (const r of $("timeline-body").querySelectorAll("tr.selected")) r.classList.remove("selected");
    row.classList.add("selected");
    $("inspector-seq").textContent = row.dataset.seq ? `#${row.dataset.seq}` : "(no sequence_number)";
    $("inspector-json").innerHTML = highlight(pretty, "json");
    $("inspector-json").dataset.raw = pretty;
    $("inspector").hidden = false;
  }
}
