"""Every client command connects where its ``--help`` says: ``--url`` > ``$RESPSTREAM_BASE_URL`` > the local default,
never ``OPENAI_BASE_URL`` / api.openai.com because ``OPENAI_API_KEY`` happens to be set (issue 31, item 1).

Against a real gateway with a SIMULATED scripted upstream; a second loopback server stands in for "somewhere else"
(the place OPENAI_BASE_URL points at) and records every request that reaches it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fakes.server_thread import ServerThread
from respstream.cli import main
from respstream.commands import connection
from respstream.server.config import Config
from respstream.server.http.app import create_app

COMMANDS = ("stream", "chat", "resume", "get", "cancel")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    config = Config(upstreams=["scripted:40?delay_ms=20&text=local+answer"], data_dir=str(tmp_path))
    with ServerThread(create_app(config)) as srv:
        yield srv.base_url


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that records every request: it must never see one."""
    seen: list[str] = []

    async def record(request: Request) -> JSONResponse:
        seen.append(f"{request.method} {request.url.path}")
        return JSONResponse({"error": {"message": "wrong place"}}, status_code=418)

    app = Starlette(routes=[Route("/{path:path}", record, methods=["GET", "POST", "DELETE"])])
    with ServerThread(app) as srv:
        yield srv.base_url, seen


def _background_id(gateway: str) -> str:
    created = httpx.post(f"{gateway}/responses", json={"input": "hi", "background": True, "store": True}, timeout=30)
    assert created.status_code == 200, created.text
    return str(created.json()["id"])


def _argv(command: str, response_id: str) -> list[str]:
    return {"stream": ["stream", "hi"], "chat": ["chat"], "resume": ["resume", response_id],
            "get": ["get", response_id], "cancel": ["cancel", response_id]}[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_default_url_is_the_local_gateway_even_with_openai_variables_set(
    command: str, gateway: str, elsewhere: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other, seen = elsewhere
    monkeypatch.delenv("RESPSTREAM_BASE_URL", raising=False)
    monkeypatch.delenv("RESPSTREAM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leave")
    monkeypatch.setenv("OPENAI_BASE_URL", other)
    # The documented default is 127.0.0.1:8080; the test's gateway listens on a free port instead, so the default is
    # pointed at it (the same module attribute every command reads).
    monkeypatch.setattr(connection, "DEFAULT_URL", gateway)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/exit\n"))
    code = main(_argv(command, _background_id(gateway)))
    captured = capsys.readouterr()
    assert seen == [], f"{command} sent {seen} to OPENAI_BASE_URL"
    assert code in (0, 8), captured.err  # cancel ends 8 (cancelled) or 0 (already finished)
    if command in ("stream", "chat"):
        assert "local answer" in captured.out


@pytest.mark.parametrize("command", COMMANDS)
def test_respstream_base_url_beats_the_default_and_url_beats_both(
    command: str, gateway: str, elsewhere: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other, seen = elsewhere
    monkeypatch.setattr(connection, "DEFAULT_URL", other)
    monkeypatch.setenv("RESPSTREAM_BASE_URL", gateway)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/exit\n"))
    response_id = _background_id(gateway)
    assert main(_argv(command, response_id)) in (0, 8), capsys.readouterr().err
    assert seen == []
    monkeypatch.setenv("RESPSTREAM_BASE_URL", other)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/exit\n"))
    assert main([*_argv(command, response_id), "--url", gateway]) in (0, 8), capsys.readouterr().err
    assert seen == []


def test_every_client_command_documents_the_same_default(capsys: pytest.CaptureFixture[str]) -> None:
    for command in COMMANDS:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "default: $RESPSTREAM_BASE_URL or http://127.0.0.1:8080/v1" in text, command
        assert "api.openai.com" not in text, command
