// Errors people understand: each failure before a stream starts gets its own title, message and the action to
// take. None of these is a protocol violation: the request never produced a stream to check.

/** A failure before any event: the gateway could not be reached at all. */
export class UnreachableError extends Error {
  constructor(origin, cause) {
    super(`could not reach ${origin}`);
    this.origin = origin;
    this.cause = cause;
  }
}

function seconds(retryAfter) {
  if (!retryAfter) return null;
  const n = Number.parseInt(retryAfter, 10);
  if (Number.isFinite(n) && n >= 0) return n;
  const date = Date.parse(retryAfter);
  return Number.isFinite(date) ? Math.max(0, Math.round((date - Date.now()) / 1000)) : null;
}

/**
 * Explain an error. `err` is an HttpError ({status, code, message, retryAfter}), an UnreachableError, or a
 * WebSocket failure ({websocket: true, ...}). Returns {title, code, message, action, openKey, retryAfter}.
 */
export function explain(err) {
  if (err instanceof UnreachableError) {
    return {
      title: "Gateway unreachable", code: "unreachable",
      message: `The page could not connect to ${err.origin}: the gateway is down or the network is gone.`,
      action: "Start it again (respstream serve) or check the address, then press Send.",
    };
  }
  if (err.websocketUnsupported) {
    return {
      title: "WebSocket not supported", code: "websocket_unsupported",
      message: "WebSocket is not supported by this gateway: the upgrade on /v1/responses was refused.",
      action: "Turn the WebSocket switch off to use HTTP + SSE.",
    };
  }
  const status = err.status;
  const wait = seconds(err.retryAfter);
  const later = wait === null ? "in a moment" : `in ${wait} s`;
  const server = err.serverMessage ? ` The gateway said: ${err.serverMessage}` : "";
  if (err.code === "model_not_found") {
    return {
      title: "Unknown model", code: err.code,
      message: `The gateway has no model by that name.${server}`,
      action: "Pick a model from the list (it was refreshed), or choose auto.", refreshModels: true,
    };
  }
  if (status === 401) {
    return {
      title: "API key needed", code: err.code || "unauthorized",
      message: `This gateway requires an API key, and the request had none or a wrong one.${server}`,
      action: "Enter your key in the API key section (opened below), then press Send.", openKey: true,
    };
  }
  if (status === 403) {
    return {
      title: "Not allowed", code: err.code || "forbidden",
      message: `The API key is valid but may not do this.${server}`,
      action: "Use a key with access to this model or endpoint, or ask the gateway's operator.", openKey: true,
    };
  }
  if (status === 429) {
    return {
      title: "Rate limited", code: err.code || "rate_limited",
      message: `Too many requests for this key or address.${server}`,
      action: `Try again ${later}.`, retryAfter: wait,
    };
  }
  if (status === 503) {
    return {
      title: "Gateway busy", code: err.code || "unavailable",
      message: `The gateway cannot take the request right now.${server}`,
      action: `Try again ${later}.`, retryAfter: wait,
    };
  }
  if (status >= 500) {
    return {
      title: "Gateway error", code: err.code || `http_${status}`,
      message: `The gateway failed (HTTP ${status}).${server}`,
      action: "Try again; if it keeps failing, the gateway's log says why.",
    };
  }
  const param = err.param ? ` (field ${err.param})` : "";
  return {
    title: "Request refused", code: err.code || `http_${status}`,
    message: `HTTP ${status}${param}: ${err.serverMessage || "the gateway refused the request"}`,
    action: err.param ? `Change ${err.param} and send again.` : "Fix the request and send again.",
  };
}
