"""The Conversations API through the official openai SDK against a live gateway on loopback, over each store
(memory with its durable SQLite background store, SQLite, Redis started by the test plugin). The upstream is the
SIMULATED scripted one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from plugins.redis_server import RedisServer

from .helpers import ServerThread, make_app
from .sdk_client import cli_keys, sdk

__all__ = ["sdk"]  # the OpenAI SDK client fixture (sdk_client.py) on this module's srv


@pytest.fixture(scope="module", params=["memory", "sqlite", "redis"])
def srv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    folder = tmp_path_factory.mktemp("conv")
    if request.param == "memory":
        options = {"store": "memory", "background_store": f"sqlite:///{folder}/bg.db"}
    elif request.param == "sqlite":
        options = {"store": f"sqlite:///{folder}/all.db"}
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        options = {"store": f"{server.url}"}
    with ServerThread(make_app(dialect="openai", **options)) as server_thread:
        yield server_thread


def test_create_retrieve_update_delete(sdk: OpenAI) -> None:
    conv = sdk.conversations.create(metadata={"topic": "demo"},
                                    items=[{"type": "message", "role": "user", "content": "Hello!"}])
    assert conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "demo"}
    assert sdk.conversations.retrieve(conv.id).metadata == {"topic": "demo"}
    updated = sdk.conversations.update(conv.id, metadata={"topic": "changed"})
    assert updated.metadata == {"topic": "changed"}
    assert sdk.conversations.retrieve(conv.id).metadata == {"topic": "changed"}
    deleted = sdk.conversations.delete(conv.id)
    assert deleted.deleted is True and deleted.id == conv.id
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.retrieve(conv.id)


def test_items_list_create_retrieve_delete(sdk: OpenAI) -> None:
    conv = sdk.conversations.create(items=[{"type": "message", "role": "user", "content": "one"}])
    added = sdk.conversations.items.create(conv.id, items=[
        {"type": "message", "role": "assistant", "content": "two"},
        {"type": "message", "role": "user", "content": "three"}])
    assert [i.content[0].text for i in added.data] == ["two", "three"]  # type: ignore[union-attr]
    asc = sdk.conversations.items.list(conv.id, order="asc")
    assert [i.content[0].text for i in asc.data] == ["one", "two", "three"]  # type: ignore[union-attr]
    desc = sdk.conversations.items.list(conv.id, limit=2)
    assert [i.id for i in desc.data] == [asc.data[2].id, asc.data[1].id] and desc.has_more
    after = sdk.conversations.items.list(conv.id, limit=2, after=desc.data[-1].id)
    assert [i.id for i in after.data] == [asc.data[0].id] and not after.has_more
    one = sdk.conversations.items.retrieve(asc.data[1].id, conversation_id=conv.id)
    assert one.id == asc.data[1].id and one.role == "assistant"  # type: ignore[union-attr]
    left = sdk.conversations.items.delete(asc.data[1].id, conversation_id=conv.id)
    assert left.id == conv.id
    assert [i.id for i in sdk.conversations.items.list(conv.id, order="asc").data] == [asc.data[0].id,
                                                                                        asc.data[2].id]
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.items.retrieve(asc.data[1].id, conversation_id=conv.id)


def test_responses_append_to_a_conversation(sdk: OpenAI) -> None:
    conv = sdk.conversations.create()
    first = sdk.responses.create(model="scripted-a", input="My name is Ada.", conversation=conv.id)
    assert first.conversation is not None and first.conversation.id == conv.id
    second = sdk.responses.create(model="scripted-a", input="Who am I?", conversation={"id": conv.id})
    assert second.status == "completed"
    items = sdk.conversations.items.list(conv.id, order="asc").data
    texts = [(i.role, i.content[0].text) for i in items]  # type: ignore[union-attr]
    assert texts == [("user", "My name is Ada."), ("assistant", first.output_text),
                     ("user", "Who am I?"), ("assistant", second.output_text)]
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model="scripted-a", input="x", conversation="conv_unknown")


def test_platform_conversation_id_still_works(srv: ServerThread, sdk: OpenAI) -> None:
    body = {"model": "scripted-a", "input": "hi", "conversation_id": "my-own-thread", "stream": False}
    assert httpx.post(f"{srv.base_url}/responses", json=body).json()["status"] == "completed"
    items = sdk.conversations.items.list("my-own-thread", order="asc").data
    assert [i.role for i in items] == ["user", "assistant"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("method", "path", "body", "status", "param"), [
    ("POST", "/conversations", {"items": "x"}, 400, "items"),
    ("POST", "/conversations", {"items": [{"type": "message", "role": "pirate", "content": "x"}]}, 400,
     "items[0].role"),
    ("POST", "/conversations", {"items": [{"type": "message", "content": "x"}] * 21}, 400, "items"),
    ("POST", "/conversations", {"metadata": {"k": 1}}, 400, "metadata.k"),
    ("POST", "/conversations", {"title": "x"}, 400, "title"),
    ("GET", "/conversations/conv_nope", None, 404, "conversation"),
    ("DELETE", "/conversations/conv_nope", None, 404, "conversation"),
    ("GET", "/conversations/conv_nope/items", None, 404, "conversation"),
])
def test_bad_input(srv: ServerThread, method: str, path: str, body: object, status: int, param: str) -> None:
    r = httpx.request(method, f"{srv.base_url}{path}", json=body)
    assert r.status_code == status and r.json()["error"]["param"] == param, r.text


def test_item_bad_input(srv: ServerThread, sdk: OpenAI) -> None:
    conv = sdk.conversations.create()
    base = f"{srv.base_url}/conversations/{conv.id}"
    assert httpx.post(f"{base}/items", json={"items": []}).json()["error"]["param"] == "items"
    assert httpx.post(base, json={}).json()["error"]["param"] == "metadata"
    assert httpx.get(f"{base}/items", params={"order": "sideways"}).json()["error"]["param"] == "order"
    assert httpx.get(f"{base}/items/item_nope").status_code == 404
    assert httpx.get(f"{base}/items", params={"after": "item_nope"}).status_code == 404


def test_other_keys_get_404_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    keys = cli_keys(path, capsys)
    with (ServerThread(make_app(dialect="openai", keys_file=str(path))) as srv,
          OpenAI(base_url=srv.base_url, api_key=keys[0], max_retries=0) as mine,
          OpenAI(base_url=srv.base_url, api_key=keys[1], max_retries=0) as theirs):
        conv = mine.conversations.create(items=[{"type": "message", "role": "user", "content": "secret"}])
        item = mine.conversations.items.list(conv.id).data[0]
        for attempt in (lambda: theirs.conversations.retrieve(conv.id),
                        lambda: theirs.conversations.update(conv.id, metadata={"x": "y"}),
                        lambda: theirs.conversations.delete(conv.id),
                        lambda: theirs.conversations.items.list(conv.id),
                        lambda: theirs.conversations.items.create(conv.id, items=[{"role": "user", "content": "x"}]),
                        lambda: theirs.conversations.items.retrieve(item.id, conversation_id=conv.id),
                        lambda: theirs.conversations.items.delete(item.id, conversation_id=conv.id),
                        lambda: theirs.responses.create(model="scripted-a", input="x", conversation=conv.id)):
            with pytest.raises(openai.NotFoundError):
                attempt()
        # a platform conversation_id belongs to the key that used it first
        auth = {"authorization": f"Bearer {keys[0]}"}
        body = {"model": "scripted-a", "input": "hi", "conversation_id": "thread-1", "stream": False}
        assert httpx.post(f"{srv.base_url}/responses", json=body, headers=auth).status_code == 200
        other = httpx.post(f"{srv.base_url}/responses", json=body, headers={"authorization": f"Bearer {keys[1]}"})
        assert other.status_code == 404 and other.json()["error"]["param"] == "conversation_id"
        assert len(mine.conversations.items.list(conv.id).data) == 1  # untouched by the attempts
