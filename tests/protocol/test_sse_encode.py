"""SSE encoder: exact bytes for the common shapes, and encode -> decode gives back the original."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from respstream.protocol.sse import SSEDecoder, SSEMessage, encode_comment, encode_message


def decode_all(wire: bytes, step: int = 0) -> list[SSEMessage]:
    dec = SSEDecoder()
    for i in range(0, len(wire), step or len(wire) or 1):
        dec.feed(wire[i : i + (step or len(wire))])
    dec.close()
    return dec.events()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"data": "hi"}, b"data: hi\n\n"),
        ({"data": b"{}", "event": "response.created"}, b"event: response.created\ndata: {}\n\n"),
        ({"data": "x", "event": "message", "id": 7}, b"event: message\nid: 7\ndata: x\n\n"),
        ({"data": "x", "retry": 1500}, b"retry: 1500\ndata: x\n\n"),
        ({"data": "a\nb"}, b"data: a\ndata: b\n\n"),
        ({"data": "a\r\nb\rc"}, b"data: a\ndata: b\ndata: c\n\n"),
        ({"data": ""}, b"data: \n\n"),
        ({"data": "a\n"}, b"data: a\ndata:\n\n"),
        ({"data": "\u20ac", "id": "\u2026"}, "id: \u2026\ndata: \u20ac\n\n".encode()),
    ],
    ids=["data", "event", "event-id", "retry", "multi-line", "cr-and-crlf", "empty", "trailing-newline", "unicode"],
)
def test_encode_message_bytes(kwargs: dict[str, object], expected: bytes) -> None:
    assert encode_message(**kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"event": "a\nb"},
        {"event": "a\rb"},
        {"id": "1\n2"},
        {"id": "1\r"},
        {"id": "a\0b"},
        {"retry": -1},
        {"retry": True},
    ],
    ids=["event-lf", "event-cr", "id-lf", "id-cr", "id-nul", "retry-negative", "retry-bool"],
)
def test_encode_message_rejects_fields_a_decoder_would_misread(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="SSE"):
        encode_message("x", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("keep-alive", b": keep-alive\n\n"), ("", b":\n\n"), ("a\nb", b": a\n: b\n\n")],
    ids=["keep-alive", "empty", "multi-line"],
)
def test_encode_comment(text: str, expected: bytes) -> None:
    wire = encode_comment(text)
    assert wire == expected
    assert decode_all(wire + encode_message("after")) == [SSEMessage("message", b"after", "", len(wire))]


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.tuples(
            st.text(alphabet=st.characters(blacklist_characters="\r", codec="utf-8"), max_size=30),
            st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8"))),
            st.one_of(
                st.none(),
                st.integers(min_value=0, max_value=10**6),
                st.text(alphabet=st.characters(blacklist_characters="\r\n\0", codec="utf-8"), max_size=8),
            ),
        ),
        max_size=10,
    ),
    step=st.integers(min_value=0, max_value=7),
)
def test_round_trip(messages: list[tuple[str, str | None, int | str | None]], step: int) -> None:
    wire = b"".join(encode_message(data, event=event, id=id_) for data, event, id_ in messages)
    got = decode_all(wire, step)
    expected: list[tuple[str, str, str]] = []
    last_id = ""
    for data, event, id_ in messages:
        if id_ is not None:
            last_id = str(id_)
        expected.append((event or "message", data, last_id))
    assert [(m.event, m.text, m.id) for m in got] == expected


def test_round_trip_bytes_data_with_invalid_utf8() -> None:
    wire = encode_message(b"\xff\x00ok", event="e")
    assert decode_all(wire) == [SSEMessage("e", b"\xff\x00ok", "", 0)]
