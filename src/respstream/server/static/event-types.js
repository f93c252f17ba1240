// Every event type name the page knows (OpenAI's 58, the platform's two, their other dialects' names, keepalive),
// for EventSource listeners.
export const EVENT_TYPES = [
  "response.created",
  "response.queued",
  "response.in_progress",
  "response.completed",
  "response.incomplete",
  "response.failed",
  "error",
  "response.output_item.added",
  "response.output_item.done",
  "response.content_part.added",
  "response.content_part.done",
  "response.output_text.delta",
  "response.output_text.done",
  "response.output_text.annotation.added",
  "response.refusal.delta",
  "response.refusal.done",
  "response.function_call_arguments.delta",
  "response.function_call_arguments.done",
  "response.custom_tool_call_input.delta",
  "response.custom_tool_call_input.done",
  "response.reasoning_summary_part.added",
  "response.reasoning_summary_part.done",
  "response.reasoning_summary_text.delta",
  "response.reasoning_summary_text.done",
  "response.reasoning_text.delta",
  "response.reasoning_text.done",
  "response.web_search_call.in_progress",
  "response.web_search_call.searching",
  "response.web_search_call.completed",
  "response.file_search_call.in_progress",
  "response.file_search_call.searching",
  "response.file_search_call.completed",
  "response.code_interpreter_call.in_progress",
  "response.code_interpreter_call_code.delta",
  "response.code_interpreter_call_code.done",
  "response.code_interpreter_call.interpreting",
  "response.code_interpreter_call.completed",
  "response.image_generation_call.in_progress",
  "response.image_generation_call.generating",
  "response.image_generation_call.partial_image",
  "response.image_generation_call.completed",
  "response.mcp_list_tools.in_progress",
  "response.mcp_list_tools.completed",
  "response.mcp_list_tools.failed",
  "response.mcp_call.in_progress",
  "response.mcp_call_arguments.delta",
  "response.mcp_call_arguments.done",
  "response.mcp_call.completed",
  "response.mcp_call.failed",
  "response.shell_call_command.added",
  "response.shell_call_command.delta",
  "response.shell_call_command.done",
  "response.shell_call_output_content.delta",
  "response.shell_call_output_content.done",
  "response.audio.delta",
  "response.audio.done",
  "response.audio.transcript.delta",
  "response.audio.transcript.done",
  "response.routing.completed",
  "response.rewrite.in_progress",
  "respstream:response.routing.completed",
  "respstream:response.rewrite.in_progress",
  "response.reasoning.delta",
  "response.reasoning.done",
  "keepalive",
];

// The `openresponses` dialect prefixes our extension events (`respstream:response.routing.completed`) and names
// reasoning deltas `response.reasoning.delta`. The page's rules and views work on one canonical name.
const EXTENSION_PREFIX = "respstream:";
const ALIASES = {
  "response.reasoning.delta": "response.reasoning_text.delta",
  "response.reasoning.done": "response.reasoning_text.done",
};

/** The canonical (unprefixed, OpenAI-named) type of an event type name. */
export function canonicalType(type) {
  if (typeof type !== "string") return type;
  const bare = type.startsWith(EXTENSION_PREFIX) ? type.slice(EXTENSION_PREFIX.length) : type;
  return ALIASES[bare] ?? bare;
}

/** The event family the timeline filter uses. */
export function eventFamily(type) {
  const t = canonicalType(type) || "";
  if (t === "error" || /^response\.(created|queued|in_progress|completed|incomplete|failed)$/.test(t)) return "lifecycle";
  if (/^response\.(routing|rewrite)\./.test(t) || t === "keepalive" || (type || "").startsWith(EXTENSION_PREFIX)) {
    return "extension";
  }
  if (/reasoning/.test(t)) return "reasoning";
  if (/^response\.(output_text|content_part|refusal)\./.test(t)) return "text";
  if (/^response\.output_item\./.test(t)) return "items";
  if (/call|mcp|tool/.test(t)) return "tools";
  return "other";
}

