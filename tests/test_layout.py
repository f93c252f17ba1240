"""Architecture guards: protocol/ stays sans-IO, and every public module's __all__ is honest."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import respstream

SRC = Path(respstream.__file__).parent
FORBIDDEN_IN_PROTOCOL = {
    "httpx", "httpx2", "starlette", "uvicorn", "anyio", "asyncio", "socket", "sqlite3", "redis", "time",
    "threading", "subprocess", "select", "selectors", "ssl", "urllib",
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0] if not node.module.startswith("respstream") else node.module)
    return names


@pytest.mark.parametrize("path", sorted((SRC / "protocol").glob("*.py")), ids=lambda p: p.name)
def test_protocol_never_imports_io(path: Path) -> None:
    imported = _imports(path)
    assert not imported & FORBIDDEN_IN_PROTOCOL, f"{path.name} imports IO: {imported & FORBIDDEN_IN_PROTOCOL}"
    inner = {name for name in imported if name.startswith("respstream.")}
    outside = {name for name in inner if not name.startswith(("respstream.protocol", "respstream.errors"))}
    assert not outside, f"{path.name} reaches outside protocol/: {outside}"


def _public_modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages([str(SRC)], prefix="respstream."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("module_name", _public_modules())
def test_dunder_all_names_exist(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # optional extras (e.g. redis) are tested where they are used
        pytest.skip(f"{module_name} needs an optional dependency: {exc}")
    exported = getattr(module, "__all__", None)
    public_api = module_name in ("respstream", "respstream.errors") or module_name.startswith(
        ("respstream.protocol", "respstream.client")
    )
    if exported is None:
        assert not public_api, f"{module_name} is public API and must declare __all__"
        pytest.skip(f"{module_name} declares no __all__ (internal module)")
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ lists names it does not define: {missing}"
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ has duplicates"
