"""The live conformance suite behind ``respstream check --url`` (DESIGN §3): scenarios, runner and report."""

from __future__ import annotations

from respstream.conformance.live import run, run_suite
from respstream.conformance.outcome import Failed, ScenarioResult, Unsupported
from respstream.conformance.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "Failed", "ScenarioResult", "Unsupported", "run", "run_suite"]
