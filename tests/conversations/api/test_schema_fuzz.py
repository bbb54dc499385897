"""Property-based: requests generated from /api/schema never get a server error.

Schemathesis reads the OpenAPI document the app serves and calls the real ASGI
application in-process (sync views on its WSGI threads, the event stream on Django's
ASGI handler) with valid and invalid data derived from it: ids and numbers at and past
their bounds, odd strings, missing and extra fields, wrong types and media types.
Authenticated as a test user with a bearer token; ``not_a_server_error`` is the one check
(4xx answers to bad input are the point). Examples are few, so it runs in seconds.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from conversations.services import conversation_create, message_create

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = 8
STREAM_SECONDS = 0.5  # an event stream with ?follow=1 never ends: keep what came by then
REQUEST_SECONDS = 30.0


@pytest.fixture
def api_schema(user, no_launch, settings, tmp_path):
    """The served schema, loaded through the app, with some of the user's data to find."""
    from agentsite.asgi import application

    settings.AGENTSITE_API_RATE_LIMIT = 0  # thousands of requests a minute, on purpose
    settings.MEDIA_ROOT = tmp_path  # uploaded files (POST /api/files) land here
    conversation = conversation_create(owner=user, title="fuzzed")
    message_create(conversation=conversation, role="user", content="hello")
    return schemathesis.openapi.from_asgi("/api/schema", application)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the checkout
    suppress_health_check=list(HealthCheck),
)
def test_no_request_gets_a_server_error(case, token):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[not_a_server_error],
        timeout=STREAM_SECONDS if case.operation.path.endswith("/events") else REQUEST_SECONDS,
    )
