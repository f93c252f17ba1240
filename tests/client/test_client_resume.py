"""Dropped connections: background streams resume with no duplicate and no gap; foreground ones never re-POST."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from client_helpers import RUNNERS, fast_policy

from fakes.replay_server import Plan, ReplayServer, text_transcript, tool_transcript
from respstream.client import NotFoundError, ServerError
from respstream.errors import StreamTruncated

BACKGROUND = text_transcript("resp_bg", ["The ", "quick ", "brown ", "fox ", "jumps", "."], background=True)
FOREGROUND = text_transcript("resp_fg", ["The ", "quick ", "brown ", "fox ", "jumps", "."])
N = len(BACKGROUND.events)


def _uncut(transcript: Any) -> dict[str, Any]:
    with ReplayServer(transcript) as srv:
        seen = RUNNERS["sync"](srv.base_url, input="hi", background=True)
    assert seen.result is not None and seen.error is None
    return seen.result.to_json()


UNCUT = _uncut(BACKGROUND)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cut_mode", ["eof", "reset"])
@pytest.mark.parametrize("cut", range(1, N))
def test_background_cut_anywhere_resumes_to_the_same_result(
    mode: str, cut_mode: Literal["eof", "reset"], cut: int
) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=cut, cut_mode=cut_mode))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True)
        requests = list(srv.requests)
    assert seen.error is None, seen.error
    assert seen.seqs == list(range(N))  # every event once, in order: no duplicate, no gap
    assert seen.result is not None and seen.result.to_json() == UNCUT
    assert seen.result.violations == []
    assert [r.method for r in requests] == ["POST", "GET"]  # one POST, then a resume, never a second POST
    assert requests[1].path == "/v1/responses/resp_bg"
    assert requests[1].query == {"stream": "true", "starting_after": str(cut - 1)}
    assert requests[1].headers["last-event-id"] == str(cut - 1)
    assert seen.resumes == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_background_cut_after_every_event_still_completes(mode: str) -> None:
    # Each connection delivers one event then drops mid-way through the next one: 13 connections in all.
    tail = BACKGROUND.frame(BACKGROUND.events[1])[:20]
    with ReplayServer(BACKGROUND) as srv:
        srv.add(*(Plan(cut_after=1, cut_mode="reset", partial_tail=tail) for _ in range(N)))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True,
                             policy=fast_policy(max_resume_attempts=2))
        starts = [r.query.get("starting_after") for r in srv.requests]
    assert seen.error is None, seen.error
    assert seen.seqs == list(range(N))
    assert seen.result is not None and seen.result.to_json() == UNCUT
    assert starts == [None, *(str(i) for i in range(N - 1))]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cut", range(0, N))
def test_foreground_cut_raises_truncated_with_the_partial_response(mode: str, cut: int) -> None:
    with ReplayServer(FOREGROUND) as srv:
        srv.add(Plan(cut_after=cut, cut_mode="eof" if cut % 2 else "reset"))
        seen = RUNNERS[mode](srv.base_url, input="hi")
        methods = [r.method for r in srv.requests]
    assert methods == ["POST"]  # a foreground stream is never re-POSTed
    assert isinstance(seen.error, StreamTruncated)
    assert seen.seqs == list(range(cut))
    expected_text = "".join(e["delta"] for e in FOREGROUND.events[:cut] if e["type"].endswith("text.delta"))
    assert seen.error.partial is not None
    assert seen.error.partial.streamed_text == expected_text
    assert seen.error.partial.status == "truncated"
    assert seen.error.last_sequence_number == (cut - 1 if cut else None)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_background_cut_before_the_response_id_is_known_cannot_resume(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=0))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True)
        methods = [r.method for r in srv.requests]
    assert methods == ["POST"]
    assert isinstance(seen.error, StreamTruncated)
    assert "cannot be resumed" in str(seen.error)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_gives_up_after_bounded_attempts(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=4), *(Plan(status=503, body=b"busy", content_type="text/plain") for _ in range(10)))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True, policy=fast_policy(max_resume_attempts=3))
        methods = [r.method for r in srv.requests]
    assert methods == ["POST", "GET", "GET", "GET"]  # the drop, then 3 resume attempts in all, each failing
    assert isinstance(seen.error, StreamTruncated)
    assert isinstance(seen.error.__cause__, ServerError)
    assert seen.error.last_sequence_number == 3
    assert seen.seqs == [0, 1, 2, 3]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_not_found_is_not_retried(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=4), Plan(status=404, body=b'{"error":{"code":"response_not_found","message":"gone"}}'))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True)
        methods = [r.method for r in srv.requests]
    assert methods == ["POST", "GET"]
    assert isinstance(seen.error, StreamTruncated)
    assert isinstance(seen.error.__cause__, NotFoundError)
    assert seen.error.__cause__.error_code == "response_not_found"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_by_id_streams_only_what_comes_after(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        seen = RUNNERS[mode](srv.base_url, resume=("resp_bg", 6))
        request = srv.requests[0]
    assert (request.method, request.query) == ("GET", {"stream": "true", "starting_after": "6"})
    assert seen.seqs == list(range(7, N))
    assert seen.result is not None and seen.result.status == "completed"
    assert seen.result.output_text == "The quick brown fox jumps."  # the terminal response carries the final text
    assert not [v for v in seen.result.violations if v.code.startswith("sequence.")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resume_past_the_terminal_gets_204_and_ends_cleanly(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        seen = RUNNERS[mode](srv.base_url, resume=("resp_bg", N - 1))
        statuses = len(srv.requests)
    assert statuses == 1
    assert seen.events == []
    # Nothing arrived, so there is no terminal to report: the outcome says so instead of hanging or retrying.
    assert isinstance(seen.error, StreamTruncated)
    assert seen.error.last_sequence_number is None


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_server_that_ignores_starting_after_cannot_make_us_deliver_duplicates(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=5), Plan(ignore_starting_after=True))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True)
    assert seen.seqs == list(range(N))
    assert seen.result is not None and seen.result.output_text == UNCUT["output_text"]
    assert {v.code for v in seen.result.violations} == {"sequence.duplicate"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tool_call_transcript_resumes_mid_arguments(mode: str) -> None:
    transcript = tool_transcript("resp_tool_bg", background=True)
    with ReplayServer(transcript) as srv:
        full = RUNNERS[mode](srv.base_url, input="6*7?", background=True)
        srv.add(Plan(cut_after=3, cut_mode="reset"))
        cut = RUNNERS[mode](srv.base_url, input="6*7?", background=True)
    assert full.result is not None and cut.result is not None
    assert cut.result.to_json() == full.result.to_json()
    assert cut.result.tool_calls[0]["arguments"] == '{"expression":"6*7"}'


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_x_response_id_header_makes_even_a_cut_before_created_resumable(mode: str) -> None:
    with ReplayServer(BACKGROUND) as srv:
        srv.add(Plan(cut_after=0, headers={"x-response-id": "resp_bg"}))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True)
        requests = [(r.method, r.query.get("starting_after")) for r in srv.requests]
    assert seen.error is None
    assert seen.seqs == list(range(N))
    assert requests == [("POST", None), ("GET", None)]  # nothing delivered yet: replay from the start


TOOL = tool_transcript("resp_tool_bg", background=True)


CURSORS = [(t, after) for t in (BACKGROUND, TOOL) for after in range(-1, len(t.events) - 1)]


@pytest.mark.parametrize(("transcript", "after"), CURSORS, ids=[f"{t.response_id}-{a}" for t, a in CURSORS])
def test_resume_by_id_at_every_cursor_has_no_false_violations(transcript: Any, after: int) -> None:
    # A fresh core that starts mid-stream never saw the items' `added` events or their first deltas: nothing that
    # depends on them is judged, and the terminal response still gives the whole answer.
    with ReplayServer(transcript) as srv:
        full = RUNNERS["sync"](srv.base_url, input="hi", background=True)
        seen = RUNNERS["sync"](srv.base_url, resume=(transcript.response_id, after))
    assert full.result is not None and seen.result is not None, seen.error
    assert seen.seqs == list(range(after + 1, len(transcript.events)))
    assert seen.result.violations == []
    assert seen.result.status == "completed"
    assert seen.result.output_text == full.result.output_text
    assert seen.result.tool_calls == full.result.tool_calls


@pytest.mark.parametrize("cut", range(1, len(TOOL.events)))
def test_tool_transcript_cut_anywhere_continues_the_same_core_cleanly(cut: int) -> None:
    with ReplayServer(TOOL) as srv:
        srv.add(Plan(cut_after=cut, cut_mode="reset"))
        seen = RUNNERS["sync"](srv.base_url, input="6*7?", background=True)
    assert seen.error is None, seen.error
    assert seen.seqs == list(range(len(TOOL.events)))
    assert seen.result is not None and seen.result.violations == []
    assert seen.result.tool_calls[0]["arguments"] == '{"expression":"6*7"}'
