"""The Response object is complete in every dialect (events/response_object.py): every lifecycle event's Response,
the non-streaming JSON, GET, a background POST and a cancel validate against the Open Responses ResponseResource
schema (protocol/spec_schema.py); values are the ones used; timestamps share one unit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from respstream.protocol.spec_schema import response_problems
from respstream.server.events.response_object import SamplingDefaults
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app, post_stream

DIALECTS = ["platform", "openai", "openresponses"]
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "x-extra": 1}


class _WarmScripted(ScriptedUpstream):
    """SIMULATED upstream that declares its own sampling defaults (as the embedded llama.cpp model does)."""

    sampling_defaults = SamplingDefaults(temperature=0.7, top_p=0.9)


@pytest.fixture(scope="module", params=DIALECTS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    upstreams = {
        "plain": ScriptedUpstream(6, name="plain", models=["plain"]),
        "warm": _WarmScripted(3, name="warm", models=["warm"]),
        "slow": ScriptedUpstream(200, name="slow", models=["slow"], delay_ms=20),
        "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2),
        "thinker": ScriptedUpstream(3, name="thinker", models=["thinker"], reasoning=2),
        "client-tool": ScriptedUpstream(4, name="ct", models=["client-tool"], tool="get_weather"),
        "tooly": ScriptedUpstream(4, name="tooly", models=["tooly"], tool="calculator"),
    }
    with ServerThread(make_app(dialect=request.param, upstreams=upstreams)) as srv:
        yield srv.url, request.param


# OpenAI's own hosted-tool items (the openai dialect is faithful to OpenAI's wire) are outside the Open Responses
# item union, as `respstream:` extension items are; everything else of the object must validate.
_OPENAI_HOSTED = {"web_search_call", "mcp_call"}


def _valid(response: dict[str, Any]) -> None:
    standard = [i for i in response.get("output", []) if i.get("type") not in _OPENAI_HOSTED]
    assert response_problems({**response, "output": standard}) == [], response


@pytest.mark.parametrize("model", ["plain", "broken", "thinker", "client-tool", "tooly"])
def test_every_lifecycle_response_is_complete(server: tuple[str, str], model: str) -> None:
    url, dialect = server
    tools = [WEATHER] if model == "client-tool" else []
    body: dict[str, Any] = {"input": "what is 2+2", "model": model, "tools": tools}
    got = post_stream(url, body, dialect=dialect)
    assert got.status_code == 200 and got.violations == [], got.violations
    carried = [p["response"] for p in got.payloads() if "response" in p]
    for response in carried:
        _valid(response)
    with httpx.Client(timeout=20) as c:  # what GET shows afterwards (the platform's `error` terminal has none)
        final = c.get(f"{url}/v1/responses/{carried[0]['id']}").json()
    _valid(final)
    if got.payloads()[-1]["type"] != "error":
        assert final == carried[-1]
    assert all(r["completed_at"] is None for r in carried[:-1] if r is not carried[-1])
    assert carried[0]["completed_at"] is None
    assert (final["completed_at"] is not None) == (final["status"] == "completed")
    if model == "broken":
        assert final["status"] == "failed" and final["error"]["code"] == "upstream_error"


def test_max_output_tokens_incomplete_response_is_complete(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "x", "model": "plain", "max_output_tokens": 2}, dialect=dialect)
    final = got.payloads()[-1]["response"]
    _valid(final)
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["max_output_tokens"] == 2 and final["completed_at"] is None


def test_json_get_and_values_actually_used(server: tuple[str, str]) -> None:
    url, dialect = server
    with httpx.Client(timeout=20) as c:
        r = c.post(f"{url}/v1/responses", json={"input": "x", "model": "plain", "stream": False, "tools": [WEATHER],
                                               "temperature": 0.2, "metadata": {"k": "v"}, "instructions": "Be brief."})
        body = r.json()
        _valid(body)
        assert body["temperature"] == 0.2 and body["top_p"] == 1.0  # OpenAI's default for an undeclared upstream
        assert body["presence_penalty"] == 0.0 and body["frequency_penalty"] == 0.0 and body["top_logprobs"] == 0
        assert body["truncation"] == "disabled" and body["service_tier"] == "default"
        assert body["reasoning"] == {"effort": None, "summary": None}
        assert body["metadata"] == {"k": "v"} and body["instructions"] == "Be brief."
        # The tool echo has the spec's FunctionTool shape: strict kept, unknown keys dropped.
        assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                                  "parameters": WEATHER["parameters"], "strict": True}]
        got = c.get(f"{url}/v1/responses/{body['id']}").json()
        _valid(got)
        assert got == body
        warm = c.post(f"{url}/v1/responses", json={"input": "x", "model": "warm", "stream": False}).json()
        _valid(warm)
        assert (warm["temperature"], warm["top_p"]) == (0.7, 0.9)  # the upstream's own defaults
        # Both timestamps in the dialect's one unit (the seed: milliseconds).
        unit = 1000 if dialect == "platform" else 1
        assert abs(body["created_at"] - time.time() * unit) < 120 * unit
        assert 0 <= body["completed_at"] - body["created_at"] < 60 * unit


def test_background_queued_and_cancelled_responses_are_complete(server: tuple[str, str]) -> None:
    url, _ = server
    with httpx.Client(timeout=20) as c:
        queued = c.post(f"{url}/v1/responses", json={"input": "x", "model": "slow", "background": True}).json()
        _valid(queued)
        assert queued["status"] == "queued" and queued["background"] is True and queued["completed_at"] is None
        cancelled = c.post(f"{url}/v1/responses/{queued['id']}/cancel").json()
        _valid(cancelled)
        assert cancelled["status"] == "cancelled" and cancelled["completed_at"] is None


def test_server_tools_can_be_asked_for_by_their_extension_names() -> None:
    from respstream.server.inputs.requests import parse_request

    names = {"calculator", "web_search", "web_fetch", "current_datetime"}
    req = parse_request({"input": "x", "tools": [{"type": "respstream:calculator"}, {"type": "respstream:web_search"}]},
                        server_tool_names=names)
    assert req.server_tools == {"calculator", "web_search"} and req.client_tools == []
