"""``input_file`` parts given by ``file_url``: fetched by the gateway through the network policy, sent inline.

How this works: Chat Completions has no file URL, so before anything streams (after routing and the modality check)
:func:`resolve_file_urls` fetches each ``file_url`` with :func:`~respstream.server.tools.web_fetch.fetch_bytes` —
every hop resolved and checked by the server tools' :class:`~respstream.server.tools.netguard.AddressPolicy`
(``[tools] fetch_allow``: private, loopback and link-local addresses are refused otherwise), at most
``[tools] fetch_max_bytes`` — and replaces it in place by ``file_data`` (a ``data:<type>;base64,`` URL) and a
``filename`` (the URL's last path segment when the request gave none). A fetch that fails or is refused is a 400
naming the part's ``file_url`` and saying why. Image URLs are not fetched: the upstream gets them as they are.

Bounds (``[limits]``, docs/security.md): a request with more than ``file_urls_per_request`` such parts is refused
before anything is fetched; each part may use ``fetch_max_bytes`` but all of them together at most
``file_urls_max_total_bytes`` (each fetch gets what is left), and all fetches share one deadline,
``file_urls_fetch_seconds``. So one request holds at most that many fetched bytes, whatever its body packs.
Requests together are bounded by a :class:`~respstream.server.inputs.fetch_budget.FetchBudget` (gateway-wide and per
API key): the most a request's fetches can hold is reserved before the first fetch (refused 429/503 naming the limit
when it does not fit), settled to the data URLs' real size after, and given back when the response ends.
"""

from __future__ import annotations

import asyncio
import base64
import posixpath
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from respstream.server import request_limits
from respstream.server.http_errors import HTTPError
from respstream.server.inputs.fetch_budget import FetchBudget, FetchHold, held_bytes, worst_case_bytes
from respstream.server.tools.netguard import AddressPolicy, FetchRefused
from respstream.server.tools.web_fetch import FetchError, fetch_bytes

__all__ = ["DEFAULT_MAX_FILE_BYTES", "resolve_file_urls"]

DEFAULT_MAX_FILE_BYTES = 2 << 20  # when the tools give no fetch_max_bytes


def _limits(tools: Any) -> tuple[AddressPolicy, int, float]:
    """The server tools' address policy, byte limit and fetch timeout (defaults when the tools have none)."""
    policy = getattr(tools, "policy", None)
    config = getattr(tools, "config", None)
    max_bytes = getattr(config, "fetch_max_bytes", DEFAULT_MAX_FILE_BYTES)
    timeout_for = getattr(tools, "timeout_for", None)
    timeout = float(timeout_for("web_fetch")) if callable(timeout_for) else 10.0
    return (policy if isinstance(policy, AddressPolicy) else AddressPolicy()), int(max_bytes), timeout


async def resolve_file_urls(media: Sequence[tuple[str, dict[str, Any]]], tools: Any, *,
                            budget: FetchBudget | None = None, owner: str | None = None) -> FetchHold | None:
    """Fetch every ``file_url`` among ``media`` (``(param, Chat part)``) and inline it. Raises 400 naming it.

    With ``budget``: reserve what the fetches may hold for ``owner`` first (429/503 when it does not fit) and return
    the hold, settled to what the files take; the caller releases it when the response ends (None: nothing
    fetched)."""
    pending = [(where, part) for where, part in media if "file_url" in part.get("file", {})]
    if not pending:
        return None
    caps = request_limits.current()
    if len(pending) > caps.file_urls_per_request:
        where = pending[caps.file_urls_per_request][0]
        raise HTTPError(400, "too_many_file_urls", f"a request may give at most {caps.file_urls_per_request} "
                        f"input_file parts by file_url (limits.file_urls_per_request); {len(pending)} were given",
                        param=f"{where}.file_url")
    hold = None
    if budget is not None:
        hold = budget.reserve(owner, worst_case_bytes(len(pending), _limits(tools)[1], caps.file_urls_max_total_bytes))
    try:
        async with asyncio.timeout(caps.file_urls_fetch_seconds):
            await _fetch_all(pending, tools, caps.file_urls_max_total_bytes)
    except TimeoutError:
        if hold is not None:
            hold.release()
        raise HTTPError(400, "file_fetch_timeout", f"fetching the input_file URLs took longer than "
                        f"{caps.file_urls_fetch_seconds:g} s (limits.file_urls_fetch_seconds)",
                        param=f"{pending[0][0]}.file_url") from None
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    if hold is not None:
        hold.settle(held_bytes(part["file"]["file_data"] for _, part in pending))
    return hold


async def _fetch_all(pending: list[tuple[str, dict[str, Any]]], tools: Any, total_bytes: int) -> None:
    policy, max_bytes, timeout = _limits(tools)
    left = total_bytes
    for where, part in pending:
        file = part["file"]
        url = file.pop("file_url")
        budget = min(max_bytes, left)
        try:
            fetched = await fetch_bytes(url, policy=policy, max_bytes=budget, timeout=timeout)
        except (FetchError, FetchRefused) as exc:
            why = f" (limits.file_urls_max_total_bytes: {left} of {total_bytes} bytes were left)" \
                if budget < max_bytes else ""
            raise HTTPError(400, "invalid_value", f"{where}.file_url could not be fetched: {exc}{why}",
                            param=f"{where}.file_url") from None
        left -= len(fetched.data)
        encoded = base64.b64encode(fetched.data).decode("ascii")
        file["file_data"] = f"data:{fetched.content_type};base64,{encoded}"
        file.setdefault("filename", posixpath.basename(urlsplit(fetched.url).path) or "file")
