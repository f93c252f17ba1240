"""``StreamCore``: bytes of a Responses SSE stream in, typed events out, in order, assembled and checked.

How this works: one object wires the pipeline the client, the CLI and the tests share::

    SSEDecoder -> decode_event -> Sequencer -> RuleChecker.check -> Assembler.feed -> events()

``feed(chunk)`` runs everything the chunk completes; ``events()`` hands out the events released so far (in sequence
order, duplicates dropped); ``close()`` is EOF (releases what the reorder window still holds, declares gaps, checks
for a terminal event); ``result`` is the :class:`AssembledResponse` and ``violations`` every :class:`Violation`.

Bad input raises :class:`respstream.errors.BadInputError` (``event_number`` is 1-based, ``byte_offset`` where the
event starts): a body that starts with ``<`` (an HTML error page), an event whose ``data`` is not a JSON object, an
event larger than ``max_event_size`` (:class:`EventTooLarge`), a gzip-compressed capture, or no JSON event at all by
EOF. ``data: [DONE]`` (sent by some bridges) and events with empty data (keep-alives) are skipped. Everything else,
however broken, is a violation, never an exception.

Speed (DESIGN §6): the common event (next sequence number, nothing waiting, a text delta to the same part as the
previous one) takes an inlined path: one decode, two compares, two list appends.

Why one ~460-line class: the common event's path is inlined on purpose (DESIGN §6); a split adds a call per event.
"""

from __future__ import annotations

from typing import Final, Union

import msgspec

from respstream.errors import BadInputError, EventTooLarge
from respstream.protocol.assembler import AssembledResponse, Assembler
from respstream.protocol.events import EVENT_CLASSES, Event, EventDecodeError, OutputTextDelta, decode_event
from respstream.protocol.rules import RuleChecker, event_name_violation
from respstream.protocol.sequencer import DEFAULT_WINDOW, Sequencer, Violation
from respstream.protocol.spec_rules import SpecWireChecker
from respstream.protocol.sse import DEFAULT_MAX_EVENT_SIZE, SSEDecoder, SSEMessage
from respstream.protocol.text_runs import FIRST_WINDOW, decode_delta_probe, take_text_run

__all__ = ["DIALECTS", "MAX_VIOLATIONS", "StreamCore"]

DIALECTS: Final = ("platform", "openai", "openresponses")
MAX_VIOLATIONS: Final = 10_000  # beyond this we count them (``violations_dropped``) instead of keeping them
_COMPACT_EVERY: Final = 8192
_WHITESPACE: Final = b" \t\r\n\x0b\x0c"
_BOM: Final = b"\xef\xbb\xbf"
_GZIP: Final = b"\x1f\x8b"  # gzip's magic number: a compressed capture (the sniff says so instead of "no JSON")
# The strict tagged-union decoder (what decode_event tries first); anything it rejects takes decode_event's lenient
# path, which also produces the bad-input errors.
_decode_fast: Final = msgspec.json.Decoder(Union[EVENT_CLASSES]).decode  # type: ignore[valid-type]  # noqa: UP007
_TEXT_DELTA: Final = "response.output_text.delta"
_LF: Final = 10
_CR: Final = 13


