"""Item 2: parameters. What the form sends (and does not send until touched), the dialect and modalities shown,
structured output parsed and validated, image input offered only to a model that takes images, tool toggles."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import Gateway, open_page, wait_status
from .fake_gateway import Script

pytestmark = pytest.mark.browser

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer",
          "minimum": 0}}, "required": ["city", "population"], "additionalProperties": False}
# A 1x1 PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
                       "RU5ErkJggg==")


def test_defaults_send_no_sampling_fields(page: Any, fake: Any) -> None:
    fake.script = Script()
    open_page(page, fake.url)
    assert page.inner_text("#temperature-value") == "default"
    assert page.inner_text("#tools-note").startswith("None selected: no server tool is offered")
    page.click("#send")
    wait_status(page, "completed")
    sent = fake.requests[-1]
    for field in ("temperature", "top_p", "max_output_tokens", "instructions", "tools", "text"):
        assert field not in sent, field


def test_parameters_reach_the_request(page: Any, fake: Any) -> None:
    fake.script = Script()
    open_page(page, fake.url)
    page.select_option("#model", "fake-large")
    page.fill("#temperature", "0.3")  # a range input: fill sets the value and fires input
    page.fill("#top-p", "0.9")
    page.fill("#max-tokens", "64")
    page.fill("#instructions", "Answer briefly.")
    page.check("input[name=tool][value=web_search]")
    assert page.inner_text("#tools-note") == "The gateway runs web_search when the question or the model calls for it."
    page.click("#send")
    wait_status(page, "completed")
    sent = fake.requests[-1]
    assert sent["model"] == "fake-large"
    assert sent["temperature"] == 0.3 and sent["top_p"] == 0.9
    assert sent["max_output_tokens"] == 64 and sent["instructions"] == "Answer briefly."
    assert sent["tools"] == [{"type": "web_search"}]
    page.click("#reset-sampling")
    page.fill("#prompt", "again")
    page.click("#send")
    page.wait_for_function("window.__playground.request.input === 'again'"
                           " && window.__playground.status === 'completed'")
    assert fake.requests[-1]["input"] == "again"
    assert "temperature" not in fake.requests[-1] and "top_p" not in fake.requests[-1]


def test_dialect_and_modalities_are_shown(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:3", dialect="openai") as url:
        open_page(page, url)
        page.wait_for_function("document.getElementById('dialect').textContent === 'openai'")
        # The SIMULATED scripted upstream takes text, image and file parts (docs/configuration.md [models]).
        assert page.inner_text("#modalities") == "text + image + file"


@pytest.mark.parametrize(("answer", "valid", "errors"), [
    ('{"city": "Paris", "population": 2102650}', "true", []),
    ('{"city": "Paris", "population": "many", "mayor": "x"}', "false", ["$.population", "$.mayor"]),
    ("Paris, about two million", "false", []),
])
def test_structured_output_is_parsed_and_validated(page: Any, fake: Any, answer: str, valid: str,
                                                   errors: list[str]) -> None:
    fake.script = Script(chunks=[answer[: len(answer) // 2], answer[len(answer) // 2 :]])
    open_page(page, fake.url)
    page.click("#schema-section summary")
    page.fill("#schema", json.dumps(SCHEMA))
    page.click("#send")
    wait_status(page, "completed")
    fmt = fake.requests[-1]["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"] == SCHEMA and fmt["strict"] is True
    box = page.locator("#structured")
    box.wait_for(state="visible")
    assert box.get_attribute("data-valid") == valid
    paths = page.locator("#structured-errors li code").all_inner_texts()
    assert paths == errors
    if valid == "true":
        assert json.loads(page.inner_text("#structured-json")) == json.loads(answer)
        assert page.inner_text("#structured-verdict") == "valid against the schema"
    elif not errors:
        assert "not valid JSON" in page.inner_text("#structured-errors")


def test_a_schema_that_is_not_json_is_refused_before_sending(page: Any, fake: Any) -> None:
    fake.script = Script()
    open_page(page, fake.url)
    before = len(fake.requests)
    page.click("#schema-section summary")
    page.fill("#schema", '{"type": "object",')
    page.click("#send")
    page.locator("#error-banner").wait_for(state="visible")
    assert page.inner_text("#error-code") == "invalid_schema"
    assert "not valid JSON" in page.inner_text("#error-message")
    assert len(fake.requests) == before
    assert page.evaluate("window.__playground.violations") == []


def test_image_input_only_for_a_model_that_takes_images(page: Any, fake: Any, tmp_path: Path) -> None:
    fake.script = Script()
    open_page(page, fake.url)
    page.select_option("#model", "fake-small")
    assert page.inner_text("#modalities") == "text"
    assert not page.locator("#attach-label").is_visible()
    page.select_option("#model", "fake-large")
    assert page.inner_text("#modalities") == "text + image"
    page.locator("#attach-label").wait_for(state="visible")
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    page.set_input_files("#attach", str(image))
    page.locator("#attachments img").wait_for()
    page.fill("#prompt", "What is in this picture?")
    page.click("#send")
    wait_status(page, "completed")
    content = fake.requests[-1]["input"][0]["content"]
    assert content[0] == {"type": "input_text", "text": "What is in this picture?"}
    assert content[1]["type"] == "input_image"
    assert base64.b64decode(content[1]["image_url"].split(",", 1)[1]) == PNG
    assert page.locator("#attachments img").count() == 0  # sent: the composer is cleared
