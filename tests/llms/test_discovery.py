"""Discovery of local OpenAI-compatible servers (llms.discovery): real servers on loopback.

The scripted server stands in for Ollama & co; a tiny canned HTTP server plays the
servers that are not LLM servers at all (404 pages, HTML, logins).
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from core.errors import ApplicationError
from llms.discovery import (
    GENERIC_PRODUCT,
    discover_local_server,
    discover_local_servers,
    discovered_model_add,
)
from llms.local_server import ServerInfo, get_server, reset_server
from llms.models import LLMModel, Provider
from llms.services import provider_upsert
from testing.scripted_server import ScriptedServer
from tests.llms.conftest import probe_rules

pytestmark = pytest.mark.django_db

KEY = "local-server-key-0123456789"
DISCOVER_URL = "/admin/llms/llmmodel/discover/"
ADD_URL = "/admin/llms/llmmodel/discover/add/"


# ------------------------------------------------------------------------------ helpers


class CannedServer:
    """A loopback HTTP server giving every GET the same canned answer."""

    def __init__(self, status: int, body: str | dict[str, Any], headers: dict[str, str]) -> None:
        if isinstance(body, dict):
            data, ctype = json.dumps(body).encode(), "application/json"
        else:
            data, ctype = body.encode(), "text/html; charset=utf-8"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> CannedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def canned(status: int, body: str | dict[str, Any], **headers: str) -> CannedServer:
    return CannedServer(status, body, headers)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture(autouse=True)
def site_local_model_dir(settings, tmp_path: Path) -> Iterator[Path]:
    """The site's bundled-server state lives in the test's own folder, not in var/."""
    settings.LOCAL_MODEL_DIR = tmp_path / "local_model"
    reset_server()
    yield settings.LOCAL_MODEL_DIR
    reset_server()


# ------------------------------------------------------------------------------ finding


def test_finds_a_server_and_its_models(scripted_server: ScriptedServer):
    servers = discover_local_servers(ports=[scripted_server.port])
    assert len(servers) == 1
    found = servers[0]
    assert found.port == scripted_server.port
    assert found.base_url == scripted_server.base_url
    assert found.models == ("scripted-model",)
    assert found.product == GENERIC_PRODUCT  # owned_by "scripted", on no usual port
    assert not found.needs_key and not found.configured


def test_product_from_the_listing_and_embedding_models_left_out():
    listing = {
        "object": "list",
        "data": [
            {"id": "llama3.2:latest", "object": "model", "owned_by": "library"},
            {"id": "nomic-embed-text:latest", "object": "model", "owned_by": "library"},
            {"id": "bge-small", "object": "model", "type": "embeddings"},
        ],
    }
    with canned(200, listing) as server:
        (found,) = discover_local_servers(ports=[server.port])
    assert found.product == "Ollama"
    assert found.models == ("llama3.2:latest",)
    assert found.provider_name == f"ollama (localhost:{server.port})"


def test_product_from_the_server_header():
    with canned(200, {"object": "list", "data": [{"id": "m"}]}, Server="llama.cpp") as server:
        (found,) = discover_local_servers(ports=[server.port])
    assert found.product == "llama.cpp"


@pytest.mark.parametrize("data", [[], None])
def test_a_server_with_no_models_yet_is_listed(data: Any):
    with canned(200, {"object": "list", "data": data}) as server:
        (found,) = discover_local_servers(ports=[server.port])
    assert found.models == () and "none listed" in found.describe()


def test_nothing_listening_is_an_empty_list_at_once():
    ports = [free_port(), free_port()]
    started = time.monotonic()
    assert discover_local_servers(ports=ports) == []
    assert time.monotonic() - started < 0.5  # connection refused: no timeout to wait out


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, "<html><body>Not Found</body></html>"),
        (200, "<html><body>Welcome to nginx!</body></html>"),
        (200, {"status": "ok"}),  # JSON, but not a model list
        (401, "<html><body>Please log in</body></html>"),
        (302, ""),
    ],
)
def test_servers_that_are_not_openai_compatible_are_not_listed(status: int, body: Any):
    with canned(status, body, Location="/login") as server:
        assert discover_local_servers(ports=[server.port]) == []


def test_a_server_that_needs_a_key_is_listed_as_such():
    with ScriptedServer(api_key=KEY) as server:
        (found,) = discover_local_servers(ports=[server.port])
        assert found.needs_key and found.models == ()
        assert "needs an API key" in found.describe()
        with_key = discover_local_server(port=server.port, api_key=KEY)
        assert with_key is not None and with_key.models == ("scripted-model",)
        assert not with_key.needs_key
        assert discover_local_server(port=server.port, api_key="wrong").needs_key


def test_a_configured_server_is_marked_not_offered(scripted_server: ScriptedServer):
    # localhost and 127.0.0.1 are the same server: matched by loopback port
    provider_upsert(name="mine", base_url=f"http://localhost:{scripted_server.port}/v1")
    (found,) = discover_local_servers(ports=[scripted_server.port])
    assert found.configured and found.configured_as == "mine"
    port = str(scripted_server.port)
    assert "already configured as provider 'mine'" in run("discover_models", "--port", port)
    assert run("discover_models", "--port", port, "--hint") == ""


def test_the_bundled_server_is_skipped(scripted_server: ScriptedServer, site_local_model_dir):
    """The site's own llama.cpp server is the ``local`` provider already: not offered."""
    info = ServerInfo(
        pid=1,
        host="127.0.0.1",
        port=scripted_server.port,
        model_path="/nowhere/model.gguf",
        n_ctx=2048,
        chat_format="chatml",
        started_at="2026-01-01T00:00:00+00:00",
        owner_pid=1,
    )
    site_local_model_dir.mkdir(parents=True)
    record = {k: v for k, v in asdict(info).items() if k != "api_key"}
    get_server().state_file.write_text(json.dumps(record))
    assert discover_local_servers(ports=[scripted_server.port]) == []
    assert discover_local_server(port=scripted_server.port) is None


