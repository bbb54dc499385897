"""Writes and builders for providers, models, probes, usage and quotas.

Keyword-only functions named ``<entity>_<action>`` (HackSoft style). Everything is
synchronous ORM code; async callers (the run coroutine) wrap calls in ``sync_to_async``.
No LLM request ever happens inside a transaction here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import DecimalField, F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core import configcache
from core.errors import ApplicationError
from engine import LLM, Usage
from engine.llm.registry import ModelRegistry
from llms.embeddings import Embedder, EmbeddingError
from llms.models import (
    ABILITY_FLAGS,
    ROLES,
    EmbeddingModel,
    LLMModel,
    Provider,
    RoleAssignment,
    UsageRecord,
    default_declared_abilities,
)
from llms.pricing import Cost, Price, price_now
from llms.probe import PROBE_TIMEOUT, ProbeReport, build_probe_llm, probe_llm
from llms.providers import get_backend
from llms.selectors import (
    QuotaStatus,
    models_for_user,
    next_reset,
    quota_limit_for_user,
    usage_today_for_user,
)

__all__ = [
    "build_llm",
    "embedding_model_check",
    "embedding_model_save",
    "model_apply_verified_abilities",
    "model_ensure_default",
    "model_probe",
    "model_probe_and_apply",
    "model_probe_store",
    "model_registry_for_user",
    "model_save",
    "model_set_default",
    "model_upsert",
    "provider_upsert",
    "quota_check",
    "role_assignment_check",
    "role_assignment_set",
    "usage_record",
]

logger = logging.getLogger(__name__)


def _validated(instance: Any) -> None:
    """``full_clean`` with Django's errors turned into the one user-facing error type."""
    try:
        instance.full_clean()
    except ValidationError as exc:
        fields = getattr(exc, "message_dict", {"__all__": exc.messages})
        text = "; ".join(
            f"{k}: {' '.join(v)}" if k != "__all__" else " ".join(v) for k, v in fields.items()
        )
        raise ApplicationError(text, code="invalid", extra=fields) from None


# ----------------------------------------------------------------------------- embeddings


def embedding_model_check(*, model: EmbeddingModel) -> int:
    """One test call; the length of the vectors the model answers. An enabled model that
    does not answer is refused when saved, so indexing never meets it first."""
    try:
        (vector,) = Embedder(model).embed(["A test sentence."])
    except EmbeddingError as exc:
        raise ApplicationError(str(exc), code="invalid", extra={"model_id": [str(exc)]}) from None
    return len(vector)


def embedding_model_save(*, model: EmbeddingModel) -> EmbeddingModel:
    """Save; an enabled model is checked first, which also finds its vector length when
    none is set. A disabled one is saved as it is."""
    _validated(model)
    if model.enabled:
        model.dimensions = model.dimensions or embedding_model_check(model=model)
    model.save()
    return model


# ----------------------------------------------------------------------------- providers


