"""WebSocket mode's coalesced writes (server/websocket/frame_writer.py) over real loopback sockets.

The events of one log read are framed by uvicorn's own websockets-sansio protocol object and written together. The
client must see exactly the messages it saw when each went through ASGI ``send``, with and without per-message
deflate; a reader that stops reading must still be cut as a slow reader (the writes hand back to ``send``). The
upstream is the SIMULATED scripted one.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from respstream.server.upstream.scripted import ScriptedUpstream
from respstream.server.websocket.frame_writer import FrameWriter

from .helpers import ServerThread, make_app
from .test_websocket import TERMINALS, read_turn, ws_url


class WriteSpy:
    """Records what each FrameWriter.write was asked for and what it wrote (the real method runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, int]] = []
        real = FrameWriter.write

        def write(writer: FrameWriter, entries: Any, max_bytes: int, prefix: bytes | None = None) -> int:
            done = real(writer, entries, max_bytes, prefix)
            self.calls.append((len(entries), done))
            return done

        monkeypatch.setattr(FrameWriter, "write", write)


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerThread]:
    upstreams = {"big": ScriptedUpstream(300, name="big", models=["big"])}
    with ServerThread(make_app(dialect="openresponses", upstreams=upstreams), ws="websockets-sansio") as server:
        yield server


def _shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must not change between the two paths: every event's type, sequence number, delta and item id order."""
    return [(e["type"], e.get("sequence_number"), e.get("delta"), e.get("output_index"), e.get("content_index"))
            for e in events]


def _turns(srv: ServerThread, compression: str | None, turns: int = 3) -> list[list[dict[str, Any]]]:
    out = []
    with connect(ws_url(srv), compression=compression, max_size=None) as ws:
        for i in range(turns):
            ws.send(json.dumps({"type": "response.create", "model": "big", "input": f"turn {i}"}))
            out.append(read_turn(ws))
    return out


@pytest.mark.parametrize("compression", ["deflate", None])
def test_coalesced_writes_send_the_same_messages_as_one_send_each(
    srv: ServerThread, monkeypatch: pytest.MonkeyPatch, compression: str | None
) -> None:
    spy = WriteSpy(monkeypatch)
    coalesced = _turns(srv, compression)
    assert spy.calls, "the writer was used"
    assert any(asked > 1 and done == asked for asked, done in spy.calls), "several events went out in one write"
    monkeypatch.setattr(FrameWriter, "for_send", classmethod(lambda cls, send: None))
    one_each = _turns(srv, compression)
    assert len(spy.calls) > 0 and [len(t) for t in coalesced] == [len(t) for t in one_each]
    for a, b in zip(coalesced, one_each, strict=True):
        assert _shape(a) == _shape(b)
        assert a[-1]["type"] == "response.completed" and len(a) == 300 + 8
        assert [e["sequence_number"] for e in a] == list(range(len(a)))
        text = "".join(e["delta"] for e in a if e["type"] == "response.output_text.delta")
        assert text == a[-1]["response"]["output"][0]["content"][0]["text"]


def test_writer_only_for_uvicorns_websockets_sansio_send() -> None:
    async def send(message: Any) -> None:  # any other server's send
        return None

    assert FrameWriter.for_send(send) is None
    assert FrameWriter.for_send(None) is None


def test_a_reader_that_stops_reading_is_cut_and_its_connection_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads nothing for longer than the timeout plus the grace the terminal gets: the connection is aborted
    (before the writer, Starlette's send held no transport and the socket stayed open, silent, for good)."""
    spy = WriteSpy(monkeypatch)
    app = make_app(dialect="openresponses", slow_reader_timeout_seconds=1.0,
                   upstreams={"huge": ScriptedUpstream(40_000, name="huge", models=["huge"])})
    with ServerThread(app, ws="websockets-sansio") as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's writes back up
        sock.connect(("127.0.0.1", server.port))
        with connect(ws_url(server), sock=sock, compression=None, max_size=None) as ws:
            ws.send(json.dumps({"type": "response.create", "model": "huge", "input": "x"}))
            first = json.loads(ws.recv(timeout=10))
            assert first["type"] == "response.created"
            time.sleep(5)  # read nothing: the 1 s timeout, then the terminal's 2 s grace, both pass
            seen: list[dict[str, Any]] = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    seen.append(json.loads(ws.recv(timeout=10)))
            assert closed.value.rcvd is None, "aborted: no close frame could be sent"
        # (the generation itself, unpaced, had finished into the store long before: nothing left to cancel)
        rid = first["response"]["id"]
        assert httpx.get(f"{server.url}/v1/responses/{rid}").json()["status"] == "completed"
    assert seen and not any(e["type"] in TERMINALS for e in seen), "cut before the end"
    assert any(done < asked for asked, done in spy.calls), "a write stopped when the transport paused writing"


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
def test_built_text_frames_are_the_protocols_frames(size: int) -> None:
    """Without extensions the writer builds each text frame itself: byte for byte what websockets would send."""
    from websockets.frames import OP_TEXT, Frame

    from respstream.server.websocket.frame_writer import _text_frame_header

    payload = b"x" * size
    assert _text_frame_header(size) + payload == Frame(OP_TEXT, payload).serialize(mask=False)
