"""The bytes of a Gemini text chunk around its two changing values (the text string and ``usageMetadata``), learned
from one chunk of a stream, and a whole read of such chunks checked and decoded without building their objects.

Why: nearly every chunk of a Gemini stream is the same object with another text and another running usage
(``candidates``, ``role``, ``index``, ``modelVersion`` and ``responseId`` repeat byte for byte, the usage's counts
change). Decoding each chunk into objects costs more than all the rest of the gateway's work on it; here a read of K
chunks costs a few whole-read byte operations (one split, two joins, one translate and compare) and one small
decode: the K texts as one JSON array of strings (docs/benchmarks.md, provider adapters).

The template is ``prefix`` + (the text: one JSON string) + ``middle`` + (the usage: one JSON object) + ``suffix``.
It is kept only when a probe text and a probe usage put in its slots decode, through the typed text-chunk decoder
(gemini/text_chunk.py, which the lanes test proves equal to the full path), to a chunk of exactly that one text
part and that usage. JSON is parsed left to right, so after the prefix the parser is in the same state whatever
follows, and any one string (then any one object) leaves it in the same state again: every ``prefix + string +
middle + object + suffix`` is then a text chunk carrying that string and that usage.

Why a read is exact (:meth:`GeminiTemplate.read`, given a read that starts where the SSE decoder holds nothing):

1. The read is split where ``data: `` + prefix starts an event, and must start so. Every piece ("core") must end
   with a tail (3) whose shape ends with the event's CR LF CR LF and holds no other CR or LF, and its slot (4) holds
   none either: so the read is exactly K one-line events, each ``data: `` + prefix + core.
2. The reference is the last core's tail, from its last ``middle`` on. The first time a tail of its shape (every
   digit read as ``0``) is seen, it must end with the suffix and CR LF CR LF, hold no backslash (so no escapes: a
   digit changed in one of its strings leaves a valid string) and no other CR or LF, and its usage must decode as
   :class:`~.text_chunk.UsageCounts` (typed, every value checked); any later tail of that shape is valid by 3. The
   last usage's bytes are kept, and decoded at the stream's end as the full path decodes them (the usage is
   cumulative: only the last one counts). What the check proves depends on the prefix, the middle and the usage's
   shape only (the suffix, with its ``responseId`` of each response, was checked when the template was learned), so
   it is remembered under those for every later stream; each read first tries the shape the last read had.
3. Every core ends with a tail as long as the reference and of its shape (the joined tails, digits as ``0``, equal
   the shape repeated; a shorter core makes the join shorter): the same JSON with other digits in the same places.
   A digit inside a string, or a number of one digit, may be any digit; a number of several digits may not start
   with ``0`` (``05`` is no JSON), checked at the first digit of every run of two or more outside the shape's
   strings (one slice of the joined tails a column). So every tail is valid where the reference is; the usages
   before the last are checked, never read (the full path keeps only the last one too).
4. The rest of each core (its slot), joined by ``,\t`` into one array, holds no CR or LF and decodes as exactly K
   strings: a tab, like a line end, is never inside a JSON string, so no string spans a separator, and an empty
   slot would make two commas meet: each slot is one JSON string.

A read in which a count grew a digit (tails of two lengths) is cut where the tails' length changes (a binary search)
and each part checked as above. Anything else (a finish, a thought, another field, a value the types refuse) fails
a check and the read goes the ordinary way (gemini/reads.py), which gives the same chunks, only slower.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import repeat
from operator import getitem
from typing import Final, cast

import msgspec

from respstream.server.upstream.gemini.text_chunk import TextChunk, UsageCounts, decode_text_chunk

__all__ = ["GeminiTemplate", "learn_template"]

_SEPARATOR: Final = b"\r\n\r\ndata: "
_EVENT_END: Final = b"\r\n\r\n"
_RUN: Final = 4  # events a read from which the template is tried
_MAX_ROLLOVERS: Final = 3  # counts growing a digit within one read that the template still takes
_DIGITS_AS_ZERO: Final = bytes(b"0"[0] if b"0"[0] <= byte <= b"9"[0] else byte for byte in range(256))
_DIGITS: Final = frozenset(b"0123456789")
_ZERO: Final = b"0"[0]
_MAX_SHAPES: Final = 64  # tails' shapes checked and remembered (a count that grows a digit makes a new one)
_PROBE_TEXT: Final = 'probe "\\ é\n'  # quotes, a backslash, non-ASCII and a newline: escapes must land in the slot too
_PROBE_USAGE: Final = UsageCounts(promptTokenCount=7919, candidatesTokenCount=104729)


class _Slots(msgspec.Struct, gc=False):
    text: msgspec.Raw


class _RawContent(msgspec.Struct, gc=False):
    parts: list[_Slots]


class _RawCandidate(msgspec.Struct, gc=False):
    content: _RawContent


class _RawChunk(msgspec.Struct, gc=False):
    """Where the two values sit in the chunk a template is learned from (checked by the probe, never trusted)."""

    candidates: list[_RawCandidate]
    usageMetadata: msgspec.Raw = msgspec.Raw()  # (empty: none in the chunk)


_decode_texts = msgspec.json.Decoder(list[str]).decode
_decode_usage = msgspec.json.Decoder(UsageCounts).decode
_decode_raw_chunk = msgspec.json.Decoder(_RawChunk).decode
_cut = cast("Callable[[bytes, slice], bytes]", getitem)  # (one slice of each event, in C: map(_cut, ...))
# (a template's prefix and middle, the middle and usage of a tail it checked, digits as 0) -> where the usage's
# multi-digit numbers start (module docstring, 3)
_CHECKED: dict[tuple[bytes, bytes, bytes], tuple[int, ...]] = {}
_LEADS: dict[tuple[str, int], struct.Struct] = {}  # (a tail's layout, events) -> _Shape.leads
# (a template's prefix, middle and suffix, a tail shape of it checked) -> the shape (a response's stream whose
# suffix is a former one's, its responseId too, finds its shapes made)
_SHAPES: dict[tuple[tuple[bytes, bytes, bytes], bytes], _Shape] = {}


class GeminiTemplate:
    """``prefix`` + one JSON string + ``middle`` + one usage object + ``suffix``: a text chunk of one stream."""

    __slots__ = ("_end", "_head", "_known", "_parts", "_suffix_starts", "middle", "prefix", "run_bytes", "suffix")

    def __init__(self, prefix: bytes, middle: bytes, suffix: bytes) -> None:
        self.prefix = prefix
        self.middle = middle
        self.suffix = suffix
        # (a read shorter than this holds fewer events than _RUN: the typed lane of gemini/reads.py takes it as fast)
        self.run_bytes = _RUN * (len(prefix) + len(middle) + len(suffix) + len(_SEPARATOR))
        self._head = b"data: " + prefix  # (how each event starts, and ends:)
        self._end = suffix + _EVENT_END
        self._known: _Shape | None = None  # the last run's tail shape
        self._parts = (prefix, middle, suffix)  # (a tail shape, the suffix in it, holds for this template only)
        self._suffix_starts = _number_starts(suffix)  # (the suffix starts outside any string: after the usage)

    def read(self, raw: bytes) -> tuple[list[str], bytes, int] | None:
        """The texts (empty ones left out), the last usage's bytes (checked JSON: decode them for its counts) and the
        number of events of ``raw`` (a read that starts an event) when it is whole events of this template around a
        string and a usage, else None (module docstring)."""
        # Split where an event of this template starts: every piece ("core") must then end with a tail of the
        # reference's shape, which ends with the CR LF CR LF of its event, and hold no other CR or LF (the run checks
        # both), so the read is exactly these events, each ``data: `` + prefix + core.
        cores = raw.split(self._head)
        if cores[0]:  # (the read starts with an event of this template)
            return None
        del cores[0]
        return self._run(cores) or self._rollover(cores)

    def _rollover(self, cores: list[bytes], depth: int = 0) -> tuple[list[str], bytes, int] | None:
        """A read whose usage grew a digit: the events from the first whose tail is as long as the last one's on
        (a binary search on the tails' lengths) as one run, the events before it as a run or, when a count grew a
        digit there too, the same again (at most three times); each run is checked whole."""
        events = len(cores)
        if events < 2 or depth == _MAX_ROLLOVERS:
            return None
        middle = self.middle
        last = cores[-1].rfind(middle) - len(cores[-1])
        low, high = 1, events - 1
        while low < high:
            mid = (low + high) // 2
            if cores[mid].rfind(middle) - len(cores[mid]) == last:
                high = mid
            else:
                low = mid + 1
        head = cores[:low]
        before = self._run(head, guess=False) or self._rollover(head, depth + 1)
        after = self._run(cores[low:], guess=False) if before is not None else None
        if before is None or after is None:
            return None
        return before[0] + after[0], after[1], events

    def _run(self, cores: list[bytes], guess: bool = True) -> tuple[list[str], bytes, int] | None:
        """The texts and last usage of ``cores`` (events less their prefix) when each is a slot and a tail shaped
        as the last one's (module docstring), else None. ``guess``: try the shape the last read had (nearly always
        the same: the last tail's own shape is then never computed); a read it does not fit goes to _rollover."""
        events = len(cores)
        known = self._known if guess else None
        if known is None:  # (the shape the last core's tail has, checked once: module docstring, 2)
            last = cores[-1]
            at = last.rfind(self.middle)
            tail = last[at:]
            shape = tail.translate(_DIGITS_AS_ZERO)
            known = _SHAPES.get((self._parts, shape)) or self._new_shape(last, at, tail, shape)
            if known is None:
                return None
            self._known = known
        if events != known.events:
            known.repeat(events)
        # (a core shorter than a tail gives a shorter tail: the joined tails are then too short to match)
        tails = b"".join(map(_cut, cores, known.tail_cuts))
        if tails.translate(_DIGITS_AS_ZERO) != known.shapes:
            return None
        # (the first digit of each number of two or more, every event, as one tuple: none may be 0 (module
        # docstring, 3); the tails are exactly events x cut bytes, as the compare showed)
        if known.leads is not None and _ZERO in known.leads.unpack(tails):
            return None
        # (a tab: like a newline, never inside a JSON string, and no slot may hold a CR or LF: the event's one line)
        document = b"[" + b",\t".join(map(_cut, cores, known.slot_cuts)) + b"]"
        if b"\n" in document or b"\r" in document:
            return None
        try:
            texts = _decode_texts(document)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if len(texts) != events:
            return None
        if "" in texts:  # (an empty text adds nothing, as GeminiStream.feed drops it)
            texts = [text for text in texts if text]
        return texts, cores[-1][known.usage], events

    def _new_shape(self, last: bytes, at: int, tail: bytes, shape: bytes) -> _Shape | None:
        """The first tail of its shape for this template: checked (module docstring, 2), then remembered. What
        decides (the usage's shape, where its numbers start) is remembered for every stream of the same prefix and
        middle: the suffix (``modelVersion``, a ``responseId`` of its own each response) was checked when the
        template was learned and holds no CR, LF or backslash, so a live response decodes no usage shape a former
        one did (it only makes its own :class:`_Shape`, its suffix in it)."""
        end = self._end
        if at < 0 or not last.endswith(end):
            return None
        head = shape[: -len(end)]  # (the middle and the usage, digits as 0)
        if b"\\" in head or b"\n" in head or b"\r" in head:
            return None  # (the tails match the shape: none holds a backslash, or a CR or LF before its end)
        key = (self.prefix, self.middle, head)
        starts = _CHECKED.get(key)
        if starts is None:
            try:  # (a reference of this shape is valid: so is any other, as every tail (module docstring))
                _decode_usage(tail[len(self.middle) : -len(end)])
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            if len(_CHECKED) >= _MAX_SHAPES:
                _CHECKED.clear()
            starts = _CHECKED[key] = _number_starts(tail[: len(head)])
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        usage = slice(len(self.middle) - len(shape), -len(end))  # (of a core: the usage's bytes)
        starts += tuple(len(head) + at for at in self._suffix_starts)
        known = _SHAPES[self._parts, shape] = _Shape(shape, starts, usage)
        return known


class _Shape:
    """A tail's shape (its digits as ``0``): where its numbers start, the slices that cut a core into its slot and
    its tail (repeated, for ``map``) and its usage, and for the last read's ``events``: the shape repeated and the
    struct that picks the first digit of every number of two or more digits out of the joined tails."""

    __slots__ = ("_made", "cut", "events", "leads", "row", "shape", "shapes", "slot_cuts", "tail_cuts", "usage")

    def __init__(self, shape: bytes, starts: tuple[int, ...], usage: slice) -> None:
        self.shape, self.usage = shape, usage
        self.events, self.shapes = 0, b""
        self.leads: struct.Struct | None = None
        self._made: dict[int, tuple[bytes, struct.Struct | None]] = {}
        self.cut = cut = len(shape)
        self.tail_cuts = repeat(slice(-cut, None))  # (endless: every map over a read's cores takes what it needs)
        self.slot_cuts = repeat(slice(0, -cut))
        # (one tail: skip to each number's first digit and take it as an int ("B"), skip to the tail's end)
        row, at = [], 0
        for start in starts:
            row.append(f"{start - at}xB")
            at = start + 1
        self.row = "".join(row) + f"{cut - at}x" if row else ""

    def repeat(self, events: int) -> None:
        made = self._made.get(events)
        if made is None:  # (reads of a live stream hold a varying number of events: each count made once)
            if len(self._made) >= _MAX_SHAPES:
                self._made.clear()
            made = self._made[events] = (self.shape * events, _leads(self.row, events) if self.row else None)
        self.events = events
        self.shapes, self.leads = made


def _leads(row: str, events: int) -> struct.Struct:
    """The struct of ``events`` tails of one row's layout (made once for every stream: a new stream's shapes are
    its own, their layouts nearly always the former streams')."""
    made = _LEADS.get((row, events))
    if made is None:
        if len(_LEADS) >= 4 * _MAX_SHAPES:
            _LEADS.clear()
        made = _LEADS[row, events] = struct.Struct("<" + row * events)
    return made


def _number_starts(tail: bytes) -> tuple[int, ...]:
    """Where each run of two or more digits outside a string starts in ``tail`` (which holds no backslash, and
    starts outside any string: right after the text's closing quote)."""
    starts: list[int] = []
    offset = 0
    for index, piece in enumerate(tail.split(b'"')):
        if index % 2 == 0:  # (outside a string)
            run = 0
            for at, byte in enumerate(piece):
                if byte in _DIGITS:
                    run += 1
                    if run == 2:
                        starts.append(offset + at - 1)
                else:
                    run = 0
        offset += len(piece) + 1
    return tuple(starts)


def learn_template(payload: bytes) -> GeminiTemplate | None:
    """The template of ``payload`` (one event's JSON) when it is a text chunk of one text part and a usage object,
    else None. The slots are found as the chunk's own bytes of the two values; the probe decides."""
    try:
        raw = _decode_raw_chunk(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(raw.candidates) != 1 or len(raw.candidates[0].content.parts) != 1:
        return None
    text = bytes(raw.candidates[0].content.parts[0].text)
    usage = bytes(raw.usageMetadata)
    if not usage.startswith(b"{"):
        return None
    key = payload.find(b'"text"')
    start = payload.find(text, key + 6) if key >= 0 else -1
    at = payload.find(usage, start + len(text)) if start >= 0 else -1
    if at < 0:
        return None
    prefix, middle, suffix = payload[:start], payload[start + len(text) : at], payload[at + len(usage) :]
    if not middle or any(b"\r" in part or b"\n" in part or b"\\" in part for part in (prefix, middle, suffix)):
        return None
    probe = prefix + msgspec.json.encode(_PROBE_TEXT) + middle + msgspec.json.encode(_PROBE_USAGE) + suffix
    try:
        chunk: TextChunk = decode_text_chunk(probe)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(chunk.candidates) != 1 or [part.text for part in chunk.candidates[0].content.parts] != [_PROBE_TEXT] \
            or chunk.usageMetadata != _PROBE_USAGE:
        return None
    return GeminiTemplate(prefix, middle, suffix)
