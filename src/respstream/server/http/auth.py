"""Bearer API keys, hashed at rest.

The keys file is JSON: ``{"keys": [{"id", "name", "hash", "prefix", "created_at", "revoked_at"}]}``. ``hash`` is the
SHA-256 of the whole key (keys are 32 random bytes, so a fast hash is enough; nothing reversible is stored).
``prefix`` is the first characters, to recognise a key in ``respstream keys list``. The gateway re-reads the file
when its modification time changes, so ``respstream keys revoke`` takes effect on the next request.

With no keys file (or an empty one) the gateway is open, and ``serve`` then refuses to bind anything but loopback.

Fail closed (docs/security.md): once a gateway has seen a key it stays keyed for as long as it runs. A keys file
that is emptied (``{"keys": []}``, ``{}``), deleted or made unreadable while running leaves every request 401, never
an open gateway; a file that does not parse (a half-written JSON) keeps the last good set of keys and logs why, and
one that never parsed admits nobody. A request never gets a 500 from the keys file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["KEY_PREFIX", "KeyStore", "KeysFileError", "hash_key"]

KEY_PREFIX = "rsk_"

log = logging.getLogger("respstream.server.http.auth")


class KeysFileError(ValueError):
    """The keys file exists but cannot be read or is not a keys file. The message names the file and the problem."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyStore:
    """The keys file. ``path`` empty means no keys (open gateway)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path) if path else None
        self._mtime: int | None = None
        self._active: dict[str, str] = {}  # hash -> key id
        self._configured = False  # any key ever seen: revoking or deleting them locks the gateway, never opens it
        self._refresh()  # at once: a file removed before the first request must not open the gateway

    # -- server side -----------------------------------------------------------------------------------------------
    def _refresh(self) -> None:
        # One stat() per request: cheap, and a revocation takes effect on the next request.
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:  # deleted while running: nobody is admitted (a gateway that had keys stays keyed)
            self._active, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            keys = self.load()
        except KeysFileError as exc:  # logged once per change of the file, not once per request
            if self._configured:
                log.error("%s; keeping the %d key(s) loaded before", exc, len(self._active))
            else:
                log.error("%s; no request is admitted until it is fixed", exc)
                self._configured = True
            return
        self._configured = self._configured or bool(keys)
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

    def active(self, owner: str) -> bool:
        """Whether the key whose owner id is ``owner`` is still valid (re-reads a changed keys file: one stat())."""
        self._refresh()
        return owner in self._active

    def key_id(self, owner: str) -> str | None:
        """The id (from the keys file) of the key whose owner id is ``owner``: what logs may show, never the key."""
        return self._active.get(owner)

    # -- management (respstream keys) ------------------------------------------------------------------------------
    def load(self) -> list[dict[str, Any]]:
        """The entries of the keys file ([] when there is none). Raises :class:`KeysFileError` for a file that
        cannot be read or parsed, or is not ``{"keys": [...]}``."""
        if self.path is None or not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise KeysFileError(f"keys file {self.path}: cannot read it: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise KeysFileError(f"keys file {self.path}: not valid JSON: {exc}") from None
        if data == {}:
            return []
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise KeysFileError(f'keys file {self.path}: expected {{"keys": [...]}}')
        return [k for k in data["keys"] if isinstance(k, dict) and isinstance(k.get("hash"), str)]

    def _save(self, keys: list[dict[str, Any]]) -> None:
        assert self.path is not None
        if not self.path.parent.is_dir():  # a typo in --file must not grow a directory tree
            raise KeysFileError(f"keys file {self.path}: the directory {self.path.parent} does not exist")
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
