"""The bytes of a text-delta event around its two varying values (sequence number, delta string), learned from one
event the text-delta lane took: a run of such events is then read with two regular-expression passes and two small
decodes, with no Python work per event (``take_text_run``'s first try; protocol/text_runs.py).

Why: in a stream's run of text deltas only ``sequence_number`` and ``delta`` change; ``type``, ``item_id`` and the
indices (and fields the lane ignores, such as ``logprobs: []``) repeat byte for byte. Decoding each event into a
probe and comparing its five fields in Python was most of the native upstream's cost per token over the Chat
Completions bridge's (issue 33), whose chunk template (server/upstream/chunk_template.py) decodes only the strings.

Why it is exact: JSON is parsed left to right, so after the constant bytes before a slot the parser is in the same
state whatever single value token fills it, and after that token in the same state again. The template is kept only
when the learned event with *other* values in its slots (a number of another length, a string with quotes, a
backslash, non-ASCII and an escaped newline) decodes, through the lane's own decoder, to a text delta with exactly
those values and the same item id and indices: so a duplicated key later in the event, or a slot found in the wrong
place, fails the probe and no template is kept. A run is read only where every event is ``head`` + constant +
digits + constant + one JSON string token + constant + LF LF, in that order, matched from the run's first byte
without a gap (one anchored match of the whole run, then the same pattern's groups); the strings are then decoded as
one JSON array (which also rejects a bad escape) and the numbers as another, which must be exactly the expected ones.
An event that does not fit ends the run; anything else about the run (a number out of turn, an event over the size
limit) leaves the whole run to the probe reader, which judges it event by event. OpenAI's own streams carry a
different ``obfuscation`` string in every event, so they never fit and are read by the probes as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import chain, repeat
from operator import getitem
from typing import Final

import msgspec

__all__ = ["DeltaTemplate", "TextDeltaProbe", "decode_delta_probe", "learn_delta_template"]

_TEXT_DELTA: Final = "response.output_text.delta"
_PROBE_TEXT: Final = 'probe "\\ é\n'
_decode_strings: Final = msgspec.json.Decoder(list[str]).decode


class TextDeltaProbe(msgspec.Struct, gc=False):
    """What the text-delta lane reads of an event: the fields it compares (other fields are skipped unbuilt)."""

    type: str = ""
    sequence_number: int | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None


decode_delta_probe: Final = msgspec.json.Decoder(TextDeltaProbe).decode


class DeltaTemplate:
    """``before`` + slot + ``middle`` + slot + ``after`` (numbered) or ``before`` + slot + ``after``: the data of a text
    delta of one part of one stream. ``digits_first``: the sequence number's slot comes before the delta's."""

    __slots__ = ("_after", "_before", "_middle", "digits_first", "key", "numbered")

    def __init__(self, key: tuple[object, ...], pieces: list[bytes], digits_first: bool | None) -> None:
        self.key = key
        self.numbered = digits_first is not None
        self.digits_first = bool(digits_first)
        self._before, self._after = pieces[0], pieces[-1]
        self._middle = pieces[1] if len(pieces) == 3 else b""

    def fitting(self, parts: list[bytes], first: int) -> int:
        """How many of ``parts`` to try at once: up to where the numbers gain a digit (their slot's width is fixed
        in one try), and not a last part that cannot end as the template does (an unnamed stream's ``*.done``)."""
        n = len(parts)
        if self.numbered:
            n = min(n, 10 ** len(b"%d" % first) - first)
        if n and n == len(parts) and not parts[-1].endswith(self._after):
            n -= 1
        return n

    def fit(self, raw: bytes, at: int, head: bytes, parts: list[bytes], first: int) -> list[str] | None:
        """The deltas of the events ``parts`` (their data; the first at ``raw[at + len(head):]``, each framed with
        ``head`` and ending LF LF, none holding CR or LF) when every one is this template with the numbers ``first``,
        ``first + 1``... (when numbered) around one JSON string; else None. Every step maps a built-in over the
        parts (no Python step per event): the string slots are cut where the template puts them, the events rebuilt
        from the template, the numbers and the slots, and compared with the bytes in one go."""
        n = len(parts)
        before, middle, after = self._before, self._middle, self._after
        pieces: tuple[Iterable[bytes], ...]
        if self.numbered:
            width = len(b"%d" % first)
            if len(b"%d" % (first + n - 1)) != width:
                return None  # (the numbers change length: see `fitting`)
            digits = list(map(b"%d".__mod__, range(first, first + n)))
            if self.digits_first:
                cut = slice(len(before) + width + len(middle), -len(after))
                pieces = (repeat(before), digits, repeat(middle))
            else:
                cut = slice(len(before), -(len(middle) + width + len(after)))
                pieces = (repeat(before),)
        else:
            cut = slice(len(before), -len(after))
            pieces = (repeat(before),)
        slots: list[bytes] = list(map(getitem, parts, repeat(cut)))  # type: ignore[arg-type]
        joint = after + b"\n\n" + head
        if self.numbered and not self.digits_first:
            rest: tuple[Iterable[bytes], ...] = (slots, repeat(middle), digits, repeat(joint))
        else:
            rest = (slots, repeat(joint))
        rebuilt = b"".join(chain.from_iterable(zip(*pieces, *rest, strict=False)))
        # (`rebuilt` ends with the joint where the last event ends with `after` LF LF and what follows is not read.)
        if not raw.startswith(rebuilt[: -len(head)], at + len(head)):
            return None
        try:
            # Joined with a comma and a raw LF, which no slot holds and a JSON string cannot: no string spans two
            # slots, and as many strings as slots means one in each.
            deltas = _decode_strings(b"[" + b",\n".join(slots) + b"]")
        except msgspec.MsgspecError:
            return None
        return deltas if len(deltas) == n else None


def learn_delta_template(
    key: tuple[object, ...], data: bytes, probe: TextDeltaProbe
) -> DeltaTemplate | None:
    """The template of ``data``, an event's data the lane took whose probe is ``probe``, or None when its
    slots cannot be found or the substitution probe fails (module doc)."""
    if b"\n" in data or b"\r" in data or probe.delta is None:
        return None
    text = _slot(data, b'"delta"', [msgspec.json.encode(probe.delta), json.dumps(probe.delta).encode()])
    if text is None:
        return None
    if probe.sequence_number is None:
        cuts = [text]
        digits_first: bool | None = None
    else:
        number = _slot(data, b'"sequence_number"', [b"%d" % probe.sequence_number])
        if number is None or not (number[1] <= text[0] or text[1] <= number[0]):
            return None
        digits_first = number[0] < text[0]
        cuts = [number, text] if digits_first else [text, number]
    pieces, fills, probe_fills, last = [], [], [], 0
    probe_number = (probe.sequence_number or 0) + 98765
    for start, end in cuts:
        pieces.append(data[last:start])
        is_text = (start, end) == text
        probe_fills.append(msgspec.json.encode(_PROBE_TEXT) if is_text else b"%d" % probe_number)
        fills.append(data[start:end])
        last = end
    pieces.append(data[last:])
    if not pieces[-1]:
        return None
    substituted = pieces[0] + b"".join(f + p for f, p in zip(probe_fills, pieces[1:], strict=True))
    try:
        check = decode_delta_probe(substituted)
    except msgspec.MsgspecError:
        return None
    if (
        check.type != _TEXT_DELTA
        or check.delta != _PROBE_TEXT
        or check.sequence_number != (None if digits_first is None else probe_number)
        or check.item_id != probe.item_id
        or check.output_index != probe.output_index
        or check.content_index != probe.content_index
    ):
        return None
    return DeltaTemplate(key, pieces, digits_first)


def _slot(data: bytes, name: bytes, written: list[bytes]) -> tuple[int, int] | None:
    """Where the value after the first key ``name`` sits, when it is written as one of ``written``, or None."""
    key = data.find(name)
    if key < 0:
        return None
    at = key + len(name)
    while data[at : at + 1] in (b" ", b"\t"):
        at += 1
    if data[at : at + 1] != b":":
        return None
    at += 1
    while data[at : at + 1] in (b" ", b"\t"):
        at += 1
    for value in written:
        if data.startswith(value, at):
            end = at + len(value)
            if value[:1] != b'"' and data[end : end + 1].isdigit():
                return None  # (a longer number: not this value)
            return at, end
    return None
