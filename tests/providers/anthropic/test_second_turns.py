"""Second turns: what the adapter sends back upstream after a recorded first turn, through the real gateway. The
assistant turn comes back as the API gave it (thinking blocks with their exact signature, redacted_thinking data,
in order, before the text and the tool_use blocks), each tool_result right after its tool_use in the next user turn,
roles alternating: with ``previous_response_id`` (the gateway's stored response), with ``store: false`` (the client
replays the output items itself), and on a second gateway instance sharing the store (across instances)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import CASES, post
from .simulated_anthropic import SimulatedAnthropic
from .test_recordings_through_gateway import reply_of, request_of

TWO_TURN = sorted(name for name, c in CASES.items()
                  if c["expect"]["status"] == "completed" and (c["expect"]["tool_calls"]
                                                               or c["expect"]["reasoning"]["present"]))
FOLLOW_UP = "langchaingo__text-count.sse"  # what the provider answers the second turn with


def expected_assistant(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant turn the API wants back, from the expected outcome alone."""
    want = case["expect"]
    reasoning = want["reasoning"]
    blocks: list[dict[str, Any]] = [{"type": "redacted_thinking", "data": r["value"]} for r in reasoning["redacted"]]
    blocks += [{"type": "thinking", "thinking": reasoning["text"], "signature": s["value"]}
               for s in reasoning["signatures"]]
    if want["output_text"]:
        blocks.append({"type": "text", "text": want["output_text"]})
    blocks += [{"type": "tool_use", "id": c["call_id"], "name": c["name"], "input": c["arguments"]}
               for c in want["tool_calls"]]
    return blocks


def outputs_for(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function_call_output", "call_id": c["call_id"], "output": f"result of {c['name']}"}
            for c in case["expect"]["tool_calls"]]


def check_sent_back(case: dict[str, Any], sent: dict[str, Any]) -> None:
    turns = sent["messages"]
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    assert turns[0] == {"role": "user", "content": [{"type": "text", "text": case["request"]["input"]}]}
    assert turns[1] == {"role": "assistant", "content": expected_assistant(case)}
    calls = case["expect"]["tool_calls"]
    if calls:
        results = turns[2]["content"][: len(calls)]
        assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
            ("tool_result", c["call_id"], f"result of {c['name']}") for c in calls]
    else:
        assert turns[2] == {"role": "user", "content": [{"type": "text", "text": "Thanks. And then?"}]}


def second_input(case: dict[str, Any]) -> list[dict[str, Any]]:
    return outputs_for(case) or [{"type": "message", "role": "user", "content": "Thanks. And then?"}]


@pytest.mark.parametrize("name", TWO_TURN)
def test_second_turn_with_previous_response_id(gateway: ServerThread, sim: SimulatedAnthropic, name: str) -> None:
    case = CASES[name]
    sim.replies.extend([reply_of(case), reply_of(CASES[FOLLOW_UP])])
    first, violations, _ = post(gateway, request_of(case))
    assert violations == [] and first["status"] == "completed"
    second, violations, response = post(gateway, {**request_of(case), "input": second_input(case),
                                                  "previous_response_id": first["response_id"]})
    assert response.status_code == 200, response.text
    assert violations == [] and second["status"] == "completed"
    assert sim.problems == []
    check_sent_back(case, sim.requests[1].body)


@pytest.mark.parametrize("name", TWO_TURN)
def test_second_turn_with_store_false_replayed_items(gateway: ServerThread, sim: SimulatedAnthropic,
                                                     name: str) -> None:
    case = CASES[name]
    sim.replies.extend([reply_of(case), reply_of(CASES[FOLLOW_UP])])
    first, violations, _ = post(gateway, {**request_of(case), "store": False})
    assert violations == [] and first["status"] == "completed"
    replay = [{"type": "message", "role": "user", "content": case["request"]["input"]}, *first["output"],
              *second_input(case)]
    second, violations, response = post(gateway, {**request_of(case), "store": False, "input": replay})
    assert response.status_code == 200, response.text
    assert violations == [] and second["status"] == "completed"
    assert sim.problems == []
    check_sent_back(case, sim.requests[1].body)


@pytest.fixture(scope="module")
def two_instances(provider: SimulatedAnthropic, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[ServerThread, ServerThread]]:
    store = f"sqlite:///{tmp_path_factory.mktemp('shared') / 'responses.db'}"
    configs = [Config(dialect="openai", store=store, upstreams=[f"anthropic+{provider.url}"], instance_id=f"i{n}",
                      upstream_options={"retries": 0, "api_key": "k"}, tools={"enabled": []},
                      rewrite={"steps": []}) for n in (1, 2)]
    with ServerThread(create_app(configs[0])) as one, ServerThread(create_app(configs[1])) as two:
        yield one, two


def test_second_turn_on_another_instance(two_instances: tuple[ServerThread, ServerThread],
                                         sim: SimulatedAnthropic) -> None:
    case = CASES["fantasy__thinking-then-tool.sse"]
    one, two = two_instances
    sim.replies.extend([reply_of(case), reply_of(CASES[FOLLOW_UP])])
    first, violations, _ = post(one, request_of(case))
    assert violations == [] and first["status"] == "completed"
    second, violations, response = post(two, {**request_of(case), "input": second_input(case),
                                              "previous_response_id": first["response_id"]})
    assert response.status_code == 200, response.text
    assert violations == [] and second["status"] == "completed", second.get("error")
    check_sent_back(case, sim.requests[1].body)
    assert json.dumps(sim.requests[1].body).count("signature") == 1
