"""A previous_response_id chain stores each turn once and rebuilds the history on read (issue #30 H6).

The upstream is the SIMULATED scripted one; the app, the SQLite store and the sockets are real.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, input_tokens_after, make_app

BIG = "lorem ipsum " * 10_000  # 120 KB, sent once


def _stored_record_bytes(db: Path) -> list[int]:
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "responses" in tables, tables
        return [int(r[0]) for r in conn.execute("SELECT length(record) FROM responses ORDER BY created_at")]


def _chain(client: httpx.Client, turns: int) -> str:
    first = client.post("/v1/responses", json={"model": "scripted-a", "input": BIG, "stream": False})
    assert first.status_code == 200, first.text
    rid = first.json()["id"]
    for n in range(turns):
        r = client.post("/v1/responses", json={"model": "scripted-a", "input": f"turn {n}", "stream": False,
                                               "previous_response_id": rid})
        assert r.status_code == 200, r.text
        rid = r.json()["id"]
    return rid


def _app(tmp_path: Path, **limits: Any) -> tuple[Any, Path]:
    db = tmp_path / "r.db"
    app = make_app(upstreams={"scripted-a": ScriptedUpstream(2, name="a", models=["scripted-a"])},
                   store=f"sqlite:///{db}", data_dir=str(tmp_path), limits=limits)
    return app, db


def test_each_record_stores_its_own_turn_and_the_history_is_rebuilt(tmp_path: Path) -> None:
    app, db = _app(tmp_path)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        last = _chain(client, 6)
        tokens = input_tokens_after(client, last)
    sizes = _stored_record_bytes(db)
    assert len(sizes) == 7 and sizes[0] > len(BIG)
    # Before: every later record copied the 120 KB first turn (7 records: ~840 KB). Now each holds its own turn.
    assert max(sizes[1:]) * 50 < sizes[0], sizes
    assert tokens > len(BIG) // 8  # the first turn is still in the history the model gets


def test_the_rebuilt_history_keeps_to_the_byte_and_depth_budgets(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, history_max_bytes=64 << 10)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        assert input_tokens_after(client, _chain(client, 2)) < 1_000  # the 120 KB first turn is past the budget
    app, _ = _app(tmp_path / "depth", history_max_depth=2)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        assert input_tokens_after(client, _chain(client, 3)) < 1_000  # two records back: the first turn is not reached


def test_a_stored_child_of_a_store_false_parent_keeps_its_history(tmp_path: Path) -> None:
    # On a WebSocket a store:false response lives only on its socket; its stored child must not refer to it.
    app, _ = _app(tmp_path)
    with ServerThread(app, ws="websockets-sansio") as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        with connect(f"ws://127.0.0.1:{srv.port}/v1/responses") as ws:
            first = _ws_turn(ws, model="scripted-a", input=BIG, store=False)
            second = _ws_turn(ws, model="scripted-a", input="next", previous_response_id=first)
        assert input_tokens_after(client, second) > len(BIG) // 8  # the socket is gone; the history is not


def _ws_turn(ws: Any, **body: Any) -> str:
    ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] != "error", event
        if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
            rid: str = event["response"]["id"]
            return rid
