"""Shared fixtures: only general ones live here."""

from __future__ import annotations

from pathlib import Path

import pytest

TRANSCRIPTS = Path(__file__).parent / "transcripts"


@pytest.fixture
def transcripts() -> Path:
    """The folder of hand-written ``.sse`` transcripts (tests/transcripts)."""
    return TRANSCRIPTS