@sensitive_variables("api_key", "extra_headers")
def provider_upsert(
    *,
    name: str,
    base_url: str | None = None,
    kind: str | None = None,
    api_key: str | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> tuple[Provider, bool]:
    """Create or update the provider called ``name``; returns ``(provider, created)``.

    ``None`` keeps the current value, so re-running with fewer options never wipes a key;
    ``api_key=""`` / ``extra_headers={}`` clear them.
    """
    provider = Provider.objects.filter(name=name).first()
    created = provider is None
    if created:
        if not base_url:
            raise ApplicationError(_("A new provider needs a base URL."), code="invalid")
        provider = Provider(name=name)
    if base_url is not None:
        provider.base_url = base_url.rstrip("/")
    if kind is not None:
        get_backend(kind)  # unknown kinds raise ApplicationError
        provider.kind = kind
    if api_key is not None:
        provider.api_key = api_key.strip()
    if extra_headers is not None:
        provider.extra_headers = dict(extra_headers)
    if timeout is not None:
        provider.timeout = float(timeout)
    _validated(provider)
    provider.save()
    logger.info("provider %s %s (%s)", name, "created" if created else "updated", provider.kind)
    return provider, created


# -------------------------------------------------------------------------------- models


def model_upsert(
    *,
    provider: Provider,
    model_id: str,
    display_name: str | None = None,
    abilities: Mapping[str, Any] | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    roles: Iterable[str] | None = None,
    enabled: bool | None = None,
    small: bool | None = None,
    is_default: bool = False,
) -> tuple[LLMModel, bool]:
    """Create or update ``model_id`` of ``provider``; returns ``(model, created)``.

    ``None`` keeps the current value. ``abilities`` given are merged over the current
    ones (a new model starts from plain streaming chat). The first model becomes the
    default; ``is_default=True`` makes this one the default.
    """
    model = LLMModel.objects.filter(provider=provider, model_id=model_id).first()
    created = model is None
    if created:
        model = LLMModel(provider=provider, model_id=model_id)
    if display_name is not None:
        model.display_name = display_name
    if abilities is not None:
        base = default_declared_abilities() if created else dict(model.abilities or {})
        model.abilities = {**base, **dict(abilities)}
    if context_window is not None:
        model.context_window = context_window or None
    if max_output_tokens is not None:
        model.max_output_tokens = max_output_tokens or None
    if roles is not None:
        model.roles = list(dict.fromkeys(roles))
    if enabled is not None:
        model.enabled = enabled
    if small is not None:
        model.small = small
    _validated(model)
    with transaction.atomic():
        model.save()
        if is_default:
            model_set_default(model=model)
        else:
            model_ensure_default()
    model.refresh_from_db(fields=["is_default"])
    return model, created


@transaction.atomic
def model_save(*, model: LLMModel) -> LLMModel:
    """Save an edited row (the admin's path), keeping exactly one default."""
    if model.is_default:
        LLMModel.objects.filter(is_default=True).exclude(pk=model.pk).update(is_default=False)
    model.save()
    if not model.is_default:
        model_ensure_default()
        model.refresh_from_db(fields=["is_default"])
    return model


@transaction.atomic
def model_set_default(*, model: LLMModel) -> LLMModel:
    """Make ``model`` the one default (unsetting the previous one in the same transaction)."""
    LLMModel.objects.select_for_update().filter(is_default=True).exclude(pk=model.pk).update(
        is_default=False
    )
    LLMModel.objects.filter(pk=model.pk).update(is_default=True)
    configcache.bump()  # queryset updates send no signals; the default model is cached
    model.is_default = True
    return model


def model_ensure_default() -> LLMModel | None:
    """Keep "exactly one default" once models exist: promote the first enabled model."""
    current = LLMModel.objects.filter(is_default=True).first()
    if current is not None:
        return current
    candidate = LLMModel.objects.filter(enabled=True).order_by("pk").first()
    return model_set_default(model=candidate) if candidate is not None else None


def model_probe_store(*, model: LLMModel, report: ProbeReport) -> LLMModel:
    """Save a probe's findings on the row (declared abilities stay as they are)."""
    model.verified_abilities = report.verified_abilities
    model.probe_report = report.to_dict()
    model.probed_at = report.finished_at or timezone.now()
    model.save(update_fields=["verified_abilities", "probe_report", "probed_at", "updated_at"])
    return model


@sensitive_variables("llm", "secrets")
def model_probe(*, model: LLMModel, timeout: float | None = None) -> ProbeReport:
    """Probe the live endpoint of ``model`` (sync callers: admin, commands) and store it."""
    llm, secrets, label = build_probe_llm(model, timeout or PROBE_TIMEOUT)

    async def run() -> ProbeReport:
        try:
            return await probe_llm(
                llm, label=label, secrets=secrets, timeout=timeout or PROBE_TIMEOUT
            )
        finally:
            aclose = getattr(llm, "aclose", None)
            if aclose is not None:
                await aclose()

    report = async_to_sync(run)()
    model_probe_store(model=model, report=report)
    return report


def model_probe_and_apply(
    *, model: LLMModel, timeout: float | None = None
) -> tuple[ProbeReport, bool]:
    """Probe ``model`` and, when it could chat, apply what was verified; ``(report, applied)``.

    What an admin means by "probe": a model left declaring plain streaming after a probe
    that verified tool calls would not use them. An unreachable endpoint changes nothing.
    """
    report = model_probe(model=model, timeout=timeout)
    if not report.reachable:
        return report, False
    model_apply_verified_abilities(model=model)
    return report, True


def model_apply_verified_abilities(*, model: LLMModel) -> dict[str, Any]:
    """Copy the probed abilities over the declared ones (unprobed ones are kept)."""
    report = model.probe_report or {}
    if not model.probed_at or not model.verified_abilities:
        raise ApplicationError(
            _("%(model)s has not been probed yet.") % {"model": model}, code="not_probed"
        )
    if not report.get("reachable"):
        raise ApplicationError(
            _(
                "The last probe of %(model)s could not chat with it; fix the provider and "
                "probe again before applying."
            )
            % {"model": model},
            code="probe_failed",
        )
    verified = {k: v for k, v in model.verified_abilities.items() if k in ABILITY_FLAGS}
    model.abilities = {**(model.abilities or {}), **verified}
    model.save(update_fields=["abilities", "updated_at"])
    return model.abilities


# ------------------------------------------------------------------------ role assignments


def role_assignment_check(*, role: str, group: Group | None, model: LLMModel) -> None:
    """Refuse an assignment whose group could not use the model (admin form and services).

    The selector would skip such a row anyway; refusing it up front keeps an admin from
    believing a group got a model it never will. ``group=None`` (everyone) needs a model
    without a group restriction; a group needs a model open to everyone or to that group.
    """
    if role not in ROLES:
        raise ApplicationError(
            _("Unknown role %(role)s (roles: %(roles)s).")
            % {"role": repr(role), "roles": ", ".join(ROLES)}
        )
    if not model.enabled:
        raise ApplicationError(
            _("%(model)s is disabled: enable it before assigning it a role.") % {"model": model}
        )
    allowed = set(model.allowed_groups.values_list("pk", flat=True)) if model.pk else set()
    if not allowed:
        return
    if group is None:
        raise ApplicationError(
            _(
                "%(model)s is restricted to some groups, so it cannot be everyone's %(role)s "
                "model: assign it to those groups instead, or lift its restriction."
            )
            % {"model": model, "role": role}
        )
    if group.pk not in allowed:
        raise ApplicationError(
            _(
                "Members of %(group)s may not use %(model)s (it is restricted to other "
                "groups): pick another %(role)s model, or allow %(group)s on the model first."
            )
            % {"group": group, "model": model, "role": role}
        )


@transaction.atomic
def role_assignment_set(*, role: str, group: Group | None, model: LLMModel) -> RoleAssignment:
    """Give ``group`` (None = everyone) ``model`` for ``role``, replacing any previous pick."""
    role_assignment_check(role=role, group=group, model=model)
    assignment, _created = RoleAssignment.objects.update_or_create(
        role=role, group=group, defaults={"model": model}
    )
    return assignment  # its post_save replaced the configuration token


# ------------------------------------------------------------------------------ builders


def build_llm(
    *, model: LLMModel, max_retries: int | None = None, params: Mapping[str, Any] | None = None
) -> LLM:
    """The engine LLM for a model row, by its provider's kind (no network until used);
    ``params`` (a chat's temperature, top_p, max_tokens) go with each of its requests."""
    provider = model.provider
    return get_backend(provider.kind).build_llm(
        provider, model, max_retries=max_retries, params=params
    )


def model_registry_for_user(*, user: Any, default_model: LLMModel | None = None) -> ModelRegistry:
    """An engine ModelRegistry of the models ``user`` may use.

    Names are the model primary keys as strings (``str(model.pk)``): API model ids are
    not unique across providers. Roles come from the rows; the default is
    ``default_model`` when given and allowed (the conversation's pick), else the site
    default, else the first model.
    """
    registry = ModelRegistry()
    rows = list(models_for_user(user=user))
    allowed_pks = {row.pk for row in rows}
    default_pk = default_model.pk if default_model is not None else None
    if default_pk not in allowed_pks:
        default_pk = next((row.pk for row in rows if row.is_default), None)
    for row in rows:
        registry.register(
            str(row.pk), build_llm(model=row), roles=row.roles or (), default=row.pk == default_pk
        )
    return registry


# --------------------------------------------------------------------------------- usage


def _as_usage(usage: Usage | Mapping[str, Any] | None) -> Usage:
    if isinstance(usage, Usage):
        return usage
    return Usage.from_dict(dict(usage or {}))


def usage_record(
    *,
    user: Any,
    model: LLMModel | None,
    usage: Usage | Mapping[str, Any] | None,
    runs: int = 1,
    price: Price | None = None,
) -> Cost | None:
    """Add tokens, runs and their cost to today's row of ``user`` x ``model``; safe under
    concurrency. Returns the cost added (None: the model is not priced).

    ``price`` is the model's prices as the caller read them, so that a run's own cost
    and what it adds here are one number (:mod:`conversations.runs.lifecycle`); by
    default they are read now. An ``UPDATE ... SET total = total + n`` first; the row is
    created on the first use of the day (a racing insert falls back to the update).
    """
    spent = _as_usage(usage)
    cost = (price or price_now(model=model)).cost(spent)
    day = timezone.localdate()
    with transaction.atomic(savepoint=False):  # the create below has its own savepoint
        if _usage_add(user.pk, model, day, spent, runs, cost):
            return cost
        try:
            with transaction.atomic():
                UsageRecord.objects.create(
                    user=user,
                    model=model,
                    day=day,
                    prompt_tokens=spent.prompt_tokens,
                    completion_tokens=spent.completion_tokens,
                    total_tokens=spent.total_tokens,
                    cost=cost.amount if cost is not None else None,
                    currency=cost.currency if cost is not None else "",
                    runs=runs,
                )
        except IntegrityError:
            _usage_add(user.pk, model, day, spent, runs, cost)
    return cost


# A row's cost before its first priced run is NULL; NULL + x is NULL in SQL.
_NO_COST = Value(0, output_field=DecimalField(max_digits=16, decimal_places=6))


def _usage_add(
    user_id: int, model: LLMModel | None, day: Any, spent: Usage, runs: int, cost: Cost | None
) -> bool:
    """Add to today's row in one ``UPDATE``; whether the row existed.

    A day's row keeps its cost in one currency, the first priced run's: should an admin
    change the model's currency during the day, later runs add their tokens but not their
    cost to that row (logged), rather than adding up two currencies.
    """
    rows = UsageRecord.objects.filter(user_id=user_id, model=model, day=day)
    counts = {
        "prompt_tokens": F("prompt_tokens") + spent.prompt_tokens,
        "completion_tokens": F("completion_tokens") + spent.completion_tokens,
        "total_tokens": F("total_tokens") + spent.total_tokens,
        "runs": F("runs") + runs,
        "updated_at": timezone.now(),
    }
    if cost is None:
        return bool(rows.update(**counts))
    priced = rows.filter(currency__in=("", cost.currency)).update(
        **counts, cost=Coalesce(F("cost"), _NO_COST) + cost.amount, currency=cost.currency
    )
    if priced:
        return True
    # Only a row of another currency takes the tokens without the cost. No row (or one
    # another process made since, in this currency): the caller creates it, and its
    # racing insert comes back here to the priced update above.
    if not rows.exclude(currency__in=("", cost.currency)).update(**counts):
        return False
    logger.warning(
        "usage of user %s with model %s on %s: the model's currency changed to %s during "
        "the day; %s %s left out of the day's cost",
        user_id,
        model.pk if model is not None else None,
        day,
        cost.currency,
        cost.amount,
        cost.currency,
    )
    return True


def quota_check(*, user: Any) -> None:
    """Refuse a new run when today's tokens reached the user's smallest daily limit."""
    limit = configcache.cached(("quota-limit", user.pk), lambda: quota_limit_for_user(user=user))
    if limit is None:
        return  # no quota: today's usage need not be summed
    status = QuotaStatus(used=usage_today_for_user(user=user), limit=limit, resets_at=next_reset())
    if not status.exceeded:
        return
    local_reset = timezone.localtime(status.resets_at)
    left = status.resets_at - timezone.now()
    hours, rest = divmod(max(0, int(left.total_seconds())), 3600)
    raise ApplicationError(
        _(
            "You have used %(used)s of your %(limit)s tokens for today. Your quota resets "
            "at %(time)s %(zone)s (in %(hours)d h %(minutes)d min)."
        )
        % {
            "used": f"{status.used:,}",
            "limit": f"{status.limit:,}",
            "time": f"{local_reset:%H:%M}",
            "zone": local_reset.tzname(),
            "hours": hours,
            "minutes": rest // 60,
        },
        code="quota_exceeded",
        extra={"used": status.used, "limit": status.limit, "resets_at": local_reset.isoformat()},
    )
