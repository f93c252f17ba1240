"""``text.annotation_out_of_range``: an annotation that points outside the text it annotates.

An ``output_text`` part's annotations locate spans of its ``text``: ``url_citation`` and ``container_file_citation``
by ``start_index`` / ``end_index`` (``text[start_index:end_index]``, Python string indices), ``file_citation`` and
``file_path`` by one ``index``. Each must be an integer with ``0 <= start_index <= end_index <= len(text)`` (and
``0 <= index <= len(text)``). An annotation without any of these fields is not judged (an unknown kind). Pure and
linear in the number of annotations (plus one encoding of the text, only when an index is past its end).

Which unit counts: the spec does not say, and real servers differ (Python counts code points, JavaScript UTF-16 code
units, Go and Rust UTF-8 bytes). An index past the text's end in code points that is within its length in UTF-16
code units or UTF-8 bytes was counted in another unit: a defensible stream, not reported (docs/conformance.md,
"Annotation indices"). Past the end in every unit, or negative, or not an integer: reported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["annotation_problems", "part_annotation_problems"]

_MAX_REPORTED = 3  # per part: one broken builder usually breaks them all


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def annotation_problems(text: str, annotations: Any) -> list[str]:
    """What is out of range (or not an integer) in ``annotations`` for ``text``; empty when all are fine."""
    if not isinstance(annotations, list):
        return []
    size = len(text)
    problems: list[str] = []
    for n, annotation in enumerate(annotations):
        if len(problems) >= _MAX_REPORTED:
            break
        if not isinstance(annotation, dict):
            continue
        kind = annotation.get("type", "?")
        if "start_index" in annotation or "end_index" in annotation:
            raw_start, raw_end = annotation.get("start_index"), annotation.get("end_index")
            start, end = _int(raw_start), _int(raw_end)
            if start is None or end is None:
                problems.append(f"annotation {n} ({kind}): start_index/end_index must be integers, got "
                                f"{raw_start!r}/{raw_end!r}")
            elif not 0 <= start <= end or (end > size and end > _widest(text)):
                problems.append(f"annotation {n} ({kind}) spans {start}..{end} but the text has {size} characters")
        elif "index" in annotation:
            index = _int(annotation.get("index"))
            if index is None:
                problems.append(f"annotation {n} ({kind}): index must be an integer, got {annotation['index']!r}")
            elif index < 0 or (index > size and index > _widest(text)):
                problems.append(f"annotation {n} ({kind}) is at {index} but the text has {size} characters")
    return problems


def _widest(text: str) -> int:
    """The text's length in the longest unit a server may count in: UTF-8 bytes (never fewer than its UTF-16 code
    units or code points; a lone surrogate a model wrote counts as its 3 bytes)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def part_annotation_problems(part: Any) -> list[str]:
    """:func:`annotation_problems` of one content part object (``output_text`` parts only)."""
    if not isinstance(part, dict) or part.get("type") != "output_text" or not isinstance(part.get("text"), str):
        return []
    return annotation_problems(part["text"], part.get("annotations"))
