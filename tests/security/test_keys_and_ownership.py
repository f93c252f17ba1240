"""Items 3, 6 and 21 (keys part) of issue 13: conversations are scoped to the API key; the keys file fails closed.

A real gateway app on a real loopback uvicorn thread; the model is the SIMULATED scripted upstream, recording what
it is sent so the test sees exactly what reached the model's context."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import httpx
import pytest

from respstream.cli import main
from respstream.server.upstream.base import Chunk, GenerationRequest
from respstream.server.upstream.scripted import ScriptedUpstream
from server.helpers import ServerThread, make_app


class RecordingUpstream(ScriptedUpstream):
    """SIMULATED scripted model that keeps the messages of every request it gets."""

    def __init__(self) -> None:
        super().__init__(2, name="rec", models=["scripted-a"])
        self.seen: list[list[dict[str, Any]]] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        self.seen.append([dict(m) for m in request.messages])
        async for chunk in super().generate(request):
            yield chunk


def _key(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["keys", "--file", str(path), "create", "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["key"])


def _auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_conversation_of_another_key_is_neither_read_nor_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "keys.json"
    alice, mallory = _key(path, capsys), _key(path, capsys)
    upstream = RecordingUpstream()
    conversation = f"conv_{uuid.uuid4().hex}"
    with ServerThread(make_app(keys_file=str(path), upstreams={"scripted-a": upstream})) as srv:
        def say(key: str, text: str) -> httpx.Response:
            body = {"input": text, "conversation_id": conversation, "stream": False}
            return httpx.post(f"{srv.url}/v1/responses", json=body, headers=_auth(key), timeout=20)

        assert say(alice, "alice secret: 4242").status_code == 200
        seen_before = len(upstream.seen)
        stolen = say(mallory, "mallory writes here")
        assert stolen.status_code == 404, stolen.text  # another key's conversation is "not found"
        assert len(upstream.seen) == seen_before  # nothing of alice's history reached a model for mallory
        assert say(alice, "what did I say?").status_code == 200
        context = json.dumps(upstream.seen[-1])
        assert "4242" in context  # alice still has her own history...
        assert "mallory writes here" not in context  # ...and mallory's turn did not land in it


def _serve_keyed(path: Path) -> ServerThread:
    return ServerThread(make_app(keys_file=str(path)))


@pytest.mark.parametrize("emptied", ['{"keys": []}', "{}", ""], ids=["no-keys", "empty-object", "empty-file"])
def test_emptied_keys_file_keeps_the_gateway_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], emptied: str
) -> None:
    path = tmp_path / "keys.json"
    key = _key(path, capsys)
    with _serve_keyed(path) as srv:
        assert httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}).status_code == 401
        path.write_text(emptied)
        os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock
        anonymous = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False})
        assert anonymous.status_code == 401, anonymous.text
        keyed = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False}, headers=_auth(key))
        assert keyed.status_code in (401, 200)  # an empty-file read counts as "no keys" or unreadable: never open
        assert keyed.status_code != 500


def test_deleted_or_unreadable_keys_file_admits_nobody(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    key = _key(path, capsys)
    with _serve_keyed(path) as srv:
        path.unlink()
        for headers in ({}, _auth(key)):
            assert httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}, headers=headers).status_code == 401


def test_truncated_keys_file_keeps_the_last_good_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.json"
    key = _key(path, capsys)
    good = path.read_text()
    with _serve_keyed(path) as srv, caplog.at_level(logging.ERROR, logger="respstream.server.http.auth"):
        path.write_text(good[: len(good) // 2])  # a half-written file
        os.utime(path, ns=(1, 1))
        keyed = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False}, headers=_auth(key))
        assert keyed.status_code == 200, keyed.text  # not a 500: the last good set still applies
        assert httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}).status_code == 401
        assert any("not valid JSON" in r.getMessage() for r in caplog.records)


def test_keys_create_in_a_missing_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nonexistent" / "dir" / "k.json"
    assert main(["keys", "--file", str(target), "create"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and str(target.parent) in err and "Traceback" not in err
    assert not (tmp_path / "nonexistent").exists()
