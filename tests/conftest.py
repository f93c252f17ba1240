"""Shared fixtures: only general ones live here."""

from __future__ import annotations

from pathlib import Path

import pytest

# Fixtures for real services the tests start themselves (a redis-server on a loopback port).
pytest_plugins = ["plugins.redis_server"]

TRANSCRIPTS = Path(__file__).parent / "transcripts"


@pytest.fixture
def transcripts() -> Path:
    """The folder of hand-written ``.sse`` transcripts (tests/transcripts)."""
    return TRANSCRIPTS
