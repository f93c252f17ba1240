"""Issue 30 H7: one slowloris client cannot starve everybody else of connections.

Before: ``max_connections`` was one pool for all; one client re-opening half-sent request heads kept it full and
46 of 55 ``/healthz`` probes of other clients failed (also with ``--workers 2``). Now a newcomer from another
client takes the place of the biggest client's oldest connection that sent no head yet (http_guard.py,
peer_limit.py), and ``header_timeout_seconds`` cuts a head that does not arrive.

The attacker connects from 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback), the probe from 127.0.0.1,
each probe on a new connection as a balancer's would be. REAL ``respstream serve`` subprocesses, SIMULATED scripted
upstream; both uvicorn HTTP stacks (h11: ``pure``; httptools: ``auto``) and ``--workers 2``."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from respstream.server.http.peer_limit import PeerConnections, client_key

from .gateway import Gateway
from .slow_heads import HEAD, SlowHeads, pool_case, probe_healthz

pytestmark = pytest.mark.timeout(120)

ATTACKER = "127.0.0.2"


class Slowloris(SlowHeads):
    """Keeps ``size`` half-sent request heads open from ``ATTACKER``, re-opening every one the server closes."""

    def __init__(self, port: int, size: int) -> None:
        super().__init__(port)
        self.size = size

    def _run(self) -> None:
        conns: list[socket.socket] = []
        try:
            while not self._stop.is_set():
                while len(conns) < self.size and not self._stop.is_set():
                    s = self._open(ATTACKER)
                    if s is None:
                        break
                    conns.append(s)
                for s in self._closed_by_server(conns):  # re-opened on the next round
                    conns.remove(s)
        finally:
            for s in conns:
                s.close()


@pytest.mark.parametrize("case", ["pure", "auto", "workers"])
def test_healthz_answers_while_one_client_holds_every_connection(tmp_path: Path, case: str) -> None:
    args, settings = pool_case(case, tmp_path)
    with Gateway(tmp_path, *args, **settings) as gw, Slowloris(gw.port, 400) as attack:
        time.sleep(1.0)  # the pool (each worker's) is full of the attacker's half-sent heads
        probe = probe_healthz(gw.url, 5.0, every=0.1, timeout=3)
        answered, failed, slowest = probe.answered, probe.failed, probe.slowest
        assert attack.opened >= 100, attack.opened
    print(f"{case}: /healthz {answered} answered, {failed} failed, slowest {slowest:.3f} s; "
          f"attacker opened {attack.opened}")
    assert answered >= 3 and failed == 0, (answered, failed, slowest)  # counts, not times: the machine is loaded


def test_fairness_rules() -> None:
    peers = PeerConnections()
    for i in range(5):
        assert peers.enter("a", f"a{i}", pool_full=False) == (True, None)
        peers.waiting("a", f"a{i}")  # every connection is still reading its head
    assert peers.enter("a", "a5", pool_full=True) == (False, None)  # the biggest: refused
    assert peers.enter("b", "b0", pool_full=True) == (True, "a0")  # takes a's oldest
    peers.leave("a", "a0")  # its connection_lost
    assert peers.enter("b", "b1", pool_full=True, replaceable=lambda c: c != "a1") == (True, "a2")
    peers.leave("a", "a2")
    assert peers.open("127.0.0.1") == 0 and len(peers._open["a"]) == 3 and len(peers._open["b"]) == 2
    for conn in ("a1", "a3", "a4"):
        peers.working(conn)  # all busy: nobody to replace
    assert peers.enter("c", "c0", pool_full=True) == (False, None)
    capped = PeerConnections(2)
    assert [capped.enter("a", i, pool_full=False)[0] for i in range(3)] == [True, True, False]
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff") == "2001:db8::/64"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    exempt = PeerConnections(1, ["10.0.0.0/8"])
    assert exempt.key_for("10.1.2.3") == "" and exempt.key_for("192.0.2.1") == "192.0.2.1"


@pytest.mark.parametrize("stack", ["pure", "auto"])
def test_a_head_must_arrive_within_the_header_timeout(tmp_path: Path, stack: str) -> None:
    with Gateway(tmp_path, http_stack=stack, header_timeout_seconds=1.0, request_timeout_seconds=30.0) as gw:
        slow_head = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        slow_body = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        try:
            slow_head.sendall(HEAD)
            slow_body.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 15\r\n\r\n{\"input\":")
            started = time.monotonic()
            try:
                cut = slow_head.recv(1024) == b""  # EOF or reset, long before request_timeout_seconds (30 s)
            except ConnectionResetError:
                cut = True
            waited = time.monotonic() - started
            time.sleep(max(0.0, 1.5 - waited))  # the body is slow, the head was not: the header timeout is past
            slow_body.sendall(b" \"hi\"}")
            answer = slow_body.recv(1024)
        finally:
            slow_head.close()
            slow_body.close()
    assert cut and waited < 15, waited
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


@pytest.mark.parametrize("stack", ["pure", "auto"])
def test_the_per_client_cap_counts_websockets_until_they_close(tmp_path: Path, stack: str) -> None:
    from websockets.sync.client import connect

    with Gateway(tmp_path, http_stack=stack, max_connections_per_client=2) as gw:
        url = f"ws://127.0.0.1:{gw.port}/v1/responses"
        first, second = connect(url), connect(url)
        try:
            with pytest.raises(httpx.HTTPError), httpx.Client(timeout=3) as client:
                client.get(f"{gw.url}/healthz")  # a third connection of this address: closed at once
            first.close()
            deadline = time.monotonic() + 10
            while True:  # the upgraded connection's end gave its slot back
                try:
                    with httpx.Client(timeout=3) as client:
                        assert client.get(f"{gw.url}/healthz").status_code == 200
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "the closed WebSocket still holds its client's slot"
                    time.sleep(0.1)
        finally:
            first.close()
            second.close()
