// DOM rendering. Model output only ever reaches the page through textContent or renderMarkdown (escaped).
import { highlight } from "./highlight.js";
import { LiveMarkdown } from "./live-markdown.js";
import { checkAnswer } from "./schema.js";
import { collectSources, linkCitations, markCitations, renderSources } from "./sources.js";

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
    this.live = new LiveMarkdown($("answer"), linkCitations);
    this.showStreamed = false;
    this.toolCards = new Map();
    this._lastAnswer = null;
    this._cardCount = 0;
    this._structuredFor = null;
  }

  reset() {
    this.showStreamed = false;
    this.toolCards.clear();
    this._lastAnswer = null;
    this._cardCount = 0;
    this._structuredFor = null;
    $("tool-cards").replaceChildren();
    $("source-cards").replaceChildren();
    this.live.reset();
    $("structured").hidden = true;
  }

  /** With a schema: once the answer is final, show it parsed and validated against the schema. */
  _structured(state, schema) {
    const box = $("structured");
    if (!schema || state.terminal === null) {
      box.hidden = true;
      return;
    }
    const text = state.finalText;
    if (this._structuredFor === text) return;
    this._structuredFor = text;
    box.hidden = false;
    const result = checkAnswer(text, schema);
    const errors = $("structured-errors");
    errors.replaceChildren();
    const verdict = $("structured-verdict");
    if (result.parseError) {
      verdict.textContent = "not JSON";
      box.dataset.valid = "false";
      errors.append(el("li", null, result.parseError));
      $("structured-json").textContent = "";
      return;
    }
    const ok = result.errors.length === 0;
    box.dataset.valid = String(ok);
    verdict.textContent = ok ? "valid against the schema" : `${result.errors.length} schema error(s)`;
    for (const e of result.errors) {
      const li = el("li");
      li.append(el("code", null, e.path), document.createTextNode(` ${e.message}`));
      errors.append(li);
    }
    $("structured-json").innerHTML = highlight(JSON.stringify(result.value, null, 2), "json");
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
    const which = this.showStreamed ? "streamed" : "final";
    const { cards, byUrl } = collectSources(state);
    const text = markCitations(state.parts(which), byUrl);
    if (text !== this._lastAnswer) {
      this._lastAnswer = text;
      this.live.update(text); // escaped first inside renderMarkdown
    }
    if (cards.length !== this._cardCount) {
      this._cardCount = cards.length;
      renderSources($("source-cards"), cards);
    }
    this._structured(state, extra.schema);
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
    $("error-action").textContent = (err && err.action) || "";
    $("error-title").textContent = (err && err.title) || {
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

