"""Assembler and RuleChecker on small hand-built event lists: the corners the transcripts do not reach."""

from __future__ import annotations

import json
from typing import Any

from respstream.protocol import Assembler, RuleChecker
from respstream.protocol.events import decode_event


def events(*objs: dict[str, Any]) -> list[Any]:
    return [decode_event(json.dumps({"sequence_number": i, **o}).encode()) for i, o in enumerate(objs)]


def check_all(*objs: dict[str, Any], **kw: Any) -> tuple[RuleChecker, list[str]]:
    checker = RuleChecker(**kw)
    codes = [v.code for e in events(*objs) for v in checker.check(e)]
    codes += [v.code for v in checker.finish()]
    assert [v.code for v in checker.violations] == codes
    return checker, codes


CREATED = {"type": "response.created", "response": {"id": "r", "model": "m", "status": "in_progress"}}


def completed(**response: Any) -> dict[str, Any]:
    return {"type": "response.completed", "response": {"status": "completed", **response}}


def test_shell_call_commands_and_output() -> None:
    checker, codes = check_all(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "sh", "type": "shell_call"}},
        {"type": "response.shell_call_command.added", "output_index": 0, "command_index": 0, "command": "ls"},
        {"type": "response.shell_call_command.added", "output_index": 0, "command_index": 1, "command": ""},
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 1, "delta": "pw"},
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 1, "delta": "d"},
        {"type": "response.shell_call_command.done", "output_index": 0, "command_index": 1, "command": "pwd"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "sh", "type": "shell_call"}},
        {"type": "response.output_item.added", "output_index": 1, "item": {"id": "so", "type": "shell_call_output"}},
        {"type": "response.shell_call_output_content.delta", "item_id": "so", "output_index": 1,
         "command_index": 1, "delta": {"stdout": "/tmp\n", "stderr": 5}},
        {"type": "response.shell_call_output_content.delta", "item_id": "so", "output_index": 1,
         "command_index": 1, "delta": {"stdout": "x"}},
        {"type": "response.shell_call_output_content.delta", "item_id": "so", "output_index": 1,
         "command_index": 10_000, "delta": {"stdout": "ignored: index too far"}},
        completed(),
    )
    result = checker.assembler.result()
    assert result.output[0]["action"] == {"commands": ["ls", "pwd"]}
    assert result.output[1]["output"][1] == {"stdout": "/tmp\nx", "stderr": ""}
    assert codes == ["item.not_done"]  # the shell_call_output item was never done


def test_shell_output_done_replaces_and_bad_output_shape_is_ignored() -> None:
    asm = Assembler()
    for e in events(
        {"type": "response.shell_call_output_content.delta", "item_id": "so", "output_index": 0, "command_index": 0,
         "delta": {"stdout": "a"}},
        {"type": "response.shell_call_output_content.done", "item_id": "so", "output_index": 0,
         "output": [{"stdout": "all", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
        {"type": "response.output_item.done", "output_index": 1, "item": {"type": "shell_call_output", "output": 3}},
        {"type": "response.shell_call_output_content.delta", "item_id": "x", "output_index": 1, "delta": {}},
    ):
        asm.feed(e)
    out = asm.materialize()
    assert out[0]["output"][0]["stdout"] == "all" and out[1]["output"] == 3


def test_annotations_replace_at_index_and_args_done_sets_name() -> None:
    ann = {"type": "url_citation", "url": "u"}
    checker, codes = check_all(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "m", "type": "message"}},
        {"type": "response.output_text.annotation.added", "item_id": "m", "output_index": 0, "content_index": 0,
         "annotation_index": 0, "annotation": ann},
        {"type": "response.output_text.annotation.added", "item_id": "m", "output_index": 0, "content_index": 0,
         "annotation_index": 0, "annotation": {**ann, "url": "v"}},
        {"type": "response.output_text.annotation.added", "item_id": "m", "output_index": 0, "content_index": 0},
        {"type": "response.output_item.added", "output_index": 1, "item": {"id": "f", "type": "function_call"}},
        {"type": "response.function_call_arguments.done", "item_id": "f", "output_index": 1, "arguments": "{}",
         "name": "fn"},
        {"type": "response.function_call_arguments.done", "item_id": "f", "output_index": 1, "arguments": "{}"},
    )
    result = checker.assembler.result()
    assert result.output[0]["content"][0]["annotations"] == [{**ann, "url": "v"}]
    assert result.tool_calls[0]["name"] == "fn"
    assert codes == ["lifecycle.no_terminal"]


def test_done_item_with_odd_parts_and_content_in_added() -> None:
    asm = Assembler()
    for e in events(
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "m", "type": "message", "content": [{"type": "output_text", "text": "pre"}, "junk"]}},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"id": "m", "type": "message", "content": ["junk", {"type": "output_text", "text": "final"}],
                  "summary": ["junk"]}},
    ):
        asm.feed(e)
    content = asm.materialize()[0]["content"]
    assert [p["text"] for p in content] == ["pre", "final"]


