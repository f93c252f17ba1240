"""text.format json_schema work stays off the event loop and bounded (issue #30 H1, H2, M1, L6).

The schema is held to the [limits] caps when the request arrives (a 400 naming the cap), and every check whose cost
can grow faster than its input runs in a validation process with a deadline that kills it, on a linear-time regex
engine. The upstream is the SIMULATED scripted one; the app, sockets and validation processes are real.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from websockets.sync.client import connect

from respstream.server import request_limits
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.structured_output import check_output, check_schema, parse_text_format
from respstream.server.request_limits import WorkLimits
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app

T = TypeVar("T")
# A draft-04 enum mixing strings and numbers: jsonschema's uniqueItems falls back to comparing every pair.
BIG_ENUM = {"$schema": "http://json-schema.org/draft-04/schema#",
            "enum": [f"v{i}" if i % 2 else i for i in range(1_500)]}
REDOS = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}
REDOS_ANSWER = json.dumps({"a": "a" * 29 + "!"})  # 26 s of backtracking on Python's re


@pytest.fixture(autouse=True)
def default_limits() -> Iterator[None]:
    request_limits.install(WorkLimits())
    yield
    request_limits.install(WorkLimits())


def _fmt(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "name": "t", "schema": schema}


async def _with_loop_gap(work: Awaitable[T]) -> tuple[T, float]:
    """``work``'s result and the longest time the event loop went without running a 10 ms ticker meanwhile."""
    gap = 0.0
    done = False

    async def tick() -> None:
        nonlocal gap
        last = time.monotonic()
        while not done:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gap, last = max(gap, now - last), now

    ticker = asyncio.create_task(tick())
    try:
        result = await work
    finally:
        done = True
        await ticker
    return result, gap


def test_an_enum_past_the_cap_is_refused_when_the_request_arrives() -> None:
    with pytest.raises(HTTPError) as info:
        parse_text_format(_fmt(BIG_ENUM))
    assert info.value.status == 400 and info.value.param == "text.format.schema"
    assert "limits.schema_max_enum_values" in info.value.message and "1000" in info.value.message


@pytest.mark.parametrize(("schema", "key"), [
    ({"description": "x" * (300 << 10)}, "schema_max_bytes"),
    ({"anyOf": [{"type": "string"}] * 12_000}, "schema_max_nodes"),
    ({"items": json.loads('{"items":' * 70 + "{}" + "}" * 70)}, "schema_max_depth"),
    ({"properties": {f"p{i}": {"pattern": "a"} for i in range(201)}}, "schema_max_patterns"),
])
def test_each_schema_cap_is_a_400_naming_it(schema: dict[str, Any], key: str) -> None:
    with pytest.raises(HTTPError) as info:
        parse_text_format(_fmt(schema))
    assert info.value.code == "schema_too_large" and f"limits.{key}" in info.value.message


def test_the_caps_come_from_the_config() -> None:
    request_limits.install(WorkLimits.from_mapping({"schema_max_enum_values": 5_000}))
    parse_text_format(_fmt(BIG_ENUM))  # within the raised cap
    with pytest.raises(ValueError, match=r"limits\.schema_max_nodez"):
        WorkLimits.from_mapping({"schema_max_nodez": 1})


def test_a_redos_pattern_is_checked_in_linear_time_off_the_loop() -> None:
    fmt = parse_text_format(_fmt(REDOS))
    problem, gap = asyncio.run(_with_loop_gap(check_output(REDOS_ANSWER, fmt)))
    # Python's re would still be backtracking (the 5 s deadline would end it): RE2 answers with the mismatch.
    assert problem is not None and "does not match" in problem and "$.a" in problem
    assert gap < 2.0, f"the event loop stalled {gap:.1f} s"
    assert asyncio.run(check_output(json.dumps({"a": "aaaa"}), fmt)) is None


def test_a_pattern_re2_refuses_is_a_400_naming_it() -> None:
    fmt = parse_text_format(_fmt({"properties": {"a": {"pattern": "(a)\\1"}}}))
    with pytest.raises(HTTPError) as info:
        asyncio.run(check_schema(fmt))
    assert info.value.param == "text.format.schema" and "/properties/a/pattern" in info.value.message


def test_the_deadline_kills_a_check_that_runs_long() -> None:
    request_limits.install(WorkLimits(validation_seconds=1.0))
    # uniqueItems over 20,000 mixed values: ~2e8 comparisons in the validation process.
    fmt = parse_text_format(_fmt({"type": "array", "uniqueItems": True}))
    answer = json.dumps([f"v{i}" if i % 2 else i for i in range(20_000)])
    began = time.monotonic()
    problem, gap = asyncio.run(_with_loop_gap(check_output(answer, fmt)))
    assert problem is not None and "longer than 1 s" in problem
    assert time.monotonic() - began < 15 and gap < 2.0
    assert asyncio.run(check_output("[1, 2]", fmt)) is None  # a fresh process takes the next check


@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
def test_a_deeply_nested_answer_ends_with_a_clear_problem(kind: str) -> None:
    raw = {"type": "json_object"} if kind == "json_object" else _fmt({"items": {"type": "array"}})
    fmt = parse_text_format(raw)
    problem = asyncio.run(check_output("[" * 200_000 + "]" * 200_000, fmt))
    assert problem is not None and "nests too deeply" in problem
    nested = "[" * 900 + "]" * 900  # parses, then jsonschema recurses past the limit
    problem = asyncio.run(check_output(nested, parse_text_format(_fmt({"items": {"$ref": "#"}}))))
    assert problem is None or "nests too deeply" in problem


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerThread]:
    app = make_app(upstreams={"scripted-a": ScriptedUpstream(2, name="a", models=["scripted-a"])})
    with ServerThread(app, ws="websockets-sansio") as server:
        yield server


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens"])
def test_http_paths_refuse_the_big_schema_and_keep_healthz_fast(srv: ServerThread, path: str) -> None:
    body = {"model": "scripted-a", "input": "hi", "text": {"format": _fmt(BIG_ENUM)}}
    with httpx.Client(base_url=srv.url, timeout=30) as client:
        resp = client.post(path, json=body)
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "text.format.schema"
        bad = {**body, "text": {"format": _fmt({"type": 5})}}
        resp = client.post(path, json=bad)
        assert resp.status_code == 400 and "at '/type'" in resp.json()["error"]["message"]


def test_http_redos_answer_fails_cleanly_while_healthz_answers(srv: ServerThread) -> None:
    body = {"model": "scripted-a", "input": "hi", "stream": False, "text": {"format": _fmt(REDOS)}}
    with httpx.Client(base_url=srv.url, timeout=30) as client:
        resp = client.post("/v1/responses", json=body)  # the scripted answer is not JSON: a clean failure
        assert resp.status_code == 200 and resp.json()["status"] == "failed"
        assert resp.json()["error"]["code"] == "invalid_structured_output"
        began = time.monotonic()
        assert client.get("/healthz").status_code == 200
        assert time.monotonic() - began < 2.0


def test_websocket_response_create_refuses_the_big_schema(srv: ServerThread) -> None:
    with connect(f"ws://127.0.0.1:{srv.port}/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", "model": "scripted-a", "input": "hi",
                            "text": {"format": _fmt(BIG_ENUM)}}))
        event = json.loads(ws.recv(timeout=10))
        assert event["type"] == "error" and event["status"] == 400
        assert "schema_max_enum_values" in json.dumps(event)
