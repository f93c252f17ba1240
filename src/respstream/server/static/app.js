// The playground: wires the form to a streaming request and the views. Plain ES module, no build step.
import { Rules, Sequencer } from "./rules.js";
import { ResponseState } from "./state.js";
import { HttpError, postStream, resumeStream } from "./transport.js";
import { ResultView, Timeline } from "./views.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "respstream.apiKey";
const BASE = ""; // same origin as the gateway that served this page

/** The one place where tool toggles become request entries (hosted-style: the gateway runs them). */
export function toolEntries(names) {
  return names.map((name) => ({ type: name }));
}

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

function buildRequest() {
  const body = { model: $("model").value || "auto", input: $("prompt").value, stream: true };
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  const max = Number.parseInt($("max-tokens").value, 10);
  if (Number.isFinite(max) && max > 0) body.max_output_tokens = max;
  const tools = [...document.querySelectorAll("input[name=tool]:checked")].map((box) => box.value);
  if (tools.length) body.tools = toolEntries(tools);
  if ($("background").checked) {
    body.background = true;
    body.store = true;
  }
  return body;
}

// One run = one response, possibly over several connections (POST, then GET resumes).
const run = {
  state: new ResponseState(),
  seq: new Sequencer(),
  rules: new Rules(),
  ctrl: null, // AbortController of the POST
  resume: null, // handle of a GET resume
  background: false,
  disconnected: false,
  statusLabel: null,
  error: null,
  t0: 0,
  finished: false,
};
const view = new ResultView();
const timeline = new Timeline();
let renderQueued = false;

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

function renderAll() {
  view.render(run.state, { statusLabel: run.statusLabel, error: run.error, now: now() });
  const streaming = run.ctrl !== null || run.resume !== null;
  $("send").disabled = streaming;
  $("disconnect").disabled = !streaming;
  $("resume").hidden = !$("background").checked && !run.background;
  $("resume").disabled = !(run.disconnected && run.background && run.state.id && !run.state.terminal);
  $("resume-from").textContent = run.seq.lastContiguous >= 0 ? String(run.seq.lastContiguous) : "—";
  window.__playground = {
    status: run.statusLabel ?? run.state.status,
    finalText: run.state.finalText,
    streamedText: run.state.streamedText,
    lastSequenceNumber: run.seq.lastContiguous,
    violations: timeline.violations.map((v) => v.code),
    responseId: run.state.id,
  };
}

function onMessage(msg) {
  const t = now();
  if (msg.data === "[DONE]") return; // some bridges send it; it is not an event
  let ev;
  try {
    ev = JSON.parse(msg.data);
  } catch {
    const row = timeline.add({}, t - run.t0, `not JSON: ${msg.data.slice(0, 80)}`);
    timeline.flag([{ code: "input.not_json", sequence_number: null, message: "event data is not JSON" }], row);
    return;
  }
  if (!ev || typeof ev !== "object" || Array.isArray(ev)) return;
  if (timeline.count === 0) {
    timeline.framing(msg.event);
    if (run.rules.dialect === null) run.rules.dialect = msg.event === "message" ? "platform" : "openai";
  }
  const row = timeline.add(ev, t - run.t0);
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

function release(events, t) {
  for (const ev of events) {
    timeline.flag(run.rules.check(ev));
    run.state.apply(ev, t);
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
  scheduleRender();
}

async function send(event) {
  event.preventDefault();
  if (run.ctrl || run.resume) return;
  Object.assign(run, {
    state: new ResponseState(), seq: new Sequencer(), rules: new Rules(), background: $("background").checked,
    disconnected: false, statusLabel: null, error: null, t0: now(), finished: false,
  });
  view.reset();
  timeline.reset();
  run.state.start(run.t0);
  const ctrl = new AbortController();
  run.ctrl = ctrl;
  scheduleRender();
  try {
    await postStream({
      url: `${BASE}/v1/responses`, body: buildRequest(), headers: authHeaders(), signal: ctrl.signal, onMessage,
      onJson: (response) => onMessage({ event: "message", data: JSON.stringify({ type: "response.completed", response }) }),
    });
    run.ctrl = null;
    finishStream();
  } catch (err) {
    run.ctrl = null;
    if (err.name === "AbortError") {
      run.disconnected = true;
      run.statusLabel = "disconnected";
    } else if (err instanceof HttpError) {
      run.state.status = "error";
      run.error = { code: err.code, message: err.detail };
    } else {
      finishStream(); // the connection broke mid-stream: truncated unless a terminal came
    }
  }
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
        run.error = { code: reason.code, message: reason.detail };
        run.state.status = "error";
      } else {
        finishStream();
      }
      scheduleRender();
    },
  });
  scheduleRender();
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
    select.replaceChildren(new Option("auto", "auto"));
    for (const m of body.data || []) if (m.id && m.id !== "auto") select.append(new Option(m.id, m.id));
    select.value = [...select.options].some((o) => o.value === keep) ? keep : "auto";
    $("models-note").textContent = "";
  } catch {
    $("models-note").textContent = "could not list models";
  }
}

function init() {
  const key = $("api-key");
  key.value = sessionStorage.getItem(KEY_STORAGE) ?? "";
  key.addEventListener("change", () => {
    if (key.value.trim()) sessionStorage.setItem(KEY_STORAGE, key.value.trim());
    else sessionStorage.removeItem(KEY_STORAGE);
    loadModels();
  });
  $("request-form").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("request-form").requestSubmit();
  });
  $("disconnect").addEventListener("click", disconnect);
  $("background").addEventListener("change", scheduleRender);
  $("resume").addEventListener("click", resume);
  $("toggle-streamed").addEventListener("click", () => {
    view.showStreamed = !view.showStreamed;
    scheduleRender();
  });
  // Time-based fields (elapsed, tok/s) keep moving while a stream is open.
  setInterval(() => {
    if (run.state.status === "streaming") scheduleRender();
  }, 250);
  loadModels();
  renderAll();
  document.body.dataset.ready = "true";
}

init();
