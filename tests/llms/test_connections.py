"""Adding a connection (llms.connection_setup): the service, the admin page and the command,
against the scripted OpenAI-compatible server on loopback (real HTTP, real probes)."""

from __future__ import annotations

import io
import logging

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse

from core.errors import ApplicationError
from llms.connection_setup import connection_add, endpoint_models_fetch
from llms.models import LLMModel, Provider
from llms.services import provider_upsert
from testing.scripted_server import ScriptedServer
from tests.llms.conftest import probe_rules
from tests.llms.test_discovery import CannedServer, free_port

pytestmark = pytest.mark.django_db

KEY = "sk-connection-key-0123456789abcdef"
CONNECT_URL = "/admin/llms/provider/connect/"


@pytest.fixture
def keyed_server() -> ScriptedServer:
    """A capable endpoint that needs ``KEY`` and lists two chat models and an embedding one."""
    with ScriptedServer(api_key=KEY) as server:
        server.listed_models = ["zeta-chat", "alpha-chat", "text-embedding-3-small"]
        server.set_rules(probe_rules())
        yield server


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def stored_key(provider: Provider) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM llms_provider WHERE id = %s", [provider.pk])
        return cursor.fetchone()[0]


# ------------------------------------------------------------------------------ service


def test_the_list_is_fetched_sorted_without_embedding_models(keyed_server: ScriptedServer):
    listed = endpoint_models_fetch(base_url=keyed_server.base_url + "/", api_key=KEY)
    assert listed == ("alpha-chat", "zeta-chat")


def test_add_probes_applies_and_makes_the_default(
    keyed_server: ScriptedServer, old_default: LLMModel, caplog
):
    caplog.set_level(logging.DEBUG)
    added = connection_add(
        name="team-llm",
        base_url=keyed_server.base_url,
        api_key=KEY,
        model_ids=["zeta-chat"],
        default="zeta-chat",
    )
    (outcome,) = added.outcomes
    model = LLMModel.objects.get(model_id="zeta-chat")
    assert added.provider_created and outcome.created and outcome.made_default
    assert outcome.report.reachable and outcome.applied and not outcome.error
    # the probe's findings are applied, not only stored
    assert model.abilities == {
        "tool_call": True,
        "tool_choice": True,
        "json_mode": True,
        "json_schema": False,
        "streaming": True,
        "vision": True,
    }
    assert model.is_default and model.provider.name == "team-llm"
    old_default.refresh_from_db()
    assert not old_default.is_default
    assert not LLMModel.objects.filter(model_id="alpha-chat").exists()  # not chosen
    line = outcome.line()
    assert "zeta-chat: added; abilities: tool calls, forced tool choice, JSON mode" in line
    assert "7/7 checks passed" in line and "It is now the default model." in line
    # the key: stored encrypted, never logged
    provider = Provider.objects.get(name="team-llm")
    assert provider.api_key == KEY and KEY not in stored_key(provider)
    assert KEY not in caplog.text


def test_all_models_and_the_default_left_alone(keyed_server: ScriptedServer, old_default):
    added = connection_add(name="team-llm", base_url=keyed_server.base_url, api_key=KEY)
    assert [o.model_id for o in added.outcomes] == ["alpha-chat", "zeta-chat"]
    assert added.default_text() == "The default model is unchanged."
    old_default.refresh_from_db()
    assert old_default.is_default


@pytest.mark.parametrize(
    ("server", "key", "field", "words"),
    [
        ("closed", None, "base_url", "Could not connect to http://127.0.0.1:"),
        ("keyed", None, "api_key", "The endpoint needs an API key (it answered HTTP 401)."),
        ("keyed", "wrong-key", "api_key", "The endpoint refused this API key (HTTP 401)."),
        ("html", None, "base_url", "answered, but not with a model list (not JSON)"),
        ("404", None, "base_url", "does not exist (HTTP 404): is the base URL right?"),
        ("500", None, "base_url", "answered with an error (HTTP 500). The endpoint said: boom"),
        ("empty", None, "base_url", "lists no chat models"),
    ],
)
def test_a_list_that_cannot_be_fetched_creates_nothing(server, key, field, words):
    canned = {
        "html": (200, "<html>a login page</html>"),
        "404": (404, {"error": {"message": "no route"}}),
        "500": (500, {"error": {"message": "boom"}}),
        "empty": (200, {"object": "list", "data": []}),
    }
    if server == "closed":
        url = f"http://127.0.0.1:{free_port()}/v1"
        with pytest.raises(ApplicationError) as caught:
            connection_add(name="x", base_url=url, api_key=key, model_ids=["m"])
    elif server == "keyed":
        with ScriptedServer(api_key=KEY) as scripted, pytest.raises(ApplicationError) as caught:
            connection_add(name="x", base_url=scripted.base_url, api_key=key, model_ids=["m"])
    else:
        status, body = canned[server]
        with CannedServer(status, body, {}) as fake, pytest.raises(ApplicationError) as caught:
            url = f"http://127.0.0.1:{fake.port}/v1"
            connection_add(name="x", base_url=url, api_key=key, model_ids=["m"])
    assert words in caught.value.message
    assert caught.value.extra["field"] == field
    assert not Provider.objects.exists() and not LLMModel.objects.exists()


