"""`respstream chat`, `resume`, `get`, `cancel` and `stream`'s output rules, against the real gateway with a
SIMULATED scripted upstream (in-process; stdout is captured, so not a terminal)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fakes.server_thread import ServerThread
from respstream.cli import main
from respstream.server.config import Config
from respstream.server.http.app import create_app


@pytest.fixture
def gateway(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    upstream = getattr(request, "param", "scripted:6?delay_ms=1&text=Hello+there+%0A%0A%0A%0Aworld.+++")
    config = Config(upstreams=[upstream], data_dir=str(tmp_path), dialect="openai")
    with ServerThread(create_app(config)) as srv:
        yield srv.base_url


def test_piped_stream_writes_the_final_answer_exactly_once(gateway: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The scripted text has blank-line runs and trailing spaces: the whitespace rewrite changes it.
    assert main(["stream", "hi", "--url", gateway]) == 0
    out = capsys.readouterr().out
    assert out == "Hello there\n\nworld.\n"


def test_stream_json_carries_temperature_and_previous_response(gateway: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "first", "--url", gateway, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["stream", "second", "--url", gateway, "--json", "--temperature", "0.5", "--instructions", "Be brief.",
                 "--previous-response-id", first["response_id"]]) == 0
    second = json.loads(capsys.readouterr().out)
    stored = httpx.get(f"{gateway}/responses/{second['response_id']}").json()
    assert stored["previous_response_id"] == first["response_id"]
    assert stored["temperature"] == 0.5 and stored["instructions"] == "Be brief."


@pytest.mark.parametrize(("argv", "message"), [
    (["--temperature", "5"], "--temperature must be between 0 and 2, not 5"),
    (["--max-output-tokens", "0"], "--max-output-tokens must be at least 1, not 0"),
    (["--idle-timeout", "-1"], "--idle-timeout must be a positive number of seconds, not -1"),
])
def test_bad_option_values_are_one_line_exit_2(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stream", "hi", "--url", "http://127.0.0.1:9/v1", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"respstream stream: {message}\n"


@pytest.mark.parametrize("gateway", ["scripted:8?delay_ms=1&fail_at=3"], indirect=True)
def test_a_stream_error_is_printed_once(gateway: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stream", "hi", "--url", gateway])
    captured = capsys.readouterr()
    assert code in (3, 4)
    assert captured.err.count("✗") == 1, captured.err


def test_chat_keeps_history_and_resets(gateway: str, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\n/history\n/reset\nthree\n/exit\nignored\n"))
    assert main(["chat", "--url", gateway]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("Hello there\n\nworld.\n") == 3
    assert "1. you: one" in captured.err and "2. you: two" in captured.err and "(new conversation)" in captured.err


def test_chat_continues_through_previous_response_id(gateway: str, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, object]] = []
    from respstream.client.sync import Client

    original = Client.stream

    def spy(self: Client, **request: object) -> object:
        seen.append(dict(request))
        return original(self, **request)

    monkeypatch.setattr(Client, "stream", spy)
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo\n/reset\nthree\n"))
    assert main(["chat", "--url", gateway, "--temperature", "0.3"]) == 0
    assert [r["input"] for r in seen] == ["one", "two", "three"]
    assert "previous_response_id" not in seen[0] and "previous_response_id" not in seen[2]
    previous = seen[1]["previous_response_id"]
    assert isinstance(previous, str) and previous.startswith("resp_")
    assert httpx.get(f"{gateway}/responses/{previous}").json()["status"] == "completed"
    assert all(r["temperature"] == 0.3 for r in seen)


@pytest.mark.parametrize("gateway", ["scripted:40?delay_ms=40"], indirect=True)
def test_get_resume_and_cancel(gateway: str, capsys: pytest.CaptureFixture[str]) -> None:
    created = httpx.post(f"{gateway}/responses", json={"input": "hi", "background": True}).json()
    rid = created["id"]
    time.sleep(0.3)
    assert main(["cancel", rid, "--url", gateway, "--json"]) == 8
    assert json.loads(capsys.readouterr().out)["status"] == "cancelled"
    assert main(["get", rid, "--url", gateway]) == 8
    assert f"{rid} · cancelled" in capsys.readouterr().err
    assert main(["resume", rid, "--url", gateway, "--json", "--starting-after", "2"]) == 8
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["status"] == "cancelled" and resumed["response_id"] == rid

    finished = httpx.post(f"{gateway}/responses", json={"input": "hi", "background": True}).json()["id"]
    for _ in range(100):
        if httpx.get(f"{gateway}/responses/{finished}").json()["status"] == "completed":
            break
        time.sleep(0.1)
    assert main(["get", finished, "--url", gateway]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["resume", finished, "--url", gateway, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output_text"]


def test_unknown_ids_are_one_line_exit_2(gateway: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("get", "cancel", "resume"):
        assert main([command, "resp_nope", "--url", gateway]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"respstream {command}: ") and err.count("\n") == 1 and "Traceback" not in err
