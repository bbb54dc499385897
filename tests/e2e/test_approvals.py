"""Tool approval in a real browser: the run stops at the call, the Approve / Deny card
shows the tool, its arguments and why; a click resumes the run; a reload shows the
decision, without buttons."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM, _manage
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

MARK = """
from tools.models import ToolConfig
from tools.services import toolconfig_sync, toolconfig_update
toolconfig_sync()
clock = ToolConfig.objects.get(name="current_time")
toolconfig_update(toolconfig=clock, requires_confirmation={on})
"""


@pytest.fixture
def clock_needs_approval(server_env: dict[str, str]) -> Iterator[None]:
    """The admin marked ``current_time`` as needing approval (for this test only)."""
    _manage(server_env, "shell", "-c", MARK.format(on=True))
    try:
        yield
    finally:
        _manage(server_env, "shell", "-c", MARK.format(on=False))


def test_approving_a_call_in_the_page_resumes_the_run(
    chat_page: Page, llm: ScriptedLLM, clock_needs_approval: None
) -> None:
    llm.script(
        {"tool_calls": [{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
        "It is evening in Tokyo.",
    )
    new_conversation(chat_page)
    send(chat_page, "What time is it in Tokyo?")
    run_id = latest_run(chat_page)
    card = chat_page.locator(f"#steps-{run_id} .approval")
    expect(card).to_contain_text("current_time needs your approval")
    expect(card).to_contain_text("Asia/Tokyo")
    expect(chat_page.locator(f"#status-{run_id}")).to_contain_text("Waiting for your approval")
    # The two choices look different (issue 47): Approve the primary action, Deny a danger.
    expect(card.get_by_role("button", name="Approve")).to_have_class(re.compile(r"\bprimary\b"))
    expect(card.get_by_role("button", name="Deny")).to_have_class(re.compile(r"\bdanger\b"))

    card.get_by_role("button", name="Approve").click()

    expect(card).to_contain_text("Approved")
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#answer-{run_id}")).to_contain_text("It is evening in Tokyo.")
    expect(chat_page.locator(f"#steps-{run_id} .tool-card.ok")).to_have_count(1)
    chat_page.reload()
    expect(card).to_contain_text("Approved")
    expect(card.get_by_role("button")).to_have_count(0)
