"""``respstream chat``: a multi-turn conversation in the terminal, each turn continuing the last through
``previous_response_id`` (the server keeps the history).

Reads one message per line from stdin (a prompt ``you>`` in a terminal; piped lines work too). Commands:
``/reset`` starts a new conversation (forgets the previous response id), ``/history`` lists this session's turns,
``/exit`` (or end of input) quits. Each answer is shown like ``respstream stream`` (live in a terminal, the final
text once otherwise). Exit code: 0 when the session ended normally, else the last turn's ``stream`` code when it
failed (2 for an unreachable server, 130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from respstream.client.sync import Client
from respstream.client.sync_stream import ResponseStream
from respstream.commands.connection import add_connection_options, open_client
from respstream.commands.stream import EXIT_INTERRUPTED, EXIT_USAGE, _fail, option_error, render

__all__ = ["Conversation", "register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("chat", help="a multi-turn conversation (previous_response_id); /reset, /exit",
                                   description="Chat with the gateway: every line is a turn; /reset, /history, "
                                   "/exit.")
    add_connection_options(parser)
    parser.add_argument("--model", default=None, help="model id (the gateway routes 'auto' when omitted)")
    parser.add_argument("--instructions", default=None, help="system instructions (sent with every turn)")
    parser.add_argument("--temperature", type=float, default=None, metavar="T", help="sampling temperature (0-2)")
    parser.add_argument("--max-output-tokens", type=int, default=None, metavar="N")
    parser.add_argument("--tool", action="append", default=[], metavar="NAME", help="enable a server tool; repeatable")
    parser.set_defaults(func=run, json=False, events=False, background=False)


class Conversation:
    """The session's state: the response id the next turn continues, and the turns so far (prompt, answer)."""

    def __init__(self) -> None:
        self.previous_response_id: str | None = None
        self.turns: list[tuple[str, str]] = []

    def reset(self) -> None:
        self.previous_response_id = None
        self.turns.clear()

    def request(self, args: argparse.Namespace, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {"input": prompt, "store": True}
        if self.previous_response_id:
            body["previous_response_id"] = self.previous_response_id
        for key in ("model", "instructions", "temperature", "max_output_tokens"):
            if getattr(args, key, None) is not None:
                body[key] = getattr(args, key)
        if args.tool:
            body["tools"] = [{"type": name} for name in args.tool]
        return body


def _opener(body: dict[str, Any]) -> Callable[[Client], ResponseStream]:
    def open_stream(client: Client) -> ResponseStream:
        return client.stream(**body)

    return open_stream


def run(args: argparse.Namespace) -> int:
    problem = option_error(args)
    if problem is not None:
        return _fail(problem, "chat")
    tty = sys.stdin.isatty()
    conversation = Conversation()
    last_code = 0
    if tty:
        sys.stderr.write("respstream chat: one message per line; /reset starts over, /history, /exit quits\n")
    with open_client(args) as client:
        while True:
            if tty:
                sys.stderr.write("you> ")
                sys.stderr.flush()
            try:
                line = sys.stdin.readline()
            except KeyboardInterrupt:
                sys.stderr.write("\n")
                return EXIT_INTERRUPTED
            if not line:
                return last_code
            prompt = line.strip()
            if not prompt:
                continue
            if prompt in ("/exit", "/quit"):
                return last_code
            if prompt == "/reset":
                conversation.reset()
                sys.stderr.write("(new conversation)\n")
                continue
            if prompt == "/history":
                for number, (asked, answer) in enumerate(conversation.turns, 1):
                    sys.stderr.write(f"{number}. you: {asked}\n   {answer[:200]}\n")
                continue
            body = conversation.request(args, prompt)
            code, result = render(args, _opener(body), command="chat", client=client)
            if code == EXIT_INTERRUPTED:
                return code
            if result is not None and result.response_id and result.status in ("completed", "incomplete"):
                conversation.previous_response_id = result.response_id
                conversation.turns.append((prompt, result.output_text))
            last_code = code if code not in (0, 5) else 0
            if code == EXIT_USAGE and result is None and conversation.previous_response_id is None and not tty:
                return code  # piped input against a server that cannot be reached: stop at the first failure
