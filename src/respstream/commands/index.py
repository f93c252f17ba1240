"""``respstream index FOLDER [--db PATH] [--json]``: fill the local ``web_search`` index (SQLite FTS5).

Indexes every ``.md``, ``.markdown``, ``.txt``, ``.html`` and ``.htm`` file under FOLDER (recursively); a file indexed
again replaces its earlier copy. ``--db`` defaults to the gateway's default index path (``$RESPSTREAM_DATA_DIR`` or
the XDG data dir), the same file ``web_search`` reads unless ``tools.index_path`` says otherwise. Exit codes: 0 done,
2 bad folder or unusable database (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from respstream.server.tools.search_index import SearchIndex, default_index_path

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "index",
        help="fill the local web_search index from a folder of documents",
        description="Index .md/.txt/.html files under FOLDER into the SQLite FTS5 index web_search uses.",
    )
    parser.add_argument("folder", metavar="FOLDER", help="folder of documents (searched recursively)")
    parser.add_argument("--db", metavar="PATH", help=f"index file (default: {default_index_path()})")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = Path(args.folder).expanduser()
    if not folder.is_dir():
        print(f"respstream index: {folder} is not a folder", file=sys.stderr)
        return 2
    db = Path(args.db).expanduser() if args.db else default_index_path()
    index = SearchIndex(db)
    try:
        added = index.add_folder(folder)
        total = index.count()
    except (sqlite3.Error, OSError) as exc:
        print(f"respstream index: cannot use index {db}: {exc}", file=sys.stderr)
        return 2
    finally:
        index.close()
    if args.json:
        print(json.dumps({"schema_version": 1, "db": str(db), "indexed": added, "documents": total}))
    else:
        print(f"indexed {added} file(s) from {folder} into {db} ({total} document(s) in the index)")
    return 0
