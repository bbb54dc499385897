"""Smoke test: the same chat in a real browser, answered by the real bundled local model.

The daphne process starts the supervised llama.cpp server itself on first use. Only the
protocol is asserted (an answer arrives and the run finishes), never the answer's quality.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import _manage
from tests.e2e.test_chat_flows import latest_run, new_conversation, send

pytestmark = pytest.mark.e2e

LOCAL_SETUP = """
from llms.providers.local import PLACEHOLDER_BASE_URL
from llms.services import model_upsert, provider_upsert

provider, _ = provider_upsert(name="local", kind="local", base_url=PLACEHOLDER_BASE_URL)
model_upsert(
    provider=provider, model_id="SmolLM2", display_name="SmolLM2 135M (offline demo)",
    abilities={"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp",
               "streaming": True, "tool_call": False, "tool_choice": True},
    context_window=8192, max_output_tokens=512, small=True,
)
"""


@pytest.fixture(scope="package")
def local_model(app_server: str, server_env: dict[str, str]) -> str:
    _manage(server_env, "shell", "-c", LOCAL_SETUP)
    return "SmolLM2 135M (offline demo)"


def test_chat_with_the_real_local_model(
    chat_page: Page, local_model: str, screenshot: Callable[..., Path]
) -> None:
    new_conversation(chat_page)
    with chat_page.expect_response(lambda r: r.url.endswith("/model/")) as switched:
        chat_page.get_by_label("Model").select_option(label=local_model)
    assert switched.value.status == 200
    # The notice follows the switch at once, and is there after a reload too.
    expect(chat_page.locator("#local-model-notice")).to_contain_text("tiny offline demo model")
    chat_page.reload()
    expect(chat_page.locator("#local-model-notice")).to_contain_text("tiny offline demo model")

    send(chat_page, "What is 2 + 2? Answer briefly.")
    run_id = latest_run(chat_page)
    footer = chat_page.locator(f"#footer-{run_id} .iterations")
    expect(footer).to_be_visible(timeout=240_000)  # the llama.cpp server starts on first use
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    expect(answer).not_to_be_empty()
    expect(chat_page.locator(f"#status-{run_id}")).not_to_contain_text("failed")
    screenshot(chat_page)
