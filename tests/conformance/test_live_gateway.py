"""``check --url`` against our own gateway (the real app in a uvicorn thread) with the SIMULATED scripted upstream.

The scripted upstream streams 30 deltas 3 ms apart (so a cancel lands mid-way) and calls the client function tool
``get_weather`` on a first turn (so the tool round trip runs). Every scenario must pass in every dialect, through the
CLI entry point, with the exact JSON shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from respstream.cli import main
from respstream.conformance import SCENARIOS
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .live_servers import ServerThread

UPSTREAM = "scripted:30?delay_ms=3&tool=get_weather"


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def gateway(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    with ServerThread(create_app(Config(dialect=request.param, upstreams=[UPSTREAM]))) as server:
        yield server.base_url, request.param


def test_every_scenario_passes(gateway: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    url, dialect = gateway
    code = main(["check", "--url", url, "--json", "--dialect", dialect])
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"schema_version", "endpoint", "ok", "scenarios"}
    assert (report["schema_version"], report["endpoint"]) == (1, url)
    assert [s["name"] for s in report["scenarios"]] == list(SCENARIOS)
    for scenario in report["scenarios"]:
        assert set(scenario) == {"name", "result", "violations", "detail"}
    not_passed = {s["name"]: s["detail"] for s in report["scenarios"] if s["result"] != "passed"}
    assert not_passed == {}
    assert all(s["violations"] == [] for s in report["scenarios"])
    assert report["ok"] is True
    assert code == 0


def test_openresponses_checks_catch_an_openai_wire(capsys: pytest.CaptureFixture[str]) -> None:
    """The Open Responses checks the public suite lacks (`id:` lines, `[DONE]`, unprefixed extensions, schemas)
    find what an `openai`-dialect gateway does differently."""
    with ServerThread(create_app(Config(dialect="openai", upstreams=[UPSTREAM]))) as server:
        code = main(["check", "--url", server.base_url, "--json", "--dialect", "openresponses"])
    report = json.loads(capsys.readouterr().out)
    codes = {v["code"] for s in report["scenarios"] for v in s["violations"]}
    assert {"envelope.id_line", "envelope.missing_done"} <= codes
    assert report["ok"] is False and code == 1
