// WebSocket transport (Open Responses "WebSocket Transport"): the client sends {"type": "response.create", ...}
// as one text message; the server sends each event as one JSON text message, with the same sequence numbers
// and lifecycle as SSE. A refused upgrade (no WebSocket on this gateway) is told apart from a gateway that is
// down by probing /healthz over HTTP.
import { canonicalType } from "./event-types.js";
import { UnreachableError } from "./errors.js";
import { HttpError } from "./transport.js";

const ENDS = new Set(["response.completed", "response.incomplete", "response.failed"]);

export function websocketUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

async function whyRefused() {
  try {
    await fetch("/healthz", { cache: "no-store" });
    const err = new Error("WebSocket not supported by this gateway");
    err.websocketUnsupported = true;
    return err;
  } catch (cause) {
    return new UnreachableError(location.origin, cause);
  }
}

/**
 * Run one response over a WebSocket. Resolves when the response ended (terminal event, then close); rejects
 * with HttpError (a WebSocketErrorEvent before the response started), an "unsupported"/unreachable error when
 * the upgrade failed, or an AbortError when `signal` aborts.
 */
export function websocketStream({ path, message, signal, onMessage, onOpen }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(websocketUrl(path));
    let opened = false;
    let started = false;
    let settled = false;
    let linger = null;
    const settle = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(linger);
      fn(value);
    };
    const abort = () => {
      ws.close(1000, "stopped");
      const err = new Error("aborted");
      err.name = "AbortError";
      settle(reject, err);
    };
    if (signal) signal.addEventListener("abort", abort, { once: true });
    ws.addEventListener("open", () => {
      opened = true;
      if (onOpen) onOpen();
      ws.send(JSON.stringify(message));
    });
    ws.addEventListener("message", (e) => {
      if (typeof e.data !== "string") return;
      let ev = null;
      try {
        ev = JSON.parse(e.data);
      } catch {
        // not JSON: the page's pipeline reports it on the timeline
      }
      if (ev && ev.type === "error" && Number.isInteger(ev.status) && !Number.isInteger(ev.sequence_number)
        && !started) {
        const body = ev.error || {};
        settle(reject, new HttpError(ev.status, body.code || `http_${ev.status}`, body.message || "", {
          param: body.param || null }));
        ws.close(1000);
        return;
      }
      started = true;
      onMessage({ event: (ev && ev.type) || "message", data: e.data, id: "", websocket: true });
      const type = ev ? canonicalType(ev.type) : null;
      if (ENDS.has(type)) {
        ws.close(1000);
        settle(resolve);
      } else if (type === "error") {
        // `error` may be followed by `response.failed` (one terminal): wait a moment for it.
        linger = setTimeout(() => {
          ws.close(1000);
          settle(resolve);
        }, 300);
      }
    });
    ws.addEventListener("close", async () => {
      if (signal) signal.removeEventListener("abort", abort);
      if (!opened) settle(reject, await whyRefused());
      else settle(resolve);
    });
  });
}
