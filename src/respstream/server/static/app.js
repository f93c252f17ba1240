// The playground: wires the form, the conversation and the transports to the views. Plain ES module, no build step.
import { Recorder, download, readCapture } from "./capture.js";
import { copyButton, copyText } from "./clipboard.js";
import { SNIPPETS } from "./codegen.js";
import { UnreachableError, explain } from "./errors.js";
import { canonicalType } from "./event-types.js";
import { Follow } from "./follow.js";
import { highlight } from "./highlight.js";
import { Attachments, modalitiesOf } from "./images.js";
import { buildRequest, initSampling, initToolNote, websocketMessage } from "./request.js";
import { Rules, Sequencer } from "./rules.js";
import { ResponseState } from "./state.js";
import { initTheme } from "./theme.js";
import { renderThread, renderThreadChoices } from "./thread-view.js";
import { ThreadStore } from "./threads.js";
import { Timeline } from "./timeline.js";
import { HttpError, postStream, resumeStream } from "./transport.js";
import { ResultView } from "./views.js";
import { websocketStream } from "./ws.js";

export { toolEntries } from "./request.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "respstream.apiKey";
const BASE = ""; // same origin as the gateway that served this page

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

// One run = one response, possibly over several connections (POST, then GET resumes), or one replayed capture.
const run = {
  state: new ResponseState(),
  seq: new Sequencer(),
  rules: new Rules(),
  recorder: new Recorder(),
  ctrl: null, // AbortController of the POST / WebSocket
  control: null, // the WebSocket's steering handle (ws.js), while one streams
  steerText: null, // the text of the last accepted steer: the successor's turn shows it
  resume: null, // handle of a GET resume
  background: false,
  disconnected: false,
  statusLabel: null,
  error: null,
  t0: 0,
  finished: false,
  body: null, // the exact request body sent
  schema: null,
  turn: null, // the conversation turn this run answers
};
const view = new ResultView();
const timeline = new Timeline();
const follow = new Follow(document.querySelector(".composer"), "#timeline-panel");
const threads = new ThreadStore();
const attachments = new Attachments($("attachments"), () => scheduleRender());
const models = new Map(); // id -> /v1/models entry
let renderQueued = false;
let editing = false;
let retryUntil = 0;
let liveTurn = null; // the turn shown in the live area (not repeated in the thread list above it)

function now() {
  return performance.now();
}

function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderAll();
  });
}

function streaming() {
  return run.ctrl !== null || run.resume !== null;
}

function renderAll() {
  timeline.flush();
  view.render(run.state, { statusLabel: run.statusLabel, error: run.error, now: now(), schema: run.schema });
  const busy = streaming();
  follow.update($("answer")); // the answer's end stays above the composer while it streams (follow.js)
  if (!busy) follow.stop();
  const wait = Math.ceil((retryUntil - Date.now()) / 1000);
  $("send").disabled = busy || wait > 0;
  $("send").textContent = wait > 0 ? `Send (${wait} s)` : "Send";
  $("disconnect").disabled = !busy;
  $("steer").disabled = !(busy && run.control && run.state.id && !run.state.terminal);
  $("steer").hidden = !$("websocket").checked;
  $("resume").hidden = !$("background").checked && !run.background;
  $("resume").disabled = !(run.disconnected && run.background && run.state.id && !run.state.terminal);
  $("resume-from").textContent = run.seq.lastContiguous >= 0 ? String(run.seq.lastContiguous) : "—";
  const last = threads.lastTurn();
  $("regenerate").disabled = busy || !last;
  $("edit-last").disabled = busy || !last;
  $("copy-answer").disabled = !run.state.finalText;
  $("export-sse").disabled = run.recorder.size === 0;
  $("editing").hidden = !editing;
  $("attach-label").hidden = !attachments.enabled;
  window.__playground = {
    status: run.statusLabel ?? run.state.status,
    finalText: run.state.finalText,
    streamedText: run.state.streamedText,
    lastSequenceNumber: run.seq.lastContiguous,
    violations: timeline.violations.map((v) => v.code),
    violationList: timeline.violations.map((v) => [v.code, v.sequence_number ?? null]),
    responseId: run.state.id,
    events: timeline.count,
    request: run.body,
    turns: threads.current.turns.length,
    repairs: timeline.repairReport,
  };
}

