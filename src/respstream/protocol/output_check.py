"""``completed.output_mismatch``: a terminal response's ``output`` / ``output_text`` against what was assembled.

DESIGN §3: a non-empty ``output`` or ``output_text`` must agree with the assembled ``*.done`` values (type, id,
call_id, name, arguments, text); an absent or empty one is fine. A resumed stream (``starting_after = N``) saw only
the items whose ``output_item.added`` came after N whole, so only those are compared, by ``output_index``, and
``output_text`` only when they are all the items there are.
"""

from __future__ import annotations

from typing import Any

from respstream.protocol.assembled import JSONObject, output_texts
from respstream.protocol.output_items import OutputItems

__all__ = ["output_problems"]

_COMPARED_KEYS = ("type", "id", "call_id", "name", "arguments")


def output_problems(response: JSONObject, items: OutputItems, whole: set[int] | None = None) -> list[str]:
    """What differs between ``response`` (a terminal Response object) and the assembled ``items``; empty when
    they agree. ``whole``: for a resumed stream, the output indices whose whole life was seen (``None``: all)."""
    output = response.get("output")
    final: list[Any] = output if isinstance(output, list) else []
    text = response.get("output_text")
    if not final and not (isinstance(text, str) and text):
        return []  # absent or empty output is fine
    problems: list[str] = []
    assembled: list[JSONObject] | None = None
    if whole is None:
        assembled = items.materialize()
        if final:
            if len(final) != len(assembled):
                problems.append(f"{len(final)} output items, {len(assembled)} assembled")
            for index, (got, mine) in enumerate(zip(final, assembled, strict=False)):
                _item_problems(index, got, mine, problems)
        judge_text = True
    else:
        if not final:
            return []  # output_text alone covers items added before the cursor: not ours to judge
        for oi in sorted(whole):
            if oi >= len(final):
                problems.append(f"output item {oi} was streamed but the terminal output has {len(final)} items")
                continue
            _item_problems(oi, final[oi], items.materialize_item(oi), problems)
        judge_text = sorted(whole) == list(range(len(final)))
    if judge_text and isinstance(text, str) and text and text != "".join(
        output_texts(items.materialize() if assembled is None else assembled, "output_text", "text")
    ):
        problems.append("output_text differs")
    return problems


def _item_problems(index: int, got: Any, mine: JSONObject, problems: list[str]) -> None:
    if not isinstance(got, dict):
        problems.append(f"output[{index}] is not an object")
        return
    for key in _COMPARED_KEYS:
        a, b = got.get(key), mine.get(key)
        if a is not None and b is not None and a != b:
            problems.append(f"output[{index}].{key} differs")
    if (
        got.get("type") == "message"
        and isinstance(got.get("content"), list)
        and output_texts([got], "output_text", "text") != output_texts([mine], "output_text", "text")
    ):
        problems.append(f"output[{index}] text differs")