def test_a_model_that_cannot_chat_is_kept_reported_and_not_made_default(
    scripted_server: ScriptedServer, old_default: LLMModel
):
    """No script: every chat answers HTTP 500."""
    added = connection_add(
        name="broken",
        base_url=scripted_server.base_url,
        model_ids=["scripted-model"],
        default="scripted-model",
    )
    (outcome,) = added.outcomes
    assert outcome.created and not outcome.report.reachable and not outcome.applied
    assert "The probe could not chat with it" in outcome.error
    assert "check the model id and the connection, then probe it again" in outcome.error
    assert added.default_refused and "was not made the default" in added.default_text()
    old_default.refresh_from_db()
    assert old_default.is_default
    assert outcome.model.abilities["tool_call"] is False  # unchanged: plain streaming


def test_wrong_choices_and_taken_names_create_nothing(keyed_server: ScriptedServer):
    url = keyed_server.base_url
    with pytest.raises(ApplicationError, match="does not list gpt-9") as caught:
        connection_add(name="t", base_url=url, api_key=KEY, model_ids=["gpt-9"])
    assert caught.value.extra["field"] == "models"
    with pytest.raises(ApplicationError, match="Choose at least one model"):
        connection_add(name="t", base_url=url, api_key=KEY, model_ids=[])
    with pytest.raises(ApplicationError, match="The default must be one of the models"):
        connection_add(
            name="t", base_url=url, api_key=KEY, model_ids=["alpha-chat"], default="zeta-chat"
        )
    assert not Provider.objects.exists()
    provider_upsert(name="t", base_url="https://elsewhere.test/v1")
    with pytest.raises(ApplicationError, match="already exists for https://elsewhere.test/v1"):
        connection_add(name="t", base_url=url, api_key=KEY, model_ids=["alpha-chat"])
    assert not LLMModel.objects.exists()


def test_adding_again_reuses_the_provider_and_its_stored_key(keyed_server: ScriptedServer):
    url = keyed_server.base_url
    connection_add(name="t", base_url=url, api_key=KEY, model_ids=["alpha-chat"])
    again = connection_add(name="t", base_url=url, model_ids=["alpha-chat", "zeta-chat"])
    assert not again.provider_created
    assert [(o.model_id, o.created) for o in again.outcomes] == [
        ("alpha-chat", False),
        ("zeta-chat", True),
    ]
    assert Provider.objects.get().api_key == KEY


# -------------------------------------------------------------------------------- admin


def test_admin_links_to_the_page(admin_client):
    changelist = admin_client.get(reverse("admin:llms_provider_changelist")).content.decode()
    assert CONNECT_URL in changelist and "Add a connection" in changelist
    app_index = admin_client.get(reverse("admin:app_list", args=["llms"])).content.decode()
    assert CONNECT_URL in app_index


def test_admin_fetches_chooses_and_shows_the_result(
    admin_client, keyed_server: ScriptedServer, old_default: LLMModel
):
    page = admin_client.get(CONNECT_URL)
    html = page.content.decode()
    assert page.status_code == 200 and "csrfmiddlewaretoken" in html
    assert 'name="api_key"' in html and 'name="_fetch"' in html and 'name="models"' not in html

    details = {"name": "team-llm", "kind": "openai", "base_url": keyed_server.base_url}
    fetched = admin_client.post(CONNECT_URL, {**details, "api_key": KEY, "_fetch": "1"})
    html = fetched.content.decode()
    assert fetched.status_code == 200 and not Provider.objects.filter(name="team-llm").exists()
    assert 'value="alpha-chat"' in html and 'value="zeta-chat"' in html
    assert "text-embedding" not in html
    assert KEY not in html  # carried encrypted, never shown back
    assert "The key you gave is kept (encrypted)" in html
    form = fetched.context["form"]
    carried = {
        "key_token": form["key_token"].value(),
        "listed": form["listed"].value(),
    }

    result = admin_client.post(
        CONNECT_URL,
        {**details, **carried, "models": ["alpha-chat"], "default": "alpha-chat", "_add": "1"},
    )
    html = result.content.decode()
    assert result.status_code == 200 and KEY not in html
    assert "Connection team-llm added" in html
    assert "alpha-chat" in html and "added" in html and "now the default model" in html
    assert "7/7 checks passed" in html and "tool calls, forced tool choice" in html
    model = LLMModel.objects.get(model_id="alpha-chat")
    assert model.is_default and model.abilities["vision"] is True
    assert model.provider.api_key == KEY
    assert not LLMModel.objects.filter(model_id="zeta-chat").exists()


