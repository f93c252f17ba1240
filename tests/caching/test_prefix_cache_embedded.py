"""The embedded model's prompt-prefix cache end to end on the real small model (SmolLM2 through llama.cpp): a second
session's prompt sharing a long prefix is read from the KV cache after a different prompt in between and after a
gateway restart (llama.cpp's slot state saved to disk and restored), visible in ``cached_tokens`` and in llama.cpp's
own prompt timings (its ``/metrics`` ``prompt_seconds_total``); the disk budget evicts the least recently used state;
a damaged saved state is forgotten without failing the request."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

pytestmark = pytest.mark.model

if not EmbeddedUpstream.available("small"):
    pytest.skip("embedded model not installed (run `make install-model`)", allow_module_level=True)

# ~750 tokens of instructions each: long enough to be saved (min 256 here), short enough to read in seconds.
TOOLS_PROMPT = "You are a coding agent. " + " ".join(
    f"Tool rule {i}: call tool_{i} only with a path under /work/{i}." for i in range(55))
OTHER_PROMPT = "You are a poet of the sea. " + " ".join(
    f"Verse {i} must rhyme wave {i} with cave {i}." for i in range(60))


def _upstream(directory: Path, **options: Any) -> EmbeddedUpstream:
    # One slot: the prompt in between really replaces the first one in llama.cpp's only slot.
    return EmbeddedUpstream(model_size="small", n_parallel=1, n_ctx=4096, prefix_cache_dir=directory,
                            prefix_cache_min_tokens=256, **options)


class Gateway:
    """The gateway over one embedded upstream; ``ask`` returns (usage, llama.cpp prompt seconds of that request)."""

    def __init__(self, upstream: EmbeddedUpstream) -> None:
        self.upstream = upstream
        app = create_app(Config(dialect="openai", upstreams=["embedded"], rewrite={"steps": []}),
                         Components(upstreams=[upstream]))
        self.server = ServerThread(app, start_timeout=120)

    def __enter__(self) -> Gateway:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def _prompt_seconds(self) -> float:
        if self.upstream.address is None:
            return 0.0
        text = httpx.get(f"{self.upstream.address}/metrics", timeout=10).text
        found = re.search(r"^llamacpp:prompt_seconds_total (\S+)", text, re.M)
        return float(found.group(1)) if found else 0.0

    def ask(self, instructions: str, question: str, session: str) -> tuple[dict[str, Any], float]:
        before = self._prompt_seconds()
        response = httpx.post(f"{self.server.base_url}/responses", timeout=120, json={
            "instructions": instructions, "input": question, "prompt_cache_key": session, "stream": True,
            "max_output_tokens": 2, "temperature": 0})
        assert response.status_code == 200, response.text
        core = StreamCore(dialect="openai")
        core.feed(response.content)
        core.close()
        assert core.violations == [] and core.result.usage is not None, core.violations
        self.settle()
        return core.result.usage, self._prompt_seconds() - before

    def settle(self) -> None:
        """Wait until the last request gave its slot back (its slot save runs after the response)."""
        slots = self.upstream.slots
        assert slots is not None
        deadline = time.monotonic() + 60
        while not slots.idle and time.monotonic() < deadline:  # (saves run on the gateway's loop, in its thread)
            time.sleep(0.05)
        assert slots.idle


def _saved(directory: Path) -> list[Path]:
    return sorted(directory.glob("*/*.bin"))


def test_shared_prefix_is_reused_across_sessions_and_across_a_restart(tmp_path: Path) -> None:
    with Gateway(_upstream(tmp_path)) as gateway:
        first, first_seconds = gateway.ask(TOOLS_PROMPT, "List the files.", "session-1")
        assert first["input_tokens"] > 600 and first["input_tokens_details"]["cached_tokens"] < 32
        assert len(_saved(tmp_path)) == 1  # the long prompt's slot state, on disk
        other, _ = gateway.ask(OTHER_PROMPT, "Write a verse.", "session-2")  # takes the only slot
        assert other["input_tokens_details"]["cached_tokens"] < 32
        second, second_seconds = gateway.ask(TOOLS_PROMPT, "Open the readme.", "session-3")
    shared = second["input_tokens"] - 16
    assert second["input_tokens_details"]["cached_tokens"] > shared * 0.9
    assert second_seconds < first_seconds / 3, (first_seconds, second_seconds)

    # A new gateway process over the same directory: llama.cpp starts empty, the saved state is restored.
    restarted = _upstream(tmp_path)
    with Gateway(restarted) as gateway:
        third, third_seconds = gateway.ask(TOOLS_PROMPT, "Run the tests.", "session-4")
    assert restarted.slots is None  # (closed with the gateway)
    assert third["input_tokens_details"]["cached_tokens"] > shared * 0.9
    assert third_seconds < first_seconds / 3, (first_seconds, third_seconds)


def test_disk_budget_evicts_the_least_recently_used_state(tmp_path: Path) -> None:
    # ~750 tokens x ~23 KiB of SmolLM2 KV cache a token = ~17 MB a state: the budget holds one, not two.
    upstream = _upstream(tmp_path, prefix_cache_max_bytes=30_000_000)
    with Gateway(upstream) as gateway:
        gateway.ask(TOOLS_PROMPT, "List the files.", "a")
        first = _saved(tmp_path)
        assert len(first) == 1 and 5_000_000 < first[0].stat().st_size < 30_000_000
        gateway.ask(OTHER_PROMPT, "Write a verse.", "b")
        after = _saved(tmp_path)
        slots = upstream.slots
        assert slots is not None and slots.stats["evictions"] == 1 and slots.stats["saves"] == 2
    assert len(after) == 1 and after != first  # the older state went, the newer one stayed
    assert not first[0].with_suffix(".json").exists()


def test_a_damaged_saved_state_is_forgotten_and_the_request_still_answers(tmp_path: Path) -> None:
    with Gateway(_upstream(tmp_path)) as gateway:
        gateway.ask(TOOLS_PROMPT, "List the files.", "a")
    (saved,) = _saved(tmp_path)
    saved.write_bytes(b"not a llama.cpp slot file")
    restarted = _upstream(tmp_path)
    with Gateway(restarted) as gateway:
        usage, _ = gateway.ask(TOOLS_PROMPT, "Open the readme.", "b")
        slots = restarted.slots
        assert slots is not None and slots.stats["restore_failures"] == 1
    assert usage["output_tokens"] >= 1 and usage["input_tokens_details"]["cached_tokens"] < 32
    # The damaged state was deleted, and this request's own state was saved in its place.
    assert [p.read_bytes()[:25] != b"not a llama.cpp slot file" for p in _saved(tmp_path)] == [True]
