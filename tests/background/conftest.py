"""Background-response tests: a real redis-server (tests/plugins/redis_server.py) and a private data folder."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from plugins.redis_server import redis_server

__all__ = ["redis_server"]


@pytest.fixture(scope="session", autouse=True)
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = os.environ.get("RESPSTREAM_DATA_DIR")
    os.environ["RESPSTREAM_DATA_DIR"] = str(tmp_path_factory.mktemp("respstream-data"))
    yield
    if before is None:
        os.environ.pop("RESPSTREAM_DATA_DIR", None)
    else:
        os.environ["RESPSTREAM_DATA_DIR"] = before
