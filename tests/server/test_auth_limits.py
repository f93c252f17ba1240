"""Bearer keys (hashed at rest, revocable), rate limit (429 + Retry-After), stream limit, misc endpoints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from respstream.cli import main
from respstream.server.http.auth import hash_key
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import ServerThread, make_app


def _create_key(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["keys", "--file", str(path), "create", "--name", "ci", "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["key"])


def test_keys_are_hashed_at_rest_and_revocable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    key = _create_key(path, capsys)
    stored = path.read_text()
    assert key not in stored
    assert hash_key(key) in stored
    assert main(["keys", "--file", str(path), "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 1 and "hash" not in listed[0] and listed[0]["revoked_at"] is None
    with ServerThread(make_app(keys_file=str(path))) as srv:
        assert httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}).status_code == 401
        bad = httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}, headers={"authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
        auth = {"authorization": f"Bearer {key}"}
        ok = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False}, headers=auth)
        assert ok.status_code == 200
        rid = ok.json()["id"]
        assert httpx.get(f"{srv.url}/v1/responses/{rid}").status_code == 401
        assert httpx.get(f"{srv.url}/v1/responses/{rid}", headers=auth).status_code == 200
        assert httpx.get(f"{srv.url}/healthz").status_code == 200  # health stays open
        assert main(["keys", "--file", str(path), "revoke", listed[0]["id"]]) == 0
        assert httpx.post(f"{srv.url}/v1/responses", json={"input": "x"}, headers=auth).status_code == 401


def test_responses_of_another_key_are_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.json"
    first, second = _create_key(path, capsys), _create_key(path, capsys)
    with ServerThread(make_app(keys_file=str(path))) as srv:
        rid = httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False},
                         headers={"authorization": f"Bearer {first}"}).json()["id"]
        other = httpx.get(f"{srv.url}/v1/responses/{rid}", headers={"authorization": f"Bearer {second}"})
        assert other.status_code == 404


def test_rate_limit_429_with_retry_after() -> None:
    with ServerThread(make_app(rate_limit_per_minute=2)) as srv:
        codes = [httpx.post(f"{srv.url}/v1/responses", json={"input": "x", "stream": False}) for _ in range(3)]
    assert [r.status_code for r in codes] == [200, 200, 429]
    assert int(codes[2].headers["retry-after"]) >= 1
    assert codes[2].json()["error"]["code"] == "rate_limited"


@pytest.fixture
def one_stream_server() -> Iterator[str]:
    upstreams = {"slow": ScriptedUpstream(20, name="slow", models=["slow"], delay_ms=50)}
    with ServerThread(make_app(upstreams=upstreams, max_concurrent_streams=1)) as srv:
        yield srv.url


def test_max_concurrent_streams(one_stream_server: str) -> None:
    url = one_stream_server
    with httpx.Client(timeout=20) as c, c.stream("POST", f"{url}/v1/responses",
                                                 json={"input": "x", "stream": True}) as first:
        chunks = first.iter_raw()  # keep the iterator: dropping it closes the connection
        next(chunks)
        second = c.post(f"{url}/v1/responses", json={"input": "x", "stream": True})
        assert second.status_code == 503
        assert second.json()["error"]["code"] == "too_many_streams"
        assert second.headers["retry-after"] == "1"


def test_misc_endpoints() -> None:
    with ServerThread(make_app()) as srv, httpx.Client(base_url=srv.url) as c:
        models = c.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["auto", "scripted-a"]
        assert c.get("/healthz").json()["status"] == "ok"
        c.post("/v1/responses", json={"input": "x", "stream": False})
        metrics = c.get("/metrics").text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(metrics) for s in family.samples}
        completed = [v for (name, labels), v in samples.items()
                     if name == "respstream_responses_total" and ("status", "completed") in labels]
        assert completed == [1.0]
        assert samples[("respstream_events_total", ())] > 0
        spec = c.get("/openapi.json").json()
        assert spec["openapi"].startswith("3.1") and "/v1/responses" in spec["paths"]
        index = c.get("/")
        assert index.status_code in (200, 404) and index.headers["x-request-id"]
        given = c.get("/healthz", headers={"x-request-id": "abc-123"})
        assert given.headers["x-request-id"] == "abc-123"
