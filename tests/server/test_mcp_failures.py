"""An MCP tool that fails for any reason ends its ``mcp_call`` item ``failed`` and never makes the response
``cancelled`` (issue 42, X2): the answer nested 5,000 deep that crashed the SDK's reader, a server that drops the
connection mid-call, a tool error.

The MCP servers are real (the official ``mcp`` SDK, streamable HTTP, on loopback), with an ASGI wrapper that replaces
the answer to ``tools/call`` where a test needs a hostile one; the model is the SIMULATED scripted upstream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from fakes.asgi_body import request_body
from fakes.mcp_server import TestMcpServer
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app

DEPTH = 5_000


class _HostileCalls:
    """The test MCP server, except that its answer to ``method`` is ``answer(request id)`` (raw bytes, JSON)."""

    def __init__(self, answer: Any, method: str = "tools/call") -> None:
        self.inner = TestMcpServer()
        self.answer = answer
        self.method = method

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body = await request_body(receive)
        request = json.loads(body)
        if request.get("method") != self.method:
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:  # the body was replayed: what follows is the real channel (a disconnect, or nothing)
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.inner(scope, replay, send)
            return
        payload = self.answer(request["id"])
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        session = next((v for k, v in scope["headers"] if k == b"mcp-session-id"), None)
        if session is not None:
            headers.append((b"mcp-session-id", session))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _deep_result(request_id: Any) -> bytes:
    deep = '{"a":' * DEPTH + "1" + "}" * DEPTH
    return (f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"x"}}],'
            f'"structuredContent":{deep}}}}}').encode()


def _deep_message(request_id: Any) -> bytes:
    return ("[" * DEPTH + "]" * DEPTH).encode()


def _final(base: str, url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = {"model": "adder", "input": "go", "stream": True,
            "tools": [{"type": "mcp", "server_label": "s", "server_url": url, "require_approval": "never"}]}
    with httpx.stream("POST", f"{base}/responses", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    return events[-1]["response"], events


def _run(hostile: _HostileCalls) -> tuple[dict[str, Any], list[str]]:
    upstreams = {"adder": ScriptedUpstream(2, name="adder", models=["adder"], tool="add")}
    app = make_app(dialect="openai", upstreams=upstreams, tools={"fetch_allow": ["127.0.0.0/8"]})
    with ServerThread(hostile) as srv, ServerThread(app) as gw:
        final, events = _final(gw.base_url, f"{srv.url}/mcp")
    return final, [e["type"] for e in events]


def test_an_answer_that_kills_the_session_fails_the_call_and_the_response() -> None:
    """The SDK's reader dies on a result nested 5,000 deep (RecursionError): at main the response ended
    ``cancelled`` with no error and the ``mcp_call`` item stayed ``in_progress``."""
    final, types = _run(_HostileCalls(_deep_result))
    call = next(item for item in final["output"] if item["type"] == "mcp_call")
    assert call["status"] == "failed" and "RecursionError" in call["error"], call
    assert "response.mcp_call.failed" in types and types[-1] == "response.failed"
    assert final["status"] == "failed" and final["error"]["code"] == "tool_error", final["error"]
    assert "ended during the call" in final["error"]["message"]


def test_an_answer_the_sdk_refuses_fails_the_call_and_the_model_is_told() -> None:
    """A message nested 5,000 deep that the SDK refuses to parse (its session lives): the call fails, the model
    hears why and answers; never cancelled."""
    final, types = _run(_HostileCalls(_deep_message))
    call = next(item for item in final["output"] if item["type"] == "mcp_call")
    assert call["status"] == "failed" and "recursion limit" in call["error"], call
    assert "response.mcp_call.failed" in types
    assert final["status"] == "completed" and final["output"][-1]["type"] == "message"


@pytest.mark.parametrize("answer", [_deep_result, _deep_message], ids=["deep-result", "deep-message"])
def test_a_deep_tools_list_fails_the_listing_not_as_cancelled(answer: Any) -> None:
    final, types = _run(_HostileCalls(answer, method="tools/list"))
    listing = final["output"][0]
    assert listing["type"] == "mcp_list_tools" and listing["error"], listing
    assert final["status"] == "failed" and final["error"]["code"] == "tool_error", final["error"]
    assert "response.mcp_list_tools.failed" in types


def test_a_result_of_the_wrong_shape_fails_the_call_only() -> None:
    """A result the SDK rejects (no ``resultType``): the call fails naming it, the session and the response go on."""
    final, _ = _run(_HostileCalls(lambda request_id: json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "no"}],
                                                         "isError": True}}).encode()))
    call = next(item for item in final["output"] if item["type"] == "mcp_call")
    assert call["status"] == "failed" and call["error"].startswith("ValidationError"), call
    assert final["status"] == "completed"


class _CancelledInside(ScriptedUpstream):
    """SIMULATED upstream whose library cancels the generation from inside (as an anyio cancel scope that leaks
    into the caller's task does) after its first chunk."""

    async def generate(self, request: Any) -> Any:
        async for chunk in super().generate(request):
            yield chunk
            raise asyncio.CancelledError

    async def generate_batches(self, request: Any) -> Any:
        async for batch in super().generate_batches(request):
            yield batch
            raise asyncio.CancelledError


def test_a_cancellation_nobody_asked_for_is_a_failure_not_cancelled() -> None:
    upstreams = {"inside": _CancelledInside(4, name="inside", models=["inside"])}
    with ServerThread(make_app(dialect="openai", upstreams=upstreams)) as gw:
        r = httpx.post(f"{gw.base_url}/responses", json={"model": "inside", "input": "go", "stream": False},
                       timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["status"] == "failed" and r.json()["error"]["code"] == "internal_error", r.json()["error"]
    assert "nobody asked for" in r.json()["error"]["message"]


def test_a_cancel_that_was_asked_for_still_ends_cancelled() -> None:
    upstreams = {"slow": ScriptedUpstream(200, name="slow", models=["slow"], delay_ms=50)}
    with ServerThread(make_app(dialect="openai", upstreams=upstreams)) as gw:
        created = httpx.post(f"{gw.base_url}/responses", json={"model": "slow", "input": "go", "background": True},
                             timeout=30).json()
        cancel = httpx.post(f"{gw.base_url}/responses/{created['id']}/cancel", timeout=30)
        assert cancel.status_code == 200, cancel.text[:300]
        final = httpx.get(f"{gw.base_url}/responses/{created['id']}", timeout=30).json()
    assert final["status"] == "cancelled", final
