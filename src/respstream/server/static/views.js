// DOM rendering. Model output only ever reaches the page through textContent or renderMarkdown (escaped).
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function preview(value, max = 600) {
  const s = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

function prettyArgs(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args; // still streaming in: show the raw partial JSON
  }
}

/** Renders a ResponseState into the result panel. */
export class ResultView {
  constructor() {
    this.showStreamed = false;
    this.toolCards = new Map();
    this._lastAnswer = null;
  }

  reset() {
    this.showStreamed = false;
    this.toolCards.clear();
    this._lastAnswer = null;
    $("tool-cards").replaceChildren();
    $("answer").replaceChildren();
  }

  render(state, extra) {
    $("status").textContent = extra.statusLabel ?? state.status;
    $("status").dataset.status = extra.statusLabel ?? state.status;
    $("response-id").textContent = state.id ?? "";
    this._routing(state);
    this._error(state, extra);
    this._rewrite(state);
    this._reasoning(state);
    this._tools(state);
    const text = this.showStreamed ? state.streamedText : state.finalText;
    if (text !== this._lastAnswer) {
      this._lastAnswer = text;
      $("answer").innerHTML = renderMarkdown(text); // escaped first inside renderMarkdown
    }
    $("answer").dataset.view = this.showStreamed ? "streamed" : "final";
    $("answer").classList.toggle("streaming", state.status === "streaming");
    $("answer-empty").hidden = text !== "" || state.status !== "idle";
    this._metrics(state, extra.now);
  }

  _routing(state) {
    const box = $("routing");
    if (!state.routing && !state.model) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    const r = state.routing || {};
    $("routing-model").textContent = r.model_id || state.model || "";
    $("routing-category").textContent = r.category || (state.routing ? "" : "pinned");
    $("routing-source").textContent = r.source || "";
    $("routing-source").hidden = !r.source;
    $("routing-reasoning").textContent = r.reasoning || "";
    $("routing-reasoning").hidden = !r.reasoning;
  }

  _error(state, extra) {
    const banner = $("error-banner");
    const err = extra.error || state.error;
    const show = Boolean(err) || ["failed", "error", "truncated", "incomplete", "cancelled"].includes(state.status);
    banner.hidden = !show;
    if (!show) return;
    let code = err ? err.code : state.status;
    let message = err ? err.message : "";
    if (!err && state.status === "incomplete") {
      code = "incomplete";
      message = state.incompleteDetails ? `reason: ${state.incompleteDetails.reason}` : "response incomplete";
    }
    banner.dataset.kind = state.status === "incomplete" ? "warning" : "error";
    $("error-title").textContent = {
      truncated: "Stream truncated", incomplete: "Response incomplete", cancelled: "Response cancelled",
    }[state.status] || "Response failed";
    $("error-code").textContent = code;
    $("error-message").textContent = message;
  }

  _rewrite(state) {
    const rewritten = state.rewritten;
    $("rewritten").hidden = !rewritten;
    $("toggle-streamed").textContent = this.showStreamed ? "Show final text" : "Show streamed text";
    $("toggle-streamed").setAttribute("aria-pressed", String(this.showStreamed));
  }

  _reasoning(state) {
    const text = state.reasoning();
    $("reasoning").hidden = !text;
    $("reasoning-text").textContent = text;
  }

  _tools(state) {
    const list = $("tool-cards");
    state.tools().forEach((it, i) => {
      let card = this.toolCards.get(i);
      if (!card) {
        card = el("details", "tool-card");
        card.open = true;
        const summary = el("summary");
        summary.append(el("span", "tool-icon", "ƒ"), el("span", "tool-name"), el("span", "tool-status"));
        const body = el("div", "tool-body");
        body.append(el("div", "tool-label", "Arguments"), el("pre", "tool-args"),
          el("div", "tool-label tool-output-label", "Output"), el("pre", "tool-output"));
        card.append(summary, body);
        list.append(card);
        this.toolCards.set(i, card);
      }
      card.dataset.status = it.status;
      card.querySelector(".tool-name").textContent = it.name || it.type;
      card.querySelector(".tool-status").textContent = it.status;
      card.querySelector(".tool-args").textContent = prettyArgs(it.args || "");
      const hasOutput = it.output !== null && it.output !== undefined;
      card.querySelector(".tool-output-label").hidden = !hasOutput;
      card.querySelector(".tool-output").hidden = !hasOutput;
      card.querySelector(".tool-output").textContent = hasOutput ? preview(it.output) : "";
    });
  }

