"""``respstream check --url``: run the live scenarios against an endpoint and report (DESIGN §3).

Exit codes: 0 every scenario passed or is unsupported, 1 a scenario found violations or failed, 2 bad input (a URL
that is not http(s), an unknown scenario name) or an endpoint that cannot be reached or refuses our credentials.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx

from respstream.conformance.outcome import Failed, ScenarioResult, TimedOut, Unsupported, timeout_hint
from respstream.conformance.report import Progress, summary_table, to_json
from respstream.conformance.scenarios import SCENARIOS
from respstream.conformance.session import Session
from respstream.errors import RespstreamError

__all__ = ["BadTarget", "normalize_endpoint", "preflight", "run", "run_suite", "select_scenarios"]

DEFAULT_SCENARIO_TIMEOUT = 60.0
DEFAULT_READ_TIMEOUT = 30.0


class BadTarget(Exception):
    """The endpoint or the options are unusable: exit 2 with this one-line message."""


def normalize_endpoint(url: str) -> str:
    """``http://host:port/v1`` (a trailing ``/`` or ``/responses`` is dropped). Raises :class:`BadTarget`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadTarget(f"not an http(s) URL: {url!r} (expected a base URL such as http://127.0.0.1:8080/v1)")
    endpoint = url.strip().rstrip("/")
    if endpoint.endswith("/responses"):
        endpoint = endpoint[: -len("/responses")]
    return endpoint


def select_scenarios(names: Iterable[str] | str | None) -> list[str]:
    """Scenario names in suite order; ``None`` means all. Raises :class:`BadTarget` for an unknown name."""
    if names is None:
        return list(SCENARIOS)
    wanted = [n.strip() for n in ([names] if isinstance(names, str) else names) for n in n.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in SCENARIOS]
    if unknown:
        raise BadTarget(f"unknown scenario {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    return [n for n in SCENARIOS if n in wanted]


def preflight(session: Session) -> None:
    """Make sure something answers HTTP at the endpoint. Raises :class:`BadTarget` if not, or on 401/403."""
    try:
        response = session.client.get(session.endpoint + "/models", timeout=min(session.read_timeout, 10.0))
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise BadTarget(f"cannot reach {session.endpoint}: {reason}") from None
    if response.status_code in (401, 403):
        raise BadTarget(
            f"{session.endpoint} refused the credentials (HTTP {response.status_code}); "
            "pass --api-key or set RESPSTREAM_API_KEY / OPENAI_API_KEY"
        )


def run_suite(session: Session, names: list[str], progress: Progress | None = None) -> list[ScenarioResult]:
    """Run the named scenarios one after the other; each is bounded by the session's scenario timeout."""
    results = []
    for name in names:
        if progress is not None:
            progress.start(name)
        result = _run_one(session, name)
        results.append(result)
        if progress is not None:
            progress.finish(result)
    return results


def _run_one(session: Session, name: str) -> ScenarioResult:
    session.begin()
    started = time.monotonic()
    try:
        detail = SCENARIOS[name](session)
        result = ScenarioResult(name, "violations" if session.violations else "passed", detail)
    except Unsupported as exc:
        result = ScenarioResult(name, "unsupported", exc.detail)
    except TimedOut as exc:
        hint = timeout_hint(time.monotonic() - started, session.scenario_timeout)
        result = ScenarioResult(name, "failed", f"{hint}: {exc.detail}", timed_out=True)
    except Failed as exc:
        result = ScenarioResult(name, "failed", exc.detail)
    except httpx.TimeoutException as exc:
        hint = timeout_hint(time.monotonic() - started, session.scenario_timeout)
        result = ScenarioResult(name, "failed", f"{hint}: {type(exc).__name__}", timed_out=True)
    except httpx.HTTPError as exc:
        result = ScenarioResult(name, "failed", f"{type(exc).__name__}: {exc}")
    except RespstreamError as exc:  # not an event stream at all (an HTML page, invalid JSON...)
        result = ScenarioResult(name, "failed", f"{exc.code}: {exc}")
    finally:
        session.end()
    result.violations = list(session.violations)
    result.seconds = time.monotonic() - started
    if session.notes:
        result.detail = "; ".join([result.detail, *session.notes]).strip("; ")
    return result


def run(args: Any, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point for ``check --url``. Reads ``url``, ``json``, ``dialect`` and optionally ``api_key``,
    ``model``, ``timeout``, ``scenario`` from ``args``. Never raises for a bad endpoint: returns 2."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        endpoint = normalize_endpoint(str(args.url))
        names = select_scenarios(getattr(args, "scenario", None))
    except BadTarget as exc:
        err.write(f"respstream check: {exc}\n")
        return 2
    api_key = getattr(args, "api_key", None) or os.environ.get("RESPSTREAM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    timeout = float(getattr(args, "timeout", None) or DEFAULT_SCENARIO_TIMEOUT)
    session = Session(
        endpoint,
        api_key=api_key,
        model=getattr(args, "model", None),
        dialect=getattr(args, "dialect", None),
        scenario_timeout=timeout,
        # Silence is noticed within half the deadline (at most), but never sooner than 30 s unless the deadline is
        # shorter: a loaded server's first token can take longer than that, and --timeout is how to allow it.
        read_timeout=min(max(DEFAULT_READ_TIMEOUT, timeout / 2), timeout),
    )
    try:
        preflight(session)
        progress = Progress(err, len(names))
        try:
            results = run_suite(session, names, progress)
        finally:
            progress.close()
    except BadTarget as exc:
        err.write(f"respstream check: {exc}\n")
        return 2
    finally:
        session.close()
    report = to_json(endpoint, results)
    if getattr(args, "json", False):
        out.write(json.dumps(report) + "\n")
    else:
        out.write(summary_table(endpoint, results) + "\n")
    out.flush()
    return 0 if report["ok"] else 1
