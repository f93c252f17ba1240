"""What the app runs on (store, router, tools, rewriter, upstreams) and how missing pieces are built from the
config at startup. Tests pass their own :class:`Components`; ``serve`` builds them all."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from respstream.server.config import Config
from respstream.server.responses.collaborators import RewriterLike, RouterLike, ToolsLike
from respstream.server.routing.upstream_watch import configure_upstreams
from respstream.server.store.base import Store, StoreUnavailable
from respstream.server.store.factory import is_memory_url, open_store
from respstream.server.store.memory import MemoryStore
from respstream.server.store.split import SplitStore

__all__ = ["Components", "build_components", "build_store"]

log = logging.getLogger("respstream.server")


@dataclass(slots=True)
class Components:
    """What the app runs on. Missing pieces are built from the config at startup (see :func:`build_components`)."""

    store: Store | None = None
    router: RouterLike | None = None
    tools: ToolsLike | None = None
    rewriter: RewriterLike | None = None
    upstreams: list[Any] = field(default_factory=list)


def build_store(config: Config) -> Store:
    """The store of ``config``: ``store`` for everything; with ``store = memory``, background responses and
    conversations go to the durable ``resolved_background_store()`` (SQLite under the data dir by default) through
    a :class:`SplitStore`. Raises ``ValueError`` / ``StoreUnavailable`` for a store that cannot be opened, except
    the implicit default SQLite file: if that cannot be opened the gateway warns and keeps everything in memory."""
    options: dict[str, Any] = {"instance_id": config.instance_id, "retention_seconds": config.retention_seconds,
                               "lease_seconds": config.lease_seconds}
    main = open_store(config.store, memory_max_bytes=config.memory_store_max_bytes,
                      redis_resend_entries=config.redis_resend_entries,
                      redis_resend_max_bytes=config.redis_resend_max_bytes, **options)
    if not is_memory_url(config.store):
        return main
    background = config.resolved_background_store()
    if is_memory_url(background):
        return main
    assert isinstance(main, MemoryStore)
    try:
        durable = open_store(background, **options)
    except (StoreUnavailable, ValueError) as exc:
        if config.background_store:
            raise
        log.warning("background store %s cannot be opened (%s); background responses stay in memory", background, exc)
        return main
    return SplitStore(main, durable)


async def build_components(config: Config, given: Components) -> Components:
    """Fill in what ``given`` lacks: upstreams from ``config.upstreams``, the router, tools, rewriter, store."""
    store = given.store or build_store(config)
    upstreams = list(given.upstreams)
    router = given.router
    if router is None:
        # Imported here: a memory-only test app never loads the upstream machinery.
        router_mod: Any = importlib.import_module("respstream.server.routing.router")
        factory: Any = importlib.import_module("respstream.server.upstream.factory")
        if not upstreams:
            upstreams = [factory.build_upstream(spec, **config.options_for(spec)) for spec in config.upstreams]
            names: set[str] = set()
            for i, upstream in enumerate(upstreams):  # two `scripted:` upstreams must not share a breaker
                if upstream.name in names:
                    upstreams[i] = factory.build_upstream(config.upstreams[i], name=f"{upstream.name}-{i + 1}",
                                                          **config.options_for(config.upstreams[i]))
                names.add(upstreams[i].name)
        built = not given.upstreams
        for upstream in upstreams:
            start = getattr(upstream, "start", None)
            if start is not None:
                try:
                    await start()
                except Exception as exc:  # an unreachable upstream must not keep the gateway down
                    log.warning("upstream %s did not start: %s", upstream.name, exc)
        await configure_upstreams(config, upstreams, config.upstreams if built else None)
        router = router_mod.Router(upstreams, config.router)
    tools = given.tools
    if tools is None:
        tools = importlib.import_module("respstream.server.tools").ToolRegistry(config.tools)
    rewriter = given.rewriter
    if rewriter is None:
        rewriter = importlib.import_module("respstream.server.responses.rewrite").Rewriter(config.rewrite)
    return Components(store=store, router=router, tools=tools, rewriter=rewriter, upstreams=upstreams)