function renderConversation() {
  const turns = threads.current.turns;
  renderThread($("thread"), liveTurn ? turns.filter((t) => t !== liveTurn) : turns);
  renderThreadChoices($("thread-select"), threads);
  const user = $("current-user");
  user.hidden = !liveTurn;
  user.textContent = liveTurn ? liveTurn.input : "";
  if (liveTurn && liveTurn.images) user.append(` (+${liveTurn.images} image${liveTurn.images > 1 ? "s" : ""})`);
  if (threads.saveError) toast(threads.saveError);
}

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    box.hidden = true;
  }, 4000);
}

function onMessage(msg) {
  const t = now();
  run.recorder.add(msg);
  if (msg.data === "[DONE]") return; // some bridges send it; it is not an event
  let raw;
  try {
    raw = JSON.parse(msg.data);
  } catch {
    const row = timeline.add({}, t - run.t0, `not JSON: ${msg.data.slice(0, 80)}`, msg.data);
    timeline.flag([{ code: "input.not_json", sequence_number: null, message: "event data is not JSON" }], row);
    scheduleRender();
    return;
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return;
  // Rules and views work on canonical names (`respstream:` extensions and openresponses aliases unprefixed);
  // the timeline shows the name as it came.
  const type = canonicalType(raw.type);
  const ev = type === raw.type ? raw : { ...raw, type };
  if (timeline.count === 0) {
    if (msg.websocket) {
      // No SSE framing to tell the dialect by: use the one the gateway reports on /healthz.
      $("framing").textContent = "WebSocket";
      if (run.rules.dialect === null) run.rules.dialect = $("dialect").textContent === "platform" ? "platform" : "openai";
    } else {
      timeline.framing(msg.event);
      if (run.rules.dialect === null) run.rules.dialect = msg.event === "message" ? "platform" : "openai";
    }
  }
  const row = timeline.add(raw, t - run.t0, undefined, msg.data);
  const pushed = run.seq.push(ev);
  if (pushed.dropped && row) row.classList.add("dropped");
  timeline.flag(pushed.violations, row);
  release(pushed.ready, t);
  if (run.state.terminal && run.resume) {
    // The terminal arrived: close the EventSource before the browser tries to reconnect.
    run.resume.close();
  }
  scheduleRender();
}

const REPAIRS = "respstream:repairs"; // the Response's repair report (a native Responses upstream's stream)
const TERMINAL_RESPONSE = /^response\.(completed|incomplete|failed)$/;

function release(events, t) {
  for (const ev of events) {
    timeline.flag(run.rules.check(ev));
    run.state.apply(ev, t);
    if (ev.response && typeof ev.response === "object") {
      if (REPAIRS in ev.response) timeline.repairs(ev.response[REPAIRS]);
      if (TERMINAL_RESPONSE.test(ev.type)) run.terminalResponse = true;
    }
  }
}

/** A terminal without a Response (the platform's flat `error`): the stored record still has the repair report. */
async function loadRepairs(id) {
  if (!id || timeline.repairReport !== null) return;
  try {
    const res = await fetch(`${BASE}/v1/responses/${encodeURIComponent(id)}`, { headers: authHeaders() });
    if (!res.ok) return;
    const record = await res.json();
    if (run.state.id === id && record && REPAIRS in record) {
      timeline.repairs(record[REPAIRS]);
      scheduleRender();
    }
  } catch {
    // no record (not stored, deleted, gateway gone): nothing to show
  }
}

/** The stream ended for good (EOF after the last connection): flush the window and check the end. */
function finishStream() {
  if (run.finished) return;
  run.finished = true;
  const t = now();
  const rest = run.seq.finish();
  timeline.flag(rest.violations);
  release(rest.ready, t);
  timeline.flag(run.rules.finish());
  if (!run.state.terminal) {
    run.state.status = "truncated";
    run.state.endedAt = t;
    run.error = { code: "truncated", message: `stream ended without a terminal event after ${run.seq.lastContiguous}` };
  }
  recordTurn();
  // Only a terminal without a Response (the platform's flat `error`) sends us to the record for the report.
  if (run.state.terminal && run.state.id && !run.replayed && !run.terminalResponse) loadRepairs(run.state.id);
  scheduleRender();
}

/** A failure before any stream: explained, with its action; no protocol rule is run on a stream that never was. */
function failBeforeStream(err) {
  const info = explain(err);
  run.error = info;
  run.state.status = err instanceof UnreachableError ? "unreachable" : "error";
  run.state.endedAt = now();
  run.finished = true;
  if (info.openKey) {
    $("key-section").open = true;
    $("api-key").focus();
  }
  if (info.refreshModels) loadModels();
  if (info.retryAfter) {
    retryUntil = Date.now() + info.retryAfter * 1000;
    const tick = setInterval(() => {
      scheduleRender();
      if (Date.now() >= retryUntil) clearInterval(tick);
    }, 500);
  }
  recordTurn();
}

/** Store what the run produced on its conversation turn. */
function recordTurn() {
  const turn = run.turn;
  if (!turn) return;
  turn.responseId = run.state.id;
  turn.text = run.state.finalText;
  turn.status = run.statusLabel ?? run.state.status;
  turn.model = run.state.model;
  threads.save();
}

function resetRun(extra) {
  Object.assign(run, {
    state: new ResponseState(), seq: new Sequencer(), rules: new Rules(), recorder: new Recorder(),
    background: false, disconnected: false, statusLabel: null, error: null, t0: now(), finished: false,
    body: null, schema: null, turn: null, replayed: false, terminalResponse: false, control: null, steerText: null,
    ...extra,
  });
  view.reset();
  timeline.reset();
}

/** Send a user turn. `replaceLast`: the turn replaces the thread's last one (edit-and-resend, regenerate). */
async function sendTurn({ text, images, replaceLast }) {
  if (streaming()) return;
  const last = threads.lastTurn();
  const previousResponseId = replaceLast ? (last ? last.previousResponseId : null) : threads.lastResponseId();
  const built = buildRequest({ text, images, previousResponseId });
  resetRun({ background: $("background").checked });
  if (built.error) {
    run.state.status = "error";
    run.error = { title: "Schema is not usable", code: "invalid_schema", message: built.error,
      action: "Fix the JSON schema under Structured output, or empty it." };
    $("schema-section").open = true;
    scheduleRender();
    return;
  }
  const turn = { input: text, images: images.length, imageUrls: images, previousResponseId, responseId: null,
    text: "", status: "streaming", model: null, at: Date.now() };
  threads.addTurn(turn, { replaceLast });
  liveTurn = turn;
  Object.assign(run, { body: built.body, schema: built.schema, turn });
  renderConversation();
  follow.start($("current-user")); // the new question at the top of the window; earlier turns a scroll above
  run.state.start(run.t0);
  const ctrl = new AbortController();
  run.ctrl = ctrl;
  scheduleRender();
  try {
    if ($("websocket").checked) {
      run.control = {};
      await websocketStream({ path: `${BASE}/v1/responses`, message: websocketMessage(built.body),
        signal: ctrl.signal, onMessage, control: run.control, onSteer, onSuccessor });
    } else {
      await postStream({
        url: `${BASE}/v1/responses`, body: built.body, headers: authHeaders(), signal: ctrl.signal, onMessage,
        onJson: (response) => onMessage({ event: "message", data: JSON.stringify({ type: "response.completed", response }) }),
      });
    }
    run.ctrl = null;
    finishStream();
  } catch (err) {
    run.ctrl = null;
    if (err.name === "AbortError") {
      run.disconnected = true;
      run.statusLabel = "disconnected";
      recordTurn();
    } else if (err instanceof HttpError || err instanceof UnreachableError || err.websocketUnsupported) {
      failBeforeStream(err);
    } else {
      finishStream(); // the connection broke mid-stream: truncated unless a terminal came
    }
  }
  renderConversation();
  scheduleRender();
}

function send(event) {
  event.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() && attachments.urls.length === 0) {
    toast("Type a message first.");
    return;
  }
  const images = [...attachments.urls];
  const replaceLast = editing;
  editing = false;
  attachments.clear();
  $("prompt").value = "";
  sendTurn({ text, images, replaceLast });
}

