"""Issue 47, errors and cards: the approval card shows the concrete request (method,
resolved URL, body, the credentials by name or "No credentials"), a denied call shows
as denied (not failed) in the tool card and on the share page, staff see the technical
cause of a failed answer and nobody else has it in their HTML, and Retry shows only where
retrying can help."""

from __future__ import annotations

import html
import json

import pytest

from conversations import services
from conversations.live.frames import _apply_with_rows
from conversations.models import Run, RunEvent
from conversations.pages.items import card_state
from conversations.pages.rendering import RunView
from conversations.pages.timeline import live_run_view
from conversations.transfer.sharing import _card_page
from engine.approval import DENIED, EXPIRED, refusal
from engine.events import ErrorEvent, event_from_dict
from engine.llm.base import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    LLMTimeoutError,
    QuotaExceededError,
    RateLimitError,
    StreamEndedEarly,
    UnavailableError,
)
from engine.llm.openai import map_http_error
from llms.failures import retry_helps
from tools.builtin.http_request import build
from tools.mcp.endpoints import MCPEndpoint
from tools.mcp.services import mcp_call_preview
from tools.registry import ToolContext

ORDER = {
    "name": "create_order",
    "method": "POST",
    "url_template": "https://shop.internal/customers/{customer}/orders",
    "parameters": {
        "type": "object",
        "properties": {"customer": {"type": "string"}, "item": {"type": "string"}},
    },
}
LOOKUP = {
    "name": "find_order",
    "method": "GET",
    "url_template": "https://shop.internal/orders/{order_id}",
    "requires_confirmation": True,
}


def endpoint_tool(endpoint: dict, secret_headers: dict | None = None):
    config = {"endpoints": [endpoint], "allow_origins": ["https://shop.internal"]}
    if secret_headers is not None:
        config["secret_headers"] = json.dumps(secret_headers)
    (tool,) = build(config, ToolContext())
    return tool


# -- the approval card ------------------------------------------------------------


def approval_card(tool, arguments: dict) -> str:
    """The card a run shows when ``tool`` asks about a call with ``arguments``."""
    view = RunView(run_id=3)
    payload = {
        "status": "requested",
        "call_id": "approval-x-1",
        "tool_name": tool.name,
        "tool_args": arguments,
        "reason": tool.confirmation_reason(arguments),
        "request": tool.call_preview(arguments),
    }
    return view.apply(1, "approval", payload)


def test_the_card_shows_the_resolved_url_the_body_and_the_credentials_by_name() -> None:
    secrets = {"create_order": {"Authorization": "Bearer s3cr3t"}, "*": {"X-Shop-Key": "k3y"}}
    tool = endpoint_tool(ORDER, secrets)

    card = approval_card(tool, {"customer": "ada lovelace", "item": "tea"})

    assert "POST https://shop.internal/customers/ada%20lovelace/orders" in card
    assert "{customer}" not in card  # the template is not what the user approves
    assert "&quot;item&quot;: &quot;tea&quot;" in card  # the JSON body
    assert "Authorization, X-Shop-Key" in card and "their values are not shown" in card
    assert "s3cr3t" not in card and "k3y" not in card
    assert "No credentials" not in card
    assert 'class="approve primary"' in card and 'class="deny danger"' in card


def test_without_secret_headers_the_card_says_no_credentials() -> None:
    tool = endpoint_tool(ORDER)

    card = approval_card(tool, {"customer": "7", "item": "tea"})

    assert "No credentials" in card
    assert "credentials." not in card.lower().replace("no credentials", "")
    assert "administrator's" not in card  # nothing set up: no administrator's credentials


def test_a_get_shows_its_query_string_and_no_body() -> None:
    tool = endpoint_tool(LOOKUP, {"find_order": {"X-Shop-Key": "k3y"}})

    preview = tool.call_preview({"order_id": "A/1", "fields": "total"})
    card = approval_card(tool, {"order_id": "A/1", "fields": "total"})

    assert preview == {
        "method": "GET",
        "url": "https://shop.internal/orders/A%2F1?fields=total",
        "body": None,
        "credentials": ["X-Shop-Key"],
    }
    assert "GET https://shop.internal/orders/A%2F1?fields=total" in card
    assert ">Body<" not in card


def test_an_mcp_call_names_its_server_and_the_headers_it_adds() -> None:
    http = MCPEndpoint(name="tickets", transport="http", url="https://mcp.internal/mcp?key=k",
                       headers={"Authorization": "Bearer t0k3n"})  # fmt: skip
    local = MCPEndpoint(name="files", transport="stdio", command="files-mcp")

    assert mcp_call_preview(http, "close_ticket") == {
        "server": "tickets",
        "tool": "close_ticket",
        "url": "https://mcp.internal/mcp",
        "credentials": ["Authorization"],
    }
    assert mcp_call_preview(local, "delete") == {"server": "files", "tool": "delete"}


