"""MCP connections go to the checked address and read bounded responses (issue #30 H5, M3, M4).

The MCP servers are real (the official ``mcp`` SDK, streamable HTTP, on loopback); the model is the SIMULATED
scripted upstream; DNS is SIMULATED by a ``socket.getaddrinfo`` hook for two test names (the internet boundary),
everything else resolves as usual.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import mcp_types
import pytest
from mcp.server.mcpserver import MCPServer
from starlette.types import Receive, Scope, Send

from fakes.mcp_server import TestMcpServer
from respstream.server.tools.mcp_transport import guard_message
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app


class _BoundsServer:
    """An MCP server answering in JSON (not SSE) with a tool of ``parts`` content parts and, when ``pad`` is set, a
    tools list of about ``pad`` bytes; records the Host header of every request."""

    def __init__(self, parts: int = 50, pad: int = 0, json_response: bool = True) -> None:
        self.hosts: list[str] = []
        server = MCPServer("respstream-bounds")

        @server.tool(description="x" * pad or "Many parts.")
        def many() -> list[str]:
            return [f"p{i}" for i in range(parts)]

        self._app = server.streamable_http_app(json_response=json_response)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.hosts.append(dict(scope["headers"]).get(b"host", b"").decode())
        await self._app(scope, receive, send)


class _Dns:
    """SIMULATED DNS for two names: ``pinned.test`` is always 127.0.0.1; ``rebind.test`` is 127.0.0.2 the first time
    (what the policy allows) and 127.0.0.1 after (a rebinding attack). Counts the lookups of each."""

    def __init__(self) -> None:
        self.real = socket.getaddrinfo
        self.lookups: dict[str, int] = {"pinned.test": 0, "rebind.test": 0}

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.lookups:
            return self.real(host, port, *args, **kwargs)
        self.lookups[name] += 1
        ip = "127.0.0.2" if name == "rebind.test" and self.lookups[name] == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port or 80)))]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> _Dns:
    hook = _Dns()
    monkeypatch.setattr(socket, "getaddrinfo", hook)
    return hook


def _gateway(allow: list[str], **limits: int) -> ServerThread:
    upstreams = {"many": ScriptedUpstream(2, name="many", models=["many"], tool="many"),
                 "adder": ScriptedUpstream(2, name="adder", models=["adder"], tool="add")}
    app = make_app(dialect="openai", upstreams=upstreams, tools={"fetch_allow": allow}, limits=limits)
    return ServerThread(app, loop="asyncio")  # resolves through socket.getaddrinfo, where the DNS hook sits


def _final(base: str, model: str, url: str) -> dict[str, Any]:
    body = {"model": model, "input": "go", "stream": True,
            "tools": [{"type": "mcp", "server_label": "s", "server_url": url, "require_approval": "never"}]}
    with httpx.stream("POST", f"{base}/responses", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    response: dict[str, Any] = events[-1]["response"]
    return response


def test_a_rebound_name_is_never_connected_to(dns: _Dns) -> None:
    mcp = TestMcpServer()
    with ServerThread(mcp) as srv, _gateway(["127.0.0.2/32"]) as gw:
        final = _final(gw.base_url, "adder", f"http://rebind.test:{srv.port}/mcp")
    assert final["status"] == "failed" and final["output"][0]["type"] == "mcp_list_tools"
    assert final["output"][0]["error"]
    # The policy checked 127.0.0.2; the server on 127.0.0.1 (where a second lookup points) got nothing.
    assert mcp.headers == [] and dns.lookups["rebind.test"] == 1


def test_a_pinned_session_keeps_the_name_and_resolves_once(dns: _Dns) -> None:
    mcp = _BoundsServer()
    with ServerThread(mcp) as srv, _gateway(["127.0.0.0/8"]) as gw:
        _final(gw.base_url, "many", f"http://pinned.test:{srv.port}/mcp")
    assert len(mcp.hosts) >= 2 and set(mcp.hosts) == {f"pinned.test:{srv.port}"}
    assert dns.lookups["pinned.test"] == 1


def test_a_tools_list_past_the_byte_cap_is_not_read_whole() -> None:
    mcp = _BoundsServer(pad=2 << 20)
    with ServerThread(mcp) as srv, _gateway(["127.0.0.0/8"], mcp_max_response_bytes=1 << 20) as gw:
        final = _final(gw.base_url, "many", f"{srv.url}/mcp")
    assert final["status"] == "failed"
    assert "limits.mcp_max_response_bytes" in final["output"][0]["error"]


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
def test_a_result_past_the_part_cap_fails_the_call_naming_it(json_response: bool) -> None:
    mcp = _BoundsServer(parts=50, json_response=json_response)
    with ServerThread(mcp) as srv, _gateway(["127.0.0.0/8"], mcp_max_result_parts=10) as gw:
        final = _final(gw.base_url, "many", f"{srv.url}/mcp")
    call = next(item for item in final["output"] if item["type"] == "mcp_call")
    assert call["status"] == "failed" and "limits.mcp_max_result_parts" in call["error"]
    assert "50 content parts" in call["error"]


def test_the_part_count_is_checked_in_linear_work_before_the_sdk_parses() -> None:
    parts = 20_000
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": f"p{i}"}
                                                                         for i in range(parts)]}}).encode()
    began = time.perf_counter()
    guarded = json.loads(guard_message(body, 1_000))
    guard_seconds = time.perf_counter() - began
    assert guarded["id"] == 7 and "20000 content parts" in guarded["error"]["message"]
    assert guard_message(body, parts) == body  # within the cap: passed on untouched
    began = time.perf_counter()
    mcp_types.CallToolResult.model_validate_json(json.dumps(json.loads(body)["result"]))  # what the SDK would do
    sdk_seconds = time.perf_counter() - began
    assert guard_seconds * 5 < sdk_seconds, (guard_seconds, sdk_seconds)