function regenerate() {
  const last = threads.lastTurn();
  if (!last || streaming()) return;
  sendTurn({ text: last.input, images: last.imageUrls || [], replaceLast: true });
}

function editLast() {
  const last = threads.lastTurn();
  if (!last || streaming()) return;
  editing = true;
  $("prompt").value = last.input;
  $("prompt").focus();
  scheduleRender();
}

function showThread() {
  liveTurn = null;
  editing = false;
  resetRun({});
  renderConversation();
  scheduleRender();
}

/** Steer the response streaming over the WebSocket with the composer's text (`response.steer`). */
function steer() {
  const text = $("prompt").value.trim();
  if (!text) {
    toast("Type the steering message first.");
    return;
  }
  if (!run.control || !run.control.steer || !run.control.steer(run.state.id, text)) return;
  run.steerText = text;
  $("prompt").value = "";
}

function onSteer(ev) {
  if (ev.type === "response.steer.accepted") toast("Steering accepted: the response stops and goes on with it.");
  else if (ev.type === "response.steer.failed") toast(`Steering failed: ${(ev.error && ev.error.code) || "error"}.`);
  else if (ev.type === "response.steer.pending") toast("Steering waits for the tool output.");
}

/** The steered response ended: it stays in the thread as it is; the successor is a new turn on the same socket. */
function onSuccessor() {
  finishStream();
  renderConversation();
  const { ctrl, control, steerText } = run;
  const previousResponseId = run.state.id;
  resetRun({ background: false, ctrl, control });
  const turn = { input: steerText || "", images: 0, imageUrls: [], previousResponseId, responseId: null,
    text: "", status: "streaming", model: null, at: Date.now() };
  threads.addTurn(turn, { replaceLast: false });
  liveTurn = turn;
  run.turn = turn;
  renderConversation();
  run.state.start(run.t0);
  scheduleRender();
}

