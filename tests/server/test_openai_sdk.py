"""The official openai SDK as a real client over loopback HTTP, in both dialects."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai import OpenAI

from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app


@pytest.fixture(scope="module", params=["platform", "openai"])
def client(request: pytest.FixtureRequest) -> Iterator[tuple[OpenAI, str]]:
    upstreams = {
        "scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"]),
        "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2),
        "tooly": ScriptedUpstream(4, name="tooly", models=["tooly"], tool="calculator"),
    }
    with ServerThread(make_app(dialect=request.param, upstreams=upstreams)) as srv:
        sdk = OpenAI(base_url=f"{srv.url}/v1", api_key="x", max_retries=0, timeout=20)
        yield sdk, request.param
        sdk.close()


def test_stream_get_final_response(client: tuple[OpenAI, str]) -> None:
    sdk, _ = client
    with sdk.responses.stream(model="auto", input="hello") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "".join(deltas) == "The quick brown fox jumps over the lazy"
    assert final.usage is not None and final.usage.output_tokens == 8


def test_create_non_streaming(client: tuple[OpenAI, str]) -> None:
    sdk, _ = client
    response = sdk.responses.create(model="scripted-a", input="hello")
    assert response.status == "completed"
    assert response.output_text.startswith("The quick")
    assert sdk.responses.retrieve(response.id).output_text == response.output_text


def test_server_tool_stream(client: tuple[OpenAI, str]) -> None:
    sdk, dialect = client
    # Server tools run when listed (the openai dialect runs none unless asked; docs/compatibility.md).
    with sdk.responses.stream(model="tooly", input="2+2?", tools=[{"type": "calculator"}]) as stream:  # type: ignore[list-item]
        final = stream.get_final_response()
    kinds = [item.type for item in final.output]
    assert kinds[0] == ("function_call" if dialect == "platform" else "mcp_call")
    assert final.output_text


def test_failure_raises_cleanly(client: tuple[OpenAI, str]) -> None:
    sdk, dialect = client
    with pytest.raises((openai.APIError, RuntimeError)) as info, \
            sdk.responses.stream(model="broken", input="hello") as stream:
        stream.get_final_response()
    if dialect == "openai":
        assert isinstance(info.value, openai.APIError)  # the nested error event


def test_http_errors_map_to_sdk_exceptions(client: tuple[OpenAI, str]) -> None:
    sdk, _ = client
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.create(model="no-such-model", input="hello")
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict) and info.value.body.get("code") == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve("resp_missing")
