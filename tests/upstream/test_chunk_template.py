"""The plain-chunk template (upstream/chat/chunk_template.py) read through ``ChunkTranslator.feed_plain``: reads of a
stream split anywhere give exactly what a fresh translator gives feeding the same payloads one by one, whatever the
server's JSON style (key order, spaces, ASCII escapes, extra fields, a field that changes in every chunk), whatever
the text (quotes, backslashes, non-ASCII, ``<think>``, empty strings), with role, finish, usage, reasoning, tool-call,
logprobs, error and malformed chunks in between. And the template is really used where it should be."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from respstream.server.upstream.base import Chunk, TextDelta, TextRun, singles
from respstream.server.upstream.chat.chunk_template import PlainTemplate, learn_template
from respstream.server.upstream.chat.stream import ChunkTranslator, _plain_text

from .test_batched_reads import _each

_one_by_one = _each  # a fresh translator fed payload by payload: the reference


def _by_reads(reads: list[list[bytes]], translator: ChunkTranslator | None = None,
              out: list[Chunk] | None = None) -> tuple[list[Chunk] | str, bool, ChunkTranslator]:
    """As the adapter reads: ``feed_plain`` on each read, the payloads it did not take through ``feed``."""
    translator = translator or ChunkTranslator()
    out = out if out is not None else []
    try:
        for payloads in reads:
            if translator.done:
                break
            batch, taken = translator.feed_plain(payloads)
            out += singles(batch)
            for payload in payloads[taken:]:
                out += translator.feed(payload)
                if translator.done:
                    break
        return out + translator.finish(), translator.done, translator
    except ValueError as exc:
        return str(exc), translator.done, translator


class _Style:
    """How one server writes its chunks."""

    def __init__(self, ascii_only: bool, spaced: bool, choice_first: bool, extra: bool, varying: bool) -> None:
        self.ascii_only, self.spaced, self.choice_first, self.extra, self.varying = (
            ascii_only, spaced, choice_first, extra, varying)
        self.count = 0

    def dump(self, choices: list[dict[str, Any]] | None = None, **more: Any) -> bytes:
        self.count += 1
        head: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                                "model": 'm "x" \\content\\'}
        if self.extra:
            head["system_fingerprint"] = "fp_1"
        if self.varying:
            head["obfuscation"] = f"r{self.count}"
        body: dict[str, Any] = {}
        if choices is not None:
            body["choices"] = choices
        body.update(more)
        obj = {**body, **head} if self.choice_first else {**head, **body}
        separators = (", ", ": ") if self.spaced else (",", ":")
        return json.dumps(obj, ensure_ascii=self.ascii_only, separators=separators).encode()


_plain_texts = st.sampled_from(["plain", " word", "", 'quote " inside', "back\\slash", "é ü 中", "new\nline",
                                "tab\t", "emoji 🙂", "\u2028", "\x00"])
_texts = st.one_of(
    _plain_texts, _plain_texts, _plain_texts, _plain_texts,
    st.sampled_from(["a <think>b", "c</think>d", "<", "x<y"]),
    st.text(max_size=12),
)

# Mostly answer text, as real streams are, so that most examples have runs the template reads.
_kinds = st.sampled_from(["text"] * 60 + ["role", "finish", "usage", "reasoning", "tool", "logprobs", "refusal",
                                          "error", "malformed", "number"])


def _payload(style: _Style, kind: str, text: str) -> bytes:
    if kind == "text":
        return style.dump([{"index": 0, "delta": {"content": text}, "finish_reason": None}])
    if kind == "role":
        return style.dump([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    if kind == "finish":
        return style.dump([{"index": 0, "delta": {}, "finish_reason": "stop"}])
    if kind == "usage":
        return style.dump([], usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    if kind == "reasoning":
        return style.dump([{"index": 0, "delta": {"reasoning_content": text or "r"}, "finish_reason": None}])
    if kind == "tool":
        return style.dump([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "function": {
            "name": "f", "arguments": "{}"}}]}, "finish_reason": None}])
    if kind == "logprobs":
        return style.dump([{"index": 0, "delta": {"content": text}, "logprobs": {"content": []},
                            "finish_reason": None}])
    if kind == "refusal":
        return style.dump([{"index": 0, "delta": {"refusal": text or "no"}, "finish_reason": None}])
    if kind == "error":
        return style.dump(None, error={"message": "boom"})
    if kind == "number":
        return style.dump([{"index": 0, "delta": {"content": 5}, "finish_reason": None}])
    return b'{"choices": [' + text.encode()[:3]  # malformed JSON


@settings(max_examples=1500, deadline=None)
@given(
    style=st.builds(_Style, st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    steps=st.lists(st.tuples(_kinds, _texts), max_size=80),
    done=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
def test_reads_through_the_template_equal_feeding_one_by_one(style: _Style, steps: list[tuple[str, str]],
                                                            done: bool, cuts: list[int]) -> None:
    payloads = [_payload(style, kind, text) for kind, text in steps] + ([b"[DONE]"] if done else [])
    bounds = [0, *sorted({c % (len(payloads) + 1) for c in cuts}), len(payloads)]
    reads = [payloads[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    want, want_done = _one_by_one(payloads)
    got, got_done, _ = _by_reads(reads)
    assert got == want
    assert got_done == want_done


@settings(max_examples=1500, deadline=None)
@given(
    style=st.builds(_Style, st.booleans(), st.booleans(), st.booleans(), st.booleans(),
                    st.sampled_from([False, False, False, True])),
    texts=st.lists(st.one_of(*[_plain_texts] * 8, _texts, st.just(None)), min_size=8, max_size=120),
    cuts=st.lists(st.integers(min_value=0, max_value=130), max_size=5),
)
def test_realistic_streams_read_through_the_template_equal_feeding_one_by_one(
        style: _Style, texts: list[str | None], cuts: list[int]) -> None:
    # A role chunk, text (None: a reasoning chunk in between), finish, usage, [DONE]: what servers send.
    payloads = [_payload(style, "role", "")]
    payloads += [_payload(style, "text", t) if t is not None else _payload(style, "reasoning", "r") for t in texts]
    payloads += [_payload(style, "finish", ""), _payload(style, "usage", ""), b"[DONE]"]
    bounds = [0, *sorted({c % (len(payloads) + 1) for c in cuts}), len(payloads)]
    reads = [payloads[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    got, got_done, _ = _by_reads(reads)
    want, want_done = _one_by_one(payloads)
    assert (got, got_done) == (want, want_done)


def _plain_stream(n: int, style: _Style | None = None) -> list[bytes]:
    style = style or _Style(False, False, False, True, False)
    return [_payload(style, "role", "")] + [_payload(style, "text", f" w{i}") for i in range(n)] + [
        _payload(style, "finish", ""), _payload(style, "usage", ""), b"[DONE]"]


def test_the_template_reads_the_plain_run_of_every_read_including_the_first() -> None:
    payloads = _plain_stream(100)
    reads = [payloads[:40], payloads[40:]]  # the first read starts with the role chunk, the last ends with usage
    translator = ChunkTranslator()
    seen: list[int] = []
    original = PlainTemplate.texts

    def counting(self: PlainTemplate, run: list[bytes]) -> list[str] | None:
        result = original(self, run)
        seen.append(len(run) if result is not None else -len(run))
        return result

    PlainTemplate.texts = counting  # type: ignore[method-assign]
    try:
        out: list[Chunk] = []
        for read in reads:
            batch, taken = translator.feed_plain(read)
            assert taken == len(read)
            out += batch
    finally:
        PlainTemplate.texts = original  # type: ignore[method-assign]
    assert sum(seen) >= 95  # nearly every text chunk, in both reads (the first two taught it)
    runs = [c for c in out if isinstance(c, TextRun)]
    assert len(runs) == len(reads) and sum(len(r.texts) for r in runs) >= 95  # one object a read, not one a chunk
    assert list(singles(out)) + translator.finish() == _one_by_one(payloads)[0]
    assert [c.text for c in singles(out) if isinstance(c, TextDelta)] == [f" w{i}" for i in range(100)]


def test_a_field_that_changes_in_every_chunk_stops_the_learning() -> None:
    style = _Style(False, False, False, False, varying=True)
    payloads = [_payload(style, "text", f"t{i}") for i in range(400)]
    translator = ChunkTranslator()
    learned = 0
    for at in range(0, 400, 20):
        before = translator._template
        batch, taken = translator.feed_plain(payloads[at:at + 20])
        assert taken == 20 and [c.text for c in singles(batch)] == [f"t{i}" for i in range(at, at + 20)]  # type: ignore
        learned += translator._template is not None and translator._template is not before
    assert translator._template is None and learned <= 3  # gave up: no template, no more attempts


def test_learning_finds_the_content_slot_not_a_lookalike_key() -> None:
    tricky = b'{"x\\"content":"hi","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'
    assert _plain_text(tricky) == "hi"
    # The first `"content":` is inside the key `x"content` (its value is "hi" too): the probe put there leaves the
    # real content "hi", so no template is learned from it.
    assert learn_template(tricky, "hi", _plain_text) is None
    simple = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"id":"1"}'
    template = learn_template(simple, "hi", _plain_text)
    assert template is not None
    assert template.texts([simple, simple.replace(b'"hi"', b'"a\\u00e9\\"b"')]) == ["hi", 'aé"b']


def test_a_slot_that_is_not_one_string_is_refused() -> None:
    simple = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'
    template = learn_template(simple, "hi", _plain_text)
    assert template is not None
    for slot in (b'"a","b"', b"5", b"", b'"a\n"', b'"unterminated', b"null", b'"a"]', b'"x"},"y":{"z":"w"'):
        assert template.texts([template.prefix + slot + template.suffix]) is None, slot
        assert template.text(template.prefix + slot + template.suffix) is None, slot
    assert template.text(template.prefix[:-1]) is None  # (shorter than the template itself)
    # Slots that are not one string each but, joined naively, would count right: two strings, then two lone quotes
    # (`["a","b",","]`). Broken JSON the ordinary path refuses; the template must not take it either.
    wrapped = [template.prefix + slot + template.suffix for slot in (b'"a","b"', b'"', b'"')]
    assert template.texts(wrapped) is None
    reads = [[simple] * 10, [simple] * 4 + wrapped]
    assert _by_reads(reads)[0] == _one_by_one([p for read in reads for p in read])[0]
    assert isinstance(_one_by_one(wrapped)[0], str)  # (it is an error)
    # Blanks around the string are JSON too: the same chunk.
    assert template.texts([template.prefix + b' "a" ' + template.suffix]) == ["a"]
    assert template.text(template.prefix + b' "a" ' + template.suffix) == "a"


_fragment = st.lists(st.sampled_from(['"', ",", "\\", "[", "]", "{", "}", ":", " ", "\n", "a", "é", "u", "0",
                                      "null", '\\"', '"content"']), max_size=8).map(lambda parts: "".join(parts))


@settings(max_examples=3000, deadline=None)
@given(slots=st.lists(st.one_of(_fragment, _plain_texts.map(json.dumps)), min_size=1, max_size=12),
       lead=st.integers(min_value=0, max_value=3))
def test_any_bytes_in_the_slots_give_what_feeding_one_by_one_gives(slots: list[str], lead: int) -> None:
    # A template is learned from a first read; the second read's chunks are the template around arbitrary bytes
    # (broken JSON, two strings, brackets...): the template may read only what the full decoder reads alike.
    style = _Style(False, False, False, False, False)
    first = [_payload(style, "text", f"t{i}") for i in range(10)]
    template = learn_template(first[1], "t1", _plain_text)
    assert template is not None
    second = first[:lead] + [template.prefix + slot.encode() + template.suffix for slot in slots]
    translator = ChunkTranslator()
    out, taken = translator.feed_plain(first)
    assert taken == len(first) and translator._template is not None  # learned from the first read
    got, got_done, _ = _by_reads([second], translator, list(singles(out)))
    assert (got, got_done) == _one_by_one(first + second)


@settings(max_examples=3000, deadline=None)
@given(slots=st.lists(st.one_of(_fragment, _plain_texts.map(json.dumps)), min_size=1, max_size=12))
def test_reads_of_one_payload_give_what_feeding_one_by_one_gives(slots: list[str]) -> None:
    # A real model's reads: one chunk each, through the template's one-payload path (``text``), arbitrary bytes in
    # the slot: the same chunks as the full decoder, and ``text`` says what ``texts`` says of one payload.
    style = _Style(False, False, False, False, False)
    first = [_payload(style, "text", f"t{i}") for i in range(10)]
    translator = ChunkTranslator()
    out, taken = translator.feed_plain(first)
    template = translator._template
    assert taken == len(first) and template is not None
    second = [template.prefix + slot.encode() + template.suffix for slot in slots]
    for payload in second:
        one = template.texts([payload])
        assert template.text(payload) == (one[0] if one is not None else None)
    got, got_done, _ = _by_reads([[p] for p in second], translator, list(singles(out)))
    assert (got, got_done) == _one_by_one(first + second)


def test_a_read_of_one_payload_takes_the_templates_path(monkeypatch: pytest.MonkeyPatch) -> None:
    payloads = _plain_stream(12)
    translator = ChunkTranslator()
    translator.feed_plain(payloads[:8])
    assert translator._template is not None
    calls: list[bytes] = []
    text = PlainTemplate.text

    def counting(self: PlainTemplate, payload: bytes) -> str | None:
        calls.append(payload)
        return text(self, payload)

    monkeypatch.setattr(PlainTemplate, "text", counting)
    batch, taken = translator.feed_plain([payloads[8]])
    assert (batch, taken, calls) == ([TextDelta(" w7")], 1, [payloads[8]])
