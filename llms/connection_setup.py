"""Adding a connection: an OpenAI-compatible endpoint and the models an admin picks from it.

One step instead of four (provider, each model, probe, apply): the endpoint's model list is
fetched (``GET <base URL>/models``, read as :mod:`llms.discovery` reads a local server's),
the provider and the chosen models are created in one transaction, then each model is
probed and the abilities the probe verified are applied; one may become the default, only
if the probe could chat with it. The admin's "Add a connection" page and
``manage.py add_connection`` both call :func:`connection_add`.

Nothing is created when the list cannot be fetched or the choice is wrong. The probes run
after the commit (no LLM request inside a transaction): a model whose probe fails is kept,
reported with the probe's reason, its abilities unchanged. The API key is stored encrypted
(``Provider.api_key``) and never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core.errors import ApplicationError
from llms.discovery import chat_model_ids
from llms.models import ABILITY_FLAGS, LLMModel, Provider, validate_base_url
from llms.probe import ABILITY_SHORT_LABELS, ProbeReport
from llms.providers import kind_choices
from llms.services import model_probe_and_apply, model_set_default, model_upsert, provider_upsert

__all__ = [
    "FETCH_TIMEOUT",
    "ConnectionAdded",
    "ModelOutcome",
    "connection_add",
    "connection_kinds",
    "connection_provider",
    "endpoint_models_fetch",
]

logger = logging.getLogger(__name__)

FETCH_TIMEOUT = 15.0  # seconds per phase: a remote API's list answers in well under that
MAX_DETAIL_CHARS = 200
# The bundled model's kind is managed by the site, not connected by hand.
NOT_CONNECTABLE = frozenset({"local"})


def connection_kinds() -> list[tuple[str, Any]]:
    """The provider kinds an admin may connect (``Provider.kind`` choices but ``local``)."""
    return [(kind, label) for kind, label in kind_choices() if kind not in NOT_CONNECTABLE]


def _error(message: str, code: str, field_name: str) -> ApplicationError:
    """A failure to show beside one field of the form (``extra["field"]``)."""
    return ApplicationError(message, code=code, extra={"field": field_name})


def _clip(text: str, secret: str | None) -> str:
    text = " ".join(str(text).split())
    if secret and len(secret) >= 4:
        text = text.replace(secret, "[redacted]")
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def _provider_message(response: httpx.Response, secret: str | None) -> str:
    """What the endpoint said in its error body (OpenAI's ``error.message``), else ''."""
    try:
        payload = response.json()
    except ValueError:
        return ""
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("detail"))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str):
            return _clip(error, secret)
    return ""


@sensitive_variables("api_key", "headers")
def endpoint_models_fetch(
    *, base_url: str, api_key: str | None = None, timeout: float = FETCH_TIMEOUT
) -> tuple[str, ...]:
    """The chat models an OpenAI-compatible endpoint lists, sorted (embedding models left out).

    Raises :class:`ApplicationError` in plain words, with ``extra["field"]`` naming the form
    field it is about: ``base_url`` (unreachable, not an API, no chat model) or ``api_key``
    (refused). Proxies from the environment are not used, as the chats do not use them.
    """
    base_url = (base_url or "").strip().rstrip("/")
    try:
        validate_base_url(base_url)
    except ValidationError as exc:
        raise _error(" ".join(exc.messages), "invalid", "base_url") from None
    url = f"{base_url}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException:
        raise _error(
            _("%(url)s did not answer within %(seconds)d seconds.")
            % {"url": url, "seconds": timeout},
            "timeout",
            "base_url",
        ) from None
    except httpx.HTTPError as exc:
        logger.info("connection: %s unreachable (%s)", url, type(exc).__name__)
        raise _error(
            _(
                "Could not connect to %(url)s: nothing answers there (check the address, "
                "and that the server is running and reachable from this machine)."
            )
            % {"url": url},
            "unreachable",
            "base_url",
        ) from None
    return _read_models(response, url, api_key)


