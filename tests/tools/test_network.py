"""Tools that need the internet are offered only where it answers (a real socket probe)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from django.urls import reverse

from tools.models import ToolConfig
from tools.net.reachability import public_network_problem
from tools.registry import ToolContext
from tools.services import (
    toolconfig_sync,
    toolconfig_update,
    tools_available_for_user,
    tools_for_user,
)


@pytest.fixture
def listening() -> Iterator[str]:
    """host:port of a loopback socket that accepts connections."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closed() -> str:
    """host:port nobody listens on (bound, then released)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_a_probe_that_answers_means_reachable(settings, listening):
    settings.AGENTSITE_TOOLS_NETWORK = "auto"
    settings.AGENTSITE_NETWORK_PROBE = listening
    assert public_network_problem() == ""


def test_a_probe_that_refuses_means_unreachable_and_says_which(settings, closed):
    settings.AGENTSITE_TOOLS_NETWORK = "auto"
    settings.AGENTSITE_NETWORK_PROBE = closed
    problem = public_network_problem()
    assert "not reachable" in problem and closed in problem


def test_on_and_off_skip_the_probe(settings, closed):
    settings.AGENTSITE_NETWORK_PROBE = closed
    settings.AGENTSITE_TOOLS_NETWORK = "on"
    assert public_network_problem() == ""
    settings.AGENTSITE_TOOLS_NETWORK = "off"
    assert "off" in public_network_problem()


def test_web_fetch_is_not_offered_without_internet_unless_internal_hosts_are_open(
    settings, closed, user, client, staff_user
):
    settings.AGENTSITE_TOOLS_NETWORK = "auto"
    settings.AGENTSITE_NETWORK_PROBE = closed
    toolconfig_sync()
    context = ToolContext(user_id=user.pk)
    assert "web_fetch" not in tools_for_user(user=user, context=context)
    assert "web_fetch" not in [t["name"] for t in tools_available_for_user(user=user)]
    assert "calculator" in tools_for_user(user=user, context=context)
    client.force_login(staff_user)
    listing = client.get(reverse("admin:tools_toolconfig_changelist")).content.decode()
    assert "the public internet is not reachable" in listing

    row = ToolConfig.objects.get(name="web_fetch")
    toolconfig_update(toolconfig=row, config={**row.config, "allow_hosts": ["wiki.internal"]})
    assert "web_fetch" in tools_for_user(user=user, context=context)


def test_http_request_without_endpoints_is_shown_as_unconfigured(client, staff_user, user):
    toolconfig_sync()
    offered = tools_for_user(user=user, context=ToolContext()).names()
    assert "calculator" in offered and not any(name.startswith("http") for name in offered)
    client.force_login(staff_user)
    listing = client.get(reverse("admin:tools_toolconfig_changelist")).content.decode()
    assert "no endpoint is configured" in listing


def test_the_verdict_is_remembered_so_runs_do_not_probe_each_time(settings):
    """Checked once per few minutes (in the site's cache), not on every run's set-up."""
    settings.AGENTSITE_TOOLS_NETWORK = "auto"
    with socket.create_server(("127.0.0.1", 0)) as server:
        settings.AGENTSITE_NETWORK_PROBE = f"127.0.0.1:{server.getsockname()[1]}"
        assert public_network_problem() == ""
    assert public_network_problem() == ""  # closed now, still the remembered verdict
