"""gemini/reads.py's fast lanes (the direct event split, the typed text-chunk lane) against the full path (the WHATWG
SSE decoder, a plain JSON decode and ``GeminiStream.feed`` for every event): the same chunks, the same final usage and
the same failure, for every recording in random chunkings and for made-up streams mixing chunks the typed lane must
refuse (values a skipping decoder would let through: bad UTF-8, numbers out of range, a usage that is no object)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from providers.gemini.conftest import PROVIDERS
from respstream.protocol.sse import SSEDecoder
from respstream.server.upstream.base import Finish, TextDelta, singles
from respstream.server.upstream.gemini.reads import GeminiBody
from respstream.server.upstream.gemini.stream import GeminiStream

SHARED = Path("/work/shared/providers")  # (the corpus the recordings were copied from, when this machine has it)


def _full_path(body: bytes) -> tuple[list[Any], str | None]:
    """The reference: every event through the SSE decoder, decoded as JSON (None when it is not) and fed whole."""
    stream = GeminiStream(name="g", new_id=lambda: "fixed")
    decoder = SSEDecoder()
    decoder.feed(body)
    decoder.close()
    out: list[Any] = []
    for message in decoder.events():
        try:
            chunk = msgspec.json.decode(message.data)
        except msgspec.DecodeError:
            chunk = None
        out += stream.feed(chunk)
    out += stream.finish()
    return out, stream.failure.message if stream.failure else None


def _lanes(body: bytes, cuts: list[int]) -> tuple[list[Any], str | None]:
    reader = GeminiBody(GeminiStream(name="g", new_id=lambda: "fixed"))
    out: list[Any] = []
    for start, end in itertools.pairwise([0, *cuts, len(body)]):
        out += reader.feed(body[start:end])
    out += reader.finish()
    failure = reader.stream.failure
    return list(singles(out)), failure.message if failure else None


def _chunkings(body: bytes, rng: random.Random, count: int) -> list[list[int]]:
    """Whole events grouped 1..40 a read (the direct split and the typed lane), and cuts anywhere (the decoder)."""
    ends = [at + 4 for at in range(len(body)) if body.startswith(b"\r\n\r\n", at)][:-1]
    out = [ends, []]
    for _ in range(count):
        if rng.random() < 0.6 and ends:
            group = rng.randint(1, 40)
            out.append(ends[group - 1::group])
        else:
            out.append(sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 12)))))
    return out


def _recordings() -> list[Path]:
    files = sorted((PROVIDERS / "gemini").glob("*.sse"))
    if SHARED.is_dir():
        files += sorted((SHARED / "gemini").glob("*.sse"))
    return files


@pytest.mark.parametrize("path", _recordings(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_recording_in_random_chunkings_gives_what_the_full_path_gives(path: Path) -> None:
    body = path.read_bytes()
    want = _full_path(body)
    assert want[0], "the recording gives chunks"
    rng = random.Random(path.name)
    for cuts in _chunkings(body, rng, 30):
        assert _lanes(body, cuts) == want, f"cuts {cuts}"


def _event(chunk: object) -> bytes:
    data = chunk if isinstance(chunk, bytes) else json.dumps(chunk, ensure_ascii=False).encode()
    return b"data: " + data + b"\r\n\r\n"


def _text(text: str, **extra: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
                             "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": len(text)},
                             "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    chunk.update(extra)
    return chunk


_PLAIN = _text(" plain")
_ODD: list[object] = [
    _text("usage null", usageMetadata=None),
    _text("usage a number", usageMetadata=7),
    _text("no usage"),
    {"candidates": [{"content": {"parts": [{"text": "bare"}]}}]},
    _text("nested usage", usageMetadata={"promptTokenCount": 4, "promptTokensDetails": [{"modality": "TEXT"}]}),
    _text("é ünïcode \u2028 \"quoted\" \\ back"),
    _text(""),
    _text("two", candidates=[{"content": {"parts": [{"text": "a"}, {"text": "b"}]}}]),
    _text("thought", candidates=[{"content": {"parts": [{"text": "hm", "thought": True}]}}]),
    _text("signed", candidates=[{"content": {"parts": [{"text": "s", "thoughtSignature": "c2ln"}]}}]),
    _text("role int", candidates=[{"content": {"parts": [{"text": "r"}], "role": 5}}]),
    _text("two candidates", candidates=[{"content": {"parts": [{"text": "x"}]}}, {"content": {"parts": []}}]),
    _text("unknown field", extra_field=True),
    # values a skipping decoder accepts and the full decoder refuses: the stream fails at that event
    _event(_text("x"))[6:-4].replace(b'"gemini-2.5-flash"', b'"gemini-\xff"'),
    _event(_text("x"))[6:-4].replace(b'"candidatesTokenCount": 1', b'"candidatesTokenCount": 1e999'),
    _event(_text("x"))[6:-4].replace(b'"candidatesTokenCount": 1', b'"candidatesTokenCount": ' + b"9" * 5000),
    b'{"candidates": [{"content": {"parts": [{"text": "cut"}]}}]',  # (not JSON)
    [1, 2],
]


def test_made_up_streams_mixing_refused_chunks_give_what_the_full_path_gives() -> None:
    rng = random.Random(39)
    lane_took = 0
    for _ in range(300):
        count = rng.randint(1, 30)
        chunks: list[object] = [rng.choice([_PLAIN, _PLAIN, _PLAIN, rng.choice(_ODD)]) for _ in range(count)]
        if rng.random() < 0.8:
            chunks.append(_text(".", candidates=[{"content": {"parts": [{"text": "."}]}, "finishReason": "STOP"}]))
        body = b"".join(map(_event, chunks))
        want = _full_path(body)
        for cuts in _chunkings(body, rng, 4):
            assert _lanes(body, cuts) == want, (chunks, cuts)
        lane_took += any(isinstance(c, TextDelta) for c in want[0])
    assert lane_took > 100  # (most streams did carry text through the lanes)


def test_a_value_the_full_decoder_refuses_fails_the_stream_on_the_lane_too() -> None:
    """The typed lane once skipped usageMetadata/modelVersion/responseId undecoded (msgspec.Raw): bad UTF-8 or a
    number out of range there went through as text, where the full path fails the stream at that event."""
    for bad in _ODD[13:16]:
        body = _event(_PLAIN) + _event(bad) + _event(_PLAIN)
        out, failure = _lanes(body, [])
        assert failure is not None and "event 2 is not a JSON object" in failure, failure
        assert [c.text for c in out if isinstance(c, TextDelta)] == [" plain"]
        assert (out, failure) == _full_path(body)


def test_a_usage_that_is_no_object_keeps_the_last_object_as_the_full_path_does() -> None:
    body = b"".join(map(_event, [_text("a"), _text("b", usageMetadata=None),
                                 _text("c", candidates=[{"content": {"parts": [{"text": "c"}]},
                                                         "finishReason": "STOP"}], usageMetadata=None)]))
    out, failure = _lanes(body, [])
    assert failure is None and isinstance(out[-1], Finish) and out[-1].usage is not None
    assert out[-1].usage.input_tokens == 3 and out[-1].usage.output_tokens == 1
    assert (out, failure) == _full_path(body)
