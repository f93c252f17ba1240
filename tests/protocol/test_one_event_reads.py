"""One event per read (how a live server writes tokens, and how the gateway reads a native Responses upstream): the
one-block fast paths (``SSEDecoder.take_block``, ``StreamCore``'s next-text-delta lane, ``take_text_delta``) give
exactly what a whole read gives, for every transcript, with and without a dialect."""

from __future__ import annotations

from pathlib import Path

import pytest

from respstream.errors import BadInputError
from respstream.protocol.events import OutputTextDelta
from respstream.protocol.sse import SSEDecoder, SSEMessage
from respstream.protocol.stream import StreamCore

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"
NAMES = sorted(p.stem for p in TRANSCRIPTS.glob("*.sse"))


def blocks(data: bytes) -> list[bytes]:
    """The transcript cut after every blank line (CRLF files stay as they are: the lane must refuse them)."""
    out, start = [], 0
    while True:
        end = data.find(b"\n\n", start)
        if end < 0:
            break
        out.append(data[start : end + 2])
        start = end + 2
    if start < len(data):
        out.append(data[start:])
    return out


def read(chunks: list[bytes], dialect: str | None) -> tuple[object, ...]:
    core = StreamCore(dialect=dialect)
    events = []
    try:
        for chunk in chunks:
            core.feed(chunk)
            events += core.events()
        core.close()
    except BadInputError as exc:
        return ("bad", str(exc))
    events += core.events()
    return (events, [v.to_json() for v in core.violations], core.result.to_json(), core.messages)


def read_text_first(chunks: list[bytes], dialect: str | None) -> tuple[object, ...]:
    """As the gateway's native upstream reads: ``take_text_delta`` first, ``feed`` when it declines. Text deltas
    (taken or fed) are listed as their text, so the result compares with :func:`texts_as_strings` of ``read``."""
    core = StreamCore(dialect=dialect)
    events: list[object] = []
    try:
        for chunk in chunks:
            delta = core.take_text_delta(chunk)
            if delta is not None:
                events.append(delta)
                continue
            core.feed(chunk)
            events += core.events()
        core.close()
    except BadInputError as exc:
        return ("bad", str(exc))
    events += core.events()
    return (texts_as_strings(events), [v.to_json() for v in core.violations], core.result.to_json(), core.messages,
            core.json_events, core.last_sequence_number)


def texts_as_strings(events: list[object]) -> list[object]:
    return [e.delta if isinstance(e, OutputTextDelta) else e for e in events]


def read_whole(data: bytes, dialect: str | None) -> tuple[object, ...]:
    got = read([data], dialect)
    if got[0] == "bad":
        return got
    core = StreamCore(dialect=dialect)
    core.feed(data)
    core.close()
    return (texts_as_strings(got[0]), *got[1:], core.json_events, core.last_sequence_number)  # type: ignore[arg-type]