def test_output_mismatch_details() -> None:
    base: list[dict[str, Any]] = [
        CREATED,
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "f", "type": "function_call", "call_id": "c", "name": "a", "arguments": ""}},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"id": "f", "type": "function_call", "call_id": "c", "name": "a", "arguments": "{}"}},
    ]
    _, codes = check_all(*base, completed(output=[{"id": "f", "type": "function_call", "name": "b"}, "x"],
                                          output_text="extra"))
    assert codes == ["completed.output_mismatch"]
    checker = RuleChecker()
    for e in events(*base, completed(output=[{"id": "f", "type": "function_call", "name": "b"}, "x"],
                                     output_text="extra")):
        found = checker.check(e)
    message = found[0].message
    assert "2 output items, 1 assembled" in message and "output[0].name differs" in message
    assert "output_text differs" in message
    _, codes = check_all(*base, completed(output=[{"id": "f", "type": "function_call", "name": "a"}]))
    assert codes == []


def test_item_done_twice_and_summary_before_added() -> None:
    _, codes = check_all(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "f", "type": "function_call"}},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "f", "type": "function_call"}},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "f", "type": "function_call"}},
        {"type": "response.reasoning_summary_part.added", "item_id": "r", "output_index": 1, "summary_index": 0,
         "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", "item_id": "r", "output_index": 1, "summary_index": 0,
         "delta": "x"},
        {"type": "response.reasoning_summary_text.done", "item_id": "r", "output_index": 1, "summary_index": 0,
         "text": "x"},
        {"type": "response.reasoning_summary_text.delta", "item_id": "r", "output_index": 1, "summary_index": 0,
         "delta": "late"},
        completed(),
    )
    assert codes == ["item.delta_after_done", "item.delta_before_added", "item.delta_after_done", "item.not_done"]


def test_error_then_failed_with_odd_status_is_failed() -> None:
    asm = Assembler()
    for e in events(CREATED, {"type": "error", "code": "boom", "message": "m"},
                    {"type": "response.failed", "response": {"status": "weird"}}):
        asm.feed(e)
    assert asm.status() == "failed" and asm.result().error == {"code": "boom", "message": "m"}


def test_standalone_checker_fast_path_feeds_its_assembler() -> None:
    delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
             "delta": "a"}
    checker, codes = check_all(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "m", "type": "message"}},
        delta, delta, delta,
        {"type": "response.output_text.done", "item_id": "m", "output_index": 0, "content_index": 0, "text": "aaa"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "m", "type": "message"}},
        completed(),
    )
    assert codes == [] and checker.assembler.result().streamed_text == "aaa"


def test_unlocatable_events_do_not_crash_the_rules() -> None:
    _, codes = check_all(
        CREATED,
        {"type": "response.output_text.delta", "delta": "x"},
        {"type": "response.function_call_arguments.done", "arguments": "{}"},
        {"type": "response.output_item.added", "item": {"id": "n", "type": "message"}},
        {"type": "response.output_item.done", "item": {"id": "n", "type": "message"}},
        completed(),
    )
    assert codes[:3] == ["envelope.missing_field"] * 3