def test_ports_come_from_the_setting(settings, scripted_server: ScriptedServer):
    settings.AGENTSITE_DISCOVERY_PORTS = [free_port(), scripted_server.port]
    assert [s.port for s in discover_local_servers()] == [scripted_server.port]
    settings.AGENTSITE_DISCOVERY_PORTS = []
    assert discover_local_servers() == []


# ------------------------------------------------------------------------------- adding


def test_add_creates_provider_and_model_and_keeps_the_default(
    full_server: ScriptedServer, old_default: LLMModel
):
    (found,) = discover_local_servers(ports=[full_server.port])
    added = discovered_model_add(server=found, model_id="scripted-model")
    model = added.model
    provider = model.provider
    assert added.created and added.report.reachable and not added.made_default
    assert provider.name == f"openai-compatible server (localhost:{full_server.port})"
    assert (provider.kind, provider.base_url, provider.api_key) == (
        "openai",
        full_server.base_url,
        "",
    )
    assert model.probed_at is not None and model.probe_report["reachable"]
    assert model.abilities["tool_call"] is True  # the verified abilities were applied
    assert not model.is_default
    old_default.refresh_from_db()
    assert old_default.is_default  # offered, not imposed
    assert "The default model is unchanged" in added.summary()
    # now it is configured, and adding again reuses the rows
    assert discover_local_servers(ports=[full_server.port])[0].configured
    again = discovered_model_add(
        server=discover_local_servers(ports=[full_server.port])[0], model_id="scripted-model"
    )
    assert not again.created and Provider.objects.count() == 2


def test_add_and_make_default(full_server: ScriptedServer, old_default: LLMModel):
    (found,) = discover_local_servers(ports=[full_server.port])
    added = discovered_model_add(server=found, model_id="scripted-model", make_default=True)
    assert added.made_default and added.model.is_default
    old_default.refresh_from_db()
    assert not old_default.is_default
    assert LLMModel.objects.filter(is_default=True).count() == 1


