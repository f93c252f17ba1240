"""The embedded model's prompt-prefix cache: llama.cpp slots handed out by the gateway, their KV state saved to disk
after a long prompt and restored before the next prompt that starts the same way, in this process or after a restart.

Why: llama.cpp reuses the KV cache of a prompt's shared prefix on its own, but only for what it still holds in
memory; a restart loses all of it, and every new agent session reads the same long instructions and tool list again
(Codex's ~6,000 tokens take minutes on a CPU). llama.cpp can save a slot's state to a file and load it back
(``POST /slots/{id}?action=save|restore``, enabled by ``--slot-save-path``).

How this works: every generation gets a slot of its own from :meth:`SlotCache.acquire` (llama.cpp's ``id_slot`` is
set on the request, so the gateway knows which slot holds which prompt). Before it runs, the prompt is rendered by
llama.cpp's chat template (``/apply-template``) and cut into a block chain
(:mod:`~.prefix_index`); when a saved state shares more blocks with it than anything llama.cpp
is known to hold in memory (the slots' last prompts and recent ones its own RAM prompt cache keeps), that state is
restored into the slot first. After a generation whose prompt had at least ``min_tokens`` tokens and is not already
saved whole, the slot is saved (the slot stays reserved until the file is written) and states it supersedes or that
pass the byte budget (least recently used first) are deleted. Failures of the cache never fail a generation: a
restore or save that does not work is logged and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec

from respstream.server.upstream.base import GenerationRequest, UpstreamError, Usage
from respstream.server.upstream.embedded.prefix_index import PrefixIndex, SavedPrefix, common_blocks, prefix_chain
from respstream.server.upstream.embedded.slot_files import load_saved, remove_saved, write_meta

__all__ = ["SlotCache", "SlotLease"]

log = logging.getLogger("respstream.server.upstream")
_RECENT = 16  # prompts llama.cpp's own RAM prompt cache is assumed to hold (corrected when a read shows otherwise)


@dataclass(slots=True)
class SlotLease:
    """One generation's slot. ``restored``: the saved state loaded into it first (``None``: none was)."""

    slot: int
    chain: list[str]
    key: str | None
    restored: SavedPrefix | None = None
    expected_blocks: int = 0  # blocks the prompt shares with what the slot should hold before it runs
    usage: Usage | None = None


