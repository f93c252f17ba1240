"""``url_citation`` annotations: where an answer refers to a web search result, and which one.

How this works: :class:`CitationSources` collects the results of a response's ``web_search`` calls (``[{title, url,
snippet}]`` JSON), numbered 1, 2, ... in the order first seen, one number per URL (a later search continues the
numbering). :func:`find_citations` then finds, in the final text of an answer (after the rewrite pass, so the
indices hold for what the client keeps):

- a result's **URL**, written bare or inside a markdown link ``[text](url)`` (the span is then the whole link). URLs
  are found by one scan for ``scheme://`` runs; trailing punctuation is trimmed and only a URL of a result counts;
- a **citation marker** ``[n]`` (or ``[n, m]``) with ``n`` a result's number: the prompt that hands the model the
  results numbers them and asks for these markers (:meth:`CitationSources.prompt_block`);
- a result's **title** (at least :data:`MIN_TITLE_CHARS` characters, case-insensitive, at word boundaries).

Spans that overlap an earlier one are dropped (a title inside a markdown link's text is the link's). Each span
becomes ``{"type": "url_citation", "url", "title", "start_index", "end_index"}`` with Python string indices (code
points) into the text, ``end_index`` exclusive (``text[start_index:end_index]`` is the cited span), in text order,
at most ``limit`` of them.

:func:`with_source_list` is for models too small to cite (an upstream with ``list_sources``, the embedded models by
default): an answer that cites none of the results gets a ``Sources:`` line naming them (by title, or by URL when
the title is short or missing), which :func:`find_citations` then annotates like any citation.

Cost: one regular-expression pass for URLs and one for markers, each without nested quantifiers (linear), plus one
``str.find`` sweep per result title over the text: O(text x results), and the number of results is bounded by
``tools.max_results`` per search and the tool rounds. Titles longer than :data:`MAX_MATCH_CHARS` are not matched as
text (only by URL or marker); a URL costs at most nine dictionary look-ups of at most 4,096 characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_MATCH_CHARS", "MIN_TITLE_CHARS", "CitationSources", "Source", "find_citations", "with_source_list"]

MIN_TITLE_CHARS = 8  # shorter titles ("Doc", "Home") occur in ordinary prose: not evidence of a citation
MAX_MATCH_CHARS = 300
_MAX_LINK_TEXT = 300  # how far back from "](" a markdown link's "[" may be
_MAX_URL_CHARS = 4096  # a longer scheme:// run is never a result's URL
_MAX_TRIM = 8  # trailing punctuation characters tried off a URL ("https://x.org/a).")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,15}://[^\s<>\"'`]+")
_MARKER = re.compile(r"\[(\d{1,3}(?:, ?\d{1,3}){0,9})\]")
_TRAILING = ".,;:!?)]}>*_'\""


@dataclass(frozen=True, slots=True)
class Source:
    """One search result a citation can point at; ``number`` is the ``[n]`` the model was told to use."""

    number: int
    url: str
    title: str
    snippet: str = ""


class CitationSources:
    """The search results of one response, numbered. ``add_results`` never raises on odd tool output."""

    def __init__(self) -> None:
        self._by_url: dict[str, Source] = {}
        self.sources: list[Source] = []

    def __bool__(self) -> bool:
        return bool(self.sources)

    def add_results(self, output: str) -> list[Source]:
        """Add the results of one ``web_search`` call (its JSON output); returns its results with their numbers
        (a URL seen before keeps its number)."""
        try:
            value: Any = json.loads(output)
        except (ValueError, RecursionError):
            return []
        if isinstance(value, dict):
            value = value.get("results", [])
        found: list[Source] = []
        for row in value if isinstance(value, list) else []:
            if not isinstance(row, dict) or not isinstance(row.get("url"), str) or not row["url"].strip():
                continue
            url = row["url"].strip()
            source = self._by_url.get(url)
            if source is None:
                title = row.get("title")
                snippet = row.get("snippet", row.get("content"))
                source = Source(len(self.sources) + 1, url, title.strip() if isinstance(title, str) else "",
                                snippet if isinstance(snippet, str) else "")
                self._by_url[url] = source
                self.sources.append(source)
            found.append(source)
        return found

    def prompt_block(self, results: Iterable[Source]) -> str:
        """The results as the model sees them: numbered, so it can cite them as ``[n]``."""
        lines = []
        for s in results:
            lines.append(f"[{s.number}] {s.title or s.url}\n    URL: {s.url}")
            if s.snippet:
                lines.append(f"    {' '.join(s.snippet.split())[:400]}")
        return "\n".join(lines)

    def lookup_url(self, url: str) -> Source | None:
        """The source of ``url`` as written in a text (a trailing slash either way matches)."""
        found = self._by_url.get(url)
        if found is None:
            found = self._by_url.get(url[:-1] if url.endswith("/") else url + "/")
        return found


def find_citations(text: str, sources: CitationSources, *, limit: int = 64) -> list[dict[str, Any]]:
    """The ``url_citation`` annotations of ``text`` (see the module docstring); empty without sources."""
    if not sources or not text or limit <= 0:
        return []
    spans: list[tuple[int, int, Source]] = []
    spans += _url_spans(text, sources)
    spans += _marker_spans(text, sources)
    spans += _title_spans(text, sources.sources)
    spans.sort(key=lambda s: (s[0], -s[1]))
    out: list[dict[str, Any]] = []
    last_end = -1
    last: tuple[int, int] = (-1, -1)
    for start, end, source in spans:
        if start < last_end and (start, end) != last:
            continue  # inside (or across) a span already cited; "[1, 2]" is one span citing two results
        out.append({"type": "url_citation", "url": source.url, "title": source.title or source.url,
                    "start_index": start, "end_index": end})
        last_end, last = end, (start, end)
        if len(out) >= limit:
            break
    return out


def with_source_list(text: str, sources: CitationSources, *, limit: int = 5) -> str:
    """``text`` with a ``Sources:`` line naming up to ``limit`` of the results, when ``text`` (non-blank) cites none
    of them; else ``text`` unchanged."""
    if not sources or not text.strip() or find_citations(text, sources, limit=1):
        return text
    names = []
    for source in sources.sources[:limit]:
        title = " ".join(source.title.split())
        usable = MIN_TITLE_CHARS <= len(title) <= MAX_MATCH_CHARS and ";" not in title
        names.append(title if usable else source.url)
    return f"{text.rstrip()}\n\nSources: {'; '.join(names)}"


def _url_spans(text: str, sources: CitationSources) -> list[tuple[int, int, Source]]:
    spans: list[tuple[int, int, Source]] = []
    for match in _URL.finditer(text):
        start, end = match.span()
        url = match.group()
        if len(url) > _MAX_URL_CHARS:
            continue  # no result has such a URL; trimming it would hash it again and again
        source = sources.lookup_url(url)
        trimmed = 0
        while source is None and url and url[-1] in _TRAILING and trimmed < _MAX_TRIM:
            url, end, trimmed = url[:-1], end - 1, trimmed + 1
            source = sources.lookup_url(url)
        if source is None:
            continue
        spans.append((*_markdown_link(text, start, end), source))
    return spans


def _markdown_link(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` widened to the whole ``[text](url)`` when the URL is a markdown link's target."""
    if start < 2 or text[start - 2:start] != "](" or end >= len(text) or text[end] != ")":
        return start, end
    opening = text.rfind("[", max(0, start - 2 - _MAX_LINK_TEXT), start - 2)
    if opening < 0 or "\n" in text[opening:start]:
        return start, end
    return opening, end + 1