def test_a_model_that_does_not_answer_is_not_made_default(
    scripted_server: ScriptedServer, old_default: LLMModel
):
    """No script: every chat is an HTTP 500. The row is kept, the default is not moved."""
    (found,) = discover_local_servers(ports=[scripted_server.port])
    added = discovered_model_add(server=found, model_id="scripted-model", make_default=True)
    assert not added.report.reachable and not added.made_default and added.default_refused
    assert "Not made the default" in added.summary()
    old_default.refresh_from_db()
    assert old_default.is_default


def test_add_refuses_a_model_the_server_does_not_list(scripted_server: ScriptedServer):
    (found,) = discover_local_servers(ports=[scripted_server.port])
    with pytest.raises(ApplicationError, match="does not serve a model 'gpt-9'"):
        discovered_model_add(server=found, model_id="gpt-9")
    assert not Provider.objects.exists()


def test_add_with_an_api_key():
    with ScriptedServer(api_key=KEY) as server:
        server.set_rules(probe_rules())
        (found,) = discover_local_servers(ports=[server.port])
        with pytest.raises(ApplicationError, match="needs an API key"):
            discovered_model_add(server=found, model_id="scripted-model")
        with pytest.raises(ApplicationError, match="refused this API key"):
            discovered_model_add(server=found, model_id="scripted-model", api_key="wrong")
        assert not Provider.objects.exists()
        added = discovered_model_add(server=found, model_id="scripted-model", api_key=KEY)
    assert added.report.reachable
    assert added.model.provider.api_key == KEY


# ------------------------------------------------------------------------------- command


def test_command_lists_and_adds(full_server: ScriptedServer, old_default: LLMModel):
    port = str(full_server.port)
    out = run("discover_models", "--port", port)
    assert f"Found a local model server: {GENERIC_PRODUCT} on 127.0.0.1:{port}" in out
    assert "with models: scripted-model" in out
    assert DISCOVER_URL in out
    assert f"manage.py discover_models --add {port} scripted-model --default" in out
    assert run("discover_models", "--port", port, "--hint") == out  # offered at `make run`
    out = run("discover_models", "--add", port, "scripted-model", "--default")
    assert "It is now the default model" in out
    assert LLMModel.objects.get(is_default=True).model_id == "scripted-model"


def test_command_with_nothing_found():
    port = str(free_port())
    assert f"No local model server found on 127.0.0.1 ports: {port}." in run(
        "discover_models", "--port", port
    )
    assert run("discover_models", "--port", port, "--hint") == ""
    with pytest.raises(CommandError, match="No OpenAI-compatible server answers"):
        run("discover_models", "--add", port, "some-model")


def test_command_hint_never_fails(settings):
    """`make run` goes on whatever breaks here: unreadable local-model settings, say."""
    settings.LOCAL_MODEL_N_CTX = "not a number"
    reset_server()
    try:
        err = io.StringIO()
        call_command("discover_models", "--hint", stdout=io.StringIO(), stderr=err)
    finally:
        reset_server()
    assert "discover_models: skipped (ValueError" in err.getvalue()


def test_command_adds_with_a_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_KEY", KEY)
    with ScriptedServer(api_key=KEY) as server:
        server.set_rules(probe_rules())
        port = str(server.port)
        assert "--api-key-env VAR" in run("discover_models", "--port", port)
        run("discover_models", "--add", port, "scripted-model", "--api-key-env", "LOCAL_LLM_KEY")
    assert Provider.objects.get().api_key == KEY


# --------------------------------------------------------------------------------- admin