function disconnect() {
  if (run.ctrl) run.ctrl.abort();
  if (run.resume) run.resume.close();
}

function resume() {
  if (!run.state.id || run.resume) return;
  run.disconnected = false;
  run.statusLabel = "resuming";
  const key = $("api-key").value.trim();
  const from = run.seq.lastContiguous;
  const marker = timeline.add({ type: "resume" }, now() - run.t0, `GET …?stream=true&starting_after=${from}`);
  if (marker) marker.classList.add("marker");
  run.resume = resumeStream({
    base: BASE, id: run.state.id, startingAfter: from, headers: authHeaders(), apiKey: key, onMessage,
    onEnd: (reason) => {
      run.resume = null;
      run.statusLabel = null;
      if (reason === "aborted" && !run.state.terminal) {
        run.disconnected = true;
        run.statusLabel = "disconnected";
      } else if (reason instanceof HttpError) {
        run.error = explain(reason);
        run.state.status = "error";
      } else {
        finishStream();
      }
      recordTurn();
      renderConversation();
      scheduleRender();
    },
  });
  scheduleRender();
}

/** Replay a capture file through the same sequencer, rules and views: a visual `respstream check`. */
function replayCapture(name, text) {
  if (streaming()) disconnect();
  liveTurn = null;
  resetRun({ replayed: true });
  renderConversation();
  const user = $("current-user");
  user.hidden = false;
  run.state.start(run.t0);
  const messages = readCapture(text);
  for (const msg of messages) onMessage(msg);
  finishStream();
  run.turn = null;
  user.textContent = `Replay of ${name}: ${messages.length} messages, checked in this page (no server).`;
  $("replay-note").textContent = `${name}: ${timeline.violations.length} violation(s).`;
  renderAll();
}

async function openCapture(file) {
  if (!file) return;
  if (file.size > 64 * 1024 * 1024) {
    toast(`${file.name} is over 64 MiB; check it with respstream check instead.`);
    return;
  }
  replayCapture(file.name, await file.text());
}

