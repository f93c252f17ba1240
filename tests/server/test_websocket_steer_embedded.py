"""Steering a response of the embedded model (llama.cpp in-process, the small SmolLM2-135M) over a real WebSocket:
the steer stops its generation at once: llama.cpp's slot no longer runs the original's task (its ``/slots``) within
two seconds; the successor then answers on the same lane. Not simulated: a real model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .helpers import ServerThread, make_app
from .test_websocket_lanes import TERMINALS, recv, send, texts, until_terminal, ws_url

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def embedded() -> Iterator[tuple[ServerThread, EmbeddedUpstream]]:
    if not EmbeddedUpstream.available("small"):
        pytest.skip("the embedded model is not installed (`make install-model MODEL_SIZE=small`)")
    upstream = EmbeddedUpstream(model_size="small", n_parallel=1, n_threads=1, max_output_tokens=400,
                                models=["small"])
    with ServerThread(make_app(dialect="openai", upstreams={"small": upstream}), ws="websockets-sansio") as srv:
        yield srv, upstream


def running_tasks(upstream: EmbeddedUpstream) -> set[object]:
    """The llama.cpp tasks its slots are processing now (the one slot here)."""
    slots = httpx.get(f"{upstream.address}/slots", timeout=5).json()
    return {slot.get("id_task") for slot in slots if slot.get("is_processing")}


@pytest.mark.timeout(300)
def test_steering_the_embedded_model_frees_its_slot(embedded: tuple[ServerThread, EmbeddedUpstream]) -> None:
    srv, upstream = embedded
    with connect(ws_url(srv)) as ws:
        send(ws, type="response.create", model="small", input="Tell me a very long story about a dragon.",
             stream_id="main", max_output_tokens=400)
        first = []
        while sum(e["type"] == "response.output_text.delta" for e in first) < 3:
            first.append(recv(ws))
        rid = first[0]["response"]["id"]
        original = running_tasks(upstream)
        assert len(original) == 1  # generating
        send(ws, type="response.steer", previous_response_id=rid, input="Stop. Just say hello.")
        while first[-1]["type"] not in TERMINALS:
            first.append(recv(ws))
        # llama.cpp notices the closed connection at its next token; the successor's task may take the slot next
        deadline = time.monotonic() + 2
        while running_tasks(upstream) & original and time.monotonic() < deadline:
            time.sleep(0.02)
        freed = not running_tasks(upstream) & original
        successor = until_terminal(ws)
    end = first[-1]["response"]
    assert end["status"] == "incomplete" and end["incomplete_details"] == {"reason": "steered"}
    assert end["usage"] is None or end["usage"]["output_tokens"] < 400
    assert freed, "the steered generation still holds llama.cpp's slot"
    assert successor[-1]["type"] in ("response.completed", "response.incomplete") and texts(successor)
    assert successor[-1]["response"]["previous_response_id"] == rid
    assert all(e.get("stream_id") == "main" for e in first + successor)
    assert json.dumps(successor[-1]["response"]["output"])  # the successor's answer is there
