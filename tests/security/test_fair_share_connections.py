"""Issue 42 H7v and M8: connection slots are shared fairly when the attacker has many addresses, and idle
WebSockets give their slot back under pressure.

Before: a newcomer took a slot only from a client holding more than one connection above it (peer_limit.py), so
the slowloris of issue 30 spread over 1,000 source addresses, one connection each, kept ``/healthz`` failing
(40/57, 29/58); an upgraded connection was never replaceable, so 60 idle authenticated WebSockets from one address
with ``max_connections`` 60 blocked ``/healthz`` from another address (5/5 failed). Now a newcomer takes the place
of the connection that made the least progress (the longest-waiting head, the longest-idle WebSocket, which is
closed with code 1013 and the reason), first of a client over its fair share.

Linux routes all of 127.0.0.0/8 to loopback: the attackers bind to 127.0.1.1-127.0.4.250 (1,000 addresses) or
127.0.0.2, the probe comes from 127.0.0.1 on a new connection each time. REAL ``respstream serve`` subprocesses,
SIMULATED scripted upstream; both uvicorn HTTP stacks. Counts are asserted, never times (the machine is loaded).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from respstream.server.http.peer_limit import PeerConnections

from .gateway import Gateway
from .slow_heads import SlowHeads, pool_case, probe_healthz

pytestmark = pytest.mark.timeout(150)

ADDRESSES = [f"127.0.{a}.{b}" for a in range(1, 5) for b in range(1, 251)]  # 1,000 attackers


class SpreadSlowloris(SlowHeads):
    """One half-sent request head from each address in ``ADDRESSES``, re-opened (after ``pause`` s) whenever the
    server closes it."""

    join_seconds = 20.0

    def __init__(self, port: int, pause: float = 1.0) -> None:
        super().__init__(port)
        self.pause = pause

    def _run(self) -> None:
        held: dict[str, socket.socket] = {}
        due = dict.fromkeys(ADDRESSES, 0.0)  # address -> when it may (re)open
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                for source, when in list(due.items()):
                    if when <= now and not self._stop.is_set():
                        s = self._open(source)
                        if s is None:
                            due[source] = now + self.pause
                        else:
                            held[source] = s
                            del due[source]
                source_of = {s: source for source, s in held.items()}
                for s in self._closed_by_server(held.values()):  # re-open it after the pause
                    source = source_of[s]
                    del held[source]
                    due[source] = time.monotonic() + self.pause
        finally:
            for s in held.values():
                s.close()


def _probe(url: str, seconds: float) -> tuple[int, int]:
    """``/healthz`` on a new connection every 0.2 s for ``seconds``: (answered, failed)."""
    probe = probe_healthz(url, seconds, every=0.2, timeout=5)
    return probe.answered, probe.failed


@pytest.mark.parametrize("case", ["pure", "auto", "workers"])
def test_healthz_answers_while_a_thousand_addresses_hold_one_slow_head_each(tmp_path: Path, case: str) -> None:
    args, settings = pool_case(case, tmp_path)
    with Gateway(tmp_path, *args, **settings) as gw, SpreadSlowloris(gw.port) as attack:
        deadline = time.monotonic() + 20
        while attack.opened < 300 and time.monotonic() < deadline:  # the pool is full of half-sent heads
            time.sleep(0.1)
        answered, failed = _probe(gw.url, 5.0)
        opened = attack.opened
    print(f"{case}: /healthz {answered} answered, {failed} failed; the attackers opened {opened}")
    assert opened >= 300, opened
    assert answered >= 5 and failed == 0, (answered, failed)


def _websocket(port: int, key: str, source: str) -> Any:
    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return connect(f"ws://127.0.0.1:{port}/v1/responses", sock=sock,
                   additional_headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("stack", ["pure", "auto"])
def test_idle_websockets_give_their_slots_back_under_pressure(tmp_path: Path, stack: str) -> None:
    from websockets.exceptions import ConnectionClosed

    from respstream.server.http.auth import KeyStore

    keys = KeyStore(str(tmp_path / "keys.json"))
    key, _ = keys.create("idle")
    with Gateway(tmp_path, max_connections=60, http_stack=stack, keys_file=str(tmp_path / "keys.json"),
                 websocket_idle_timeout_seconds=300) as gw:
        sockets = []
        for _ in range(60):
            try:
                sockets.append(_websocket(gw.port, key, "127.0.0.2"))
            except (OSError, ConnectionClosed, TimeoutError):
                break  # the pool is full: the 60 that are open are the attack
        try:
            time.sleep(0.5)  # every session is idle, waiting for its first message
            answered, failed = _probe(gw.url, 3.0)
            reclaimed = []
            for ws in sockets:
                try:
                    message = ws.recv(timeout=0.05)
                except TimeoutError:
                    continue  # still open: it was not needed
                except ConnectionClosed:
                    continue
                event = json.loads(message)
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=5)
                reclaimed.append((event["error"]["code"], closed.value.rcvd.code if closed.value.rcvd else None))
        finally:
            for ws in sockets:
                ws.close()
    print(f"{stack}: {len(sockets)} idle WebSockets; /healthz {answered} answered, {failed} failed; "
          f"reclaimed {len(reclaimed)}")
    assert len(sockets) >= 55, len(sockets)
    assert answered >= 5 and failed == 0, (answered, failed)
    assert reclaimed and all(r == ("connection_reclaimed", 1013) for r in reclaimed), reclaimed
    assert len(reclaimed) <= answered + 2  # one socket per probe that needed a slot, not the lot


def test_fair_share_rules() -> None:
    peers = PeerConnections(capacity=6)
    for i in range(5):
        assert peers.enter("a", f"a{i}", pool_full=False) == (True, None)
        peers.waiting("a", f"a{i}")  # a slow head each
    assert peers.enter("a", "a5", pool_full=True) == (False, None)  # its own client: nobody holds more
    assert peers.enter("b", "b0", pool_full=True) == (True, "a0")  # the longest waiting of a bigger client
    peers.leave("a", "a0")  # its connection_lost
    peers.working("a1")  # a1 sent its head: it is not closed for anybody
    assert peers.enter("c", "c0", pool_full=True) == (True, "a2")
    peers.leave("a", "a2")
    # Many clients with one connection each (the spread slowloris): the longest-waiting gives way to a newcomer...
    spread = PeerConnections(capacity=4)
    for i in range(4):
        spread.enter(f"x{i}", i, pool_full=False)
        spread.waiting(f"x{i}", i)
    spread.working(0)  # ...but never one that made progress
    assert spread.enter("new", "n", pool_full=True) == (True, 1)
    spread.leave("x1", 1)
    spread.waiting("x3", 3)  # x3 went back to waiting (a keep-alive connection between requests): last in line
    assert spread.enter("new2", "n2", pool_full=True) == (True, 2)
    # A client never takes a slot from a smaller one.
    small = PeerConnections(capacity=3)
    for conn, key in ((1, "big"), (2, "big"), (3, "one")):
        small.enter(key, conn, pool_full=False)
    small.waiting("one", 3)
    assert small.enter("big", 4, pool_full=True) == (False, None)
    capped = PeerConnections(2)
    assert [capped.enter("a", i, pool_full=False)[0] for i in range(3)] == [True, True, False]


def test_a_client_that_wasted_a_slot_takes_nobody_else_s_for_a_while() -> None:
    peers = PeerConnections(capacity=3, penalty_seconds=30)
    peers.enter("slow", "s0", pool_full=False, now=0)
    peers.waiting("slow", "s0", fresh=True)  # a new connection whose head never comes
    peers.enter("kept", "k0", pool_full=False, now=0)
    peers.waiting("kept", "k0")  # an idle keep-alive connection: it served a request before
    peers.enter("busy", "b0", pool_full=False, now=0)
    assert peers.enter("new", "n0", pool_full=True, now=1) == (True, "s0")
    peers.leave("slow", "s0")
    # The slow client re-opens at once: while the pool is full it may not take anybody's slot...
    assert peers.enter("slow", "s1", pool_full=True, now=2) == (False, None)
    assert peers.enter("slow", "s1", pool_full=False, now=2) == (True, None)  # ...free room it still gets
    peers.leave("slow", "s1")
    assert peers.enter("other", "o0", pool_full=True, now=3) == (True, "k0")  # an idle keep-alive gives way...
    peers.leave("kept", "k0")
    peers.waiting("new", "n0", fresh=True)
    assert peers.enter("kept", "k1", pool_full=True, now=4) == (True, "n0")  # ...and costs its client nothing
    peers.leave("new", "n0")
    assert peers.enter("slow", "s2", pool_full=True, now=31.5)[0] is False  # nobody waiting to replace
    peers.waiting("other", "o0")
    assert peers.enter("slow", "s2", pool_full=True, now=31.5) == (True, "o0")  # the penalty is over


def test_an_authenticated_websocket_counts_for_its_key() -> None:
    peers = PeerConnections(capacity=8)
    for n in range(4):  # four clients, one connection each, waiting longest (idle keep-alive connections)
        peers.enter(f"192.0.2.{n}", f"c{n}", pool_full=False)
        peers.waiting(f"192.0.2.{n}", f"c{n}")
    for n in range(4):  # one key's idle sockets from four addresses...
        peers.enter(f"10.0.0.{n}", f"ws{n}", pool_full=False)
        peers.waiting(f"10.0.0.{n}", f"ws{n}")
        peers.rekey(f"ws{n}", f"10.0.0.{n}", "key:k1")  # ...its session knew its key
    assert len(peers._open["key:k1"]) == 4 and "10.0.0.1" not in peers._open
    # The key holds 4 of 8 slots with 5 clients (fair share 1.6): its longest-idle socket gives way first, before
    # the connections of smaller clients that have waited longer (by address alone, c0 would have).
    assert peers.enter("198.51.100.1", "new", pool_full=True) == (True, "ws0")
    peers.leave("key:k1", "ws0")
    peers.rekey("ws1", "key:k1", "key:k1")  # idempotent
    assert len(peers._open["key:k1"]) == 3 and list(peers._waiting)[:5] == ["c0", "c1", "c2", "c3", "ws1"]


def test_ipv6_is_aggregated_by_48_when_crowded() -> None:
    peers = PeerConnections(capacity=100, ipv6_subnets=4)
    keys = [peers.key_for(f"2001:db8:0:{n:x}::1") for n in range(10)]
    for n, key in enumerate(keys[:4]):
        peers.enter(key, n, pool_full=False)
    assert keys[0] == "2001:db8::/64" and keys[3] == "2001:db8:0:3::/64"
    crowded = [peers.key_for(f"2001:db8:0:{n:x}::1") for n in range(4, 10)]
    assert set(crowded) == {"2001:db8::/48"}  # the fifth /64 of a /48 and beyond: one client
    assert peers.key_for("2001:db8:0:1::2") == "2001:db8:0:1::/64"  # a /64 already counted stays itself
    assert peers.key_for("2001:db8:1::1") == "2001:db8:1::/64"  # another /48
    for n in range(4, 10):
        peers.enter("2001:db8::/48", n, pool_full=False)
    assert peers.open("2001:db8:0:1::9") == 1 and len(peers._open["2001:db8::/48"]) == 6
    peers.leave(keys[0], 0)  # a /64 that leaves makes room for a /64 of its own again
    assert peers.key_for("2001:db8:0:fe::1") == "2001:db8:0:fe::/64"
    assert peers.key_for("::ffff:10.0.0.1") == "10.0.0.1"
    exempt = PeerConnections(1, ["10.0.0.0/8"])
    assert exempt.key_for("10.1.2.3") == "" and exempt.key_for("192.0.2.1") == "192.0.2.1"


def test_a_newcomer_costs_a_bounded_scan() -> None:
    from respstream.server.http.peer_limit import SCAN

    peers = PeerConnections(capacity=10_000)
    for i in range(5_000):
        peers.enter("busy", i, pool_full=False)
        peers.waiting("busy", i)
    looked: list[object] = []

    def replaceable(conn: object) -> bool:
        looked.append(conn)
        return False

    assert peers.enter("busy", "more", pool_full=True, replaceable=replaceable) == (False, None)
    assert peers.enter("other", "o", pool_full=True, replaceable=replaceable) == (False, None)
    assert len(looked) <= SCAN
