"""``respstream serve`` checks the store URL before building anything: every kind ``open_store`` knows is accepted
(``redis+cluster://`` too), anything else is refused naming the kinds. No server is started."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from respstream.commands.serve import _check_components


@pytest.mark.parametrize("url", ["memory", "sqlite:///data/r.db", "redis://127.0.0.1:6379/0", "unix:///tmp/r.sock",
                                 "redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "rediss+cluster://h:7000"])
def test_every_store_kind_is_accepted(url: str) -> None:
    assert _check_components(SimpleNamespace(upstreams=[], store=url, background_store="")) is None


def test_an_unknown_store_url_is_refused_naming_the_kinds() -> None:
    problem = _check_components(SimpleNamespace(upstreams=[], store="mongodb://x", background_store=""))
    assert problem is not None and "unknown store URL 'mongodb://x'" in problem
    assert "redis+cluster://" in problem and "sqlite:///" in problem