class StreamCore:
    """The sans-IO protocol core for one response stream. See the module docstring.

    Options: ``starting_after`` (a resumed stream: numbering starts at N+1, no ``response.created`` is expected and
    nothing that depends on events at or before N is judged; ``-1`` is the whole stream), ``window`` (reorder
    window, default 64), ``max_event_size`` (default 16 MiB), ``dialect`` (``"platform"`` / ``"openai"``: also
    check the SSE ``event:`` names and the dialect's envelope; ``None``: neither).
    """

    def __init__(
        self,
        *,
        starting_after: int | None = None,
        window: int = DEFAULT_WINDOW,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        dialect: str | None = None,
    ) -> None:
        if dialect is not None and dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
        if starting_after is not None and starting_after < -1:
            raise ValueError(f"starting_after must be -1 or more, not {starting_after}")
        # -1 (or None) is the whole stream: response.created first, every rule judged.
        resumed = starting_after is not None and starting_after >= 0
        self.dialect = dialect
        # Open Responses' own wire rules and schemas (no `id:`, `[DONE]`, prefixed extensions): spec_rules.py.
        self._spec = SpecWireChecker() if dialect == "openresponses" else None
        self.decoder = SSEDecoder(max_event_size=max_event_size)
        self.sequencer = Sequencer(starting_after=starting_after, window=window)
        self.assembler = Assembler()
        self.rules = RuleChecker(
            self.assembler, expect_created=not resumed, dialect=dialect, keep=False
        )
        self.violations: list[Violation] = []
        self.violations_dropped = 0
        self.messages = 0  # SSE messages seen (the 1-based number of the last one)
        self.json_events = 0  # of which decoded into an event
        self._out: list[Event] = []
        self._bytes = 0
        self._sniffed = False
        self._sniff_buf = b""
        self._sniff_off = 0
        self._closed = False
        self._name_reported = False
        self._seq_seen = 0
        self._compacted_at = 0
        self._fast: tuple[str | None, int | None, int | None, list[str]] = (None, -1, -1, [])
        # The framing before the JSON of the last read take_text_delta took (b"data: " or b"event: T\ndata: "):
        # set only while nothing but such reads came since its full check, so the decoder is still idle.
        self._lane_head = b""
        self._run_window = FIRST_WINDOW  # take_text_run's bytes decoded together (protocol/text_runs.py)
        self._result: AssembledResponse | None = None
        self._result_at = -1

    # --- the API ------------------------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        """Parse ``chunk`` (any size, any split). Raises :class:`BadInputError` as described in the module doc."""
        if self._closed:
            raise ValueError("StreamCore.feed() called after close()")
        self._lane_head = b""  # the decoder may hold a partial block after this read: take_text_delta checks anew
        if self._sniffed:
            # A read that is one whole event (a live server's token): straight to processing, no buffering.
            one = self.decoder.take_block(chunk)
            if one is not None:
                self._bytes += len(chunk)
                if self._fast[1] == -1 or not self._next_text_delta(one.data):
                    self._process([one])
                return
        else:
            self._sniff(chunk)
        self._bytes += len(chunk)
        try:
            self.decoder.feed(chunk)
        except EventTooLarge as exc:
            # Events completed before the oversized one are still delivered before we give up.
            self._process(self.decoder.events())
            raise EventTooLarge(
                f"event {self.messages + 1} at byte {exc.byte_offset}: {exc}",
                event_number=self.messages + 1,
                byte_offset=exc.byte_offset,
            ) from None
        self._process(self.decoder.events())

    def events(self) -> list[Event]:
        """The events released since the last call, in sequence order."""
        out = self._out
        self._out = []
        return out

    def close(self) -> None:
        """EOF: release what the reorder window holds, report gaps and a missing terminal. Idempotent.

        Raises :class:`BadInputError` when the whole input held no JSON event at all (an empty body, a JSON error
        document instead of a stream, a page of text)."""
        if self._closed:
            return
        self._lane_head = b""
        self.decoder.close()
        self._process(self.decoder.events())
        self._closed = True
        if self.json_events == 0:
            raise BadInputError(
                f"event 1 at byte {self._bytes}: no Server-Sent Event with JSON data in the input "
                f"({self._bytes} bytes read); this is not a Responses event stream",
                event_number=1,
                byte_offset=self._bytes,
            )
        released = self.sequencer.close()
        self._take_sequencer_violations()
        for event in released:
            self._apply(event)
        self._report(self.rules.finish())
        if self._spec is not None:
            self._report(self._spec.finish(self.assembler.last_sequence_number))
        self.assembler.compact()

    def reconnect(self) -> None:
        """A new connection continues the same response (a resume with ``starting_after``): start a fresh SSE
        decoder (the old connection's unterminated block is dropped) and keep the sequencer, rules and assembly, so
        events replayed across the seam are dropped as duplicates and nothing is delivered twice."""
        if self._closed:
            raise ValueError("StreamCore.reconnect() called after close()")
        self._lane_head = b""
        self.decoder.close()
        self.decoder = SSEDecoder(max_event_size=self.decoder.max_event_size, last_event_id=self.decoder.last_event_id)
        self._sniffed = False
        self._sniff_buf = b""
        self._sniff_off = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def result(self) -> AssembledResponse:
        """The assembled response so far (final after ``close()``); cached until the next event."""
        stamp = self.assembler.events * 2 + self._closed
        if self._result is None or self._result_at != stamp:
            self._result = self.assembler.result(self.violations)
            self._result_at = stamp
        return self._result

    @property
    def status(self) -> str:
        """``completed | incomplete | failed | error | cancelled | truncated`` (truncated until a terminal)."""
        return self.assembler.status()

    @property
    def terminal(self) -> bool:
        """Whether a terminal event has been released."""
        return self.assembler.terminal is not None

    @property
    def last_sequence_number(self) -> int | None:
        return self.assembler.last_sequence_number

    # --- internals ----------------------------------------------------------------------------------------------

    def _sniff(self, chunk: bytes) -> None:
        # Decide on the first byte that is not a BOM or whitespace; chunks may split the BOM or hold only blanks.
        buf = self._sniff_buf + chunk
        offset = self._sniff_off
        if offset == 0:
            if _BOM.startswith(buf):
                self._sniff_buf = buf  # maybe a BOM split across chunks
                return
            if buf.startswith(_BOM):
                buf = buf[3:]
                offset = 3
        head = buf.lstrip(_WHITESPACE)
        offset += len(buf) - len(head)
        if not head or head == _GZIP[:1]:
            self._sniff_buf = head  # blanks only so far, or maybe gzip's magic split across chunks
            self._sniff_off = offset
            return
        self._sniffed = True
        self._sniff_buf = b""
        if head[:2] == _GZIP:
            raise BadInputError(
                f"event 1 at byte {offset}: the input is gzip-compressed, not a Server-Sent Event stream "
                "(decompress it first)",
                event_number=1,
                byte_offset=offset,
            )
        if head[:1] == b"<":
            raise BadInputError(
                f"event 1 at byte {offset}: the input is a markup (HTML/XML) document, not a Server-Sent Event "
                "stream",
                event_number=1,
                byte_offset=offset,
            )

    def _process(self, messages: list[SSEMessage]) -> None:
        if not messages:
            return
        sequencer = self.sequencer
        assembler = self.assembler
        check = self.rules.check
        feed = assembler.feed
        out = self._out
        streamed = assembler.streamed
        released: list[Event] = []
        dialect = self.dialect
        spec = self._spec
        decode = _decode_fast
        text_delta = OutputTextDelta
        # The inlined path for the common text delta: the same part as the last clean one, in order. It does
        # exactly what check() (its own cache hit: no violation) and Assembler.feed() would do, without the calls.
        f_id, f_oi, f_ci, f_chunks = self._fast
        number = self.messages
        for msg in messages:
            number += 1
            try:
                event = decode(msg.data)
            except msgspec.MsgspecError:
                event = self._decode_slow(msg, number)
                if event is None:
                    continue
            seq = event.sequence_number
            if dialect is not None and not self._name_reported:
                self._check_name(msg, event)
            if spec is not None:
                self._report(spec.message(data=msg.data, event_id=msg.id, event_type=event.type, seq=seq))
            if seq == sequencer.expected and not sequencer._pending:
                sequencer.expected = seq + 1
            elif (
                seq is not None
                or sequencer._pending
                or not sequencer._missing_reported
                or assembler.last_sequence_number is not None
            ):
                f_oi = -1
                sequencer.push_into(event, released)
                self._take_sequencer_violations()
                if released:
                    for event in released:
                        self._apply(event)
                    released.clear()
                continue
            # In order: the next number, or (a stream without numbers, `sequence.missing` already reported) next.
            if event.__class__ is text_delta:
                delta = event.delta  # type: ignore[attr-defined]
                if (
                    event.output_index == f_oi  # type: ignore[attr-defined]
                    and event.content_index == f_ci  # type: ignore[attr-defined]
                    and event.item_id == f_id  # type: ignore[attr-defined]
                    and delta is not None
                ):
                    f_chunks.append(delta)
                    streamed.append(delta)
                    assembler.events += 1
                    assembler.last_sequence_number = seq
                    out.append(event)
                    continue
                found = check(event)
                feed(event)
                out.append(event)
                if found:
                    self._report(found)
                    f_oi = -1
                elif delta is None or assembler.terminal is not None:
                    f_oi = -1
                elif (
                    event.output_index == assembler._c_oi  # type: ignore[attr-defined]
                    and event.content_index == assembler._c_ci  # type: ignore[attr-defined]
                ):
                    f_id, f_oi, f_ci = event.item_id, event.output_index, event.content_index  # type: ignore[attr-defined]
                    f_chunks = assembler._c_chunks
                elif event.output_index is None and event.content_index is None and event.item_id is not None:  # type: ignore[attr-defined]
                    f_id, f_oi, f_ci = event.item_id, None, None  # type: ignore[attr-defined]
                    f_chunks = assembler._n_chunks
                else:
                    f_oi = -1
                continue
            f_oi = -1
            found = check(event)
            if found:
                self._report(found)
            feed(event)
            out.append(event)
        self.messages = number
        self.json_events += len(messages)  # minus the [DONE]s, which _decode_slow subtracted
        self._fast = (f_id, f_oi, f_ci, f_chunks)
        if assembler.events - self._compacted_at > _COMPACT_EVERY:
            self._compacted_at = assembler.events
            assembler.compact()

    def take_text_delta(self, chunk: bytes) -> str | None:
        """For a reader that wants only the text (the gateway's native Responses upstream): a read that is exactly
        one event, the next text delta to the part of the previous clean one, as a live server writes each token, is
        consumed and its ``delta`` returned. Everything else returns ``None`` having changed nothing (``feed`` it).

        The state afterwards (sequencer, rules, assembly, counters) is exactly what ``feed`` would leave, except that
        the event is not queued for ``events()``: the caller has its delta, and building the typed event is most
        of what it would cost. Only the fields the lane compares are decoded (``type``, ``sequence_number``, the
        three locators, ``delta``), each with its declared type; any other field is what the rules never look at
        for such a delta."""
        f_id, f_oi, f_ci, f_chunks = self._fast
        if f_oi == -1:
            return None
        head = self._lane_head
        if (
            head
            and chunk.startswith(head)
            and chunk.find(b"\n", len(head)) == len(chunk) - 2
            and chunk[-1] == _LF
            and _CR not in chunk
            and len(chunk) <= self.decoder.max_event_size
        ):
            # The same framing as the previous read the lane took, and the decoder is still at a block boundary
            # with nothing pending (only the lane read since): what peek_data would find, for fewer checks.
            data = chunk[len(head) : -2]
        else:
            if (
                not self._sniffed
                or self._closed
                or self._spec is not None
                or (self.dialect is not None and not self._name_reported)
            ):
                return None
            found = self.decoder.peek_data(chunk)
            if found is None:
                return None
            data, head = found, chunk[: len(chunk) - len(found) - 2]
        try:
            probe = decode_delta_probe(data)
        except msgspec.MsgspecError:
            return None
        delta = probe.delta
        sequencer = self.sequencer
        if (
            probe.type != _TEXT_DELTA
            or delta is None
            or probe.output_index != f_oi
            or probe.content_index != f_ci
            or probe.item_id != f_id
            or sequencer._pending  # (the lane is closed whenever the window holds anything: belt and braces)
        ):
            return None
        seq = probe.sequence_number
        assembler = self.assembler
        if seq is None:
            # A stream without numbers, once `sequence.missing` was reported (as _process's in-order test).
            if not sequencer._missing_reported or assembler.last_sequence_number is not None:
                return None
        elif seq != sequencer.expected:
            return None
        else:
            sequencer.expected = seq + 1
        size = len(chunk)
        self.decoder.skip_block(size)
        self._lane_head = head
        self._bytes += size
        f_chunks.append(delta)
        assembler.streamed.append(delta)
        assembler.events += 1
        assembler.last_sequence_number = seq
        self.messages += 1
        self.json_events += 1
        if assembler.events - self._compacted_at > _COMPACT_EVERY:
            self._compacted_at = assembler.events
            assembler.compact()
        return delta

    def take_text_run(self, raw: bytes, at: int) -> tuple[list[str], int]:
        """:meth:`take_text_delta` for a read of many events: ``(texts, end)``, the lane's text deltas from ``at`` (an
        event boundary) taken up to ``end``, where the first event it refused starts (protocol/text_runs.py)."""
        return take_text_run(self, raw, at)

    def compact_now_and_then(self) -> None:
        """Join the assembled deltas every few thousand events (what ``_process`` does as it goes)."""
        if self.assembler.events - self._compacted_at > _COMPACT_EVERY:
            self._compacted_at = self.assembler.events
            self.assembler.compact()

    def _next_text_delta(self, data: bytes) -> bool:
        """The one-event read of the commonest kind: the next text delta to the part of the previous clean one.
        Does exactly what ``_process`` does for it (its inlined path) and returns True; anything else returns
        False having changed nothing (``_process`` then takes the message: one more decode, on a rare path)."""
        if (self.dialect is not None and not self._name_reported) or self._spec is not None:
            return False  # the SSE event name is still to be checked, or every event's schema is
        try:
            event = _decode_fast(data)
        except msgspec.MsgspecError:
            return False
        f_id, f_oi, f_ci, f_chunks = self._fast
        sequencer = self.sequencer
        seq = event.sequence_number
        if seq is None:
            # A stream without numbers, once `sequence.missing` was reported (as _process's in-order test).
            if not sequencer._missing_reported or self.assembler.last_sequence_number is not None:
                return False
        elif seq != sequencer.expected:
            return False
        if (
            event.__class__ is not OutputTextDelta
            or sequencer._pending
            or event.output_index != f_oi
            or event.content_index != f_ci
            or event.item_id != f_id
            or event.delta is None
        ):
            return False
        if seq is not None:
            sequencer.expected = seq + 1
        assembler = self.assembler
        f_chunks.append(event.delta)
        assembler.streamed.append(event.delta)
        assembler.events += 1
        assembler.last_sequence_number = seq
        self._out.append(event)
        self.messages += 1
        self.json_events += 1
        if assembler.events - self._compacted_at > _COMPACT_EVERY:
            self._compacted_at = assembler.events
            assembler.compact()
        return True

    def _decode_slow(self, msg: SSEMessage, number: int) -> Event | None:
        """The lenient decode (wrong-typed fields, unknown types) or bad input; None for ``[DONE]``."""
        try:
            return decode_event(msg.data)
        except (EventDecodeError, msgspec.MsgspecError) as exc:
            # (decode_event may let a raw msgspec error through for some non-object payloads.)
            if msg.data.strip() in (b"[DONE]", b""):
                if self._spec is not None and msg.data.strip() == b"[DONE]":
                    self._spec.done(self.assembler.last_sequence_number)
                # A bridge's end sentinel (DESIGN §2), or an event with empty data (a keep-alive some servers send
                # as `event: ping` + `data:`): it carries nothing, so it is not an event.
                self.json_events -= 1
                return None
            detail = str(exc) if isinstance(exc, EventDecodeError) else f"event data is not valid JSON: {exc}"
            raise BadInputError(
                f"event {number} at byte {msg.offset}: {detail}",
                event_number=number,
                byte_offset=msg.offset,
            ) from None

    def _check_name(self, msg: SSEMessage, event: Event) -> None:
        unnamed = msg.event == "message" and not self.decoder.saw_event_field
        name_violation = event_name_violation(msg.event, event, self.dialect, unnamed=unnamed)
        if name_violation is not None:
            self._name_reported = True
            self._report((name_violation,))

    def _apply(self, event: Event) -> None:
        self._fast = (None, -1, -1, [])
        found = self.rules.check(event)
        if found:
            self._report(found)
        self.assembler.feed(event)
        self._out.append(event)

    def _take_sequencer_violations(self) -> None:
        found = self.sequencer.violations
        if len(found) != self._seq_seen:
            self._report(found[self._seq_seen :])
            # Memory stays O(window): the sequencer's copies are no longer needed once reported here.
            found.clear()
            self._seq_seen = 0

    def _report(self, found: tuple[Violation, ...] | list[Violation]) -> None:
        room = MAX_VIOLATIONS - len(self.violations)
        if room >= len(found):
            self.violations.extend(found)
        else:
            self.violations.extend(found[: max(room, 0)])
            self.violations_dropped += len(found) - max(room, 0)
