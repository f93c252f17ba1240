"""Finding a URL in free text in linear time (the router's "Input contains a URL" cue and ``web_fetch`` grounding).

Why not one regex: ``\\bwww\\.\\S+\\.\\w+`` backtracks over the rest of the word for every ``www.`` in it, so
``"www.-" * 200_000`` (1 MiB, under the body limit) took minutes on the event loop. Here the candidate starts come
from a fixed-length pattern, and the facts about the whitespace-free run a candidate sits in (where it ends, where
its last ``.word`` starts) are computed once per run, so every character is looked at a bounded number of times.

What counts as a URL (the same matches as the regex above, leftmost first): ``http://`` or ``https://`` at a word
start followed by at least one non-space character (the match runs to the next whitespace), or ``www.`` at a word
start followed, in the same run, by at least one character and then ``.`` + word characters (the match ends after
the last such ``.word`` of the run). Case-insensitive.
"""

from __future__ import annotations

import re

__all__ = ["find_url"]

_START = re.compile(r"\b(?:https?://|www\.)", re.IGNORECASE)  # fixed length after \b: no backtracking
_SPACE = re.compile(r"\s")
_WORD_RUN = re.compile(r"\w+")


_LAST_DOT_WORD = re.compile(r".*\.\w", re.DOTALL)  # anchored with match(): the greedy .* backs off once, O(n)


def _last_dot_word(text: str, start: int, end: int) -> int:
    """Index of the last ``.`` in ``text[start:end]`` that a word character follows, else -1. O(end - start)."""
    found = _LAST_DOT_WORD.match(text, start, end)
    return -1 if found is None else found.end() - 2


def find_url(text: str) -> str | None:
    """The first URL-looking run in ``text`` (see the module docstring), else None. Linear in ``len(text)``."""
    run_start = run_end = -1  # the whitespace-free run the previous candidate sat in
    last_dot = -1
    for candidate in _START.finditer(text):
        start = candidate.start()
        if start >= run_end:  # a new run: find where it ends and its last ".word", once
            space = _SPACE.search(text, start)
            run_start, run_end = start, space.start() if space else len(text)
            last_dot = -2  # not computed yet: only www. candidates need it
        if candidate.group(0).lower().startswith("http"):
            if run_end > candidate.end():
                return text[start:run_end]
            continue
        if last_dot == -2:
            last_dot = _last_dot_word(text, run_start, run_end)
        if last_dot >= candidate.end() + 1:  # at least one character between "www." and the last "."
            word = _WORD_RUN.match(text, last_dot + 1, run_end)
            assert word is not None  # _last_dot_word checked it
            return text[start : word.end()]
    return None
