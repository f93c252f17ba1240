"""The one TLS client context of the process, built on first use.

Why: loading the CA bundle is most of what making an HTTP client costs (~190M instructions, tens of milliseconds
on the event loop, measured under callgrind for #16), and httpx loads it for every ``AsyncClient`` it is not handed
a context for, even one that only ever speaks plain ``http``. Every outbound client (upstreams, their context
discovery and token counting, the web tools) shares this one instead. certifi's bundle when installed, else the
system store.
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["client_tls_context"]


@functools.cache
def client_tls_context() -> ssl.SSLContext:
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())
