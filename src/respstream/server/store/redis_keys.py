"""Every Redis key the store uses, named in one place, laid out so it works on Redis Cluster as well as standalone.

Why: Redis Cluster runs a script or a ``MULTI`` only when all its keys hash to one slot, and a key's slot is taken
from its ``{hash tag}``. So:

- every key of one response (record, log, lease) carries the tag ``{r:<response id>}``: the append, take, renew,
  release and delete scripts each touch one slot;
- every key of one conversation carries ``{c:<conversation id>}``;
- the shared limits (server/http/shared_limits.py): a rate bucket per key under ``{l:rate:<key>}``, the stream budget's
  two hashes under ``{l}`` (one script reads both);
- the indexes that list many responses or conversations (responses by age, leased responses, an instance's
  responses, conversations by age) are each one key of their own (tag ``{i}`` keeps them together on one node, so
  a scan of them is one connection). The store never puts an index key and a response key into the same script or
  transaction; it updates the index in a separate command (an index may briefly hold a member whose response is
  gone, and every reader of an index tolerates that).

Other modules that add keys (conversation objects, API-key indexes) add their names here, with the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RedisKeys", "ResponseKeys"]


@dataclass(frozen=True, slots=True)
class ResponseKeys:
    rec: str  # hash: json, last, term, leased
    log: str  # stream, entry ids 0-<seq+1>
    lease: str  # string: holder's instance id, PX expiry


class RedisKeys:
    """Key names under ``prefix`` (e.g. ``respstream:``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        index = f"{prefix}{{i}}:"
        self.by_age = f"{index}responses"  # zset: response id -> created_at
        self.leased = f"{index}leased"  # set: responses whose generation took a lease
        self.conversations = f"{index}conversations"  # zset: conversation id -> last extended
        self._instance = f"{index}instance:"

    def response(self, response_id: str) -> ResponseKeys:
        tag = f"{self.prefix}{{r:{response_id}}}"
        return ResponseKeys(f"{tag}:rec", f"{tag}:log", f"{tag}:lease")

    def instance(self, instance_id: str) -> str:
        """Set: the responses ``instance_id`` created (what ``recover`` looks at after a restart)."""
        return f"{self._instance}{instance_id}"

    def rate_bucket(self, key: str) -> str:
        """Hash (tokens, stamp): the shared rate-limit bucket of one API key or client (http/shared_limits.py)."""
        return f"{self.prefix}{{l:rate:{key}}}"

    def stream_budget(self) -> tuple[str, str]:
        """Hashes (open streams per instance, last report per instance) of the shared stream budget; one tag."""
        return f"{self.prefix}{{l}}:streams:open", f"{self.prefix}{{l}}:streams:seen"

    def conversation(self, conversation_id: str) -> str:
        """List: the conversation's items, oldest first."""
        return f"{self.prefix}{{c:{conversation_id}}}:items"

    def conversation_ids(self, conversation_id: str) -> str:
        """List: the ids of the conversation's items, beside them in the same order (a cursor is found by ``LPOS``
        without reading the items); same tag as its items."""
        return f"{self.prefix}{{c:{conversation_id}}}:ids"

    def conversation_meta(self, conversation_id: str) -> str:
        """String: the conversation object's JSON (id, owner, created_at, metadata); same tag as its items."""
        return f"{self.prefix}{{c:{conversation_id}}}:meta"
