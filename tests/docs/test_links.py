"""Every relative link in README.md and docs/*.md resolves: the file exists and its ``#anchor`` is a heading there.

Anchors follow GitHub's rule (lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2``... for repeats), so
a renamed heading or a moved section fails here instead of leaving a reader at the top of a page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for _, heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The relative link targets of a page, outside code blocks and code spans."""
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def test_the_slug_rule_is_github_s() -> None:
    assert slug("Server throughput (`benchmarks/server_throughput.py`)") == (
        "server-throughput-benchmarksserver_throughputpy")
    assert slug("Memory: `respstream replay --json` on huge transcripts") == (
        "memory-respstream-replay---json-on-huge-transcripts")
    assert slug("The collector's young generation") == "the-collectors-young-generation"
    assert slug("[Open Responses](https://example.org) suite") == "open-responses-suite"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        name = linked.relative_to(ROOT).as_posix() if linked.is_relative_to(ROOT) else str(linked)
        if not linked.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {name}")
    assert broken == [], f"{page.relative_to(ROOT)}: broken links: {broken}"


def _linked_pages(page: Path) -> set[Path]:
    found = set()
    for target in links(page):
        path_part = target.partition("#")[0]
        linked = (page.parent / path_part).resolve() if path_part else page
        if linked.suffix == ".md" and linked.exists():
            found.add(linked)
    return found


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    """A newcomer starts at the README: no page of docs/ is an orphan (reached in at most two clicks)."""
    readme = ROOT / "README.md"
    first = _linked_pages(readme)
    reached = first | {p for page in first for p in _linked_pages(page)}
    orphans = sorted(p.name for p in PAGES if p != readme and p.resolve() not in reached)
    assert orphans == [], f"docs pages no link path from README.md reaches: {orphans}"
