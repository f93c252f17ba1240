"""A read's run of text deltas taken together: ``StreamCore.take_text_run``, the many-event twin of
``take_text_delta`` (the gateway's native Responses upstream: a read of many tokens, which a gateway busier than its
upstream gets, 13 to 208 events a read at full load).

Why: ``take_text_delta`` costs one call and one decode per event; a Chat Completions read of the same tokens is
decoded in one call (upstream/chat/chunk_template.py), and the native path paid ~3x the chat path per token on such
reads (docs/benchmarks.md, issue 33). Here the events of the run that are framed exactly as the last event the lane
took (``event: response.output_text.delta`` + ``data: {...}``, or ``data: {...}``, one line each, LF framing) are
split on that framing in one ``bytes.split``, their data decoded as one JSON array of the lane's probes, and then
judged one by one with the same tests as ``take_text_delta``: the run stops before the first event that fails one.

Why it is exact: the framing is the one the lane's full check accepted, and the decoder is still idle at a block
boundary (only lane reads since, as for ``take_text_delta``'s own shortcut), so each split part is one whole simple
block whose data is that part. The data are joined with commas inside brackets: JSON values cannot run into one
another across a comma, no data holds a newline (checked), and a data that is not exactly one value either fails the
decode (a bare word, nothing, a trailing comma) or changes the count (``{..},{..}``), which is checked, so each
probe is its own event's, decoded as ``take_text_delta`` would (the same typed decoder). Anything else (a decode
error, a CR, a multi-line event, a run longer than the event size limit allows) leaves the run to the one-event
lane, event by event.
"""

from __future__ import annotations

from typing import Final, Protocol

import msgspec

from respstream.protocol.assembler import Assembler
from respstream.protocol.sequencer import Sequencer
from respstream.protocol.sse import SSEDecoder

__all__ = ["FIRST_WINDOW", "TextDeltaProbe", "decode_delta_probe", "take_text_run"]

_TEXT_DELTA: Final = "response.output_text.delta"
FIRST_WINDOW: Final = 1024  # bytes read together at first; doubled while every event is taken, up to _MAX_WINDOW
_MAX_WINDOW: Final = 64 << 10


class TextDeltaProbe(msgspec.Struct, gc=False):
    """What the text-delta lane reads of an event: the fields it compares (other fields are skipped unbuilt)."""

    type: str = ""
    sequence_number: int | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    delta: str | None = None


decode_delta_probe: Final = msgspec.json.Decoder(TextDeltaProbe).decode
_decode_probes: Final = msgspec.json.Decoder(list[TextDeltaProbe]).decode


class _Core(Protocol):
    """What of ``StreamCore`` the run reads and advances (stream.py; a protocol, so this module imports it not)."""

    _lane_head: bytes
    _run_window: int
    _fast: tuple[str | None, int | None, int | None, list[str]]
    _bytes: int
    sequencer: Sequencer
    assembler: Assembler
    decoder: SSEDecoder
    messages: int
    json_events: int

    def take_text_delta(self, chunk: bytes) -> str | None: ...

    def compact_now_and_then(self) -> None: ...


def take_text_run(core: _Core, raw: bytes, at: int) -> tuple[list[str], int]:
    """``(texts, end)``: the lane's text deltas at the start of ``raw[at:]`` (which starts at an event boundary)
    consumed, ``end`` where the first event the lane refused starts (``len(raw)`` when it took them all); the
    non-empty deltas in ``texts``. Changes what ``take_text_delta`` for each event in turn would, nothing more.

    Linear: a window of bytes is split and decoded only after the previous one (of this read or the last) was taken
    whole, and is at most twice as long, so what is read and then refused is at most what was taken plus the first
    window. (The window is kept from read to read: a busy gateway's reads of a hundred tokens then take one or two.)"""
    texts: list[str] = []
    size = len(raw)
    window = core._run_window
    while at < size:
        head = core._lane_head
        if head and raw.startswith(head, at):
            taken, at, whole = _window(core, raw, at, head, window, texts)
            if not whole:
                core._run_window = FIRST_WINDOW
                return texts, at  # (an event the lane refuses: the one-event lane would too)
            if taken:
                window = core._run_window = min(2 * window, _MAX_WINDOW)
                continue
            window = core._run_window  # (not read as a window: its first event goes alone)
        end = raw.find(b"\n\n", at) + 2
        if end == 1:
            break
        delta = core.take_text_delta(raw[at:end])
        if delta is None:
            break
        if delta:
            texts.append(delta)
        at = end
    return texts, at


def _window(core: _Core, raw: bytes, at: int, head: bytes, window: int, texts: list[str]) -> tuple[int, int, bool]:
    """The events framed with ``head`` in ``window`` bytes from ``at``, decoded in one call: ``(events taken, where the
    next starts, whether every event of the window was taken)``; ``(0, at, True)`` when the window cannot be read
    this way at all (the one-event lane then tries its first event)."""
    f_id, f_oi, f_ci, f_chunks = core._fast
    sequencer = core.sequencer
    if f_oi == -1 or sequencer._pending:
        return 0, at, True
    hl = len(head)
    parts = raw[at + hl : at + window].split(b"\n\n" + head)
    last = parts[-1]
    cut = last.find(b"\n\n")
    if cut < 0:
        parts.pop()  # (cut by the window's end, or unfinished: the next window or the one-event lane takes it)
    else:
        parts[-1] = last[:cut]  # (an event framed otherwise, or the window's end, follows)
    if len(parts) < 2:
        return 0, at, True
    joined = b",".join(parts)
    if b"\n" in joined or b"\r" in joined or len(joined) + hl + 2 > core.decoder.max_event_size:
        core._run_window = FIRST_WINDOW  # (a multi-line event, CR framing, a large one: small windows from here)
        return 0, at, True
    try:
        probes = _decode_probes(b"[" + joined + b"]")
    except msgspec.MsgspecError:
        probes = []
    if len(probes) != len(parts):
        core._run_window = FIRST_WINDOW  # (an event that is not one JSON object: the one-event lane judges it)
        return 0, at, True
    assembler = core.assembler
    expected = sequencer.expected
    last_seq = assembler.last_sequence_number
    numbered_ok = sequencer._missing_reported  # (a stream without numbers: once `sequence.missing` was reported)
    taken = 0
    took: list[str] = []
    for one in probes:
        delta = one.delta
        if (
            one.type != _TEXT_DELTA
            or delta is None
            or one.output_index != f_oi
            or one.content_index != f_ci
            or one.item_id != f_id
        ):
            break
        seq = one.sequence_number
        if seq is None:
            if not numbered_ok or last_seq is not None:
                break
        elif seq != expected:
            break
        else:
            expected = seq + 1
        last_seq = seq
        took.append(delta)
        taken += 1
    if not taken:
        return 0, at, False
    consumed = taken * (hl + 2) + sum(map(len, parts[:taken]))
    sequencer.expected = expected
    core.decoder.skip_block(consumed)
    core._bytes += consumed
    f_chunks.extend(took)
    assembler.streamed.extend(took)
    assembler.events += taken
    assembler.last_sequence_number = last_seq
    core.messages += taken
    core.json_events += taken
    core.compact_now_and_then()
    texts.extend([text for text in took if text] if "" in took else took)
    return taken, at + consumed, taken == len(parts)
