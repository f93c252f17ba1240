"""What one live scenario found, and the two ways a scenario stops early.

A scenario function returns a :class:`ScenarioResult` when it ran to the end, or raises :class:`Unsupported`
(the server clearly does not offer the feature) or :class:`Failed` (the server broke the contract). The runner turns
those into results, keeping the violations the scenario collected before it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["RESULTS", "Failed", "Result", "ScenarioResult", "TimedOut", "Unsupported", "timeout_hint", "violation_dict"]

Result = Literal["passed", "violations", "unsupported", "failed"]
RESULTS: tuple[Result, ...] = ("passed", "violations", "unsupported", "failed")


class Unsupported(Exception):
    """The server clearly does not offer what the scenario needs (400/404/501, no background, no tools)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Failed(Exception):
    """The server broke the contract: 5xx, a hang, a wrong status, a stream without a terminal event."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class TimedOut(Failed):
    """The server did not answer (or finish) in time: under load that is slowness, not a broken contract, and the
    report says so and how to allow more (:func:`timeout_hint`)."""


def timeout_hint(elapsed: float, deadline: float) -> str:
    """What a timed-out scenario's detail starts with: how long it waited and the option that allows more."""
    return (f"timed out after {elapsed:.1f} s (a slow or busy server may need more time per scenario: rerun with "
            f"--timeout SECONDS, now {deadline:g})")


@dataclass
class ScenarioResult:
    """One row of the report. ``violations`` holds ``{"code", "sequence_number", "message"}`` dicts."""

    name: str
    result: Result
    detail: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0  # shown in the table; not part of the JSON contract
    timed_out: bool = False  # the table's footer repeats the --timeout hint; the JSON has it in `detail`

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "result": self.result, "violations": self.violations, "detail": self.detail}


def violation_dict(code: str, sequence_number: int | None, message: str) -> dict[str, Any]:
    return {"code": code, "sequence_number": sequence_number, "message": message}
