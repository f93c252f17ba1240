"""respstream: the OpenAI Responses streaming protocol, both ends.

```python
import respstream

with respstream.Client(base_url="http://127.0.0.1:8080/v1") as client:
    with client.stream(model="auto", input="Hi") as stream:
        response = stream.result()  # an AssembledResponse, or raises ResponseFailed / StreamTruncated / ...
```
The sans-IO core is :class:`StreamCore` (bytes in; typed events, an :class:`AssembledResponse` and
:class:`Violation` s out). Exceptions all derive from :class:`RespstreamError`.

The client and protocol names are imported on first use, so ``import respstream`` (and every ``respstream.*``
submodule, e.g. the CLI) stays cheap and does not pull in httpx until a client is asked for.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from respstream.errors import (
    APIStatusError,
    BadInputError,
    EventTooLarge,
    RemoteProtocolError,
    ResponseCancelled,
    ResponseFailed,
    ResponseIncomplete,
    RespstreamError,
    StreamError,
    StreamTimeout,
    StreamTruncated,
)

if TYPE_CHECKING:
    from respstream.client import (
        APIConnectionError,
        APITimeoutError,
        AsyncClient,
        AsyncResponseStream,
        AuthenticationError,
        BadRequestError,
        Client,
        NotFoundError,
        PermissionDeniedError,
        RateLimitError,
        ResponseStream,
        RetryPolicy,
        ServerError,
        UnprocessableEntityError,
    )
    from respstream.protocol import (
        AssembledResponse,
        Event,
        StreamCore,
        UnknownEvent,
        Violation,
        decode_event,
        encode_event,
    )

try:
    __version__ = version("respstream")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

# name -> the module that defines it (imported lazily by __getattr__)
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("APIConnectionError", "APITimeoutError", "AsyncClient", "AsyncResponseStream", "AuthenticationError",
         "BadRequestError", "Client", "NotFoundError", "PermissionDeniedError", "RateLimitError", "ResponseStream",
         "RetryPolicy", "ServerError", "UnprocessableEntityError"),
        "respstream.client",
    ),
    **dict.fromkeys(
        ("AssembledResponse", "Event", "StreamCore", "UnknownEvent", "Violation", "decode_event", "encode_event"),
        "respstream.protocol",
    ),
}

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AssembledResponse",
    "AsyncClient",
    "AsyncResponseStream",
    "AuthenticationError",
    "BadInputError",
    "BadRequestError",
    "Client",
    "Event",
    "EventTooLarge",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RemoteProtocolError",
    "ResponseCancelled",
    "ResponseFailed",
    "ResponseIncomplete",
    "ResponseStream",
    "RespstreamError",
    "RetryPolicy",
    "ServerError",
    "StreamCore",
    "StreamError",
    "StreamTimeout",
    "StreamTruncated",
    "UnknownEvent",
    "UnprocessableEntityError",
    "Violation",
    "__version__",
    "decode_event",
    "encode_event",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'respstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
