"""Bearer API keys, hashed at rest.

The keys file is JSON: ``{"keys": [{"id", "name", "hash", "prefix", "created_at", "revoked_at"}]}``. ``hash`` is the
SHA-256 of the whole key (keys are 32 random bytes, so a fast hash is enough; nothing reversible is stored).
``prefix`` is the first characters, to recognise a key in ``respstream keys list``. The gateway re-reads the file
when its modification time changes, so ``respstream keys revoke`` takes effect on the next request.

With no keys file (or an empty one) the gateway is open, and ``serve`` then refuses to bind anything but loopback.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["KEY_PREFIX", "KeyStore", "hash_key"]

KEY_PREFIX = "rsk_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyStore:
    """The keys file. ``path`` empty means no keys (open gateway)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path) if path else None
        self._mtime: float | None = None
        self._active: dict[str, str] = {}  # hash -> key id
        self._configured = False  # any key ever created: revoking the last one locks the gateway, never opens it

    # -- server side -----------------------------------------------------------------------------------------------
    def _refresh(self) -> None:
        # One stat() per request: cheap, and a revocation takes effect on the next request.
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            self._active, self._mtime = {}, None
            return
        if mtime != self._mtime:
            self._mtime = mtime
            keys = self.load()
            self._configured = bool(keys)
            self._active = {k["hash"]: k["id"] for k in keys if not k.get("revoked_at")}

    @property
    def enabled(self) -> bool:
        self._refresh()
        return self._configured

    def verify(self, key: str) -> str | None:
        """The key's owner id (its hash) when ``key`` is active, else None."""
        self._refresh()
        digest = hash_key(key)
        return digest if digest in self._active else None

    def key_id(self, owner: str) -> str | None:
        """The id (from the keys file) of the key whose owner id is ``owner``: what logs may show, never the key."""
        return self._active.get(owner)

    # -- management (respstream keys) ------------------------------------------------------------------------------
    def load(self) -> list[dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return []
        data = json.loads(self.path.read_text(encoding="utf-8"))
        keys = data.get("keys", []) if isinstance(data, dict) else []
        return [k for k in keys if isinstance(k, dict) and isinstance(k.get("hash"), str)]

    def _save(self, keys: list[dict[str, Any]]) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"keys": keys}, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    def create(self, name: str = "") -> tuple[str, dict[str, Any]]:
        """A new key: returns (the key, shown once; its stored entry)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = {"id": uuid.uuid4().hex[:12], "name": name, "hash": hash_key(key), "prefix": key[:10],
                 "created_at": int(time.time()), "revoked_at": None}
        self._save([*self.load(), entry])
        return key, entry

    def revoke(self, key_id: str) -> bool:
        keys = self.load()
        found = False
        for entry in keys:
            if entry.get("id") == key_id and not entry.get("revoked_at"):
                entry["revoked_at"] = int(time.time())
                found = True
        if found:
            self._save(keys)
        return found