@sensitive_variables("api_key")
def _read_models(response: httpx.Response, url: str, api_key: str | None) -> tuple[str, ...]:
    status = response.status_code
    said = _provider_message(response, api_key)
    said = " " + _("The endpoint said: %(message)s") % {"message": said} if said else ""
    if status in (401, 403):
        text = (
            _("The endpoint refused this API key (HTTP %(status)d).")
            if api_key
            else _("The endpoint needs an API key (it answered HTTP %(status)d).")
        )
        raise _error((text % {"status": status}) + said, "refused", "api_key")
    if 300 <= status < 400:
        raise _error(
            _("%(url)s redirects to %(location)s: use that address as the base URL.")
            % {"url": url, "location": response.headers.get("location", "?")},
            "redirect",
            "base_url",
        )
    if status == 404:
        raise _error(
            _(
                "%(url)s does not exist (HTTP 404): is the base URL right? For "
                "OpenAI-compatible servers it usually ends in /v1."
            )
            % {"url": url},
            "not_found",
            "base_url",
        )
    if status >= 400:
        raise _error(
            _("%(url)s answered with an error (HTTP %(status)d).") % {"url": url, "status": status}
            + said,
            "http_error",
            "base_url",
        )
    try:
        payload = response.json()
    except ValueError:
        payload = None
        models = None
    else:
        models = chat_model_ids(payload)
    if models is None:
        raise _error(
            _(
                "%(url)s answered, but not with a model list (%(what)s): is this the API's "
                "base URL? For OpenAI-compatible servers it usually ends in /v1."
            )
            % {
                "url": url,
                "what": _("not JSON") if payload is None else _("JSON of another shape"),
            },
            "not_a_model_list",
            "base_url",
        )
    if not models:
        raise _error(_("%(url)s lists no chat models.") % {"url": url}, "no_models", "base_url")
    return tuple(sorted(dict.fromkeys(models)))


# ---------------------------------------------------------------------------------- adding


@dataclass(frozen=True)
class ModelOutcome:
    """What became of one chosen model: its row, its probe, and what is wrong in words."""

    model_id: str
    model: LLMModel
    created: bool
    report: ProbeReport
    applied: bool
    made_default: bool = False

    @property
    def abilities(self) -> list[str]:
        """The model's declared abilities now, in words."""
        declared = self.model.abilities or {}
        return [
            str(ABILITY_SHORT_LABELS.get(flag, flag))
            for flag in ABILITY_FLAGS
            if declared.get(flag) is True
        ]

    @property
    def abilities_text(self) -> str:
        return ", ".join(self.abilities) or _("none")

    @property
    def status(self) -> str:
        return _("added") if self.created else _("already there")

    @property
    def probe_text(self) -> str:
        """The probe in one sentence: checks passed, or why it could not chat."""
        if not self.report.reachable:
            return _("failed")
        return _("%(passed)d/%(total)d checks passed, latency %(latency)s ms") % {
            "passed": self.report.passed,
            "total": len(self.report.checks),
            "latency": self.report.latency_ms,
        }

    @property
    def error(self) -> str:
        """Empty when all went well; else what went wrong and what to do, in plain words."""
        if self.report.reachable:
            return ""
        check = self.report.checks.get("chat")
        detail = check.detail if check is not None else _("not run")
        return _(
            "The probe could not chat with it (%(detail)s). It was added with its abilities "
            "unchanged: check the model id and the connection, then probe it again."
        ) % {"detail": detail}

    def line(self) -> str:
        """One line for the command's output."""
        text = _("%(model)s: %(status)s; abilities: %(abilities)s; probe: %(probe)s.") % {
            "model": self.model_id,
            "status": self.status,
            "abilities": self.abilities_text,
            "probe": self.probe_text,
        }
        if self.made_default:
            text += " " + _("It is now the default model.")
        if self.error:
            text += " " + self.error
        return text


