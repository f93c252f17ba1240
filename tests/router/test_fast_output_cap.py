"""A `fast` chat turn on an upstream that caps answers by default (the embedded model: 1,024 tokens) gets the shorter
cap of a chat turn (``router.rules.fast_max_output_tokens``), so "Onthoud dit getal voor me: 4711." cannot ramble
on for minutes (issue 31, item 4). The request's own ``max_output_tokens`` and other routes keep theirs.

The upstream is SIMULATED (the scripted backend, given the embedded model's default-cap attribute).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from faults.helpers import GatewayThread, gateway_app
from respstream.server.upstream.scripted import ScriptedUpstream


class CappingScripted(ScriptedUpstream):
    """SIMULATED: the scripted backend with a default output cap, like the embedded model's."""

    max_output_tokens = 1024


def _usage(url: str, body: dict[str, Any]) -> tuple[int, str, Any]:
    answer = httpx.post(f"{url}/v1/responses", json={**body, "stream": False}, timeout=60).json()
    return answer["usage"]["output_tokens"], answer["status"], answer.get("incomplete_details")


@pytest.mark.parametrize(("body", "expected"), [
    ({"input": "Onthoud dit getal voor me: 4711."}, 40),  # fast route: the chat-turn cap
    ({"input": "Onthoud dit getal voor me: 4711.", "max_output_tokens": 60}, 60),  # the request's own cap wins
    ({"input": "Explain why the sky is blue."}, 100),  # reasoning route: the upstream's own default
    ({"input": "Tell me a long story about a dragon."}, 100),  # a fast turn that asks for length: no chat-turn cap
    ({"input": "Vertel me een uitgebreid verhaal."}, 100),
])
def test_the_fast_route_gets_the_chat_turn_cap(body: dict[str, Any], expected: int) -> None:
    upstream = CappingScripted(100, name="scripted", models=["scripted"])
    app = gateway_app([upstream], router={"rules": {"fast_max_output_tokens": 40}})
    with GatewayThread(app) as gw:
        tokens, status, details = _usage(gw.url, body)
    assert tokens == expected
    if expected < 100:
        assert status == "incomplete" and details == {"reason": "max_output_tokens"}


def test_a_bad_cap_is_a_config_error() -> None:
    from respstream.server.routing.classify import RoutingRules

    with pytest.raises(ValueError, match="fast_max_output_tokens must be a positive integer"):
        RoutingRules.from_mapping({"fast_max_output_tokens": 0})
