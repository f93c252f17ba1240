"""A gateway on loopback for the HTTP fuzz tests (SIMULATED scripted backend, no tools), one per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from faults.helpers import GatewayThread, gateway_app
from respstream.server.http.auth import KeyStore
from respstream.server.upstream.scripted import ScriptedUpstream


def _upstream() -> ScriptedUpstream:
    return ScriptedUpstream(3, name="scripted", models=["scripted"])


@pytest.fixture(scope="module")
def open_gateway() -> Iterator[tuple[str, httpx.Client]]:
    with GatewayThread(gateway_app([_upstream()], max_body_bytes=64 * 1024)) as gw, httpx.Client(
        base_url=gw.url, timeout=20
    ) as client:
        yield gw.url, client


@pytest.fixture(scope="module")
def keyed_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    keys_file = Path(tmp_path_factory.mktemp("keys")) / "keys.json"
    store = KeyStore(str(keys_file))
    alice, _ = store.create("alice")
    bob, _ = store.create("bob")
    with GatewayThread(gateway_app([_upstream()], keys_file=str(keys_file))) as gw, httpx.Client(
        base_url=gw.url, timeout=20
    ) as client:
        yield {"url": gw.url, "client": client, "alice": alice, "bob": bob}
