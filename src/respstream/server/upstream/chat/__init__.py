"""Any OpenAI-compatible Chat Completions endpoint as an upstream: the adapter (adapter.py: ``ChatCompletionsUpstream``
over the HTTP base, speaking ``ChatCompletionsAPI``, which the native Responses adapter also speaks to a server
without ``/responses``), the body read by read (reads.py), the
chunks' translation (stream.py, with chunk_template.py, think.py and tool_call_fragments.py) and the answer filters
(answer_filters.py, loop_guard.py). The request body is built by ../chat_wire.py, shared with the other adapters."""
