"""Gateway tests keep their durable data (the default SQLite file for background responses) in a temporary folder,
never in the user's ~/.local/share/respstream."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = os.environ.get("RESPSTREAM_DATA_DIR")
    os.environ["RESPSTREAM_DATA_DIR"] = str(tmp_path_factory.mktemp("respstream-data"))
    yield
    if before is None:
        os.environ.pop("RESPSTREAM_DATA_DIR", None)
    else:
        os.environ["RESPSTREAM_DATA_DIR"] = before
