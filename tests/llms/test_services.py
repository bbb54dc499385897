"""Models: exactly one default, access by group, the engine registry, usage and quotas."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from core.errors import ApplicationError
from engine import Usage
from engine.llm.openai import OpenAICompatibleLLM
from llms.models import LLMModel, UsageQuota, UsageRecord
from llms.selectors import (
    default_model_for_user,
    model_get_for_user,
    models_for_user,
    quota_status_for_user,
)
from llms.services import (
    build_llm,
    model_registry_for_user,
    model_set_default,
    model_upsert,
    provider_upsert,
    quota_check,
    usage_record,
)
from tests.llms.conftest import SECRET_KEY_VALUE

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider():
    return provider_upsert(
        name="prov", base_url="http://llm.test:8080/v1", api_key=SECRET_KEY_VALUE, timeout=7
    )[0]


def make(provider, model_id, **kwargs):
    return model_upsert(provider=provider, model_id=model_id, **kwargs)[0]


def defaults():
    return list(LLMModel.objects.filter(is_default=True).values_list("model_id", flat=True))


def test_first_model_becomes_default_and_setting_one_unsets_the_other(provider):
    a = make(provider, "a")
    b = make(provider, "b")
    assert defaults() == ["a"]
    model_set_default(model=b)
    assert defaults() == ["b"]
    make(provider, "c", is_default=True)
    assert defaults() == ["c"]
    a.refresh_from_db()
    assert not a.is_default


def test_database_refuses_a_second_default(provider):
    make(provider, "a")
    b = make(provider, "b")
    with pytest.raises(IntegrityError), transaction.atomic():
        LLMModel.objects.filter(pk=b.pk).update(is_default=True)


def test_model_upsert_is_idempotent_and_merges_abilities(provider):
    model, created = model_upsert(
        provider=provider, model_id="m", abilities={"tool_call": True}, context_window=8000
    )
    assert created and model.abilities["tool_call"] and model.abilities["streaming"]
    again, created = model_upsert(provider=provider, model_id="m", abilities={"vision": True})
    assert not created and again.pk == model.pk
    assert again.abilities["tool_call"] and again.abilities["vision"]
    assert again.context_window == 8000


def test_invalid_abilities_and_roles_are_refused(provider):
    with pytest.raises(ApplicationError, match="Unknown abilities"):
        model_upsert(provider=provider, model_id="m", abilities={"telepathy": True})
    with pytest.raises(ApplicationError, match="Roles"):
        model_upsert(provider=provider, model_id="m", roles=["wizard"])


def test_budget_tokens(provider):
    model = make(provider, "m")
    assert model.budget_tokens == 32_000
    model.context_window, model.max_output_tokens = 128_000, 16_000
    assert model.budget_tokens == 112_000
    model.context_window, model.max_output_tokens = 8_192, 8_000
    assert model.budget_tokens == 4_000


def test_build_llm_maps_the_row(provider):
    provider.extra_headers = {"X-Title": "agentsite"}
    provider.save()
    model = make(provider, "m", abilities={"tool_call": True, "json_mode": True})
    llm = build_llm(model=model)
    assert isinstance(llm, OpenAICompatibleLLM)
    assert (llm.base_url, llm.model, llm.timeout) == ("http://llm.test:8080/v1", "m", 7.0)
    assert llm.abilities["tool_call"] and llm.abilities["json_mode"]
    assert SECRET_KEY_VALUE not in repr(llm)


def test_group_restricted_model_is_invisible_and_refused(provider, user, other_user):
    team = Group.objects.create(name="team")
    user.groups.add(team)
    public = make(provider, "public")
    private = make(provider, "private")
    private.allowed_groups.add(team)
    disabled = make(provider, "disabled", enabled=False)

    assert set(models_for_user(user=user)) == {public, private}
    assert set(models_for_user(user=other_user)) == {public}
    assert model_get_for_user(user=user, model_id=private.pk) == private
    assert model_get_for_user(user=other_user, model_id=str(public.pk)) == public
    for crafted in (private.pk, disabled.pk, 999_999, "nope", None):
        with pytest.raises(ApplicationError) as info:
            model_get_for_user(user=other_user, model_id=crafted)
        assert info.value.code == "model_not_allowed"


def test_default_model_for_user_falls_back_to_an_allowed_one(provider, user, other_user):
    team = Group.objects.create(name="team")
    user.groups.add(team)
    private = make(provider, "private")  # becomes the site default
    private.allowed_groups.add(team)
    public = make(provider, "public")
    assert default_model_for_user(user=user) == private
    assert default_model_for_user(user=other_user) == public


def test_registry_from_rows(provider, user):
    general = make(provider, "general", roles=["general"])
    fast = make(provider, "fast", roles=["fast"], is_default=True)
    make(provider, "off", roles=["reasoning"], enabled=False)

    registry = model_registry_for_user(user=user)
    assert set(registry.names()) == {str(general.pk), str(fast.pk)}
    assert registry.get_default().model == "fast"
    assert registry.get_by_role("fast").model == "fast"
    assert registry.get_by_role("reasoning").model == "fast"  # disabled: falls to default
    assert registry.roles(str(general.pk)) == ("general",)

    picked = model_registry_for_user(user=user, default_model=general)
    assert picked.get_default().model == "general"


def test_usage_record_upserts_and_increments(provider, user):
    model = make(provider, "m")
    usage_record(user=user, model=model, usage=Usage(10, 5, 15))
    usage_record(user=user, model=model, usage={"prompt_tokens": 1, "completion_tokens": 2})
    usage_record(user=user, model=None, usage=Usage(0, 0, 7), runs=0)
    usage_record(user=user, model=None, usage=Usage(0, 0, 3), runs=0)
    row = UsageRecord.objects.get(user=user, model=model)
    assert (row.prompt_tokens, row.completion_tokens, row.total_tokens, row.runs) == (11, 7, 18, 2)
    assert UsageRecord.objects.get(user=user, model=None).total_tokens == 10
    assert quota_status_for_user(user=user).used == 28


def test_quota_refuses_when_the_smallest_limit_is_reached(provider, user, other_user):
    team = Group.objects.create(name="team")
    user.groups.add(team)
    UsageQuota.objects.create(group=team, daily_token_limit=100)
    UsageQuota.objects.create(user=user, daily_token_limit=1_000)
    model = make(provider, "m")
    quota_check(user=user)  # nothing spent yet
    usage_record(user=user, model=model, usage=Usage(60, 39, 99))
    quota_check(user=user)
    usage_record(user=user, model=model, usage=Usage(1, 0, 1))
    with pytest.raises(ApplicationError) as info:
        quota_check(user=user)
    assert info.value.code == "quota_exceeded"
    assert (
        "100 of your 100 tokens" in info.value.message and "resets at 00:00" in info.value.message
    )
    quota_check(user=other_user)  # no quota applies to bob


def test_quota_needs_exactly_one_of_group_or_user(user):
    team = Group.objects.create(name="team")
    with pytest.raises(IntegrityError), transaction.atomic():
        UsageQuota.objects.create(group=team, user=user, daily_token_limit=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        UsageQuota.objects.create(daily_token_limit=1)
