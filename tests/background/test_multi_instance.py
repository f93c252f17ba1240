"""Two `respstream serve` processes sharing one redis-server: resume anywhere, and a killed instance never leaves a
reader hanging. The upstream is the SIMULATED in-process `scripted:` backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from plugins.redis_server import RedisServer

from .gateways import GatewayProcess, frames, interrupted, stream_core, wait_status

pytestmark = pytest.mark.redis

CONCURRENT_READERS = 120  # per test client; the rest queue and start later (still during generation for many)


@pytest.fixture(scope="module")
def pair(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("pair")
    with GatewayProcess(tmp, store=redis_server.url) as a, GatewayProcess(tmp, store=redis_server.url) as b:
        yield a.url, b.url


async def _read_all(jobs: list[tuple[str, str, int]]) -> list[tuple[int, bytes]]:
    """GET every (base url, id, starting_after) stream at once; (status, body) each."""
    # The client drops an idle connection well before the gateway's keep_alive_seconds (5 s) would: on a busy
    # machine a pooled connection can sit idle that long, and reusing it as the server closes it is a disconnect.
    limits = httpx.Limits(max_connections=CONCURRENT_READERS, keepalive_expiry=1.0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        async def one(url: str, rid: str, after: int) -> tuple[int, bytes]:
            r = await client.get(f"{url}/v1/responses/{rid}", params={"stream": "true", "starting_after": after})
            return r.status_code, r.content

        return list(await asyncio.gather(*(one(*job) for job in jobs)))


def _check_resumes(full: list[bytes], jobs: list[tuple[str, str, int]], got: list[tuple[int, bytes]]) -> None:
    last = len(full) - 1
    for (url, _, after), (status, body) in zip(jobs, got, strict=True):
        if after >= last:
            assert status in (200, 204) and frames(body) == [], (url, after)
            continue
        assert status == 200, (url, after, status)
        # What the reader had (events 0..after) followed by what it got is exactly the log.
        assert full[: after + 1] + frames(body) == full, (url, after)


def test_resume_from_every_cursor_on_both_instances_while_generating_and_after(pair: tuple[str, str]) -> None:
    a, b = pair
    with httpx.Client(timeout=30) as c:
        created = c.post(f"{a}/v1/responses", json={"input": "tell me a long story", "background": True})
        rid = created.json()["id"]
        assert created.status_code == 200 and created.headers["x-response-id"] == rid
        assert c.get(f"{b}/v1/responses/{rid}").json()["status"] in ("queued", "in_progress")
        # While generating: a reader at every cursor, alternating between the two instances.
        live_jobs = [(a if n % 2 else b, rid, n) for n in range(-1, 330)]
        live = asyncio.run(_read_all(live_jobs))
        final = wait_status(c, b, rid, {"completed"})
        full_raw = c.get(f"{b}/v1/responses/{rid}", params={"stream": "true"}).content
    core = stream_core(full_raw)
    assert core.violations == [] and core.result.status == "completed"
    assert core.result.output_text == final["output_text"] and len(core.result.streamed_text.split()) == 300
    full = frames(full_raw)
    assert len(full) > 300
    _check_resumes(full, live_jobs, live)
    # After it finished: every cursor again on the other instance, every third one on the generating instance.
    done_jobs = [(b, rid, n) for n in range(-1, len(full) + 1)] + [(a, rid, n) for n in range(-1, len(full) + 1, 3)]
    _check_resumes(full, done_jobs, asyncio.run(_read_all(done_jobs)))


def test_killed_instance_ends_in_worker_lost_for_readers_elsewhere(
    pair: tuple[str, str], redis_server: RedisServer, tmp_path: Path
) -> None:
    _, b = pair
    doomed = GatewayProcess(tmp_path, store=redis_server.url, upstream="scripted:400?delay_ms=20")
    with doomed, httpx.Client(timeout=30) as c:
        rid = c.post(f"{doomed.url}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        with c.stream("GET", f"{b}/v1/responses/{rid}", params={"stream": "true"}) as live:
            seen, _, waited = interrupted(live, 10, doomed.kill)
        record = c.get(f"{b}/v1/responses/{rid}").json()
        replay = c.get(f"{b}/v1/responses/{rid}", params={"stream": "true"}).content
    # Without the lease's expiry the reader would wait for its client's 30 s timeout: any end well inside it says the
    # lease (1 s) ended it; the slack is for a busy machine (the record's worker_lost is asserted below).
    assert waited < 15, f"the reader waited {waited:.1f} s for worker_lost (lease 1 s)"
    core = stream_core(seen)
    assert core.violations == []
    assert core.result.error is not None and core.result.error["code"] == "worker_lost"
    assert record["status"] == "failed" and record["error"]["code"] == "worker_lost"
    assert frames(replay) == frames(seen)


@pytest.mark.parametrize("instance_id", ["recover-me", None], ids=["explicit-id", "default-id"])
def test_restarted_instance_recovers_its_own_unfinished_logs(
    pair: tuple[str, str], redis_server: RedisServer, tmp_path: Path, instance_id: str | None
) -> None:
    # A long lease, so only the restart's recover(instance_id) can end the log quickly. Without an explicit id the
    # default is stable per data dir and port, so the restarted process still finds its own logs.
    _, b = pair
    settings = {"instance_id": instance_id} if instance_id else {"data_dir": str(tmp_path / "data")}
    doomed = GatewayProcess(tmp_path, store=redis_server.url, upstream="scripted:400?delay_ms=20",
                            lease_seconds=30.0, **settings)
    with doomed, httpx.Client(timeout=30) as c:
        first_id = c.get(f"{doomed.url}/healthz").json()["instance_id"]
        rid = c.post(f"{doomed.url}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        wait_status(c, b, rid, {"in_progress"})
        doomed.kill()
        assert c.get(f"{b}/v1/responses/{rid}").json()["status"] == "in_progress"
        started = time.monotonic()
        doomed.start()
        assert c.get(f"{doomed.url}/healthz").json()["instance_id"] == first_id
        record = wait_status(c, b, rid, {"failed"}, timeout=10)
        assert time.monotonic() - started < 15  # well before the 30 s lease would run out
        assert record["error"]["code"] == "worker_lost"
        replay = c.get(f"{b}/v1/responses/{rid}", params={"stream": "true"}).content
    core = stream_core(replay)
    assert core.violations == [] and core.result.error is not None and core.result.error["code"] == "worker_lost"


def test_delete_on_another_instance_while_generating(pair: tuple[str, str]) -> None:
    a, b = pair
    with httpx.Client(timeout=30) as c:
        rid = c.post(f"{a}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        with c.stream("GET", f"{a}/v1/responses/{rid}", params={"stream": "true"}) as live:
            seen, deleted, closed_after = interrupted(live, 3, lambda: c.delete(f"{b}/v1/responses/{rid}"))
        assert deleted.json()["deleted"] is True
        gone = (c.get(f"{a}/v1/responses/{rid}").status_code, c.get(f"{b}/v1/responses/{rid}").status_code)
    core = stream_core(seen)
    # Delete cancels first (through the log, the generator is elsewhere), so the reader on the generating instance
    # gets the cancel terminal (or, had it been slower than the delete, a terminal of its own), then the stream closes.
    assert core.violations == [] and core.result.status == "cancelled" and closed_after < 5
    assert core.result.error is not None and core.result.error["code"] == "cancelled"
    assert gone == (404, 404)


def test_cancel_on_another_instance_ends_the_log_and_stops_the_generator(pair: tuple[str, str]) -> None:
    a, b = pair
    with httpx.Client(timeout=30) as c:
        rid = c.post(f"{a}/v1/responses", json={"input": "x", "background": True}).json()["id"]
        with c.stream("GET", f"{a}/v1/responses/{rid}", params={"stream": "true"}) as live:
            seen, answered, _ = interrupted(live, 3, lambda: c.post(f"{b}/v1/responses/{rid}/cancel").json())
        deadline = time.monotonic() + 15  # (the full suite on a loaded 2-core machine once took over 5 s)
        while c.get(f"{a}/healthz").json()["running"] and time.monotonic() < deadline:
            time.sleep(0.02)
        running = c.get(f"{a}/healthz").json()["running"]
        records = [c.get(f"{url}/v1/responses/{rid}").json()["status"] for url in (a, b)]
        replay = c.get(f"{b}/v1/responses/{rid}", params={"stream": "true"}).content
    core = stream_core(seen)
    assert core.violations == [] and core.result.status == "cancelled"
    assert answered["status"] == "cancelled" and records == ["cancelled", "cancelled"]
    assert running == 0  # the generator on A noticed and stopped
    assert frames(replay) == frames(seen) and len(frames(seen)) < 300
