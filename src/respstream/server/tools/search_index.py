"""The embedded ``web_search`` provider: a local SQLite FTS5 index of documents (markdown, text, HTML).

How this works: one table ``docs`` (FTS5, porter stemming over unicode61) with ``title``, ``url`` (unindexed) and
``body``. ``respstream index FOLDER`` fills it; the gateway's default corpus (``server/corpus/``, the project's own
notes) is indexed on first use when the index is empty. Queries are free text: each word becomes a quoted FTS5 term
joined with ``OR`` and ranked by bm25, so user punctuation can never be FTS5 syntax. All calls are synchronous;
callers run them in a worker thread.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from respstream.server.tools.html_text import html_to_text

__all__ = ["DEFAULT_CORPUS", "SearchIndex", "default_index_path", "read_document"]

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "corpus"
SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm")
_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_DOC_BYTES = 5 << 20


def default_index_path() -> Path:
    """``$RESPSTREAM_DATA_DIR/search.db``, else ``$XDG_DATA_HOME/respstream/search.db`` (``~/.local/share``)."""
    base = os.environ.get("RESPSTREAM_DATA_DIR")
    if base:
        return Path(base) / "search.db"
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "respstream" / "search.db"


def read_document(path: Path) -> tuple[str, str]:
    """``(title, text)`` of one file: the first markdown heading, the HTML ``<title>``, or the file name."""
    raw = path.read_bytes()[:_MAX_DOC_BYTES].decode("utf-8", "replace")
    if path.suffix.lower() in (".html", ".htm"):
        title, text = html_to_text(raw)
        return title or path.stem, text
    for line in raw.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or path.stem, raw
        if line.strip():
            break
    return path.stem.replace("-", " ").replace("_", " "), raw


class SearchIndex:
    """A thread-safe handle on one FTS5 database file (created on first use). Raises sqlite3.Error on a broken file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
                "title, url UNINDEXED, body, tokenize='porter unicode61')"
            )
            conn.commit()
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def count(self) -> int:
        with self._lock:
            row = self._db().execute("SELECT count(*) FROM docs").fetchone()
            return int(row[0])

    def add(self, title: str, url: str, body: str) -> None:
        """Insert or replace the document with this ``url``."""
        with self._lock:
            db = self._db()
            db.execute("DELETE FROM docs WHERE url = ?", (url,))
            db.execute("INSERT INTO docs (title, url, body) VALUES (?, ?, ?)", (title, url, body))
            db.commit()

    def add_folder(self, folder: str | os.PathLike[str], *, url_prefix: str | None = None) -> int:
        """Index every ``.md``/``.txt``/``.html`` file under ``folder`` (recursively). Returns how many."""
        root = Path(folder)
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        rows: list[tuple[str, str, str]] = []
        for path in files:
            title, text = read_document(path)
            rel = path.relative_to(root).as_posix()
            url = f"{url_prefix.rstrip('/')}/{rel}" if url_prefix else path.resolve().as_uri()
            rows.append((title, url, text))
        self._add_many(rows)
        return len(rows)

    def _add_many(self, rows: Iterable[tuple[str, str, str]]) -> None:
        with self._lock:
            db = self._db()
            for title, url, body in rows:
                db.execute("DELETE FROM docs WHERE url = ?", (url,))
                db.execute("INSERT INTO docs (title, url, body) VALUES (?, ?, ?)", (title, url, body))
            db.commit()

    def ensure_corpus(self, corpus: str | os.PathLike[str] = DEFAULT_CORPUS) -> None:
        """Index the default corpus when the index is empty (first use)."""
        if self.count() == 0 and Path(corpus).is_dir():
            self.add_folder(corpus, url_prefix="respstream://corpus")

    def search(self, query: str, limit: int = 5) -> list[dict[str, str]]:
        """``[{title, url, snippet}]`` best first; ``[]`` for a query without words."""
        words = _WORD.findall(query.lower())[:32]
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))
        with self._lock:
            rows = (
                self._db()
                .execute(
                    "SELECT title, url, snippet(docs, 2, '', '', ' … ', 24) FROM docs WHERE docs MATCH ? "
                    "ORDER BY bm25(docs, 5.0, 0.0, 1.0) LIMIT ?",
                    (match, max(1, min(limit, 50))),
                )
                .fetchall()
            )
        return [{"title": t, "url": u, "snippet": re.sub(r"\s+", " ", s).strip()} for t, u, s in rows]
