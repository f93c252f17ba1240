"""HTTP: the Starlette app and its routes, the SSE sender (and its direct path) and the WebSocket mode, the
guards in front (request scope, web security headers, auth, rate and stream limits, shared limits, the connection
guard), the OpenAPI document, components built from the config, and running it (uvicorn stack, graceful serving,
workers, the instance lock).

The top of the server: it imports every layer below and nothing imports it but ``respstream.commands``.
"""
