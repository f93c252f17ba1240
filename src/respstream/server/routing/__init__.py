"""Which model and upstream answer a request: the pure classifier of model: "auto" inputs, the router (category
-> model -> healthy upstream, and the ground-first tool pick), the linear-time URL finder, and the upstream watch
(startup warnings, probes, context-window discovery).

Below it: upstream/, tools/, the server's base. Above it: inputs (truncation measures with the router's estimate),
responses and http.
"""
