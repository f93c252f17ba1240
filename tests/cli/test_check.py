"""``respstream check``: DESIGN §3 JSON object, exit codes 0/1/2, dialects, and the --url delegation."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from respstream.cli import main


def check(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("name", "exit_code", "status", "codes"),
    [
        ("text", 0, "completed", []),
        ("keepalive", 0, "completed", []),
        ("failed_after_error", 0, "failed", []),
        ("gap", 1, "completed", ["sequence.gap", "text.done_mismatch"]),
        ("truncated_mid_text", 1, "truncated", ["lifecycle.no_terminal"]),
        ("item_rules", 1, "completed", ["item.delta_before_added", "item.duplicate_added", "item.index_mismatch",
                                        "item.done_without_added", "item.delta_after_done", "item.not_done",
                                        "item.not_done"]),
        ("rate_limits_after_completed", 0, "completed", []),  # OpenAI sends it after the terminal
        ("compaction_rate_limits_steer", 0, "completed", []),
        ("changing_item_ids", 1, "completed", ["item.index_mismatch"]),  # once per item, not per event
        ("missing_created", 1, "completed", ["lifecycle.created_not_first"]),
        ("lone_failed", 1, "failed", ["lifecycle.created_not_first"]),
        ("llamacpp_native_text", 1, "completed", ["sequence.missing", "envelope.missing_field",
                                                  "envelope.missing_field"]),
    ],
)
def test_check_json(
    name: str, exit_code: int, status: str, codes: list[str], transcripts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = check(["--json", str(transcripts / f"{name}.sse")], capsys)
    data = json.loads(out)
    assert code == exit_code
    assert set(data) >= {"schema_version", "ok", "status", "events", "violations"}
    assert data["schema_version"] == 1
    assert data["ok"] is (not codes)
    assert data["status"] == status
    assert [v["code"] for v in data["violations"]] == codes


def test_check_event_count_matches_replay(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = check(["--json", str(transcripts / "duplicate.sse")], capsys)
    assert json.loads(out)["events"] == 12


def test_check_bad_input(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(["--json", str(transcripts / "html_page.sse")], capsys)
    assert code == 2 and out == "" and "event 1 at byte 1" in err and err.count("\n") == 1


def test_platform_dialect_accepts_the_seed(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(transcripts / "platform_seed.sse")
    code, out, _ = check(["--json", path], capsys)
    assert code == 1 and [v["code"] for v in json.loads(out)["violations"]] == ["envelope.missing_field"]
    code, out, _ = check(["--json", "--dialect", "platform", path], capsys)
    assert code == 0 and json.loads(out)["ok"] is True


def test_event_names_only_checked_under_a_dialect(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    openai_framed = str(transcripts / "text.sse")
    assert check([openai_framed], capsys)[0] == 0
    assert check(["--dialect", "openai", openai_framed], capsys)[0] == 0
    code, out, _ = check(["--json", "--dialect", "platform", openai_framed], capsys)
    assert code == 1 and json.loads(out)["violations"][0]["code"] == "envelope.event_name_mismatch"
    code, out, _ = check(["--json", "--dialect", "openai", str(transcripts / "platform_seed.sse")], capsys)
    codes = [v["code"] for v in json.loads(out)["violations"]]
    assert codes.count("envelope.event_name_mismatch") == 1  # reported once per stream


def test_human_output(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check([str(transcripts / "text.sse")], capsys)
    assert code == 0 and "ok: no violations" in out
    code, out, _ = check([str(transcripts / "gap.sse")], capsys)
    assert code == 1 and "sequence.gap" in out and "2 violation(s)" in out


def test_starting_after(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(transcripts / "resumed.sse")
    assert check([path], capsys)[0] == 1  # numbering from 0 expected: gap 0..9, created_not_first
    assert check(["--starting-after", "9", path], capsys)[0] == 0


def test_usage_errors(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check([], capsys)
    assert code == 2 and "FILE" in err
    code, _, err = check([str(transcripts / "text.sse"), "--url", "http://127.0.0.1:9"], capsys)
    assert code == 2 and "not both" in err
    code, _, err = check(["--window", "0", str(transcripts / "text.sse")], capsys)
    assert code == 2


def test_url_without_live_suite(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "respstream.conformance.live", None)  # importing it now raises
    code, out, err = check(["--url", "http://127.0.0.1:9"], capsys)
    assert code == 2 and "not available" in err and out == ""


def test_url_delegates_to_live_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen = {}

    def run(args: object) -> int:
        seen["url"] = getattr(args, "url", None)
        return 1

    fake = types.ModuleType("respstream.conformance.live")
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "respstream.conformance.live", fake)
    assert check(["--url", "http://127.0.0.1:9/v1"], capsys)[0] == 1
    assert seen == {"url": "http://127.0.0.1:9/v1"}


def test_openai_dialect_names_a_stream_without_event_lines(
    transcripts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = check(["--json", "--dialect", "openai", str(transcripts / "text_data_only.sse")], capsys)
    names = [v for v in json.loads(out)["violations"] if v["code"] == "envelope.event_name_mismatch"]
    assert code == 1 and len(names) == 1
    assert "no SSE `event:` line" in names[0]["message"]
    assert "'message'" not in names[0]["message"]
    # An explicit `event: message` (the seed's framing) is still named as what it is.
    code, out, _ = check(["--json", "--dialect", "openai", str(transcripts / "platform_seed.sse")], capsys)
    names = [v for v in json.loads(out)["violations"] if v["code"] == "envelope.event_name_mismatch"]
    assert names[0]["message"].startswith("SSE event name 'message'")
