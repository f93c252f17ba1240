"""Differential test: the official ``openai`` SDK as an oracle (spec §8).

Each transcript goes through the SDK's own HTTP client (it imports ``httpx2``; a MockTransport serves the bytes)
into ``client.responses.stream(...).get_final_response()``, and through our ``StreamCore``. Where the SDK finishes,
our ``output_text`` and output items equal its. Where it cannot, the test records what it does and what we do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai import OpenAI

from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.stream import StreamCore

# Transcripts the SDK finishes (it returns the server's response.completed object).
SDK_FINISHES = [
    "annotations", "completed_status_incomplete", "done_mismatch", "done_sentinel", "duplicate",
    "events_after_terminal", "gap", "hosted_tools", "keepalive", "no_sequence_number", "output_mismatch",
    "parallel_function_calls", "reasoning", "refusal", "reorder_beyond_window", "reorder_within_window", "text",
    "text_crlf_bom", "text_data_only",
]  # fmt: skip


def client_for(data: bytes) -> OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return OpenAI(api_key="sk-test", base_url="http://sdk.invalid/v1", max_retries=0,
                  http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def sdk_final(data: bytes) -> Any:
    with client_for(data).responses.stream(model="gpt-4.1-mini", input="hi") as stream:
        return stream.get_final_response()


def ours(data: bytes, window: int = 64) -> AssembledResponse:
    core = StreamCore(window=window)
    core.feed(data)
    core.close()
    return core.result


def essentials(item: dict[str, Any]) -> dict[str, Any]:
    """The fields both sides must agree on (the SDK's parsed models add their own helper fields)."""
    keys = ("type", "id", "call_id", "name", "arguments", "status", "server_label", "code", "result", "input")
    found = {k: item[k] for k in keys if item.get(k) is not None}
    if isinstance(item.get("content"), list):
        found["content"] = [
            {k: part.get(k) for k in ("type", "text", "refusal", "annotations") if part.get(k) is not None}
            for part in item["content"]
        ]
    if isinstance(item.get("summary"), list):
        found["summary"] = [part.get("text") for part in item["summary"]]
    return found


@pytest.mark.parametrize("name", SDK_FINISHES)
def test_same_final_text_and_items_as_the_sdk(name: str, transcripts: Path) -> None:
    data = (transcripts / f"{name}.sse").read_bytes()
    final = sdk_final(data)
    mine = ours(data, window=2 if name == "reorder_beyond_window" else 64)
    assert mine.output_text == final.output_text
    theirs = [essentials(item.model_dump(mode="json")) for item in final.output]
    assert [essentials(item) for item in mine.output] == theirs


def test_arguments_only_in_done_we_assemble_what_the_sdk_drops(transcripts: Path) -> None:
    data = (transcripts / "function_call_args_only_done.sse").read_bytes()
    assert sdk_final(data).output == []  # it returns the server's empty output and loses the call
    assert [c["arguments"] for c in ours(data).tool_calls] == ['{"q":"x"}']


@pytest.mark.parametrize(
    ("name", "sdk_error", "status"),
    [
        # A nested `error` raises APIError: the response.failed after it (and its error object) is never seen.
        ("failed_after_error", openai.APIError, "failed"),
        ("cancelled_failed", openai.APIError, "cancelled"),
        # A flat `error` is yielded as an event, then "no response.completed": it cannot tell error from truncation.
        ("flat_error", RuntimeError, "error"),
        ("cancelled_error", RuntimeError, "cancelled"),
        ("failed_mid_message", RuntimeError, "failed"),
        ("incomplete", RuntimeError, "incomplete"),
        # A cut stream: the same RuntimeError as every other non-completed outcome.
        ("truncated_mid_text", RuntimeError, "truncated"),
        ("truncated_partial_block", RuntimeError, "truncated"),
        # The seed platform opens messages with content_part.added alone: the SDK's accumulator rejects it.
        ("platform_seed", RuntimeError, "completed"),
        ("platform_rewrite", RuntimeError, "completed"),
        ("platform_web_search", RuntimeError, "completed"),
    ],
)
def test_where_the_sdk_cannot_finish(name: str, sdk_error: type[Exception], status: str, transcripts: Path) -> None:
    data = (transcripts / f"{name}.sse").read_bytes()
    with pytest.raises(sdk_error):
        sdk_final(data)
    assert ours(data).status == status  # we name the outcome and keep the partial output


def test_sdk_on_html_page_reports_no_completion_we_report_bad_input(transcripts: Path) -> None:
    from respstream.errors import BadInputError

    data = (transcripts / "html_page.sse").read_bytes()
    with pytest.raises(RuntimeError, match=r"response\.completed"):
        sdk_final(data)  # an HTML 502 page looks like an empty stream to it
    with pytest.raises(BadInputError) as info:
        ours(data)
    assert info.value.event_number == 1 and info.value.byte_offset == 1
