"""Tool approval on a team-mode stack: the run waits in a Celery worker, the decision is
made on the web server, and reaches the worker through the wake-up (the heartbeat, which
would also bring it, is set far beyond every timeout here)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest

from tests.integration.observers import EventStream, assert_consistent
from tests.integration.stack import Browser, Frames, Stack, async_wait_for, running_stack

pytestmark = pytest.mark.integration

CALCULATOR_NEEDS_APPROVAL = """
from tools.models import ToolConfig
from tools.services import toolconfig_sync, toolconfig_update
toolconfig_sync()
toolconfig_update(toolconfig=ToolConfig.objects.get(name="calculator"), requires_confirmation=True)
"""


@pytest.fixture(scope="module")
def approval_stack() -> Iterator[Stack]:
    no_fallback = {"AGENTSITE_RUN_HEARTBEAT_SECONDS": "600"}
    with running_stack(
        mode="team", extra_env=no_fallback, setup_extra=CALCULATOR_NEEDS_APPROVAL
    ) as stack:
        yield stack


def calculator_then_answer(marker: str, answer: str) -> list[dict]:
    call = {"name": "calculator", "arguments": {"expression": "6*7"}, "id": "calc-1"}
    return [{"contains": marker, "in": "any", "responses": [{"tool_calls": [call]}, answer]}]


@pytest.mark.parametrize(
    ("decision", "status", "ran"), [("approve", "approved", True), ("deny", "denied", False)]
)
async def test_the_decision_reaches_the_worker_and_the_run_goes_on(
    approval_stack: Stack, decision: str, status: str, ran: bool
) -> None:
    stack, marker = approval_stack, f"APPROVE-{secrets.token_hex(3)}"
    stack.script(rules=calculator_then_answer(marker, "It is 42."))
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        page = Frames(browser.socket(conversation_id), describe=stack.logs)
        async with EventStream(browser, conversation_id) as stream, page as frames:
            await browser.send(conversation_id, f"{marker}: what is 6*7?")
            card = await frames.wait(
                lambda f: "needs your approval" in f, timeout=20, what="the approval card"
            )
            assert "calculator" in card and "6*7" in card
            decide = re.search(r'hx-post="(/runs/\d+/approvals/[\w-]+/)"', card)
            assert decide, card
            answered = await browser.post(decide[1], {"decision": decision})
            assert answered.status_code == 200, answered.text[:300]
            await async_wait_for(stream.ended, timeout=30, what="the run's end", detail=stack.logs)

    approvals = [p for _i, e, p in stream.events if e == "approval"]
    assert [a["status"] for a in approvals] == ["requested", status]
    observation = next(
        p["observation"] for _i, e, p in stream.events if e == "step" and "observation" in p
    )
    assert ("42" in observation) is ran and ("denied" in observation) is not ran
    assert_consistent(stack, conversation_id, [f"{marker}: what is 6*7?"], stream)
