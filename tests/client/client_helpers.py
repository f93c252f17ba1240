"""Run one stream through the sync or the async client and collect what a caller sees (test helper)."""

from __future__ import annotations

import asyncio
import random
import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx

from respstream.client import AsyncClient, Client, RetryPolicy
from respstream.errors import RespstreamError
from respstream.protocol.assembler import AssembledResponse
from respstream.protocol.events import Event

SEED = 20240611
# Building an SSL context costs ~80 ms and httpx builds one per client; loopback tests speak plain HTTP, so share one.
SSL_CONTEXT = ssl.create_default_context()


def sync_client(base_url: str, **kwargs: Any) -> Client:
    kwargs.setdefault("retry", fast_policy())
    return Client(base_url, api_key="sk-test", http_client=httpx.Client(verify=SSL_CONTEXT), **kwargs)


def async_client(base_url: str, **kwargs: Any) -> AsyncClient:
    kwargs.setdefault("retry", fast_policy())
    return AsyncClient(base_url, api_key="sk-test", http_client=httpx.AsyncClient(verify=SSL_CONTEXT), **kwargs)


def fast_policy(**overrides: float) -> RetryPolicy:
    """Tiny backoffs (tests never sleep long) with a seeded jitter RNG (seed printed on failure via SEED)."""
    settings: dict[str, float] = {"base": 0.005, "max_delay": 0.02, "retry_after_cap": 1.0}
    settings.update(overrides)
    return RetryPolicy(
        max_retries=int(settings.pop("max_retries", 2)),
        max_resume_attempts=int(settings.pop("max_resume_attempts", 5)),
        rng=random.Random(SEED),
        **settings,
    )


@dataclass
class Seen:
    events: list[Event] = field(default_factory=list)
    result: AssembledResponse | None = None
    error: RespstreamError | None = None  # raised by iteration or result()
    resumes: int = 0

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    @property
    def seqs(self) -> list[int | None]:
        return [e.sequence_number for e in self.events]


def run_sync(base_url: str, *, resume: tuple[str, int | None] | None = None, policy: RetryPolicy | None = None,
             idle_timeout: float = 5.0, **request: Any) -> Seen:
    seen = Seen()
    client = sync_client(base_url, retry=policy or fast_policy(), idle_timeout=idle_timeout)
    with client, client._http:
        try:
            stream = client.resume(resume[0], starting_after=resume[1]) if resume else client.stream(**request)
        except RespstreamError as exc:
            seen.error = exc
            return seen
        with stream:
            try:
                for event in stream:
                    seen.events.append(event)
                seen.result = stream.result()
            except RespstreamError as exc:
                seen.error = exc
            seen.resumes = stream.resumes
    return seen


async def _run_async(base_url: str, resume: tuple[str, int | None] | None, policy: RetryPolicy | None,
                     idle_timeout: float, request: dict[str, Any]) -> Seen:
    seen = Seen()
    client = async_client(base_url, retry=policy or fast_policy(), idle_timeout=idle_timeout)
    async with client, client._http:
        stream = client.resume(resume[0], starting_after=resume[1]) if resume else client.stream(**request)
        try:
            async with stream:
                try:
                    async for event in stream:
                        seen.events.append(event)
                    seen.result = await stream.result()
                except RespstreamError as exc:
                    seen.error = exc
                seen.resumes = stream.resumes
        except RespstreamError as exc:
            seen.error = exc
    return seen


def run_async(base_url: str, *, resume: tuple[str, int | None] | None = None, policy: RetryPolicy | None = None,
              idle_timeout: float = 5.0, **request: Any) -> Seen:
    return asyncio.run(_run_async(base_url, resume, policy, idle_timeout, request))


RUNNERS = {"sync": run_sync, "async": run_async}
