"""``respstream replay`` on every hand-written transcript: the DESIGN §3 JSON object and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from respstream.cli import main

HELLO = "Hello, world!"
USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 21,
}

# name -> (extra args, exit code, expected fields of the JSON object; "codes" = the violation codes in order)
CASES: dict[str, tuple[list[str], int, dict[str, Any]]] = {
    "text": ([], 0, {"status": "completed", "output_text": HELLO, "streamed_text": HELLO, "codes": [],
                     "events": 12, "last_sequence_number": 11, "usage": USAGE, "refusal": None, "error": None}),
    "text_data_only": ([], 0, {"status": "completed", "output_text": HELLO, "codes": [], "events": 12}),
    "text_crlf_bom": ([], 0, {"status": "completed", "output_text": "Bonjour à tous", "codes": []}),
    "annotations": ([], 0, {"status": "completed", "output_text": "Paris is sunny.", "codes": [], "events": 11}),
    "parallel_function_calls": ([], 0, {"status": "completed", "output_text": "", "codes": []}),
    "function_call_args_only_done": ([], 0, {"status": "completed", "codes": []}),
    "refusal": ([], 0, {"status": "completed", "output_text": "", "refusal": "I'm sorry, I can't help with that.",
                        "codes": []}),
    "reasoning": ([], 0, {"status": "completed", "output_text": "The answer is 4.", "codes": [], "events": 23}),
    "hosted_tools": ([], 0, {"status": "completed", "output_text": "Pi is 3.14159.", "codes": [], "events": 49}),
    "hosted_tools_more": ([], 0, {"status": "completed", "output_text": "Done: the page explains SSE.", "codes": [],
                                  "events": 36}),
    "hosted_tools_repaired": ([], 0, {"status": "completed", "output_text": "Done: the page explains SSE.",
                                      "events": 35, "last_sequence_number": None,
                                      "codes": ["sequence.missing", "envelope.missing_field", "item.delta_after_done",
                                                "envelope.missing_field", "item.not_done"]}),
    "keepalive": ([], 0, {"status": "completed", "output_text": "Still here", "codes": [], "events": 12}),
    "done_sentinel": ([], 0, {"status": "completed", "output_text": HELLO, "codes": [], "events": 12}),
    "failed_after_error": ([], 3, {"status": "failed", "codes": [], "events": 4,
                                   "error": {"code": "insufficient_quota",
                                             "message": "You exceeded your current quota."}}),
    "failed_mid_message": ([], 3, {"status": "failed", "output_text": "Partial", "codes": [],
                                   "error": {"code": "server_error",
                                             "message": "The model failed to generate a response."}}),
    "flat_error": ([], 4, {"status": "error", "output_text": "Half an", "codes": [],
                           "error": {"code": "server_error", "message": "Something went wrong"}}),
    "incomplete": ([], 5, {"status": "incomplete", "output_text": "Once upon a time", "codes": [],
                           "incomplete_details": {"reason": "max_output_tokens"}}),
    "completed_status_incomplete": ([], 5, {"status": "incomplete", "output_text": "Cut short", "codes": [],
                                            "incomplete_details": {"reason": "max_output_tokens"}}),
    "cancelled_error": ([], 8, {"status": "cancelled", "codes": [],
                                "error": {"code": "cancelled", "message": "The response was cancelled"}}),
    "cancelled_failed": ([], 8, {"status": "cancelled", "codes": []}),
    "truncated_after_created": ([], 6, {"status": "truncated", "output_text": "", "events": 1,
                                        "codes": ["lifecycle.no_terminal"], "last_sequence_number": 0}),
    "truncated_mid_text": ([], 6, {"status": "truncated", "output_text": "Hello,", "streamed_text": "Hello,",
                                   "codes": ["lifecycle.no_terminal"], "last_sequence_number": 5}),
    "truncated_mid_args": ([], 6, {"status": "truncated", "codes": ["lifecycle.no_terminal"]}),
    "truncated_before_terminal": ([], 6, {"status": "truncated", "output_text": HELLO,
                                          "codes": ["lifecycle.no_terminal"]}),
    "truncated_partial_block": ([], 6, {"status": "truncated", "codes": ["lifecycle.no_terminal"], "events": 11}),
    "gap": ([], 0, {"status": "completed", "output_text": HELLO, "streamed_text": "Hello world!",
                    "codes": ["sequence.gap", "text.done_mismatch"], "events": 11}),
    "duplicate": ([], 0, {"status": "completed", "output_text": HELLO, "streamed_text": HELLO, "events": 12,
                          "codes": ["sequence.duplicate", "sequence.duplicate"]}),
    "reorder_within_window": ([], 0, {"status": "completed", "streamed_text": HELLO, "events": 12,
                                      "codes": ["sequence.out_of_order"]}),
    "reorder_beyond_window": (["--window", "2"], 0, {
        "status": "completed", "output_text": HELLO, "streamed_text": ", world!", "events": 11,
        "codes": ["sequence.gap", "text.done_mismatch", "sequence.out_of_order"]}),
    "events_after_terminal": ([], 0, {"status": "completed", "output_text": HELLO, "streamed_text": HELLO,
                                      "events": 14, "last_sequence_number": 13,
                                      "codes": ["lifecycle.terminal_not_last", "item.delta_after_done",
                                                "lifecycle.terminal_not_last", "lifecycle.multiple_terminal"]}),
    "no_sequence_number": ([], 0, {"status": "completed", "codes": ["sequence.missing"], "events": 8,
                                   "last_sequence_number": None}),
    "platform_seed": ([], 0, {"status": "completed", "output_text": "Hello, world.", "model": "gpt-oss-120b",
                              "response_id": "550e8400-e29b-41d4-a716-446655440000",
                              "codes": ["envelope.missing_field"], "events": 8}),
    "platform_web_search": ([], 0, {"status": "completed", "output_text": "It is raining.",
                                    "codes": ["envelope.missing_field"]}),
    "platform_rewrite": ([], 0, {"status": "completed", "output_text": "The capital of France is Paris.",
                                 "streamed_text": "the  capital of france is paris",
                                 "codes": ["envelope.missing_field"]}),
    "platform_error": ([], 4, {"status": "error", "output_text": "Hel",
                               "codes": ["envelope.missing_field", "sequence.missing"],
                               "error": {"code": "internal_error", "message": "Unexpected upstream failure"}}),
    "platform_token_limit": ([], 5, {"status": "incomplete", "output_text": "Very long",
                                     "codes": ["envelope.missing_field"]}),
    "done_mismatch": ([], 0, {"status": "completed", "output_text": "abcXYZ", "streamed_text": "abcdef",
                              "codes": ["text.done_mismatch"]}),
    "output_mismatch": ([], 0, {"status": "completed", "output_text": "something else", "streamed_text": "abc",
                                "codes": ["completed.output_mismatch"]}),
    "item_rules": ([], 0, {"status": "completed", "codes": [
        "item.delta_before_added", "item.duplicate_added", "item.index_mismatch", "item.done_without_added",
        "item.delta_after_done", "item.not_done", "item.not_done"]}),
    "envelope_rules": ([], 0, {"status": "completed", "output_text": "no indices again",
                               "codes": ["envelope.missing_field", "envelope.missing_field",
                                         "envelope.missing_field", "envelope.missing_type"]}),
    "created_not_first": ([], 0, {"status": "completed",
                                  "codes": ["lifecycle.created_not_first", "lifecycle.created_not_first"]}),
    "gateway_openai_web_search": ([], 0, {"status": "completed", "output_text": "The quick brown cat",
                                          "streamed_text": "The quick brown fox", "codes": [], "events": 18}),
    "gateway_platform_tool_rewrite": ([], 0, {"status": "completed", "output_text": "The quick brown cat",
                                              "streamed_text": "The quick brown fox", "codes": [], "events": 16}),
    "resumed": (["--starting-after", "9"], 0, {"status": "completed", "output_text": "Hello again and again",
                                               "streamed_text": " again and again", "codes": [], "events": 5,
                                               "last_sequence_number": 14}),
    "rate_limits_after_completed": ([], 0, {"status": "completed", "output_text": "Hello, world.", "codes": [],
                                            "events": 13, "last_sequence_number": 12}),
    "changing_item_ids": ([], 0, {"status": "completed", "output_text": "The answer is 42.",
                                  "codes": ["item.index_mismatch"]}),
    "missing_created": ([], 0, {"status": "completed", "output_text": "No created here.",
                                "codes": ["lifecycle.created_not_first"]}),
    "lone_failed": ([], 3, {"status": "failed", "output_text": "", "codes": ["lifecycle.created_not_first"],
                            "error": {"code": "server_error",
                                      "message": "litellm.APIConnectionError: upstream connection dropped"}}),
    "reasoning_id_changes": ([], 0, {"status": "completed", "output_text": "2 + 2 = 4",
                                     "codes": ["completed.output_mismatch"]}),
    "compaction_rate_limits_steer": ([], 0, {"status": "completed", "output_text": "Summary kept.", "codes": [],
                                             "events": 15, "last_sequence_number": 14}),
    "llamacpp_native_text": ([], 0, {"status": "completed", "output_text": "Chatbot: Hello, welcome to my world.",
                                     "codes": ["sequence.missing", "envelope.missing_field",
                                               "envelope.missing_field"], "last_sequence_number": None}),
}

BAD_INPUT = {
    "html_page": "event 1 at byte 1",
    "invalid_json": "event 4 at byte 1495",
    "not_object": "event 3 at byte 1254",
    "json_error_body": "event 1 at byte 120",
    "empty": "event 1 at byte 0",
}


def replay(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["replay", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_transcript_has_a_case(transcripts: Path) -> None:
    names = {p.stem for p in transcripts.glob("*.sse")}
    assert names == set(CASES) | set(BAD_INPUT)


@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_json(name: str, transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra, exit_code, expected = CASES[name]
    code, out, err = replay(["--json", *extra, str(transcripts / f"{name}.sse")], capsys)
    assert err == ""
    data = json.loads(out)
    assert code == exit_code
    assert data["schema_version"] == 1
    for key in ("status", "response_id", "model", "output_text", "streamed_text", "refusal", "output",
                "tool_calls", "usage", "incomplete_details", "error", "events", "last_sequence_number",
                "violations"):
        assert key in data
    codes = [v["code"] for v in data["violations"]]
    for key, value in expected.items():
        if key == "codes":
            assert codes == value
        else:
            assert data[key] == value, key
    for v in data["violations"]:
        assert set(v) == {"code", "sequence_number", "message"} and v["message"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_turns_violations_into_exit_7(name: str, transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra, exit_code, expected = CASES[name]
    code, _, _ = replay(["--strict", *extra, str(transcripts / f"{name}.sse")], capsys)
    assert code == (7 if expected["codes"] else exit_code)


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_input_exit_2_one_line(name: str, transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = replay(["--json", "--strict", str(transcripts / f"{name}.sse")], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert BAD_INPUT[name] in err


def test_tool_calls_and_output_items(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = replay(["--json", str(transcripts / "parallel_function_calls.sse")], capsys)
    data = json.loads(out)
    assert data["tool_calls"] == [
        {"call_id": "call_aaa", "name": "get_weather", "arguments": '{"city":"Paris"}', "status": "completed",
         "output": None},
        {"call_id": "call_bbb", "name": "get_time", "arguments": '{"tz":"Europe/Paris"}', "status": "completed",
         "output": None},
    ]
    assert [item["type"] for item in data["output"]] == ["function_call", "function_call"]


def test_arguments_only_in_done(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = replay(["--json", str(transcripts / "function_call_args_only_done.sse")], capsys)
    data = json.loads(out)  # response.completed had an empty output: assembled items are used
    assert data["tool_calls"] == [
        {"call_id": "call_9", "name": "lookup", "arguments": '{"q":"x"}', "status": "completed", "output": None}
    ]


def test_platform_server_tool_keeps_output_and_status(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = replay(["--json", str(transcripts / "platform_web_search.sse")], capsys)
    data = json.loads(out)
    assert data["tool_calls"] == [{
        "call_id": "call_abc123", "name": "web_search", "arguments": '{"query":"weather Amsterdam"}',
        "status": "completed",
        "output": '[{"title": "Weather", "url": "https://example.org/ams", "snippet": "Rain"}]',
    }]
    assert data["routing"] == {"model_id": "gpt-oss-120b", "category": "retrieval", "source": "router",
                               "reasoning": "needs fresh facts"}
    assert [item["type"] for item in data["output"]] == ["function_call", "message"]
    assert data["output"][1]["content"][0]["text"] == "It is raining."


def test_hosted_tool_items_are_assembled(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = replay(["--json", str(transcripts / "hosted_tools.sse")], capsys)
    data = json.loads(out)
    types = [item["type"] for item in data["output"]]
    assert types == ["web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
                     "mcp_list_tools", "mcp_call", "custom_tool_call", "message"]
    assert data["output"][2]["code"] == "import math\nprint(math.pi)"
    assert data["output"][5]["arguments"] == '{"q":"sse"}'


def test_reasoning_and_annotations(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = replay(["--json", str(transcripts / "reasoning.sse")], capsys)
    reasoning = json.loads(out)["output"][0]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "**Thinking** about it"}]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "2+2 is 4"}]
    _, out, _ = replay(["--json", str(transcripts / "annotations.sse")], capsys)
    part = json.loads(out)["output"][0]["content"][0]
    assert part["annotations"][0]["url"] == "https://example.org/paris"


def test_human_summary(transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = replay([str(transcripts / "platform_rewrite.sse")], capsys)
    assert code == 0
    assert "status:     completed" in out
    assert "The capital of France is Paris." in out
    assert "rewritten after streaming" in out
    assert "envelope.missing_field" in out
    code, out, _ = replay([str(transcripts / "platform_web_search.sse")], capsys)
    assert "tool call:  web_search" in out and "routing:" in out
    code, out, _ = replay([str(transcripts / "failed_after_error.sse")], capsys)
    assert code == 3 and "insufficient_quota" in out
    code, out, _ = replay([str(transcripts / "refusal.sse")], capsys)
    assert "refusal:    I'm sorry" in out and "violations: none" in out
    code, out, _ = replay([str(transcripts / "incomplete.sse")], capsys)
    assert "incomplete: " in out


def test_stdin_dash(transcripts: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    data = (transcripts / "text.sse").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = replay(["--json", "-"], capsys)
    assert code == 0 and json.loads(out)["output_text"] == HELLO


def test_missing_file_and_bad_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = replay([str(tmp_path / "nope.sse")], capsys)
    assert code == 2 and out == "" and "cannot read" in err and err.count("\n") == 1
    code, _, err = replay(["--window", "0", str(tmp_path / "nope.sse")], capsys)
    assert code == 2 and "window" in err


def test_chunked_reading_of_a_file_larger_than_one_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from respstream.commands.replay import CHUNK_SIZE

    lines = ['data: {"type":"response.created","sequence_number":0,"response":{"id":"r","model":"m"}}\n\n']
    n = CHUNK_SIZE // 40 + 100
    lines += [f'data: {{"type":"keepalive","sequence_number":{i}}}\n\n' for i in range(1, n)]
    lines.append(f'data: {{"type":"response.completed","sequence_number":{n},"response":{{"status":"completed"}}}}\n\n')
    path = tmp_path / "big.sse"
    path.write_text("".join(lines))
    assert path.stat().st_size > CHUNK_SIZE
    code, out, _ = replay(["--json", str(path)], capsys)
    data = json.loads(out)
    assert code == 0 and data["events"] == n + 1 and data["violations"] == []


@pytest.mark.parametrize(("name", "exit_code"), [("text", 0), ("html_page", 2), ("truncated_mid_text", 6)])
def test_installed_entry_point(name: str, exit_code: int, transcripts: Path) -> None:
    exe = Path(sys.executable).parent / "respstream"
    proc = subprocess.run([str(exe), "replay", "--json", str(transcripts / f"{name}.sse")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == exit_code
    if exit_code == 2:
        assert proc.stdout == "" and "bad input" in proc.stderr and "Traceback" not in proc.stderr
    else:
        assert json.loads(proc.stdout)["schema_version"] == 1


def test_stdin_via_subprocess(transcripts: Path) -> None:
    exe = Path(sys.executable).parent / "respstream"
    data = (transcripts / "failed_after_error.sse").read_bytes()
    proc = subprocess.run([str(exe), "replay", "--json", "-"], input=data, capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["status"] == "failed"
