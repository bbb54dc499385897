"""Local OpenAI-compatible model servers already running here, and adding one of their models.

Self-hosters often run Ollama, llama.cpp, LM Studio or vLLM next to the site: a better
model than the bundled demo, already there. Discovery asks each usual loopback port for
``GET /v1/models`` (all ports at once, with a short timeout; a closed port refuses at
once) and reports what answers like an OpenAI-compatible server. It only offers: nothing
changes until an admin adds a model (:func:`discovered_model_add`), and the default moves
only when asked. The bundled model is left as it is, the fallback.

Not listed: the site's own bundled llama.cpp server (its supervisor records its port), and
embedding-only models (ids naming "embed"). Servers some provider already points at are
listed as configured, not offered again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core.errors import ApplicationError
from llms.local_server import get_server
from llms.models import LLMModel, Provider
from llms.probe import ProbeReport
from llms.services import (
    model_probe_and_apply,
    model_set_default,
    model_upsert,
    provider_upsert,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DiscoveredModelAdded",
    "DiscoveredServer",
    "chat_model_ids",
    "discover_local_server",
    "discover_local_servers",
    "discovered_model_add",
    "discovery_ports",
]

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_TIMEOUT = 1.5  # seconds per port and phase (connect, read): loopback answers fast
MAX_WORKERS = 8
PORT_PRODUCTS = {11434: "Ollama", 8080: "llama.cpp", 1234: "LM Studio", 8000: "vLLM"}
# ``owned_by`` of the listed models says more than the port: each server fills it its way.
OWNER_PRODUCTS = {
    "library": "Ollama",
    "llamacpp": "llama.cpp",  # llama.cpp's own llama-server
    "me": "llama.cpp",  # llama-cpp-python's server
    "organization_owner": "LM Studio",
    "vllm": "vLLM",
}
# Words of a ``Server`` response header, for servers that name themselves there.
SERVER_HEADER_PRODUCTS = {"ollama": "Ollama", "llama": "llama.cpp", "vllm": "vLLM"}
GENERIC_PRODUCT = "OpenAI-compatible server"
EMBEDDING_MARKERS = ("embed",)
EMBEDDING_TYPES = frozenset({"embedding", "embeddings"})  # LM Studio's model "type"


@dataclass(frozen=True)
class DiscoveredServer:
    """An OpenAI-compatible server answering on a loopback port.

    ``needs_key``: it refused ``/v1/models`` without an API key (so ``models`` is empty).
    ``configured_as``: the name of the provider already pointing at it, if any.
    """

    port: int
    product: str = GENERIC_PRODUCT
    models: tuple[str, ...] = ()
    needs_key: bool = False
    configured_as: str | None = None
    configured_pk: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def label(self) -> str:
        return _("%(product)s on %(address)s") % {"product": self.product, "address": self.address}

    @property
    def configured(self) -> bool:
        return self.configured_as is not None

    @property
    def provider_name(self) -> str:
        """The name a provider created for this server gets."""
        return f"{self.product.lower()} (localhost:{self.port})"

    def describe(self) -> str:
        """One line for people: what answers there and what it serves."""
        if self.needs_key:
            return _("%(server)s (it needs an API key to list its models)") % {"server": self.label}
        models = ", ".join(self.models) if self.models else _("none listed")
        return _("%(server)s with models: %(models)s") % {"server": self.label, "models": models}


@dataclass(frozen=True)
class DiscoveredModelAdded:
    """What :func:`discovered_model_add` did: the row, its probe, and whether it is default."""

    model: LLMModel
    created: bool
    report: ProbeReport
    made_default: bool
    default_refused: bool = False  # asked to make it the default, but it did not answer

    def summary(self) -> str:
        provider = self.model.provider.name
        names = {"model": self.model.model_id, "provider": repr(provider)}
        if self.created:
            text = _("Added %(model)s (provider %(provider)s).") % names
        else:
            text = _("%(model)s (provider %(provider)s) was already there.") % names
        text += " " + _("Probe: %(summary)s") % {"summary": self.report.summary()}
        if self.made_default:
            return text + " " + _("It is now the default model.")
        if self.default_refused:
            return text + " " + _("Not made the default: the probe could not chat with it.")
        return text + " " + _("The default model is unchanged.")


# --------------------------------------------------------------------------------- finding


def discovery_ports() -> tuple[int, ...]:
    """The loopback ports to look at (``AGENTSITE_DISCOVERY_PORTS``; empty: discovery off)."""
    return _valid_ports(settings.AGENTSITE_DISCOVERY_PORTS)


def discover_local_servers(
    *, ports: Iterable[int] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> list[DiscoveredServer]:
    """The OpenAI-compatible servers answering on ``ports`` (default: ``discovery_ports()``).

    Ports are asked concurrently, so the whole look takes at most about ``timeout`` per
    phase; nothing listening costs nothing. The bundled model's own server is skipped.
    """
    wanted = _valid_ports(discovery_ports() if ports is None else ports)
    bundled = _bundled_ports()
    found = _inspect_ports([p for p in wanted if p not in bundled], timeout=timeout)
    return _mark_configured(found)


@sensitive_variables("api_key")
def discover_local_server(
    *, port: int, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> DiscoveredServer | None:
    """The server on one loopback port, asked with ``api_key`` when given; None if none.

    The same rules as :func:`discover_local_servers` (the bundled server is not one).
    """
    if not _valid_ports([port]) or port in _bundled_ports():
        return None
    found = _inspect_ports([port], timeout=timeout, api_key=api_key)
    return _mark_configured(found)[0] if found else None


def _valid_ports(ports: Iterable[Any]) -> tuple[int, ...]:
    """Distinct TCP ports in the given order; anything else is dropped."""
    valid: dict[int, None] = {}
    for port in ports:
        with contextlib.suppress(TypeError, ValueError):
            number = int(port)
            if 0 < number < 65536:
                valid[number] = None
    return tuple(valid)


def _bundled_ports() -> set[int]:
    """The port(s) of the site's own llama.cpp server: already the ``local`` provider."""
    server = get_server()
    ports = {server.config.port} if server.config.port else set()
    with contextlib.suppress(OSError):
        info = server.recorded()
        if info is not None:
            ports.add(info.port)
    return ports


