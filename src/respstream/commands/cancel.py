"""``respstream cancel ID [--json]``: cancel a background response; prints the response as ``get`` does.

Exit codes: 8 when it ends cancelled, otherwise as ``get`` (a response already finished keeps its status: 0, 3,
5); 2 for an unknown id, a response that is not a background one, or an unreachable server (one line on stderr).
"""

from __future__ import annotations

import argparse
from typing import Any

from respstream.commands import get
from respstream.commands.connection import add_connection_options

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("cancel", help="cancel a background response",
                                   description="POST /v1/responses/ID/cancel and print the response.")
    parser.add_argument("response_id", metavar="ID", help="the response id (resp_...)")
    add_connection_options(parser)
    parser.add_argument("--json", action="store_true", help="print the Response object as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return get.run(args, command="cancel")
