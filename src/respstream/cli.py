"""``respstream``: one entry point, one module per command.

Each command module exposes ``register(subparsers)`` (adds its parser and sets ``func``). The contract of every
command (flags, JSON fields, exit codes) is DESIGN §3; scripts rely on it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# command -> module that registers it. Imported lazily so `respstream replay` never pays for the server's imports.
COMMANDS: dict[str, str] = {
    "replay": "respstream.commands.replay",
    "check": "respstream.commands.check",
    "stream": "respstream.commands.stream",
    "chat": "respstream.commands.chat",
    "resume": "respstream.commands.resume",
    "get": "respstream.commands.get",
    "cancel": "respstream.commands.cancel",
    "serve": "respstream.commands.serve",
    "keys": "respstream.commands.keys",
    "index": "respstream.commands.index",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="respstream",
        description="The Responses streaming protocol, both ends: replay, check, stream, chat, resume, get, cancel, "
        "serve."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if command is not None and name != command:
            subparsers.add_parser(name)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            subparsers.add_parser(name, help="(not available in this build)")
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(args_list)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # last resort: a bug must still end in one line, never a traceback
        print(f"respstream {args.command}: internal error: {type(exc).__name__}: {exc} (please report this)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