def _marker_spans(text: str, sources: CitationSources) -> list[tuple[int, int, Source]]:
    spans: list[tuple[int, int, Source]] = []
    count = len(sources.sources)
    for match in _MARKER.finditer(text):
        if match.end() < len(text) and text[match.end()] == "(":
            continue  # a markdown link's text ("[1](url)"): the URL decides
        numbers = [int(n) for n in match.group(1).replace(" ", "").split(",")]
        cited = [sources.sources[n - 1] for n in numbers if 1 <= n <= count]
        if len(cited) == len(numbers):  # "[1, 9]" with 9 not a result: not a citation marker
            start = match.start()
            spans.extend((start, match.end(), s) for s in dict.fromkeys(cited))
    return spans


def _title_spans(text: str, sources: list[Source]) -> list[tuple[int, int, Source]]:
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer would shift every index
        lowered = text
    spans: list[tuple[int, int, Source]] = []
    for source in sources:
        title = source.title.lower() if lowered is not text else source.title
        if len(title) < MIN_TITLE_CHARS or len(title) > MAX_MATCH_CHARS:
            continue
        at = lowered.find(title)
        while at >= 0:
            end = at + len(title)
            if _word_edge(text, at - 1) and _word_edge(text, end):
                spans.append((at, end, source))
            at = lowered.find(title, end)
    return spans


def _word_edge(text: str, index: int) -> bool:
    return index < 0 or index >= len(text) or not text[index].isalnum()