def test_admin_shows_a_fetch_failure_beside_its_field(admin_client, keyed_server):
    details = {"name": "team-llm", "kind": "openai", "base_url": keyed_server.base_url}
    response = admin_client.post(CONNECT_URL, {**details, "api_key": "wrong", "_fetch": "1"})
    form = response.context["form"]
    assert form.errors["api_key"] == [
        "The endpoint refused this API key (HTTP 401). The endpoint said: Invalid API key"
    ]
    html = response.content.decode()
    assert "The endpoint refused this API key" in html and 'name="models"' not in html

    closed = {**details, "base_url": f"http://127.0.0.1:{free_port()}/v1"}
    response = admin_client.post(CONNECT_URL, {**closed, "_fetch": "1"})
    assert "Could not connect to" in response.context["form"].errors["base_url"][0]

    bad = {**details, "base_url": "ftp://x"}
    response = admin_client.post(CONNECT_URL, {**bad, "_fetch": "1"})
    assert response.context["form"].errors["base_url"]
    assert not Provider.objects.exists()


def test_admin_needs_add_permission_staff_and_csrf(client, django_user_model, user, keyed_server):
    data = {"name": "t", "kind": "openai", "base_url": keyed_server.base_url, "_fetch": "1"}
    client.force_login(user)  # not staff
    response = client.get(CONNECT_URL)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]

    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_provider"))
    client.force_login(viewer)
    changelist = client.get(reverse("admin:llms_provider_changelist")).content.decode()
    assert CONNECT_URL not in changelist
    assert client.get(CONNECT_URL).status_code == 403
    assert client.post(CONNECT_URL, data).status_code == 403

    admin = django_user_model.objects.create_superuser("boss", password="pw-boss-123")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin)
    assert strict.post(CONNECT_URL, {**data, "_add": "1"}).status_code == 403
    assert not Provider.objects.exists()


# ------------------------------------------------------------------------------ command


def test_command_adds_with_the_key_from_the_environment(
    monkeypatch, keyed_server: ScriptedServer, old_default: LLMModel
):
    monkeypatch.setenv("TEAM_LLM_KEY", KEY)
    base = ["add_connection", "--name", "team-llm", "--base-url", keyed_server.base_url]
    listing = run(*base, "--api-key-env", "TEAM_LLM_KEY")
    assert "lists 2 chat model(s):\n  alpha-chat\n  zeta-chat\n" in listing
    assert not Provider.objects.filter(name="team-llm").exists()

    out = run(
        *base, "--api-key-env", "TEAM_LLM_KEY", "--model", "zeta-chat", "--default", "zeta-chat"
    )
    assert f"Connection team-llm added ({keyed_server.base_url})." in out
    assert "zeta-chat: added; abilities: tool calls" in out and "7/7 checks passed" in out
    assert "It is now the default model." in out and KEY not in out
    assert LLMModel.objects.get(is_default=True).model_id == "zeta-chat"

    out = run(*base, "--all")  # the stored key serves
    assert "zeta-chat: already there" in out and "alpha-chat: added" in out


def test_command_failures_are_plain(monkeypatch, keyed_server, scripted_server):
    with pytest.raises(CommandError, match="The endpoint needs an API key"):
        run("add_connection", "--name", "t", "--base-url", keyed_server.base_url, "--all")
    with pytest.raises(CommandError, match="environment variable NOPE_KEY is not set"):
        run(
            "add_connection",
            "--name",
            "t",
            "--base-url",
            "http://x/v1",
            "--api-key-env",
            "NOPE_KEY",
        )
    with pytest.raises(CommandError, match="1 model\\(s\\) did not answer a plain chat"):
        run("add_connection", "--name", "s", "--base-url", scripted_server.base_url, "--all")
    assert LLMModel.objects.get().model_id == "scripted-model"  # kept, reported
