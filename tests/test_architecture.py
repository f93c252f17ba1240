"""The shape of the code, checked on its own imports (issue 32): no import circles, no layer imports a higher one.

The import graph is read from the AST of every module under ``src/respstream`` (nothing is imported): every
``import`` and ``from ... import`` naming a ``respstream`` module counts, wherever it is written (module level, inside
a function, or under ``TYPE_CHECKING``: a circle that only type checking sees is still a circle in the design).
``from package import name`` counts as an import of ``package.name`` when that is a module, else of ``package``.

:data:`LAYERS` is the order, lowest first. A module belongs to the entry with the longest matching prefix (so
``respstream.server.tools.mcp_tools`` can sit above the rest of ``tools/``), and may import only its own layer or a
lower one. Modules of one layer may import each other, but never in a circle.
"""

from __future__ import annotations

import ast
import sys
import threading
from functools import cache
from pathlib import Path
from types import CodeType, FrameType

import respstream

SRC = Path(respstream.__file__).parent.parent

# Lowest first. The server's request walk goes down this list: http -> endpoints -> responses -> inputs -> routing
# -> events (the writer) -> upstream -> tools -> server base -> store / telemetry.
LAYERS: list[tuple[str, ...]] = [
    ("respstream.errors", "respstream.protocol"),  # errors names protocol types for type checking only
    ("respstream.client",),
    ("respstream",),  # the package's lazy re-exports of client and protocol names
    ("respstream.conformance",),
    ("respstream.server.telemetry",),  # spans, logs, metrics: used by every layer above
    ("respstream.server.store",),  # the event logs and records
    ("respstream.server",),  # the base: config, the error envelope, the TLS context, the model catalog
    ("respstream.server.tools",),  # server tools (calculator, web search...): pure work, no writer
    ("respstream.server.upstream",),  # model backends: chunks in, no writer
    ("respstream.server.events",),  # the writer: the only way an event is emitted; dialects, frames
    ("respstream.server.tools.mcp_tools",),  # remote MCP tools list themselves through the writer
    ("respstream.server.routing",),  # which model and upstream answer
    ("respstream.server.inputs",),  # the request parsed, and the context a response is given
    ("respstream.server.responses",),  # a response as running work: service, pipeline, tool rounds, rewrite
    ("respstream.server.endpoints",),  # the small endpoints beside create (compact, input items, conversations)
    # the Starlette app, SSE senders, guards, serving; and the WebSocket mode beside it (its sans-IO session and the
    # thin transport that uses http's auth, limits and guards, and that http's app mounts)
    ("respstream.server.http", "respstream.server.websocket"),
    ("respstream.commands",),
    ("respstream.cli", "respstream.__main__"),
]


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((SRC / "respstream").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


@cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the respstream modules it imports."""
    modules = _modules()

    def known(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names if alias.name.startswith("respstream"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                if source.split(".")[0] != "respstream":
                    continue
                for alias in node.names:
                    whole = f"{source}.{alias.name}"
                    targets.add(whole if whole in modules else known(source))
        targets.discard(module)
        targets.discard("")
        graph[module] = targets
    return graph


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS"
    return best


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_graph_sees_the_imports() -> None:
    # A broken reader would pass the tests below by seeing nothing: it must see what the app is made of.
    graph = import_graph()
    assert len(graph) > 150
    app = next(name for name in graph if name.endswith(".app") and ".server." in name)
    gateway = next(name for name in graph if name.endswith(".app_gateway") and ".server." in name)
    assert gateway in graph[app] and any(name.endswith(".responses_service") for name in graph[gateway])
    assert "respstream.server.http.response_routes" in graph[app]  # `from package import module` is the module
    assert "respstream.server.config" in graph[app]


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    circles = import_circles(import_graph())
    assert not circles, "import circles (break them with a Protocol in the lower module):\n" + "\n".join(
        " <-> ".join(circle) for circle in circles)


def test_no_module_imports_a_higher_layer() -> None:
    upward = sorted(
        f"{module} (layer {LAYERS[layer_of(module)][0]}) imports {target} (layer {LAYERS[layer_of(target)][0]})"
        for module, targets in import_graph().items() for target in targets if layer_of(target) > layer_of(module))
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_every_server_module_is_in_a_folder_of_the_map() -> None:
    # The server's root holds only its base; everything else lives in the folder of its layer.
    base = {"respstream.server", "respstream.server.config", "respstream.server.http_errors",
            "respstream.server.request_limits", "respstream.server.tls", "respstream.server.model_catalog"}
    flat = {name for name in import_graph() if name.count(".") == 2 and name.startswith("respstream.server.")
            and (SRC / Path(*name.split("."))).with_suffix(".py").is_file()}
    assert flat <= base, f"modules outside the server's folders: {sorted(flat - base)}"


def test_every_folder_says_what_it_owns() -> None:
    for package in sorted((SRC / "respstream" / "server").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(package.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{package.parent.name}/__init__.py needs a docstring saying what it owns"


def _module_of(filename: str) -> str | None:
    root = str(SRC) + "/"
    if not filename.startswith(root) or not filename.endswith(".py"):
        return None
    return filename[len(root):-3].replace("/", ".").removesuffix(".__init__")


def _property_getters() -> set[CodeType]:
    """The code of every property getter in the server: reading a passed-down object's field is not a climb."""
    codes: set[CodeType] = set()
    for name in import_graph():
        if not name.startswith("respstream.server"):
            continue
        module = sys.modules.get(name)
        for value in vars(module).values() if module else ():
            if isinstance(value, type) and value.__module__ == name:
                codes.update(member.fget.__code__ for member in vars(value).values()
                             if isinstance(member, property) and member.fget is not None)
    return codes


def test_a_request_walks_down_the_layers() -> None:
    """One streamed request with a server tool round (the real router, tools, writer and memory store; the
    SIMULATED scripted upstream), profiled: no function of a lower server layer calls into a higher one."""
    from starlette.testclient import TestClient

    from respstream.server.config import Config
    from respstream.server.http.app import create_app

    calls: list[tuple[str, str, str]] = []
    tracing = False

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or not tracing or frame.f_back is None:
            return
        callee, caller = _module_of(frame.f_code.co_filename), _module_of(frame.f_back.f_code.co_filename)
        if callee and caller and callee.startswith("respstream.server") and caller.startswith("respstream.server"):
            calls.append((caller, callee, frame.f_code.co_name))

    app = create_app(Config(upstreams=["scripted:4?tool=calculator"]))
    threading.setprofile(profile)  # the app runs in TestClient's portal thread, started on enter
    try:
        with TestClient(app, base_url="http://localhost") as client:
            tracing = True
            answer = client.post("/v1/responses", json={"model": "auto", "input": "what is 2+3?", "stream": True})
            tracing = False
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert answer.status_code == 200 and "response.completed" in answer.text
    entered = {LAYERS[layer_of(callee)][0] for _, callee, _ in calls}
    assert {"respstream.server.http", "respstream.server.inputs", "respstream.server.routing",
            "respstream.server.responses", "respstream.server.events", "respstream.server.upstream",
            "respstream.server.tools", "respstream.server.store"} <= entered, entered  # the profile saw the walk
    getters = {(_module_of(code.co_filename), code.co_name) for code in _property_getters()}
    climbs = sorted({f"{caller} -> {callee}.{function}" for caller, callee, function in calls
                     if layer_of(callee) > layer_of(caller) and (callee, function) not in getters})
    assert not climbs, "calls back up a layer:\n" + "\n".join(climbs)


# The upstream adapters are a family of sibling packages over a shared core (issue 39, "Layout"): each family is a
# thin translation between one provider API and the core's chunks, and the core (base.py, chat_wire.py, retries.py,
# http/, provider_tools.py, cache_hints.py...) is what they share. A family imports the core, never another family,
# except for the edges below, each with its reason.
UPSTREAM = "respstream.server.upstream"
FAMILIES = ("chat", "responses", "anthropic", "gemini", "embedded", "scripted")
# (What every HTTP family shares, the concurrency slot, the lean HTTP client and its pool, retries before the first
# token, model listing and the deadline, is the core's base class http/upstream.py HttpUpstream: no edge.)
CROSS_FAMILY: dict[tuple[str, str], str] = {
    ("responses", f"{UPSTREAM}.chat.adapter"): "api=auto: a server without /responses is spoken to through the "
                                               "Chat Completions API (ChatCompletionsAPI, over the same pool and slot)",
    ("responses", f"{UPSTREAM}.chat.stream"): "usage_from: one usage mapping for both OpenAI APIs",
    # The embedded model is llama.cpp's own server on loopback, read through the chat adapter (the default), the
    # native Responses one (api=responses) or the Anthropic one (anthropic+embedded, whose request checks it runs
    # before streaming).
    ("embedded", f"{UPSTREAM}.chat.adapter"): "the default adapter to the embedded server",
    ("embedded", f"{UPSTREAM}.responses.adapter"): "the embedded server's /v1/responses",
    ("embedded", f"{UPSTREAM}.anthropic.adapter"): "the embedded server's /v1/messages",
    ("embedded", f"{UPSTREAM}.anthropic.request"): "anthropic+embedded refuses what /v1/messages cannot take",
    ("embedded", f"{UPSTREAM}.anthropic.prefill"): "anthropic+embedded forces a call by prefill",
}


def upstream_family(module: str) -> str | None:
    """The family a module of upstream/ belongs to, or None for the shared core (and for modules outside)."""
    if not module.startswith(UPSTREAM + "."):
        return None
    top = module[len(UPSTREAM) + 1:].split(".")[0]
    return top if top in FAMILIES else None


def test_each_upstream_family_is_a_package_or_a_module() -> None:
    graph = import_graph()
    for family in FAMILIES:
        members = [name for name in graph if upstream_family(name) == family]
        assert members, f"upstream family {family} has no modules (FAMILIES is stale)"
    assert upstream_family(f"{UPSTREAM}.chat.adapter") == "chat" and upstream_family(f"{UPSTREAM}.base") is None


def test_an_upstream_family_imports_no_other_family() -> None:
    graph = import_graph()
    seen: set[tuple[str, str]] = set()
    crossings = []
    for module, targets in graph.items():
        family = upstream_family(module)
        for target in targets:
            other = upstream_family(target)
            if family is None or other is None or other == family:
                continue
            if (family, target) in CROSS_FAMILY:
                seen.add((family, target))
            else:
                crossings.append(f"{module} ({family}) imports {target} ({other})")
    assert not crossings, "an upstream family imports another (share it through the core instead):\n" + "\n".join(
        sorted(crossings))
    stale = sorted(set(CROSS_FAMILY) - seen)
    assert not stale, f"CROSS_FAMILY lists edges that no longer exist: {stale}"


def test_the_upstream_core_imports_no_family() -> None:
    # The factory is where the families are put together; the rest of the core knows none of them.
    factory = f"{UPSTREAM}.factory"
    reaching = sorted(f"{module} imports {target}" for module, targets in import_graph().items()
                      if module.startswith(UPSTREAM + ".") and upstream_family(module) is None and module != factory
                      for target in targets if upstream_family(target) is not None)
    assert not reaching, "the shared upstream core imports a family:\n" + "\n".join(reaching)


def test_a_core_module_of_one_family_lives_in_that_family() -> None:
    # Who imports a module decides its home: a core module only one family uses (and nothing outside upstream/)
    # belongs in that family's package.
    graph = import_graph()
    misplaced = []
    for module in graph:
        if not module.startswith(UPSTREAM + ".") or upstream_family(module) is not None:
            continue
        importers = {name for name, targets in graph.items() if module in targets}
        families = {upstream_family(name) for name in importers}
        outside = {name for name in importers if not name.startswith(UPSTREAM + ".")}
        if len(families) == 1 and None not in families and not outside:
            misplaced.append(f"{module} is imported only by the {families.pop()} family")
    assert not misplaced, "move these into their family's package:\n" + "\n".join(sorted(misplaced))
