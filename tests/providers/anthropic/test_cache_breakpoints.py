"""prompt_cache_key / prompt_cache_options / prompt_cache_retention / prompt_cache_breakpoint -> Anthropic
``cache_control`` (upstream/anthropic/request.py): the client's breakpoints on their blocks, the automatic ones
unless ``mode`` is ``explicit``, never more than four, ``ttl: "1h"`` for a lifetime over five minutes and never a
longer lifetime after a shorter one. Unit bodies and the SIMULATED provider's both pass the official SDK's types."""

from __future__ import annotations

import json
from typing import Any

from fakes.server_thread import ServerThread
from respstream.server.upstream.anthropic.request import build_messages_body, tool_names
from respstream.server.upstream.base import GenerationRequest
from respstream.server.upstream.cache_hints import CACHE_BREAKPOINT_KEY, CacheHints

from .sdk_shapes import request_problems
from .simulated_anthropic import SimulatedAnthropic
from .test_request_mapping import WEATHER, sent

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def marks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, cache_control) for every marked block, in prompt order (tools, system, messages)."""
    found = [(f"tools[{i}]", b) for i, b in enumerate(body.get("tools", ()))]
    found += [(f"system[{i}]", b) for i, b in enumerate(body.get("system", ()))]
    found += [(f"messages[{t}].content[{i}]", b) for t, turn in enumerate(body["messages"])
              for i, b in enumerate(turn["content"])]
    return [(where, b["cache_control"]) for where, b in found if "cache_control" in b]


def build(messages: list[dict[str, Any]], hints: CacheHints, **fields: Any) -> dict[str, Any]:
    built = build_messages_body(GenerationRequest(model="claude", messages=messages, cache=hints, **fields),
                                model="claude", names=tool_names())
    assert request_problems(built) == []
    assert "_respstream" not in json.dumps(built)  # (the builder's own marks never leave it)
    return built


def conversation(*marked: int, ttl: str | None = None) -> list[dict[str, Any]]:
    """system + 6 alternating turns; the messages at ``marked`` carry a client breakpoint."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for n in range(6):
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"})
    for index in marked:
        messages[index][CACHE_BREAKPOINT_KEY] = {"mode": "explicit", **({"ttl": ttl} if ttl else {})}
    return messages


def test_explicit_mode_writes_only_the_clients_breakpoints() -> None:
    body = build(conversation(2, 4), CacheHints(asked=True, mode="explicit"), tools=[TOOL])
    assert marks(body) == [("messages[1].content[0]", {"type": "ephemeral"}),
                           ("messages[3].content[0]", {"type": "ephemeral"})]


def test_implicit_mode_adds_the_automatic_ones_and_keeps_four() -> None:
    body = build(conversation(1, 2, 3, 4), CacheHints(asked=True), tools=[TOOL])
    where = [w for w, _ in marks(body)]
    # the latest three of the client's (messages 2..4 -> turns 1..3) and one automatic: the last stable turn
    assert where == ["messages[1].content[0]", "messages[2].content[0]", "messages[3].content[0]",
                     "messages[4].content[0]"]
    assert len(where) == 4
    fewer = [w for w, _ in marks(build(conversation(2), CacheHints(asked=True), tools=[TOOL]))]
    # one client breakpoint leaves room for all three automatic ones
    assert fewer == ["tools[0]", "system[0]", "messages[1].content[0]", "messages[4].content[0]"]


def test_a_breakpoint_on_an_automatic_block_counts_once() -> None:
    body = build(conversation(5), CacheHints(asked=True), tools=[TOOL])
    assert [w for w, _ in marks(body)] == ["tools[0]", "system[0]", "messages[4].content[0]"]


def test_a_lifetime_over_five_minutes_is_one_hour_and_longer_comes_first() -> None:
    assert {m["ttl"] for _, m in marks(build(conversation(), CacheHints(asked=True, ttl_seconds=12 * 3600)))} \
        == {"1h"}
    # the client's 12h breakpoint is late in the prompt; the automatic ones before it (default lifetime) take 1h too,
    # the one after it keeps the default: the API refuses a longer lifetime after a shorter one
    body = build(conversation(4, ttl="12h"), CacheHints(asked=True), tools=[TOOL])
    assert marks(body) == [("tools[0]", {"type": "ephemeral", "ttl": "1h"}),
                           ("system[0]", {"type": "ephemeral", "ttl": "1h"}),
                           ("messages[3].content[0]", {"type": "ephemeral", "ttl": "1h"}),
                           ("messages[4].content[0]", {"type": "ephemeral"})]
    ttls = [m.get("ttl", "5m") for _, m in marks(body)]
    assert ttls == sorted(ttls, key=lambda t: t != "1h")


def test_a_breakpoint_on_an_assistant_turn_skips_its_thinking_and_nothing_is_asked_nothing_is_marked() -> None:
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "a", CACHE_BREAKPOINT_KEY: {"mode": "explicit"},
                 "encrypted_reasoning": [{"summary": "t", "encrypted_content": "SIG"}]},
                {"role": "user", "content": "q2"}]
    body = build(messages, CacheHints(asked=True, mode="explicit"))
    assert marks(body) == [("messages[1].content[1]", {"type": "ephemeral"})]
    assert body["messages"][1]["content"][0]["type"] == "thinking"
    assert marks(build(conversation(), CacheHints())) == []


def test_through_the_gateway(gateway: ServerThread, sim: SimulatedAnthropic) -> None:
    history = [{"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "A long document.",
                    "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}},
                   {"type": "input_text", "text": " Its appendix."}]},
               {"type": "message", "role": "assistant", "content": "Read it."},
               {"type": "message", "role": "user", "content": "Summarise."}]
    body, _ = sent(gateway, sim, {"instructions": "Be brief.", "input": history, "tools": [WEATHER],
                                  "prompt_cache_options": {"mode": "explicit"}})
    assert marks(body) == [("messages[0].content[0]", {"type": "ephemeral", "ttl": "1h"})]
    assert body["messages"][0]["content"][0]["text"] == "A long document. Its appendix."
    body, _ = sent(gateway, sim, {"instructions": "Be brief.", "input": history, "prompt_cache_retention": "24h"})
    assert [m for _, m in marks(body)] == [{"type": "ephemeral", "ttl": "1h"}] * 3  # system, client's, last stable
    body, _ = sent(gateway, sim, {"input": history[2:], "prompt_cache_retention": "in_memory",
                                  "prompt_cache_key": "k"})
    assert "cache_control" not in json.dumps(body)  # one turn: nothing stable to mark, and no system or tools
    plain = [{"type": "message", "role": "user", "content": "A long document."}, *history[1:]]
    body, _ = sent(gateway, sim, {"instructions": "Be brief.", "input": plain, "prompt_cache_key": "k"})
    assert [m for _, m in marks(body)] == [{"type": "ephemeral"}] * 2  # system, last stable; the default lifetime


def test_the_simulated_provider_holds_the_cache_rules() -> None:
    from .simulated_anthropic import cache_problems

    user = {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}] * 5}
    assert cache_problems({"messages": [user]})[0].startswith("A maximum of 4")
    late = {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                                        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral",
                                                                                        "ttl": "1h"}}]}
    assert cache_problems({"messages": [late]}) == [
        "a ttl='1h' cache_control block must not come after a ttl='5m' one"]
    # every body the gateway builds passes: the longest mix (a 12h breakpoint after automatic ones)
    body = build(conversation(2, 4, ttl="12h"), CacheHints(asked=True), tools=[TOOL])
    assert cache_problems(body) == [] and len(marks(body)) == 4
