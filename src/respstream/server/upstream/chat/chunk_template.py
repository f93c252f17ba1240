"""The bytes of a plain-text Chat Completions chunk around its content string, learned from one chunk of a stream.

Why: nearly every chunk of a stream is the same object with a different ``content`` string (``id``, ``model``,
``created`` and the rest repeat byte for byte). Once one plain chunk has been decoded, the next ones are read by
checking that they start with the same prefix and end with the same suffix and decoding only the string between, all
of a read's strings in one call: a fraction of decoding every chunk into objects (docs/benchmarks.md, #16).

Why it is exact: JSON is parsed left to right, so after the prefix the parser is in the same state whatever follows,
and a string token of any content leaves it in the same state again. A template is kept only when a probe string put
in its slot decodes, through the full typed decoder, to a plain chunk carrying exactly that string: then every
``prefix + <one JSON string> + suffix`` is a plain chunk carrying that string. "One JSON string" is checked by the
decoder: the slots of a read are decoded as one JSON array of strings, joined by ``,\n``. A raw newline may sit
between tokens but never inside a string, so no token can span two slots; a slot without a string makes two commas
meet, so with as many strings as slots each slot holds exactly one. Anything else (a second value, a bare word,
nothing, broken JSON) fails the decode or the count, and the read goes the ordinary way.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec

__all__ = ["PlainTemplate", "learn_template"]

_decode_strings = msgspec.json.Decoder(list[str])
_decode_string = msgspec.json.Decoder(str)
_EDGE = 3  # payloads at either end of a read that may not fit (role-only first chunk; finish, usage)
_PROBE = 'probe "\\ é\n'  # quotes, a backslash, non-ASCII and a newline: escapes must land in the slot too


class PlainTemplate:
    """``prefix`` + one JSON string + ``suffix``: a plain-text chunk of one stream."""

    __slots__ = ("_between", "prefix", "suffix", "used")

    def __init__(self, prefix: bytes, suffix: bytes) -> None:
        assert suffix, "a template's slot is followed by the rest of the chunk"
        self.prefix = prefix
        self.suffix = suffix
        self.used = False  # it has read a run at least once
        self._between = suffix + b"\0" + prefix  # see texts

    def fits(self, payload: bytes) -> bool:
        """``payload`` starts and ends as this template does (its slot is checked by :meth:`texts`)."""
        return payload.startswith(self.prefix) and payload.endswith(self.suffix)

    def run(self, payloads: list[bytes]) -> tuple[int, int]:
        """``(start, end)``: ``payloads[start:end]`` is the run that may fit, past at most a few leading and trailing
        payloads that do not (a role-only first chunk; the finish and usage chunks). Whether the run really fits is
        for :meth:`texts` to say."""
        fits = self.fits
        start, end = 0, len(payloads)
        if end and fits(payloads[0]) and fits(payloads[-1]):
            return start, end  # (a read from the middle of a stream: both ends fit, nothing to skip)
        for _ in range(_EDGE):
            if start < end and not fits(payloads[start]):
                start += 1
        for _ in range(_EDGE):
            if end > start and not fits(payloads[end - 1]):
                end -= 1
        return start, end

    def texts(self, payloads: list[bytes]) -> list[str] | None:
        """The content strings of ``payloads`` when every one is this template around one JSON string, else None."""
        prefix, suffix = self.prefix, self.suffix
        start, end = len(prefix), -len(suffix)
        slots = [p[start:end] for p in payloads]
        # Every payload is prefix + its slot + suffix exactly when the payloads rebuilt that way are the payloads,
        # compared joined (two joins and one compare instead of two slices and compares a payload). Exact: a rebuilt
        # payload is never shorter than its own and as long only when it is prefix + slot + suffix in length, so the
        # two joins line up payload by payload (whatever the separator; a payload may contain it) or differ in length.
        if prefix + self._between.join(slots) + suffix != b"\0".join(payloads):
            return None
        try:
            texts = _decode_strings.decode(b"[" + b",\n".join(slots) + b"]")
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if len(texts) != len(payloads):  # a slot held two strings (`"a","b"`)
            return None
        self.used = True
        return texts

    def text(self, payload: bytes) -> str | None:
        """:meth:`texts` of one payload (a read of one token): its content string, or None. The slot must decode as
        one JSON string and nothing after it, which the decoder checks."""
        prefix, suffix = self.prefix, self.suffix
        if not (payload.startswith(prefix) and payload.endswith(suffix)) or len(payload) < len(prefix) + len(suffix):
            return None
        try:
            text = _decode_string.decode(payload[len(prefix) : -len(suffix)])
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        self.used = True
        return text


def learn_template(payload: bytes, content: str, plain_text: Callable[[bytes], str | None]) -> PlainTemplate | None:
    """The template of ``payload``, a chunk whose plain text is ``content`` (non-empty), or None when its string
    cannot be found the two usual ways it is written (compact UTF-8 or ASCII escapes) or the probe fails.
    ``plain_text(payload)`` is the full decoder: the chunk's text when it is a plain-text chunk, else None."""
    slot = _slot(payload, content)
    if slot is None:
        return None
    start, end = slot
    prefix, suffix = payload[:start], payload[end:]
    if not suffix:
        return None
    probe = msgspec.json.encode(_PROBE)
    if plain_text(prefix + probe + suffix) != _PROBE:
        return None
    return PlainTemplate(prefix, suffix)


def _slot(payload: bytes, content: str) -> tuple[int, int] | None:
    """Where ``content``'s JSON string (quotes included) sits after the first ``"content":`` key, or None."""
    key = payload.find(b'"content"')
    if key < 0:
        return None
    at = key + 9
    while payload[at : at + 1] in (b" ", b"\t", b"\n", b"\r"):
        at += 1
    if payload[at : at + 1] != b":":
        return None
    at += 1
    while payload[at : at + 1] in (b" ", b"\t", b"\n", b"\r"):
        at += 1
    for written in (msgspec.json.encode(content), json.dumps(content).encode()):
        if payload.startswith(written, at):
            return at, at + len(written)
    return None
