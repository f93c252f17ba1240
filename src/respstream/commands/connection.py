"""Where the CLI's client commands connect: one place for every command (stream, chat, resume, get, cancel).

The base URL is ``--url``, else ``$RESPSTREAM_BASE_URL``, else :data:`DEFAULT_URL` (a local gateway), as each
command's ``--help`` says. Why not the library's own default: :class:`~respstream.client.sync.Client` falls back to
``OPENAI_BASE_URL`` and then ``https://api.openai.com/v1`` (a drop-in for the OpenAI SDK), so a command that passed
``None`` through sent the user's prompts off the machine whenever ``OPENAI_API_KEY`` happened to be set. The CLI
always resolves the URL here and hands the client an explicit one; OpenAI is reached only when asked for with
``--url https://api.openai.com/v1`` (or ``RESPSTREAM_BASE_URL``).
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from respstream.client.sync import Client

__all__ = ["DEFAULT_URL", "add_connection_options", "base_url", "open_client"]

DEFAULT_URL: Final = "http://127.0.0.1:8080/v1"
URL_HELP: Final = f"base URL (default: $RESPSTREAM_BASE_URL or {DEFAULT_URL})"
API_KEY_HELP: Final = "API key (default: $RESPSTREAM_API_KEY or $OPENAI_API_KEY)"


def add_connection_options(parser: argparse.ArgumentParser, *,
                           idle_help: str = "give up after S seconds without data (default 60)") -> None:
    """``--url``, ``--api-key`` and ``--idle-timeout``, the same for every client command."""
    parser.add_argument("--url", default=None, help=URL_HELP)
    parser.add_argument("--api-key", default=None, help=API_KEY_HELP)
    parser.add_argument("--idle-timeout", type=float, default=60.0, metavar="S", help=idle_help)


def base_url(args: argparse.Namespace) -> str:
    """``--url`` > ``$RESPSTREAM_BASE_URL`` > :data:`DEFAULT_URL` (never ``OPENAI_BASE_URL`` or OpenAI's)."""
    return getattr(args, "url", None) or os.environ.get("RESPSTREAM_BASE_URL") or DEFAULT_URL


def open_client(args: argparse.Namespace) -> Client:
    """A client for the parsed connection options (the caller closes it)."""
    return Client(base_url(args), getattr(args, "api_key", None), idle_timeout=getattr(args, "idle_timeout", 60.0))