# --- resumed streams (expect_created=False): only what was seen whole is judged -------------------------------------

MSG_ADDED = {"type": "response.output_item.added", "output_index": 1,
             "item": {"id": "m1", "type": "message", "role": "assistant", "content": []}}


def _text(oi: int, ci: int, kind: str, value: str) -> dict[str, Any]:
    field = "delta" if kind.endswith("delta") else "text"
    return {"type": f"response.output_text.{kind}", "item_id": f"m{oi}", "output_index": oi, "content_index": ci,
            field: value}


def test_resumed_done_is_compared_only_for_parts_seen_from_their_start() -> None:
    stream = (
        _text(0, 0, "delta", "tail"),  # part 0 began before the cursor: its done is not compared
        _text(0, 0, "done", "whole text with tail"),
        {"type": "response.content_part.added", "item_id": "m0", "output_index": 0, "content_index": 1,
         "part": {"type": "output_text", "text": ""}},
        _text(0, 1, "delta", "abc"),
        _text(0, 1, "done", "abX"),  # part 1 opened after the cursor: judged
        MSG_ADDED,
        _text(1, 0, "delta", "x"),
        _text(1, 0, "done", "y"),  # item 1 added after the cursor: judged
    )
    _, codes = check_all(*stream, expect_created=False)
    assert codes == ["text.done_mismatch", "text.done_mismatch", "lifecycle.no_terminal"]
    _, codes = check_all(CREATED, *stream)  # the same events as a whole stream: every done is judged
    assert codes.count("text.done_mismatch") == 3 and "item.delta_before_added" in codes


def test_resumed_output_mismatch_compares_whole_items_by_index() -> None:
    fc = {"id": "fc", "type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    msg = {"id": "m1", "type": "message", "content": [{"type": "output_text", "text": "hi"}]}
    partial_item = [{"type": "response.output_item.done", "output_index": 0, "item": fc}]  # added before cursor
    whole_item = [MSG_ADDED, _text(1, 0, "delta", "hi"), {"type": "response.output_item.done", "output_index": 1,
                                                         "item": msg}]
    ok = completed(output=[{**fc, "arguments": "{\"old\":1}"}, msg], output_text="ignored: covers item 0 too")
    assert check_all(*partial_item, *whole_item, ok, expect_created=False)[1] == []
    wrong_text = completed(output=[fc, {**msg, "content": [{"type": "output_text", "text": "other"}]}])
    codes = check_all(*partial_item, *whole_item, wrong_text, expect_created=False)[1]
    assert codes == ["completed.output_mismatch"]
    checker, codes = check_all(*whole_item, completed(output=[fc]), expect_created=False)
    assert codes == ["completed.output_mismatch"]
    assert "output item 1 was streamed but the terminal output has 1 items" in checker.violations[0].message
    only_text = completed(output_text="anything: output_text alone is not judged after a cursor")
    assert check_all(*partial_item, only_text, expect_created=False)[1] == []


def test_resumed_output_text_is_judged_when_every_item_was_seen_whole() -> None:
    msg = {"id": "m0", "type": "message", "content": [{"type": "output_text", "text": "hi"}]}
    head = [{**MSG_ADDED, "output_index": 0, "item": msg}, _text(0, 0, "delta", "hi"),
            {"type": "response.output_item.done", "output_index": 0, "item": msg}]
    assert check_all(*head, completed(output=[msg], output_text="hi"), expect_created=False)[1] == []
    codes = check_all(*head, completed(output=[msg], output_text="ho"), expect_created=False)[1]
    assert codes == ["completed.output_mismatch"]


def test_resumed_items_still_must_be_done_at_completed() -> None:
    args = {"type": "response.function_call_arguments.delta", "item_id": "fc", "output_index": 0, "delta": "{"}
    seed_text = {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "a"}
    seed_done = {"type": "response.output_text.done", "output_index": 1, "content_index": 0, "text": "xa"}
    # A call first seen mid-arguments and never done is open; the seed's message (parts only) is done by its parts.
    seed = {"expect_created": False, "dialect": "platform"}
    assert check_all(args, seed_text, seed_done, completed(), **seed)[1] == ["item.not_done"]
    assert check_all(seed_text, completed(), **seed)[1] == ["item.not_done"]


def test_shell_command_events_without_values_keep_what_came_before() -> None:
    asm = Assembler()
    for e in events(
        {"type": "response.shell_call_command.added", "output_index": 0, "command_index": 0, "command": "l"},
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 0},  # no delta
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 0, "delta": "s"},
        {"type": "response.shell_call_command.done", "output_index": 0, "command_index": 0},  # no command
    ):
        asm.feed(e)
    assert asm.result().output[0]["action"] == {"commands": ["l"]}  # the added command is final; deltas streamed
    assert asm.streamed_value((0, ("command", 0))) == "s"


