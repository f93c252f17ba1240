"""Issue 30 M6 and L3: label values a client or a model invents do not become Prometheus time series.

Before: on the h11 stack any method token (``FOO1 /metrics``) became a ``method`` label value before auth, and a
tool name the model made up became a ``tool`` label value; each new value is a series kept for the process's life.
The gateway runs for real on loopback in front of the SIMULATED Chat Completions server."""

from __future__ import annotations

import socket

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fakes.chat_server import Done, FakeChatCompletionsServer, finish, text, tool
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app


def _label_values(body: str, metric: str, label: str) -> set[str]:
    return {s.labels[label] for family in text_string_to_metric_families(body) for s in family.samples
            if s.name == metric and label in s.labels}


def _raw_request(port: int, method: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"{method} /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        while sock.recv(4096):
            pass


def test_invented_http_methods_share_one_label_on_h11() -> None:
    with ServerThread(create_app(Config(upstreams=["scripted:3"])), http="h11") as gw:
        for i in range(20):
            _raw_request(gw.port, f"INVENTED{i}")
        httpx.get(f"{gw.url}/healthz")
        body = httpx.get(f"{gw.url}/metrics").text
    methods = _label_values(body, "respstream_http_requests_total", "method")
    assert not any(m.startswith("INVENTED") for m in methods), methods
    assert "other" in methods and "GET" in methods


def test_model_invented_tool_names_share_one_label() -> None:
    with FakeChatCompletionsServer() as fake:
        for i in range(5):
            fake.script(tool(0, id=f"c{i}", name=f"made_up_{i}", args="{}"), finish("tool_calls"), Done())
            fake.script(text("ok"), finish("stop"), Done())
        config = Config(upstreams=[fake.url], upstream_options={"retries": 0})
        with ServerThread(create_app(config)) as gw, httpx.Client(base_url=gw.base_url, timeout=30) as c:
            for i in range(5):
                c.post("/responses", json={"input": f"go {i}", "stream": False})
            body = c.get(f"{gw.url}/metrics").text
    for metric in ("respstream_tool_calls_total", "respstream_tool_duration_seconds_count"):
        tools = _label_values(body, metric, "tool")
        assert tools == {"other"}, (metric, tools)
