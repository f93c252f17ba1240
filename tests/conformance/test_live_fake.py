"""``check --url`` against FAKE test servers: a correct one, deliberately broken ones, and nothing at all."""

from __future__ import annotations

import io
import json
import socket
import types
from collections.abc import Iterator
from typing import Any

import pytest

from respstream.cli import main
from respstream.conformance import SCENARIOS, ScenarioResult, run
from respstream.conformance.report import Progress, summary_table

from .live_servers import FakeResponses, ServerThread

SCENARIO_KEYS = {"name", "result", "violations", "detail"}
VIOLATION_KEYS = {"code", "sequence_number", "message"}


@pytest.fixture(autouse=True)
def _no_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RESPSTREAM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def fake() -> FakeResponses:
    return FakeResponses()


@pytest.fixture
def good(fake: FakeResponses) -> Iterator[ServerThread]:
    with ServerThread(fake.app) as server:
        yield server


def check(url: str, **options: Any) -> tuple[int, dict[str, Any], str]:
    """Run the suite with --json; return (exit code, report, stderr)."""
    args = types.SimpleNamespace(url=url, json=True, dialect=options.pop("dialect", "openai"), starting_after=None)
    for key, value in options.items():
        setattr(args, key, value)
    out, err = io.StringIO(), io.StringIO()
    code = run(args, stdout=out, stderr=err)
    return code, (json.loads(out.getvalue()) if out.getvalue() else {}), err.getvalue()


def assert_shape(report: dict[str, Any], url: str) -> None:
    assert set(report) == {"schema_version", "endpoint", "ok", "scenarios"}
    assert report["schema_version"] == 1
    assert report["endpoint"] == url
    for scenario in report["scenarios"]:
        assert set(scenario) == SCENARIO_KEYS
        assert scenario["result"] in ("passed", "violations", "unsupported", "failed")
        assert isinstance(scenario["detail"], str)
        for violation in scenario["violations"]:
            assert set(violation) == VIOLATION_KEYS


def results(report: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["result"] for s in report["scenarios"]}


def test_correct_server_passes_every_scenario(good: ServerThread) -> None:
    code, report, err = check(good.base_url)
    assert code == 0, report
    assert_shape(report, good.base_url)
    assert results(report) == dict.fromkeys(SCENARIOS, "passed")
    assert report["ok"] is True
    assert all(s["violations"] == [] for s in report["scenarios"])
    # Progress went to stderr (plain lines: not a TTY), one start and one end line per scenario.
    assert err.count("\n") == 2 * len(SCENARIOS)
    assert "[7/7] unknown_model: passed" in err


def test_background_resume_uses_several_cursors_and_past_the_end(good: ServerThread, fake: FakeResponses) -> None:
    code, report, _ = check(good.base_url, scenario="background_resume")
    assert code == 0, report
    cursors = [p.split("starting_after=")[1] for m, p in fake.requests if m == "GET" and "starting_after=" in p]
    # After the drop, 0, the middle, last-1, then the terminal and past it.
    assert len(set(cursors)) >= 5, cursors
    assert "0" in cursors
    assert "past end empty" in report["scenarios"][0]["detail"]


def test_broken_server_gets_the_right_verdicts() -> None:
    fake = FakeResponses("skip_sequence", "no_terminal", "bad_request_500", "no_features")
    with ServerThread(fake.app) as server:
        code, report, _ = check(server.base_url)
    assert code == 1
    assert_shape(report, server.base_url)
    assert report["ok"] is False
    assert results(report) == {
        "plain": "violations",
        "long_answer": "failed",
        "function_tool_round_trip": "unsupported",
        "background_resume": "unsupported",
        "cancel": "unsupported",
        "bad_request": "failed",
        "unknown_model": "unsupported",
    }
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert [v["code"] for v in by_name["plain"]["violations"]] == ["sequence.gap"]
    assert by_name["plain"]["violations"][0]["sequence_number"] == 3
    assert "without a terminal event" in by_name["long_answer"]["detail"]
    assert "lifecycle.no_terminal" in [v["code"] for v in by_name["long_answer"]["violations"]]
    assert "500" in by_name["bad_request"]["detail"]
    assert "unsupported_parameter" in by_name["function_tool_round_trip"]["detail"]


def test_a_hanging_stream_fails_within_the_timeout() -> None:
    with ServerThread(FakeResponses("stall").app) as server:
        code, report, _ = check(server.base_url, scenario="long_answer", timeout=0.5)
    assert code == 1
    assert results(report) == {"long_answer": "failed"}
    assert "hangs" in report["scenarios"][0]["detail"]


def test_a_timeout_says_so_and_names_the_option() -> None:
    # Issue 31: under load, timeouts read as plain failures with no hint of --timeout.
    with ServerThread(FakeResponses("stall").app) as server:
        code, report, _ = check(server.base_url, scenario="long_answer", timeout=0.5)
        out, err = io.StringIO(), io.StringIO()
        args = types.SimpleNamespace(url=server.base_url, json=False, dialect="openai", starting_after=None,
                                     timeout=0.5, scenario=["long_answer"])
        assert run(args, stdout=out, stderr=err) == 1
    detail = report["scenarios"][0]["detail"]
    assert code == 1 and detail.startswith("timed out after ") and "--timeout SECONDS, now 0.5" in detail
    assert "1 scenario(s) timed out (long_answer)" in out.getvalue() and "--timeout SECONDS" in out.getvalue()