async function loadModels() {
  const select = $("model");
  try {
    const res = await fetch(`${BASE}/v1/models`, { headers: authHeaders() });
    if (!res.ok) {
      $("models-note").textContent = res.status === 401 ? "API key needed to list models" : `models: HTTP ${res.status}`;
      return;
    }
    const body = await res.json();
    const keep = select.value;
    models.clear();
    select.replaceChildren(new Option("auto", "auto"));
    for (const m of body.data || []) {
      if (!m.id) continue;
      models.set(m.id, m);
      if (m.id !== "auto") select.append(new Option(m.id, m.id));
    }
    select.value = [...select.options].some((o) => o.value === keep) ? keep : "auto";
    $("models-note").textContent = "";
    modelChanged();
  } catch {
    $("models-note").textContent = "could not list models";
  }
}

/** Show the model's input modalities; image input is offered only when it takes images. */
function modelChanged() {
  const id = $("model").value;
  let kinds = modalitiesOf(models.get(id));
  if (id === "auto" && !models.has("auto")) {
    // auto routes per request: images are offered when every listed model takes them
    const all = [...models.values()].map(modalitiesOf);
    kinds = all.length && all.every((k) => k.includes("image")) ? ["text", "image"] : ["text"];
  }
  $("modalities").textContent = kinds.join(" + ");
  attachments.enabled = kinds.includes("image");
  if (!attachments.enabled && attachments.urls.length) {
    attachments.clear();
    toast("Images removed: the selected model does not take images.");
  }
  scheduleRender();
}

async function loadDialect() {
  try {
    const res = await fetch(`${BASE}/healthz`, { cache: "no-store" });
    const body = await res.json();
    $("dialect").textContent = body.dialect || "?";
  } catch {
    $("dialect").textContent = "?";
  }
}

// View code ------------------------------------------------------------------------------------------------------
let codeLang = "curl";

function codeBody() {
  if (run.body) return { body: run.body, source: "the last request sent" };
  const built = buildRequest({ text: $("prompt").value, images: [...attachments.urls],
    previousResponseId: threads.lastResponseId() });
  return { body: built.body || { model: $("model").value, input: $("prompt").value, stream: true },
    source: "the request Send would make now" };
}

function renderCode() {
  const { body, source } = codeBody();
  const base = `${location.origin}/v1`;
  const keyed = $("api-key").value.trim() !== "";
  const snippet = SNIPPETS[codeLang];
  const text = snippet.make(base, body, keyed);
  const pre = $("code-text");
  pre.dataset.raw = text;
  pre.dataset.lang = codeLang;
  pre.innerHTML = highlight(text, snippet.language);
  $("code-source").textContent = `Shows ${source}.`;
  for (const tab of document.querySelectorAll(".tabs [role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.lang === codeLang));
  }
}

function initCodeDialog() {
  const dialog = $("code-dialog");
  $("view-code").addEventListener("click", () => {
    renderCode();
    dialog.showModal();
  });
  $("close-code").addEventListener("click", () => dialog.close());
  for (const tab of document.querySelectorAll(".tabs [role=tab]")) {
    tab.addEventListener("click", () => {
      codeLang = tab.dataset.lang;
      renderCode();
    });
  }
  copyButton($("copy-code"), () => $("code-text").dataset.raw || "");
}

// Wiring ----------------------------------------------------------------------------------------------------------
function initTimeline() {
  $("timeline-body").addEventListener("click", (e) => {
    const row = e.target.closest("li.ev");
    if (row && row.dataset.index) timeline.inspect(timeline.entryOf(row));
  });
  $("violations").addEventListener("click", (e) => {
    const li = e.target.closest("li");
    const entry = li && li.dataset.seq !== "" ? timeline.entryOf(Number(li.dataset.seq)) : null;
    if (entry) {
      timeline.reveal(entry);
      timeline.inspect(entry);
    }
  });
  $("close-inspector").addEventListener("click", () => {
    $("inspector").hidden = true;
  });
  copyButton($("copy-event"), () => $("inspector-json").dataset.raw || "");
  $("event-filter").addEventListener("change", () => {
    timeline.setFilter($("event-filter").value);
  });
  $("export-sse").addEventListener("click", () => {
    const name = `${run.state.id || "stream"}.sse`;
    download(name, run.recorder.toSSE());
  });
  $("open-sse").addEventListener("change", () => {
    openCapture($("open-sse").files[0]);
    $("open-sse").value = "";
  });
  // Drop a capture anywhere on the page; an image dropped on the composer is an attachment instead.
  let depth = 0;
  const overlay = $("drop-overlay");
  document.addEventListener("dragenter", (e) => {
    if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
    depth += 1;
    overlay.hidden = false;
  });
  document.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (depth === 0) overlay.hidden = true;
  });
  document.addEventListener("dragover", (e) => e.preventDefault());
  document.addEventListener("drop", async (e) => {
    e.preventDefault();
    depth = 0;
    overlay.hidden = true;
    const files = [...(e.dataTransfer?.files || [])];
    const images = files.filter((f) => f.type.startsWith("image/"));
    if (images.length) {
      const refused = await attachments.add(images);
      if (refused) toast(refused);
    }
    const capture = files.find((f) => !f.type.startsWith("image/"));
    if (capture) openCapture(capture);
  });
}

