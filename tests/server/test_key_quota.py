"""A byte budget per API key for what its requests store (issue #30 H6, M5: limits.store_max_bytes_per_key).

The upstream is the SIMULATED scripted one; the app and sockets are real; the store is the default memory store and
SQLite (the budget sits above the store, the same for every backend).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from respstream.cli import main
from respstream.server.http_errors import HTTPError
from respstream.server.responses.key_quota import KeyQuota

from .helpers import ServerThread, make_app

BIG = "lorem ipsum " * 10_000  # 120 KB


def test_the_budget_counts_per_key_within_the_window() -> None:
    quota = KeyQuota(1_000, window_seconds=600)
    quota.charge("a", 900, now=1_000.0)
    quota.check("b", 1_000, now=1_000.0)  # another key has its own budget
    with pytest.raises(HTTPError) as info:
        quota.check("a", 200, now=1_000.0)
    assert info.value.status == 429 and "limits.store_max_bytes_per_key" in info.value.message
    assert quota.used("a", now=1_000.0 + 700) == 0  # past the retention window it has expired from the store


def _key(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["keys", "--file", str(path), "create", "--name", "q", "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["key"])


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_key_past_its_budget_gets_429_before_anything_is_stored(tmp_path: Path, store: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys.json"
    first, second = _key(keys, capsys), _key(keys, capsys)
    url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'r.db'}"
    app = make_app(store=url, data_dir=str(tmp_path), keys_file=str(keys),
                   limits={"store_max_bytes_per_key": 300_000})
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        body = {"model": "scripted-a", "input": BIG, "stream": False}
        auth = {"Authorization": f"Bearer {first}"}
        assert client.post("/v1/responses", json=body, headers=auth).status_code == 200
        assert client.post("/v1/responses", json=body, headers=auth).status_code == 200
        refused = client.post("/v1/responses", json=body, headers=auth)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "storage_quota_exceeded"
        assert "limits.store_max_bytes_per_key" in refused.json()["error"]["message"]
        cid = client.post("/v1/conversations", json={}, headers=auth).json()["id"]
        items = [{"type": "message", "role": "user", "content": BIG}]
        assert client.post(f"/v1/conversations/{cid}/items", json={"items": items}, headers=auth).status_code == 429
        other = {"Authorization": f"Bearer {second}"}
        assert client.post("/v1/responses", json=body, headers=other).status_code == 200  # its own budget
