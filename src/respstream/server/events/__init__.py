"""The events a response emits: the writer (the only way to emit, owner of sequence numbers and the terminal),
its mixins (deltas, tool items, the store flush), open content parts, SSE frames of log entries, the Response
object, and the wire dialects (platform, openai, openresponses).

Below it: upstream/ (the chunk types the writer takes), store/, telemetry/ and the server's base. Above it: tools'
MCP listing, routing, inputs, responses, endpoints and http, which all write through it or frame what it wrote.
"""
