"""Issue 30 L7: ``/readyz`` shows upstream addresses and errors only to a key holder when keys are configured.

Before: with API keys configured, ``GET /readyz`` without a key answered the whole breakdown (every upstream's URL
and its connection error). Now a caller without a valid key gets only ``{"status"}`` (same status code: a balancer's
probe needs nothing more); a valid key, or the open loopback gateway, gets the breakdown. The dead upstream is a
port where nothing listens."""

from __future__ import annotations

from pathlib import Path

import httpx

from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.http.auth import KeyStore
from server.helpers import free_port


def test_readyz_details_need_a_key(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    keys = KeyStore(str(tmp_path / "keys.json"))
    key, _ = keys.create("ops")
    config = Config(upstreams=["scripted:3", dead], keys_file=str(tmp_path / "keys.json"),
                    upstream_options={"connect_timeout": 0.5, "retries": 0})
    with ServerThread(create_app(config)) as gw:
        for headers in ({}, {"authorization": "Bearer rsk_wrong"}):
            anonymous = httpx.get(f"{gw.url}/readyz", headers=headers)
            assert anonymous.status_code == 200 and anonymous.json() == {"status": "ready"}, anonymous.text
            assert dead not in anonymous.text
        full = httpx.get(f"{gw.url}/readyz", headers={"authorization": f"Bearer {key}"})
        assert full.status_code == 200 and full.json()["store"]["healthy"] is True
        assert any(dead in name or dead in str(state) for name, state in full.json()["upstreams"].items())
    with ServerThread(create_app(Config(upstreams=["scripted:3"]))) as gw:  # open (loopback) gateway: details
        assert "upstreams" in httpx.get(f"{gw.url}/readyz").json()
