"""``respstream resume ID [--starting-after N]``: stream a stored (background) response again, live.

The same display, ``--json``/``--events`` shapes and exit codes as ``respstream stream`` (DESIGN §3): 0 completed,
3 failed, 4 error, 5 incomplete, 6 truncated, 8 cancelled, 2 bad input / unknown id / unreachable.
"""

from __future__ import annotations

import argparse
from typing import Any

from respstream.commands.connection import add_connection_options
from respstream.commands.stream import _fail, option_error, render

__all__ = ["add_connection_options", "register", "run"]  # add_connection_options: re-exported (old import path)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "resume", help="stream a stored background response again (after a sequence number)",
        description="GET /v1/responses/ID?stream=true[&starting_after=N] and show it like `respstream stream`.")
    parser.add_argument("response_id", metavar="ID", help="the response id (resp_...)")
    parser.add_argument("--starting-after", dest="starting_after", type=int, default=None, metavar="N",
                        help="only events after sequence number N (the last one you saw)")
    add_connection_options(parser)
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--json", action="store_true", help="print the assembled response as JSON (as replay --json)")
    view.add_argument("--events", action="store_true", help="print a compact timeline, one line per event")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problem = option_error(args)
    if problem is not None:
        return _fail(problem, "resume")
    if not args.response_id.strip():
        return _fail("the response id is empty", "resume")
    response_id, after = args.response_id.strip(), args.starting_after
    return render(args, lambda client: client.resume(response_id, starting_after=after), command="resume")[0]