def test_a_failure_that_is_not_a_timeout_gets_no_timeout_hint() -> None:
    with ServerThread(FakeResponses("bad_request_500").app) as server:
        code, report, _ = check(server.base_url, scenario="bad_request", timeout=20)
    assert code == 1 and results(report) == {"bad_request": "failed"}
    assert "500" in report["scenarios"][0]["detail"] and "--timeout" not in report["scenarios"][0]["detail"]


def test_check_help_documents_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout SECONDS deadline per scenario (default 60); raise it for a slow or busy server" in text


def test_only_features_missing_is_still_ok() -> None:
    with ServerThread(FakeResponses("no_features").app) as server:
        code, report, _ = check(server.base_url)
    assert code == 0
    assert report["ok"] is True
    assert sorted(set(results(report).values())) == ["passed", "unsupported"]


def test_unreachable_endpoint_exits_2_with_one_line() -> None:
    with socket.socket() as sock:  # a port nobody listens on: bind it, never listen
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        code, report, err = check(url)
    assert code == 2
    assert report == {}
    assert err.count("\n") == 1 and err.startswith("respstream check: cannot reach")


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("ftp://example.invalid/v1", {}, "not an http(s) URL"),
        ("127.0.0.1:9/v1", {}, "not an http(s) URL"),
        ("http://127.0.0.1:9/v1", {"scenario": "plain,nope"}, "unknown scenario nope"),
    ],
    ids=["scheme", "no-scheme", "unknown-scenario"],
)
def test_bad_input_exits_2(url: str, options: dict[str, Any], message: str) -> None:
    code, report, err = check(url, **options)
    assert (code, report) == (2, {})
    assert message in err


def test_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with ServerThread(FakeResponses(api_key="sekrit").app) as server:
        code, _, err = check(server.base_url, scenario="plain")
        assert code == 2 and "refused the credentials (HTTP 401)" in err
        monkeypatch.setenv("RESPSTREAM_API_KEY", "sekrit")
        code, report, _ = check(server.base_url, scenario="plain")
        assert code == 0 and results(report) == {"plain": "passed"}
        monkeypatch.delenv("RESPSTREAM_API_KEY")
        code, report, _ = check(server.base_url, scenario="plain", api_key="sekrit")
        assert code == 0


def test_endpoint_with_responses_suffix_is_normalised(good: ServerThread) -> None:
    code, report, _ = check(good.base_url + "/responses/", scenario="plain")
    assert code == 0
    assert report["endpoint"] == good.base_url


def test_cli_check_url_json(good: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--url", good.base_url, "--json", "--dialect", "openai"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 0
    assert_shape(report, good.base_url)
    assert results(report) == dict.fromkeys(SCENARIOS, "passed")


def test_cli_check_url_table(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread(FakeResponses("skip_sequence").app) as server:
        code = main(["check", "--url", server.base_url])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[2].split() == ["scenario", "result", "violations", "time", "detail"]
    # The defect hits every short-prompt stream: plain, and both streams of the tool round trip.
    assert "sequence.gap: 3" in out
    assert out.rstrip().endswith("NOT OK: 5 passed, 2 violations")


def test_interactive_progress_draws_a_spinner_then_the_result() -> None:
    stream = io.StringIO()
    progress = Progress(stream, 1, interactive=True)
    progress.start("plain")
    progress.finish(ScenarioResult("plain", "failed", "boom", seconds=0.25))
    progress.close()
    text = stream.getvalue()
    assert "plain ..." in text  # the spinner line drew at least once
    assert text.endswith("\r\x1b[2KXX [1/1] plain: failed (0.25 s) - boom\n")


def test_summary_table_groups_violations_by_code() -> None:
    violation = {"code": "sequence.gap", "sequence_number": 3, "message": "x"}
    table = summary_table("http://h/v1", [
        ScenarioResult("plain", "violations", "d", [violation, violation]),
        ScenarioResult("cancel", "unsupported", "no background"),
    ])
    assert "sequence.gap: 2" in table
    assert table.endswith("NOT OK: 1 violations, 1 unsupported")


def test_background_resume_when_the_answer_ends_before_the_drop() -> None:
    with ServerThread(FakeResponses(deltas=1).app) as server:  # the whole answer arrives before a second delta
        code, report, _ = check(server.base_url, scenario="background_resume,cancel")
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert by_name["background_resume"]["result"] == "passed", by_name["background_resume"]["detail"]
    # Too short to cancel mid-way: the checker says the stream completed instead of pretending it cancelled.
    assert by_name["cancel"]["result"] == "failed"
    assert "ended completed, not cancelled" in by_name["cancel"]["detail"]
    assert code == 1


def test_cli_flags_reach_the_live_suite(good: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([
        "check", "--url", good.base_url, "--json", "--scenario", "plain,bad_request", "--timeout", "20",
        "--api-key", "sk-test", "--model", "fake-model",
    ])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [s["name"] for s in report["scenarios"]] == ["plain", "bad_request"]
    assert all(s["result"] == "passed" for s in report["scenarios"])


def test_cli_model_flag_is_sent(good: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--url", good.base_url, "--json", "--scenario", "plain", "--model", "no-such-model"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "model_not_found" in report["scenarios"][0]["detail"]
