"""Conversations in the Redis store (a mixin of :class:`~respstream.server.store.redis.RedisStore`).

Every key of one conversation sits under one hash tag, ``<prefix>{c:<id>}:items`` (a list of item JSON) and
``<prefix>{c:<id>}:meta`` (the object's JSON), so a conversation lives on one Redis Cluster slot. Both keys carry
the retention as TTL, renewed whenever either changes; ``<prefix>{i}:conversations`` (a sorted set by last touch) lets
``expire()`` drop conversations untouched for the retention.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import msgspec

from respstream.server.store.base import ConversationRecord
from respstream.server.store.redis_keys import RedisKeys

__all__ = ["RedisConversations"]

_encode = msgspec.json.Encoder().encode
_decode_item = msgspec.json.Decoder(dict[str, Any]).decode
_decode_conversation = msgspec.json.Decoder(ConversationRecord).decode
_SCAN_CHUNK = 256  # items read per round trip when one item is looked for


class RedisConversations:
    prefix: str
    k: RedisKeys
    retention_seconds: float
    history_limit: int | None
    _r: Any

    def _io(self) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError

    def _conv_keys(self, conversation_id: str) -> tuple[str, str]:
        return self.k.conversation(conversation_id), self.k.conversation_meta(conversation_id)

    @property
    def _conversations_by_age(self) -> str:
        return self.k.conversations

    def _touch(self, pipe: Any, conversation_id: str) -> None:
        ttl = int(self.retention_seconds * 1000)
        for key in (*self._conv_keys(conversation_id), self.k.conversation_ids(conversation_id)):
            pipe.pexpire(key, ttl)

    async def _index(self, conversation_id: str) -> None:
        # The index lives in its own slot ({i}): updated by a command of its own, never inside the transaction.
        await self._r.zadd(self._conversations_by_age, {conversation_id: time.time()})

    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        if (newest is not None and newest <= 0) or (oldest is not None and oldest <= 0):
            return []
        start, stop = (-newest, -1) if newest is not None else (0, -1 if oldest is None else oldest - 1)
        async with self._io():
            raw = await self._r.lrange(self._conv_keys(conversation_id)[0], start, stop)
        return [_decode_item(item) for item in raw]

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        key = self._conv_keys(conversation_id)[0]
        ids = self.k.conversation_ids(conversation_id)
        async with self._io():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *[_encode(item) for item in items])
                pipe.rpush(ids, *[str(item.get("id", "")) for item in items])
                if self.history_limit is not None:
                    pipe.ltrim(key, -self.history_limit, -1)
                    pipe.ltrim(ids, -self.history_limit, -1)
                self._touch(pipe, conversation_id)
                await pipe.execute()
            await self._index(conversation_id)

    async def create_conversation(self, record: ConversationRecord) -> None:
        async with self._io():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.set(self._conv_keys(record.id)[1], _encode(record))
                self._touch(pipe, record.id)
                await pipe.execute()
            await self._index(record.id)

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        async with self._io():
            raw = await self._r.get(self._conv_keys(conversation_id)[1])
        return None if raw is None else _decode_conversation(raw)

    async def update_conversation(self, record: ConversationRecord) -> None:
        async with self._io():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.set(self._conv_keys(record.id)[1], _encode(record), xx=True)  # only if it exists
                self._touch(pipe, record.id)
                await pipe.execute()
            await self._index(record.id)

    async def delete_conversation(self, conversation_id: str) -> bool:
        items, meta = self._conv_keys(conversation_id)
        async with self._io():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(meta)
                pipe.delete(items, self.k.conversation_ids(conversation_id))
                existed, _ = await pipe.execute()
            await self._r.zrem(self._conversations_by_age, conversation_id)
        return bool(existed)

    async def _locate(self, conversation_id: str, item_id: str) -> int | None:
        """The index of the item ``item_id``: ``LPOS`` over the ids list, or (a conversation extended before that
        list was kept: the lengths differ) a scan of the items in chunks. Inside ``_io()``."""
        key, ids = self._conv_keys(conversation_id)[0], self.k.conversation_ids(conversation_id)
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.llen(key)
            pipe.llen(ids)
            pipe.lpos(ids, item_id)
            items_len, ids_len, at = await pipe.execute()
        if items_len != ids_len:
            return await self._find_index(key, item_id)
        return at if isinstance(at, int) else None

    async def _find_index(self, key: str, item_id: str) -> int | None:
        start = 0
        while True:
            raw: list[bytes] = await self._r.lrange(key, start, start + _SCAN_CHUNK - 1)
            for offset, blob in enumerate(raw):
                if _decode_item(blob).get("id") == item_id:
                    return start + offset
            if len(raw) < _SCAN_CHUNK:
                return None
            start += _SCAN_CHUNK

    async def _find_item(self, conversation_id: str, item_id: str) -> bytes | None:
        """The stored blob of the item ``item_id``, read alone (a concurrent write that moved it: looked up again)."""
        key = self._conv_keys(conversation_id)[0]
        for _ in range(2):
            at = await self._locate(conversation_id, item_id)
            if at is None:
                return None
            blob: bytes | None = await self._r.lindex(key, at)
            if blob is not None and _decode_item(blob).get("id") == item_id:
                return blob
        return None

    async def conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        async with self._io():
            blob = await self._find_item(conversation_id, item_id)
        return None if blob is None else _decode_item(blob)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        key = self._conv_keys(conversation_id)[0]
        async with self._io():
            blob = await self._find_item(conversation_id, item_id)
            if blob is None:
                return False
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.lrem(key, 1, blob)
                pipe.lrem(self.k.conversation_ids(conversation_id), 1, item_id)
                removed, _ = await pipe.execute()
            return bool(removed)

    async def conversation_after(self, conversation_id: str, item_id: str, *, count: int,
                                 newer: bool) -> list[dict[str, Any]] | None:
        """See :func:`~respstream.server.store.conversation_seek.conversation_after`: the cursor's index
        (:meth:`_locate`), then ``count`` + 1 items from it."""
        key = self._conv_keys(conversation_id)[0]
        async with self._io():
            for _ in range(2):  # a concurrent trim may shift the list between the two reads: look again once
                at = await self._locate(conversation_id, item_id)
                if at is None:
                    return None
                start, stop = (at, at + count) if newer else (max(0, at - count), at)
                window = [_decode_item(blob) for blob in await self._r.lrange(key, start, stop)]
                cursor = (window[0] if newer else window[-1]) if window else None
                if cursor is not None and cursor.get("id") == item_id:
                    return window
        return None

    async def expire_conversations(self, cutoff: float) -> None:
        async with self._io():
            stale: list[bytes] = await self._r.zrangebyscore(self._conversations_by_age, "-inf", f"({cutoff}")
            for raw in stale:
                await self._r.delete(*self._conv_keys(raw.decode()), self.k.conversation_ids(raw.decode()))
                await self._r.zrem(self._conversations_by_age, raw)
