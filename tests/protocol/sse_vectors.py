"""The test vectors of spec/sse-parsing.md §1, as data.

Each vector is the wire bytes (``chunks``: one or several pieces), the events expected as ``(type, text, id)`` and
the decoder state after EOF (``retry``, ``last_event_id``). Vectors with several inputs in the spec (#31, #40, #44,
#51, #58) are split into one vector per input so every input gets its own readable id.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field

Expected = tuple[str, str, str]


@dataclass(frozen=True)
class Vector:
    id: str
    chunks: tuple[bytes, ...]
    events: tuple[Expected, ...]
    retry: int | None = None
    last_event_id: str = ""
    #: Decoder seeded with this id (a reconnection, #54).
    seed_id: str = ""
    #: Big vectors skip the "split at every offset" harness (it is quadratic in the size).
    big: bool = False
    tags: tuple[str, ...] = field(default=())

    @property
    def wire(self) -> bytes:
        return b"".join(self.chunks)


def v(
    vid: str,
    wire: bytes | list[bytes],
    *events: Expected,
    retry: int | None = None,
    last_event_id: str = "",
    seed_id: str = "",
    big: bool = False,
) -> Vector:
    chunks = tuple(wire) if isinstance(wire, list) else (wire,)
    return Vector(vid, chunks, tuple(events), retry, last_event_id, seed_id, big)


def m(data: str, id: str = "", event: str = "message") -> Expected:
    return (event, data, id)


BOM = b"\xef\xbb\xbf"
X2048 = b"x" * 2048

_rng = random.Random(61)  # fixed seed: the vector bytes are the same on every run
_BIG_B64 = base64.b64encode(_rng.randbytes(5 * 1024 * 1024 * 3 // 4))  # about 5 MiB of base64 text
_MANY_LINES = b"".join(b"data: line %06d %s\n" % (i, b"y" * 40) for i in range(20_000))  # ~1.1 MiB, one event
_MANY_LINES_TEXT = "\n".join(f"line {i:06d} {'y' * 40}" for i in range(20_000))
_HUNDRED = b"".join(b"data: message %d\n\n" % i for i in range(100))

VECTORS: list[Vector] = [
    # A. Decoding and BOM
    v("01-utf8-always", b"data:ok\xe2\x80\xa6\n\n", m("ok\u2026")),
    v("02-invalid-utf8-replaced", b"data:\xffhello\xc2\ndata:bye\n\n", m("\ufffdhello\ufffd\nbye")),
    v("03-multibyte-split", [b"data: \xe2\x82", b"\xac\n\n"], m("\u20ac")),
    v("04-4byte-char", b"data: \xf0\x9f\x98\x80\n\n", m("\U0001f600")),
    v("05-bom-stripped", BOM + b"data: a\n\n", m("a")),
    v("06-bom-split", [b"\xef", b"\xbb", b"\xbfdata: a\n\n"], m("a")),
    v("07-double-bom", BOM + BOM + b"data:1\n\ndata:2\n\n", m("2")),
    v("08-midstream-bom", BOM + b"data:1\n\n" + BOM + b"data:2\n\ndata:3\n\n", m("1"), m("3")),
    v("09-truncated-bom", b"\xefdata:hi\n\ndata:there\n\n", m("there")),
    v("09b-truncated-bom-2", b"\xef\xbbdata:hi\n\ndata:there\n\n", m("there")),
    v("10-bom-in-value", b"data: \xef\xbb\xbfx\n\n", m("\ufeffx")),
    # B. Line endings and chunk boundaries
    v("11-lone-cr", b"data: a\rdata: b\r\r", m("a\nb")),
    v("12-crlf", b"data: a\r\ndata: b\r\n\r\n", m("a\nb")),
    v("13-mixed-endings", b"data: a\n\r\ndata: b\r\rdata: c\r\n\n", m("a"), m("b"), m("c")),
    v("14-crlf-split", [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"], m("a\nb")),
    v("15-cr-cr-lf", [b"data: one\r", b"\r", b"\n"], m("one")),
    v(
        "16-byte-by-byte-mixed",
        b"data:hello\r\ndata:world\revent:a\revent:b\nid:4\n\nid:8\ndata:bye\r\n\r",
        m("hello\nworld", "4", "b"),
        m("bye", "8"),
        last_event_id="8",
    ),
    v("17-unicode-separators-are-data", b"data: a\xe2\x80\xa8b\xc2\x85c\n\n", m("a\u2028b\u0085c")),
    v("18-whitespace-line-not-blank", b"data: a\n \ndata: b\n\n", m("a\nb")),
    v("19-extra-blank-lines", b"data: a\n\n\n\ndata: b\n\n", m("a"), m("b")),
    v("20-cr-terminated", b"data: a\r\r", m("a")),
    # C. Field parsing
    v("21-optional-space", b"data:test\n\ndata: test\n\n", m("test"), m("test")),
    v("22-one-space-stripped", b"data:  hello  \nevent:  type \n\n", m(" hello  ", event=" type ")),
    v("23-tab-kept", b"data:\ttest\rdata: \ndata:test\n\n", m("\ttest\n\ntest")),
    v("24-first-colon-splits", b"data: a:b: c\n\n", m("a:b: c")),
    v("25-bare-data", b"data\n\n", m("")),
    v("26-two-bare-data", b"data\ndata\n\n", m("\n")),
    v("27-empty-data", b"data:\n\n", m("")),
    v("27b-empty-data-space", b"data: \n\n", m("")),
    v("28-empty-data-lines-kept", b"data:\ndata: x\ndata:\n\n", m("\nx\n")),
    v("29-case-sensitive", b"Data:1\ndata:2\n\n", m("2")),
    v("30-unknown-fields", b"foobar:xxx\njustsometext\ndata:test\n\n", m("test")),
    *[
        v(f"31-near-miss-{i}", line + b"\ndata: ok\n\n", m("ok"))
        for i, line in enumerate(
            [b"data : x", b" data:32", b"data_5", b"da-ta:3", b"database", b"data\0:2", b"\0data:4"]
        )
    ],
    v("32-nul-is-data", b"data:\0\n\n", m("\0")),
    v(
        "33-wpt-field-parsing",
        b"data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\r"
        b"data:\r\n data:32\ndata:4\n\n",
        m("\0\n 2\n1\n3\n\n4"),
    ),
    v("34-field-order", b"data: x\nid: 5\nevent: e\n\n", m("x", "5", "e"), last_event_id="5"),
    v("35-last-event-wins", b"event: a\nevent: b\ndata: x\n\n", m("x", event="b")),
    # D. Comments and keep-alives
    v("36-comment-only", b": ping\n\n"),
    v("37-comment-between-data", b"data: a\n: c\ndata: b\n\n", m("a\nb")),
    v(
        "38-wpt-comments",
        b"data:1\r:\0\n:\r\ndata:2\n:" + X2048 + b"\rdata:3\n:data:fail\r:" + X2048 + b"\ndata:4\n\n",
        m("1\n2\n3\n4"),
    ),
    v("39-keepalive-after-id", b"id: 1\ndata: a\n\n: ping\n\n", m("a", "1"), last_event_id="1"),
    # E. Dispatch and end of stream
    v("40-event-only-no-dispatch", b"event: foo\n\n"),
    v("40b-retry-only-no-dispatch", b"retry: 500\n\n", retry=500),
    v("41-type-resets", b"event: add\ndata: 1\n\ndata: 2\n\n", m("1", event="add"), m("2")),
    v("42-type-resets-on-empty-dispatch", b"event: foo\n\ndata: x\n\n", m("x")),
    v("43-empty-event-is-message", b"event: \ndata:data\n\n", m("data")),
    v("44-eof-discards-block", b"data: a\n\ndata: b\n", m("a")),
    v("44b-eof-discards-unterminated-line", b"data: a\n\ndata: b", m("a")),
    v("45-eof-id-not-committed", b"retry:1000\ndata:test1\n\nid:test\ndata:test2\n", m("test1"), retry=1000),
    # F. id and Last-Event-ID
    v(
        "47-id-persists",
        b"id: 1\ndata: 1\n\ndata: 2\n\nid: 2\ndata:3\n\ndata:4\n\n",
        m("1", "1"),
        m("2", "1"),
        m("3", "2"),
        m("4", "2"),
        last_event_id="2",
    ),
    v("48-empty-id-resets", b"id: 1\ndata: 1\n\nid:\ndata:2\n\ndata:3\n\n", m("1", "1"), m("2"), m("3")),
    v("49-bare-id-resets", b"id: 1\ndata: 1\n\nid\ndata:2\n\ndata:3\n\n", m("1", "1"), m("2"), m("3")),
    v(
        "50-id-with-nul-ignored",
        b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n",
        m("a", "1"),
        m("b", "1"),
        last_event_id="1",
    ),
    *[
        v(f"51-id-nul-{i}", b"id: " + value + b"\ndata: x\n\n", m("x"))
        for i, value in enumerate([b"\0\0", b"x\0", b"\0x", b"x\0x", b" \0"])
    ],
    v("52-id-only-block-updates", b"id: 7\n\ndata: x\n\n", m("x", "7"), last_event_id="7"),
    v("52b-id-only-block-at-eof", b"data: x\n\nid: 7\n\n", m("x"), last_event_id="7"),
    v("53-one-space-stripped-from-id", b"id:  5\ndata: x\n\n", m("x", " 5"), last_event_id=" 5"),
    v(
        "54-seeded-last-event-id",
        b"retry: 200\ndata: hello\n\n",
        m("hello", "\u2026"),
        retry=200,
        last_event_id="\u2026",
        seed_id="\u2026",
    ),
    # G. retry
    v("55-retry-without-dispatch", b"retry:999\n", retry=999),
    v("56-retry-leading-zeros", b"retry:03000\ndata:x\n\n", m("x"), retry=3000),
    v("57-retry-bogus-keeps-earlier", b"retry:3000\nretry:1000x\ndata:x\n\n", m("x"), retry=3000),
    *[
        v(f"58-retry-rejected-{i}", b"retry:" + value + b"\ndata:x\n\n", m("x"))
        for i, value in enumerate(
            [b"-1", b"+5", b"1.5", b"1e3", b"0x10", b"1_000", b"5ms", "\u0663".encode(), b"  5", b"456 "]
        )
    ],
    v("59-bare-retry-ignored", b"retry\ndata:test\n\n", m("test")),
    v("59b-empty-retry-ignored", b"retry:\ndata:test\n\n", m("test")),
    v("60-huge-retry", b"retry: 12345678910\n\n", retry=12345678910),
    v("60b-retry-past-int-digits-limit", b"retry: " + b"9" * 5000 + b"\n\n", retry=2**63 - 1, big=True),
    v("60c-retry-many-leading-zeros", b"retry: " + b"0" * 5000 + b"42\n\n", retry=42, big=True),
    # H. Robustness
    v("61-long-line-one-chunk", b"data: " + _BIG_B64 + b"\n\n", m(_BIG_B64.decode()), big=True),
    v(
        "61b-long-line-two-chunks",
        [b"data: " + _BIG_B64[:1_000_003], _BIG_B64[1_000_003:] + b"\n\n"],
        m(_BIG_B64.decode()),
        big=True,
    ),
    v("62-many-data-lines", _MANY_LINES + b"\n", m(_MANY_LINES_TEXT), big=True),
    v("63-hundred-events", _HUNDRED, *[m(f"message {i}") for i in range(100)]),
    # Shapes the fast path takes (so the whole/split harness covers its branches too).
    v(
        "fast-event-data",
        b"event: response.created\ndata: {}\n\nevent: x\ndata: 1\n\n",
        m("{}", event="response.created"),
        m("1", event="x"),
    ),
    v("fast-id-event-data", b"id: 3\nevent: e\ndata: a\ndata: b\n\n: c\n\n", m("a\nb", "3", "e"), last_event_id="3"),
    v(
        "fast-crlf",
        b"event: e\r\ndata: a\r\n\r\nid: 9\r\ndata: b\r\n\r\n\r\n",
        m("a", event="e"),
        m("b", "9"),
        last_event_id="9",
    ),
    v("fast-event-no-space", b"event:e\ndata: x\n\nevent:e\ndata: y\n\n", m("x", event="e"), m("y", event="e")),
    v("fast-event-no-data", b"event: e\nid: 4\n\ndata: x\n\n", m("x", "4"), last_event_id="4"),
    v("fast-event-then-comment", b"event: e\n: c\ndata:  x\n\n", m(" x", event="e")),
    v("fast-nul-id-ignored", b"id: 1\ndata: a\n\nid:2\0\ndata:b\n\n", m("a", "1"), m("b", "1"), last_event_id="1"),
    v("fast-then-retry", b"data: a\n\nretry: 7\ndata: b\n\ndata: c\n\n", m("a"), m("b"), m("c"), retry=7),
    v(
        "fast-id-event-data",
        b"id: 5\nevent: e\ndata: x\n\nid: 6\ndata: y\n\n",
        m("x", "5", "e"),
        m("y", "6"),
        last_event_id="6",
    ),
    v(
        "fast-id-variants",
        b"id:  5\nevent:\ndata: x\n\nid: \0\nevent: e\ndata: y\n\n",
        m("x", " 5"),
        m("y", " 5", "e"),
        last_event_id=" 5",
    ),
    v(
        "fast-id-then-other",
        b"id: 5\nfoo\ndata: x\n\nid: 6\nevent: a\nevent: b\ndata: y\n\nid: 7\nevent\ndata: z\n\n",
        m("x", "5"),
        m("y", "6", "b"),
        m("z", "7"),
        last_event_id="7",
    ),
    v(
        "fast-invalid-utf8-event",
        b"event: \xff\ndata: a\n\nid: \xfe\ndata: b\n\n",
        m("a", event="\ufffd"),
        m("b", "\ufffd"),
        last_event_id="\ufffd",
    ),
]

#: #46: a partial block must not leak into the next connection.
RECONNECT_CONN1 = b"id: 5\nevent: p\ndata: a\n"
RECONNECT_CONN2 = b"data: b\n\n"
