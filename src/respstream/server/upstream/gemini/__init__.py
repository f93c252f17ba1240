"""Google's Gemini API as an upstream: request mapping (request.py, contents.py), the stream's translation as a
sans-IO state machine (stream.py) fed by the body reader (reads.py), and the thin IO adapter (adapter.py)."""

from respstream.server.upstream.gemini.adapter import GeminiUpstream

__all__ = ["GeminiUpstream"]