DIALECTS = [None, "openai", "platform", "openresponses"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", NAMES)
def test_one_event_per_read_equals_one_read(name: str, dialect: str | None) -> None:
    data = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    assert read(blocks(data), dialect) == read([data], dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", NAMES)
def test_taking_text_deltas_first_equals_one_read(name: str, dialect: str | None) -> None:
    data = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    assert read_text_first(blocks(data), dialect) == read_whole(data, dialect)


def test_take_text_delta_takes_only_the_next_clean_delta() -> None:
    core = StreamCore()
    head = [b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n',
            b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
            b'"item":{"id":"m","type":"message","content":[]}}\n\n']

    def delta(seq: int, text: str, *, extra: str = "", item: str = "m", ci: int = 0) -> bytes:
        return (b'data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"%s","output_index":0,'
                b'"content_index":%d,"delta":"%s"%s}\n\n' % (seq, item.encode(), ci, text.encode(), extra.encode()))

    assert core.take_text_delta(head[0]) is None  # nothing read yet: the stream must be sniffed first
    for chunk in head:
        core.feed(chunk)
    assert core.take_text_delta(delta(2, "a")) is None  # no clean delta to this part yet: the lane is closed
    core.feed(delta(2, "a"))
    assert [e.type for e in core.events()] == ["response.created", "response.output_item.added",
                                               "response.output_text.delta"]
    assert core.take_text_delta(delta(3, "b", extra=',"logprobs":[],"obfuscation":"x"')) == "b"
    declined = [delta(5, "late"), delta(4, "c", item="other"), delta(4, "c", ci=1), delta(4, "c", extra=',"delta":1'),
                delta(4, "c")[:-1], b'data: {"type":"response.output_text.done","sequence_number":4}\n\n',
                b"data: " + delta(4, "c")[6:-2] + b"\r\n\r\n", b": comment\n" + delta(4, "c")]
    for chunk in declined:
        assert core.take_text_delta(chunk) is None, chunk
    assert core.take_text_delta(delta(4, "\\u00e9")) == "\u00e9"  # JSON escapes decoded as by the full decoder
    assert core.events() == [] and core.messages == 5 and core.last_sequence_number == 4
    core.feed(b"data: half")  # something pending: the lane waits until feed() completes it
    assert core.take_text_delta(delta(5, "d")) is None
    core.close()
    assert core.take_text_delta(delta(5, "d")) is None
    assert core.result.streamed_text == "ab\u00e9"


def test_take_block_takes_only_the_simple_shapes() -> None:
    dec = SSEDecoder()
    dec.feed(b"data: {}\n\n")  # the first read goes through the BOM check
    assert dec.events() == [SSEMessage("message", b"{}", "", 0)]
    assert dec.take_block(b"event: x\ndata: 1\n\n") == SSEMessage("x", b"1", "", 10)
    assert dec.take_block(b"data: 2\n\n") == SSEMessage("message", b"2", "", 28)
    assert dec.bytes_seen == 37
    for other in (b"data: 1\r\n\r\n", b"data: 1\ndata: 2\n\n", b"event: x\ndata: 1\ndata: 2\n\n", b"id: 3\ndata: 1\n\n",
                  b": comment\n\n", b"data: 1\n", b"event: x\nid: 1\n\n"):
        assert dec.take_block(other) is None, other
    assert dec.bytes_seen == 37
    dec.feed(b"data: half")  # something pending: nothing is taken until it is complete
    assert dec.take_block(b"data: 3\n\n") is None
    dec.close()
    assert dec.take_block(b"data: 4\n\n") is None


def test_the_lane_hands_over_to_the_full_path() -> None:
    # A text delta with the wrong sequence number, an undecodable one, and a delta to another part: each leaves the
    # lane for the full path, which reports what is wrong.
    head = [
        b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n',
        b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
        b'"item":{"id":"m","type":"message","content":[]}}\n\n',
        b'data: {"type":"response.output_text.delta","sequence_number":2,"item_id":"m","output_index":0,'
        b'"content_index":0,"delta":"a"}\n\n',
        b'data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"m","output_index":0,'
        b'"content_index":0,"delta":"b"}\n\n',
    ]
    tail = [
        b'data: {"type":"response.output_text.delta","sequence_number":9,"item_id":"m","output_index":0,'
        b'"content_index":0,"delta":"late"}\n\n',
        b'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"m","output_index":0,'
        b'"content_index":"0","delta":"c"}\n\n',
        b'data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"m","output_index":0,'
        b'"content_index":1,"delta":"d"}\n\n',
        b'data: {"type":"response.completed","sequence_number":6,"response":{"id":"r","status":"completed"}}\n\n',
    ]
    chunks = head + tail
    assert read(chunks, None) == read([b"".join(chunks)], None)


def _long_answer(event_lines: bool) -> list[bytes]:
    """9,000 one-token deltas, one per read, between a created/item head and an incomplete terminal."""
    line = b"event: response.output_text.delta\n" if event_lines else b""
    chunks = [
        b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n',
        b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
        b'"item":{"id":"m","type":"message","content":[]}}\n\n',
    ]
    chunks += [line + b'data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"m",'
               b'"output_index":0,"content_index":0,"delta":"t%d "}\n\n' % (n + 2, n) for n in range(9000)]
    chunks.append(b'data: {"type":"response.incomplete","sequence_number":9002,"response":{"id":"r"}}\n\n')
    return chunks


def test_a_long_answer_one_token_per_read_is_compacted_and_equal() -> None:
    chunks = _long_answer(event_lines=False)
    one_by_one, whole = read(chunks, None), read([b"".join(chunks)], None)
    assert one_by_one == whole
    assert whole[2]["output_text"].startswith("t0 t1 ")  # type: ignore[index]


def test_deltas_the_inlined_path_cannot_take_are_equal_too() -> None:
    # Deltas without `delta` (twice: the second is clean), and deltas with an output_index but no content_index
    # (twice), in a stream without sequence numbers: every branch that leaves the inlined path.
    head = [
        b'data: {"type":"response.created","response":{"id":"r"}}\n\n',
        b'data: {"type":"response.output_item.added","output_index":0,'
        b'"item":{"id":"m","type":"message","content":[]}}\n\n',
    ]
    odd = [
        b'data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"delta":"a"}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","output_index":0,"delta":"b"}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"c"}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"d"}\n\n',
        b'data: {"type":"response.output_text.delta","item_id":"m","delta":"e"}\n\n',
    ]
    chunks = [*head, *odd, b'data: {"type":"response.completed","response":{"id":"r","status":"completed"}}\n\n']
    one_by_one, whole = read(chunks, None), read([b"".join(chunks)], None)
    assert one_by_one == whole
    assert whole[2]["output_text"] == "abcde"  # type: ignore[index]


def test_take_text_delta_declines_while_the_sequencer_waits_or_numbers_are_mixed() -> None:
    def delta(seq: int | None, text: str) -> bytes:
        number = b"" if seq is None else b'"sequence_number":%d,' % seq
        return (b'data: {"type":"response.output_text.delta",%s"item_id":"m","output_index":0,"content_index":0,'
                b'"delta":"%s"}\n\n' % (number, text.encode()))

    head = [b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n',
            b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
            b'"item":{"id":"m","type":"message","content":[]}}\n\n', delta(2, "a")]
    early = delta(4, "c")  # waits in the reorder window for 3
    chunks = [*head, early, delta(3, "b"), delta(None, "x"), delta(5, "d"),
              b'data: {"type":"response.completed","sequence_number":6,"response":{"id":"r"}}\n\n']
    core = StreamCore()
    for chunk in head:
        core.feed(chunk)
    assert core.take_text_delta(delta(None, "x")) is None  # unnumbered after numbered events: the full path judges
    core.feed(early)
    assert core.take_text_delta(delta(3, "b")) is None  # something is pending: the full path releases both
    assert read_text_first(chunks, None) == read_whole(b"".join(chunks), None)


def test_a_long_answer_taken_by_take_text_delta_is_compacted_and_equal() -> None:
    chunks = _long_answer(event_lines=True)
    lane, whole = read_text_first(chunks, None), read_whole(b"".join(chunks), None)
    assert lane == whole
    assert whole[2]["output_text"].startswith("t0 t1 ")  # type: ignore[index]


def test_peek_data_takes_only_what_take_block_takes() -> None:
    dec = SSEDecoder()
    dec.feed(b"data: {}\n\n")
    assert dec.peek_data(b"event: x\ndata: 1\n\n") is None  # a name not seen yet: take_block records it first
    assert dec.take_block(b"event: x\ndata: 1\n\n") is not None
    assert dec.peek_data(b"event: x\ndata: 1\n\n") == b"1"
    assert dec.peek_data(b"data: 2\n\n") == b"2"
    for other in (b"data: 1\ndata: 2\n\n", b"event: x\ndata: 1\ndata: 2\n\n", b"id: 3\ndata: 1\n\n",
                  b"event: x\nid: 1\n\n", b"data: 1\r\n\r\n", b": c\n\n"):
        assert dec.peek_data(other) is None, other
    before = dec.bytes_seen
    dec.skip_block(len(b"data: 2\n\n"))
    assert dec.bytes_seen == before + 9
