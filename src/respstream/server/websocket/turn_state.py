"""Codex's sticky turn state over WebSocket: the value the ``response.metadata`` event carries in
``headers["x-codex-turn-state"]``. The client's own value when its ``client_metadata`` has a non-empty one (it sends
back what it got, for the rest of the turn); otherwise one minted for the turn: the same for every request naming
the same ``turn_id``, a new one for a request that names none (Codex starts each turn with ``""``). Sans-IO."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["TURN_STATE", "TurnStates"]

TURN_STATE = "x-codex-turn-state"


class TurnStates:
    """Minted turn states by ``turn_id``, the newest ``remembered`` of them."""

    def __init__(self, mint: Callable[[], str], remembered: int) -> None:
        self._mint = mint
        self._remembered = remembered
        self._by_turn: OrderedDict[str, str] = OrderedDict()

    def state_for(self, client_metadata: dict[str, Any]) -> str:
        sent = client_metadata.get(TURN_STATE)
        if isinstance(sent, str) and sent:
            return sent
        turn = client_metadata.get("turn_id")
        if isinstance(turn, str) and turn in self._by_turn:
            return self._by_turn[turn]
        state = f"ts_{self._mint()}"
        if isinstance(turn, str) and turn:
            self._by_turn[turn] = state
            while len(self._by_turn) > self._remembered:
                self._by_turn.popitem(last=False)
        return state
