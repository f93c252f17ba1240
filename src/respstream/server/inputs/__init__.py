"""What a response is given: the POST /v1/responses body parsed and validated into the typed request
(requests.py with its field groups: input items, tools, option fields, tool policy, structured output format, input
parts and files, compaction items, the typed body reads they share), and the context resolved
for it before anything streams (previous response and conversation from the store, history as messages, the
context-window check and truncation).

Below it: routing (truncation measures with the router's estimate), tools (MCP specs, the fetch policy for file
URLs), the writer's types, the store and the server's base. Above it: responses, endpoints, http.
"""
