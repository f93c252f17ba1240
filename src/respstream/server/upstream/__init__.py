"""Model backends, one adapter family per package over a shared core: chat/ (Chat Completions), responses/ (native
Responses servers), anthropic/ (Anthropic Messages), gemini/ (Gemini), embedded/ (the in-process llama.cpp model) and
scripted.py (the SIMULATED test backend); the core they share is base.py (chunks, the Upstream interface), factory.py,
retries.py, http/ (the lean HTTP client) and the small modules beside them. Below the writer: an upstream yields
chunks and never emits events itself. Layout and the allowed cross-family imports: docs/gateway.md and
tests/test_architecture.py."""
