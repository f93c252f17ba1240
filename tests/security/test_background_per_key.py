"""Issue 30 L5: one API key cannot take the whole background budget.

Before: ``max_background_responses`` was one budget for every key, so one key that kept it full got every other key
``429 too_many_background_responses``. Now each key has ``max_background_responses_per_key`` of it. The gateway
runs for real on loopback in front of the SIMULATED slow scripted upstream."""

from __future__ import annotations

from pathlib import Path

import httpx

from respstream.server.http.auth import KeyStore
from respstream.server.upstream.scripted import ScriptedUpstream
from server.helpers import ServerThread, make_app


def test_one_key_cannot_fill_every_background_slot(tmp_path: Path) -> None:
    keys = KeyStore(str(tmp_path / "keys.json"))
    (greedy, _), (other, _) = keys.create("greedy"), keys.create("other")
    slow = {"scripted-a": ScriptedUpstream(400, name="a", models=["scripted-a"], delay_ms=20)}
    app = make_app(upstreams=slow, keys_file=str(tmp_path / "keys.json"), max_background_responses=4,
                   max_background_responses_per_key=2)
    with ServerThread(app) as srv, httpx.Client(timeout=10) as client:
        def start(key: str) -> httpx.Response:
            return client.post(f"{srv.url}/v1/responses", headers={"authorization": f"Bearer {key}"},
                               json={"input": "x", "background": True, "stream": False})

        greedy_codes = [start(greedy).status_code for _ in range(4)]
        refused = start(greedy)
        other_codes = [start(other).status_code for _ in range(2)]
    assert greedy_codes == [200, 200, 429, 429], greedy_codes
    error = refused.json()["error"]
    assert error["code"] == "too_many_background_responses" and "max_background_responses_per_key" in \
        error["message"] and "retry-after" in refused.headers
    assert other_codes == [200, 200], other_codes
