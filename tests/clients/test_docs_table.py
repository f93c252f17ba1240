"""docs/clients.md's matrix is matrix.py's: the table between its ``client-matrix`` markers must be exactly
``render_table()``, so a pass/xfail claim in the doc changes with the parametrization or this test fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .matrix import CHECKS, DIALECTS, render_table

pytestmark = pytest.mark.clients

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
START, END = "<!-- client-matrix:start -->\n", "<!-- client-matrix:end -->"


def test_the_doc_shows_the_matrix_the_tests_run() -> None:
    text = DOC.read_text()
    assert START in text and END in text, f"{DOC} needs the {START.strip()} ... {END} markers"
    table = text.split(START, 1)[1].split(END, 1)[0]
    expected = render_table()
    assert table == expected, f"docs/clients.md's table is stale; put this between its markers:\n{expected}"


def test_the_table_covers_every_case() -> None:
    rows = [line for line in render_table().splitlines()[2:]]
    assert len(rows) == sum(len(checks) for checks in CHECKS.values())
    assert all(line.count("|") == 3 + len(DIALECTS) for line in rows)


def test_the_doc_names_the_pinned_node_versions() -> None:
    """Each Node client's row in the doc carries the exact version package.json pins (npm ci installs those)."""
    pins = json.loads((Path(__file__).parent / "node" / "package.json").read_text())["dependencies"]
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    for name in ("openai", "ai", "@ai-sdk/openai", "@openai/agents", "@openai/codex"):
        row = next((line for line in rows if f"`{name}`" in line.split("|")[1]), None)
        assert row is not None and pins[name] in row, f"docs/clients.md: {name} should be at {pins[name]}: {row}"
