"""The gateway: a response is an append-only event log, a stream a cursor over it (DESIGN §4).

One folder per layer, top first; a module imports only its own layer or lower ones, never in a circle
(tests/test_architecture.py checks both on the import graph, and profiles one request for calls back up):

- ``http/``        the Starlette app and its routes, SSE and WebSocket senders, guards and limits, serving, workers
- ``endpoints/``   compact, input items and tokens, Conversations (they take the ``Gateway`` Protocol, not the app)
- ``responses/``   the service and the pipeline: rounds, tool rounds, rewrite, grounding, citations
- ``inputs/``      the request parsed, and the context a response is given (history, files, truncation, limits)
- ``routing/``     classify, router, upstream watch
- ``tools/mcp_tools.py`` remote MCP tools (they list a server's tools through the writer)
- ``events/``      the writer (the only way an event is emitted), frames, the Response object, dialects
- ``upstream/``    model backends (chunks in, never events out)
- ``tools/``       server tools
- the root         config, the HTTP error envelope (``http_errors``), the TLS context, the model catalog
- ``store/``, ``telemetry/`` (with metrics)

A streamed ``POST /v1/responses`` walks down once: ``http.response_routes.create`` reads the body (through the
guards of ``http.app_gateway``) -> ``inputs.requests.parse_request``
-> ``responses.responses_service.ResponseService.start``, which resolves the context (``inputs``: previous response
and conversation, history, modalities, files, context limit, truncation), routes (``routing.router``), builds the
Response (``events.response_object``), creates the log (``store``) and starts the ``responses.pipeline.Pipeline``
task; the pipeline drives ``events.writer.ResponseWriter`` with the chunks of an ``upstream`` (and runs ``tools``
between rounds), the writer appends to the ``store``; ``http.sse_response`` (or ``websocket.transport``) reads the log
after the client's cursor and sends ``events.frames``. Layers below talk back only through what they return or the
store: no lower module calls a higher one.
"""