@dataclass(frozen=True)
class ConnectionAdded:
    """The result of :func:`connection_add`: the provider and each chosen model's outcome."""

    provider: Provider
    provider_created: bool
    outcomes: tuple[ModelOutcome, ...] = ()
    default_asked: str | None = None

    @property
    def default_refused(self) -> bool:
        return self.default_asked is not None and not any(o.made_default for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(1 for outcome in self.outcomes if outcome.error)

    def heading(self) -> str:
        names = {"name": self.provider.name, "url": self.provider.base_url}
        if self.provider_created:
            return _("Connection %(name)s added (%(url)s).") % names
        return _("Connection %(name)s (%(url)s) was already there: models added to it.") % names

    def default_text(self) -> str:
        if self.default_refused:
            return _(
                "%(model)s was not made the default: the probe could not chat with it. "
                "The default model is unchanged."
            ) % {"model": self.default_asked}
        if self.default_asked is None:
            return _("The default model is unchanged.")
        return ""

    def lines(self) -> list[str]:
        """The whole result, for the command."""
        lines = [self.heading(), *(outcome.line() for outcome in self.outcomes)]
        if self.default_text():
            lines.append(self.default_text())
        return lines


def connection_provider(*, name: str, base_url: str, kind: str) -> Provider | None:
    """The provider ``name`` to add models to (None: a new one), or refused: a name already
    used for another endpoint is not taken over."""
    existing = Provider.objects.filter(name=name.strip()).first()
    same = (base_url or "").strip().rstrip("/"), kind
    if existing is not None and (existing.base_url.rstrip("/"), existing.kind) != same:
        raise _error(
            _("A provider named %(name)s already exists for %(url)s: choose another name.")
            % {"name": repr(name.strip()), "url": existing.base_url},
            "name_taken",
            "name",
        )
    return existing


@sensitive_variables("api_key")
def connection_add(
    *,
    name: str,
    base_url: str,
    api_key: str | None = None,
    kind: str = "openai",
    model_ids: Iterable[str] | None = None,
    default: str | None = None,
    probe_timeout: float | None = None,
    fetch_timeout: float = FETCH_TIMEOUT,
) -> ConnectionAdded:
    """Connect the endpoint as provider ``name`` and add ``model_ids`` of its list (None:
    all of them), probed, with their verified abilities applied; ``default`` (one of them)
    becomes the default model if its probe could chat.

    A provider of that name is reused only if it points at the same URL (its key is
    replaced when one is given, else its stored key is used); otherwise the name is
    refused. Errors carry ``extra["field"]`` (``name``, ``base_url``, ``api_key``,
    ``models``, ``default``) for the form.
    """
    name = (name or "").strip()
    base_url = (base_url or "").strip().rstrip("/")
    api_key = (api_key or "").strip() or None
    if not name:
        raise _error(_("Give the connection a name."), "invalid", "name")
    if kind not in dict(connection_kinds()):
        raise _error(_("Unknown kind %(kind)s.") % {"kind": repr(kind)}, "invalid", "kind")
    existing = connection_provider(name=name, base_url=base_url, kind=kind)
    fetch_key = api_key or (existing.api_key if existing is not None else None) or None
    listed = endpoint_models_fetch(base_url=base_url, api_key=fetch_key, timeout=fetch_timeout)
    chosen = _chosen(listed, model_ids)
    default = (default or "").strip() or None
    if default is not None and default not in chosen:
        raise _error(
            _("The default must be one of the models you add (%(model)s is not).")
            % {"model": repr(default)},
            "invalid",
            "default",
        )
    with transaction.atomic():
        provider, created = provider_upsert(
            name=name, base_url=base_url, kind=kind, api_key=api_key
        )
        rows = [model_upsert(provider=provider, model_id=model_id) for model_id in chosen]
    logger.info(
        "connection %s %s with %d model(s)", name, "created" if created else "reused", len(rows)
    )
    outcomes = []
    for model, model_created in rows:  # probes after the commit: no request in a transaction
        report, applied = model_probe_and_apply(model=model, timeout=probe_timeout)
        made_default = model.model_id == default and report.reachable
        if made_default:
            model_set_default(model=model)
        model.refresh_from_db()
        outcomes.append(
            ModelOutcome(model.model_id, model, model_created, report, applied, made_default)
        )
    return ConnectionAdded(provider, created, tuple(outcomes), default_asked=default)


def _chosen(listed: tuple[str, ...], model_ids: Iterable[str] | None) -> list[str]:
    """The models to add, in the list's order; refused when one is not listed or none is."""
    if model_ids is None:
        return list(listed)
    wanted = list(dict.fromkeys(m.strip() for m in model_ids if m and m.strip()))
    if not wanted:
        raise _error(_("Choose at least one model to add."), "invalid", "models")
    unknown = [m for m in wanted if m not in listed]
    if unknown:
        raise _error(
            _("The endpoint does not list %(unknown)s (it lists: %(listed)s).")
            % {"unknown": ", ".join(unknown), "listed": ", ".join(listed)},
            "unknown_model",
            "models",
        )
    return [m for m in listed if m in wanted]
