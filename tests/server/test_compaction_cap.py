"""The compaction summary's output cap (``limits.compaction_max_output_tokens``): a SIMULATED model that never stops
(tests/fakes/chat_server.py: words without end, then a stall) is stopped at the cap, and the compaction fails with
an error naming the key, for ``context_management``, a ``compaction_trigger`` item and ``/v1/responses/compact``; a
summary the upstream itself ends short (``length``) is refused the same way, never used half-written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, Sleep, Stall, Step, finish, text
from respstream.server.config import Config, ConfigError
from respstream.server.http.app import create_app
from respstream.server.request_limits import WorkLimits

from .helpers import ServerThread

CAP = 40
LONG = " ".join(f"marigold{i}" for i in range(2400))  # past a 1,000-token threshold by any count
COMPACT = [{"type": "compaction", "compact_threshold": 1000}]
HISTORY = [{"role": "user", "content": f"My garden notes: {LONG}"}, {"role": "assistant", "content": "Noted."},
           {"role": "user", "content": "What did I plant?"}]


def _never_stops() -> list[Step]:
    """Words, one a chunk (a pause between so each is its own read), three times the cap, then nothing, ever."""
    words: list[Step] = []
    for i in range(3 * CAP):
        words += [text(f"again{i} "), Sleep(0.002)]
    return [*words, Stall()]


@pytest.fixture(scope="module")
def chat() -> Iterator[tuple[httpx.Client, FakeChatCompletionsServer]]:
    with FakeChatCompletionsServer(models=["fake-model"]) as fake:
        config = Config(dialect="openai", upstreams=[fake.url],
                        upstream_options={"retries": 0, "idle_timeout": 60.0},
                        limits={"compaction_max_output_tokens": CAP})
        with ServerThread(create_app(config), lifespan="on") as server, \
                httpx.Client(base_url=server.url, timeout=60) as client:
            yield client, fake


def _stopped_at_the_cap(fake: FakeChatCompletionsServer, error: dict[str, Any], started: float) -> None:
    assert error["code"] == "summary_incomplete", error
    assert f"limits.compaction_max_output_tokens ({CAP})" in error["message"], error
    assert time.monotonic() - started < 30  # stopped, not ended by an idle timer
    deadline = time.monotonic() + 5
    while fake.client_disconnects < 1 and time.monotonic() < deadline:  # the upstream stream was closed
        time.sleep(0.02)
    assert fake.client_disconnects >= 1


@pytest.mark.parametrize("stream", [False, True])
def test_context_management_summary_that_never_stops_fails_at_the_cap(
        chat: tuple[httpx.Client, FakeChatCompletionsServer], stream: bool) -> None:
    client, fake = chat
    fake.reset()
    fake.script(*_never_stops())
    fake.script(text("Never asked for."), finish(), Done())
    started = time.monotonic()
    answer = client.post("/v1/responses", json={"model": "fake-model", "input": HISTORY, "stream": False,
                                                "context_management": COMPACT})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "failed" and body["output"] == [], body
    _stopped_at_the_cap(fake, body["error"], started)
    assert body["error"]["message"].startswith("context compaction failed: ")
    assert len(fake.requests) == 1  # no answer was generated from a half-written summary


def test_compaction_trigger_summary_that_never_stops_fails_at_the_cap(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(*_never_stops())
    started = time.monotonic()
    answer = client.post("/v1/responses", json={"model": "fake-model", "stream": False,
                                                "input": [*HISTORY, {"type": "compaction_trigger"}]})
    body = answer.json()
    assert body["status"] == "failed", body
    _stopped_at_the_cap(fake, body["error"], started)


def test_responses_compact_summary_that_never_stops_is_a_502_naming_the_cap(
        chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(*_never_stops())
    started = time.monotonic()
    answer = client.post("/v1/responses/compact", json={"model": "fake-model", "input": HISTORY})
    assert answer.status_code == 502, answer.text
    _stopped_at_the_cap(fake, answer.json()["error"], started)


def test_a_summary_the_upstream_cut_short_is_refused(chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(text("The user planted mari"), finish("length"), Done())
    answer = client.post("/v1/responses/compact", json={"model": "fake-model", "input": HISTORY})
    assert answer.status_code == 502, answer.text
    error = answer.json()["error"]
    assert error["code"] == "summary_incomplete"
    assert "the upstream ended it: max_output_tokens" in error["message"], error


def test_a_summary_within_the_cap_is_used(chat: tuple[httpx.Client, FakeChatCompletionsServer]) -> None:
    client, fake = chat
    fake.reset()
    fake.script(*(text(f"w{i} ") for i in range(CAP)), finish(), Done())  # exactly the cap: kept
    answer = client.post("/v1/responses/compact", json={"model": "fake-model", "input": HISTORY})
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][-1]["type"] == "compaction"


def test_the_cap_is_a_positive_integer_in_the_limits_table() -> None:
    assert WorkLimits().compaction_max_output_tokens == 4096
    assert WorkLimits.from_mapping({"compaction_max_output_tokens": 100}).compaction_max_output_tokens == 100
    for bad in (0, 1.5, "100"):
        with pytest.raises((ValueError, ConfigError), match=r"limits\.compaction_max_output_tokens"):
            Config(upstreams=["scripted:1"], limits={"compaction_max_output_tokens": bad}).validate()
