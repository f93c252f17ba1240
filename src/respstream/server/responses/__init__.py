"""A response as running work: the service (start, cancel, delete, shutdown) with its routing decision and the ways
it ends a log whose writer cannot, the pipeline that drives the writer
(route -> ground first -> generate -> tool rounds -> rewrite -> terminal), what one round's chunks do, native items
relayed, the rewrite pass, grounding and its faithfulness check, url citations, and the Chat Completions options a
request becomes (``chat_request.py``).

Below it: inputs (the parsed request and its context), routing, the writer (events/), upstream/, tools/, store/.
Above it: endpoints and http, which start responses and read their logs.
"""