class SlotCache:
    """Slots ``0..n_slots-1`` of the llama.cpp server at ``root``; saved states in ``directory`` (``None``: the
    slots are still handed out, nothing is saved or restored) within ``max_bytes``."""

    def __init__(self, root: str, n_slots: int, *, directory: Path | None, max_bytes: int, min_tokens: int,
                 wait_timeout: float) -> None:
        self.root = root
        self.directory = directory
        self.min_tokens = min_tokens
        self.wait_timeout = wait_timeout
        self.index = PrefixIndex(max_bytes)
        self._free = list(range(n_slots))
        self._slot_chain: dict[int, list[str]] = {}
        self._slot_used: dict[int, float] = dict.fromkeys(range(n_slots), 0.0)
        self._recent: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._changed = asyncio.Condition()
        self._client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(120.0, connect=5.0))
        self._saves: set[asyncio.Task[None]] = set()
        self.stats = {"restores": 0, "restore_failures": 0, "saves": 0, "save_failures": 0, "evictions": 0}

    async def open(self) -> None:
        """Read the saved states from disk (and drop what no longer fits the budget)."""
        if self.directory is None:
            return
        for entry in await asyncio.to_thread(load_saved, self.directory):
            self.index.add(entry)
        await self._evict()

    async def aclose(self) -> None:
        if self._saves:
            await asyncio.gather(*self._saves, return_exceptions=True)
        await self._client.aclose()

    # -- a generation's slot ----------------------------------------------------------------------------------

    async def acquire(self, request: GenerationRequest, body: dict[str, Any], key: str | None) -> SlotLease:
        """A free slot for ``request`` (``body``: the Chat Completions body it will be sent as), with the longest
        known saved prefix of its prompt restored into it when llama.cpp does not hold a longer one already.
        Sets ``id_slot`` on the request. Raises :class:`UpstreamError` (``rate_limited``) when no slot frees up."""
        chain = prefix_chain(await self._render(body)) if self.directory is not None else []
        slot = await self._take_slot(chain)
        lease = SlotLease(slot, chain, key)
        try:
            held = self._held_blocks(chain, slot)
            lease.expected_blocks = held
            entry, blocks = self.index.best(chain, key)
            if entry is not None and blocks > held and await self._restore(slot, entry):
                lease.restored = entry
                lease.expected_blocks = blocks
                self._slot_chain[slot] = entry.chain
        except BaseException:
            await self._give_back(slot)
            raise
        request.options["id_slot"] = slot
        return lease

    def release(self, lease: SlotLease) -> None:
        """The generation is over: learn from its usage, save the slot when worth it, then free the slot."""
        self._slot_chain[lease.slot] = lease.chain
        self._slot_used[lease.slot] = time.monotonic()
        self._learn(lease)
        if self._worth_saving(lease):
            task = asyncio.get_running_loop().create_task(self._save_then_free(lease))
            self._saves.add(task)
            task.add_done_callback(self._saves.discard)
        else:
            task = asyncio.get_running_loop().create_task(self._give_back(lease.slot))
            self._saves.add(task)
            task.add_done_callback(self._saves.discard)

    @property
    def idle(self) -> bool:
        """True when no generation holds a slot and no save is pending."""
        return len(self._free) == len(self._slot_used) and not self._saves

    async def settle(self) -> None:
        """Wait until every pending save has finished (tests, benchmarks)."""
        while self._saves:
            await asyncio.gather(*list(self._saves), return_exceptions=True)

    # -- internals ----------------------------------------------------------------------------------------------

    async def _render(self, body: dict[str, Any]) -> str:
        fields = {k: body[k] for k in ("messages", "tools", "tool_choice") if k in body}
        try:
            response = await self._client.post(f"{self.root}/apply-template", content=msgspec.json.encode(fields),
                                               headers={"content-type": "application/json"}, timeout=30.0)
            prompt = msgspec.json.decode(response.content).get("prompt") if response.status_code == 200 else None
        except (httpx.HTTPError, msgspec.DecodeError, AttributeError) as exc:
            log.warning("prefix cache: the prompt could not be rendered (%s); no restore for this request", exc)
            return ""
        return prompt if isinstance(prompt, str) else ""

    async def _take_slot(self, chain: list[str]) -> int:
        async with self._changed:
            try:
                async with asyncio.timeout(self.wait_timeout):
                    await self._changed.wait_for(lambda: bool(self._free))
            except TimeoutError:
                raise UpstreamError("rate_limited", f"embedded model busy: no free slot within "
                                    f"{self.wait_timeout:g} s", status=503,
                                    retry_after=max(1.0, self.wait_timeout)) from None
            # The free slot already holding most of this prompt, else the one idle longest.
            slot = max(self._free, key=lambda s: (common_blocks(chain, self._slot_chain.get(s, [])),
                                                  -self._slot_used[s]))
            self._free.remove(slot)
            return slot

    async def _give_back(self, slot: int) -> None:
        async with self._changed:
            self._free.append(slot)
            self._changed.notify()

    def _held_blocks(self, chain: list[str], slot: int) -> int:
        """Blocks of ``chain`` llama.cpp is believed to hold in memory: in ``slot`` or in its RAM prompt cache."""
        held = common_blocks(chain, self._slot_chain.get(slot, []))
        for recent in self._recent:
            held = max(held, common_blocks(chain, list(recent)))
        return held

    def _learn(self, lease: SlotLease) -> None:
        """Keep the prompt as one llama.cpp now holds; when the read reused far less than expected, llama.cpp no
        longer holds what was believed, so those beliefs are dropped (the next request restores from disk)."""
        usage = lease.usage
        if lease.chain:
            self._recent[tuple(lease.chain)] = None
            self._recent.move_to_end(tuple(lease.chain))
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
        if usage is None or lease.expected_blocks == 0 or usage.input_tokens == 0:
            return
        expected_share = lease.expected_blocks / max(1, len(lease.chain))
        if usage.cached_tokens < 0.5 * expected_share * usage.input_tokens:
            for recent in list(self._recent):
                if recent != tuple(lease.chain) and common_blocks(lease.chain, list(recent)) >= lease.expected_blocks:
                    del self._recent[recent]

    def _worth_saving(self, lease: SlotLease) -> bool:
        usage = lease.usage
        return (self.directory is not None and usage is not None and usage.input_tokens >= self.min_tokens
                and bool(lease.chain) and not self.index.covers(lease.chain))

    async def _restore(self, slot: int, entry: SavedPrefix) -> bool:
        try:
            response = await self._client.post(f"{self.root}/slots/{slot}?action=restore",
                                               json={"filename": f"{entry.name}.bin"})
            restored = response.status_code == 200 and msgspec.json.decode(response.content).get("n_restored", 0) > 0
        except (httpx.HTTPError, msgspec.DecodeError, AttributeError) as exc:
            restored, response = False, None
            log.warning("prefix cache: restoring %s failed: %s", entry.name, exc)
        if restored:
            self.stats["restores"] += 1
            self.index.touch(entry.name, time.time())
            return True
        self.stats["restore_failures"] += 1
        if response is not None:
            log.warning("prefix cache: llama.cpp refused to restore %s (%s); forgetting it", entry.name,
                        response.text[:200])
        self.index.remove(entry.name)
        if self.directory is not None:
            await asyncio.to_thread(remove_saved, self.directory, entry.name)
        return False

    async def _save_then_free(self, lease: SlotLease) -> None:
        try:
            await self._save(lease)
        except Exception as exc:  # a cache that cannot save must never break serving
            self.stats["save_failures"] += 1
            log.warning("prefix cache: saving slot %d failed: %s", lease.slot, exc)
        finally:
            await self._give_back(lease.slot)

    async def _save(self, lease: SlotLease) -> None:
        assert self.directory is not None
        name = f"p{lease.chain[-1]}"
        response = await self._client.post(f"{self.root}/slots/{lease.slot}?action=save",
                                           json={"filename": f"{name}.bin"})
        saved = msgspec.json.decode(response.content) if response.status_code == 200 else {}
        tokens = saved.get("n_saved") if isinstance(saved, dict) else None
        if not isinstance(tokens, int) or tokens < 1:
            raise RuntimeError(f"llama.cpp did not save the slot: {response.status_code} {response.text[:200]}")
        size = (self.directory / f"{name}.bin").stat().st_size
        entry = SavedPrefix(name=name, chain=lease.chain, tokens=tokens, size=size, key=lease.key,
                            used_at=time.time())
        await asyncio.to_thread(write_meta, self.directory, entry)
        self.stats["saves"] += 1
        for old in self.index.add(entry):
            await asyncio.to_thread(remove_saved, self.directory, old.name)
        await self._evict()

    async def _evict(self) -> None:
        if self.directory is None:
            return
        for old in self.index.over_budget():
            self.stats["evictions"] += 1
            await asyncio.to_thread(remove_saved, self.directory, old.name)
