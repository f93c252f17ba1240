"""A native Responses API server (``/v1/responses``) as an upstream: the adapter (adapter.py), the body read by read
(reads.py), the events' translation into chunks (stream.py) and the hosted-tool and reasoning items passed through
(passed_items.py)."""
