"""The Anthropic Messages API behind the Responses API: request mapping (request.py), the stream as a sans-IO state
machine (stream.py, body.py) and the thin IO adapter (adapter.py). See docs/gateway.md#anthropic."""
