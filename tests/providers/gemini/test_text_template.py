"""gemini/text_template.py (a read of many text chunks checked against a learned template, every usage checked,
only the last one decoded) against the full path (the SSE decoder, a plain JSON decode and ``GeminiStream.feed`` for
every event): the same chunks, usage and failure for streams shaped as Gemini writes them (compact and spaced JSON,
usage with and without details, counts that grow a digit inside a read), and for those streams with one byte
mutated anywhere (a digit changed, a leading zero, a CR, LF, tab, backslash, quote, brace or comma put in, a byte
taken out): what the template takes must be exactly what the full path gives, and the rest must go the ordinary way."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from providers.gemini.test_lanes import _full_path, _lanes
from respstream.server.upstream.base import Finish, TextDelta
from respstream.server.upstream.gemini import text_template
from respstream.server.upstream.gemini.text_template import GeminiTemplate, learn_template

_TEXTS = [" w", " é ü", ' "quoted"', " back\\slash", " \u2028line", " 12:05", ' "}],"role":', " 0", "", " 😀",
          " \\u0041", " tab\there", " {\"usageMetadata\": 1}", " 99",
          ' data: {"candidates": [{"content": {"parts": [{"text": "', " \r\n\r\ndata: "]


@pytest.fixture
def taken() -> Iterator[list[int]]:
    """How many reads the template took (a non-None :meth:`GeminiTemplate.read`) while the test ran."""
    counts = [0]
    read = GeminiTemplate.read

    def counting(self: GeminiTemplate, raw: bytes) -> Any:
        out = read(self, raw)
        counts[0] += out is not None
        return out

    GeminiTemplate.read = counting  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        GeminiTemplate.read = read  # type: ignore[method-assign]


_RESPONSE_IDS = ["beHBaJfEMIi-qtsP3769-Q8", "EXCPatOAKMrQjMcPteHVmQo", "r1", "0123456789-98765", "12:34 5"]


def _chunk(text: str, prompt: int, out: int, *, details: bool, thoughts: int, finish: bool = False,
           response_id: str = _RESPONSE_IDS[0]) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount":
                             prompt + out + thoughts}
    if details:
        usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash",
            "responseId": response_id}


def _stream(rng: random.Random, count: int) -> bytes:
    """A Gemini stream of ``count`` text chunks and a finish, its counts starting just below a digit boundary."""
    spaced = rng.random() < 0.5  # (Gemini's own bytes put a space after each colon; other servers write compact)
    details, thoughts = rng.random() < 0.5, rng.choice([0, 0, 7, 95])
    prompt, out = rng.choice([5, 34, 999]), rng.choice([0, 1, 6, 95, 990])
    response_id = rng.choice(_RESPONSE_IDS)  # (each response its own: the usage shapes checked carry over)
    events = []
    for at in range(count + 1):
        chunk = _chunk(rng.choice(_TEXTS) if at < count else "", prompt, out + at, details=details,
                       thoughts=thoughts, finish=at == count, response_id=response_id)
        data = json.dumps(chunk, ensure_ascii=rng.random() < 0.2, separators=(",", ": ") if spaced else (",", ":"))
        events.append(b"data: " + data.encode() + b"\r\n\r\n")
    return b"".join(events)


def _whole_event_reads(body: bytes, rng: random.Random) -> list[list[int]]:
    ends = [at + 4 for at in range(len(body)) if body.startswith(b"\r\n\r\n", at)][:-1]
    return [ends[group - 1 :: group] for group in (rng.randint(4, 12), rng.randint(13, 40), 16)]


def test_streams_as_gemini_writes_them_give_what_the_full_path_gives(taken: list[int]) -> None:
    rng = random.Random(3900)
    for _ in range(120):
        body = _stream(rng, rng.randint(4, 80))
        want = _full_path(body)
        assert want[1] is None and isinstance(want[0][-1], Finish)
        for cuts in _whole_event_reads(body, rng):
            assert _lanes(body, cuts) == want, cuts
    assert taken[0] > 200  # (the template took most reads)


def _mutations(body: bytes, rng: random.Random) -> Iterator[bytes]:
    """``body`` with one byte changed: a digit of a count, a leading zero, something put in or taken out."""
    digits = [at for at in range(len(body)) if body[at : at + 1].isdigit()]
    for _ in range(6):
        at = rng.choice(digits)
        yield body[:at] + rng.choice(b"0123456789").to_bytes(1, "big") + body[at + 1 :]
        yield body[:at] + b"0" + body[at:]
    for _ in range(10):
        at = rng.randrange(len(body))
        yield body[:at] + rng.choice([b"\r", b"\n", b"\t", b" ", b"\\", b'"', b"}", b",", b"0", b"x", b"\xff"]) \
            + body[at:]
        yield body[:at] + body[at + 1 :]


def test_one_byte_changed_anywhere_gives_what_the_full_path_gives(taken: list[int]) -> None:
    rng = random.Random(39)
    compared = 0
    for _ in range(40):
        body = _stream(rng, rng.randint(8, 40))
        for mutated in _mutations(body, rng):
            want = _full_path(mutated)
            for cuts in _whole_event_reads(mutated, rng)[:2]:
                assert _lanes(mutated, cuts) == want, (mutated, cuts)
                compared += 1
    assert compared > 2000 and taken[0] > 500


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n"


def test_a_leading_zero_in_a_count_fails_the_stream_at_that_event_on_the_template_too(taken: list[int]) -> None:
    events = [_event(_chunk(f" w{at}", 5, 100 + at, details=False, thoughts=0)) for at in range(32)]
    events[20] = events[20].replace(b'"candidatesTokenCount":120', b'"candidatesTokenCount":012')
    events.append(_event(_chunk("", 5, 132, details=False, thoughts=0, finish=True)))
    body = b"".join(events)
    out, failure = _lanes(body, [sum(map(len, events[:k])) for k in (16, 32)])
    assert failure is not None and "event 21 is not a JSON object" in failure
    assert [c.text for c in out if isinstance(c, TextDelta)] == [f" w{at}" for at in range(20)]
    assert (out, failure) == _full_path(body)
    assert taken[0] == 0  # (the first read taught the template; the second held the bad event: the ordinary way)


def test_a_count_that_grows_a_digit_inside_a_read_is_still_taken_whole(taken: list[int]) -> None:
    events = [_event(_chunk(f" w{at}", 5, 90 + at, details=True, thoughts=0)) for at in range(33)]
    events.append(_event(_chunk("", 5, 123, details=True, thoughts=0, finish=True)))
    body = b"".join(events)
    reads = [sum(map(len, events[:k])) for k in (1, 17, 33)]  # (the second read: counts 91..106)
    out, failure = _lanes(body, reads)
    assert failure is None and (out, failure) == _full_path(body)
    assert out[-1] == Finish("stop", usage=out[-1].usage) and out[-1].usage is not None
    assert out[-1].usage.output_tokens == 123
    assert taken[0] == 2


def test_learning_takes_a_text_chunk_and_refuses_anything_else() -> None:
    plain = json.dumps(_chunk(" w", 5, 1, details=True, thoughts=3), separators=(",", ": ")).encode()
    template = learn_template(plain)
    assert template is not None and template.prefix.endswith(b'"text": ') and template.middle.endswith(
        b'"usageMetadata": ')
    two_parts = plain.replace(b'[{"text": " w"}]', b'[{"text": " w"}, {"text": "x"}]')
    thought = plain.replace(b'{"text": " w"}', b'{"text": " w", "thought": true}')
    no_usage = json.dumps({"candidates": [{"content": {"parts": [{"text": " w"}]}}]}).encode()
    for refused in (two_parts, thought, no_usage, b"[1, 2]", b"not json"):
        assert learn_template(refused) is None, refused


def test_a_usage_given_twice_is_read_as_the_full_path_reads_it_the_last_one(taken: list[int]) -> None:
    """The usage slot is the one the full path keeps (JSON objects keep a key's last value): the first usage is
    then part of the template's middle, and must repeat byte for byte."""
    def shadowed(at: int, first: int) -> bytes:
        finish = ',"finishReason":"STOP"' if at == 40 else ""
        return (b'data: {"candidates":[{"content":{"parts":[{"text":" w%d"}]}%s}],"usageMetadata":{"promptTokenCount":'
                b'%d},"modelVersion":"m","usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":%d}}\r\n\r\n'
                % (at, finish.encode(), first, at))

    events = [shadowed(at, 7) for at in range(41)]
    body = b"".join(events)
    reads = [sum(map(len, events[:k])) for k in (1, 20, 40)]
    want = _full_path(body)
    assert want[1] is None and isinstance(want[0][-1], Finish) and want[0][-1].usage is not None
    assert want[0][-1].usage.input_tokens == 7 and want[0][-1].usage.output_tokens == 40
    assert _lanes(body, reads) == want
    assert taken[0] == 2
    # Another digit in the shadowed count: still the same JSON with another digit, so the template takes it
    other_digit = b"".join(shadowed(at, 7 if at != 30 else 8) for at in range(41))
    assert _lanes(other_digit, reads) == _full_path(other_digit)
    assert taken[0] == 4
    # Another letter: not the template's; the read goes the ordinary way
    other_letter = b"".join(event if at != 30 else event.replace(b'"m"', b'"n"') for at, event in enumerate(events))
    assert _lanes(other_letter, reads) == _full_path(other_letter)
    assert taken[0] == 5  # (the first read of events 1..19 only)


def test_the_number_starts_are_those_of_counts_outside_strings() -> None:
    tail = b'}],"index": 10}],"usageMetadata": {"promptTokenCount": 345,"x": "a77"},"v": "2.5"}'
    starts = text_template._number_starts(tail)
    assert [tail[at : at + 3] for at in starts] == [b"10}", b"345"]


def test_an_event_start_inside_a_text_cuts_no_event_there(taken: list[int]) -> None:
    """The template splits a read where ``data: `` + its prefix starts an event: written raw inside a text (no JSON
    string can hold its quotes unescaped), the pieces around it end in no tail, and the read goes the ordinary way."""
    events = [_event(_chunk(f" w{at}", 5, 100 + at, details=False, thoughts=0)) for at in range(32)]
    events.append(_event(_chunk("", 5, 132, details=False, thoughts=0, finish=True)))
    head = events[0][: events[0].index(b'" w0"')]
    events[20] = events[20].replace(b'" w20"', b'" w20 ' + head + b'x"')
    body = b"".join(events)
    reads = [sum(map(len, events[:k])) for k in (4, 8, 16, 32)]
    out, failure = _lanes(body, reads)
    assert failure is not None and "event 21 is not a JSON object" in failure
    assert (out, failure) == _full_path(body)
    assert taken[0] == 2  # (events 5..8 and 9..16, after the first read taught it; not the one with the bad text)


def test_a_usage_shape_checked_once_serves_responses_with_other_ids_and_no_other_template(
        taken: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """What a tail's usage shape proves is remembered without the suffix (``responseId`` differs each response): a
    second response whose id differs (another length, digits in it) decodes no usage to check its tails, and gives
    what the full path gives; a response whose middle differs checks its shapes anew."""
    decoded: list[bytes] = []
    decode = text_template._decode_usage

    def counting(raw: bytes) -> Any:
        decoded.append(raw)
        return decode(raw)

    monkeypatch.setattr(text_template, "_decode_usage", counting)
    monkeypatch.setattr(text_template, "_CHECKED", {})
    monkeypatch.setattr(text_template, "_SHAPES", {})  # (tail shapes made, the suffix in them: none yet)

    def body(response_id: str, *, index: int = 0, bad_at: int = -1) -> tuple[bytes, list[int]]:
        chunks = [_chunk(f" w{at}", 1234, 100 + at, details=True, thoughts=7, response_id=response_id)
                  for at in range(48)]
        chunks.append(_chunk("", 1234, 148, details=True, thoughts=7, finish=True, response_id=response_id))
        for chunk in chunks:
            chunk["candidates"][0]["index"] = index
        events = [_event(chunk) for chunk in chunks]
        if bad_at >= 0:  # (a leading zero in a count of a later response: refused there as the full path does)
            count = 1341 + bad_at  # (four digits: 0 in place of its 1, the tail as long as the others)
            events[bad_at] = events[bad_at].replace(b'"totalTokenCount":%d' % count,
                                                    b'"totalTokenCount":0%d' % (count - 1000))
        return b"".join(events), [sum(map(len, events[:k])) for k in (1, 16, 32, 48)]

    first, reads = body("EXCPatOAKMrQjMcPteHVmQo")
    assert _lanes(first, reads) == _full_path(first)
    assert taken[0] == 3 and len(decoded) == 1
    for other in ("beHBaJfEMIi-qtsP3769-Q8", "r1", "0123456789-98765"):
        again, reads = body(other)
        assert _lanes(again, reads) == _full_path(again)
        assert len(decoded) == 1  # (no usage decoded: the shape was checked for the first response)
    assert taken[0] == 12
    bad, reads = body("r2", bad_at=40)
    want = _full_path(bad)
    assert want[1] is not None and "event 41 is not a JSON object" in want[1]
    assert _lanes(bad, reads) == want
    assert taken[0] == 14  # (the read holding event 41 goes the ordinary way)
    other_middle, reads = body("r1", index=1)  # (``"index":1`` in the middle: another template's shape)
    assert _lanes(other_middle, reads) == _full_path(other_middle)
    assert len(decoded) == 2 and taken[0] == 17
