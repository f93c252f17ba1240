"""The commands the docs tell a reader to type exist: the README's quick start is exactly ``make serve`` and
``make test``; every ``respstream ...`` line in a code block of README.md or docs/*.md parses with the CLI's own
argument parser (a renamed flag or command fails here); every ``make X`` names a Makefile target."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from respstream.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"", "bash", "sh", "shell", "console"}


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced code block, fences paired in order."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
                blocks.append((line[3:].strip(), current))
            else:
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _code_lines(page: Path) -> list[str]:
    """The lines of the page's shell code blocks, continuation lines joined."""
    lines: list[str] = []
    for language, block in _blocks(page.read_text(encoding="utf-8")):
        if language not in SHELL:
            continue
        pending = ""
        for line in block:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            lines.append((pending + line).strip())
            pending = ""
    return lines


def _commands(prefix: str) -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for line in _code_lines(page):
            if line.startswith(prefix):
                argv = shlex.split(line.split(" | ")[0].split(" > ")[0], comments=True)
                found.append((f"{page.relative_to(ROOT)}: {line[:80]}", argv))
    return found


def test_the_quick_start_is_exactly_make_serve_and_make_test() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = _blocks(readme.split("## Quick start", 1)[1])
    assert blocks, "README.md's quick start has no code block"
    commands = [" ".join(shlex.split(line, comments=True)) for line in blocks[0][1]]
    assert [c for c in commands if c] == ["make serve", "make test"]


RESPSTREAM_LINES = _commands("respstream ")


def test_the_docs_show_respstream_commands() -> None:
    assert len(RESPSTREAM_LINES) >= 20, "the pattern that finds documented commands no longer matches"


@pytest.mark.parametrize(("where", "argv"), RESPSTREAM_LINES, ids=[w for w, _ in RESPSTREAM_LINES])
def test_a_documented_respstream_command_parses(where: str, argv: list[str]) -> None:
    try:
        build_parser(argv[1] if len(argv) > 1 else None).parse_args(argv[1:])
    except SystemExit as exc:
        pytest.fail(f"{where}: the CLI refuses it (exit {exc.code})")


def test_every_documented_make_target_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.MULTILINE))
    used = {argv[1] for _, argv in _commands("make ") if len(argv) > 1}
    assert {"serve", "test"} <= used
    assert sorted(used - targets) == [], "docs name make targets the Makefile does not have"
