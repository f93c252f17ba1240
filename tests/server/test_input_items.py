"""GET /v1/responses/{id}/input_items and POST /v1/responses/input_tokens through the official openai SDK and raw
HTTP, against a live gateway on loopback (SIMULATED scripted upstream; it has no tokenizer, so counts are the
documented estimate)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from .helpers import ServerThread, make_app
from .sdk_client import cli_keys, sdk

__all__ = ["sdk"]  # the OpenAI SDK client fixture (sdk_client.py) on this module's srv

HISTORY = [
    {"type": "message", "role": "user", "content": "My name is Ada."},
    {"type": "message", "role": "assistant", "content": "Hello Ada."},
    {"type": "message", "role": "user", "content": "What is my name?"},
]


@pytest.fixture(scope="module", params=["openai", "openresponses"])
def srv(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    with ServerThread(make_app(dialect=request.param)) as server:
        yield server


def test_sdk_lists_input_items_with_order_limit_after(sdk: OpenAI) -> None:
    response = sdk.responses.create(model="scripted-a", input=HISTORY)
    page = sdk.responses.input_items.list(response.id, order="asc")
    texts = [item.content[0].text for item in page.data]  # type: ignore[union-attr]
    assert texts == ["My name is Ada.", "Hello Ada.", "What is my name?"]
    assert all(item.id for item in page.data) and page.has_more is False
    newest = sdk.responses.input_items.list(response.id)  # default order: desc
    assert [i.id for i in newest.data] == [i.id for i in reversed(page.data)]
    first = sdk.responses.input_items.list(response.id, order="asc", limit=2)
    assert len(first.data) == 2 and first.has_more is True
    rest = sdk.responses.input_items.list(response.id, order="asc", limit=2, after=first.data[-1].id)
    assert [i.id for i in rest.data] == [page.data[2].id] and rest.has_more is False
    walked = [i.id for i in sdk.responses.input_items.list(response.id, order="asc", limit=1)]  # auto-pagination
    assert walked == [i.id for i in page.data]
    included = sdk.responses.input_items.list(response.id, include=["message.input_image.image_url"])
    assert len(included.data) == 3


def test_continuation_lists_only_its_own_input(sdk: OpenAI) -> None:
    first = sdk.responses.create(model="scripted-a", input="one")
    second = sdk.responses.create(model="scripted-a", input=[
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"}], previous_response_id=first.id)
    kinds = [i.type for i in sdk.responses.input_items.list(second.id, order="asc").data]
    assert kinds == ["function_call", "function_call_output"]


def test_input_items_bad_input(srv: ServerThread, sdk: OpenAI) -> None:
    rid = sdk.responses.create(model="scripted-a", input="x").id
    with pytest.raises(openai.NotFoundError):
        sdk.responses.input_items.list("resp_unknown")
    for query, param in [({"order": "up"}, "order"), ({"limit": "0"}, "limit"), ({"limit": "abc"}, "limit"),
                         ({"include": "bogus"}, "include")]:
        r = httpx.get(f"{srv.base_url}/responses/{rid}/input_items", params=query)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = httpx.get(f"{srv.base_url}/responses/{rid}/input_items", params={"after": "msg_nope"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "after"
    hidden = sdk.responses.create(model="scripted-a", input="x", store=False)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.input_items.list(hidden.id)


def test_sdk_counts_input_tokens(sdk: OpenAI) -> None:
    short = sdk.responses.input_tokens.count(model="scripted-a", input="hi")
    long = sdk.responses.input_tokens.count(model="scripted-a", input=HISTORY, instructions="Be kind.")
    assert short.object == "response.input_tokens" and 0 < short.input_tokens < long.input_tokens
    assert short.model_extra == {"estimated": True}  # the scripted upstream has no tokenizer
    previous = sdk.responses.create(model="scripted-a", input=HISTORY)
    chained = sdk.responses.input_tokens.count(model="scripted-a", previous_response_id=previous.id)
    assert chained.input_tokens > long.input_tokens - 5  # the history and the answer are counted
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.input_tokens.count(model="scripted-a", previous_response_id="resp_nope")
    assert info.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError) as unknown:
        sdk.responses.input_tokens.count(model="nope", input="x")
    assert unknown.value.code == "model_not_found"


def test_other_keys_see_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    keys = cli_keys(path, capsys)
    with (ServerThread(make_app(dialect="openai", keys_file=str(path))) as srv,
          OpenAI(base_url=srv.base_url, api_key=keys[0], max_retries=0) as mine,
          OpenAI(base_url=srv.base_url, api_key=keys[1], max_retries=0) as theirs,
          OpenAI(base_url=srv.base_url, api_key="wrong", max_retries=0) as wrong):
        rid = mine.responses.create(model="scripted-a", input="secret").id
        assert len(mine.responses.input_items.list(rid).data) == 1
        with pytest.raises(openai.NotFoundError):
            theirs.responses.input_items.list(rid)
        with pytest.raises(openai.BadRequestError):
            theirs.responses.input_tokens.count(previous_response_id=rid)
        with pytest.raises(openai.AuthenticationError):
            wrong.responses.input_tokens.count(input="x")
