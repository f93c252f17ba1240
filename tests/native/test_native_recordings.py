"""Every recording (the hand-made real-server shapes in tests/data/native_recordings/ and tests/transcripts/), served
by a SIMULATED native Responses upstream (tests/fakes/responses_upstream.py) through the real gateway: the answer the
client gets, read by ``respstream replay --json`` (the CLI itself), has the upstream's own outcome and
``output_text``.

The outcome is the upstream's as the gateway's dialect can say it: ``completed`` and ``incomplete`` as they are; an
upstream that failed, errored or was cancelled is a failure terminal (``failed``; ``error`` in the platform dialect)
carrying the upstream's error code in its message; an upstream stream cut before its terminal (``truncated``) is a
failure terminal whose message says it was cut. The text is always the upstream's, to the character.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.responses_upstream import TRANSCRIPTS, FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.cli import main as respstream_cli
from respstream.server.config import Config
from respstream.server.http.app import create_app

RECORDINGS = Path(__file__).resolve().parent.parent / "data" / "native_recordings"
# "resumed" starts after a sequence number (its replay needs --starting-after); it has its own test.
FILES = sorted(RECORDINGS.glob("*.sse")) + sorted(p for p in TRANSCRIPTS.glob("*.sse") if p.stem != "resumed")
FAILED = ("failed", "error", "cancelled")


def replay_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any] | None:
    """``respstream replay --json PATH`` run in-process; None when it refuses the bytes (not an event stream)."""
    capsys.readouterr()
    respstream_cli(["replay", "--json", str(path)])
    out = capsys.readouterr().out
    try:
        result = json.loads(out)
    except ValueError:
        return None
    return result if isinstance(result, dict) and "status" in result else None


MODES = ("per_event", "512_byte_reads")  # one event per read as a live server sends; reads cut anywhere
DIALECTS = ("openai", "platform", "openresponses")
# The hand-made shapes in every read mode and dialect; the transcripts (test_replay_through_gateway.py reads them in
# 512-byte reads in every dialect) one event per read.
CASES = [(p, m, d) for p in sorted(RECORDINGS.glob("*.sse")) for m in MODES for d in DIALECTS] + [
    (p, "per_event", "openai") for p in sorted(TRANSCRIPTS.glob("*.sse")) if p.stem != "resumed"]


@pytest.fixture(scope="module")
def gateways() -> Iterator[Callable[[str, str], ServerThread]]:
    """A gateway per (read mode, dialect), each in front of its own SIMULATED upstream, started when first used."""
    started: dict[tuple[str, str], ServerThread] = {}
    with ExitStack() as stack:
        upstreams: dict[str, FakeResponsesUpstream] = {}

        def gateway(mode: str, dialect: str) -> ServerThread:
            if mode not in upstreams:
                fake = stack.enter_context(FakeResponsesUpstream(per_event=mode == "per_event"))
                for path in FILES:
                    fake.add(f"{path.parent.name}/{path.stem}", path.read_bytes())
                upstreams[mode] = fake
            if (mode, dialect) not in started:
                config = Config(
                    dialect=dialect,
                    upstreams=[f"responses+{upstreams[mode].base_url}"],
                    upstream_options={"retries": 0, "idle_timeout": 5.0},
                    tools={"enabled": []},
                    rewrite={"steps": []},
                )
                started[mode, dialect] = stack.enter_context(ServerThread(create_app(config)))
            return started[mode, dialect]

        yield gateway


@pytest.mark.parametrize(("path", "mode", "dialect"), CASES,
                         ids=[f"{p.parent.name}/{p.stem}-{m}-{d}" for p, m, d in CASES])
def test_recording_keeps_the_upstreams_outcome_and_text(
    gateways: Callable[[str, str], ServerThread], path: Path, mode: str, dialect: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = gateways(mode, dialect)
    want = replay_json(path, capsys)
    tools = sorted({c["name"] for c in (want or {}).get("tool_calls", []) if c.get("name")})
    body: dict[str, Any] = {"model": f"{path.parent.name}/{path.stem}", "input": "replay it", "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "name": t, "parameters": {"type": "object", "properties": {}}}
                         for t in tools]
    response = httpx.post(f"{server.base_url}/responses", json=body, timeout=30)
    assert response.status_code == 200, response.text
    client_stream = tmp_path / "gateway.sse"
    client_stream.write_bytes(response.content)
    got = replay_json(client_stream, capsys)
    assert got is not None, response.text
    failure = "error" if dialect == "platform" else "failed"
    if want is None:  # not an event stream at all: a clear failure
        assert got["status"] == failure and got["error"]["code"] == "upstream_error"
        return
    if want["status"] in ("completed", "incomplete"):
        assert got["status"] == want["status"], got["error"]
    else:
        assert got["status"] == failure, got
        message = got["error"]["message"]
        if want["status"] == "truncated":
            assert "cut" in message, message
        elif want["status"] == "cancelled":
            assert "cancelled" in message, message
        else:
            assert f"({want['error']['code'] or 'unknown'})" in message, message
    assert got["output_text"] == want["output_text"]


def test_annotation_indices_in_another_unit_are_not_reported(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/conformance.md, "Annotation indices": a citation counted in UTF-16 code units over non-ASCII text is a
    defensible stream (no violation); one past the text's end in every unit is still ``text.annotation_out_of_range``.
    """
    defensible = replay_json(RECORDINGS / "js_server_annotation_utf16_indices.sse", capsys)
    past_end = replay_json(RECORDINGS / "openai_annotation_past_end.sse", capsys)
    assert defensible is not None and past_end is not None
    assert [v["code"] for v in defensible["violations"]] == []
    assert [v["code"] for v in past_end["violations"]] == ["text.annotation_out_of_range"]
