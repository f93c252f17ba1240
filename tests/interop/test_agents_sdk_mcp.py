"""The OpenAI Agents SDK runs an agent with a function tool AND a hosted MCP tool (``HostedMCPTool``) end to end
against the gateway (openai dialect). The MCP server is real (the official ``mcp`` SDK on loopback); the model is
the SIMULATED scripted upstream scripted to call ``add`` (MCP, run by the gateway inside the response) and then
``get_weather`` (the agent's function, run by the Agents SDK), then to answer in text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, HostedMCPTool, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from fakes.mcp_server import TestMcpServer
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.scripted import ScriptedUpstream

from .weather_agent import event_types, get_weather_tool


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[TestMcpServer, str, str]]:
    mcp = TestMcpServer()
    upstream = ScriptedUpstream(6, name="chain", models=["chain"], tool="add,get_weather")
    config = Config(dialect="openai", upstreams=["scripted:6"], tools={"fetch_allow": ["127.0.0.0/8"],
                                                                         "enabled": ["calculator"]})
    app = create_app(config, Components(upstreams=[upstream]))
    with ServerThread(mcp) as mcp_srv, ServerThread(app) as gateway:
        yield mcp, f"{mcp_srv.url}/mcp", gateway.base_url


async def test_agent_with_function_and_mcp_tools(servers: tuple[TestMcpServer, str, str]) -> None:
    mcp, mcp_url, base_url = servers
    set_tracing_disabled(True)  # tracing would try to upload to api.openai.com
    weather_calls: list[str] = []
    get_weather = get_weather_tool(weather_calls, "sunny in {city}")
    client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0, timeout=20)
    agent = Agent(
        name="helper",
        instructions="Use the tools.",
        tools=[get_weather, HostedMCPTool(tool_config={"type": "mcp", "server_label": "calc",
                                                       "server_url": mcp_url, "require_approval": "never"})],
        model=OpenAIResponsesModel(model="chain", openai_client=client),
    )
    before = len(mcp.calls)
    result = Runner.run_streamed(agent, "Add two numbers, then tell me the weather.", max_turns=5)
    raw_types, item_types = await event_types(result)
    await client.close()

    assert [name for name, _ in mcp.calls[before:]] == ["add"]  # the gateway ran the MCP tool once
    assert weather_calls == ["example"]  # the Agents SDK ran the function tool once
    assert "response.mcp_call.completed" in raw_types and "response.mcp_list_tools.completed" in raw_types
    assert item_types.count("tool_call_output_item") == 1  # only the function's output is the agent's to give
    assert item_types[-1] == "message_output_item"
    final: Any = result.final_output
    assert isinstance(final, str) and final