function initComposer() {
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      $("request-form").requestSubmit();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && streaming() && !$("code-dialog").open) {
      e.preventDefault();
      disconnect();
    }
  });
  $("prompt").addEventListener("paste", async (e) => {
    const files = [...(e.clipboardData?.files || [])].filter((f) => f.type.startsWith("image/"));
    if (files.length === 0) return;
    e.preventDefault();
    const refused = await attachments.add(files);
    if (refused) toast(refused);
  });
  $("attach").addEventListener("change", async () => {
    const refused = await attachments.add([...$("attach").files]);
    $("attach").value = "";
    if (refused) toast(refused);
  });
  $("cancel-edit").addEventListener("click", () => {
    editing = false;
    $("prompt").value = "";
    scheduleRender();
  });
  $("regenerate").addEventListener("click", regenerate);
  $("edit-last").addEventListener("click", editLast);
  $("new-chat").addEventListener("click", () => {
    threads.newThread();
    showThread();
    $("prompt").value = "";
    $("prompt").focus();
  });
  $("thread-select").addEventListener("change", () => {
    threads.select($("thread-select").value);
    showThread();
  });
  copyButton($("copy-answer"), () => run.state.finalText);
  // Copy buttons on code blocks (answer and earlier turns), one delegated listener.
  document.querySelector(".result-panel").addEventListener("click", async (e) => {
    const button = e.target.closest("button.copy-code");
    if (!button) return;
    const code = button.parentElement.querySelector("code");
    const ok = await copyText(code ? code.textContent : "");
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => {
      button.textContent = "Copy";
    }, 1200);
  });
}

function init() {
  window.__timelineRows = () => timeline.snapshot(); // for tests: every record, not only the rendered rows
  initTheme($("theme"));
  const key = $("api-key");
  key.value = sessionStorage.getItem(KEY_STORAGE) ?? "";
  key.addEventListener("change", () => {
    if (key.value.trim()) sessionStorage.setItem(KEY_STORAGE, key.value.trim());
    else sessionStorage.removeItem(KEY_STORAGE);
    loadModels();
  });
  $("request-form").addEventListener("submit", send);
  $("disconnect").addEventListener("click", disconnect);
  $("steer").addEventListener("click", steer);
  $("websocket").addEventListener("change", scheduleRender);
  $("background").addEventListener("change", scheduleRender);
  $("resume").addEventListener("click", resume);
  $("model").addEventListener("change", modelChanged);
  $("toggle-streamed").addEventListener("click", () => {
    view.showStreamed = !view.showStreamed;
    scheduleRender();
  });
  initSampling();
  initToolNote();
  initCodeDialog();
  initTimeline();
  initComposer();
  // Time-based fields (elapsed, tok/s) keep moving while a stream is open.
  setInterval(() => {
    if (run.state.status === "streaming") scheduleRender();
  }, 250);
  loadModels();
  loadDialect();
  renderConversation();
  renderAll();
  document.body.dataset.ready = "true";
}

init();
