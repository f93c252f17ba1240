"""A bug inside a command still ends in one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from respstream import cli


def test_an_unexpected_exception_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import respstream.commands.replay as replay

    def explode(args: argparse.Namespace) -> int:
        raise KeyError("boom")

    original = replay.register

    def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        original(subparsers)
        subparsers.choices["replay"].set_defaults(func=explode)

    monkeypatch.setattr(replay, "register", register)
    code = cli.main(["replay", "-"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "internal error: KeyError" in err and "Traceback" not in err
