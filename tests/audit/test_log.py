"""The audit log itself: append-only, read-only in the admin, exported as filtered."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from audit.models import AppendOnlyError, AuditEvent
from audit.services import diff, record, snapshot
from llms.models import Provider

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, staff_user):
    client.force_login(staff_user)
    return client


def test_a_row_is_never_changed_or_deleted(user):
    event = record("token.created", actor=user, target_label="laptop")

    event.target_label = "something else"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(target_label="x")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.bulk_update([event], ["target_label"])

    assert AuditEvent.objects.get(pk=event.pk).target_label == "laptop"


def test_deleting_the_actor_keeps_the_event_and_the_name(user):
    event = record("token.created", actor=user)

    user.delete()

    row = AuditEvent.objects.get(pk=event.pk)
    assert (row.actor_id, row.actor_name) == (None, "alice")


def test_the_admin_shows_the_log_and_cannot_add_change_or_delete(admin_client, user):
    event = record("share.created", actor=user, target_label="Trip plan")
    changelist = reverse("admin:audit_auditevent_changelist")
    change = reverse("admin:audit_auditevent_change", args=[event.pk])

    page = admin_client.get(changelist)
    assert page.status_code == 200 and "Trip plan" in page.content.decode()
    assert "Export CSV" in page.content.decode()
    assert admin_client.get(change).status_code == 200  # view only
    assert admin_client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    assert admin_client.post(change, {"action": "x", "target_label": "y"}).status_code == 403
    delete = reverse("admin:audit_auditevent_delete", args=[event.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    model_admin = page.context["cl"].model_admin
    request = page.wsgi_request
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, event)
    assert not model_admin.has_delete_permission(request, event)
    assert not model_admin.get_actions(request)  # no "delete selected"
    assert AuditEvent.objects.get(pk=event.pk).target_label == "Trip plan"


def test_the_list_filters_and_searches(admin_client, user, other_user):
    record("auth.login", actor=user, target=user)
    record("auth.login_failed", actor_name="mallory", target_label="mallory")
    changelist = reverse("admin:audit_auditevent_changelist")

    filtered = admin_client.get(changelist, {"action": "auth.login_failed"})
    assert [e.actor_name for e in filtered.context["cl"].result_list] == ["mallory"]
    searched = admin_client.get(changelist, {"q": "alice"})
    assert [e.action for e in searched.context["cl"].result_list] == ["auth.login"]
    by_actor = admin_client.get(changelist, {"actor__id__exact": str(user.pk)})
    assert [e.action for e in by_actor.context["cl"].result_list] == ["auth.login"]


def _body(response) -> str:
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_csv_and_json_lines_export_the_filtered_rows(admin_client, user):
    record("auth.login_failed", actor_name="mallory", target_label="mallory")
    for n in range(3):
        record("token.created", actor=user, target_label=f"token {n}", changes={"n": [None, n]})
    url = reverse("admin:audit_auditevent_export", args=["csv"])

    response = admin_client.get(url, {"action": "token.created"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment;")
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert [r["target_label"] for r in rows] == ["token 2", "token 1", "token 0"]
    assert {r["actor_name"] for r in rows} == {"alice"}
    assert json.loads(rows[0]["changes"]) == {"n": [None, 2]}

    response = admin_client.get(
        reverse("admin:audit_auditevent_export", args=["jsonl"]), {"q": "mallory"}
    )
    assert response["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in _body(response).splitlines()]
    assert [(row["action"], row["actor_name"]) for row in lines] == [
        ("auth.login_failed", "mallory")
    ]

    assert admin_client.get(url, {"nonsense__field": "1"}).status_code == 400
    bad_format = reverse("admin:audit_auditevent_export", args=["xml"])
    assert admin_client.get(bad_format).status_code == 400


def test_export_needs_the_admin(user_client):
    url = reverse("admin:audit_auditevent_export", args=["csv"])
    response = user_client.get(url)
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]


def test_secrets_are_masked_in_snapshots_and_in_changes(user):
    provider = Provider(name="p", base_url="http://llm.test/v1", api_key="sk-hidden-1")
    provider.extra_headers = {"X-Api-Key": "hdr-hidden-2"}
    provider.save()

    shown = snapshot(provider)
    assert repr(shown["api_key"]) == "***" and str(shown["extra_headers_secret"]) == "***"
    assert shown["name"] == "p"
    # A changed secret is a change, and still shows as ***.
    provider.api_key = "sk-hidden-3"
    assert diff(shown, snapshot(provider)) == {"api_key": ["***", "***"]}
    assert diff(shown, snapshot(provider.__class__.objects.get())) == {}

    event = record(
        "provider.changed",
        actor=user,
        target=provider,
        changes={
            "password": ["old-pass", "new-pass"],
            "config": [{"api_key": "abc-secret"}, {"api_key": "", "depth": 2}],
            "max_output_tokens": [100, 200],
        },
    )
    raw = json.dumps(AuditEvent.objects.values_list("changes", flat=True).get(pk=event.pk))
    for secret in ("sk-hidden-1", "hdr-hidden-2", "old-pass", "new-pass", "abc-secret"):
        assert secret not in raw
    assert event.changes["password"] == ["***", "***"]
    assert event.changes["config"] == [{"api_key": "***"}, {"api_key": "", "depth": 2}]
    assert event.changes["max_output_tokens"] == [100, 200]  # "tokens" is not a secret
