"""Shared fixtures: only general ones live here."""

from __future__ import annotations

from pathlib import Path

import pytest

# Fixtures for real services the tests start themselves (a redis-server on a loopback port, a 6-node Redis Cluster).
pytest_plugins = ["plugins.redis_server", "plugins.redis_cluster"]

TRANSCRIPTS = Path(__file__).parent / "transcripts"


@pytest.fixture
def transcripts() -> Path:
    """The folder of hand-written ``.sse`` transcripts (tests/transcripts)."""
    return TRANSCRIPTS


@pytest.fixture(autouse=True, scope="session")
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep every gateway and search index the tests start out of the real ~/.local/share/respstream."""
    import os

    os.environ["RESPSTREAM_DATA_DIR"] = str(tmp_path_factory.mktemp("respstream-data"))
