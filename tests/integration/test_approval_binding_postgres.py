"""A decision is bound to its call on PostgreSQL too: the card's request goes through
jsonb (which sorts keys and writes ``1e16`` as ``10000000000000000``) before a decision
made from it binds the row, and the run's call must still take it, while another call
under the same id must not."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.integration.stack import run_on_fresh_postgres

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json

    from django.contrib.auth import get_user_model

    from conversations import services
    from conversations.runs import launcher

    launcher.launch = lambda run_id: True  # the run waits for the decision, not executed
    from conversations.runs.approvals import approval_open
    from conversations.runs.publisher import publish_events_sync
    from engine.approval import ApprovalRequest
    from engine.events import Approval

    user = get_user_model().objects.create_user(username="pg", password="pw-pg-123")
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="go")
    args = {"zeta": 1e16, "alpha": [0.5, 1e-7, {"b": True, "a": None}], "path": "/é"}
    asked = ApprovalRequest("approval-pg-1", "erase", args, "It erases.")
    publish_events_sync(run=run, events=[
        Approval("requested", asked.call_id, asked.tool_name, asked.tool_args, asked.reason)
    ])
    decided = services.approval_decide(run=run, call_id=asked.call_id, user=user, approve=True)
    other = ApprovalRequest(asked.call_id, "erase", {**args, "zeta": 1e16 + 2}, "It erases.")
    print(json.dumps({
        "bound": decided.binding == asked.binding,
        "stored": decided.tool_args == args,
        "read_back_as": type(decided.tool_args["zeta"]).__name__,
        "other": approval_open(run_id=run.pk, request=other),
        "same": approval_open(run_id=run.pk, request=asked),
    }))
    """
)


def test_a_decision_made_from_the_logged_request_binds_the_same_call(tmp_path):
    result = run_on_fresh_postgres(tmp_path, SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["read_back_as"] == "int"  # jsonb's 10000000000000000: what binding survives
    assert (out["bound"], out["stored"]) == (True, True)
    assert (out["other"], out["same"]) == ("denied", "approved")
