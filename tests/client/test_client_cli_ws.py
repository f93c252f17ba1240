"""`respstream stream --ws`: the same output and exit codes over WebSocket mode, against a live gateway on loopback
(SIMULATED scripted upstreams)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fakes.server_thread import ServerThread
from respstream.cli import main
from respstream.server.upstream.scripted import ScriptedUpstream
from server.helpers import make_app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    upstreams = {"scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"]),
                 "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2)}
    with ServerThread(make_app(dialect="openai", upstreams=upstreams), ws="websockets-sansio") as srv:
        yield srv.base_url


def test_ws_text_json_and_exit_codes(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "--ws", "hi", "--url", url, "--model", "scripted-a"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("The quick brown fox jumps over the lazy")
    assert main(["stream", "--ws", "--json", "hi", "--url", url, "--model", "scripted-a"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
    assert main(["stream", "--ws", "hi", "--url", url, "--model", "broken"]) == 3  # failed, as over SSE
    capsys.readouterr()
    assert main(["stream", "--ws", "hi", "--url", url, "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert "model_not_found" in err and "Traceback" not in err


def test_ws_unreachable_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "--ws", "hi", "--url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("respstream stream:") and "Traceback" not in err
