"""The slot cache's decisions against a SIMULATED llama.cpp server (slot save/restore and /apply-template only, no
model): what is saved and when, what is restored and when not, a refused restore, no free slot. Fast; the real
llama.cpp is exercised in test_prefix_cache_embedded.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.asgi_body import request_body
from fakes.server_thread import ServerThread
from respstream.server.upstream.base import GenerationRequest, UpstreamError, Usage
from respstream.server.upstream.embedded.slot_cache import SlotCache


class FakeLlamaSlots:
    """SIMULATED llama.cpp slot endpoints: a slot "state" is the prompt text it last held; save writes it to
    ``<dir>/<filename>``, restore reads it back (refused with 400 unless it starts with ``STATE:``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.slots: dict[int, str] = {}
        self.calls: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        data = json.loads(body or b"{}")
        path, query = scope["path"], scope.get("query_string", b"").decode()
        status, answer = 404, {"error": "not found"}
        if path == "/apply-template":
            status, answer = 200, {"prompt": "".join(m["content"] for m in data["messages"])}
        elif path.startswith("/slots/"):
            slot = int(path.rsplit("/", 1)[1])
            file = self.directory / data["filename"]
            self.calls.append(f"{query} {slot}")
            if query == "action=save":
                held = self.slots.get(slot, "")
                file.write_text("STATE:" + held)
                status, answer = 200, {"n_saved": len(held) // 4}
            elif query == "action=restore":
                text = file.read_text() if file.exists() else ""
                if text.startswith("STATE:"):
                    self.slots[slot] = text[6:]
                    status, answer = 200, {"n_restored": len(text) // 4}
                else:
                    status, answer = 400, {"error": {"message": "Invalid tokens in slot save file"}}
        payload = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def llama(tmp_path: Path) -> Iterator[tuple[FakeLlamaSlots, str]]:
    fake = FakeLlamaSlots(tmp_path)
    with ServerThread(fake) as server:
        yield fake, server.url


PREFIX = "".join(f"instruction {i:04d} " for i in range(400))  # 7,200 characters: 14 blocks


async def _generate(cache: SlotCache, fake: FakeLlamaSlots, prompt: str, *, cached: int = 0,
                    key: str | None = None) -> int:
    """One generation through ``cache``: the slot it ran in (the fake slot then holds ``prompt``)."""
    request = GenerationRequest(model="m", messages=[{"role": "user", "content": prompt}])
    lease = await cache.acquire(request, {"messages": request.messages}, key)
    slot = request.options["id_slot"]
    fake.slots[slot] = prompt
    lease.usage = Usage(input_tokens=len(prompt) // 4, output_tokens=1, cached_tokens=cached)
    cache.release(lease)
    await cache.settle()
    return int(slot)


def _cache(url: str, directory: Path, **options: Any) -> SlotCache:
    return SlotCache(url, 2, directory=directory, max_bytes=options.pop("max_bytes", 10**9), min_tokens=256,
                     wait_timeout=options.pop("wait_timeout", 5.0))


async def test_saves_long_prompts_once_and_a_longer_one_supersedes(llama: tuple[FakeLlamaSlots, str],
                                                                   tmp_path: Path) -> None:
    fake, url = llama
    cache = _cache(url, tmp_path)
    await cache.open()
    try:
        await _generate(cache, fake, "short prompt")  # under min_tokens: not saved
        await _generate(cache, fake, PREFIX + "first question")
        assert cache.stats["saves"] == 1 and len(list(tmp_path.glob("*.bin"))) == 1
        await _generate(cache, fake, PREFIX + "first question")  # already held whole: not saved again
        assert cache.stats["saves"] == 1
        await _generate(cache, fake, PREFIX + "first question" + " and a long follow-up " * 40)
        assert cache.stats["saves"] == 2
        assert len(list(tmp_path.glob("*.bin"))) == 1  # the shorter one was superseded and deleted
        assert cache.stats["restores"] == 0  # llama.cpp held everything itself all along
    finally:
        await cache.aclose()


async def test_restores_after_a_restart_but_not_what_llamacpp_still_holds(llama: tuple[FakeLlamaSlots, str],
                                                                          tmp_path: Path) -> None:
    fake, url = llama
    first = _cache(url, tmp_path)
    await first.open()
    await _generate(first, fake, PREFIX + "session one")
    await first.aclose()
    fake.slots.clear()  # a restart: llama.cpp starts empty
    fake.calls.clear()
    second = _cache(url, tmp_path)
    await second.open()
    try:
        slot = await _generate(second, fake, PREFIX + "session two", cached=1790)
        assert fake.calls[0] == f"action=restore {slot}" and second.stats["restores"] == 1
        # The same prefix again: this process's llama.cpp holds it now, no second restore.
        await _generate(second, fake, PREFIX + "session three", cached=1790)
        assert second.stats["restores"] == 1
        # Another prompt: nothing shared, nothing restored.
        await _generate(second, fake, "x" * 3000)
        assert second.stats["restores"] == 1
    finally:
        await second.aclose()


async def test_a_refused_restore_forgets_the_state_and_the_request_still_gets_its_slot(
        llama: tuple[FakeLlamaSlots, str], tmp_path: Path) -> None:
    fake, url = llama
    first = _cache(url, tmp_path)
    await first.open()
    await _generate(first, fake, PREFIX + "session one")
    await first.aclose()
    (saved,) = tmp_path.glob("*.bin")
    saved.write_text("damaged")
    second = _cache(url, tmp_path)
    await second.open()
    try:
        request = GenerationRequest(model="m", messages=[{"role": "user", "content": PREFIX + "again"}])
        lease = await second.acquire(request, {"messages": request.messages}, None)
        assert lease.restored is None and request.options["id_slot"] in (0, 1)
        assert second.stats["restore_failures"] == 1 and len(second.index) == 0
        assert not saved.exists() and not saved.with_suffix(".json").exists()
        second.release(lease)
        await second.settle()
    finally:
        await second.aclose()


async def test_no_free_slot_in_time_is_rate_limited(llama: tuple[FakeLlamaSlots, str], tmp_path: Path) -> None:
    _, url = llama
    cache = _cache(url, tmp_path, wait_timeout=0.2)
    await cache.open()
    try:
        requests = [GenerationRequest(model="m", messages=[{"role": "user", "content": "hi"}]) for _ in range(3)]
        held = [await cache.acquire(r, {"messages": r.messages}, None) for r in requests[:2]]
        assert sorted(r.options["id_slot"] for r in requests[:2]) == [0, 1]
        with pytest.raises(UpstreamError) as info:
            await cache.acquire(requests[2], {"messages": requests[2].messages}, None)
        assert info.value.code == "rate_limited" and info.value.status == 503
        cache.release(held[0])
        third = await asyncio.wait_for(cache.acquire(requests[2], {"messages": requests[2].messages}, None), 5)
        assert requests[2].options["id_slot"] == held[0].slot
        for lease in (held[1], third):
            cache.release(lease)
        await cache.settle()
        assert cache.idle
    finally:
        await cache.aclose()
