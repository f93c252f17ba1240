"""HTTP errors before streaming -> typed exceptions with the envelope; safe retries honour Retry-After."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from client_helpers import RUNNERS, async_client, fast_policy, sync_client

from fakes.replay_server import Plan, ReplayServer
from respstream.client import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from respstream.client.errors import parse_retry_after, status_error
from respstream.errors import APIStatusError
from server.helpers import free_port

OPENAI_401 = (b'{"error":{"message":"Incorrect API key provided: \'\'.","type":"invalid_request_error",'
              b'"param":null,"code":"invalid_api_key"}}')
SEED_403 = b'{"detail": "Project membership required", "error": "project_forbidden"}'
SEED_400 = (b'{"detail": "model gpt-9 is not available", "error": {"type": "invalid_request_error", '
            b'"code": "model_not_found", "message": "Unknown model gpt-9; available: auto, fast", "param": "model"}}')
HTML_503 = b"<html><head><title>503 Service Temporarily Unavailable</title></head><body><h1>503</h1></body></html>"


@pytest.mark.parametrize(
    ("status", "body", "cls", "code", "etype", "param", "message"),
    [
        (401, OPENAI_401, AuthenticationError, "invalid_api_key", "invalid_request_error", None,
         "Incorrect API key provided"),
        (403, SEED_403, PermissionDeniedError, "project_forbidden", None, None, "Project membership required"),
        (400, SEED_400, BadRequestError, "model_not_found", "invalid_request_error", "model", "Unknown model gpt-9"),
        (404, b'{"detail": "input is required"}', NotFoundError, None, None, None, "input is required"),
        (422, b'{"detail": [{"loc": ["body", "input"], "msg": "field required", "type": "missing"}]}',
         APIStatusError, None, None, "input", "field required"),
        (500, b'{"code": "internal_error", "message": "boom"}', ServerError, "internal_error", None, None, "boom"),
        (502, b"Bad Gateway\n", ServerError, None, None, None, "Bad Gateway"),
        (503, HTML_503, ServerError, None, None, None, "503 Service Temporarily Unavailable (HTML error page)"),
        (500, b"", ServerError, None, None, None, "HTTP 500"),
    ],
    ids=["openai-401", "seed-string-error", "seed-envelope", "detail-only", "fastapi-list", "flat", "text-502",
         "html-503", "empty"],
)
def test_error_envelopes(status: int, body: bytes, cls: type[APIStatusError], code: str | None,
                         etype: str | None, param: str | None, message: str) -> None:
    error = status_error(status, {}, body)
    assert isinstance(error, cls)
    assert (error.status_code, error.error_code, error.error_type, error.param) == (status, code, etype, param)
    assert message in str(error)
    assert "\n" not in str(error)  # one line, fit for a CLI message


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (parse_retry_after({"retry-after": later}) or 0) <= 30


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_401_is_raised_at_once_with_the_envelope(server: ReplayServer, mode: str) -> None:
    server.add(Plan(status=401, body=OPENAI_401))
    seen = RUNNERS[mode](server.base_url, input="hi")
    assert isinstance(seen.error, AuthenticationError)
    assert seen.error.error_code == "invalid_api_key"
    assert seen.error.body["error"]["type"] == "invalid_request_error"
    assert len(server.requests) == 1  # an auth failure is not retried
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_429_with_retry_after_is_retried_then_streams(server: ReplayServer, mode: str) -> None:
    server.add(Plan(status=429, body=b'{"error":{"code":"rate_limit_exceeded","message":"slow down"}}',
                    headers={"retry-after": "0.05"}))
    seen = RUNNERS[mode](server.base_url, input="hi")
    assert seen.error is None
    assert seen.result is not None and seen.result.output_text == "Hello, world."
    assert [r.method for r in server.requests] == ["POST", "POST"]  # nothing had streamed: safe to send again


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_retry_after_beyond_the_cap_is_raised_not_waited(server: ReplayServer, mode: str) -> None:
    server.add(Plan(status=429, body=b'{"error":{"code":"rate_limit_exceeded","message":"later"}}',
                    headers={"retry-after": "3600"}))
    seen = RUNNERS[mode](server.base_url, input="hi")
    assert isinstance(seen.error, RateLimitError)
    assert seen.error.retry_after == 3600.0
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_500_is_retried_a_bounded_number_of_times(server: ReplayServer, mode: str) -> None:
    server.add(*(Plan(status=500, body=b'{"detail":"boom","error":{"code":"internal_error","message":"boom"}}')
                 for _ in range(5)))
    seen = RUNNERS[mode](server.base_url, input="hi", policy=fast_policy(max_retries=2))
    assert isinstance(seen.error, ServerError)
    assert seen.error.error_code == "internal_error"
    assert len(server.requests) == 3  # first try + max_retries


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_plain_text_502_then_success(server: ReplayServer, mode: str) -> None:
    server.add(Plan(status=502, body=b"502 Bad Gateway", content_type="text/plain"))
    seen = RUNNERS[mode](server.base_url, input="hi")
    assert seen.result is not None and seen.result.status == "completed"
    assert len(server.requests) == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_plain_text_502_without_retries(server: ReplayServer, mode: str) -> None:
    server.add(Plan(status=502, body=b"502 Bad Gateway", content_type="text/plain"))
    seen = RUNNERS[mode](server.base_url, input="hi", policy=fast_policy(max_retries=0))
    assert isinstance(seen.error, ServerError)
    assert str(seen.error).startswith("HTTP 502: 502 Bad Gateway")
    assert seen.error.body == "502 Bad Gateway"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unreachable_server_is_a_connection_error_with_the_cause(mode: str) -> None:
    seen = RUNNERS[mode](f"http://127.0.0.1:{free_port()}/v1", input="hi", policy=fast_policy(max_retries=1))
    assert isinstance(seen.error, APIConnectionError)
    assert seen.error.__cause__ is not None
    assert "cannot connect" in str(seen.error)


def test_non_streaming_calls_sync(server: ReplayServer) -> None:
    client = sync_client(server.base_url)
    with client, client._http:
        created = client.create(input="hi")
        assert created["status"] == "completed" and created["output_text"] == "Hello, world."
        assert server.requests[-1].json()["stream"] is False
        assert client.retrieve("resp_text")["id"] == "resp_text"
        assert client.cancel("resp_text")["status"] == "cancelled"
        assert client.delete("resp_text")["deleted"] is True
        with pytest.raises(NotFoundError) as info:
            client.retrieve("resp_missing")
        assert info.value.error_code == "response_not_found"


def test_non_streaming_calls_async(server: ReplayServer) -> None:
    async def main() -> list[Any]:
        client = async_client(server.base_url)
        async with client, client._http:
            out = [await client.create(input="hi"), await client.retrieve("resp_text"),
                   await client.cancel("resp_text"), await client.delete("resp_text")]
            with pytest.raises(NotFoundError):
                await client.retrieve("resp_missing")
            return out

    created, retrieved, cancelled, deleted = asyncio.run(main())
    assert created["output_text"] == "Hello, world."
    assert retrieved["id"] == "resp_text"
    assert cancelled["status"] == "cancelled"
    assert deleted["deleted"] is True