@sensitive_variables("api_key")
def _inspect_ports(
    ports: list[int], *, timeout: float, api_key: str | None = None
) -> list[DiscoveredServer]:
    if not ports:
        return []
    # trust_env=False: an HTTP(S)_PROXY meant for the internet must not carry loopback calls.
    with (
        httpx.Client(timeout=timeout, trust_env=False) as client,
        ThreadPoolExecutor(min(len(ports), MAX_WORKERS), thread_name_prefix="discovery") as pool,
    ):
        answers = list(pool.map(lambda port: _inspect(client, port, api_key), ports))
    return [answer for answer in answers if answer is not None]


@sensitive_variables("api_key", "headers")
def _inspect(client: httpx.Client, port: int, api_key: str | None) -> DiscoveredServer | None:
    """Ask one port for its models; None unless it answers like an OpenAI-compatible server."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = client.get(f"http://{LOOPBACK}:{port}/v1/models", headers=headers)
    except httpx.HTTPError as exc:  # refused, timed out, not HTTP at all
        logger.debug("discovery: nothing on port %s (%s)", port, type(exc).__name__)
        return None
    payload = _json(response)
    if response.status_code in (401, 403):
        # An API's refusal is a JSON error ({"error": ...} or FastAPI's {"detail": ...});
        # a web page asking for a login is not an LLM server.
        if isinstance(payload, dict) and ({"error", "detail"} & payload.keys()):
            return DiscoveredServer(port, _product(port, response, []), needs_key=True)
        return None
    entries = _model_entries(payload) if response.status_code == 200 else None
    if entries is None:
        return None
    models = tuple(entry["id"] for entry in entries if not _is_embedding(entry))
    return DiscoveredServer(port, _product(port, response, entries), models)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:  # HTML, plain text, binary
        return None


def _model_entries(payload: Any) -> list[dict[str, Any]] | None:
    """The model objects of an OpenAI ``/v1/models`` list, or None if it is not one."""
    if not isinstance(payload, dict):
        return None
    if payload.get("data") is None and payload.get("object") == "list":
        return []  # an empty list, as a server with no model yet may write it
    if not isinstance(payload.get("data"), list):
        return None
    return [
        entry
        for entry in payload["data"]
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
    ]


def chat_model_ids(payload: Any) -> tuple[str, ...] | None:
    """The chat models' ids of an OpenAI ``/v1/models`` answer (embedding models left out),
    or None if it is not one; shared with :mod:`llms.connection_setup` (any endpoint)."""
    entries = _model_entries(payload)
    if entries is None:
        return None
    return tuple(entry["id"] for entry in entries if not _is_embedding(entry))


def _is_embedding(entry: dict[str, Any]) -> bool:
    """Embedding-only models cannot chat: by their type when given, else by their name."""
    if str(entry.get("type", "")).lower() in EMBEDDING_TYPES:
        return True
    return any(marker in entry["id"].lower() for marker in EMBEDDING_MARKERS)


def _product(port: int, response: httpx.Response, entries: list[dict[str, Any]]) -> str:
    """Which server this is: by the models' ``owned_by``, its ``Server`` header, its port."""
    for entry in entries:
        owner = OWNER_PRODUCTS.get(str(entry.get("owned_by", "")).lower())
        if owner:
            return owner
    server_header = response.headers.get("server", "").lower()
    for word, product in SERVER_HEADER_PRODUCTS.items():
        if word in server_header:
            return product
    return PORT_PRODUCTS.get(port, GENERIC_PRODUCT)


