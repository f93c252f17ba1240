"""A record refers to the conversation window it saw instead of copying it (issue 42, H6v).

At main a conversation of 40 x 1 MiB items made every 113-byte request naming it store 13-17 MB (failed ones too),
and every stored child of a ``store: false`` WebSocket response copied that history again. The upstream is the
SIMULATED scripted one; the app, the SQLite file (or redis-server, or memory store) and the sockets are real.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from plugins.redis_server import RedisServer
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, input_tokens_after, make_app

ITEMS = 16
ITEM_TEXT = 64 << 10  # 16 x 64 KiB: a 1 MiB conversation
HISTORY = ITEMS * ITEM_TEXT


def _app(store: str) -> Any:
    upstreams = {"scripted-a": ScriptedUpstream(2, name="a", models=["scripted-a"]),
                 "scripted-fail": ScriptedUpstream(4, name="f", models=["scripted-fail"], fail_at=1)}
    return make_app(upstreams=upstreams, store=store)


def _conversation(client: httpx.Client) -> str:
    cid: str = client.post("/v1/conversations", json={}).json()["id"]
    for n in range(ITEMS):
        item = {"type": "message", "role": "user", "content": f"part {n} " + "x" * ITEM_TEXT}
        assert client.post(f"/v1/conversations/{cid}/items", json={"items": [item]}).status_code == 200
    return cid


def _ws_turn(ws: Any, **body: Any) -> dict[str, Any]:
    ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] != "error", event
        if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
            response: dict[str, Any] = event["response"]
            return response


def test_records_naming_a_conversation_do_not_copy_it(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ServerThread(_app(f"sqlite:///{db}"), ws="websockets-sansio") as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as client:
        cid = _conversation(client)
        asked = [client.post("/v1/responses", json={"model": "scripted-a", "input": f"q{n}", "stream": False,
                                                    "conversation": cid}) for n in range(3)]
        assert all(r.status_code == 200 for r in asked), [r.text[:200] for r in asked]
        failed = client.post("/v1/responses", json={"model": "scripted-fail", "input": "q", "stream": False,
                                                    "conversation": cid})
        assert failed.json()["status"] == "failed", failed.text[:300]
        with connect(f"ws://127.0.0.1:{srv.port}/v1/responses") as ws:
            parent = _ws_turn(ws, model="scripted-a", input="p", store=False, conversation=cid)
            children = [_ws_turn(ws, model="scripted-a", input=f"c{n}", previous_response_id=parent["id"])
                        for n in range(3)]
        ids = [r.json()["id"] for r in asked] + [failed.json()["id"]] + [c["id"] for c in children]
        # the history a later turn rebuilds still holds the whole conversation window
        assert input_tokens_after(client, asked[0].json()["id"]) > HISTORY // 8
        assert input_tokens_after(client, children[0]["id"]) > HISTORY // 8
    with sqlite3.connect(db) as conn:
        sizes = {rid: conn.execute("SELECT length(record) FROM responses WHERE id = ?", (rid,)).fetchone()[0]
                 for rid in ids}
    # at main: each of these records held the 1 MiB window (the failed one and the children too)
    assert all(size < 16 << 10 for size in sizes.values()), sizes


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/h.db"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def test_the_referred_window_is_read_back_as_it_was(store_url: str) -> None:
    """The chain after a conversation turn sees the same items in the same order as the turn itself did; items
    added to the conversation later are not part of that turn's history."""
    with ServerThread(_app(store_url)) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        cid: str = client.post("/v1/conversations", json={}).json()["id"]
        for text in ("alpha", "beta", "gamma"):
            item = {"type": "message", "role": "user", "content": text}
            assert client.post(f"/v1/conversations/{cid}/items", json={"items": [item]}).status_code == 200
        first = client.post("/v1/responses", json={"model": "scripted-a", "input": "delta", "stream": False,
                                                   "conversation": cid})
        assert first.status_code == 200, first.text
        later = {"type": "message", "role": "user", "content": "epsilon " * 500}
        assert client.post(f"/v1/conversations/{cid}/items", json={"items": [later]}).status_code == 200
        with_first = input_tokens_after(client, first.json()["id"])
        plain = client.post("/v1/responses/input_tokens", json={"model": "scripted-a", "input": "x"}).json()
        # alpha, beta, gamma, delta, the answer and x: several messages more than x alone, and not epsilon's 1,000
        # tokens (added after the turn)
        assert plain["input_tokens"] + 8 < with_first < plain["input_tokens"] + 200, (with_first, plain)
        items = client.get(f"/v1/responses/{first.json()['id']}/input_items").json()["data"]
        assert [i["content"][0]["text"] for i in items] == ["delta"]  # input_items: the request's own input only
