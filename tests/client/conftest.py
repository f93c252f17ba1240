"""Client tests: a loopback replay server (a test double, see tests/fakes/replay_server.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make `fakes` importable

from fakes.replay_server import ReplayServer, text_transcript


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer(text_transcript(background=True)) as srv:
        yield srv
