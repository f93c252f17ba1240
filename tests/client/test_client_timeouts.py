"""Idle-read timeout: a stalled stream is detected; keep-alive comments and slow drips are not stalls."""

from __future__ import annotations

import time

import pytest
from client_helpers import RUNNERS

from fakes.replay_server import Plan, ReplayServer, text_transcript
from respstream.errors import StreamTimeout

IDLE = 0.3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stalled_foreground_stream_times_out_within_the_idle_timeout(mode: str) -> None:
    with ReplayServer(text_transcript("resp_stall")) as srv:
        srv.add(Plan(stall_after=6))
        started = time.monotonic()
        seen = RUNNERS[mode](srv.base_url, input="hi", idle_timeout=IDLE)
        elapsed = time.monotonic() - started
    assert isinstance(seen.error, StreamTimeout)
    assert seen.error.last_sequence_number == 5
    assert seen.error.partial is not None and seen.error.partial.streamed_text == "Hello"
    assert IDLE <= elapsed < IDLE + 1.5  # detected by the idle timer, not by the server's 20 s stall ending
    assert "no data for 0.3s" in str(seen.error)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stalled_background_stream_resumes(mode: str) -> None:
    transcript = text_transcript("resp_stall_bg", background=True)
    with ReplayServer(transcript) as srv:
        srv.add(Plan(stall_after=6))
        seen = RUNNERS[mode](srv.base_url, input="hi", background=True, idle_timeout=IDLE)
        starts = [r.query.get("starting_after") for r in srv.requests]
    assert seen.error is None
    assert seen.result is not None and seen.result.output_text == "Hello, world."
    assert seen.seqs == list(range(len(transcript.events)))
    assert starts == [None, "5"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_keep_alive_comments_reset_the_idle_timer(mode: str) -> None:
    # 6 comments 0.1 s apart: 0.6 s without an event, twice the idle timeout, but never 0.3 s without a byte.
    with ReplayServer(text_transcript("resp_ka")) as srv:
        srv.add(Plan(keepalive_after=6, keepalive_count=6, keepalive_interval=0.1))
        started = time.monotonic()
        seen = RUNNERS[mode](srv.base_url, input="hi", idle_timeout=IDLE)
        elapsed = time.monotonic() - started
    assert seen.error is None, seen.error
    assert seen.result is not None and seen.result.status == "completed"
    assert elapsed >= 0.5  # the comments really spanned more than the idle timeout
    assert "keepalive" not in seen.types  # comments are not events


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_drip_one_byte_at_a_time_assembles_the_same_response(mode: str) -> None:
    transcript = text_transcript("resp_drip", ["a", "b"])
    with ReplayServer(transcript) as srv:
        whole = RUNNERS[mode](srv.base_url, input="hi")
        srv.add(Plan(drip=True, drip_delay=0.0002))
        drip = RUNNERS[mode](srv.base_url, input="hi", idle_timeout=IDLE)
    assert drip.error is None, drip.error
    assert drip.result is not None and whole.result is not None
    assert drip.result.to_json() == whole.result.to_json()
    assert drip.seqs == whole.seqs == list(range(len(transcript.events)))
