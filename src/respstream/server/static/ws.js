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
 *
 * Steering: `control.steer(responseId, text)` sends a `response.steer` on the socket once it is open. The
 * `response.steer.*` answers go to `onSteer` (they are no event of the response). After an accepted steer the
 * response's terminal (`incomplete`, reason `steered`) does not end the stream: `onSuccessor()` is called and the
 * successor the server starts on the same socket streams on until its own terminal.
 */
export function websocketStream({ path, message, signal, onMessage, onOpen, control, onSteer, onSuccessor }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(websocketUrl(path));
    let opened = false;
    let started = false;
    let settled = false;
    let linger = null;
    let steered = 0; // accepted steers whose successor has not started yet
    if (control) {
      control.steer = (responseId, text) => {
        if (!opened || settled) return false;
        ws.send(JSON.stringify({ type: "response.steer", previous_response_id: responseId, input: text }));
        return true;
      };
    }
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
      if (ev && typeof ev.type === "string" && ev.type.startsWith("response.steer.")) {
        if (ev.type === "response.steer.accepted") steered += 1;
        if (onSteer) onSteer(ev);
        return;
      }
      started = true;
      onMessage({ event: (ev && ev.type) || "message", data: e.data, id: "", websocket: true });
      const type = ev ? canonicalType(ev.type) : null;
      if (ENDS.has(type) && steered > 0) {
        steered = 0; // the original ended; its successor follows on this socket
        if (onSuccessor) onSuccessor(ev);
      } else if (ENDS.has(type)) {
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
