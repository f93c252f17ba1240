// The one place where the form and a conversation turn become a /v1/responses request body.
import { parseSchema } from "./schema.js";

const $ = (id) => document.getElementById(id);

/** The one place where tool toggles become request entries (hosted-style: the gateway runs them). */
export function toolEntries(names) {
  return names.map((name) => ({ type: name }));
}

/** A slider counts only once the user moved it; until then the model's default applies (nothing is sent). */
function slider(id) {
  const input = $(id);
  if (input.dataset.unset === "true") return null;
  const value = Number.parseFloat(input.value);
  return Number.isFinite(value) ? value : null;
}

/** The input of one user turn: a plain string, or a message with text and image parts. */
export function turnInput(text, images) {
  if (!images || images.length === 0) return text;
  const content = [{ type: "input_text", text }];
  for (const url of images) content.push({ type: "input_image", image_url: url });
  return [{ type: "message", role: "user", content }];
}

/**
 * The request body for a turn. Returns {body} or {error} (a schema that is not JSON is refused here, before
 * anything is sent, with the reason).
 */
export function buildRequest({ text, images = [], previousResponseId = null }) {
  const body = { model: $("model").value || "auto", input: turnInput(text, images), stream: true };
  if (previousResponseId) body.previous_response_id = previousResponseId;
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  const temperature = slider("temperature");
  if (temperature !== null) body.temperature = temperature;
  const topP = slider("top-p");
  if (topP !== null) body.top_p = topP;
  const max = Number.parseInt($("max-tokens").value, 10);
  if (Number.isFinite(max) && max > 0) body.max_output_tokens = max;
  const tools = [...document.querySelectorAll("input[name=tool]:checked")].map((box) => box.value);
  if (tools.length) body.tools = toolEntries(tools);
  const parsed = parseSchema($("schema").value);
  if (parsed.error) return { error: parsed.error };
  if (parsed.schema) {
    body.text = { format: { type: "json_schema", name: "playground_schema", schema: parsed.schema, strict: true } };
  }
  if ($("background").checked) {
    body.background = true;
    body.store = true;
  }
  return { body, schema: parsed.schema };
}

/** What a WebSocket `response.create` carries: the same body minus the HTTP-only transport fields (spec). */
export function websocketMessage(body) {
  const { stream, stream_options: streamOptions, background, ...rest } = body;
  void stream;
  void streamOptions;
  void background;
  return { type: "response.create", ...rest };
}

/** Wire the sampling sliders: show the value, mark them set once moved, reset to "default". */
export function initSampling() {
  const pairs = [["temperature", "temperature-value"], ["top-p", "top-p-value"]];
  const show = () => {
    for (const [id, out] of pairs) {
      const input = $(id);
      $(out).textContent = input.dataset.unset === "true" ? "default" : input.value;
    }
  };
  for (const [id] of pairs) {
    $(id).addEventListener("input", () => {
      $(id).dataset.unset = "false";
      show();
    });
  }
  $("reset-sampling").addEventListener("click", () => {
    for (const [id] of pairs) {
      $(id).dataset.unset = "true";
      $(id).value = $(id).max === "2" ? "1" : "1";
    }
    show();
  });
  show();
}

const TOOL_NOTE_NONE = "None selected: no server tool is offered, so the model answers from what it knows.";
// The seed platform's default: a request that lists no tools gets every server tool (tool_policy.py), so the
// gateway may still compute an answer first (a calculator card for arithmetic, the clock for a time question).
const TOOL_NOTE_PLATFORM = "None selected: in the platform dialect the gateway may run any of its server tools, " +
  "e.g. the calculator for arithmetic or current_datetime for a time question. Select some to offer only those.";

/** Say what the current tool selection means (all four run on the gateway, never in this page), for the dialect
 * the gateway reports (the #dialect text, filled in once /healthz answers). */
export function initToolNote() {
  const update = () => {
    const on = [...document.querySelectorAll("input[name=tool]:checked")].map((box) => box.value);
    const platform = $("dialect").textContent.trim() === "platform";
    $("tools-note").textContent = on.length === 0 ? (platform ? TOOL_NOTE_PLATFORM : TOOL_NOTE_NONE)
      : `The gateway runs ${on.join(", ")} when the question or the model calls for ${on.length === 1 ? "it" : "them"}.`;
  };
  for (const box of document.querySelectorAll("input[name=tool]")) box.addEventListener("change", update);
  new MutationObserver(update).observe($("dialect"), { childList: true, characterData: true, subtree: true });
  update();
}
