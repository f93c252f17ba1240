"""The respstream client: :class:`Client` / :class:`AsyncClient` for any ``/v1/responses`` server.

```python
with Client(base_url="http://127.0.0.1:8080/v1") as client:
    with client.stream(model="auto", input="Hi", background=True) as stream:
        stream.on_text(lambda delta: print(delta, end=""))
        response = stream.result()   # raises ResponseFailed / ResponseIncomplete / StreamError / StreamTruncated
```
Background streams resume by themselves after a dropped connection (``GET …?starting_after=N``), never by
re-POSTing; events are never duplicated or lost across the seam.
"""

from respstream.client.async_ import AsyncClient
from respstream.client.async_stream import AsyncResponseStream
from respstream.client.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
)
from respstream.client.handlers import ToolCallUpdate
from respstream.client.retry import RetryPolicy
from respstream.client.sync import Client
from respstream.client.sync_stream import ResponseStream

__all__ = [
    "APIConnectionError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncResponseStream",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ResponseStream",
    "RetryPolicy",
    "ServerError",
    "ToolCallUpdate",
    "UnprocessableEntityError",
]
