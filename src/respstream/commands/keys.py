"""``respstream keys create|list|revoke``: manage the gateway's API keys (stored hashed; a key is shown once)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

__all__ = ["register"]

DEFAULT_FILE = "respstream-keys.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("keys", help="manage API keys (hashed at rest)")
    parser.add_argument("--file", default=None,
                        help=f"keys file (default: $RESPSTREAM_KEYS_FILE or ./{DEFAULT_FILE})")
    sub = parser.add_subparsers(dest="keys_command", metavar="ACTION")
    create = sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", default="", help="a label for the key")
    create.add_argument("--json", action="store_true", help="print JSON")
    listing = sub.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from respstream.server.http.auth import KeysFileError, KeyStore

    path = args.file or os.environ.get("RESPSTREAM_KEYS_FILE") or DEFAULT_FILE
    keys = KeyStore(path)
    try:
        if args.keys_command == "create":
            key, entry = keys.create(args.name)
            if args.json:
                print(json.dumps({"key": key, "id": entry["id"], "name": entry["name"], "file": path}))
            else:
                print(key)
                print(f"created key {entry['id']} in {path} (shown once; the file keeps only its hash)",
                      file=sys.stderr)
            return 0
        if args.keys_command == "list":
            entries = [{k: v for k, v in e.items() if k != "hash"} for e in keys.load()]
            if args.json:
                print(json.dumps(entries))
            else:
                for e in entries:
                    state = "revoked" if e.get("revoked_at") else "active"
                    created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.get("created_at", 0)))
                    print(f"{e['id']}  {e.get('prefix', '')}…  {state:7}  {created}  {e.get('name', '')}")
            return 0
        if args.keys_command == "revoke":
            if keys.revoke(args.key_id):
                print(f"revoked {args.key_id}", file=sys.stderr)
                return 0
            print(f"respstream keys: no active key with id {args.key_id!r} in {path}", file=sys.stderr)
            return 1
    except KeysFileError as exc:  # names the file itself
        print(f"respstream keys: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"respstream keys: {path}: {exc}", file=sys.stderr)
        return 2
    print("respstream keys: choose an action: create, list or revoke", file=sys.stderr)
    return 2
