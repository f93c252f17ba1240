// Getting SSE messages into the page: fetch + streaming body reader for POST, EventSource for GET resume.
import { SSEParser } from "./sse.js";
import { EVENT_TYPES } from "./event-types.js";
import { UnreachableError } from "./errors.js";

/** An HTTP error before streaming started, carrying the server's error envelope. */
export class HttpError extends Error {
  constructor(status, code, message, { param = null, retryAfter = null } = {}) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.serverMessage = message;
    this.param = param;
    this.retryAfter = retryAfter;
    this.detail = `HTTP ${status}: ${message}`;
  }
}

export async function httpError(res) {
  let code = `http_${res.status}`;
  let message = res.statusText;
  let param = null;
  try {
    const body = await res.json();
    const e = body.error && typeof body.error === "object" ? body.error : body;
    code = e.code || e.type || code;
    message = e.message || body.detail || message;
    param = e.param || null;
  } catch {
    // not JSON: keep the status line
  }
  return new HttpError(res.status, code, message, { param, retryAfter: res.headers.get("retry-after") });
}

const SLICE_CHARS = 8 * 1024; // parse a big read in slices of this size
const BUDGET_MS = 4; // then give the browser the main thread back (a frame can be painted)

/** Resolve after the browser had a chance to run other tasks, including painting a frame. */
export function yieldToBrowser() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/**
 * Read an SSE body from a fetch Response, calling onMessage({event, data, id}) per message. A loopback gateway
 * can deliver megabytes in one read: work on it in slices and yield whenever a slice ran past the frame budget,
 * so the page never stalls however fast the events come. Not reading meanwhile is the backpressure.
 */
async function pump(res, onMessage) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder("utf-8");
  const parser = new SSEParser();
  let sliceStart = performance.now();
  const feed = async (text) => {
    for (let i = 0; i < text.length; i += SLICE_CHARS) {
      for (const msg of parser.feed(text.slice(i, i + SLICE_CHARS))) {
        onMessage(msg);
        if (performance.now() - sliceStart > BUDGET_MS) {
          await yieldToBrowser();
          sliceStart = performance.now();
        }
      }
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    await feed(decoder.decode(value, { stream: true }));
  }
  await feed(decoder.decode());
  parser.end();
}

/**
 * POST a streaming request. Resolves at EOF; rejects with HttpError on a non-2xx answer, or with an
 * AbortError when `signal` aborts. A JSON answer (non-streaming) is handed to onJson.
 */
export async function postStream({ url, body, headers, signal, onMessage, onJson, onOpen }) {
  let res;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...headers },
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    // fetch rejects with a TypeError only when no HTTP answer came at all: the request never started.
    if (err.name === "AbortError") throw err;
    throw new UnreachableError(new URL(url, location.href).origin, err);
  }
  if (!res.ok) throw await httpError(res);
  if (onOpen) onOpen();
  if ((res.headers.get("content-type") || "").includes("application/json")) {
    onJson(await res.json());
    return;
  }
  await pump(res, onMessage);
}

/**
 * Resume a stored response after `startingAfter`. Uses EventSource (the browser's own SSE client) unless an
 * API key is needed: EventSource cannot send an Authorization header, so then a fetch GET does the same job.
 * Returns {close()}; onEnd(reason) is called once: "closed" (server ended), "error" or "aborted".
 */
export function resumeStream({ base, id, startingAfter, headers, apiKey, onMessage, onEnd }) {
  const url = `${base}/v1/responses/${encodeURIComponent(id)}?stream=true&starting_after=${startingAfter}`;
  let ended = false;
  const end = (reason) => {
    if (!ended) {
      ended = true;
      onEnd(reason);
    }
  };
  if (apiKey) {
    const ctrl = new AbortController();
    fetch(url, { headers: { Accept: "text/event-stream", ...headers }, signal: ctrl.signal })
      .then(async (res) => {
        if (res.status === 204) return end("closed");
        if (!res.ok) throw await httpError(res);
        await pump(res, onMessage);
        end("closed");
      })
      .catch((err) => end(err.name === "AbortError" ? "aborted" : err));
    return { close: () => ctrl.abort(), transport: "fetch" };
  }
  const es = new EventSource(url);
  // Dispatch is on the JSON type, but EventSource routes by the `event:` name: listen to "message" (the
  // platform dialect) and to every known type name (the openai dialect). "error" doubles as the browser's
  // connection-error event; a MessageEvent with data is the protocol's error event.
  const forward = (e) => {
    if (e instanceof MessageEvent && typeof e.data === "string") {
      onMessage({ event: e.type, data: e.data, id: e.lastEventId });
    }
  };
  es.addEventListener("message", forward);
  for (const type of EVENT_TYPES) if (type !== "error") es.addEventListener(type, forward);
  es.addEventListener("error", (e) => {
    if (e instanceof MessageEvent && typeof e.data === "string") return forward(e);
    // CLOSED: the server refused or answered 204 (nothing after starting_after). CONNECTING: the browser
    // reconnects by itself with Last-Event-ID; the page's sequencer drops anything replayed.
    if (es.readyState === EventSource.CLOSED) end("closed");
  });
  return {
    close: () => {
      es.close();
      end("aborted");
    },
    transport: "eventsource",
  };
}
