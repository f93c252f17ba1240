"""``/healthz`` (alive) vs ``/readyz`` (store and upstreams), ``/v1/models`` health, and the JSON access log.

Real gateways on loopback; upstreams are the in-process SIMULATED scripted backend, the SIMULATED Chat Completions
server (tests/fakes/chat_server.py), or a closed loopback port (an upstream that is down); the store is a real
redis-server that the test stops."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text
from fakes.server_thread import ServerThread
from plugins.redis_server import RedisServer, free_port
from respstream.server.config import Config
from respstream.server.http.app import create_app
from respstream.server.http.auth import KeyStore
from respstream.server.telemetry import LoggingSettings
from respstream.server.telemetry.logs import JsonFormatter, TextFormatter

from .log_capture import captured_logs

FAST = {"connect_timeout": 0.5, "retries": 0}


def test_ready_with_a_healthy_upstream_and_store() -> None:
    with FakeChatCompletionsServer() as fake, ServerThread(create_app(Config(upstreams=[fake.url]))) as gw:
        ready = httpx.get(f"{gw.url}/readyz")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "ready" and body["store"]["healthy"] is True
        (state,) = body["upstreams"].values()
        assert state["healthy"] is True and state["probe"] == "ok" and state["models"]
        assert httpx.get(f"{gw.url}/healthz").json()["status"] == "ok"


def test_not_ready_when_every_upstream_is_down_but_still_alive() -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    config = Config(upstreams=[dead], upstream_options=dict(FAST))
    with ServerThread(create_app(config)) as gw:
        ready = httpx.get(f"{gw.url}/readyz")
        assert ready.status_code == 503
        body = ready.json()
        assert body["status"] == "not_ready"
        (state,) = body["upstreams"].values()
        assert state["healthy"] is False and state["probe"] == "failed" and state["detail"]
        assert httpx.get(f"{gw.url}/healthz").status_code == 200  # alive, just not ready


def test_one_upstream_down_is_ready_and_models_say_which(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with FakeChatCompletionsServer() as fake:
        config = Config(upstreams=[fake.url, dead], upstream_options=dict(FAST))
        with ServerThread(create_app(config)) as gw:
            ready = httpx.get(f"{gw.url}/readyz").json()
            assert ready["status"] == "ready"
            assert sorted(s["healthy"] for s in ready["upstreams"].values()) == [False, True]
            models = httpx.get(f"{gw.base_url}/models").json()["data"]
    auto = next(m for m in models if m["id"] == "auto")
    assert sorted(u["healthy"] for u in auto["upstreams"]) == [False, True]
    served = [m for m in models if m["id"] != "auto"]
    assert served and all(u["healthy"] for m in served for u in m["upstreams"])


def test_not_ready_when_the_store_is_gone() -> None:
    redis = RedisServer(free_port())
    redis.start()
    try:
        config = Config(upstreams=["scripted:3"], store=redis.url)
        with ServerThread(create_app(config)) as gw:
            assert httpx.get(f"{gw.url}/readyz").status_code == 200
            redis.stop()
            gone = httpx.get(f"{gw.url}/readyz", timeout=10)
            assert gone.status_code == 503
            assert gone.json()["store"]["healthy"] is False and gone.json()["store"]["detail"]
    finally:
        redis.stop()


def test_serve_banner_says_which_upstream_is_down() -> None:
    import subprocess
    import sys

    dead = f"http://127.0.0.1:{free_port()}/v1"
    port = free_port()
    command = [sys.executable, "-m", "respstream", "serve", "--port", str(port), "--upstream", "scripted:3",
               "--upstream", dead]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            lines: list[str] = []
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("  upstreams:"):
                    break
            shown = lines[-1]
            assert "scripted up" in shown and "DOWN" in shown and dead.split("/")[2] in shown, lines
        finally:
            proc.terminate()
            proc.wait(timeout=20)


@pytest.fixture
def access_lines() -> Iterator[io.StringIO]:
    with captured_logs(LoggingSettings(format="json")) as (out, _):
        yield out


def _access(out: io.StringIO) -> list[dict[str, object]]:
    entries = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    return [e for e in entries if e["logger"] == "respstream.access"]


def test_one_json_access_line_per_request_without_the_key(access_lines: io.StringIO, tmp_path: Path) -> None:
    keys = KeyStore(str(tmp_path / "keys.json"))
    key, entry = keys.create("ci")
    with FakeChatCompletionsServer() as fake:
        fake.script(text("Hi there"), finish("stop"), Done())
        config = Config(upstreams=[fake.url], keys_file=str(tmp_path / "keys.json"))
        auth = {"authorization": f"Bearer {key}", "x-request-id": "req-abc-1"}
        with ServerThread(create_app(config)) as gw, httpx.Client(base_url=gw.base_url, timeout=30) as c:
            with c.stream("POST", "/responses", json={"input": "hello", "stream": True}, headers=auth) as r:
                r.read()
            assert c.get("/models").status_code == 401
    lines = _access(access_lines)
    assert len(lines) == 2
    # A stream's line is written when its handler returns, which may be after the client has read the whole body
    # and sent the next request: match the lines by route, not by order.
    (streamed,) = [line for line in lines if line["route"] == "/v1/responses"]
    (refused,) = [line for line in lines if line["route"] == "/v1/models"]
    assert streamed["request_id"] == "req-abc-1" and streamed["method"] == "POST"
    assert streamed["route"] == "/v1/responses" and streamed["status"] == 200
    assert streamed["key_id"] == entry["id"] and str(streamed["response_id"]).startswith(("resp_", ""))
    assert streamed["response_id"] and streamed["model"] and streamed["outcome"] == "completed"
    assert isinstance(streamed["ttft_ms"], float) and isinstance(streamed["duration_ms"], float)
    assert streamed["duration_ms"] >= streamed["ttft_ms"]
    assert refused["status"] == 401 and refused["key_id"] is None and refused["route"] == "/v1/models"
    assert key not in access_lines.getvalue() and "hello" not in access_lines.getvalue()


def test_access_log_can_be_turned_off(tmp_path: Path) -> None:
    with captured_logs(LoggingSettings(format="json", access_log=False)) as (out, _):
        with ServerThread(create_app(Config(upstreams=["scripted:3"]))) as gw:
            httpx.get(f"{gw.url}/healthz")
        assert _access(out) == []


def test_text_format_is_readable() -> None:
    record = logging.makeLogRecord({"name": "respstream.access", "levelname": "INFO", "msg": "GET /healthz 200",
                                    "status": 200, "route": "/healthz"})
    line = TextFormatter().format(record)
    assert "respstream.access: GET /healthz 200" in line and "status=200" in line and not line.startswith("{")
    assert json.loads(JsonFormatter().format(record))["status"] == 200


@pytest.mark.parametrize("bad", [{"format": "xml"}, {"level": "loud"}, {"levels": {"respstream": "nope"}},
                                 {"acces_log": True}])
def test_bad_logging_table_is_a_config_error(bad: dict[str, object]) -> None:
    from respstream.server.config import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(None, {"logging": bad})
    assert "logging" in str(info.value)


def test_log_timestamps_are_the_records_time_to_the_millisecond() -> None:
    import datetime as dt
    import logging
    import random

    from respstream.server.telemetry.logs import _timestamp

    rng = random.Random(7)
    for created in [0.0, 59.9995, 1796150036.2591, *(rng.uniform(0, 2e9) for _ in range(2000))]:
        record = logging.makeLogRecord({})
        record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0  # as LogRecord sets them
        text = _timestamp(record)
        assert text.endswith("Z") and len(text) == 24
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        assert 0 <= created - parsed < 0.001 + 1e-6, (created, text)  # truncated, never rounded up


def test_the_direct_access_line_is_the_json_formatters_line() -> None:
    from respstream.server.telemetry.logs import log_access
    from respstream.server.telemetry.observation import RequestObservation

    with captured_logs(LoggingSettings(format="json")) as (out, handler):
        obs = RequestObservation(request_id="r1", method="POST", path="/v1/responses", client="127.0.0.1")
        obs.status, obs.route, obs.response_id, obs.first_token_seconds = 200, "/v1/responses", "resp_1", 0.012
        log_access(obs)  # the only destination: written directly
        handler.addFilter(lambda record: True)  # something that must see the record: through logging
        log_access(obs)
        handler.filters.clear()
        extra = logging.StreamHandler(io.StringIO())  # a second destination: through logging too
        logging.getLogger("respstream.access").addHandler(extra)
        log_access(obs)
        logging.getLogger("respstream.access").removeHandler(extra)
        assert extra.stream.getvalue().startswith("POST /v1/responses 200 ")  # type: ignore[attr-defined]
        above = logging.StreamHandler(io.StringIO())  # the tree propagating to a root handler (pytest's caplog)
        logging.getLogger().addHandler(above)
        logging.getLogger("respstream").propagate = True
        try:
            log_access(obs)
        finally:
            logging.getLogger("respstream").propagate = False
            logging.getLogger().removeHandler(above)
        assert above.stream.getvalue().startswith("POST /v1/responses 200 ")  # type: ignore[attr-defined]
    direct, through_logging, with_extra, propagated = (json.loads(line) for line in out.getvalue().splitlines())
    for entry in (direct, through_logging, with_extra, propagated):
        entry.pop("ts"), entry.pop("duration_ms")
        entry["message"] = entry["message"].rsplit(" ", 2)[0]  # without the duration
    assert direct == through_logging == with_extra == propagated
    assert list(direct)[:4] == ["level", "logger", "message", "request_id"]
    assert direct["ttft_ms"] == 12.0 and direct["status"] == 200
