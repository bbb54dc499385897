"""Plan-mode roles: per-group assignments, their precedence, the admin, the probe summary."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.urls import reverse

from core.errors import ApplicationError
from llms.models import LLMModel, RoleAssignment
from llms.probe import ProbeCheck, ProbeReport, probe_summary
from llms.selectors import role_models_for_user
from llms.services import (
    model_probe_store,
    model_upsert,
    provider_upsert,
    role_assignment_check,
    role_assignment_set,
)

pytestmark = pytest.mark.django_db

PROBED_AT = dt.datetime(2026, 11, 30, 9, 15, tzinfo=dt.UTC)


@pytest.fixture
def provider():
    return provider_upsert(name="prov", base_url="http://llm.test:8080/v1")[0]


def make(provider, model_id: str, **kwargs) -> LLMModel:
    return model_upsert(provider=provider, model_id=model_id, display_name=model_id, **kwargs)[0]


def restrict(model: LLMModel, *groups: Group) -> LLMModel:
    model.allowed_groups.set(groups)
    return model


# --------------------------------------------------------------------------- the selector


def test_group_assignment_beats_everyone_row_beats_legacy_roles(provider, user, other_user):
    legacy, everyone, grouped = (make(provider, n) for n in ("legacy", "everyone", "grouped"))
    legacy.roles = ["fast", "reasoning"]
    legacy.save()
    team = Group.objects.create(name="team")
    user.groups.add(team)

    assert role_models_for_user(user=user) == {"fast": legacy, "reasoning": legacy}

    role_assignment_set(role="fast", group=None, model=everyone)
    assert role_models_for_user(user=user) == {"fast": everyone, "reasoning": legacy}

    role_assignment_set(role="fast", group=team, model=grouped)
    role_assignment_set(role="general", group=team, model=grouped)
    assert role_models_for_user(user=user) == {
        "general": grouped,
        "fast": grouped,
        "reasoning": legacy,
    }
    # Not in the group: the everyone row, and no "general" at all.
    assert role_models_for_user(user=other_user) == {"fast": everyone, "reasoning": legacy}


def test_models_the_user_may_not_use_are_never_returned(provider, user, client):
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    user.groups.add(team)
    everyone, grouped = make(provider, "everyone"), make(provider, "grouped")
    elsewhere = restrict(make(provider, "elsewhere", roles=["reasoning"]), others)
    role_assignment_set(role="fast", group=None, model=everyone)
    role_assignment_set(role="fast", group=team, model=grouped)
    # Rows the service refuses can still arise: the model's groups changed afterwards.
    RoleAssignment.objects.create(role="general", group=None, model=elsewhere)
    assert role_models_for_user(user=user) == {"fast": grouped}

    grouped.enabled = False
    grouped.save()  # the team's pick falls through to the everyone row
    assert role_models_for_user(user=user) == {"fast": everyone}
    everyone.enabled = False
    everyone.save()
    assert role_models_for_user(user=user) == {}

    user.groups.add(others)  # now they may use it: the everyone row and the legacy list
    assert role_models_for_user(user=user) == {"general": elsewhere, "reasoning": elsewhere}
    assert role_models_for_user(user=None) == {}


def test_user_in_two_groups_gets_the_lowest_group_ids_assignment(provider, user):
    # Names and insertion order disagree with the ids, so only the id can decide.
    low, high = Group.objects.create(name="zeta"), Group.objects.create(name="alpha")
    assert low.pk < high.pk
    user.groups.add(high, low)
    of_high, of_low = make(provider, "of-high"), make(provider, "of-low")
    role_assignment_set(role="reasoning", group=high, model=of_high)
    role_assignment_set(role="reasoning", group=low, model=of_low)
    for _ in range(3):
        assert role_models_for_user(user=user) == {"reasoning": of_low}


def test_selector_is_cached_and_an_assignment_change_invalidates_it(
    provider, user, django_assert_num_queries
):
    first, second = make(provider, "first"), make(provider, "second")
    assignment = role_assignment_set(role="fast", group=None, model=first)
    assert role_models_for_user(user=user) == {"fast": first}
    with django_assert_num_queries(1):  # the configuration token only
        assert role_models_for_user(user=user) == {"fast": first}

    assignment.model = second
    assignment.save()
    assert role_models_for_user(user=user) == {"fast": second}

    team = Group.objects.create(name="team")
    role_assignment_set(role="fast", group=team, model=first)
    assert role_models_for_user(user=user) == {"fast": second}
    user.groups.add(team)  # membership changes count too
    assert role_models_for_user(user=user) == {"fast": first}

    RoleAssignment.objects.filter(group=team).get().delete()
    assert role_models_for_user(user=user) == {"fast": second}
    result = role_models_for_user(user=user)
    result.clear()  # a caller's dict is its own
    assert role_models_for_user(user=user) == {"fast": second}


# ---------------------------------------------------------------------- the service check


def test_service_check_refuses_a_model_the_group_may_not_use(provider):
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    open_model = make(provider, "open")
    restricted = restrict(make(provider, "restricted"), others)

    with pytest.raises(ApplicationError, match="Members of team may not use restricted"):
        role_assignment_check(role="fast", group=team, model=restricted)
    with pytest.raises(ApplicationError, match="cannot be everyone's fast model"):
        role_assignment_check(role="fast", group=None, model=restricted)
    with pytest.raises(ApplicationError, match="Members of team may not use"):
        role_assignment_set(role="fast", group=team, model=restricted)
    assert not RoleAssignment.objects.exists()

    role_assignment_check(role="fast", group=others, model=restricted)
    role_assignment_check(role="fast", group=team, model=open_model)
    role_assignment_check(role="fast", group=None, model=open_model)

    open_model.enabled = False
    open_model.save()
    with pytest.raises(ApplicationError, match="disabled"):
        role_assignment_check(role="fast", group=team, model=open_model)
    with pytest.raises(ApplicationError, match="Unknown role"):
        role_assignment_check(role="slow", group=None, model=restricted)


def test_one_row_per_role_and_group_including_everyone(provider):
    model = make(provider, "m")
    team = Group.objects.create(name="team")
    RoleAssignment.objects.create(role="fast", group=team, model=model)
    RoleAssignment.objects.create(role="fast", group=None, model=model)
    RoleAssignment.objects.create(role="reasoning", group=None, model=model)
    for group in (team, None):
        with pytest.raises(IntegrityError), transaction.atomic():
            RoleAssignment.objects.create(role="fast", group=group, model=model)
    assert RoleAssignment.objects.count() == 3

    second = role_assignment_set(role="fast", group=None, model=make(provider, "m2"))
    assert RoleAssignment.objects.count() == 3  # replaced, not added
    assert RoleAssignment.objects.get(role="fast", group=None) == second


# ----------------------------------------------------------------------------- the admin


def test_admin_add_form_refuses_a_bad_assignment_and_accepts_a_good_one(provider, admin_client):
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    restricted = restrict(make(provider, "restricted"), others)
    url = reverse("admin:llms_roleassignment_add")
    assert url == "/admin/llms/roleassignment/add/"
    page = admin_client.get(url).content.decode()
    assert "Everyone (the fallback)" in page and "restricted (prov) — Not probed" in page

    for group in (team, None):
        data = {"role": "fast", "group": group.pk if group else "", "model": restricted.pk}
        response = admin_client.post(url, data)
        assert response.status_code == 200
        assert "restricted to" in response.content.decode()
    assert not RoleAssignment.objects.exists()

    response = admin_client.post(url, {"role": "fast", "group": others.pk, "model": restricted.pk})
    assert response.status_code == 302
    assert RoleAssignment.objects.get().group == others

    response = admin_client.post(url, {"role": "fast", "group": others.pk, "model": restricted.pk})
    assert response.status_code == 200
    assert "This group already has a model for this role." in response.content.decode()

    response = admin_client.post(url, {"role": "fast", "group": "", "model": restricted.pk})
    assert "cannot be everyone" in response.content.decode()  # checked before duplicates
    open_model = make(provider, "open")
    assert admin_client.post(url, {"role": "fast", "model": open_model.pk}).status_code == 302
    response = admin_client.post(url, {"role": "fast", "group": "", "model": open_model.pk})
    assert "Everyone already has a model for this role." in response.content.decode()

    listing = admin_client.get(reverse("admin:llms_roleassignment_changelist"))
    assert "others" in listing.content.decode() and "Not probed" in listing.content.decode()


def test_admin_lists_show_everyone_and_the_probe_summary(provider, admin_client, settings):
    settings.TIME_ZONE = "UTC"
    model = make(provider, "probed")
    model_probe_store(model=model, report=report())
    role_assignment_set(role="general", group=None, model=model)
    summary = probe_summary(model)

    html = admin_client.get(reverse("admin:llms_roleassignment_changelist")).content.decode()
    assert "Everyone" in html and summary in html
    html = admin_client.get(reverse("admin:llms_llmmodel_changelist")).content.decode()
    assert summary in html
    html = admin_client.get(reverse("admin:llms_llmmodel_change", args=[model.pk])).content.decode()
    assert summary in html


def test_group_page_inline_checks_each_assignment(provider, admin_client):
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    open_model = make(provider, "open")
    restricted = restrict(make(provider, "restricted"), others)
    role_assignment_set(role="fast", group=None, model=open_model)  # must not clash below

    def post(url: str, name: str, *rows: tuple[str, LLMModel]) -> str:
        data = {
            "name": name,
            "llm_role_assignments-TOTAL_FORMS": str(len(rows)),
            "llm_role_assignments-INITIAL_FORMS": "0",
        }
        for i, (role, model) in enumerate(rows):
            data[f"llm_role_assignments-{i}-role"] = role
            data[f"llm_role_assignments-{i}-model"] = str(model.pk)
        response = admin_client.post(url, data)
        return "" if response.status_code == 302 else response.content.decode()

    change = reverse("admin:auth_group_change", args=[team.pk])
    assert "Plan-mode models by role" in admin_client.get(change).content.decode()
    assert "restricted to other groups" in post(change, "team", ("fast", restricted))
    assert "assigned twice" in post(change, "team", ("fast", open_model), ("fast", open_model))
    assert not RoleAssignment.objects.filter(group=team).exists()
    assert post(change, "team", ("fast", open_model)) == ""
    assert RoleAssignment.objects.get(group=team).model == open_model

    add = reverse("admin:auth_group_add")
    assert "restricted to other groups" in post(add, "new", ("fast", restricted))
    assert post(add, "new", ("fast", open_model)) == ""
    assert RoleAssignment.objects.get(group__name="new").role == "fast"


# ----------------------------------------------------------------------- probe summaries


def report(*, reachable: bool = True) -> ProbeReport:
    result = ProbeReport(model="m", started_at=PROBED_AT, finished_at=PROBED_AT)
    checks = {
        "chat": (reachable, 420),
        "streaming": (reachable, 500),
        "usage": (False, None),
        "tool_call_forced": (False, 300),
        "tool_call_auto": (reachable, 310),
        "json_mode": (reachable, 200),
    }
    for name, (ok, latency) in checks.items():
        result.checks[name] = ProbeCheck(name, ok, "detail", latency)
    return result


def test_probe_summary_text(provider, settings):
    settings.TIME_ZONE = "UTC"
    model = make(provider, "m")
    assert probe_summary(model) == "Not probed"

    model_probe_store(model=model, report=report())
    assert probe_summary(model) == (
        "4/6 checks passed (tool calls, JSON mode, streaming), latency 420 ms; "
        "probed 2026-11-30 09:15"
    )

    model_probe_store(model=model, report=report(reachable=False))
    assert probe_summary(model) == "Unreachable (probed 2026-11-30 09:15)"

    settings.TIME_ZONE = "Europe/Paris"  # shown in the site's time zone
    assert probe_summary(LLMModel.objects.get()).endswith("(probed 2026-11-30 10:15)")