  _metrics(state, now) {
    const u = state.usage;
    $("usage").textContent = u
      ? `${u.input_tokens ?? "?"} in · ${u.output_tokens ?? "?"} out · ${u.total_tokens ?? "?"} total tokens`
      : "—";
    const ttft = state.firstTokenAt ? state.firstTokenAt - state.startedAt : null;
    $("ttft").textContent = ttft === null ? "—" : `${Math.round(ttft)} ms`;
    const end = state.endedAt || now;
    const secs = state.firstTokenAt ? (end - state.firstTokenAt) / 1000 : 0;
    const tokens = u && u.output_tokens ? u.output_tokens : state.deltaCount;
    $("tps").textContent = secs > 0.05 && tokens ? `${(tokens / secs).toFixed(1)} tok/s` : "—";
    $("elapsed").textContent = state.startedAt ? `${((end - state.startedAt) / 1000).toFixed(2)} s` : "—";
    $("delta-count").textContent = String(state.deltaCount);
  }
}

function keyFields(ev) {
  const parts = [];
  if (ev.output_index !== undefined) parts.push(`#${ev.output_index}`);
  if (ev.item && ev.item.type) parts.push(ev.item.type + (ev.item.name ? ` ${ev.item.name}` : ""));
  if (typeof ev.delta === "string") parts.push(JSON.stringify(ev.delta));
  if (typeof ev.text === "string") parts.push(`text ${JSON.stringify(preview(ev.text, 60))}`);
  if (typeof ev.arguments === "string") parts.push(`args ${preview(ev.arguments, 60)}`);
  if (ev.model_id) parts.push(`${ev.model_id} · ${ev.category ?? ""}`);
  if (ev.response && ev.response.status) parts.push(`status ${ev.response.status}`);
  if (ev.type === "error") {
    const e = ev.error && typeof ev.error === "object" ? ev.error : ev;
    parts.push(`${e.code ?? ""} ${e.message ?? ""}`);
  }
  return preview(parts.join("  "), 140);
}

const MAX_ROWS = 5000;

/** The live event timeline: one row per arrival, violations attached to the rows they concern. */
export class Timeline {
  constructor() {
    this.rows = new Map(); // sequence_number -> row (first arrival)
    this.count = 0;
    this.violations = [];
  }

  reset() {
    this.rows.clear();
    this.count = 0;
    this.violations = [];
    $("timeline-body").replaceChildren();
    $("violations").replaceChildren();
    $("violation-count").textContent = "0";
    $("event-count").textContent = "0";
    $("framing").textContent = "";
  }

  framing(eventName) {
    $("framing").textContent = eventName === "message" ? "event: message" : "event: <type>";
  }

  /** Add a row for an arriving event; returns the row. */
  add(ev, ms, note) {
    this.count += 1;
    $("event-count").textContent = String(this.count);
    if (this.count > MAX_ROWS) return null;
    const row = el("tr", "ev");
    const seq = Number.isInteger(ev.sequence_number) ? ev.sequence_number : "";
    row.dataset.seq = String(seq);
    row.dataset.type = ev.type ?? "";
    // One cell holds the type (plus violation badges) over its key fields: readable in a narrow panel.
    const cell = el("td", "event");
    const type = el("div", "type");
    type.append(el("span", "tname", ev.type ?? "(no type)"));
    const fields = note ?? keyFields(ev);
    cell.append(type);
    if (fields) cell.append(el("div", "fields", fields));
    if (TERMINALISH.test(ev.type ?? "")) row.classList.add("terminal");
    row.append(el("td", "seq", seq), el("td", "ms", `+${Math.round(ms)}`), cell);
    $("timeline-body").append(row);
    if (seq !== "" && !this.rows.has(seq)) this.rows.set(seq, row);
    const wrap = $("timeline-scroll");
    if (wrap.scrollHeight - wrap.scrollTop - wrap.clientHeight < 80) wrap.scrollTop = wrap.scrollHeight;
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
      li.append(el("code", null, vio.code), el("span", "vseq", vio.sequence_number ?? "–"),
        el("span", "vmsg", vio.message));
      $("violations").append(li);
    }
    $("violation-count").textContent = String(this.violations.length);
    $("timeline-panel").dataset.ok = String(this.violations.length === 0);
  }
}

const TERMINALISH = /^(response\.(completed|incomplete|failed)|error)$/;
