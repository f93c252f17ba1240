"""A new response's routing decision, or the clear error instead of one: 400 ``model_not_found`` for an unknown
pinned model; 503 ``upstream_unavailable`` when no upstream lists any model, or when every upstream that could serve
the request failed its last health probe (the gateway keeps probing: ``upstream_probe_seconds``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from respstream.server.http_errors import HTTPError
from respstream.server.inputs.response_request import ResponseRequest
from respstream.server.model_catalog import ModelCatalog
from respstream.server.responses.chat_request import cache_hints, chat_options
from respstream.server.responses.collaborators import RouterLike
from respstream.server.telemetry import Tracing
from respstream.server.telemetry.spans import NO_SPAN_CM
from respstream.server.upstream.base import GenerationRequest

__all__ = ["check_upstream_accepts", "check_upstream_up", "route_request"]


def check_upstream_accepts(req: ResponseRequest, decision: Any, messages: list[dict[str, Any]]) -> None:
    """An upstream with ``check_request`` (the provider adapters: upstream/anthropic/) refuses before streaming, with a
    400 naming the field, what it cannot send to its provider. Raises :class:`HTTPError`."""
    check = getattr(decision.upstream, "check_request", None)
    if check is None:
        return
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description") or "",
                                               "parameters": t.get("parameters") or {"type": "object"}}}
             for t in req.client_tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
    check(GenerationRequest(model=decision.model_id, messages=messages, tools=tools,
                            tool_choice=req.tool_policy.chat_tool_choice() if tools else None,
                            max_output_tokens=req.max_output_tokens, temperature=req.temperature,
                            options=chat_options(req, tools_offered=bool(tools)), cache=cache_hints(req)))


async def route_request(req: ResponseRequest, *, router: RouterLike, catalog: ModelCatalog,
                        tracing: Tracing) -> Any:
    """The routing decision for ``req``. Raises a 400 ``model_not_found`` for an unknown pinned model."""
    target_model = catalog.resolve(req.model)  # `[models] aliases`
    pinned = target_model != "auto"
    try:
        # Tracing off: no attributes built for nothing (issue 41).
        with tracing.span("route", {"gen_ai.request.model": req.model}) if tracing.enabled else NO_SPAN_CM as span:
            # (only a session's request passes the key: test routers take the two positional arguments)
            session = {"affinity": req.affinity} if req.affinity else {}
            decision = await router.route(req.input_text, target_model if pinned else None, **session)
            if tracing.enabled:
                span.set_attributes({"respstream.route.category": decision.category,
                                     "respstream.route.source": decision.source,
                                     "respstream.route.model": decision.model_id})
            return decision
    except Exception as exc:
        available = getattr(exc, "available", None)
        upstreams = [str(getattr(u, "name", u)) for u in getattr(router, "upstreams", [])]
        if available is not None and not available and upstreams and req.model == "auto":
            # No upstream lists any model: they are down or lack GET /v1/models. Not the caller's mistake.
            raise HTTPError(503, "upstream_unavailable",
                            f"No model is available: upstream(s) {', '.join(upstreams)} did not list any model "
                            "(down, or no GET /v1/models). Name its models in the config file "
                            "([upstream_options.\"<url>\"] models = [...]), or retry.",
                            headers={"Retry-After": "5"}) from exc
        if available is not None:
            raise HTTPError(400, "model_not_found",
                            f"The model '{req.model}' does not exist. Available: {', '.join(available)} (or auto).",
                            param="model", extra={"available": list(available)}) from exc
        raise


def check_upstream_up(req: ResponseRequest, decision: Any, *, router: RouterLike, catalog: ModelCatalog,
                      state_of: Callable[[str], dict[str, Any] | None] | None, every: float) -> None:
    """503 ``upstream_unavailable`` naming the upstream(s) when every upstream that could serve this request
    failed its last health probe (``state_of``: the gateway's last report of an upstream by name). With one still up,
    the router's fallback handles a failure instead."""
    if state_of is None:
        return
    upstreams = list(getattr(router, "upstreams", []) or [decision.upstream])
    pinned = catalog.resolve(req.model) != "auto"
    serving = [u for u in upstreams if not pinned or decision.model_id in getattr(u, "models", [])]
    down = [(u, state_of(str(getattr(u, "name", "")))) for u in serving or [decision.upstream]]
    if not all(state is not None and state.get("probe") == "failed" for _, state in down):
        return
    named = "; ".join(f"{getattr(u, 'name', '?')}: {(state or {}).get('detail') or 'not answering'}"
                      for u, state in down)
    raise HTTPError(503, "upstream_unavailable",
                    f"The upstream serving model '{decision.model_id}' is down ({named}). The gateway keeps "
                    f"probing it{f' every {every:g} s' if every > 0 else ''}; retry shortly.",
                    headers={"Retry-After": str(max(1, int(every or 5)))},
                    extra={"upstreams": [str(getattr(u, "name", "")) for u, _ in down]})
