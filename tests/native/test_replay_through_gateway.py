"""Every recorded transcript, served by a SIMULATED native Responses upstream (tests/fakes/responses_upstream.py),
through the real gateway (real router, writer, store) over loopback: the stream the client gets has zero violations
in each dialect, and its assembled answer equals ``respstream replay`` of the original (text, refusal, function
calls, outcome). A failed, cut or broken upstream stream ends with the dialect's clear failure terminal, and the
response's record says what was repaired. Hosted-tool, reasoning and other items the upstream streamed are passed
through: the client's assembled output holds them, in order, equal to the original's but for their ids (ours) and,
in Open Responses, the ``openai:`` prefix of the types the spec does not define."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.responses_upstream import TRANSCRIPTS, FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.errors import BadInputError
from respstream.protocol.stream import StreamCore
from respstream.server.config import Config
from respstream.server.http.app import create_app

NAMES = sorted(p.stem for p in TRANSCRIPTS.glob("*.sse"))
DIALECTS = ["platform", "openai", "openresponses"]
OWN_ITEMS = ("message", "function_call")


def original(name: str) -> dict[str, Any] | None:
    """``respstream replay`` of the transcript as the upstream sent it (None: not an event stream at all)."""
    core = StreamCore(starting_after=9 if name == "resumed" else None)
    try:
        core.feed((TRANSCRIPTS / f"{name}.sse").read_bytes())
        core.close()
    except BadInputError:
        return None
    return core.result.to_json()


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeResponsesUpstream]:
    with FakeResponsesUpstream() as fake:
        yield fake


@pytest.fixture(scope="module", params=DIALECTS)
def gateway(request: pytest.FixtureRequest, upstream: FakeResponsesUpstream) -> Iterator[tuple[str, ServerThread]]:
    config = Config(
        dialect=request.param,
        upstreams=[f"responses+{upstream.base_url}"],
        upstream_options={"retries": 0, "idle_timeout": 5.0},
        tools={"enabled": []},  # the transcripts' function calls are the client's: the response ends with them
        rewrite={"steps": []},  # the answer as the upstream gave it
    )
    with ServerThread(create_app(config)) as server:
        yield request.param, server


def run(server: ServerThread, dialect: str, name: str, tools: list[str]) -> tuple[StreamCore, httpx.Response]:
    body: dict[str, Any] = {"model": name, "input": "replay it", "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "name": t, "parameters": {"type": "object", "properties": {}}}
                         for t in tools]
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.base_url}/responses", json=body)
    core = StreamCore(dialect=dialect)
    core.feed(response.content)
    core.close()
    return core, response


@pytest.mark.parametrize("name", NAMES)
def test_transcript_through_the_gateway(gateway: tuple[str, ServerThread], name: str) -> None:
    dialect, server = gateway
    want = original(name)
    calls = [c for c in (want or {}).get("tool_calls", []) if c.get("name")]
    core, response = run(server, dialect, name, sorted({c["name"] for c in calls}))
    assert response.status_code == 200, response.text
    assert [v.to_json() for v in core.violations] == []
    got = core.result.to_json()
    failure = "error" if dialect == "platform" else "failed"
    if want is None or want["status"] not in ("completed", "incomplete"):
        assert got["status"] == failure
        assert got["error"]["code"] == "upstream_error"
    else:
        assert got["status"] == want["status"]
    if want is not None:
        assert got["output_text"] == want["output_text"]
        assert got["refusal"] == want["refusal"]
    if want is not None and want["status"] in ("completed", "incomplete"):
        assert passed_items(got["output"]) == passed_items(want["output"])
    if want is not None and want["status"] in ("completed", "incomplete"):  # a cut call is not a call to make
        assert [(c["call_id"], c["name"], c["arguments"]) for c in got["tool_calls"]] == [
            (c["call_id"], c["name"], c["arguments"]) for c in calls
        ]
    # The record says what was repaired, exactly what the protocol core found wrong with the upstream's stream.
    rid = got["response_id"]
    record = httpx.get(f"{server.base_url}/responses/{rid}", timeout=10).json()
    assert "respstream:repairs" in record
    if want is not None and want["status"] in ("completed", "incomplete"):
        found: dict[str, int] = {}
        whole = want if name != "resumed" else _whole_stream(name)  # the upstream sends it as a whole stream
        for v in whole["violations"]:
            found[v["code"]] = found.get(v["code"], 0) + 1
        repairs = record["respstream:repairs"]
        # The gateway stops reading at the upstream's terminal: what came after it is seen (and counted) only as far
        # as it arrived in the same read (a read may end anywhere among those events). Those codes are counted at most
        # as often as the whole stream has them; every other code exactly.
        late = {"lifecycle.terminal_not_last", "lifecycle.multiple_terminal", "item.delta_after_done"}
        assert {k: v for k, v in repairs.items() if k not in late} == {k: v for k, v in found.items() if k not in late}
        for code in late:
            assert 0 <= repairs.get(code, 0) <= found.get(code, 0), (code, repairs, found)


def passed_items(output: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The items the gateway passes through (not its own message / function_call items), without their ids."""
    return [(str(o.get("type")).removeprefix("openai:"), {k: v for k, v in o.items() if k not in ("id", "type")})
            for o in output if o.get("type") not in OWN_ITEMS]


def _whole_stream(name: str) -> dict[str, Any]:
    core = StreamCore()
    core.feed((TRANSCRIPTS / f"{name}.sse").read_bytes())
    core.close()
    return core.result.to_json()
