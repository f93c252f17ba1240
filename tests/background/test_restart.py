"""A restarted gateway still has its finished background responses (SQLite), replayable byte for byte; one stopped
mid-generation ends with `server_shutdown`. Both the default (memory store, background responses in
`<data_dir>/respstream.db`) and an explicit `--store sqlite:///...`."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from .gateways import GatewayProcess, frames, stream_core, wait_status


@pytest.mark.parametrize("store", ["default", "sqlite"])
def test_background_responses_survive_a_restart(tmp_path: Path, store: str) -> None:
    data = tmp_path / "data"
    url = "memory" if store == "default" else f"sqlite:///{tmp_path}/explicit/responses.db"
    # No grace period: the running background response is ended at once rather than allowed to finish.
    gw = GatewayProcess(tmp_path, store=url, upstream="scripted:30?delay_ms=20", data_dir=str(data),
                        shutdown_grace_seconds=0)
    with gw, httpx.Client(timeout=30) as c:
        done = c.post(f"{gw.url}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        finished = wait_status(c, gw.url, done, {"completed"})
        foreground = c.post(f"{gw.url}/v1/responses", json={"input": "x", "stream": False}).json()["id"]
        original = c.get(f"{gw.url}/v1/responses/{done}", params={"stream": "true"}).content
        running = c.post(f"{gw.url}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        wait_status(c, gw.url, running, {"in_progress"})
        gw.stop()  # SIGTERM: the running response is ended with server_shutdown
        gw.start()
        assert c.get(f"{gw.url}/v1/responses/{done}").json() == finished
        assert c.get(f"{gw.url}/v1/responses/{done}", params={"stream": "true"}).content == original
        part = c.get(f"{gw.url}/v1/responses/{done}", params={"stream": "true", "starting_after": 5}).content
        assert frames(part) == frames(original)[6:]
        stopped = c.get(f"{gw.url}/v1/responses/{running}").json()
        stopped_log = c.get(f"{gw.url}/v1/responses/{running}", params={"stream": "true"}).content
        foreground_after = c.get(f"{gw.url}/v1/responses/{foreground}").status_code
    core = stream_core(original)
    assert core.violations == [] and core.result.status == "completed"
    assert stopped["status"] == "failed" and stopped["error"]["code"] == "server_shutdown"
    stopped_core = stream_core(stopped_log)
    assert stopped_core.violations == [] and stopped_core.result.error is not None
    assert stopped_core.result.error["code"] == "server_shutdown"
    if store == "default":
        assert (data / "respstream.db").is_file()
        assert foreground_after == 404  # foreground responses lived in memory
    else:
        assert (tmp_path / "explicit" / "responses.db").is_file() and not (data / "respstream.db").exists()
        assert foreground_after == 200  # an explicit durable store keeps everything
