"""The admin's lists of our rows: each preset with what it is used for (issue 46:
conversations started from it, their runs and tokens), runs read-only (issue 47)."""

from __future__ import annotations

import re

import pytest

from conversations import services
from conversations.models import Preset, Run

pytestmark = pytest.mark.django_db


def test_the_changelist_counts_conversations_runs_and_tokens(admin_client, user) -> None:
    used = Preset.objects.create(owner=user, name="Used")
    Preset.objects.create(owner=None, name="Unused")
    for tokens in (1200, 34):
        conversation = services.conversation_create(owner=user)
        conversation.preset = used
        conversation.save()
        Run.objects.create(conversation=conversation, usage={"total_tokens": tokens})
        Run.objects.create(conversation=conversation, usage={})
    page = admin_client.get("/admin/conversations/preset/")
    assert page.status_code == 200
    rows = re.findall(r"<tr[^>]*>.*?</tr>", page.content.decode(), re.DOTALL)
    used_row = next(row for row in rows if ">Used</a>" in row)
    assert '<td class="field-conversation_count">2</td>' in used_row
    assert '<td class="field-run_count">4</td>' in used_row
    assert '<td class="field-tokens">1,234</td>' in used_row
    unused_row = next(row for row in rows if ">Unused</a>" in row)
    assert "everyone (admin&#x27;s)" in unused_row
    assert '<td class="field-tokens">0</td>' in unused_row
    assert admin_client.get(f"/admin/conversations/preset/{used.pk}/change/").status_code == 200


def test_run_records_are_read_only_with_readable_times(admin_client, user) -> None:
    """Issue 47: run records were editable and showed raw floats."""
    conversation = services.conversation_create(owner=user)
    run = Run.objects.create(conversation=conversation, elapsed=3.14159, status="succeeded")
    listing = admin_client.get("/admin/conversations/run/").content.decode()
    assert '<td class="field-seconds">3.1 s</td>' in listing
    change = admin_client.get(f"/admin/conversations/run/{run.pk}/change/").content.decode()
    assert 'name="status"' not in change and "3.14159" in change  # shown, not a field
    assert admin_client.post(f"/admin/conversations/run/{run.pk}/change/", {}).status_code == 403
    assert admin_client.get("/admin/conversations/run/add/").status_code == 403
