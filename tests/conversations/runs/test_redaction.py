"""Secrets an admin configured never come back out of a tool: an endpoint that reflects
the request's headers (an echo, a debug endpoint, an error page) would hand the API key to
the model, the event log and the page. Every tool result of a run is redacted."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import RunEvent
from tests.conversations.running import execute
from tools.models import ToolConfig
from tools.redaction import REDACTED, redact, secret_values
from tools.services import toolconfig_sync, toolconfig_update

TOKEN = "sk-live-5f0c9e2d7a41b388"


def test_secret_values_and_their_credential_part_are_replaced():
    secrets = secret_values([{"get": {"Authorization": f"Bearer {TOKEN}"}}, {"KEY": "abc"}])

    assert f"Bearer {TOKEN}" in secrets and TOKEN in secrets
    assert "abc" not in secrets  # too short to tell from ordinary text
    text = f'{{"Authorization": "Bearer {TOKEN}", "echo": "{TOKEN}"}}'
    assert redact(text, secrets) == f'{{"Authorization": "{REDACTED}", "echo": "{REDACTED}"}}'


@pytest.mark.django_db(transaction=True)
async def test_a_reflected_secret_header_reaches_neither_the_model_nor_the_log(
    user, client, chat_model, llm_server, no_launch, web_server
):
    web_server.routes["/whoami"] = lambda request: (
        200,
        {"Content-Type": "application/json"},
        json.dumps({"you_sent": request.headers}).encode(),
    )
    endpoint = {
        "name": "whoami",
        "description": "Who am I to the service",
        "method": "GET",
        "url_template": web_server.url("/whoami"),
        "parameters": {"type": "object", "properties": {}},
    }

    def configure() -> None:
        toolconfig_sync()
        toolconfig_update(
            toolconfig=ToolConfig.objects.get(name="http_request"),
            enabled=True,
            config={"endpoints": [endpoint], "allow_origins": [web_server.url("")]},
            secrets={"secret_headers": json.dumps({"*": {"Authorization": f"Bearer {TOKEN}"}})},
        )

    await sync_to_async(configure)()
    llm_server.push(
        {"tool_calls": [{"id": "w1", "name": "whoami", "arguments": {}}]}, {"content": "Done."}
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="who am I?"
    )

    assert await execute(run.pk) == "succeeded"

    assert web_server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"  # it was sent
    told = json.dumps(llm_server.requests[1]["messages"])
    assert TOKEN not in told and REDACTED in told
    logged = json.dumps([e.payload async for e in RunEvent.objects.filter(run=run)])
    assert TOKEN not in logged and REDACTED in logged
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert TOKEN not in page
