"""The SYNTHETIC hosted-tool transcripts ``tests/transcripts/hosted_tools_more.sse`` and ``hosted_tools_repaired.sse``:
built here from the shapes of the installed openai-python types (every item and event is validated against them), not
recorded. ``python tests/native/hosted_transcripts.py`` rewrites the files; test_hosted_transcripts.py checks they are
what this builds."""

from __future__ import annotations

import json
from pathlib import Path

from openai.types.responses import (
    ResponseComputerToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseStreamEvent,
)
from openai.types.responses.response_output_item import ImageGenerationCall, McpCall
from pydantic import TypeAdapter

EV = TypeAdapter(ResponseStreamEvent)

RID = "resp_synthetic_hosted_2"
BASE = {
    "id": RID,
    "object": "response",
    "created_at": 1755000000,
    "status": "in_progress",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "model": "gpt-5-mini",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "metadata": {},
    "usage": None,
}

reasoning = {
    "id": "rs_h2",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need the page."}],
    "encrypted_content": "gAAAAB-opaque",
}
ws = {
    "id": "ws_h2",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "open_page", "url": "https://example.org/sse"},
}
cc = {
    "id": "cu_h2",
    "type": "computer_call",
    "call_id": "call_cu",
    "status": "completed",
    "pending_safety_checks": [],
    "action": {"type": "click", "button": "left", "x": 10, "y": 20},
}
mcp = {
    "id": "mcp_h2",
    "type": "mcp_call",
    "status": "failed",
    "name": "ask",
    "server_label": "deepwiki",
    "arguments": '{"q":"x"}',
    "output": None,
    "error": {"type": "http_error", "code": 504, "message": "tool timed out"},
}
ig = {"id": "ig_h2", "type": "image_generation_call", "status": "completed", "result": "iVBORfinal2"}
text = "Done: the page explains SSE."
msg = {
    "id": "msg_h2",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
}
for _model, _item in (
    (ResponseReasoningItem, reasoning),
    (ResponseFunctionWebSearch, ws),
    (ResponseComputerToolCall, cc),
    (McpCall, mcp),
    (ImageGenerationCall, ig),
    (ResponseOutputMessage, msg),
):
    _model.model_validate(_item)


def stream(quirky: bool) -> str:
    out, seq = [], 0

    def emit(event: dict, *, validate: bool = True) -> None:
        nonlocal seq
        event = {"type": event["type"], "sequence_number": seq, **{k: v for k, v in event.items() if k != "type"}}
        seq += 1
        if validate:
            EV.validate_python(event)
        if quirky:  # llama.cpp's shape: no sequence numbers, no indices
            event = {k: v for k, v in event.items() if k not in ("sequence_number", "output_index", "content_index")}
        out.append(f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n")

    emit({"type": "response.created", "response": BASE})
    emit({"type": "response.in_progress", "response": BASE})
    # 0: reasoning with a summary
    emit({"type": "response.output_item.added", "output_index": 0, "item": {**reasoning, "summary": []}})
    emit(
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_h2",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        }
    )
    for piece in ("Need ", "the page."):
        emit(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_h2",
                "output_index": 0,
                "summary_index": 0,
                "delta": piece,
            }
        )
    emit(
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": "rs_h2",
            "output_index": 0,
            "summary_index": 0,
            "text": "Need the page.",
        }
    )
    emit(
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": "rs_h2",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": "Need the page."},
        }
    )
    emit({"type": "response.output_item.done", "output_index": 0, "item": reasoning})
    # 1: web search opening a page
    emit({"type": "response.output_item.added", "output_index": 1, "item": {**ws, "status": "in_progress"}})
    for stage in ("in_progress", "searching", "completed"):
        emit({"type": f"response.web_search_call.{stage}", "item_id": "ws_h2", "output_index": 1})
    emit({"type": "response.output_item.done", "output_index": 1, "item": ws})
    if quirky:  # a status event after the item's done: late, dropped (item.delta_after_done)
        emit({"type": "response.web_search_call.completed", "item_id": "ws_h2", "output_index": 1})
    # 2: computer call; the quirky stream sends only its done (item.done_without_added)
    if not quirky:
        emit({"type": "response.output_item.added", "output_index": 2, "item": {**cc, "status": "in_progress"}})
    emit({"type": "response.output_item.done", "output_index": 2, "item": cc})
    # 3: a failed MCP call
    emit(
        {
            "type": "response.output_item.added",
            "output_index": 3,
            "item": {**mcp, "status": "in_progress", "arguments": "", "error": None},
        }
    )
    emit({"type": "response.mcp_call.in_progress", "item_id": "mcp_h2", "output_index": 3})
    emit({"type": "response.mcp_call_arguments.delta", "item_id": "mcp_h2", "output_index": 3, "delta": '{"q":"x"}'})
    emit({"type": "response.mcp_call_arguments.done", "item_id": "mcp_h2", "output_index": 3, "arguments": '{"q":"x"}'})
    emit({"type": "response.mcp_call.failed", "item_id": "mcp_h2", "output_index": 3})
    emit({"type": "response.output_item.done", "output_index": 3, "item": mcp})
    # 4: image generation; the quirky stream never sends its done (closed from the terminal's output)
    emit(
        {
            "type": "response.output_item.added",
            "output_index": 4,
            "item": {**ig, "status": "in_progress", "result": None},
        }
    )
    emit({"type": "response.image_generation_call.in_progress", "item_id": "ig_h2", "output_index": 4})
    emit({"type": "response.image_generation_call.generating", "item_id": "ig_h2", "output_index": 4})
    emit({"type": "response.image_generation_call.completed", "item_id": "ig_h2", "output_index": 4})
    if not quirky:
        emit({"type": "response.output_item.done", "output_index": 4, "item": ig})
    # 5: the answer
    emit(
        {
            "type": "response.output_item.added",
            "output_index": 5,
            "item": {**msg, "status": "in_progress", "content": []},
        }
    )
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    emit(
        {
            "type": "response.content_part.added",
            "item_id": "msg_h2",
            "output_index": 5,
            "content_index": 0,
            "part": part,
        }
    )
    for piece in ("Done: ", "the page ", "explains SSE."):
        emit(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_h2",
                "output_index": 5,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )
    emit(
        {
            "type": "response.output_text.done",
            "item_id": "msg_h2",
            "output_index": 5,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        }
    )
    emit(
        {
            "type": "response.content_part.done",
            "item_id": "msg_h2",
            "output_index": 5,
            "content_index": 0,
            "part": {**part, "text": text},
        }
    )
    emit({"type": "response.output_item.done", "output_index": 5, "item": msg})
    usage = {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 8},
        "total_tokens": 50,
    }
    emit(
        {
            "type": "response.completed",
            "response": {**BASE, "status": "completed", "usage": usage, "output": [reasoning, ws, cc, mcp, ig, msg]},
        }
    )
    head = (
        ": SYNTHETIC transcript (not a recording): built by hand from the shapes of openai-python "
        "3.57's types (every item and event validated against them)"
    )
    if quirky:
        head += (
            "; sent in llama.cpp's shape (no sequence numbers, no indices) with a late event, a done without "
            "added and an item never done"
        )
    return head + "\n\n" + "".join(out)


TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"
FILES = {"hosted_tools_more": False, "hosted_tools_repaired": True}


if __name__ == "__main__":
    for name, quirky in FILES.items():
        (TRANSCRIPTS / f"{name}.sse").write_text(stream(quirky))
