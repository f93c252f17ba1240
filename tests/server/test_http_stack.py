"""``http_stack``: auto takes uvloop + httptools when they import, pure forces asyncio + h11, fast refuses without
them (a clear message, never a silent slow start), an unknown name is a config error."""

from __future__ import annotations

import pytest

from respstream.server.config import ConfigError, load_config
from respstream.server.http import http_stack


def test_auto_uses_the_fast_stack_when_installed_and_pure_forces_asyncio_h11() -> None:
    have = http_stack.available()
    auto = http_stack.uvicorn_options("auto")
    assert auto["loop"] == ("uvloop" if have["uvloop"] else "asyncio")
    assert auto["http"] == ("httptools" if have["httptools"] else "h11")
    assert http_stack.uvicorn_options("pure") == {"loop": "asyncio", "http": "h11"}


def test_the_default_install_has_the_fast_extra() -> None:
    assert http_stack.available() == {"uvloop": True, "httptools": True}, "make install installs respstream[fast]"


def test_fast_without_the_extensions_says_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_stack, "available", lambda: {"uvloop": False, "httptools": True})
    with pytest.raises(http_stack.StackError, match=r"needs uvloop: pip install 'respstream\[fast\]'"):
        http_stack.uvicorn_options("fast")
    assert http_stack.uvicorn_options("auto") == {"loop": "asyncio", "http": "httptools"}


def test_unknown_stack_and_bad_worker_count_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="http_stack must be auto, fast or pure"):
        load_config(None, {"http_stack": "turbo"})
    with pytest.raises(ConfigError, match="workers must be at least 1"):
        load_config(None, {"workers": 0})