def test_the_request_survives_the_event_log() -> None:
    """A reload rebuilds the card from the logged event: the request is in its payload."""
    tool = endpoint_tool(ORDER)
    arguments = {"customer": "7", "item": "tea"}
    payload = {
        "status": "requested",
        "call_id": "approval-x-1",
        "tool_name": tool.name,
        "tool_args": arguments,
        "reason": "r",
        "request": tool.call_preview(arguments),
    }

    assert event_from_dict("approval", payload).to_dict() == payload


# -- a denied call ----------------------------------------------------------------


def denied_run(decision: str = DENIED) -> tuple[RunView, str]:
    """A run whose only call the user denied; the card's last frame."""
    view = RunView(run_id=5)
    start = {"type": "iteration", "status": "start", "iteration": 1, "tool_name": "erase",
             "tool_args": {"path": "/notes"}}  # fmt: skip
    view.apply(1, "step", start)
    view.apply(2, "approval", {"status": "requested", "call_id": "a-1", "tool_name": "erase",
                               "tool_args": {"path": "/notes"}, "reason": ""})  # fmt: skip
    view.apply(3, "approval", {"status": decision, "call_id": "a-1"})
    done = {"type": "iteration", "status": "done", "iteration": 1, "tool_name": "erase",
            "observation": "", "error": refusal(decision), "iter_elapsed": 0.0}  # fmt: skip
    return view, view.apply(4, "step", done)


def test_a_denied_call_shows_as_denied_not_failed() -> None:
    view, frame = denied_run()

    assert 'class="tool-card denied"' in frame and ">denied<" in frame.replace(" ·", "<")
    assert "failed" not in frame
    assert ">Not run<" in frame
    # The whole block (a reload) says the same.
    (card,) = [item.card for item in view.items if item.card is not None]
    assert card.state == "denied"


def test_a_call_nobody_answered_in_time_shows_as_expired() -> None:
    _view, frame = denied_run(EXPIRED)

    assert 'class="tool-card expired"' in frame and "failed" not in frame


def test_a_real_tool_error_still_shows_as_failed() -> None:
    assert card_state(done=True, error="HTTP 500") == "failed"
    assert card_state(done=True, error=None) == "ok"
    assert card_state(done=False, error=None) == "running"
    assert card_state(done=False, error=None, waiting=True) == "waiting"


def test_a_call_waiting_for_approval_says_so_on_its_card_not_running() -> None:
    view = RunView(run_id=3)
    start = {"type": "iteration", "status": "start", "iteration": 1, "tool_name": "erase",
             "tool_args": {"path": "/notes"}}  # fmt: skip
    view.apply(1, "step", start)
    asked = view.apply(2, "approval", {"status": "requested", "call_id": "a-1",
                                       "tool_name": "erase", "tool_args": {"path": "/notes"},
                                       "reason": ""})  # fmt: skip

    assert 'class="tool-card waiting"' in asked, asked  # the card, redrawn in place
    assert "waiting for approval" in asked and "running" not in asked.split("approval-")[0]
    (card,) = [item.card for item in view.items if item.card is not None]
    assert card.state == "waiting"
    # Approved: it runs now.
    approved = view.apply(3, "approval", {"status": "approved", "call_id": "a-1"})
    assert 'class="tool-card running"' in approved
    assert card.state == "running"


def test_only_the_card_of_the_call_asked_about_waits() -> None:
    view = RunView(run_id=3)
    for n, path in enumerate(["/a", "/b"], start=1):
        view.apply(n, "step", {"type": "iteration", "status": "start", "iteration": 1,
                               "tool_name": "erase", "tool_args": {"path": path}})  # fmt: skip
    view.apply(3, "approval", {"status": "requested", "call_id": "a-2", "tool_name": "erase",
                               "tool_args": {"path": "/b"}, "reason": ""})  # fmt: skip

    states = {item.card.tool_args["path"]: item.card.state for item in view.items if item.card}
    assert states == {"/a": "running", "/b": "waiting"}


def test_in_plan_mode_the_steps_call_waits_for_approval_too() -> None:
    view = RunView(run_id=3)
    plan = {"steps": [{"id": "order", "task": "Order tea", "dependencies": []}]}
    view.apply(1, "phase", {"phase": "executing", "round": 1, "plan": plan})
    step = {"step_id": "order", "round": 1}
    view.apply(2, "step_progress", step | {"event": "started"})
    call = {"tool_name": "erase", "tool_args": {"path": "/a"}}
    view.apply(3, "step_progress", step | call | {"event": "tool", "status": "start"})
    asked = view.apply(
        4, "approval", call | {"status": "requested", "call_id": "a-1", "reason": ""}
    )

    assert 'class="tool-card waiting"' in asked  # the step, redrawn with its card
    assert "waiting for approval" in asked
    approved = view.apply(5, "approval", {"status": "approved", "call_id": "a-1"})
    assert 'class="tool-card running"' in approved


