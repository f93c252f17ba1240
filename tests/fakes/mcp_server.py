"""A real MCP server (the official ``mcp`` SDK's MCPServer, streamable HTTP) for tests, served on loopback.

Its tools are deterministic: ``add(a, b)``, ``echo(text)`` and ``fail()`` (reports a tool error). ``calls`` records
every call and ``headers`` the request headers the server saw (to check the gateway forwards a tool's ``headers``).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import Receive, Scope, Send

__all__ = ["TestMcpServer"]


class TestMcpServer:
    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []
        server = MCPServer("respstream-test")

        @server.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            self.calls.append(("add", {"a": a, "b": b}))
            return a + b

        @server.tool()
        def echo(text: str) -> str:
            """Echo the text back."""
            self.calls.append(("echo", {"text": text}))
            return f"echo: {text}"

        @server.tool()
        def fail() -> str:
            """Always fails."""
            self.calls.append(("fail", {}))
            raise ToolError("this tool always fails")  # a ToolError reaches the client with its message

        self._app = server.streamable_http_app()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self._app(scope, receive, send)