def test_admin_page_lists_and_adds(
    admin_client, settings, full_server: ScriptedServer, old_default: LLMModel
):
    settings.AGENTSITE_DISCOVERY_PORTS = [full_server.port]
    changelist = admin_client.get(reverse("admin:llms_llmmodel_changelist"))
    assert DISCOVER_URL in changelist.content.decode()
    page = admin_client.get(DISCOVER_URL)
    html = page.content.decode()
    assert page.status_code == 200
    assert f"{GENERIC_PRODUCT} on 127.0.0.1:{full_server.port}" in html
    assert "scripted-model" in html and 'name="make_default" value="1"' in html
    assert "csrfmiddlewaretoken" in html
    response = admin_client.post(
        ADD_URL,
        {"port": full_server.port, "model_id": "scripted-model", "make_default": "1"},
        follow=True,
    )
    model = LLMModel.objects.get(model_id="scripted-model")
    assert response.redirect_chain[-1][0] == reverse("admin:llms_llmmodel_change", args=[model.pk])
    shown = [str(m) for m in response.context["messages"]]
    assert any("checks passed" in m and "It is now the default model" in m for m in shown)
    assert model.is_default and model.probed_at is not None
    # configured now: listed as such, with no Add button
    html = admin_client.get(DISCOVER_URL).content.decode()
    assert "Already configured as provider" in html and 'name="make_default"' not in html


def test_admin_add_of_a_server_that_needs_a_key(admin_client, settings):
    with ScriptedServer(api_key=KEY) as server:
        server.set_rules(probe_rules())
        settings.AGENTSITE_DISCOVERY_PORTS = [server.port]
        html = admin_client.get(DISCOVER_URL).content.decode()
        assert "needs an API key" in html and 'type="password"' in html
        data = {"port": server.port, "model_id": "scripted-model", "make_default": "0"}
        response = admin_client.post(ADD_URL, {**data, "api_key": "wrong"}, follow=True)
        assert any("refused this API key" in str(m) for m in response.context["messages"])
        admin_client.post(ADD_URL, {**data, "api_key": KEY})
    model = LLMModel.objects.get()
    assert model.provider.api_key == KEY and model.probe_report["reachable"]
    assert KEY not in admin_client.get(DISCOVER_URL).content.decode()


def test_admin_add_refuses_ports_not_looked_at(admin_client, settings, full_server):
    settings.AGENTSITE_DISCOVERY_PORTS = [free_port()]
    response = admin_client.post(
        ADD_URL, {"port": full_server.port, "model_id": "scripted-model"}, follow=True
    )
    assert any("Choose a server from the list" in str(m) for m in response.context["messages"])
    assert not LLMModel.objects.exists()


def test_admin_page_refuses_non_staff(user_client, settings, full_server):
    settings.AGENTSITE_DISCOVERY_PORTS = [full_server.port]
    page = user_client.get(DISCOVER_URL)
    assert page.status_code == 302 and "/admin/login/" in page["Location"]
    add = user_client.post(ADD_URL, {"port": full_server.port, "model_id": "scripted-model"})
    assert add.status_code == 302 and "/admin/login/" in add["Location"]
    assert not Provider.objects.exists()


def test_admin_page_needs_change_permission(client, django_user_model, settings, full_server):
    settings.AGENTSITE_DISCOVERY_PORTS = [full_server.port]
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_llmmodel"))
    client.force_login(viewer)
    changelist = client.get(reverse("admin:llms_llmmodel_changelist"))
    assert changelist.status_code == 200 and DISCOVER_URL not in changelist.content.decode()
    assert client.get(DISCOVER_URL).status_code == 403
    assert client.post(ADD_URL, {"port": full_server.port, "model_id": "x"}).status_code == 403
    assert not Provider.objects.exists()


def test_admin_add_needs_the_csrf_token(staff_user, settings, full_server):
    settings.AGENTSITE_DISCOVERY_PORTS = [full_server.port]
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    response = client.post(ADD_URL, {"port": full_server.port, "model_id": "scripted-model"})
    assert response.status_code == 403
    assert not Provider.objects.exists()
