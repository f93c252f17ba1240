"""Incremental WHATWG ``text/event-stream`` decoder (bytes in, :class:`SSEMessage` out) and encoder.

How this works. Bytes go through two interchangeable parsers that give identical results:

* The **exact path** (``_slow``) is the WHATWG line-by-line algorithm (HTML §9.2.6): lines end with CRLF, LF or a
  lone CR (a CR at the very end of a chunk ends its line at once, and a LF opening the next chunk is then skipped);
  ``field:value`` with one optional space removed; comments; ``data`` lines joined with LF; ``id`` with a NUL
  ignored; digits-only ``retry``; a blank line commits the id and dispatches only when data was seen.
* The **fast path** (``_fast``) takes any buffer whose line ends are all LF (or all CRLF): one ``bytes.split`` on
  the blank-line separator cuts every complete block out in C, and the two shapes servers send (``data: X`` and
  ``event: T`` + ``data: X``) are recognised with a few C calls each, the ``data`` slice handed through as is. Any
  other block (several ``data`` lines, ``id``, ``retry``, comments, unknown fields) is parsed by the exact field
  parser one block at a time, so both paths share the field rules. Buffers with a lone CR, or a mix of endings, go
  to the exact path. Tests prove the two paths equal on the spec vectors and on random streams at every split.

Linear time. Only bytes that cannot be parsed yet are kept: a partial block of at most ``_RAW_TAIL_MAX`` bytes at a
block start (re-joined with the next chunk, a bounded cost), or else only the current unfinished line, whose later
chunks are stashed in a list (no line end in them, so nothing to search) and joined once when a line end arrives.
The fast path splits at most ``_WINDOW`` bytes at a time: CPython searches a two-byte separator ~30x slower per byte
than ``memchr``, so a block bigger than a window is left to the exact path, which finds line ends with ``memchr``.

Nothing here decodes ``data``: it stays raw UTF-8 bytes (``SSEMessage.text`` decodes with replacement). Event
names and ids are decoded with replacement, which equals decoding the whole stream first because every byte the
syntax cares about (CR, LF, ``:``, space) is ASCII and cannot sit inside a multi-byte sequence.

Why one ~440-line class: both paths share its buffers (tested equal); split, each chunk would pay a call.
"""

from __future__ import annotations

import re
from typing import Final, NoReturn

import msgspec

from respstream.errors import BadInputError, EventTooLarge

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "RETRY_MAX",
    "SSEDecodeError",
    "SSEDecoder",
    "SSEEventTooLarge",
    "SSEMessage",
    "encode_comment",
    "encode_message",
]

DEFAULT_MAX_EVENT_SIZE: Final = 16 << 20
#: ``retry`` values above this (any number of digits is legal) are clamped instead of parsed.
RETRY_MAX: Final = 2**63 - 1

_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"\r\n?|\n")
# A partial block up to this size is kept raw and re-joined with the next chunk, so the fast path can see whole
# blocks; anything bigger is parsed line by line at once so no byte is copied more than a bounded number of times.
_RAW_TAIL_MAX: Final = 16 * 1024
# The fast path splits at most this many bytes at a time; a block that does not fit goes to the exact path.
_WINDOW: Final = 64 * 1024
_NAME_CACHE_MAX: Final = 512
# Bytes as ints: `_LF in data` is a memchr (see _fast).
_LF: Final = 10
_LF_DATA: Final = b"\ndata: "
_CRLF_DATA: Final = b"\r\ndata: "
_CR: Final = 13


