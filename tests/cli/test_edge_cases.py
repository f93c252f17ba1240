"""``replay`` / ``check`` on the inputs an outside test might throw at them: framings, odd files, every terminal
shape, options at their limits. Each input is built here, so the expectation sits next to the bytes."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from respstream.cli import main
from respstream.errors import BadInputError
from respstream.protocol import StreamCore

CREATED = {"type": "response.created", "response": {"id": "r1", "model": "m", "status": "in_progress", "output": []}}
MESSAGE = {"id": "m", "type": "message", "role": "assistant"}
TEXT_EVENTS: list[dict[str, Any]] = [
    CREATED,
    {"type": "response.output_item.added", "output_index": 0, "item": {**MESSAGE, "content": []}},
    {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "hi"},
    {"type": "response.output_text.done", "item_id": "m", "output_index": 0, "content_index": 0, "text": "hi"},
    {"type": "response.output_item.done", "output_index": 0,
     "item": {**MESSAGE, "content": [{"type": "output_text", "text": "hi", "annotations": []}]}},
    {"type": "response.completed", "response": {"id": "r1", "status": "completed"}},
]


def numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "sequence_number": i} for i, e in enumerate(events)]


def frame(events: list[dict[str, Any]], *, name: str | None = "type", ids: bool = False, nl: str = "\n") -> bytes:
    """SSE blocks: ``name`` "type" (OpenAI), "message" (the seed), or None (data-only)."""
    out = []
    for e in numbered(events):
        block = f"id: {e['sequence_number']}{nl}" if ids else ""
        if name is not None:
            block += f"event: {e['type'] if name == 'type' else name}{nl}"
        out.append(block + f"data: {json.dumps(e)}{nl}{nl}")
    return "".join(out).encode()


def run(command: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([command, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def replay_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run("replay", ["--json", *extra, str(path)], capsys)
    assert err == ""
    return code, json.loads(out)


# --- framings ---------------------------------------------------------------------------------------------------

FRAMINGS = {
    # sse-starlette: CRLF line ends, id + event lines, and its ": ping - <time>" comment blocks
    "sse-starlette-crlf": b": ping - 2025-01-01 00:00:00+00:00\r\n\r\n" + frame(TEXT_EVENTS, ids=True, nl="\r\n"),
    "event-type-and-id": frame(TEXT_EVENTS, ids=True),
    "event-message": frame(TEXT_EVENTS, name="message"),
    "data-only": frame(TEXT_EVENTS, name=None),
    "bom": b"\xef\xbb\xbf" + frame(TEXT_EVENTS),
    "bom-crlf-data-only": b"\xef\xbb\xbf" + frame(TEXT_EVENTS, name=None, nl="\r\n"),
    "cr-only": frame(TEXT_EVENTS, nl="\r"),
    "keepalive-events": b"event: ping\ndata: \n\n" + frame(TEXT_EVENTS) + b"event: keepalive\ndata:\n\n",
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_every_framing_replays_the_same(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sse"
    path.write_bytes(FRAMINGS[name])
    code, data = replay_json(path, capsys, "--strict")
    assert (code, data["status"], data["output_text"], data["events"]) == (0, "completed", "hi", 6)
    assert data["violations"] == [] and data["last_sequence_number"] == 5
    assert run("check", [str(path)], capsys)[0] == 0


# --- not an event stream: exit 2 and one line -------------------------------------------------------------------

NOT_STREAMS = {
    "empty": (b"", "no Server-Sent Event with JSON data"),
    "blank-lines": (b"\n\n\r\n  \n", "no Server-Sent Event with JSON data"),
    "comments-only": (b": keep-alive\n\n: keep-alive\n\n", "no Server-Sent Event with JSON data"),
    "empty-data-events-only": (b"event: ping\ndata: \n\ndata:\n\n", "no Server-Sent Event with JSON data"),
    "done-only": (b"data: [DONE]\n\n", "no Server-Sent Event with JSON data"),
    "gzip": (gzip.compress(frame(TEXT_EVENTS)), "gzip-compressed"),
    "binary": (bytes(range(256)) * 8, "no Server-Sent Event with JSON data"),
    "html": (b"\n<!doctype html><html><body>502 Bad Gateway</body></html>", "markup (HTML/XML)"),
    "json-body": (b'{"error": {"message": "Invalid API key"}}', "no Server-Sent Event with JSON data"),
    "non-object-data": (frame(TEXT_EVENTS[:1]) + b"data: 42\n\n", "event 2 at byte"),
}


@pytest.mark.parametrize("name", sorted(NOT_STREAMS))
@pytest.mark.parametrize("command", ["replay", "check"])
def test_not_an_event_stream_exits_2_with_one_line(
    name: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, says = NOT_STREAMS[name]
    path = tmp_path / "t.sse"
    path.write_bytes(body)
    code, out, err = run(command, ["--json", str(path)], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"respstream {command}: bad input: ") and says in err


def test_gzip_is_recognised_even_when_its_magic_is_split() -> None:
    body = gzip.compress(frame(TEXT_EVENTS))
    core = StreamCore()
    core.feed(b" \n")
    core.feed(body[:1])  # could still be anything
    with pytest.raises(BadInputError, match="event 1 at byte 2: the input is gzip-compressed"):
        core.feed(body[1:])


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_path_exits_2_with_one_line(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.sse" if kind == "missing" else tmp_path
    for command in ("replay", "check"):
        code, out, err = run(command, [str(path)], capsys)
        assert (code, out) == (2, "") and err.count("\n") == 1 and f"cannot read {path}" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX named pipes")
def test_a_named_pipe_is_read_like_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as pipe:
            for i in range(0, len(FRAMINGS["event-type-and-id"]), 7):  # small writes: reads see partial blocks
                pipe.write(FRAMINGS["event-type-and-id"][i : i + 7])
                pipe.flush()

    writer = threading.Thread(target=write)
    writer.start()
    code, data = replay_json(fifo, capsys)
    writer.join(timeout=10)
    assert (code, data["output_text"], data["events"]) == (0, "hi", 6)


# --- terminals: status, exit code and the error field -------------------------------------------------------------

FLAT_ERROR = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}
NESTED_ERROR = {"type": "error", "error": {"type": "invalid_request_error", "code": "context_length_exceeded",
                                           "message": "Too long", "param": "input"}}
FAILED = {"type": "response.failed", "response": {"id": "r1", "status": "failed",
                                                  "error": {"code": "server_error", "message": "from response"}}}
TERMINALS: dict[str, tuple[list[dict[str, Any]], int, str, dict[str, Any] | None]] = {
    "error-cancelled": ([{"type": "error", "code": "cancelled", "message": "Cancelled"}], 8, "cancelled",
                        {"code": "cancelled", "message": "Cancelled"}),
    "failed-status-cancelled": ([{"type": "response.failed", "response": {"id": "r1", "status": "cancelled"}}],
                                8, "cancelled", None),
    "flat-error-then-failed": ([FLAT_ERROR, FAILED], 3, "failed",
                               {"code": "rate_limit_exceeded", "message": "Slow down"}),
    "nested-error-then-failed": ([NESTED_ERROR, FAILED], 3, "failed",
                                 {"code": "context_length_exceeded", "message": "Too long"}),
    "failed-alone": ([FAILED], 3, "failed", {"code": "server_error", "message": "from response"}),
    "flat-error-alone": ([FLAT_ERROR], 4, "error", {"code": "rate_limit_exceeded", "message": "Slow down"}),
    "nested-error-alone": ([NESTED_ERROR], 4, "error", {"code": "context_length_exceeded", "message": "Too long"}),
    "incomplete": ([{"type": "response.incomplete", "response": {
        "id": "r1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}], 5, "incomplete",
        None),
    "completed-status-incomplete": ([{"type": "response.completed", "response": {
        "id": "r1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}], 5,
        "incomplete", None),
    "completed": ([TEXT_EVENTS[-1]], 0, "completed", None),
    "no-terminal": ([], 6, "truncated", None),
}


@pytest.mark.parametrize("name", sorted(TERMINALS))
def test_terminal_shapes(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tail, exit_code, status, error = TERMINALS[name]
    path = tmp_path / "t.sse"
    path.write_bytes(frame([CREATED, *tail]))
    code, data = replay_json(path, capsys)
    assert (code, data["status"], data["error"]) == (exit_code, status, error)
    expected_codes = ["lifecycle.no_terminal"] if status == "truncated" else []
    assert [v["code"] for v in data["violations"]] == expected_codes
    # --strict: 7 only when there is a violation; otherwise the outcome's own code.
    assert replay_json(path, capsys, "--strict")[0] == (7 if expected_codes else exit_code)


@pytest.mark.parametrize(
    ("name", "events", "codes"),
    [
        ("event-after-terminal", [*TEXT_EVENTS, {"type": "keepalive"}], ["lifecycle.terminal_not_last"]),
        ("second-terminal", [*TEXT_EVENTS, FLAT_ERROR], ["lifecycle.terminal_not_last",
                                                         "lifecycle.multiple_terminal"]),
        ("second-created", [CREATED, *TEXT_EVENTS], ["lifecycle.created_not_first"]),
    ],
)
def test_lifecycle_violations_do_not_change_the_outcome(
    name: str, events: list[dict[str, Any]], codes: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.sse"
    path.write_bytes(frame(events))
    code, data = replay_json(path, capsys)
    assert (code, data["status"], data["output_text"]) == (0, "completed", "hi")  # without --strict: still 0
    assert [v["code"] for v in data["violations"]] == codes
    assert replay_json(path, capsys, "--strict")[0] == 7
    assert run("check", [str(path)], capsys)[0] == 1


def test_done_sentinel_after_the_terminal_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sse"
    path.write_bytes(frame(TEXT_EVENTS) + b"data: [DONE]\n\n")
    code, data = replay_json(path, capsys, "--strict")
    assert (code, data["events"], data["violations"]) == (0, 6, [])


# --- options at their limits --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-3"])
@pytest.mark.parametrize("command", ["replay", "check"])
def test_window_below_one_is_refused(value: str, command: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sse"
    path.write_bytes(frame(TEXT_EVENTS))
    code, out, err = run(command, ["--window", value, str(path)], capsys)
    assert (code, out) == (2, "")
    assert err == f"respstream {command}: --window must be at least 1, not {value}\n"


def test_window_one_lets_one_early_event_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = frame(TEXT_EVENTS).split(b"\n\n")
    swapped = tmp_path / "swapped.sse"
    swapped.write_bytes(b"\n\n".join([blocks[0], blocks[2], blocks[1], *blocks[3:]]))
    code, data = replay_json(swapped, capsys, "--window", "1")
    assert (code, data["output_text"]) == (0, "hi")
    assert [v["code"] for v in data["violations"]] == ["sequence.out_of_order"]
    two_early = tmp_path / "two_early.sse"
    two_early.write_bytes(b"\n\n".join([blocks[0], blocks[2], blocks[3], blocks[1], *blocks[4:]]))
    _, data = replay_json(two_early, capsys, "--window", "1")
    assert [v["code"] for v in data["violations"]][:2] == ["sequence.gap", "item.delta_before_added"]
    _, data = replay_json(two_early, capsys, "--window", "2")
    assert [v["code"] for v in data["violations"]] == ["sequence.out_of_order"]


def test_starting_after_beyond_the_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Every event is at or before the cursor: already delivered, so dropped as duplicates; no terminal after it.
    path = tmp_path / "t.sse"
    path.write_bytes(frame(TEXT_EVENTS))
    code, data = replay_json(path, capsys, "--starting-after", "40")
    assert (code, data["status"], data["events"], data["last_sequence_number"]) == (6, "truncated", 0, None)
    assert [v["code"] for v in data["violations"]] == ["sequence.duplicate"] * 6 + ["lifecycle.no_terminal"]
    code, out, err = run("replay", ["--starting-after", "-2", str(path)], capsys)
    assert (code, out, err) == (2, "", "respstream replay: --starting-after must be -1 or more, not -2\n")


def test_violations_beyond_the_cap_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("respstream.protocol.stream.MAX_VIOLATIONS", 2)
    path = tmp_path / "t.sse"
    path.write_bytes(frame(TEXT_EVENTS) * 3)  # every event twice more: 12 duplicates
    _, data = replay_json(path, capsys)
    assert len(data["violations"]) == 2 and data["violations_dropped"] == 10
    code, out, _ = run("check", ["--json", str(path)], capsys)
    checked = json.loads(out)
    assert (code, checked["ok"], len(checked["violations"]), checked["violations_dropped"]) == (1, False, 2, 10)
    code, out, _ = run("replay", [str(path)], capsys)
    assert "violations: 12" in out


def test_human_summary_of_a_stream_without_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sse"
    path.write_bytes(frame([{"type": "response.created", "response": {}},
                            {"type": "response.completed", "response": {"status": "completed"}}]))
    code, out, _ = run("replay", [str(path)], capsys)
    assert code == 0 and "response:" not in out and "status:     completed (response.completed)" in out


def test_live_suite_import_errors_other_than_its_own_are_not_hidden(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = importlib.import_module

    def missing_dependency(name: str) -> types.ModuleType:
        if name == "respstream.conformance.live":  # the suite exists but one of its own imports is missing
            raise ModuleNotFoundError("No module named 'somedep'", name="somedep")
        return real_import(name)

    monkeypatch.delitem(sys.modules, "respstream.conformance.live", raising=False)
    monkeypatch.setattr(importlib, "import_module", missing_dependency)
    code = main(["check", "--url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2
    # surfaced as what it is (the CLI's last-resort one-liner), not mistaken for "not available in this build"
    assert "internal error: ModuleNotFoundError: No module named 'somedep'" in err
    assert "not available" not in err and "Traceback" not in err