def _mark_configured(servers: list[DiscoveredServer]) -> list[DiscoveredServer]:
    """Mark the servers a provider already points at (same loopback port)."""
    if not servers:
        return []
    configured = _configured_ports()
    marked = []
    for server in servers:
        provider = configured.get(server.port)
        if provider is not None:
            server = replace(server, configured_as=provider[1], configured_pk=provider[0])
        marked.append(server)
    return marked


def _configured_ports() -> dict[int, tuple[int, str]]:
    """Loopback port -> (pk, name) of the first provider whose base URL points there."""
    ports: dict[int, tuple[int, str]] = {}
    rows = Provider.objects.exclude(kind="local").order_by("pk")
    for pk, name, base_url in rows.values_list("pk", "name", "base_url"):
        port = _loopback_port(base_url)
        if port is not None:
            ports.setdefault(port, (pk, name))
    return ports


def _loopback_port(url: str) -> int | None:
    """The port of a loopback URL (``localhost``, ``127.0.0.1``, ``[::1]``), else None."""
    parts = urlsplit(url or "")
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.hostname not in LOOPBACK_NAMES:
        return None
    return port or (443 if parts.scheme == "https" else 80)


# ---------------------------------------------------------------------------------- adding


@sensitive_variables("api_key")
def discovered_model_add(
    *,
    server: DiscoveredServer,
    model_id: str,
    make_default: bool = False,
    api_key: str | None = None,
    probe_timeout: float | None = None,
) -> DiscoveredModelAdded:
    """Make ``model_id`` of ``server`` a usable model: provider, model row, probe.

    The provider is kind ``openai`` at the server's base URL (the one already pointing
    there, if any), with ``api_key`` when the server needs one. The verified abilities are
    applied when the probe could chat; the model becomes the default only when asked and
    only if it answered, so a dead server never takes the site's chat down with it.
    """
    model_id = (model_id or "").strip()
    if not model_id:
        raise ApplicationError(_("Give the id of the model to add."), code="invalid")
    server = _with_key(server, api_key)
    if server.models and model_id not in server.models:
        raise ApplicationError(
            _("%(server)s does not serve a model %(model)s (it lists: %(models)s).")
            % {"server": server.label, "model": repr(model_id), "models": ", ".join(server.models)},
            code="unknown_model",
        )
    with transaction.atomic():
        provider = _provider_for(server, api_key)
        model, created = model_upsert(provider=provider, model_id=model_id)
    # outside any transaction; the verified abilities are applied when it could chat
    report, _applied = model_probe_and_apply(model=model, timeout=probe_timeout)
    made_default = make_default and report.reachable
    if made_default:
        model_set_default(model=model)
    model.refresh_from_db()
    logger.info("discovery: %s %s of %s", "added" if created else "found", model_id, server.label)
    return DiscoveredModelAdded(
        model=model,
        created=created,
        report=report,
        made_default=made_default,
        default_refused=make_default and not report.reachable,
    )


@sensitive_variables("api_key")
def _with_key(server: DiscoveredServer, api_key: str | None) -> DiscoveredServer:
    """The server as seen with the key: a server that refused without it must accept it."""
    if not server.needs_key:
        return server
    if not api_key:
        raise ApplicationError(
            _("%(server)s needs an API key: give the key it was started with.")
            % {"server": server.label},
            code="needs_key",
        )
    seen = discover_local_server(port=server.port, api_key=api_key)
    if seen is None:
        raise ApplicationError(
            _("Nothing answers on %(address)s any more.") % {"address": server.address},
            code="gone",
        )
    if seen.needs_key:
        raise ApplicationError(
            _("%(server)s refused this API key.") % {"server": server.label}, code="bad_key"
        )
    return seen


@sensitive_variables("api_key")
def _provider_for(server: DiscoveredServer, api_key: str | None) -> Provider:
    """The provider already pointing at the server, else a new one named after it."""
    if server.configured_pk is not None:
        existing = Provider.objects.filter(pk=server.configured_pk).first()
        if existing is not None:
            return existing
    name = server.provider_name
    taken = Provider.objects.filter(name=name).first()
    if taken is not None and _loopback_port(taken.base_url) != server.port:
        raise ApplicationError(
            _("A provider named %(name)s already exists for %(url)s: rename it first.")
            % {"name": repr(name), "url": taken.base_url},
            code="name_taken",
        )
    provider, _created = provider_upsert(
        name=name, kind="openai", base_url=server.base_url, api_key=api_key or None
    )
    return provider
