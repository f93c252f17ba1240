"""The client matrix's gateway: the real app on loopback with WebSocket mode on, one per dialect and module, on
the SIMULATED scripted upstream of matrix.MATRIX_UPSTREAM."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fakes.server_thread import ServerThread
from interop.gateways import Gateway
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .matrix import MATRIX_UPSTREAM


@pytest.fixture(scope="module")
def gateway(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    """Parametrized indirectly with the dialect (matrix.cases). uvicorn's WebSocket implementation as `respstream
    serve` runs it, so the clients' WebSocket modes reach the gateway's."""
    app = create_app(Config(dialect=request.param, upstreams=[MATRIX_UPSTREAM]))
    with ServerThread(app, ws="websockets-sansio") as server:
        yield Gateway(server.base_url, request.param)


def missing(reason: str) -> None:
    """A client that cannot run here: a failure under CI (it must have it), a skip on a developer's machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the matrix must run)")
    pytest.skip(reason)
