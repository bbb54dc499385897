"""Discovery finds a real llama.cpp server on a usual port, and adding it probes it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from llms.discovery import discover_local_server, discover_local_servers, discovered_model_add
from llms.local_model import LOCAL_MODEL_ID
from llms.local_server import LocalServer, LocalServerConfig, ServerInfo, reset_server
from llms.models import LLMModel
from tests.localmodel.conftest import API_KEY, N_CTX

# llama.cpp's usual port first: the product guess by port then says "llama.cpp" too.
USUAL_PORTS = (8080, 1234, 8000, 11434)


def first_free_usual_port() -> int | None:
    for port in USUAL_PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return None


@pytest.fixture
def usual_port_server(tmp_path: Path) -> Iterator[ServerInfo]:
    """A llama.cpp server of its own (not the site's bundled one) on a usual port."""
    port = first_free_usual_port()
    if port is None:
        pytest.skip(
            f"127.0.0.1 ports {', '.join(map(str, USUAL_PORTS))} are all taken: no usual "
            "port to start a llama.cpp server on"
        )
    config = LocalServerConfig(
        state_dir=tmp_path / "server", n_ctx=N_CTX, port=port, api_key=API_KEY, n_threads=1
    )
    server = LocalServer(config)
    info = server.ensure()  # LocalModelError (a test error, not a skip) when not installed
    try:
        yield info
    finally:
        server.stop()


@pytest.fixture
def site_bundled_server_elsewhere(settings, tmp_path: Path) -> Iterator[None]:
    """The site's supervisor records no server: the one above is a stranger to it."""
    settings.LOCAL_MODEL_DIR = tmp_path / "site"
    reset_server()
    yield
    reset_server()


@pytest.mark.django_db
def test_discovery_finds_and_adds_a_real_llama_cpp_server(
    usual_port_server: ServerInfo, site_bundled_server_elsewhere: None
):
    port = usual_port_server.port
    found = {server.port: server for server in discover_local_servers()}  # default ports
    assert port in found, f"not found on {port}: {found}"
    server = found[port]
    # Our supervisor always starts llama.cpp with a key: a 401 still says "LLM server".
    assert server.needs_key and not server.configured
    assert server.base_url == usual_port_server.base_url

    with_key = discover_local_server(port=port, api_key=API_KEY)
    assert with_key is not None and LOCAL_MODEL_ID in with_key.models
    assert with_key.product == "llama.cpp"  # owned_by "me": llama-cpp-python's server

    added = discovered_model_add(
        server=server, model_id=LOCAL_MODEL_ID, api_key=API_KEY, make_default=True
    )
    model = LLMModel.objects.select_related("provider").get(pk=added.model.pk)
    assert model.provider.kind == "openai"
    assert model.provider.base_url == usual_port_server.base_url
    assert model.provider.api_key == API_KEY
    assert model.probed_at is not None and set(model.probe_report["checks"]) >= {"chat"}
    assert added.report.reachable, added.report.summary()
    assert model.is_default and added.made_default
    assert discover_local_server(port=port).configured