class SSEMessage(msgspec.Struct, frozen=True, gc=False):
    """One dispatched event.

    A frozen msgspec Struct rather than a dataclass: it is built once per event on the hot path and costs ~80 ns
    to construct against ~1.2 µs for a frozen dataclass. Same fields, keyword construction, equality and hashing.
    """

    event: str
    """The event type: ``"message"`` when the block had no (or an empty) ``event`` field."""
    data: bytes
    """The ``data`` lines joined by ``b"\\n"``, raw UTF-8 bytes as received."""
    id: str
    """The last event id in force after this block (ids persist across blocks)."""
    offset: int
    """Byte offset in the whole stream (a leading BOM counted) where this block's first line starts."""

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8; invalid bytes become U+FFFD (never an error)."""
        return self.data.decode("utf-8", "replace")


class SSEDecodeError(BadInputError):
    """Base of the errors the SSE decoder raises (its only one today is :class:`SSEEventTooLarge`)."""

    code = "input.sse"


class SSEEventTooLarge(EventTooLarge, SSEDecodeError):
    """One block's pending bytes exceeded ``max_event_size``. ``byte_offset`` is where that block starts."""

    code = EventTooLarge.code  # the size error's stable code wins over the generic SSE one


def _parse_retry(value: bytes) -> int:
    # int() refuses strings past 4300 digits, and such a delay is meaningless anyway: clamp.
    digits = value.lstrip(b"0")
    if len(digits) > 19:
        return RETRY_MAX
    return min(int(digits or b"0"), RETRY_MAX)


