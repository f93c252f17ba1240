"""Readiness: is the store reachable, and which upstreams are healthy (``GET /readyz``, ``/v1/models``).

An upstream is healthy when its circuit breaker is not open and, if it can be probed (``probe()`` or
``list_models()``), the last probe answered. Probes are bounded by a timeout and cached for ``ttl_seconds``, so an
orchestrator polling ``/readyz`` every second costs the upstream one request per ``ttl_seconds`` at most. The store
check is one real round trip (a ``get`` of an id that does not exist).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["HealthMonitor"]


class HealthMonitor:
    def __init__(self, metrics: Any, *, ttl_seconds: float = 5.0, timeout_seconds: float = 2.0) -> None:
        self.metrics = metrics
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = timeout_seconds
        self._probes: dict[str, tuple[float, bool, str | None]] = {}  # name -> (when, ok, detail)
        self._last: dict[str, dict[str, Any]] = {}

    def known(self) -> dict[str, dict[str, Any]]:
        """The last readiness breakdown per upstream (empty before the first check)."""
        return self._last

    async def _probe(self, upstream: Any) -> tuple[bool, str | None]:
        probe = getattr(upstream, "probe", None) or getattr(upstream, "list_models", None)
        if probe is None:
            return True, None
        cached = self._probes.get(upstream.name)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.ttl_seconds:
            return cached[1], cached[2]
        try:
            await asyncio.wait_for(probe(), self.timeout_seconds)
            ok, detail = True, None
        except TimeoutError:
            ok, detail = False, f"no answer within {self.timeout_seconds:g} s"
        except Exception as exc:  # the reason goes to the report
            status = getattr(exc, "status", None)
            # An HTTP answer below 500 (a server without GET /models, or one wanting another key for it) still
            # shows the server is up; a transport failure or a 5xx does not.
            ok = isinstance(status, int) and status < 500
            detail = f"{type(exc).__name__}: {str(exc)[:200]}"
        self._probes[upstream.name] = (now, ok, detail)
        return ok, detail

    async def _store_ok(self, store: Any) -> tuple[bool, str | None]:
        try:
            await asyncio.wait_for(store.get("readyz-probe"), self.timeout_seconds)
            return True, None
        except TimeoutError:
            return False, f"no answer within {self.timeout_seconds:g} s"
        except Exception as exc:
            return False, f"{type(exc).__name__}: {str(exc)[:200]}"

    async def check(self, store: Any, upstreams: list[Any], router: Any) -> dict[str, Any]:
        store_ok, store_detail = await self._store_ok(store)
        breakers: dict[str, dict[str, Any]] = router.health() if hasattr(router, "health") else {}
        probes = await asyncio.gather(*(self._probe(u) for u in upstreams))
        report: dict[str, dict[str, Any]] = {}
        for upstream, (probe_ok, detail) in zip(upstreams, probes, strict=True):
            breaker = breakers.get(upstream.name, {})
            state = breaker.get("state", "closed")
            healthy = probe_ok and state != "open"
            report[upstream.name] = {
                "healthy": healthy, "breaker": state, "probe": "ok" if probe_ok else "failed",
                "detail": detail or breaker.get("last_error") if not healthy else None,
                "models": list(getattr(upstream, "models", [])),
            }
        self._last = report
        self.metrics.set_health(store_ok=store_ok, upstreams={n: r["healthy"] for n, r in report.items()})
        ready = store_ok and any(r["healthy"] for r in report.values())
        return {"status": "ready" if ready else "not_ready",
                "store": {"healthy": store_ok, "detail": store_detail},
                "upstreams": report}
