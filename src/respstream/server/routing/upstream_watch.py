"""Upstreams that are down, or have no ``GET /v1/models``: warned about at start, probed on, served from config.

How this works:
- :func:`configure_upstreams` applies the per-upstream settings the constructors do not take (``context_length``)
  and asks each HTTP upstream what context it reports (``upstream/context_discovery.py``), all at once, bounded.
- :func:`startup_warnings` turns the startup health report into one warning per upstream that is down or lists no
  model, naming it and saying what the gateway does about it (models named in config are served; probing goes on).
- :class:`UpstreamWatch` re-runs the health check every ``upstream_probe_seconds``: the last report per upstream is
  what ``ResponseService`` consults before a stream (all upstreams of a request down -> 503 ``upstream_unavailable``
  naming them); an upstream that lists no model yet is started again once it answers (its ``GET /models`` then
  fills its models), and asked again for its context length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import urlsplit

from respstream.server.config import Config
from respstream.server.upstream.context_discovery import discover_context

__all__ = ["UpstreamWatch", "configure_upstreams", "startup_warnings"]

log = logging.getLogger("respstream.server")


async def configure_upstreams(config: Config, upstreams: list[Any], specs: list[str] | None) -> None:
    """``context_length`` from each upstream's options (``specs``: the config's upstream specs, when the
    upstreams were built from them), then context discovery for every HTTP upstream (concurrently)."""
    if specs is not None:
        for spec, upstream in zip(specs, upstreams, strict=False):
            options = config.options_for(spec)
            per = options.get("per_upstream") or {}
            if isinstance(per, dict):  # the factory's per-upstream table, looked up the same way
                netloc = urlsplit(spec.split("+", 1)[-1]).netloc if "://" in spec else ""
                own = per.get(spec) or per.get(str(getattr(upstream, "name", ""))) or per.get(netloc) or {}
                options = {**options, **(own if isinstance(own, dict) else {})}
            length = options.get("context_length")
            if isinstance(length, int) and length > 0:
                upstream.context_length = length
    await asyncio.gather(*(discover_context(u) for u in upstreams), return_exceptions=True)


def startup_warnings(report: dict[str, Any], upstreams: list[Any], every: float) -> list[str]:
    """One line per upstream that is down or lists no model (what the log and the banner say)."""
    by_name = {str(getattr(u, "name", "")): u for u in upstreams}
    probing = f"probing it every {every:g} s" if every > 0 else "not probing it again (upstream_probe_seconds = 0)"
    lines = []
    for name, state in report.get("upstreams", {}).items():
        models = list(getattr(by_name.get(name), "models", []) or [])
        if not state.get("healthy", True):
            detail = state.get("detail") or state.get("breaker")
            serving = (f"its configured models {', '.join(models)} answer 503 until it is up" if models else
                       "it lists no model, so it serves nothing until it answers GET /models")
            lines.append(f"upstream {name} is down ({detail}): {serving}; {probing}")
        elif not models:
            lines.append(f"upstream {name} lists no model (no GET /v1/models?): name them in the config file, "
                         f"[upstream_options.\"<its URL>\"] models = [\"...\"]; {probing}")
    return lines


class UpstreamWatch:
    """The periodic health probe (see the module docstring)."""

    def __init__(self, health: Any, store: Any, upstreams: list[Any], router: Any, every: float) -> None:
        self.health, self.store, self.upstreams, self.router, self.every = health, store, upstreams, router, every
        self._task: asyncio.Task[None] | None = None
        self._needs_context = {str(getattr(u, "name", "")) for u in upstreams
                               if getattr(u, "base_url", None) and not getattr(u, "discovered_context", None)}

    def state(self, name: str) -> dict[str, Any] | None:
        """The last health report of upstream ``name`` (None before the first)."""
        known: dict[str, dict[str, Any]] = self.health.known()
        return known.get(name)

    def start(self) -> None:
        if self.every > 0 and self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.check_once()
            except Exception as exc:  # a failed round is retried at the next interval
                log.warning("upstream health probe failed: %s", exc)

    async def check_once(self) -> None:
        before = {n: s.get("healthy") for n, s in self.health.known().items()}
        await self.health.check(self.store, self.upstreams, self.router)
        for upstream in self.upstreams:
            name = str(getattr(upstream, "name", ""))
            state = self.state(name) or {}
            if state.get("probe") != "ok":
                continue
            if before.get(name) is False:
                log.warning("upstream %s is up again", name)
            start = getattr(upstream, "start", None)
            if not getattr(upstream, "models", None) and start is not None:
                await start()  # discovers its models now that it answers
                if upstream.models:
                    log.warning("upstream %s now lists models: %s", name, ", ".join(upstream.models))
            if name in self._needs_context:  # asked once after it came up (it answered: what it says stands)
                self._needs_context.discard(name)
                await discover_context(upstream)
