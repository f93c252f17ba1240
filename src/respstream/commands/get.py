"""``respstream get ID [--json]``: a stored response: status, model, output text (or the whole object with --json).

Exit codes: the status as in ``replay`` (0 completed, 3 failed, 5 incomplete, 8 cancelled; ``queued`` /
``in_progress`` are 0: the call itself worked), 2 for an unknown id, bad input or an unreachable server (one line on
stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from respstream.commands.connection import add_connection_options, open_client
from respstream.commands.stream import EXIT_CODES, _fail, option_error
from respstream.errors import RespstreamError

__all__ = ["print_response", "register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("get", help="show a stored response",
                                   description="GET /v1/responses/ID and print its status and output text.")
    parser.add_argument("response_id", metavar="ID", help="the response id (resp_...)")
    add_connection_options(parser)
    parser.add_argument("--json", action="store_true", help="print the Response object as JSON")
    parser.set_defaults(func=run)


def output_text(response: dict[str, Any]) -> str:
    """The output_text parts of the message items, joined (DESIGN §3's rule for ``output_text``)."""
    parts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    parts.append(str(part.get("text") or ""))
    return "".join(parts)


def print_response(response: Any, as_json: bool) -> int:
    if not isinstance(response, dict):
        print("respstream: the server answered something that is not a Response object", file=sys.stderr)
        return 2
    status = str(response.get("status") or "")
    if as_json:
        sys.stdout.write(json.dumps(response, ensure_ascii=False) + "\n")
    else:
        sys.stderr.write(f"{response.get('id')} · {status} · {response.get('model')}\n")
        text = output_text(response)
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        error = response.get("error")
        if isinstance(error, dict):
            sys.stderr.write(f"✗ {error.get('code')}: {error.get('message')}\n")
    sys.stdout.flush()
    return EXIT_CODES.get(status, 0)


def run(args: argparse.Namespace, *, command: str = "get") -> int:
    problem = option_error(args)
    if problem is not None:
        return _fail(problem, command)
    if not args.response_id.strip():
        return _fail("the response id is empty", command)
    try:
        with open_client(args) as client:
            response = client.cancel(args.response_id.strip()) if command == "cancel" else client.retrieve(
                args.response_id.strip())
    except RespstreamError as exc:
        return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, command)
    return print_response(response, args.json)

