"""web_search over a local FTS5 index (fixture folder, default corpus, SearxNG over loopback), the index command,
current_datetime, and the registry's failure handling."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from respstream.cli import main
from respstream.server.tools import TOOL_NAMES, ToolRegistry
from respstream.server.tools.clock import TimeZoneError, current_datetime
from respstream.server.tools.search_index import SearchIndex

from .conftest import LoopbackServer


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "tulips.md").write_text("# Tulips in Holland\n\nTulip fields bloom in April near Lisse.\n")
    (folder / "sub" / "bikes.txt").write_text("Amsterdam has more bicycles than people.\n")
    (folder / "canal.html").write_text(
        "<html><head><title>Canals</title></head><body><p>The canal ring dates from the 17th century.</p></body></html>"
    )
    (folder / "ignored.bin").write_bytes(b"\x00tulips\x00")
    return folder


def test_fts_index_and_search(docs: Path, tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "idx.db")
    assert index.add_folder(docs) == 3
    results = index.search("when do tulips bloom?")
    assert results[0]["title"] == "Tulips in Holland"
    assert results[0]["url"].startswith("file://") and results[0]["url"].endswith("tulips.md")
    assert "Lisse" in results[0]["snippet"]
    assert index.search("canal")[0]["title"] == "Canals"
    assert index.search("bicycles")[0]["title"] == "bikes"
    # FTS5 syntax in the query is just words; no words means no results.
    assert index.search('tulip" OR (NEAR AND *') != []
    assert index.search("?!") == []
    # Re-indexing replaces instead of duplicating.
    index.add_folder(docs)
    assert index.count() == 3
    index.close()


async def test_web_search_tool_builds_default_corpus(tmp_path: Path) -> None:
    tools = ToolRegistry({"index_path": str(tmp_path / "search.db")})
    result = await tools.run("web_search", json.dumps({"query": "circuit breaker routing category"}))
    assert result.status == "completed"
    hits = json.loads(result.output)
    assert hits and set(hits[0]) == {"title", "url", "snippet"}
    assert hits[0]["url"].startswith("respstream://corpus/")


async def test_web_search_with_custom_folder(docs: Path, tmp_path: Path) -> None:
    tools = ToolRegistry({"index_path": str(tmp_path / "s.db"), "corpus": str(docs), "max_results": 1})
    hits = json.loads((await tools.run("web_search", '{"query": "canal ring"}')).output)
    assert [h["title"] for h in hits] == ["Canals"]


async def test_searxng_provider(web: LoopbackServer) -> None:
    tools = ToolRegistry({"search_provider": "searxng", "searxng_url": web.url("")})
    result = await tools.run("web_search", '{"query": "eu ai act"}')
    assert result.status == "completed"
    assert json.loads(result.output) == [
        {"title": "Result for eu ai act", "url": "https://example.org/a", "snippet": "snippet a"}
    ]
    down = ToolRegistry({"search_provider": "searxng", "searxng_url": web.url("/missing")})
    failed = await down.run("web_search", '{"query": "x"}')
    assert failed.status == "failed" and "HTTP 404" in failed.output


def test_index_command(docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.db"
    assert main(["index", str(docs), "--db", str(db), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {"schema_version": 1, "db": str(db), "indexed": 3, "documents": 3}
    assert SearchIndex(db).search("bicycles")[0]["title"] == "bikes"
    assert main(["index", str(tmp_path / "missing"), "--db", str(db)]) == 2
    assert "is not a folder" in capsys.readouterr().err


FIXED = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Europe/Amsterdam", "2026-07-01T14:00:00+02:00"),
        ("America/New_York", "2026-07-01T08:00:00-04:00"),
        ("Asia/Kolkata", "2026-07-01T17:30:00+05:30"),
        ("UTC", "2026-07-01T12:00:00+00:00"),
        (None, "2026-07-01T12:00:00+00:00"),
    ],
)
def test_datetime_zones(zone: str | None, expected: str) -> None:
    assert current_datetime(zone, now=lambda: FIXED) == expected


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "", "x" * 100, "/etc/localtime"])
def test_bad_zones(zone: str) -> None:
    with pytest.raises(TimeZoneError):
        current_datetime(zone or " ")


async def test_registry_contract() -> None:
    tools = ToolRegistry()
    assert tools.names() == set(TOOL_NAMES)
    assert [s["function"]["name"] for s in tools.specs()] == list(TOOL_NAMES)
    for spec in tools.specs():
        assert spec["type"] == "function" and spec["function"]["parameters"]["type"] == "object"
    now = await tools.run("current_datetime", '{"timezone": "Europe/Amsterdam"}')
    assert now.status == "completed" and datetime.fromisoformat(now.output.rsplit(" ", 1)[1]).tzinfo is not None
    weekday = datetime.fromisoformat(now.output.rsplit(" ", 1)[1]).strftime("%A")
    assert now.output.startswith(weekday) and " in Europe/Amsterdam (CE" in now.output  # CET or CEST
    bad_zone = await tools.run("current_datetime", '{"timezone": "Nowhere/Land"}')
    assert bad_zone.status == "failed" and "unknown time zone" in bad_zone.output
    assert (await tools.run("nope", "{}")).status == "failed"
    bad_json = await tools.run("calculator", '{"expression": ')
    assert bad_json.status == "failed" and "not valid JSON" in bad_json.output
    not_object = await tools.run("calculator", "[1]")
    assert not_object.status == "failed" and "JSON object" in not_object.output
    deep = await tools.run("calculator", "[" * 100_000)
    assert deep.status == "failed"


def test_registry_config_validation() -> None:
    limited = ToolRegistry({"enabled": ["calculator"]})
    assert limited.names() == {"calculator"} and len(limited.specs()) == 1
    with pytest.raises(ValueError, match="unknown tools config"):
        ToolRegistry({"typo": 1})
    with pytest.raises(ValueError, match="unknown tool"):
        ToolRegistry({"enabled": ["shell"]})
    with pytest.raises(ValueError, match="searxng_url"):
        ToolRegistry({"search_provider": "searxng"})
