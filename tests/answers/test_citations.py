"""The url_citation builder (server/responses/citations.py) and the checker's text.annotation_out_of_range rule."""

from __future__ import annotations

import json
import time

from respstream.protocol.annotation_check import annotation_problems
from respstream.server.responses.citations import CitationSources, find_citations

RESULTS = [
    {"title": "Server-sent events - HTML Standard", "url": "https://html.spec.whatwg.org/multipage/server-sent-events.html",
     "snippet": "The EventSource interface."},
    {"title": "Using server-sent events", "url": "https://developer.mozilla.org/docs/Web/API/Server-sent_events/",
     "snippet": "Developing a web application that uses server-sent events is straightforward."},
    {"title": "Doc", "url": "https://example.org/doc", "snippet": "short title"},
]


def sources(results: list[dict[str, str]] = RESULTS) -> CitationSources:
    found = CitationSources()
    found.add_results(json.dumps(results))
    return found


def spans(text: str, found: CitationSources | None = None) -> list[tuple[str, str]]:
    """(cited text, url) of each annotation, checking its shape on the way."""
    out = []
    for a in find_citations(text, found or sources()):
        assert set(a) == {"type", "url", "title", "start_index", "end_index"} and a["type"] == "url_citation"
        assert 0 <= a["start_index"] < a["end_index"] <= len(text)
        out.append((text[a["start_index"]:a["end_index"]], a["url"]))
    return out


def test_results_are_numbered_once_per_url_across_searches() -> None:
    found = sources()
    assert [(s.number, s.url) for s in found.sources] == [(i + 1, r["url"]) for i, r in enumerate(RESULTS)]
    again = found.add_results(json.dumps([RESULTS[1], {"title": "New", "url": "https://new.example/"}]))
    assert [s.number for s in again] == [2, 4]
    block = found.prompt_block(again)
    assert block.startswith("[2] Using server-sent events\n    URL: https://developer.mozilla.org/")
    assert "[4] New" in block
    # Odd tool output is no source and no error.
    for junk in ("not json", "[1, 2]", '{"results": "x"}', '[{"url": 5}]', '[{"title": "no url"}]', "[" * 5000):
        assert CitationSources().add_results(junk) == []


def test_markers_cite_the_numbered_result() -> None:
    text = "SSE is one long HTTP response [1]. Browsers read it with EventSource [2][1]."
    assert spans(text) == [("[1]", RESULTS[0]["url"]), ("[2]", RESULTS[1]["url"]), ("[1]", RESULTS[0]["url"])]
    # "[1, 2]": one marker, two results; a number that is no result makes it no marker at all.
    assert spans("See [1, 2].") == [("[1, 2]", RESULTS[0]["url"]), ("[1, 2]", RESULTS[1]["url"])]
    assert spans("items[0] and [9] and [1, 9] are not citations") == []


def test_urls_bare_with_punctuation_and_as_markdown_links() -> None:
    url0, url1 = RESULTS[0]["url"], RESULTS[1]["url"]
    text = f"Read {url0}. Or ({url1[:-1]}), or [the MDN guide]({url1}) or <{url0}>."
    assert spans(text) == [(url0, url0), (url1[:-1], url1), (f"[the MDN guide]({url1})", url1), (url0, url0)]
    # A URL that is not a result is never an annotation.
    assert spans("See https://evil.example/x and javascript:alert(1).") == []


def test_titles_case_insensitive_at_word_edges_and_not_short_ones() -> None:
    text = "As using server-sent events explains, and the doc says, Doc is short."
    assert spans(text) == [("using server-sent events", RESULTS[1]["url"])]
    assert spans("misusing server-sent eventsful") == []  # not at word edges
    # A title inside a markdown link is the link's: one annotation, the whole link.
    link = f"[Using server-sent events]({RESULTS[1]['url']})"
    assert spans(f"Read {link} today.") == [(link, RESULTS[1]["url"])]


def test_indices_are_code_points_even_when_lowercasing_changes_length() -> None:
    # "İ".lower() is two characters: titles are then matched case-sensitively, indices still exact.
    text = "İstanbul 🙂 Using server-sent events [2]"
    got = spans(text)
    assert got == [("Using server-sent events", RESULTS[1]["url"]), ("[2]", RESULTS[1]["url"])]
    first = find_citations(text, sources())[0]
    assert first["start_index"] == text.index("Using")


def test_limit_and_no_sources() -> None:
    text = " ".join(["[1]"] * 100)
    assert len(find_citations(text, sources(), limit=5)) == 5
    assert find_citations(text, sources(), limit=0) == []
    assert find_citations(text, CitationSources()) == []


def test_linear_time_on_hostile_text() -> None:
    """Long runs that would make a naive pattern backtrack: the builder stays linear (a ratio, not a time)."""
    found = sources()
    hostile = ["[1" * 20_000, "https://" + ")" * 40_000, "a" * 40_000, "[" + "1, " * 20_000 + "]",
               ("Using server-sent event " * 2_000), "x://" * 10_000]
    plain = "word " * 8_000

    def cost(text: str) -> float:
        start = time.perf_counter()
        for _ in range(3):
            find_citations(text, found)
        return time.perf_counter() - start

    base = cost(plain) + 1e-4
    for text in hostile:
        assert cost(text) / base < 60, text[:20]  # quadratic would be thousands of times the plain text


def test_checker_flags_annotations_outside_the_text() -> None:
    ok = {"type": "url_citation", "url": "u", "title": "t", "start_index": 0, "end_index": 5}
    assert annotation_problems("hello", [ok, {"type": "file_citation", "index": 5}, {"type": "unknown"}]) == []
    assert annotation_problems("hello", [{**ok, "end_index": 6}]) == [
        "annotation 0 (url_citation) spans 0..6 but the text has 5 characters"]
    assert annotation_problems("hello", [{**ok, "start_index": 3, "end_index": 2}])
    assert annotation_problems("hello", [{**ok, "start_index": -1}])
    assert annotation_problems("hello", [{**ok, "start_index": "0"}])[0].endswith("got '0'/5")
    assert annotation_problems("hello", [{"type": "file_path", "index": 9}])
    assert annotation_problems("hello", [{**ok, "end_index": 9}] * 10).__len__() == 3  # bounded report


def test_source_list_for_an_answer_that_cites_nothing() -> None:
    from respstream.server.responses.citations import with_source_list

    found = sources()
    listed = with_source_list("SSE streams events.  ", found)
    assert listed == ("SSE streams events.\n\nSources: Server-sent events - HTML Standard; Using server-sent events; "
                      "https://example.org/doc")  # "Doc" is too short to be matched as a title: its URL instead
    assert spans(listed, found) == [(r["title"] if len(r["title"]) >= 8 else r["url"], r["url"]) for r in RESULTS]
    assert with_source_list("SSE [1].", found) == "SSE [1]."  # cites already
    assert with_source_list("  ", found) == "  " and with_source_list("x", CitationSources()) == "x"
    assert with_source_list("x", found, limit=1) == "x\n\nSources: Server-sent events - HTML Standard"
