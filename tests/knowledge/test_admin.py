"""An admin shares a base with everyone (or groups) in the admin, and the change is in the
audit log; after it, another user reads the base."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from knowledge import selectors, services

pytestmark = pytest.mark.django_db


def test_sharing_with_everyone_in_the_admin_is_audited(client, user, other_user, admin_user):
    base = services.base_create(user, "Policies")
    client.force_login(admin_user)
    url = f"/admin/knowledge/knowledgebase/{base.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "name": "Policies",
            "description": "",
            "shared_with_everyone": "on",
            "documents-TOTAL_FORMS": "0",
            "documents-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert list(selectors.readable_bases(other_user)) == [base]
    event = AuditEvent.objects.filter(target_id=str(base.pk)).latest("occurred_at")
    assert "shared_with_everyone" in str(event.changes)