def test_output_text_reads_only_well_formed_message_parts() -> None:
    odd_output = [
        {"type": "message", "content": "not a list"},
        {"type": "message", "content": ["not a part", {"type": "refusal", "refusal": "no"},
                                        {"type": "output_text", "text": 5}, {"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "content": [{"type": "output_text", "text": "not a message"}]},
    ]
    checker, codes = check_all(CREATED, completed(output=odd_output))
    result = checker.assembler.result()
    assert (result.output_text, result.refusal) == ("ok", "no")
    assert codes == ["completed.output_mismatch"]  # three items in the terminal, none assembled


def test_resumed_output_item_that_is_not_an_object() -> None:
    whole = [{**MSG_ADDED, "output_index": 0}, {"type": "response.output_item.done", "output_index": 0,
                                               "item": MSG_ADDED["item"]}]
    checker, codes = check_all(*whole, completed(output=["x"]), expect_created=False)
    assert codes == ["completed.output_mismatch"]
    assert "output[0] is not an object" in checker.violations[0].message


def test_done_that_cannot_be_located_is_not_compared() -> None:
    # No output_index and an item_id never seen: nothing to compare with (envelope.missing_field says so).
    lost = {"type": "response.output_text.done", "item_id": "ghost", "content_index": 0, "text": "x"}
    _, codes = check_all(CREATED, _text(0, 0, "delta", "y"), lost, completed())
    assert codes == ["item.delta_before_added", "envelope.missing_field", "item.not_done"]


def test_done_and_partial_image_events_without_values() -> None:
    asm = Assembler()
    for e in events(
        {"type": "response.refusal.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "no"},
        {"type": "response.refusal.done", "item_id": "m", "output_index": 0, "content_index": 0},  # no refusal
        {"type": "response.image_generation_call.partial_image", "item_id": "ig", "output_index": 1,
         "partial_image_index": 0},  # no image
        {"type": "response.output_item.done", "output_index": 1,
         "item": {"id": "ig", "type": "image_generation_call", "result": "final-b64"}},
        {"type": "response.image_generation_call.partial_image", "item_id": "ig", "output_index": 1,
         "partial_image_index": 1, "partial_image_b64": "late"},  # the final result is already there
    ):
        asm.feed(e)
    output = asm.result().output
    assert output[0]["content"] == [{"type": "refusal", "refusal": "no"}]
    assert output[1]["result"] == "final-b64" and "partial_image_b64" not in output[1]


def _cited_message(annotation: dict[str, Any], *, done_part_annotations: list[Any] | None = None) -> list[Any]:
    where = {"item_id": "m", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "Paris [1]", "annotations": done_part_annotations or [annotation]}
    item = {"id": "m", "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    return [
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        {"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": "",
                                                                  "annotations": []}},
        {"type": "response.output_text.delta", **where, "delta": "Paris [1]"},
        {"type": "response.output_text.annotation.added", **where, "annotation_index": 0, "annotation": annotation},
        {"type": "response.output_text.done", **where, "text": "Paris [1]"},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        completed(output=[item], output_text="Paris [1]"),
    ]


def test_annotations_in_range_are_fine_and_assembled() -> None:
    ann = {"type": "url_citation", "url": "https://x.org/", "title": "X", "start_index": 6, "end_index": 9}
    checker, codes = check_all(*_cited_message(ann))
    assert codes == []
    assert checker.assembler.result().output[0]["content"][0]["annotations"] == [ann]


def test_annotation_out_of_range_is_flagged_once_per_part() -> None:
    ann = {"type": "url_citation", "url": "https://x.org/", "title": "X", "start_index": 6, "end_index": 10}
    checker, codes = check_all(*_cited_message(ann))
    assert codes == ["text.annotation_out_of_range"]
    message = checker.violations[0].message
    assert checker.violations[0].sequence_number == 5  # at output_text.done, the first event that settles the text
    assert "output item 0 part 0" in message and "spans 6..10 but the text has 9 characters" in message
    # Only the done part (not the annotation.added events) out of range: flagged at content_part.done.
    good = {**ann, "end_index": 9}
    checker, codes = check_all(*_cited_message(good, done_part_annotations=[ann]))
    assert codes == ["text.annotation_out_of_range"] and checker.violations[0].sequence_number == 6
    # Only in the terminal response's output.
    objs = _cited_message(good)
    bad_item = json.loads(json.dumps(objs[-1]["response"]["output"][0]))
    bad_item["content"][0]["annotations"] = [{**good, "start_index": -1}]
    objs[-1] = completed(output=[bad_item], output_text="Paris [1]")
    _, codes = check_all(*objs)
    assert codes == ["text.annotation_out_of_range"]


def test_annotation_out_of_range_only_in_the_done_item_is_flagged_there() -> None:
    # (The checker skips parts without annotations before any work: a part with some is still judged at every event
    # that carries it, here output_item.done alone; null or empty annotations are nothing to judge.)
    good = {"type": "url_citation", "url": "https://x.org/", "title": "X", "start_index": 6, "end_index": 9}
    objs = _cited_message(good)
    bad_item = json.loads(json.dumps(objs[-2]["item"]))
    bad_item["content"][0]["annotations"] = [{**good, "end_index": 99}]
    objs[-2] = {**objs[-2], "item": bad_item}
    checker, codes = check_all(*objs)
    assert codes == ["text.annotation_out_of_range"] and checker.violations[0].sequence_number == 7
    for nothing in (None, [], ""):
        objs = _cited_message(good)
        part = {**objs[-3]["part"], "annotations": nothing}
        objs[-3] = {**objs[-3], "part": part}
        _, codes = check_all(*objs)
        assert "text.annotation_out_of_range" not in codes


def test_annotation_counted_in_another_unit_is_not_flagged() -> None:
    """A server that counts UTF-16 code units (JavaScript) or UTF-8 bytes (Go, Rust) puts the end of a citation of
    non-ASCII text past the text's end in code points: a defensible stream. Past the end in every unit: flagged."""
    from respstream.protocol.annotation_check import annotation_problems

    text = "Café 😀 [1]"  # 10 code points, 11 UTF-16 code units, 14 UTF-8 bytes
    assert len(text) == 10 and len(text.encode("utf-16-le")) // 2 == 11 and len(text.encode()) == 14
    cite = {"type": "url_citation", "url": "https://x.org/", "title": "X", "start_index": 7}
    assert annotation_problems(text, [{**cite, "end_index": 11}]) == []  # UTF-16 code units
    assert annotation_problems(text, [{**cite, "end_index": 14}]) == []  # UTF-8 bytes
    assert annotation_problems(text, [{"type": "file_path", "file_id": "f", "index": 14}]) == []
    assert annotation_problems(text, [{**cite, "end_index": 15}]) == [
        "annotation 0 (url_citation) spans 7..15 but the text has 10 characters"]
    assert annotation_problems(text, [{"type": "file_path", "file_id": "f", "index": 15}]) != []
    assert annotation_problems(text, [{**cite, "start_index": -1, "end_index": 3}]) != []
    assert annotation_problems("plain", [{**cite, "start_index": 0, "end_index": 6}]) != []  # ASCII: one unit
