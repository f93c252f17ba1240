"""For the server tests that drive the gateway with the official OpenAI SDK: the ``sdk`` fixture, a client on the
module's ``srv`` gateway (each module defines ``srv``) without retries (a failure shows as it happened); and
``cli_keys``, API keys made with ``respstream keys create`` for the ownership cases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from respstream.cli import main

from .helpers import ServerThread

__all__ = ["cli_keys", "sdk"]


@pytest.fixture
def sdk(srv: ServerThread) -> Iterator[OpenAI]:
    client = OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=20)
    yield client
    client.close()


def cli_keys(keys_file: Path, capsys: pytest.CaptureFixture[str], count: int = 2) -> list[str]:
    """``count`` keys, each made by ``respstream keys --file KEYS_FILE create --json`` (the secret read from its
    output)."""
    keys = []
    for _ in range(count):
        assert main(["keys", "--file", str(keys_file), "create", "--name", "k", "--json"]) == 0
        keys.append(json.loads(capsys.readouterr().out)["key"])
    return keys
