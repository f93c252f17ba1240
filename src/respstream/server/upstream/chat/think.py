"""Split ``<think>…</think>`` out of streamed answer text, live, whatever the chunk boundaries.

How this works: the splitter is a two-state machine (answer text / reasoning). In each state it looks for the tag
that switches state (``<think>`` or ``</think>``). Text that cannot be the start of that tag is released at once; only
a trailing fragment that could still become the tag (``"<th"``) is held back until the next chunk decides it. So a
tag split across any number of chunks is recognised, and ordinary text is delayed by at most ``len(tag) - 1``
characters. ``flush()`` at the end of the stream releases what is held back (an unterminated ``<think>`` block stays
reasoning: the model never closed it, it was never meant as answer text).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["CLOSE_TAG", "OPEN_TAG", "Piece", "ThinkSplitter"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

Piece = tuple[Literal["text", "reasoning"], str]


def _held_prefix_length(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag`` (what must wait for more input)."""
    start = max(0, len(text) - len(tag) + 1)
    idx = text.find("<", start)
    while idx != -1:
        if tag.startswith(text[idx:]):
            return len(text) - idx
        idx = text.find("<", idx + 1)
    return 0


class ThinkSplitter:
    """Feed answer-text chunks; get ``("text" | "reasoning", str)`` pieces with the tags removed.

    Never raises. Pieces are never empty strings.
    """

    __slots__ = ("_buffer", "_in_think")

    def __init__(self) -> None:
        self._buffer = ""
        self._in_think = False

    @property
    def in_think(self) -> bool:
        return self._in_think

    @property
    def idle(self) -> bool:
        """In answer text with nothing held back: a chunk without ``<`` would come out unchanged as text."""
        return not self._in_think and not self._buffer

    def feed(self, chunk: str) -> list[Piece]:
        # Fast path: no tag can start in this chunk and nothing is held back (the common case for plain answers).
        if not self._buffer and "<" not in chunk:
            if not chunk:
                return []
            return [("reasoning" if self._in_think else "text", chunk)]
        text = self._buffer + chunk
        self._buffer = ""
        out: list[Piece] = []
        while text:
            tag = CLOSE_TAG if self._in_think else OPEN_TAG
            kind: Literal["text", "reasoning"] = "reasoning" if self._in_think else "text"
            idx = text.find(tag)
            if idx != -1:
                if idx:
                    out.append((kind, text[:idx]))
                text = text[idx + len(tag) :]
                self._in_think = not self._in_think
                continue
            held = _held_prefix_length(text, tag)
            release = text[: len(text) - held]
            if release:
                out.append((kind, release))
            self._buffer = text[len(text) - held :]
            break
        return out

    def flush(self) -> list[Piece]:
        """End of stream: release the held-back fragment as whatever state we are in."""
        text, self._buffer = self._buffer, ""
        if not text:
            return []
        return [("reasoning" if self._in_think else "text", text)]
