"""The endpoints beside create/retrieve: ``POST /v1/responses/compact``, input items and input tokens, and the
Conversations API. Each takes the gateway through the small :class:`~respstream.server.endpoints.gateway.Gateway`
protocol (auth, rate limit, body reading, the running service), never the app itself.

Below it: responses (the service), inputs, the store. Above it: http, whose app mounts these routes.
"""
