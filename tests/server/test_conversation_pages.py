"""A conversation's items are paged in the store query: ``?limit=1`` never loads the whole conversation, and a
request in the conversation reads only its window (issue #30 M5). The store is the real memory store, counted."""

from __future__ import annotations

from typing import Any

import httpx

from respstream.server.store.memory import MemoryStore

from .helpers import ServerThread, make_app


class CountingStore(MemoryStore):
    """The memory store, counting the conversation items each read returns."""

    def __init__(self) -> None:
        super().__init__(retention_seconds=3600.0, history_limit=100_000, max_bytes=1 << 30)
        self.items_read = 0

    async def conversation(self, conversation_id: str, *, newest: int | None = None,
                           oldest: int | None = None) -> list[dict[str, Any]]:
        items = await super().conversation(conversation_id, newest=newest, oldest=oldest)
        self.items_read += len(items)
        return items


def test_a_first_page_and_a_request_read_only_what_they_need() -> None:
    store = CountingStore()
    app = make_app()
    app.state.gateway.given.store = store  # type: ignore[attr-defined]
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        cid = client.post("/v1/conversations", json={}).json()["id"]
        for _ in range(25):  # 500 items
            items = [{"type": "message", "role": "user", "content": "x"} for _ in range(20)]
            assert client.post(f"/v1/conversations/{cid}/items", json={"items": items}).status_code == 200
        store.items_read = 0
        page = client.get(f"/v1/conversations/{cid}/items", params={"limit": 1}).json()
        assert len(page["data"]) == 1 and page["has_more"] is True
        asc = client.get(f"/v1/conversations/{cid}/items", params={"limit": 2, "order": "asc"}).json()
        assert len(asc["data"]) == 2 and asc["has_more"] is True
        assert store.items_read == 2 + 3  # limit + 1 each, not 500
        store.items_read = 0
        following = client.get(f"/v1/conversations/{cid}/items", params={"limit": 1, "after": page["data"][0]["id"]})
        assert following.status_code == 200 and len(following.json()["data"]) == 1
        assert following.json()["data"][0]["id"] != page["data"][0]["id"] and following.json()["has_more"] is True
        assert store.items_read <= 4  # a window of 2 x (limit + 1) holds the cursor and the next page
        after_asc = client.get(f"/v1/conversations/{cid}/items",
                               params={"limit": 5, "order": "asc", "after": asc["data"][1]["id"]}).json()
        assert len(after_asc["data"]) == 5 and store.items_read <= 4 + 12 + 48
        everything = client.get(f"/v1/conversations/{cid}/items", params={"limit": 100}).json()
        walked, cursor = [], None
        while True:  # paging through all of it gives every item once, in order
            params: dict[str, Any] = {"limit": 7, **({"after": cursor} if cursor else {})}
            got = client.get(f"/v1/conversations/{cid}/items", params=params).json()
            walked += [i["id"] for i in got["data"]]
            if not got["has_more"]:
                break
            cursor = got["last_id"]
        assert walked[:100] == [i["id"] for i in everything["data"]] and len(walked) == 500 == len(set(walked))
        store.items_read = 0
        one = client.get(f"/v1/conversations/{cid}/items/{walked[250]}")
        assert one.status_code == 200 and one.json()["id"] == walked[250]
        assert client.delete(f"/v1/conversations/{cid}/items/{walked[250]}").status_code == 200
        assert client.get(f"/v1/conversations/{cid}/items/{walked[250]}").status_code == 404
        assert store.items_read == 0  # found by id in the store, not by reading the conversation
        r = client.post("/v1/responses", json={"model": "scripted-a", "input": "hi", "stream": False,
                                               "conversation": cid})
        assert r.status_code == 200, r.text
        assert store.items_read <= 40 + 1  # the conversation_window, not the whole conversation
