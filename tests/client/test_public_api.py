"""The top-level ``respstream`` namespace: the public API, an honest ``__all__``, a version, and a cheap import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import respstream
from respstream.client import AsyncClient, Client
from respstream.errors import RespstreamError, StreamTruncated
from respstream.protocol import AssembledResponse, StreamCore


def test_main_names_are_the_real_objects() -> None:
    assert respstream.Client is Client and respstream.AsyncClient is AsyncClient
    assert respstream.StreamCore is StreamCore and respstream.AssembledResponse is AssembledResponse
    assert respstream.StreamTruncated is StreamTruncated and issubclass(respstream.ResponseFailed, RespstreamError)


def test_all_is_unique_complete_and_resolvable() -> None:
    assert len(respstream.__all__) == len(set(respstream.__all__))
    for name in respstream.__all__:
        assert getattr(respstream, name) is not None, name
    errors = {n for n in dir(respstream) if isinstance(getattr(respstream, n), type)
              and issubclass(getattr(respstream, n), Exception) and n != "PackageNotFoundError"}
    assert errors <= set(respstream.__all__)  # every exception class reachable here is exported
    assert {"APIStatusError", "NotFoundError", "StreamTimeout"} <= errors


def test_version_matches_the_installed_distribution() -> None:
    from importlib.metadata import version

    assert respstream.__version__ == version("respstream")


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        respstream.no_such_thing  # noqa: B018


def test_import_stays_cheap_until_a_client_is_used() -> None:
    code = ("import sys, respstream; assert 'httpx' not in sys.modules, 'httpx imported eagerly'; "
            "respstream.Client; assert 'httpx' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_end_to_end_through_the_top_level_names() -> None:
    core = respstream.StreamCore()
    core.feed(b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r"}}\n\n'
              b'data: {"type":"response.completed","sequence_number":1,"response":{"status":"completed"}}\n\n')
    core.close()
    assert core.result.status == "completed" and core.result.response_id == "r"
