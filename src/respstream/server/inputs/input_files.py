"""``input_file`` parts given by ``file_url``: fetched by the gateway through the network policy, sent inline.

How this works: Chat Completions has no file URL, so before anything streams (after routing and the modality check)
:func:`resolve_file_urls` fetches each ``file_url`` with :func:`~respstream.server.tools.web_fetch.fetch_bytes` —
every hop resolved and checked by the server tools' :class:`~respstream.server.tools.netguard.AddressPolicy`
(``[tools] fetch_allow``: private, loopback and link-local addresses are refused otherwise), at most
``[tools] fetch_max_bytes`` — and replaces it in place by ``file_data`` (a ``data:<type>;base64,`` URL) and a
``filename`` (the URL's last path segment when the request gave none). A fetch that fails or is refused is a 400
naming the part's ``file_url`` and saying why. Image URLs are not fetched: the upstream gets them as they are.
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from respstream.server.http_errors import HTTPError
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


async def resolve_file_urls(media: Sequence[tuple[str, dict[str, Any]]], tools: Any) -> None:
    """Fetch every ``file_url`` among ``media`` (``(param, Chat part)``) and inline it. Raises 400 naming it."""
    pending = [(where, part) for where, part in media if "file_url" in part.get("file", {})]
    if not pending:
        return
    policy, max_bytes, timeout = _limits(tools)
    for where, part in pending:
        file = part["file"]
        url = file.pop("file_url")
        try:
            fetched = await fetch_bytes(url, policy=policy, max_bytes=max_bytes, timeout=timeout)
        except (FetchError, FetchRefused) as exc:
            raise HTTPError(400, "invalid_value", f"{where}.file_url could not be fetched: {exc}",
                            param=f"{where}.file_url") from None
        encoded = base64.b64encode(fetched.data).decode("ascii")
        file["file_data"] = f"data:{fetched.content_type};base64,{encoded}"
        file.setdefault("filename", posixpath.basename(urlsplit(fetched.url).path) or "file")
