"""Resumed transcripts: the tail after every ``starting_after`` value replays and checks with zero violations.

A reader that resumes with ``starting_after = N`` never sees events 0..N. Nothing that depends on them may be judged
(an item added before the cursor, a text part whose first deltas came before it, the terminal's output items that
began before it), while the status and terminal must still be right. The full stream keeps every rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from respstream.cli import main
from respstream.protocol.sse import SSEDecoder

# transcript -> dialect for `check` (the seed platform's deltas carry no item_id, which only its dialect allows)
TRANSCRIPTS: dict[str, str | None] = {
    "text": None,
    "text_crlf_bom": None,
    "annotations": None,
    "refusal": None,
    "parallel_function_calls": None,
    "function_call_args_only_done": None,
    "reasoning": None,
    "hosted_tools": None,
    "hosted_tools_more": None,
    "incomplete": None,
    "failed_mid_message": None,
    "cancelled_failed": None,
    "gateway_openai_web_search": "openai",
    "gateway_platform_tool_rewrite": "platform",
    "platform_seed": "platform",
    "platform_rewrite": "platform",
    "platform_web_search": "platform",
    "platform_token_limit": "platform",
}


def _numbered_offsets(data: bytes) -> list[tuple[int, int]]:
    """(sequence_number, byte offset of its SSE block) for every numbered event."""
    decoder = SSEDecoder()
    decoder.feed(data)
    decoder.close()
    found = []
    for msg in decoder.events():
        seq = json.loads(msg.data).get("sequence_number")
        if isinstance(seq, int):
            found.append((seq, msg.offset))
    return found


def _cuts() -> list[tuple[str, int]]:
    root = Path(__file__).parents[1] / "transcripts"
    out = []
    for name in TRANSCRIPTS:
        numbered = _numbered_offsets((root / f"{name}.sse").read_bytes())
        out += [(name, n) for n in range(-1, numbered[-1][0])]
    return out


def _run(command: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main([command, *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize(("name", "after"), _cuts(), ids=[f"{n}-after-{a}" for n, a in _cuts()])
def test_tail_after_every_cut_has_no_violations(
    name: str, after: int, transcripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = (transcripts / f"{name}.sse").read_bytes()
    full_code, full = _run("replay", ["--json", str(transcripts / f"{name}.sse")], capsys)
    offset = next(o for seq, o in _numbered_offsets(data) if seq > after)
    tail = tmp_path / "tail.sse"
    tail.write_bytes(data[offset:])
    dialect = TRANSCRIPTS[name]

    code, got = _run("replay", ["--json", "--strict", "--starting-after", str(after), str(tail)], capsys)
    codes = [v["code"] for v in got["violations"]]
    if dialect == "platform":  # replay has no dialect: the seed's missing item_id is its only complaint
        assert set(codes) <= {"envelope.missing_field"}
    else:
        assert codes == []
        assert code == full_code  # --strict: no violation, so the outcome's own code
    assert (got["status"], got["terminal_event"]) == (full["status"], full["terminal_event"])
    assert got["last_sequence_number"] == full["last_sequence_number"]
    assert got["events"] == full["events"] - (after + 1)

    args = ["--json", "--starting-after", str(after), str(tail)]
    code, checked = _run("check", [*args, "--dialect", dialect] if dialect else args, capsys)
    assert (code, checked["violations"], checked["status"]) == (0, [], full["status"])


@pytest.mark.parametrize("name", sorted(TRANSCRIPTS))
def test_minus_one_is_the_whole_stream(name: str, transcripts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(transcripts / f"{name}.sse")
    assert _run("replay", ["--json", path], capsys) == _run("replay", ["--json", "--starting-after", "-1", path],
                                                            capsys)


# A full stream keeps every rule the resumed one relaxes: the same tails read as whole streams.
@pytest.mark.parametrize(
    ("name", "after", "expected"),
    [
        ("text", 5, ["lifecycle.created_not_first", "item.delta_before_added", "text.done_mismatch"]),
        ("text", 9, ["lifecycle.created_not_first", "item.done_without_added"]),
        ("text", 10, ["lifecycle.created_not_first", "completed.output_mismatch"]),
        ("parallel_function_calls", 5, ["lifecycle.created_not_first", "item.delta_before_added",
                                        "item.delta_before_added", "text.done_mismatch", "text.done_mismatch"]),
    ],
)
def test_the_same_tail_as_a_whole_stream_is_judged(
    name: str, after: int, expected: list[str], transcripts: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = (transcripts / f"{name}.sse").read_bytes()
    offset = next(o for seq, o in _numbered_offsets(data) if seq > after)
    tail = tmp_path / "tail.sse"
    tail.write_bytes(data[offset:])
    code, got = _run("check", ["--json", "--window", "1", str(tail)], capsys)
    codes = [v["code"] for v in got["violations"]]
    assert code == 1
    assert codes[0] == "sequence.gap" and codes[1:] == expected
