"""Admin pages: staff only, secrets write-only and never in HTML, probe and apply buttons."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from llms.models import LLMModel, Provider, UsageQuota, UsageRecord
from llms.services import model_upsert, provider_upsert, role_assignment_set, usage_record
from tests.llms.conftest import SECRET_KEY_VALUE, probe_rules
from tools.models import ToolConfig

pytestmark = pytest.mark.django_db


def form_data(response) -> dict[str, Any]:
    """The POST body a browser would send back for an admin change form, unchanged."""
    data: dict[str, Any] = {}

    def add(form) -> None:
        for field in form:
            value = field.value()
            if value is None or value is False:
                continue
            if value is True:
                data[field.html_name] = "on"
            elif isinstance(value, list | tuple):
                data[field.html_name] = [str(v) for v in value]
            else:
                data[field.html_name] = str(value)

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        add(inline.formset.management_form)
        for form in inline.formset.forms:
            add(form)
    return data


@pytest.fixture
def rows(user):
    provider, _ = provider_upsert(
        name="prov", base_url="http://llm.test/v1", api_key=SECRET_KEY_VALUE
    )
    model, _ = model_upsert(provider=provider, model_id="m1", display_name="Model One")
    usage_record(user=user, model=model, usage={"prompt_tokens": 120, "completion_tokens": 30})
    quota = UsageQuota.objects.create(user=user, daily_token_limit=5000)
    tool = ToolConfig.objects.create(name="some-tool")
    return {
        "provider": provider,
        "llmmodel": model,
        "roleassignment": role_assignment_set(role="fast", group=None, model=model),
        "usagerecord": UsageRecord.objects.get(),
        "usagequota": quota,
        "toolconfig": tool,
    }


APPS = {
    "provider": "llms",
    "llmmodel": "llms",
    "roleassignment": "llms",
    "usagerecord": "llms",
    "usagequota": "llms",
    "toolconfig": "tools",
}
NO_ADD = {"usagerecord", "toolconfig"}  # written by code, not by hand


def urls(name: str, obj: Any) -> dict[str, str]:
    app = APPS[name]
    return {
        "changelist": reverse(f"admin:{app}_{name}_changelist"),
        "add": reverse(f"admin:{app}_{name}_add"),
        "change": reverse(f"admin:{app}_{name}_change", args=[obj.pk]),
    }


@pytest.mark.parametrize("name", list(APPS))
def test_admin_pages_load_for_staff(admin_client, rows, name):
    for page, url in urls(name, rows[name]).items():
        response = admin_client.get(url)
        expected = 403 if (page == "add" and name in NO_ADD) else 200
        assert response.status_code == expected, (page, url)
        assert SECRET_KEY_VALUE.encode() not in response.content


@pytest.mark.parametrize("name", list(APPS))
def test_admin_pages_refuse_non_staff(user_client, rows, name):
    for url in urls(name, rows[name]).values():
        response = user_client.get(url)
        assert response.status_code == 302
        assert reverse("admin:login") in response["Location"]


def test_provider_key_is_write_only(admin_client, rows):
    provider = rows["provider"]
    change_url = reverse("admin:llms_provider_change", args=[provider.pk])
    changelist = admin_client.get(reverse("admin:llms_provider_changelist"))
    assert SECRET_KEY_VALUE.encode() not in changelist.content
    assert b"WXYZ" not in changelist.content
    page = admin_client.get(change_url)
    assert SECRET_KEY_VALUE.encode() not in page.content
    assert "A key is set, ending in …WXYZ." in page.content.decode()

    # An empty submit keeps the key.
    data = form_data(page)
    assert data.get("new_api_key", "") == ""
    response = admin_client.post(change_url, data)
    assert response.status_code == 302, response.content
    assert Provider.objects.get().api_key == SECRET_KEY_VALUE

    # A new key replaces it; an invalid form never echoes the typed key back.
    new_key = "sk-another-secret-key-9876"
    bad = {**data, "new_api_key": new_key, "base_url": "not a url"}
    response = admin_client.post(change_url, bad)
    assert response.status_code == 200 and new_key.encode() not in response.content
    admin_client.post(change_url, {**data, "new_api_key": new_key})
    assert Provider.objects.get().api_key == new_key

    # Headers are write-only too; clearing the key empties it.
    admin_client.post(change_url, {**data, "new_extra_headers": '{"X-Api-Key": "hdr-secret-1"}'})
    assert Provider.objects.get().extra_headers == {"X-Api-Key": "hdr-secret-1"}
    page = admin_client.get(change_url)
    assert b"hdr-secret-1" not in page.content and b"X-Api-Key" in page.content
    admin_client.post(change_url, {**data, "clear_api_key": "on"})
    assert Provider.objects.get().api_key == ""
    assert Provider.objects.get().extra_headers == {"X-Api-Key": "hdr-secret-1"}


def test_provider_add_form_creates_with_key(admin_client):
    response = admin_client.post(
        reverse("admin:llms_provider_add"),
        {
            "name": "new",
            "kind": "openai",
            "base_url": "http://llama:8080/v1",
            "timeout": "60",
            "new_api_key": SECRET_KEY_VALUE,
            "models-TOTAL_FORMS": "1",
            "models-INITIAL_FORMS": "0",
            "models-0-model_id": "local-model",
            "models-0-enabled": "on",
        },
    )
    assert response.status_code == 302
    provider = Provider.objects.get(name="new")
    assert provider.api_key == SECRET_KEY_VALUE
    assert provider.models.get().is_default  # the first model becomes the default


def test_model_form_sets_the_one_default_and_refuses_none(admin_client, rows):
    first = rows["llmmodel"]
    second, _ = model_upsert(provider=rows["provider"], model_id="m2")
    url = reverse("admin:llms_llmmodel_change", args=[second.pk])
    data = form_data(admin_client.get(url))
    data.update({"is_default": "on", "abilities": ["tool_call", "streaming"], "roles": ["fast"]})
    assert admin_client.post(url, data).status_code == 302
    second.refresh_from_db()
    first.refresh_from_db()
    assert second.is_default and not first.is_default
    assert second.abilities["tool_call"] and not second.abilities["json_mode"]
    assert second.roles == ["fast"]

    data.pop("is_default")
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert b"There must be one default model" in response.content


def test_probe_and_apply_buttons(admin_client, rows, full_server):
    model = rows["llmmodel"]
    Provider.objects.filter(pk=rows["provider"].pk).update(base_url=full_server.base_url)
    full_server.set_rules(probe_rules(tool_call_forced={"status": 400}))
    change_url = reverse("admin:llms_llmmodel_change", args=[model.pk])
    assert b"Never probed" in admin_client.get(change_url).content

    probe_url = reverse("admin:llms_llmmodel_probe", args=[model.pk])
    assert admin_client.get(probe_url).status_code == 405
    response = admin_client.post(probe_url, follow=True)
    assert b"6/7 checks passed" in response.content
    assert b"Its verified abilities are now applied." in response.content
    html = response.content.decode()
    assert "Declared" in html and "Verified" in html and "(differs)" not in html
    assert "rejected a forced tool_choice" in html
    assert SECRET_KEY_VALUE not in html
    model.refresh_from_db()  # the probe applied what it verified
    assert model.abilities["tool_call"] and not model.abilities["tool_choice"]

    # declared by hand against the probe: shown as differing, and "Apply" puts it back
    LLMModel.objects.filter(pk=model.pk).update(abilities={**model.abilities, "tool_choice": True})
    html = admin_client.get(change_url).content.decode()
    assert "(differs)" in html
    assert 'class="differs"' in html and ' style="' not in html  # the CSP refuses style=""
    assert "llms/admin.css" in html
    admin_client.post(reverse("admin:llms_llmmodel_apply_verified", args=[model.pk]))
    model.refresh_from_db()
    assert model.abilities["tool_call"] and not model.abilities["tool_choice"]


def test_probe_action_from_the_changelist(admin_client, rows, full_server):
    Provider.objects.filter(pk=rows["provider"].pk).update(base_url=full_server.base_url)
    model = rows["llmmodel"]
    response = admin_client.post(
        reverse("admin:llms_llmmodel_changelist"),
        {"action": "probe_capabilities", "_selected_action": [model.pk]},
        follow=True,
    )
    assert b"7/7 checks passed" in response.content
    assert b"Its verified abilities are now applied." in response.content
    model = LLMModel.objects.get()
    assert model.probed_at is not None
    assert all(model.abilities[flag] for flag in ("tool_call", "json_mode", "vision"))


def test_usage_changelist_shows_totals(admin_client, rows, other_user):
    usage_record(user=other_user, model=rows["llmmodel"], usage={"total_tokens": 50})
    response = admin_client.get(reverse("admin:llms_usagerecord_changelist"))
    html = response.content.decode()
    assert "Totals for the current filter" in html
    assert "<td>200</td>" in html  # 150 (alice) + 50 (bob)
    assert "alice" in html and "bob" in html and "Model One" in html
    assert 'class="usage-breakdown"' in html and ' style="' not in html  # the CSP refuses it
    filtered = admin_client.get(
        reverse("admin:llms_usagerecord_changelist") + f"?user__id__exact={other_user.pk}"
    )
    assert "<td>50</td>" in filtered.content.decode()
