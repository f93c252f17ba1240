"""A page after a deep cursor costs the page, not the history (issue 42, M5).

At main ``GET .../items?limit=1&after=<deepest cursor>`` read windows growing 4x and decoded each whole: a 147 MB
conversation cost +241-387 MB per request. Here the gateway runs in this process on a real SQLite file or a real
``redis-server`` on loopback, and ``tracemalloc`` sees every allocation the request makes (all threads).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest

from plugins.redis_server import RedisServer

from .helpers import ServerThread, make_app

ITEMS = 96
ITEM_TEXT = 32 << 10  # 96 x 32 KiB: a 3 MiB history


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/conv.db"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def test_a_page_after_the_deepest_cursor_allocates_about_the_page(store_url: str) -> None:
    app = make_app(store=store_url)
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        cid = client.post("/v1/conversations", json={}).json()["id"]
        for start in range(0, ITEMS, 16):
            items = [{"type": "message", "role": "user", "content": f"{n} " + "x" * ITEM_TEXT}
                     for n in range(start, start + 16)]
            assert client.post(f"/v1/conversations/{cid}/items", json={"items": items}).status_code == 200
        oldest = client.get(f"/v1/conversations/{cid}/items", params={"limit": 1, "order": "asc"}).json()
        newest = client.get(f"/v1/conversations/{cid}/items", params={"limit": 1}).json()
        deepest: dict[str, Any] = {}
        for order, cursor in (("desc", oldest["data"][0]["id"]), ("asc", newest["data"][0]["id"])):
            params = {"limit": 1, "order": order, "after": cursor}
            client.get(f"/v1/conversations/{cid}/items", params=params)  # warm: connection, caches
            tracemalloc.start()
            try:
                page = client.get(f"/v1/conversations/{cid}/items", params=params)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert page.status_code == 200, page.text
            assert page.json()["data"] == [] and page.json()["has_more"] is False
            deepest[order] = peak
        middle = client.get(f"/v1/conversations/{cid}/items",
                            params={"limit": 2, "after": newest["data"][0]["id"]}).json()
        assert [i["content"][0]["text"].split()[0] for i in middle["data"]] == [str(ITEMS - 2), str(ITEMS - 3)]
        assert client.get(f"/v1/conversations/{cid}/items", params={"after": "item_nope"}).status_code == 404
        # ids shaped like the position ids of items stored before items had ids, and a bad order: refused
        # without reading the history (this conversation has no such items)
        for path, params, status in ((f"items/item_{cid}_3", {}, 404), ("items", {"after": f"item_{cid}_3"}, 404),
                                     ("items", {"order": "sideways"}, 400)):
            client.get(f"/v1/conversations/{cid}/{path}", params=params)
            tracemalloc.start()
            try:
                refused = client.get(f"/v1/conversations/{cid}/{path}", params=params)
                _, deepest[f"{path} {params}"] = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert refused.status_code == status, refused.text[:200]
    history = ITEMS * ITEM_TEXT
    for order, peak in deepest.items():  # at main: the whole history decoded, > 3 MiB; now about one item
        assert peak < history // 8, f"{order}: {peak // 1024} KiB allocated for a page of a {history >> 20} MiB history"


def test_items_stored_before_ids_are_still_paged_and_found_by_position() -> None:
    """Items from before items had ids get ids from their position; those ids still work where such items exist."""
    import asyncio

    from respstream.server.store.memory import MemoryStore

    store = MemoryStore(retention_seconds=3600.0)
    app = make_app()
    app.state.gateway.given.store = store  # type: ignore[attr-defined]
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        cid = client.post("/v1/conversations", json={}).json()["id"]
        old = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"old {n}"}]}
               for n in range(3)]
        asyncio.run(store.extend_conversation(cid, old))  # as an older gateway stored them: no "id"
        new = {"type": "message", "role": "user", "content": "new"}
        assert client.post(f"/v1/conversations/{cid}/items", json={"items": [new]}).status_code == 200
        page = client.get(f"/v1/conversations/{cid}/items", params={"order": "asc", "limit": 2}).json()
        assert [i["id"] for i in page["data"]] == [f"item_{cid}_0", f"item_{cid}_1"] and page["has_more"]
        after = client.get(f"/v1/conversations/{cid}/items",
                           params={"order": "asc", "after": f"item_{cid}_1"}).json()["data"]
        assert [i["content"][0]["text"] for i in after] == ["old 2", "new"]
        one = client.get(f"/v1/conversations/{cid}/items/item_{cid}_2")
        assert one.status_code == 200 and one.json()["content"][0]["text"] == "old 2"
