"""Create the first superuser when none exists and print its credentials once.

The password is generated, printed to the terminal and stored nowhere else in plain text.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a first superuser (username 'admin' by default) if there is none."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="where the site runs")

    def handle(self, *args, username: str, url: str, **options) -> None:
        user_model = get_user_model()
        existing = user_model.objects.filter(is_superuser=True).order_by("pk").first()
        if existing is not None:
            name = existing.get_username()
            self.stdout.write(
                f"An admin account already exists ({name}); not creating another. Lost its "
                f"password? Set a new one with: .venv/bin/python manage.py changepassword {name}"
            )
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        bar = "=" * 60
        self.stdout.write(
            f"{bar}\nFirst admin account created (shown only this once):\n"
            f"  username: {username}\n  password: {password}\n"
            f"Log in at {url} (admin at {url.rstrip('/')}/admin/).\n{bar}"
        )
