"""HTML -> readable plain text (no scripts, styles or markup), in time linear in the page size on any input.

Why not ``html.parser``: it rescans the rest of the document for every unclosed ``<`` (a 90 KB page of ``"<a " * 30000``
took 42 s), and fetched pages are hostile input. This scanner finds each ``<`` with ``str.find``, reads a tag with one
possessive pattern (quoted attribute values may contain ``>``) and searches for the end of a comment, a declaration or a
raw-text element (``script``, ``style``, ``title``) once. What cannot be closed before the end of the input (an
unclosed tag, comment or quote) ends the document, as in a browser, so no character is scanned twice.

It keeps what a reader sees: text outside ``script``/``style``/``head``... (see ``_SKIP``), a line break around block
elements, character references decoded, and the ``<title>``.
"""

from __future__ import annotations

import html
import re

__all__ = ["html_to_text"]

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "object", "head"}
_BLOCK = {
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer", "nav", "aside",
    "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "hr", "dt", "dd", "main", "figure", "form",
}  # fmt: skip
_RAW_TEXT = {"script", "style", "title"}  # content up to the matching end tag is text, not markup

_MARKUP_START = re.compile(r"<(?:/?[A-Za-z]|[!?])")  # a "<" before anything else is text, found without a Python loop
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*+)")
# The rest of a tag up to its ">": runs of plain characters or whole quoted values. Possessive, so a missing ">"
# fails after one pass instead of backtracking.
_TAG_REST = re.compile(r"""(?:[^>"']++|"[^"]*+"|'[^']*+')*+>""")
_RAW_END = {name: re.compile(rf"</{name}(?=[\s/>])", re.IGNORECASE) for name in _RAW_TEXT}
_SPACES = re.compile(r"[ \t\f\v\xa0]+")
_BLANK_RUNS = re.compile(r"\n{3,}")
_WHITESPACE = re.compile(r"\s+")


class _Extractor:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skip_depth = 0

    def data(self, text: str) -> None:
        if text and not self.skip_depth:
            self.parts.append(html.unescape(text))

    def start(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip_depth += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def end(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def feed(self, page: str) -> None:
        pos = search = 0  # text runs from pos; the next "<" is looked for from search
        while (found := _MARKUP_START.search(page, search)) is not None:
            lt = found.start()
            after = self._markup(page, pos, lt)
            if after is None:  # a lone "<" is text: keep it in the current run
                search = lt + 1
                continue
            if after < 0:  # unclosed markup: the rest of the input is inside it
                return
            pos = search = after
        self.data(page[pos:])

    def _markup(self, page: str, pos: int, lt: int) -> int | None:
        """Consume the markup at ``page[lt] == "<"`` (``page[pos:lt]`` is the text since the previous markup): the
        position after it, -1 when it runs to the end, None when this ``<`` starts no markup."""
        tag = _TAG.match(page, lt)
        if tag is None and not page.startswith(("<!", "<?"), lt):
            return None
        self.data(page[pos:lt])
        if page.startswith("<!--", lt):
            end = page.find("-->", lt + 4)
            return -1 if end == -1 else end + 3
        if page.startswith(("<!", "<?"), lt):  # doctype, CDATA, processing instruction
            end = page.find(">", lt + 2)
            return -1 if end == -1 else end + 1
        assert tag is not None
        rest = _TAG_REST.match(page, tag.end())
        if rest is None:
            return -1
        name, closing, after = tag.group(2).lower(), bool(tag.group(1)), rest.end()
        if closing:
            self.end(name)
            return after
        self_closing = page[after - 2] == "/"
        if name in _RAW_TEXT and not self_closing:
            raw_end = _RAW_END[name].search(page, after)
            content = page[after : raw_end.start() if raw_end else len(page)]
            if name == "title":
                self.title.append(html.unescape(content))
            if raw_end is None:
                return -1
            close = page.find(">", raw_end.end())
            return -1 if close == -1 else close + 1
        self.start(name)
        if self_closing:
            self.end(name)
        return after


def html_to_text(page: str) -> tuple[str, str]:
    """``(title, text)``. Never raises on malformed HTML; linear in ``len(page)``."""
    parser = _Extractor()
    parser.feed(page)
    text = "".join(parser.parts)
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines()]
    text = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
    title = _WHITESPACE.sub(" ", "".join(parser.title)).strip()
    return title, text