class SSEDecoder:
    """Incremental, sans-IO WHATWG event-stream decoder.

    ``feed()`` bytes as they arrive, collect finished messages with ``events()``, and call ``close()`` at EOF (an
    unterminated final block is discarded, and its ``id`` is not committed). For a reconnection, start a new
    decoder with ``last_event_id=old.last_event_id``.

    Attributes: ``last_event_id`` (the id committed by the last blank line), ``retry`` (milliseconds from the last
    valid ``retry`` field, else ``None``), ``bytes_seen`` (total bytes fed), ``max_event_size``.
    """

    # Tests turn this off to prove the fast path and the exact path agree.
    _use_fast: bool = True

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE, last_event_id: str = "") -> None:
        if max_event_size <= 0:
            raise ValueError("max_event_size must be positive")
        self.max_event_size = max_event_size
        self.last_event_id = last_event_id
        # Whether any block so far had an `event` field: "message" from a stream without one is not a name the
        # server chose (checkers say "no event: line" rather than "event name 'message'").
        self.saw_event_field = False
        self.bytes_seen = 0
        self._retry: int | None = None
        self._events: list[SSEMessage] = []
        # Unparsed bytes: at a block start (``_block_start < 0``) a raw partial block, else the unfinished line.
        self._buf = b""
        self._buf_off = 0  # stream offset of _buf[0]
        self._parts: list[bytes] = []  # chunks after _buf with no CR/LF in them, joined when a line ends
        self._bom_done = False
        self._cr = False  # the last byte parsed was a CR ending a line: skip a LF that opens the next chunk
        self._closed = False
        self._error: EventTooLarge | None = None
        # The block being parsed by the exact path.
        self._block_start = -1  # stream offset of its first line; -1 at a block boundary
        self._data: list[bytes] = []
        self._event = b""
        self._id_buf = last_event_id  # WHATWG "last event ID buffer"; committed at each blank line
        self._names: dict[bytes, str] = {b"": "message"}  # event field value -> name
        self._heads: dict[bytes, str] = {}  # whole "event: x" line -> name (fast path)

    # -- public API ---------------------------------------------------------------------------------------------

    @property
    def retry(self) -> int | None:
        """The reconnection time (ms) set by the last valid ``retry`` field, or ``None``."""
        if self._block_start < 0 and self._buf.find(b"retry") >= 0:
            # The fast path leaves a partial block unparsed; a complete retry line in it already counts.
            self._flush()
        return self._retry

    def feed(self, chunk: bytes) -> None:
        """Parse ``chunk``; never blocks.

        Raises :class:`SSEEventTooLarge` (an ``EventTooLarge``) with ``byte_offset`` when one block's pending bytes
        exceed ``max_event_size``; the decoder then stays failed (messages completed before it remain available
        from ``events()``). Raises ``ValueError`` when called after ``close()``.
        """
        if self._closed:
            raise ValueError("SSEDecoder.feed() called after close()")
        if self._error is not None:
            raise self._error
        if not chunk:
            return
        one = self.take_block(chunk)
        if one is not None:
            self._events.append(one)
            return
        self.bytes_seen += len(chunk)
        buf = self._buf
        if not self._bom_done:
            head = buf + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._buf = head  # maybe a BOM split across chunks: wait for its third byte
                return
            self._bom_done = True
            skip = 3 if head.startswith(_BOM) else 0
            self._buf = b""
            self._buf_off = skip
            self._parse(head[skip:] if skip else head, skip)
            return
        if (
            not buf
            and self._block_start < 0
            and chunk.endswith(b"\n\n")
            and _CR not in chunk
            and len(chunk) <= _WINDOW
            and self._use_fast
            and not self._cr
        ):
            # The commonest read of all: whole LF-framed events and nothing pending. Skip the general driver.
            blocks = chunk.split(b"\n\n")
            blocks.pop()  # "" or, after a third LF, "\n": a blank line at a block boundary, which does nothing
            self._blocks(blocks, self._buf_off, b"\n")
            self._buf_off += len(chunk)
            return
        if buf:
            if _LF not in chunk and _CR not in chunk:
                # No line ends here: nothing new to parse. Stash it instead of re-copying a long pending line.
                self._parts.append(chunk)
                start = self._block_start if self._block_start >= 0 else self._buf_off
                if self.bytes_seen - start > self.max_event_size:
                    self._fail(start)
                return
            self._buf = b""
            if self._parts:
                data = b"".join((buf, *self._parts, chunk))
                self._parts = []
            else:
                data = buf + chunk
        else:
            data = chunk
        self._parse(data, self._buf_off)

    def _lone_block(self, chunk: bytes) -> bool:
        """Whether ``chunk`` may be read on its own as one whole block: LF framing, nothing pending, past the BOM
        check, no error or ``close()``, within the event size limit."""
        return (
            chunk.endswith(b"\n\n")
            and self._bom_done
            and self._error is None
            and not self._closed
            and self._block_start < 0
            and self._use_fast
            and not self._cr
            and not self._buf
            and _CR not in chunk
            and len(chunk) <= self.max_event_size
        )

    def take_block(self, chunk: bytes) -> SSEMessage | None:
        """The message of a read that is exactly one whole block, as a live server writes each token
        (``event: T`` + ``data: X``, or ``data: X``; LF framing), consumed; else ``None`` and nothing changes.

        ``feed`` tries it first; a caller that reads one event per read (``StreamCore.feed``) may call it instead of
        ``feed`` to skip the general paths. Nothing is taken while anything is pending, before the BOM check, or
        after ``close()`` or an error, so the result is exactly what ``feed`` + ``events()`` would give."""
        if self._lone_block(chunk):
            if chunk.startswith(b"event:"):
                nl = chunk.find(b"\n")
                if chunk.startswith(b"data: ", nl + 1) and chunk.find(b"\n", nl + 7) == len(chunk) - 2:
                    head = chunk[:nl]
                    msg = SSEMessage(self._heads.get(head) or self._head(head), chunk[nl + 7 : -2],
                                     self.last_event_id, self._buf_off)
                    self._buf_off += len(chunk)
                    self.bytes_seen += len(chunk)
                    return msg
            elif chunk.startswith(b"data: ") and chunk.find(b"\n") == len(chunk) - 2:
                msg = SSEMessage("message", chunk[6:-2], self.last_event_id, self._buf_off)
                self._buf_off += len(chunk)
                self.bytes_seen += len(chunk)
                return msg
        return None

    def peek_data(self, chunk: bytes) -> bytes | None:
        """The ``data`` of a read that :meth:`take_block` would take (one whole simple block), when its ``event:``
        line, if any, was seen before; else ``None``. Nothing is consumed: a caller that judges the payload first
        then calls :meth:`skip_block` (the message is not produced) or hands the read to ``feed``."""
        if self._lone_block(chunk):
            if chunk.startswith(b"data: "):
                if chunk.find(b"\n") == len(chunk) - 2:
                    return chunk[6:-2]
            elif chunk.startswith(b"event:"):
                nl = chunk.find(b"\n")
                if (
                    chunk.startswith(b"data: ", nl + 1)
                    and chunk.find(b"\n", nl + 7) == len(chunk) - 2
                    and chunk[:nl] in self._heads  # (a first sighting goes through take_block: it records the name)
                ):
                    return chunk[nl + 7 : -2]
        return None

    def skip_block(self, size: int) -> None:
        """Consume the read of ``size`` bytes whose data :meth:`peek_data` just returned, without its message."""
        self._buf_off += size
        self.bytes_seen += size

    def events(self) -> list[SSEMessage]:
        """Return the messages completed so far, in stream order, and forget them."""
        out = self._events
        self._events = []
        return out

    def close(self) -> None:
        """Signal EOF. The unterminated block is discarded (its ``id`` is not committed; a complete ``retry`` line
        in it still counts). ``events()`` still returns what completed before. Idempotent."""
        if self._closed:
            return
        if self._error is None and self._block_start < 0 and self._buf:
            self._flush()
        self._closed = True
        self._buf = b""  # drop the unterminated block (feed() refuses more bytes, so no other state matters)
        self._parts = []
        self._data = []

    # -- driver -------------------------------------------------------------------------------------------------

    def _parse(self, data: bytes, base: int) -> None:
        """Parse ``data`` (which starts at a line start, at stream offset ``base``) and keep what stays partial."""
        pos = 0
        n = len(data)
        if self._cr:
            self._cr = False
            if data[0] == _LF:
                pos = 1  # the LF of a CRLF split across chunks: the line already ended
        if not self._use_fast:
            sep = None
        elif _CR not in data:
            sep = b"\n"
        else:
            sep = self._crlf_only(data, pos)
        more = pos < n
        if more and sep is not None and self._block_start >= 0:
            # Finish the block the exact path is in the middle of, then go fast from the next block.
            pos, more = self._slow(data, pos, base, True)
        if more:
            if sep is None:
                pos, _ = self._slow(data, pos, base, False)
            else:
                pos = self._fast(data, pos, base, sep)
                if n - pos > _RAW_TAIL_MAX:
                    pos, _ = self._slow(data, pos, base, False)
        self._buf = data[pos:]
        self._buf_off = base + pos
        start = self._block_start if self._block_start >= 0 else base + pos
        if base + n - start > self.max_event_size:
            self._fail(start)

    @staticmethod
    def _crlf_only(data: bytes, pos: int) -> bytes | None:
        """``b"\\r\\n"`` when every line end in ``data[pos:]`` is a CRLF (fast path), else ``None`` (exact path)."""
        crlf = data.count(b"\r\n", pos)
        if crlf == data.count(b"\r", pos) and crlf == data.count(b"\n", pos):
            return b"\r\n"
        return None

    def _flush(self) -> None:
        """Parse the complete lines of a raw partial block now (no blank line is in it, so nothing dispatches)."""
        data = b"".join((self._buf, *self._parts)) if self._parts else self._buf
        self._parts = []
        base = self._buf_off
        pos, _ = self._slow(data, 0, base, False)
        self._buf = data[pos:]
        self._buf_off = base + pos

    def _fail(self, start: int) -> NoReturn:
        self._error = SSEEventTooLarge(
            f"SSE event starting at byte {start} is larger than max_event_size ({self.max_event_size} bytes)",
            byte_offset=start,
        )
        raise self._error

    def _name(self, raw: bytes) -> str:
        name = raw.decode("utf-8", "replace")
        if len(self._names) < _NAME_CACHE_MAX:
            self._names[raw] = name
        return name

    # -- fast path ----------------------------------------------------------------------------------------------

    def _fast(self, data: bytes, pos: int, base: int, sep: bytes) -> int:
        """Parse the complete blocks of ``data[pos:]``, whose lines all end with ``sep`` (LF, or CRLF).

        ``split`` cuts the blocks of a window out in C (windows keep a block too big for one away from the
        two-byte search, which is slow per byte; the exact path finds its lines with memchr instead). The two shapes
        servers send (``data: X`` and ``event: T`` + ``data: X``) are recognised with a few C calls each; any other
        block goes through the exact field parser (``_line``), a block at a time. Returns the offset in ``data``
        where parsing stopped: the start of a partial block (or, after a huge block, of an unfinished line).
        """
        n = len(data)
        k = len(sep)
        while True:
            stop = pos + _WINDOW
            region = data[pos:stop] if stop < n else data[pos:] if pos else data
            blocks = region.split(sep + sep)
            tail = blocks.pop()
            if blocks:
                self._blocks(blocks, base + pos, sep)
            pos += len(region) - len(tail)
            if tail.startswith(sep):
                pos += k  # a blank line at a block boundary: nothing to do
            if stop >= n:
                return pos
            if not blocks:
                # The block at pos is longer than a window: the exact path parses it.
                pos, dispatched = self._slow(data, pos, base, True)
                if not dispatched:
                    return pos

    def _blocks(self, blocks: list[bytes], at: int, sep: bytes) -> None:
        """Dispatch complete blocks (``at``: stream offset of the first one, each followed by two ``sep``)."""
        k = len(sep)
        kk = k + k
        emit = self._events.append
        heads = self._heads
        limit = self.max_event_size - k  # a block's size counts its last line's terminator
        marker = _LF_DATA if k == 1 else _CRLF_DATA
        # Whether a piece holds a line end, as an int: `int in bytes` is a memchr, while `bytes in bytes` first
        # tries int(needle) and swallows a TypeError (20x slower). In CRLF mode every CR starts a CRLF.
        end = sep[0]
        last_id = self.last_event_id
        for block in blocks:
            size = len(block)
            if size <= limit:
                if block.startswith(b"data: "):
                    if end not in block:
                        emit(SSEMessage("message", block[6:], last_id, at))
                        at += size + kk
                        continue
                else:
                    head, found, payload = block.partition(marker)
                    if found and end not in payload:
                        name = heads.get(head)
                        if name is None:
                            if head.startswith(b"id: "):
                                # Our own gateway's framing: "id: N" [+ "event: T"] + "data: X".
                                line, _, rest = head.partition(sep)
                                if 0 not in line and end not in rest:
                                    name = heads.get(rest) if rest else "message"
                                    if name is None and rest.startswith(b"event:"):
                                        name = self._head(rest)
                                    if name is not None:
                                        last_id = line[4:].decode("utf-8", "replace")
                            elif head.startswith(b"event:") and end not in head:
                                name = self._head(head)
                        if name is not None:
                            emit(SSEMessage(name, payload, last_id, at))
                            at += size + kk
                            continue
            if block:
                self.last_event_id = self._id_buf = last_id
                self._block(block, at, sep)
                last_id = self.last_event_id
            at += size + kk
        self.last_event_id = self._id_buf = last_id

    def _head(self, line: bytes) -> str:
        """The event name of a lone ``event:`` line, cached by the whole line."""
        self.saw_event_field = True
        raw = line[7:] if line.startswith(b" ", 6) else line[6:]
        name = self._names.get(raw) or self._name(raw)
        if len(self._heads) < _NAME_CACHE_MAX:
            self._heads[line] = name
        return name

    def _block(self, block: bytes, at: int, sep: bytes) -> None:
        """Exact parsing of one complete block found by the fast path (lines end with ``sep``, no blank line)."""
        lines = block.split(sep)
        start = at
        if not lines[0]:
            # A third line end in a row: a blank line (a no-op dispatch) opens this block.
            del lines[0]
            start += len(sep)
        self._block_start = start
        for line in lines:
            self._line(line)
        self._dispatch(at + len(block) + len(sep))

    # -- exact path ---------------------------------------------------------------------------------------------

    def _slow(self, data: bytes, pos: int, base: int, stop_after_block: bool) -> tuple[int, bool]:
        """WHATWG line-by-line parsing from ``pos`` (a line start).

        Returns ``(pos, dispatched)``: after the first blank line when ``stop_after_block`` (``dispatched`` True),
        otherwise at the start of the unfinished line (``dispatched`` False).
        """
        n = len(data)
        find = data.find
        # Next LF and next CR at or after pos (n when there is none). Each is searched again only once pos has
        # passed it, so both kinds are scanned once over the buffer: linear even when one kind is rare.
        lf = find(b"\n", pos)
        cr = find(b"\r", pos)
        lf = n if lf < 0 else lf
        cr = n if cr < 0 else cr
        while True:
            if lf < pos:
                lf = find(b"\n", pos)
                lf = n if lf < 0 else lf
            if cr < pos:
                cr = find(b"\r", pos)
                cr = n if cr < 0 else cr
            if lf < cr:
                line_end = lf
                nxt = lf + 1
            elif cr < n:
                line_end = cr
                nxt = cr + 1
                if nxt == n:
                    self._cr = True  # a CR ends its line at once; a LF opening the next chunk is its other half
                elif data[nxt] == _LF:
                    nxt += 1
            else:
                return pos, False
            if line_end == pos:
                self._dispatch(base + pos)
                pos = nxt
                if stop_after_block:
                    return pos, True
                continue
            if self._block_start < 0:
                self._block_start = base + pos
            self._line(data[pos:line_end])
            pos = nxt

    def _line(self, line: bytes) -> None:
        if line[0] == 0x3A:  # ":" comment
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field = line[:colon]
            value = line[colon + 2 :] if line.startswith(b" ", colon + 1) else line[colon + 1 :]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value
            self.saw_event_field = True
        elif field == b"id":
            if 0 not in value:
                self._id_buf = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():  # bytes.isdigit(): ASCII 0-9 only, and not empty
            self._retry = _parse_retry(value)

    def _dispatch(self, at: int) -> None:
        """A blank line at stream offset ``at``: commit the id, fire an event if data was seen, reset buffers."""
        start = self._block_start
        if start < 0:
            self.last_event_id = self._id_buf
            return
        if at - start > self.max_event_size:
            self._fail(start)
        self.last_event_id = self._id_buf
        if self._data:
            name = self._names.get(self._event) or self._name(self._event)
            self._events.append(SSEMessage(name, b"\n".join(self._data), self.last_event_id, start))
            self._data = []
        self._event = b""
        self._block_start = -1


