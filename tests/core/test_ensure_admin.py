from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_first_admin_is_created_once_with_printed_password():
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    text = out.getvalue()
    password = text.split("password: ")[1].split()[0]
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert password not in admin.password  # only the hash is stored

    again = StringIO()
    call_command("ensure_admin", stdout=again)
    said = again.getvalue()
    assert "An admin account already exists (admin); not creating another." in said
    assert "manage.py changepassword admin" in said  # the way back in, for a lost password
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
