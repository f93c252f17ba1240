"""The writer's rule checker reads each event as the writer built it (server/events/typed_events.py), not a decode of
the bytes it sends: these tests hold that input to exactly what a client decodes, for many kinds of stream in every
dialect, both at the moment of the check and again after the stream ended (so an emitted object edited afterwards, or
edited by the checker's own assembler, fails them).

The comparison lives here, in a test helper, never in production code. The streams are driven straight through the
writer into a memory store; no upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import pytest

from respstream.protocol import events as ev
from respstream.protocol.events import decode_event
from respstream.server.events.client_tool_kinds import ClientTool
from respstream.server.events.dialects import get_dialect
from respstream.server.events.response_object import new_response
from respstream.server.events.writer import ResponseWriter, WriterClosed
from respstream.server.inputs.requests import parse_request
from respstream.server.store.base import ResponseRecord
from respstream.server.store.memory import MemoryStore
from respstream.server.upstream.base import Usage

_CITATION = {"type": "url_citation", "start_index": 0, "end_index": 5, "url": "https://example.org/a",
             "title": "A"}


class _Recorded:
    """What the writer handed its checker: (bytes sent, the typed event or None when the checker decoded them)."""

    def __init__(self) -> None:
        self.admitted: list[tuple[bytes, ev.Event | None]] = []

    def typed(self) -> list[tuple[bytes, ev.Event]]:
        return [(data, event) for data, event in self.admitted if event is not None]


def _assert_same_as_sent(recorded: _Recorded) -> None:
    for data, event in recorded.typed():
        assert decode_event(data) == event, f"checker input differs from the bytes sent: {data[:200]!r}"


def _run(dialect: str, drive: Callable[[ResponseWriter], None]) -> _Recorded:
    """Drive one writer with ``drive``; every typed checker input must equal the decode of its bytes when admitted
    and still at the end."""
    recorded = _Recorded()
    original = ResponseWriter._admit

    def admit(self: ResponseWriter, event_type: str, data: bytes, event: Any) -> None:
        if event is not None:  # at the moment of the check
            assert decode_event(data) == event, f"checker input differs from the bytes sent: {data[:200]!r}"
        recorded.admitted.append((data, event))
        original(self, event_type, data, event)

    async def go() -> None:
        d = get_dialect(dialect)
        store = MemoryStore()
        record = ResponseRecord(id="resp_chk", status="in_progress", created_at=0.0, dialect=dialect)
        request = parse_request({"model": "m", "input": "hi", "stream": True, "metadata": {"k": "v"}},
                                server_tool_names=set(), dialect=dialect)
        response = new_response(record.id, request, created=1.0, model="m", dialect=d)
        await store.create(record)
        writer = ResponseWriter(record, dialect=d, store=store, response=response)
        with patch.object(ResponseWriter, "_admit", admit):
            try:
                writer.start()
                drive(writer)
            except WriterClosed:
                pass
            await writer.flush()
        assert writer.closed, "the stream was not ended"
        assert writer._checker is not None, "the checker objected to a stream the writer built"

    asyncio.run(go())
    _assert_same_as_sent(recorded)  # again, after everything: nothing emitted was edited afterwards
    return recorded


def _text(w: ResponseWriter) -> None:
    w.routing(model_id="m2", category="chat", source="rule", reasoning="short")
    w.text_delta("Hello")
    w.text_deltas([" wor", "ld", "!"])
    w.text_delta("é☃\"\\")
    w.complete(usage=Usage(input_tokens=3, output_tokens=5))


def _logprobs(w: ResponseWriter) -> None:
    w.text_delta("Hi", [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []}])
    w.text_delta(" there", [{"token": " there", "logprob": -0.1, "bytes": [32], "top_logprobs": []}])
    w.complete()


def _refusal(w: ResponseWriter) -> None:
    w.refusal_delta("I can't")
    w.refusal_delta(" help with that.")
    w.complete()


def _reasoning(w: ResponseWriter) -> None:
    w.reasoning_delta("Let me think")
    w.reasoning_delta(" about it.")
    w.text_delta("Answer")
    w.complete(usage=Usage(input_tokens=1, output_tokens=2, reasoning_tokens=1))


def _annotations(w: ResponseWriter) -> None:
    w.text_delta("Hello world, see the source.")
    w.close_message(annotations=[_CITATION, {**_CITATION, "start_index": 6, "end_index": 11}])
    w.text_delta("A second message.")
    w.complete()


def _rewrite(w: ResponseWriter) -> None:
    w.text_delta("draft text")
    w.close_message("Hello final", annotations=[_CITATION])
    w.complete()


def _client_tools(w: ResponseWriter) -> None:
    w.text_delta("Calling tools.")
    w.client_tool_call(call_id="c1", name="get_weather", arguments='{"city": "Paris"}')
    w.client_tool_call(call_id="c2", name="notes_add", arguments='{"input": "x"}',
                       tool=ClientTool(kind="custom", flat="notes_add", name="add", namespace="notes"))
    w.client_tool_call(call_id="c3", name="shell", arguments='{"commands": ["ls"], "timeout_ms": 5}',
                       tool=ClientTool(kind="shell", flat="shell", name="shell"))
    w.client_tool_call(call_id="c4", name="apply_patch", arguments='{"type": "create_file", "path": "a", "diff": "+"}',
                       tool=ClientTool(kind="apply_patch", flat="apply_patch", name="apply_patch"))
    w.complete()


def _server_tools(w: ResponseWriter) -> None:
    index = w.server_tool_started(call_id="s1", name="web_search", arguments='{"query": "q"}', query="q")
    w.server_tool_finished(index, output="results", status="completed", sources=["https://example.org/a"])
    index = w.server_tool_started(call_id="s2", name="fetch", arguments='{"url": "u"}')
    w.server_tool_finished(index, output="boom", status="failed")
    w.text_delta("Done.")
    w.complete()


def _foreign_items(w: ResponseWriter) -> None:
    # What other modules hand in (an upstream's passed-through item): decoded for the checker, as before.
    index = w.add_output_item({"id": "ws_1", "type": "web_search_call", "status": "in_progress",
                               "action": {"type": "search", "query": "q"}})
    w.emit_event("response.web_search_call.completed", {"item_id": "ws_1", "output_index": index})
    w.finish_output_item(index, {"id": "ws_1", "type": "web_search_call", "status": "completed",
                                 "action": {"type": "search", "query": "q"}})
    w.complete()


def _failed_mid_text(w: ResponseWriter) -> None:
    w.text_delta("partial")
    w.text_deltas([" an", "swer"])
    w.fail("upstream_error", "the upstream closed the connection")


def _failed_mid_tool(w: ResponseWriter) -> None:
    w.server_tool_started(call_id="s1", name="web_search", arguments="{}", query="q")
    w.fail("server_error", "boom")


def _cancelled(w: ResponseWriter) -> None:
    w.reasoning_delta("hmm")
    w.fail("cancelled", "cancelled by the client")


def _incomplete(w: ResponseWriter) -> None:
    w.text_delta("cut")
    w.text_delta(" short")
    w.complete(incomplete_reason="max_output_tokens")


def _empty(w: ResponseWriter) -> None:
    w.complete()


STREAMS = {
    "text": _text, "logprobs": _logprobs, "refusal": _refusal, "reasoning": _reasoning, "annotations": _annotations,
    "rewrite": _rewrite, "client_tools": _client_tools, "server_tools": _server_tools,
    "foreign_items": _foreign_items, "failed_mid_text": _failed_mid_text, "failed_mid_tool": _failed_mid_tool,
    "cancelled": _cancelled, "incomplete": _incomplete, "empty": _empty,
}


@pytest.mark.parametrize("dialect", ["platform", "openai", "openresponses"])
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_checker_reads_what_the_client_decodes(name: str, dialect: str) -> None:
    recorded = _run(dialect, STREAMS[name])
    typed = recorded.typed()
    # Not vacuous: the writer's own events are handed over typed (response.created and the terminal among them).
    assert typed, "no event reached the checker typed"
    kinds = {event.type for _, event in typed}
    assert "response.created" in kinds
    assert kinds & {"response.completed", "response.incomplete", "response.failed", "error"}
    if name != "foreign_items":  # the writer's own events: decoded only when the catalogue has no class for them
        for data, event in recorded.admitted:
            assert event is not None or isinstance(decode_event(data), ev.UnknownEvent), data[:120]


def test_what_other_modules_hand_in_is_decoded_for_the_checker() -> None:
    recorded = _run("openai", _foreign_items)
    decoded_types = {decode_event(data).type for data, event in recorded.admitted if event is None}
    assert {"response.output_item.added", "response.web_search_call.completed",
            "response.output_item.done"} <= decoded_types


def test_the_comparison_fails_when_an_emitted_object_is_edited_afterwards() -> None:
    # The helper's own check, seen failing: an item emitted by the writer and then edited in place.
    def edits_after_emitting(w: ResponseWriter) -> None:
        item = {"id": "ws_1", "type": "web_search_call", "status": "in_progress",
                "action": {"type": "search", "query": "q"}}
        index = w._add_item(item)
        item["action"]["query"] = "changed"  # what the writer must never do (a nested object edited in place)
        w._done_item(index, {**item, "status": "completed"})
        w.complete()

    with pytest.raises(AssertionError, match="checker input differs"):
        _run("openai", edits_after_emitting)


def test_the_checker_still_objects_to_a_writer_bug() -> None:
    # Typed input still meets every rule: a second output_item.added for the same index ends the stream.
    def duplicate_item(w: ResponseWriter) -> None:
        item = {"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "c", "name": "f",
                "arguments": ""}
        w._emit("response.output_item.added", {"output_index": 0, "item": item})
        with pytest.raises(WriterClosed, match=r"item\.duplicate_added"):
            w._emit("response.output_item.added", {"output_index": 0, "item": dict(item)})
        raise WriterClosed("ended")

    with pytest.raises(AssertionError, match="the checker objected"):
        _run("openai", duplicate_item)


def test_a_field_of_the_wrong_type_is_judged_as_the_client_decodes_it() -> None:
    # Not convertible to its class: the checker gets the lenient decode of the bytes, which names the field.
    seen: list[ev.Event | None] = []

    def wrong_type(w: ResponseWriter) -> None:
        original = ResponseWriter._admit

        def admit(self: ResponseWriter, event_type: str, data: bytes, event: Any) -> None:
            seen.append(event)
            original(self, event_type, data, event)

        item = {"id": "m", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        with patch.object(ResponseWriter, "_admit", admit), pytest.raises(
                WriterClosed, match="`output_index` has the wrong JSON type"):
            w._emit("response.output_item.added", {"output_index": "0", "item": item})
        assert seen[0] is None  # handed over undecided: the checker decoded the bytes itself
        raise WriterClosed("ended")

    with pytest.raises(AssertionError, match="the checker objected"):
        _run("openai", wrong_type)