def test_the_share_page_shows_a_denied_call_as_denied() -> None:
    denied = _card_page({"tool_name": "erase", "error": refusal(DENIED), "artifacts": []}, [])
    failed = _card_page({"tool_name": "erase", "error": "boom", "artifacts": []}, [])

    assert denied["state"] == "denied" and failed["state"] == "failed"


# -- failures: the staff's details and Retry ------------------------------------------

DETAIL = "AuthenticationError: HTTP 401: Invalid API key (request: POST http://llm/v1, model m)"
PLAIN = (
    "The model's provider refused its API key. "
    "An administrator needs to check the provider's settings."
)


def failed_run(owner, *, retryable: bool = True) -> Run:
    conversation = services.conversation_create(owner=owner)
    _message, run, _ = services.message_post(conversation=conversation, user=owner, content="hi")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error=PLAIN, error_detail=DETAIL)
    payload = ErrorEvent(PLAIN, "failed", "", retryable).to_dict()
    RunEvent.objects.create(
        run=run, conversation=conversation, seq=1, channel="error", payload=payload
    )
    return run


@pytest.mark.django_db
def test_staff_see_the_cause_of_a_failed_answer_under_the_plain_sentence(
    client, staff_user, chat_model, no_launch
) -> None:
    run = failed_run(staff_user)
    client.force_login(staff_user)

    page = client.get(f"/c/{run.conversation_id}/").content.decode()

    assert html.escape(PLAIN) in page
    assert '<details class="error-detail"><summary>Details for staff</summary>' in page
    assert "HTTP 401: Invalid API key (request: POST http://llm/v1, model m)" in page
    # The live frame of the same end (a web server that renders it reads the run's rows).
    view = live_run_view(run.pk, 0)
    frame = _apply_with_rows(view, 1, "error", dict(RunEvent.objects.get(run=run).payload))
    assert "Details for staff" in frame and "Invalid API key" in frame


@pytest.mark.django_db
def test_a_user_who_is_not_staff_never_gets_the_cause_in_the_html(
    user_client, user, chat_model, no_launch
) -> None:
    run = failed_run(user)

    page = user_client.get(f"/c/{run.conversation_id}/").content.decode()

    assert html.escape(PLAIN) in page
    assert "Details for staff" not in page and "Invalid API key" not in page
    view = live_run_view(run.pk, 0)
    frame = _apply_with_rows(view, 1, "error", dict(RunEvent.objects.get(run=run).payload))
    assert html.escape(PLAIN) in frame and "Invalid API key" not in frame and "Details" not in frame


@pytest.mark.django_db
def test_retry_is_offered_only_where_retrying_can_help(
    user_client, user, chat_model, no_launch
) -> None:
    refused = failed_run(user, retryable=False)
    busy = failed_run(user, retryable=True)

    refused_page = user_client.get(f"/c/{refused.conversation_id}/").content.decode()
    busy_page = user_client.get(f"/c/{busy.conversation_id}/").content.decode()

    assert f"/runs/{refused.pk}/retry/" not in refused_page
    assert f"/runs/{busy.pk}/retry/" in busy_page


@pytest.mark.parametrize(
    ("error", "helps"),
    [
        (AuthenticationError("HTTP 401"), False),
        (BadRequestError("HTTP 400"), False),
        (ContextOverflowError("too long"), False),
        (QuotaExceededError("HTTP 429: insufficient_quota"), False),
        (LLMTimeoutError("slow"), True),
        (UnavailableError("refused"), True),
        (UnavailableError("HTTP 500", status_code=500), True),
        (RateLimitError("HTTP 429"), True),
        (StreamEndedEarly("cut"), True),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, bool) else str(value),
)
def test_which_failures_a_retry_can_cure(error, helps: bool) -> None:
    assert retry_helps(error) is helps


def test_a_spent_quota_is_told_apart_from_a_rate_limit() -> None:
    quota = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}

    assert isinstance(map_http_error(429, quota), QuotaExceededError)
    assert type(map_http_error(429, {"error": {"message": "slow down"}})) is RateLimitError


def test_an_error_event_that_offers_no_retry_says_so_and_survives_the_log() -> None:
    payload = ErrorEvent("no", "failed", "", retryable=False).to_dict()

    assert payload["retryable"] is False
    assert event_from_dict("error", payload).to_dict() == payload
    assert "retryable" not in ErrorEvent("maybe").to_dict()  # as before for the others
