"""The embedded llama.cpp model, in-process (the ``xllamacpp`` wheel): the upstream that starts it and talks to its
loopback server through the chat, native Responses or Anthropic adapter (adapter.py), the GGUF header it reads
(gguf_meta.py) and the saved prompt cache (slot_cache.py, slot_files.py, prefix_index.py)."""
