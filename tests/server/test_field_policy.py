"""The field policy: every late-2026 request field is honoured, mapped or refused (docs/compatibility.md has a row for
each, held to the code by tests/docs/test_compatibility_claims.py), and a field nobody here knows is accepted and
reported (header, log line, counter) or refused under ``strict_fields``, over HTTP and WebSocket.

The upstream is the SIMULATED in-process scripted one; the app, uvicorn and the sockets are real.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.field_policy import IGNORED_FIELDS_HEADER, KNOWN_FIELDS, MAX_REPORTED, ignored_fields
from respstream.server.inputs.prompt_cache import MAX_BREAKPOINTS, parse_prompt_cache

from .helpers import ServerThread

PAGE = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
FIELD_SECTIONS = ("### Open Responses `CreateResponseBody`", "### OpenAI Responses fields beyond the spec",
                  "### Late-2026 request fields")

# The top-level request fields of spec/openai-surface-2026.md (row number: field), what a late-2026 client sends.
SPEC_FIELDS = {
    2: "stream", 2.1: "previous_response_id", 8: "context_management", 10: "prompt_cache_key",
    11: "prompt_cache_options", 11.1: "prompt_cache_retention", 12: "safety_identifier", 12.1: "user",
    13: "truncation", 14: "conversation", 15: "include", 16: "background", 17: "background_options",
    18: "tools", 20: "tool_choice", 22: "moderation", 23: "stream_options", 24: "access_programs",
    25: "client_metadata", 26: "multi_agent", 27: "image",
}


def _field_rows() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    rows: dict[str, str] = {}
    for heading in FIELD_SECTIONS:
        start = text.index(heading)
        stop = text.find("\n### ", start + len(heading))
        section = text[start:stop if stop > 0 else len(text)]
        rows.update(re.findall(r"^\| `([^`]+)` \| ([a-z /]+) \|", section, flags=re.MULTILINE))
    return rows


def test_every_spec_field_has_a_row() -> None:
    rows = _field_rows()
    missing = sorted(f for f in SPEC_FIELDS.values() if f not in rows)
    assert missing == [], f"late-2026 fields with no row in docs/compatibility.md: {missing}"


def test_the_known_fields_are_exactly_the_top_level_rows() -> None:
    top_level = {name for name in _field_rows() if "." not in name and "[" not in name}
    assert sorted(top_level - KNOWN_FIELDS) == [], "rows for fields the parser does not know"
    assert sorted(KNOWN_FIELDS - top_level) == [], "fields the parser knows with no row in docs/compatibility.md"


def test_unknown_fields_are_listed_in_order_bounded_and_refused_when_strict() -> None:
    body = {"input": "x", "zeta": 1, "model": "m", "alpha": {"a": 1}}
    assert ignored_fields(body, strict=False) == ("zeta", "alpha")
    many = {f"f{i}": i for i in range(100)}
    assert len(ignored_fields(many, strict=False)) == MAX_REPORTED
    assert ignored_fields({"x" * 500: 1}, strict=False) == ("x" * 64,)
    assert ignored_fields({"a\r\nset-cookie: x": 1, "字段,b": 2}, strict=False) == ("a??set-cookie: x", "???b")
    with pytest.raises(HTTPError) as refused:
        ignored_fields(body, strict=True)
    assert (refused.value.status, refused.value.code, refused.value.param) == (400, "unknown_parameter", "zeta")


# -- prompt caching ------------------------------------------------------------------------------------------------
def test_retention_is_mapped_onto_the_cache_lifetime() -> None:
    assert parse_prompt_cache({"prompt_cache_retention": "24h"}).ttl_seconds == 24 * 3600
    assert parse_prompt_cache({"prompt_cache_retention": "in_memory"}).ttl_seconds == 1800
    assert parse_prompt_cache({"prompt_cache_options": {"ttl": "12h"}}).ttl_seconds == 12 * 3600
    assert parse_prompt_cache({}).ttl_seconds == 1800
    cache = parse_prompt_cache({"prompt_cache_options": {"mode": "explicit"}})
    assert (cache.mode, cache.echo()) == ("explicit", {"prompt_cache_options": {"ttl": "30m", "mode": "explicit"}})
    assert parse_prompt_cache({}).echo() == {}


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt_cache_retention": "7d"}, "prompt_cache_retention"),
    ({"prompt_cache_retention": "24h", "prompt_cache_options": {"ttl": "30m"}}, "prompt_cache_retention"),
    ({"prompt_cache_options": {"ttl": "1h"}}, "prompt_cache_options.ttl"),
    ({"prompt_cache_options": {"mode": "always"}}, "prompt_cache_options.mode"),
    ({"prompt_cache_options": "30m"}, "prompt_cache_options"),
], ids=["retention-value", "retention-and-ttl", "ttl", "mode", "not-an-object"])
def test_bad_cache_options_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(HTTPError) as bad:
        parse_prompt_cache(body)
    assert (bad.value.status, bad.value.param) == (400, param)


def _marked(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": f"block {i}",
                                          "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}}]}
            for i in range(n)]


def test_breakpoints_are_kept_with_their_place_and_bounded() -> None:
    cache = parse_prompt_cache({"input": _marked(MAX_BREAKPOINTS)})
    assert [(b.item, b.part, b.ttl_seconds) for b in cache.breakpoints] == [
        (i, 0, 12 * 3600) for i in range(MAX_BREAKPOINTS)]
    with pytest.raises(HTTPError) as too_many:
        parse_prompt_cache({"input": _marked(MAX_BREAKPOINTS + 1)})
    assert too_many.value.param == f"input[{MAX_BREAKPOINTS}].content[0].prompt_cache_breakpoint"


# -- against a live gateway ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[ServerThread, httpx.Client]]:
    app = create_app(Config(dialect="openai", upstreams=["scripted:4"]))
    with ServerThread(app, lifespan="on", ws="websockets-sansio") as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        yield server, client


def _ignored_count(client: httpx.Client, transport: str) -> float:
    text = client.get("/metrics").text
    found = re.search(rf'^respstream_ignored_request_fields_total{{transport="{transport}"}} (\S+)$', text,
                      flags=re.MULTILINE)
    return float(found[1]) if found else 0.0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_unknown_field_is_accepted_and_reported(gateway: tuple[ServerThread, httpx.Client], stream: bool,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    _, client = gateway
    before = _ignored_count(client, "http")
    with caplog.at_level(logging.INFO, logger="respstream.server"):
        answer = client.post("/v1/responses", json={"input": "Say hi.", "stream": stream, "turbo_mode": True,
                                                     "reasoning_budget": 3})
        answer.read()
    assert answer.status_code == 200, answer.text
    assert answer.headers[IGNORED_FIELDS_HEADER] == "turbo_mode, reasoning_budget"
    assert _ignored_count(client, "http") == before + 2
    assert any("turbo_mode, reasoning_budget" in r.getMessage() for r in caplog.records)


def test_input_tokens_names_unknown_fields_as_the_create_would(gateway: tuple[ServerThread, httpx.Client]) -> None:
    _, client = gateway
    counted = client.post("/v1/responses/input_tokens", json={"input": "Say hi.", "turbo_mode": True})
    assert counted.status_code == 200, counted.text
    assert counted.headers[IGNORED_FIELDS_HEADER] == "turbo_mode"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_field_name_no_header_can_carry_is_shown_safely(gateway: tuple[ServerThread, httpx.Client],
                                                          stream: bool) -> None:
    _, client = gateway
    answer = client.post("/v1/responses", json={"input": "Say hi.", "stream": stream, "x\r\ny": 1, "字段": 2})
    answer.read()
    assert answer.status_code == 200, answer.text
    assert answer.headers[IGNORED_FIELDS_HEADER] == "x??y, ??"


def test_a_request_with_only_known_fields_has_no_header(gateway: tuple[ServerThread, httpx.Client]) -> None:
    _, client = gateway
    answer = client.post("/v1/responses", json={"input": "Say hi.", "stream": False, "prompt_cache_key": "k"})
    assert answer.status_code == 200
    assert IGNORED_FIELDS_HEADER not in answer.headers


def test_late_fields_are_echoed(gateway: tuple[ServerThread, httpx.Client]) -> None:
    _, client = gateway
    answer = client.post("/v1/responses", json={
        "input": "Say hi.", "stream": False, "prompt_cache_retention": "24h", "access_programs": {"cyber": "standard"},
        "safety_identifier": "user-7"})
    assert answer.status_code == 200, answer.text
    response = answer.json()
    assert response["prompt_cache_retention"] == "24h"
    assert response["access_programs"] == {"cyber": "standard"}
    assert response["safety_identifier"] == "user-7"
    answer = client.post("/v1/responses", json={"input": "Say hi.", "stream": False,
                                                 "prompt_cache_options": {"mode": "explicit"}})
    assert answer.json()["prompt_cache_options"] == {"ttl": "30m", "mode": "explicit"}


def _socket_turn(server: ServerThread, body: dict[str, Any]) -> dict[str, Any]:
    with connect(f"ws://127.0.0.1:{server.port}/v1/responses") as ws:
        ws.send(json.dumps({"type": "response.create", **body}))
        while True:
            event = json.loads(ws.recv(timeout=10))
            if event["type"] in ("response.completed", "response.failed") or event["type"] == "error":
                return dict(event)


def test_an_unknown_field_on_a_socket_is_accepted_and_counted(gateway: tuple[ServerThread, httpx.Client]) -> None:
    server, client = gateway
    before = _ignored_count(client, "websocket")
    last = _socket_turn(server, {"input": "Say hi.", "turbo_mode": True})
    assert last["type"] == "response.completed", last
    assert _ignored_count(client, "websocket") == before + 1


def test_strict_fields_refuses_an_unknown_field_over_http_and_socket() -> None:
    app = create_app(Config(dialect="openai", upstreams=["scripted:4"], strict_fields=True))
    with ServerThread(app, lifespan="on", ws="websockets-sansio") as server, \
            httpx.Client(base_url=server.url, timeout=30) as client:
        answer = client.post("/v1/responses", json={"input": "Say hi.", "stream": False, "turbo_mode": True})
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["param"]) == (400, "unknown_parameter", "turbo_mode")
        assert client.post("/v1/responses", json={"input": "Say hi.", "stream": False}).status_code == 200
        counted = client.post("/v1/responses/input_tokens", json={"input": "Say hi.", "turbo_mode": True})
        assert (counted.status_code, counted.json()["error"]["param"]) == (400, "turbo_mode")
        last = _socket_turn(server, {"input": "Say hi.", "turbo_mode": True})
        assert last["type"] == "error", last
        assert "turbo_mode" in json.dumps(last)


# -- random values of the late fields: a 200 or a 400 naming a field, never a 5xx ----------------------------------
_ANY = st.recursive(st.none() | st.booleans() | st.integers(-5, 5000) | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=3), max_leaves=8)
_LATE = {
    "context_management": st.lists(st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["compaction", "other"]) | _ANY,
        "compact_threshold": st.integers(-1, 5000) | _ANY}), max_size=2) | _ANY,
    "prompt_cache_options": st.fixed_dictionaries({}, optional={
        "ttl": st.sampled_from(["30m", "12h", "1d"]) | _ANY, "mode": st.sampled_from(["implicit", "explicit"]) | _ANY,
    }) | _ANY,
    "prompt_cache_retention": st.sampled_from(["in_memory", "24h", "7d"]) | _ANY,
    "access_programs": st.fixed_dictionaries({}, optional={
        "cyber": st.sampled_from(["standard", "daybreak_blue"]) | _ANY}) | _ANY,
    "moderation": _ANY, "multi_agent": _ANY, "image": _ANY, "surprise": _ANY,
    "input": st.lists(st.sampled_from([
        {"role": "user", "content": "hi"}, {"type": "compaction_trigger"}, {"type": "compaction_trigger", "id": "x"},
        {"role": "user", "content": [{"type": "input_text", "text": "x",
                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]}])
        | st.builds(lambda mark: {"role": "user", "content": [{"type": "input_text", "text": "x",
                                                               "prompt_cache_breakpoint": mark}]}, _ANY),
        min_size=1, max_size=6),
}


def test_random_late_fields_get_a_200_or_a_400_naming_a_field(gateway: tuple[ServerThread, httpx.Client]) -> None:
    _, client = gateway

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(body=st.fixed_dictionaries({"input": _LATE["input"]},
                                      optional={k: v for k, v in _LATE.items() if k != "input"}))
    def run(body: dict[str, Any]) -> None:
        answer = client.post("/v1/responses", json={"stream": False, **body})
        assert answer.status_code in (200, 400), answer.text[:300]
        if answer.status_code == 400:
            error = answer.json()["error"]
            assert error["param"] and error["code"] in ("invalid_value", "invalid_type", "unsupported_parameter",
                                                        "missing_required_parameter"), error

    run()
