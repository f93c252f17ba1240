"""Conversations in the SQLite store (a mixin of :class:`~respstream.server.store.sqlite.SQLiteStore`).

Items: the ``conversations`` table (one row per item, ``position`` in order, the item JSON). Objects: the
``conversation_objects`` table (id, owner, created_at, metadata JSON, touched_at). ``expire()`` drops both once the
conversation was untouched (no object change, no new item) for the retention.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from respstream.server.store.base import ConversationRecord

__all__ = ["CONVERSATION_SCHEMA", "SQLiteConversations", "expire_conversations"]

T = TypeVar("T")

CONVERSATION_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations(
    conversation_id TEXT NOT NULL, position INTEGER NOT NULL, item BLOB NOT NULL, added_at REAL NOT NULL,
    PRIMARY KEY(conversation_id, position)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS conversation_objects(
    id TEXT PRIMARY KEY, owner TEXT, created_at REAL NOT NULL, metadata BLOB NOT NULL, touched_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS conversation_item_ids ON conversations(
    conversation_id, json_extract(CAST(item AS TEXT), '$.id'));
"""

# An item's "id", found by SQLite's JSON functions through the index above (the same expression, so SQLite uses it):
# one item is found without reading, let alone decoding, the others.
_ITEM_ID = "json_extract(CAST(item AS TEXT), '$.id')"
# Named: without statistics the planner prefers the primary key and reads every item of the conversation instead.
_BY_ITEM_ID = "conversations INDEXED BY conversation_item_ids"
_encode = msgspec.json.Encoder().encode
_decode_item = msgspec.json.Decoder(dict[str, Any]).decode
_decode_metadata = msgspec.json.Decoder(dict[str, str]).decode


def expire_conversations(conn: sqlite3.Connection, cutoff: float) -> None:
    """Inside the writer's transaction: drop conversations (items and objects) untouched since ``cutoff``."""
    conn.execute(
        "DELETE FROM conversations WHERE conversation_id IN (SELECT conversation_id FROM conversations"
        " GROUP BY conversation_id HAVING max(added_at) < ?)"
        " AND conversation_id NOT IN (SELECT id FROM conversation_objects WHERE touched_at >= ?)",
        (cutoff, cutoff),
    )
    conn.execute(
        "DELETE FROM conversation_objects WHERE touched_at < ? AND id NOT IN"
        " (SELECT conversation_id FROM conversations WHERE added_at >= ?)",
        (cutoff, cutoff),
    )


class SQLiteConversations:
    history_limit: int | None

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    async def _read(self, job: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        # LIMIT -1 is no limit; the newest N are read newest first, then turned around.
        order, count = ("DESC", max(newest, 0)) if newest is not None else \
            ("ASC", -1 if oldest is None else max(oldest, 0))
        rows = await self._read(lambda c: c.execute(
            f"SELECT item FROM conversations WHERE conversation_id = ? ORDER BY position {order} LIMIT ?",
            (conversation_id, count),
        ).fetchall())
        items = [_decode_item(r[0]) for r in rows]
        return items[::-1] if newest is not None else items

    async def conversation_after(self, conversation_id: str, item_id: str, *, count: int,
                                 newer: bool) -> list[dict[str, Any]] | None:
        """See :func:`~respstream.server.store.conversation_seek.conversation_after`: the cursor by the index, then
        ``count`` + 1 rows from its position."""
        compare, order = (">=", "ASC") if newer else ("<=", "DESC")

        def job(conn: sqlite3.Connection) -> list[Any] | None:
            found = conn.execute(f"SELECT position FROM {_BY_ITEM_ID} WHERE conversation_id = ? AND {_ITEM_ID} = ?"
                                 " LIMIT 1", (conversation_id, item_id)).fetchone()
            if found is None:
                return None
            return conn.execute(
                f"SELECT item FROM conversations WHERE conversation_id = ? AND position {compare} ?"
                f" ORDER BY position {order} LIMIT ?", (conversation_id, found[0], count + 1)).fetchall()

        rows = await self._read(job)
        if rows is None:
            return None
        items = [_decode_item(r[0]) for r in rows]
        return items if newer else items[::-1]

    async def extend_conversation(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        blobs = [_encode(item) for item in items]
        limit = self.history_limit

        def job(conn: sqlite3.Connection) -> None:
            (top,) = conn.execute(
                "SELECT coalesce(max(position), -1) FROM conversations WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()
            now = time.time()
            conn.executemany(
                "INSERT INTO conversations VALUES (?, ?, ?, ?)",
                [(conversation_id, top + 1 + i, blob, now) for i, blob in enumerate(blobs)],
            )
            if limit is not None:  # a sliding window: keep the newest `history_limit` items
                conn.execute(
                    "DELETE FROM conversations WHERE conversation_id = ? AND position <= ?",
                    (conversation_id, top + len(blobs) - limit),
                )

        if blobs:
            await self._write(job)

    async def create_conversation(self, record: ConversationRecord) -> None:
        row = (record.id, record.owner, record.created_at, _encode(record.metadata), time.time())
        await self._write(lambda c: c.execute("INSERT OR REPLACE INTO conversation_objects VALUES (?, ?, ?, ?, ?)",
                                              row))

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        row = await self._read(lambda c: c.execute(
            "SELECT id, owner, created_at, metadata FROM conversation_objects WHERE id = ?", (conversation_id,)
        ).fetchone())
        if row is None:
            return None
        return ConversationRecord(id=row[0], owner=row[1], created_at=row[2], metadata=_decode_metadata(row[3]))

    async def update_conversation(self, record: ConversationRecord) -> None:
        args = (_encode(record.metadata), time.time(), record.id)
        await self._write(lambda c: c.execute(
            "UPDATE conversation_objects SET metadata = ?, touched_at = ? WHERE id = ?", args))

    async def delete_conversation(self, conversation_id: str) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,))
            return conn.execute("DELETE FROM conversation_objects WHERE id = ?", (conversation_id,)).rowcount > 0

        return await self._write(job)

    async def conversation_item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        row = await self._read(lambda c: c.execute(
            f"SELECT item FROM {_BY_ITEM_ID} WHERE conversation_id = ? AND {_ITEM_ID} = ? LIMIT 1",
            (conversation_id, item_id)).fetchone())
        return None if row is None else _decode_item(row[0])

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        return await self._write(lambda c: c.execute(
            "DELETE FROM conversations WHERE conversation_id = ? AND position = (SELECT position FROM"
            f" {_BY_ITEM_ID} WHERE conversation_id = ? AND {_ITEM_ID} = ? LIMIT 1)",
            (conversation_id, conversation_id, item_id)).rowcount > 0)
