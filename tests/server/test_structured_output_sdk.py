"""Structured output with the official ``openai`` SDK against the real embedded model (whatever `make serve` runs:
the model id is read from the upstream, not assumed): ``responses.parse(text_format=Model)`` and
``responses.stream(text_format=Model)``. llama.cpp turns the forwarded ``response_format`` schema into a grammar;
the gateway then validates the final text against the schema with ``jsonschema``. Structure is asserted, not words."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI
from pydantic import BaseModel

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .helpers import ServerThread

pytestmark = pytest.mark.model

if not EmbeddedUpstream.available():
    pytest.skip("embedded model not installed (run `make install-model`)", allow_module_level=True)


class City(BaseModel):
    name: str
    country: str
    population_millions: int


@pytest.fixture(scope="module")
def sdk() -> Iterator[tuple[OpenAI, str]]:
    upstream = EmbeddedUpstream(n_parallel=1, n_ctx=2048)
    config = Config(dialect="openai", upstreams=["embedded"], models={"aliases": {"gpt-4o-mini": "auto"}})
    with (ServerThread(create_app(config, Components(upstreams=[upstream])), start_timeout=120) as srv,
          OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=120) as client):
        yield client, upstream.models[0]


PROMPT = "Describe Paris as JSON with its name, country and population in millions."


def test_parse_returns_the_model_instance(sdk: tuple[OpenAI, str]) -> None:
    client, model = sdk
    response = client.responses.parse(model=model, input=PROMPT, text_format=City, temperature=0,
                                      max_output_tokens=80)
    assert response.status == "completed", response.error
    parsed = response.output_parsed
    assert isinstance(parsed, City) and parsed.name.strip()
    assert response.text.format.type == "json_schema"  # echoed as sent


def test_stream_with_text_format_parses_the_final_response(sdk: tuple[OpenAI, str]) -> None:
    client, _ = sdk
    deltas = 0
    with client.responses.stream(model="gpt-4o-mini", input=PROMPT, text_format=City, temperature=0,
                                 max_output_tokens=80) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas += 1
        final = stream.get_final_response()
    assert deltas >= 2  # the JSON streamed token by token, as plain text does
    assert final.status == "completed", final.error
    assert isinstance(final.output_parsed, City)


def test_every_forwarded_field_is_accepted_by_llama_cpp(sdk: tuple[OpenAI, str]) -> None:
    client, model = sdk
    response = client.responses.create(
        model=model, input="Say hello.", max_output_tokens=8, temperature=0.2, top_p=0.9,
        extra_body={"presence_penalty": 0.1, "frequency_penalty": 0.1}, top_logprobs=2,
        reasoning={"effort": "low"}, prompt_cache_key="chat-1", safety_identifier="user-1", service_tier="auto",
        text={"verbosity": "low"}, parallel_tool_calls=False, truncation="auto",
        include=["message.output_text.logprobs"],
    )
    assert response.status in ("completed", "incomplete"), response.error
    assert response.output_text.strip()
    # llama.cpp's token logprobs come back on the output_text part (and on each delta when streamed).
    part = next(o for o in response.output if o.type == "message").content[0]
    assert part.type == "output_text" and part.logprobs
    assert all(isinstance(lp.logprob, float) and len(lp.top_logprobs) <= 2 for lp in part.logprobs)
