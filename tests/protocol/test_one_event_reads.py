"""One event per read (how a live server writes tokens, and how the gateway reads a native Responses upstream): the
one-block fast paths (``SSEDecoder.take_block``, ``StreamCore``'s next-text-delta lane) give exactly what a whole
read gives, for every transcript, with and without a dialect."""

from __future__ import annotations

from pathlib import Path

import pytest

from respstream.errors import BadInputError
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


@pytest.mark.parametrize("dialect", [None, "openai", "platform"])
@pytest.mark.parametrize("name", NAMES)
def test_one_event_per_read_equals_one_read(name: str, dialect: str | None) -> None:
    data = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    assert read(blocks(data), dialect) == read([data], dialect)


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


def test_a_long_answer_one_token_per_read_is_compacted_and_equal() -> None:
    chunks = [
        b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n',
        b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
        b'"item":{"id":"m","type":"message","content":[]}}\n\n',
    ]
    chunks += [b'data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"m","output_index":0,'
               b'"content_index":0,"delta":"t%d "}\n\n' % (n + 2, n) for n in range(9000)]
    chunks.append(b'data: {"type":"response.incomplete","sequence_number":9002,"response":{"id":"r"}}\n\n')
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
