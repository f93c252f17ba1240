"""Model backends: the OpenAI-compatible HTTP upstream (Chat Completions and native Responses), the embedded
llama.cpp model, the scripted test backend, and what turns their bytes into chunks. Below the writer: an upstream
yields chunks and never emits events itself."""
