"""`respstream stream`: live output under a pseudo-terminal, exit codes, --json and --events shapes."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from fakes.replay_server import (
    Plan,
    ReplayServer,
    Transcript,
    error_transcript,
    failed_transcript,
    incomplete_transcript,
    text_transcript,
    tool_transcript,
)
from respstream.cli import main

BIN = Path(sys.executable).with_name("respstream")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["stream", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("transcript", "code"),
    [
        (text_transcript("resp_ok"), 0),
        (failed_transcript(), 3),
        (error_transcript(), 4),
        (incomplete_transcript(), 5),
        (error_transcript("resp_cancelled", code="cancelled"), 8),
    ],
    ids=["completed", "failed", "error", "incomplete", "cancelled"],
)
def test_exit_codes_follow_replay(transcript: Transcript, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    with ReplayServer(transcript) as srv:
        assert _cli(["hi", "--url", srv.base_url], capsys)[0] == code


def test_truncated_foreground_exits_6_with_the_partial_text(capsys: pytest.CaptureFixture[str]) -> None:
    with ReplayServer(text_transcript("resp_cut")) as srv:
        srv.add(Plan(cut_after=7, cut_mode="reset"))
        code, out, err = _cli(["hi", "--url", srv.base_url], capsys)
    assert code == 6
    assert out.startswith("Hello, ")  # what had streamed stays on screen
    assert "truncated" in err and "Traceback" not in err


def test_background_drop_resumes_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with ReplayServer(text_transcript("resp_bgcli", background=True)) as srv:
        srv.add(Plan(cut_after=6, cut_mode="reset"))
        code, out, _ = _cli(["hi", "--url", srv.base_url, "--background"], capsys)
        methods = [r.method for r in srv.requests]
    assert code == 0
    assert out == "Hello, world.\n"
    assert methods == ["POST", "GET"]


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        (Plan(status=401, body=b'{"error":{"code":"invalid_api_key","message":"Incorrect API key"}}'),
         "HTTP 401 invalid_api_key: Incorrect API key"),
        (Plan(status=400, body=b'{"detail":"input is required","error":"bad_input"}'), "HTTP 400 bad_input"),
        (Plan(status=502, body=b"Bad Gateway", content_type="text/plain"), "HTTP 502: Bad Gateway"),
    ],
    ids=["401", "400-seed", "502-text"],
)
def test_http_errors_exit_2_with_one_line(plan: Plan, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with ReplayServer(text_transcript()) as srv:
        srv.add(plan, plan, plan)  # a 5xx is retried twice (with backoff) before the CLI gives up
        code, out, err = _cli(["hi", "--url", srv.base_url, "--api-key", "k"], capsys)
        attempts = len(srv.requests)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err and err.startswith("respstream stream: ")
    assert attempts == (3 if plan.status >= 500 else 1)


@pytest.mark.parametrize(
    ("body", "content_type", "needle"),
    [(b"<html><body>Login</body></html>", "text/html", "HTML"),
     (b'{"id": "resp_1", "status": "completed"}', "application/json", "not a Responses event stream")],
    ids=["html-page", "json-document"],
)
def test_a_2xx_body_that_is_not_an_event_stream_is_bad_input(
    body: bytes, content_type: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with ReplayServer(text_transcript()) as srv:
        # a 2xx whose body is not a stream (a captive portal, a server that ignored `stream: true`)
        srv.add(Plan(status=299, body=body, content_type=content_type))
        code, out, err = _cli(["hi", "--url", srv.base_url], capsys)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_unreachable_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["hi", "--url", "http://127.0.0.1:9/v1"], capsys)
    assert code == 2
    assert "cannot connect" in err and err.count("\n") == 1


def test_json_equals_replay_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = tool_transcript()
    capture = tmp_path / "t.sse"
    capture.write_bytes(b"".join(transcript.frame(e) for e in transcript.events))
    with ReplayServer(transcript) as srv:
        code, out, _ = _cli(["6*7?", "--url", srv.base_url, "--json"], capsys)
    assert code == 0
    streamed = json.loads(out)
    assert main(["replay", str(capture), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert streamed == replayed
    assert streamed["tool_calls"][0]["name"] == "calculator"


def test_events_timeline_has_one_line_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    transcript = text_transcript("resp_ev")
    with ReplayServer(transcript) as srv:
        code, out, err = _cli(["hi", "--url", srv.base_url, "--events"], capsys)
    lines = out.splitlines()
    assert code == 0
    assert len(lines) == len(transcript.events)
    assert [int(line.split()[0]) for line in lines] == list(range(len(transcript.events)))
    assert lines[2].split()[2] == "response.routing.completed" and "category=fast" in lines[2]
    assert 'delta="Hello"' in lines[5]
    assert "completed" in err
    assert not ANSI.search(out)  # not a terminal: no colours


def test_prompt_from_stdin_and_request_fields(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("a question from a pipe\n"))
    with ReplayServer(text_transcript()) as srv:
        code, _, _ = _cli(["-", "--url", srv.base_url, "--model", "fast", "--instructions", "be brief",
                           "--tool", "calculator", "--tool", "web_search", "--max-output-tokens", "50"], capsys)
        body: Any = srv.requests[0].json()
    assert code == 0
    assert body == {"input": "a question from a pipe\n", "model": "fast", "instructions": "be brief",
                    "tools": [{"type": "calculator"}, {"type": "web_search"}], "max_output_tokens": 50,
                    "stream": True}


def _spawn(url: str, *args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environ.update(env or {})
    # Ctrl-C as at a terminal: a runner started in the background of a non-interactive shell (`nohup make test &`)
    # passes SIGINT on as ignored, and the child would never see it.
    child = pexpect.spawn(str(BIN), ["stream", "hi", "--url", url, *args], env=environ, encoding="utf-8",
                          timeout=20, dimensions=(40, 120),
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    child.logfile_read = io.StringIO()  # everything the terminal showed, for assertions after EOF
    return child


def _screen(child: pexpect.spawn) -> str:
    log = child.logfile_read
    assert isinstance(log, io.StringIO)
    return log.getvalue()


def test_tty_shows_text_progressively_with_routing_and_stats() -> None:
    before_text, gate = threading.Event(), threading.Event()
    transcript = text_transcript("resp_live", ["Hello", ", ", "world", "."])
    with ReplayServer(transcript) as srv:
        # hold the stream before the first delta, then again after it, until the test has looked at the screen
        srv.add(Plan(gates={5: before_text, 6: gate}))
        child = _spawn(srv.base_url)
        try:
            child.expect("routed to gpt-oss-120b")
            child.expect("waiting for the first token")  # the spinner, on the terminal, while nothing came
            before_text.set()
            child.expect("Hello")
            assert "world" not in (child.before or "")  # the rest has not been sent yet: output is live
            gate.set()
            child.expect("world")
            child.expect("completed")
            child.expect("first token")
            child.expect(pexpect.EOF)
        finally:
            before_text.set()
            gate.set()
            child.close()
    assert child.exitstatus == 0
    screen = _screen(child)
    assert "\x1b[2m" in screen  # colours are on under a terminal without NO_COLOR (routing and stats are dimmed)
    assert ANSI.sub("", screen).count("Hello, world.") == 1


def test_tty_no_color_and_tool_calls() -> None:
    with ReplayServer(tool_transcript()) as srv:
        child = _spawn(srv.base_url, env={"NO_COLOR": "1"})
        child.expect(pexpect.EOF)
        child.close()
    text = _screen(child)
    assert child.exitstatus == 0
    assert "⚙ calculator" in text
    assert '✓ calculator({"expression":"6*7"}) completed → 42' in text
    assert "It is 42." in text
    assert "\x1b[3" not in text and "\x1b[2m" not in text  # NO_COLOR: no colour codes (the spinner may erase)


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
def test_ctrl_c_exits_130(background: bool) -> None:
    gate = threading.Event()
    with ReplayServer(text_transcript("resp_int", background=background)) as srv:
        srv.add(Plan(gate_after=6, gate=gate))
        child = _spawn(srv.base_url, *(["--background"] if background else []))
        try:
            child.expect("Hello")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            gate.set()
            child.close()
    screen = _screen(child)
    assert child.exitstatus == 130
    assert "Traceback" not in screen
    assert "interrupted" in screen
    hint = "background response resp_int continues (resume with: respstream resume resp_int --starting-after 5)"
    assert (hint in screen) is background
