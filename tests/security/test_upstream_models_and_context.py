"""Items 19 and 20 of issue 13, against SIMULATED upstream servers (tests/fakes/chat_server.py: real HTTP over
loopback, scripted answers, not a model) that report what vLLM, llama.cpp and LM Studio report.

19: an upstream with no ``GET /v1/models`` serves the models named in config; one that is down is warned about at
start (named), answers 503 ``upstream_unavailable`` naming it (not "model does not exist"), and is probed on until
it is up, then serves.
20: a prompt surely over the model's context is a 400 ``context_length_exceeded`` before any stream, naming the
limit and the setting it came from: configured ``context_length``, vLLM's ``max_model_len``, LM Studio's
``context_length``, llama.cpp's ``/props`` ``n_ctx``; a prompt only the rough bytes/4 estimate calls long is not
refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.chat_server import FakeChatCompletionsServer, free_port
from respstream.server.config import Config
from respstream.server.http.app import create_app
from server.helpers import ServerThread

from .gateway import Gateway

pytestmark = pytest.mark.timeout(120)
FAST = {"retries": 0, "connect_timeout": 1.0}


@contextmanager
def _gateway(fake: FakeChatCompletionsServer, **own: Any) -> Iterator[str]:
    config = Config(upstreams=[fake.url], upstream_options={**FAST, fake.url: own} if own else dict(FAST))
    with ServerThread(create_app(config)) as srv:
        yield srv.url


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/responses", json={"stream": False, **body}, timeout=30)


# -- 19 -------------------------------------------------------------------------------------------------------------

def test_upstream_without_a_models_endpoint_serves_the_models_named_in_config() -> None:
    with FakeChatCompletionsServer(list_models=False) as fake:
        with _gateway(fake) as url:  # nothing configured: nothing to serve, and the error says what to do
            r = _post(url, {"input": "hi"})
            assert r.status_code == 503 and r.json()["error"]["code"] == "upstream_unavailable", r.text
            assert "models = [" in r.json()["error"]["message"]
        with _gateway(fake, models=["my-model"]) as url:
            listed = [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]]
            pinned = _post(url, {"model": "my-model", "input": "hi"})
            auto = _post(url, {"input": "hi"})
    assert "my-model" in listed
    for r in (pinned, auto):
        assert r.status_code == 200, r.text
        assert r.json()["output"][0]["content"][0]["text"] == "hello"
    assert fake.requests[-1]["model"] == "my-model"


def test_a_down_upstream_is_named_at_start_answers_503_and_is_probed_until_up(tmp_path: Path) -> None:
    port = free_port()
    down = f"http://127.0.0.1:{port}/v1"  # nothing listens there yet
    settings = {"upstreams": [down], "upstream_probe_seconds": 0.3,
                "upstream_options": {**FAST, down: {"models": ["big-model"]}}}
    with Gateway(tmp_path, **settings) as gw:
        deadline = time.monotonic() + 10
        while f"127.0.0.1:{port} is down" not in gw.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        warning = next(line for line in gw.log.read_text().splitlines() if f"127.0.0.1:{port} is down" in line)
        assert "big-model" in warning and "probing it every 0.3 s" in warning, warning
        r = _post(gw.url, {"model": "big-model", "input": "hi"})
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert error["code"] == "upstream_unavailable" and f"127.0.0.1:{port}" in error["message"], error
        assert "does not exist" not in error["message"] and "retry-after" in r.headers
        with FakeChatCompletionsServer(models=["big-model"], port=port) as fake:  # the upstream comes up
            deadline = time.monotonic() + 15
            while True:
                r = _post(gw.url, {"model": "big-model", "input": "hi"})
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 200, r.text
            assert r.json()["output"][0]["content"][0]["text"] == "hello"
            assert fake.requests
        assert "is up again" in gw.log.read_text()


def test_a_model_less_upstream_is_warned_about_at_start(tmp_path: Path) -> None:
    with FakeChatCompletionsServer(list_models=False) as fake, Gateway(tmp_path, upstreams=[fake.url]) as gw:
        deadline = time.monotonic() + 10
        while "lists no model" not in gw.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(x for x in gw.log.read_text().splitlines() if "lists no model" in x)
    assert f"127.0.0.1:{fake.port}" in line and "models = [" in line, line


# -- 20 -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fake_options", "own", "limit", "setting"), [
    ({"model_fields": {"max_model_len": 1000}}, {}, 1000, "max_model_len"),  # vLLM's ModelCard
    ({"model_fields": {"context_length": 900}}, {}, 900, "context_length"),  # LM Studio, OpenRouter, ...
    ({"model_fields": {"loaded_context_length": 850, "max_context_length": 32768}}, {}, 850,
     "loaded_context_length"),  # LM Studio: the context it was loaded with wins over the model's maximum
    ({"props": {"default_generation_settings": {"n_ctx": 800}}}, {}, 800, "n_ctx"),  # llama.cpp /props
    ({"props": {"n_ctx": 750}}, {}, 750, "/props n_ctx"),  # older llama.cpp builds
    ({"model_fields": {"max_model_len": 100000}}, {"context_length": 700}, 700, "context_length of upstream"),
], ids=["vllm", "lmstudio", "lmstudio-loaded", "llamacpp", "llamacpp-old", "configured-wins"])
def test_prompt_over_the_reported_context_is_a_400_before_the_stream(
    fake_options: dict[str, Any], own: dict[str, Any], limit: int, setting: str,
) -> None:
    with FakeChatCompletionsServer(**fake_options) as fake, _gateway(fake, **own) as url:
        over = httpx.post(f"{url}/v1/responses", json={"input": "word " * 2000, "stream": True}, timeout=30)
        fits = _post(url, {"input": "word " * 100})
        reserve = _post(url, {"input": "word " * 100, "max_output_tokens": limit})  # prompt + output > limit
    assert over.status_code == 400 and over.headers["content-type"].startswith("application/json"), over.text[:300]
    error = over.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "input"
    assert f"{limit} tokens" in error["message"] and setting in error["message"], error["message"]
    assert "at least 2001 tokens" in error["message"]
    assert fits.status_code == 200, fits.text
    assert reserve.status_code == 400 and "max_output_tokens" in reserve.json()["error"]["message"]
    assert len(fake.requests) == 1  # only the prompt that fits reached the upstream


def test_only_a_sure_count_refuses() -> None:
    """8,000 bytes with no whitespace: the bytes/4 rule of thumb says 2,000 tokens, over the 1,000 the upstream
    reports, but a tokenizer may pack such a run far tighter; with no tokenizer to ask, it goes through."""
    with FakeChatCompletionsServer(model_fields={"max_model_len": 1000}) as fake, _gateway(fake) as url:
        r = _post(url, {"input": "x" * 8000})
    assert r.status_code == 200, r.text
    assert fake.requests


def test_near_the_limit_the_upstream_tokenizer_decides() -> None:
    """The same 8,000 bytes to a llama.cpp-like server (SIMULATED /apply-template + /tokenize counting 8,000
    tokens) reporting n_ctx 1,000: the exact count is over, so it is a 400 naming it; a short prompt still passes
    without being counted."""
    with FakeChatCompletionsServer(props={"default_generation_settings": {"n_ctx": 1000}}, tokenizer=True) as fake, \
            _gateway(fake) as url:
        over = _post(url, {"input": "x" * 8000})
        fits = _post(url, {"input": "a short question"})
    assert over.status_code == 400, over.text
    message = over.json()["error"]["message"]
    assert "exactly (the upstream's tokenizer) 8000 tokens" in message and "1000 tokens" in message, message
    assert fits.status_code == 200, fits.text
    assert len(fake.requests) == 1
