"""The synthetic hosted-tool transcripts are exactly what tests/native/hosted_transcripts.py builds from the openai
SDK's types (so they stay valid shapes, and say they are synthetic)."""

from __future__ import annotations

import pytest

from native.hosted_transcripts import FILES, TRANSCRIPTS, stream


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_synthetic_transcript_is_what_the_generator_builds(name: str) -> None:
    text = (TRANSCRIPTS / f"{name}.sse").read_text()
    assert text.startswith(": SYNTHETIC transcript")
    assert text == stream(FILES[name])
