"""The OpenAI Agents SDK (``openai-agents``) against our gateway: ``Runner.run_streamed`` with a function tool.

The gateway runs the ``openai`` dialect with the SIMULATED scripted upstream, which calls ``get_weather`` on the
first turn (arguments built from the tool's JSON schema: ``{"city": "example"}``) and answers in text once the last
message is the tool result, so the round trip happens on every run.

What the Agents SDK needs from us, as found here:
- the ``openai`` dialect: it rejects ``function_call`` items for tools it did not define, so server-side tools
  must use OpenAI's hosted-tool item shapes (DESIGN §4);
- it sends the tool result back as a full ``input`` list (the user message, the ``function_call`` item it got,
  then ``function_call_output``) without ``previous_response_id``; the gateway must accept echoed output items;
- it accepts hosted ``web_search_call`` items (and their ``response.web_search_call.*`` events) from the server's
  own search before the model's turn: it reports them as ``tool_call_item`` without running anything;
- it treats ``response.completed`` as the only success terminal and raises ``ModelBehaviorError`` on a stream
  without one; when ``response.completed`` has an empty ``output`` it rebuilds it from ``output_item.done``.
"""

from __future__ import annotations

from typing import Any

from agents import Runner

from .gateways import Gateway
from .weather_agent import event_types, weather_agent


async def test_run_streamed_with_a_function_tool(tool_gateway_openai: Gateway) -> None:
    calls: list[str] = []
    agent, client = weather_agent(tool_gateway_openai.base_url, calls)
    result = Runner.run_streamed(agent, "What is the weather in Paris?", max_turns=4)
    raw_types, item_types = await event_types(result)
    await client.close()

    assert calls == ["example"]  # the scripted upstream filled the schema's required string
    # "weather" routes to retrieval, so each turn may start with a hosted web_search_call (also a tool_call_item);
    # our function's call is followed by its output, and the run ends with the model's message.
    assert item_types.count("tool_call_output_item") == 1, item_types
    output_at = item_types.index("tool_call_output_item")
    assert item_types[output_at - 1] == "tool_call_item"
    assert item_types[-1] == "message_output_item"
    assert "response.function_call_arguments.delta" in raw_types
    assert raw_types.count("response.created") == 2  # two model turns: the call, then the answer
    assert raw_types.count("response.completed") == 2
    final: Any = result.final_output
    assert isinstance(final, str) and final
