"""Memory that requests being parsed and run hold, shared by every request: :class:`RequestMemory` (issue 42, H4v).

Why: the stores were bounded at their real size, but what a request holds while it is decoded and run (the decoded
JSON, the parsed request and its input items, the messages built for the upstream) was charged to no budget: 32
WebSockets sending ``store: false`` turns of 30,000 tiny input items (996 KiB of JSON each) still grew the gateway to
555 MB, bounded only by ``max_body_bytes`` x ``max_concurrent_streams``. One budget for the whole gateway
(``limits.requests_inflight_bytes``) and one per API key (``limits.requests_inflight_bytes_per_key``) make the total
a number an operator chose.

How: before a body is decoded, :func:`decoded_bound` bounds what its decoded objects can take from a scan of its bytes
(C-speed counts of ``{``, ``[``, ``"``, ``,`` and ``:``: every object JSON can make costs at most so much), and that
is reserved (per key: 429, gateway-wide: 503, both with ``Retry-After`` and a message naming the limit). Once
decoded the hold is settled (checked again when it grows) to :func:`held_bytes`: the decoded JSON's measured size
(``deep_size``) twice (the parsed request and the upstream's messages built from it took 0.2-0.9x more, measured),
plus the body's length (the upstream's encoded request). It is released when the response ends (or the request is
refused). A WebSocket message is decoded when it arrives; a create that waits on its lane keeps its decode
reservation until it leaves the lane (websocket/transport.py), and its turn reserves its measured size again before
it is parsed.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.keyed_budget import KeyedBudget
from respstream.server.store.object_size import deep_size

__all__ = ["RequestHold", "RequestMemory", "decoded_bound", "held_bytes"]

_SLOT = 8
# The most each JSON token can make, besides its characters (CPython 3.11+, 64-bit, measured):
_OBJECT = sys.getsizeof({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}) + _SLOT  # ``{``: a dict of up to 5 keys
_ARRAY = sys.getsizeof([]) + _SLOT  # ``[``: an empty list (its slots come with the separators)
_STRING = sys.getsizeof("") + _SLOT  # a ``"`` pair: a str's header
# ``,`` or ``:``: one more slot, a number (a float: 24; an int of 19 digits: 36) or a dict entry past five keys.
_MEMBER = 2 * _SLOT + sys.getsizeof(1 << 62)
# Decoded JSON plus the parsed request and the upstream's messages, as a multiple of the decoded JSON (measured
# 1.2-1.9 for input items of every shape; the stored records are charged to the store's own budget).
_PROMPT_FACTOR = 2


def decoded_bound(body: bytes) -> int:
    """The most ``body``'s decoded JSON can take in memory (linear in its length, no Python loop over it).
    A string's characters take one byte each when the body is ASCII without ``\\u`` escapes, at most four
    otherwise (one character past U+FFFF, raw or escaped, makes its whole string four bytes a character)."""
    chars = len(body) if body.isascii() and b"\\u" not in body else 4 * len(body)
    return (chars + body.count(b"{") * _OBJECT + body.count(b"[") * _ARRAY + (body.count(b'"') // 2 + 1) * _STRING
            + (body.count(b",") + body.count(b":") + 1) * _MEMBER)


def held_bytes(decoded: Any, body_length: int) -> int:
    """What a decoded request holds while it runs: its objects' measured size, doubled for the parsed request and
    the messages built from it, plus the upstream's encoded request."""
    return _PROMPT_FACTOR * deep_size(decoded) + body_length


class RequestHold:
    """One request's share of :class:`RequestMemory`; :meth:`release` gives it back (idempotent)."""

    __slots__ = ("_memory", "bytes", "holder", "owner")

    def __init__(self, memory: RequestMemory, owner: str | None, holder: Hashable, n: int) -> None:
        self._memory, self.owner, self.holder, self.bytes = memory, owner, holder, n

    def settle(self, n: int) -> None:
        """Hold ``n`` bytes instead (what the decoded request really takes): more is checked as a reservation is
        (raises the refusal, having given everything back), less is given back."""
        grow = n - self.bytes
        if grow > 0:
            try:
                self._memory.charge(self.owner, self.holder, grow)
            except HTTPError:
                self.release()
                raise
        else:
            self._memory.bytes.adjust(self.holder, grow)
        self.bytes = n

    def release(self) -> None:
        if self.bytes:
            self._memory.bytes.adjust(self.holder, -self.bytes)
            self.bytes = 0


class RequestMemory(KeyedBudget):
    """``total`` bytes for every request in flight together, ``per_key`` for one API key's requests."""

    code = "request_memory_budget_exceeded"
    key_refusal = ("This API key's requests in flight already hold {held} bytes of memory; this request needs {n} "
                   "more, past the key's {limit} (limits.requests_inflight_bytes_per_key). Retry when one has "
                   "finished.")
    total_refusal = ("The gateway's requests in flight already hold {held} bytes of memory; this request needs {n} "
                     "more, past the gateway's {limit} (limits.requests_inflight_bytes). Retry shortly.")

    def reserve(self, owner: str | None, n: int) -> RequestHold:
        """Reserve ``n`` bytes for a request of ``owner`` (None: keyless) or raise the refusal (429 / 503)."""
        holder: Hashable = owner if owner is not None else object()
        self.charge(owner, holder, n)
        return RequestHold(self, owner, holder, n)