# -- encoder ------------------------------------------------------------------------------------------------------


def _field_value(name: str, value: str) -> bytes:
    if "\r" in value or "\n" in value:
        raise ValueError(f"SSE {name} must not contain CR or LF: {value!r}")
    return value.encode("utf-8")


def encode_message(
    data: str | bytes,
    *,
    event: str | None = None,
    id: str | int | None = None,
    retry: int | None = None,
) -> bytes:
    """Encode one event block: ``event: x\\nid: N\\nretry: R\\ndata: ...\\n\\n`` (absent fields left out).

    ``data`` may hold several lines (split on CRLF, LF or CR; each becomes a ``data:`` line, so a decoder joins them
    back with LF). Raises ``ValueError`` for CR/LF in ``event`` or ``id``, a NUL in ``id`` (a decoder would ignore
    it), or a negative ``retry``.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    head = b""
    if event is not None:
        head = b"event: " + _field_value("event", event) + b"\n"
    if id is not None:
        text = str(id)
        if "\0" in text:
            raise ValueError(f"SSE id must not contain NUL: {text!r}")
        head += b"id: " + _field_value("id", text) + b"\n"
    if retry is not None:
        if isinstance(retry, bool) or retry < 0:
            raise ValueError(f"SSE retry must be a non-negative int: {retry!r}")
        head += b"retry: %d\n" % retry
    if b"\n" not in raw and b"\r" not in raw:
        return head + b"data: " + raw + b"\n\n"
    body = b"".join(b"data: " + line + b"\n" if line else b"data:\n" for line in _LINE_END.split(raw))
    return head + body + b"\n"


def encode_comment(text: str = "") -> bytes:
    """Encode a comment block (``": keep-alive\\n\\n"``); decoders ignore it. Multi-line text gives one ``:`` line
    per line."""
    lines = _LINE_END.split(text.encode("utf-8"))
    return b"".join(b": " + line + b"\n" if line else b":\n" for line in lines) + b"\n"
