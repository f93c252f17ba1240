"""``respstream stream PROMPT``: stream one response live to the terminal (DESIGN §3, a stable contract).

Exit codes are ``replay``'s: 0 completed, 3 failed, 4 error, 5 incomplete, 6 truncated, 8 cancelled, and 2 for bad
input, an unreachable server or an HTTP error before streaming (one line on stderr, never a traceback); 130 on
Ctrl-C. ``--json`` prints the ``replay --json`` object; ``--events`` a compact timeline. Works unchanged against
OpenAI (``--url https://api.openai.com/v1`` with ``OPENAI_API_KEY``) and the seed platform.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, Final, TextIO

from respstream.client.sync import Client
from respstream.client.sync_stream import ResponseStream
from respstream.client.terminal import LiveRenderer, Spinner, Style, Timeline
from respstream.commands.connection import DEFAULT_URL, add_connection_options, open_client
from respstream.errors import APIStatusError, BadInputError, RespstreamError, StreamTruncated
from respstream.protocol.assembler import AssembledResponse

__all__ = ["DEFAULT_URL", "EXIT_CODES", "build_request", "option_error", "register", "render", "run"]

# The same table as `respstream replay` (DESIGN §3).
EXIT_CODES: Final[dict[str, int]] = {
    "completed": 0,
    "failed": 3,
    "error": 4,
    "incomplete": 5,
    "truncated": 6,
    "cancelled": 8,
}
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stream",
        help="stream one response live to the terminal",
        description="POST /v1/responses with stream: true and show the answer as it is generated: text, tool "
        "calls, routing, rewrites, usage and timing. Exit codes as `replay`: 0 completed, 3 failed, 4 error, "
        "5 incomplete, 6 truncated, 8 cancelled, 2 bad input / unreachable / HTTP error.",
    )
    parser.add_argument("prompt", metavar="PROMPT", help="the input text, or - to read it from stdin")
    parser.add_argument("--model", default=None, help="model id (the gateway routes 'auto' when omitted)")
    parser.add_argument("--background", action="store_true",
                        help="background response: a dropped connection resumes with starting_after")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--json", action="store_true", help="print the assembled response as JSON (as replay --json)")
    view.add_argument("--events", action="store_true", help="print a compact timeline, one line per event")
    parser.add_argument("--ws", action="store_true",
                        help="use WebSocket mode (one socket to /v1/responses) instead of an SSE POST")
    parser.add_argument("--instructions", default=None, help="system instructions")
    parser.add_argument("--temperature", type=float, default=None, metavar="T", help="sampling temperature (0-2)")
    parser.add_argument("--previous-response-id", dest="previous_response_id", default=None, metavar="ID",
                        help="continue the conversation of a stored response")
    parser.add_argument("--tool", action="append", default=[], metavar="NAME",
                        help="enable a server tool by type (web_search, calculator, ...); repeatable")
    parser.add_argument("--max-output-tokens", type=int, default=None, metavar="N")
    add_connection_options(parser, idle_help="give up (or resume, with --background) after S seconds without data "
                           "(default 60)")
    parser.set_defaults(func=run)


def build_request(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    """The POST body for the parsed arguments (``stream: true`` is added by the client)."""
    request: dict[str, Any] = {"input": prompt}
    if args.model:
        request["model"] = args.model
    if args.instructions:
        request["instructions"] = args.instructions
    if args.tool:
        request["tools"] = [{"type": name} for name in args.tool]
    if args.max_output_tokens is not None:
        request["max_output_tokens"] = args.max_output_tokens
    if getattr(args, "temperature", None) is not None:
        request["temperature"] = args.temperature
    if getattr(args, "previous_response_id", None):
        request["previous_response_id"] = args.previous_response_id
    if args.background:
        request["background"] = True
    return request


def _fail(message: str, command: str = "stream") -> int:
    print(f"respstream {command}: {message}", file=sys.stderr)
    return EXIT_USAGE


def option_error(args: argparse.Namespace) -> str | None:
    """The one-line complaint about an option value out of range, or None (exit 2 with it; argparse has already
    checked the types)."""
    temperature = getattr(args, "temperature", None)
    if temperature is not None and not 0 <= temperature <= 2:
        return f"--temperature must be between 0 and 2, not {temperature:g}"
    tokens = getattr(args, "max_output_tokens", None)
    if tokens is not None and tokens < 1:
        return f"--max-output-tokens must be at least 1, not {tokens}"
    idle = getattr(args, "idle_timeout", None)
    if idle is not None and not idle > 0:
        return f"--idle-timeout must be a positive number of seconds, not {idle:g}"
    after = getattr(args, "starting_after", None)
    if after is not None and after < -1:
        return f"--starting-after must be -1 or more, not {after}"
    return None


def run(args: argparse.Namespace) -> int:
    problem = option_error(args)
    if problem is not None:
        return _fail(problem)
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        return _fail("the prompt is empty")
    request = build_request(args, prompt)
    return render(args, lambda client: client.stream(**request), ws_request=request if args.ws else None)[0]


def render(
    args: argparse.Namespace, open_stream: Callable[[Client], ResponseStream], *, command: str = "stream",
    client: Client | None = None, ws_request: dict[str, Any] | None = None,
) -> tuple[int, AssembledResponse | None]:
    """Open a stream with ``open_stream`` and show it (``--json`` / ``--events`` / live text). Returns the exit code
    (DESIGN §3) and the assembled response (None when nothing came). ``client``: reuse one (chat).
    ``ws_request``: send this request over one WebSocket turn instead (``--ws``)."""
    tty = sys.stdout.isatty()
    color = tty and "NO_COLOR" not in os.environ
    style = Style(color)
    meta: TextIO = sys.stdout if tty else sys.stderr
    spinner = Spinner(sys.stderr, enabled=sys.stderr.isatty() and not args.json and not args.events)
    renderer = LiveRenderer(sys.stdout, meta, style=style, spinner=spinner, live=tty)
    timeline = Timeline(sys.stdout, style=style) if args.events else None
    result: AssembledResponse | None = None
    error: RespstreamError | None = None
    stream: ResponseStream | None = None
    own = client is None
    active = client or open_client(args)
    try:
        try:
            spinner.start()
            if ws_request is not None:
                result, error = _over_websocket(active, ws_request, renderer, timeline, args.json)
                return _report(args, renderer, result, error), result
            stream = open_stream(active)
            with stream:
                if not args.json and timeline is None:
                    stream.on_tool_call(renderer.tool_call)
                for event in stream:
                    if timeline is not None:
                        timeline.event(event)
                    elif not args.json:
                        renderer.event(event)
                try:
                    result = stream.result()
                except (BadInputError, APIStatusError):
                    raise
                except RespstreamError as exc:
                    error = exc
                    result = getattr(exc, "response", None) or stream.snapshot()
        except KeyboardInterrupt:
            spinner.stop()
            note = "interrupted"
            if getattr(args, "background", False) and stream is not None and stream.response_id:
                # A background response runs on: say how to pick it up again.
                note += (f"; background response {stream.response_id} continues (resume with: respstream resume "
                         f"{stream.response_id} --starting-after {stream.last_sequence_number})")
            sys.stderr.write(f"\n{note}\n")
            return EXIT_INTERRUPTED, None
        except (BadInputError, APIStatusError) as exc:
            spinner.stop()
            return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, command), None
        except StreamTruncated as exc:  # raised by iteration: a foreground stream dropped
            spinner.stop()
            error, result = exc, exc.partial
        except RespstreamError as exc:  # unreachable server, timeouts before the first byte
            spinner.stop()
            return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, command), None
        finally:
            spinner.stop()
    finally:
        if own:
            active.close()
    return _report(args, renderer, result, error), result


def _over_websocket(client: Client, request: dict[str, Any], renderer: LiveRenderer, timeline: Timeline | None,
                    quiet: bool) -> tuple[AssembledResponse | None, RespstreamError | None]:
    """``--ws``: the same rendering, the events read from one WebSocket turn. Raises what ``connect()`` raises."""
    with client.connect() as conn:
        events = conn.stream(**request)
        try:
            for event in events:
                if timeline is not None:
                    timeline.event(event)
                elif not quiet:
                    renderer.event(event)
        except StreamTruncated as exc:
            return exc.partial, exc
        try:
            return conn.last.result(), None
        except (BadInputError, APIStatusError):
            raise
        except RespstreamError as exc:
            return getattr(exc, "response", None) or conn.last.core.result, exc


def _report(
    args: argparse.Namespace, renderer: LiveRenderer, result: AssembledResponse | None, error: RespstreamError | None
) -> int:
    if result is None:
        return _fail(str(error) if error else "no response")
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
        sys.stdout.flush()
    elif args.events:
        sys.stderr.write(renderer.stats(result) + "\n")
        if error is not None:
            sys.stderr.write(f"{result.status}: {error}\n")
    else:
        renderer.finish(result, error)
    return EXIT_CODES.get(result.status, EXIT_USAGE)
