"""``manage.py create_api_token USERNAME [--name N]``: a personal API token for scripts.

The token is printed alone on the last line (``TOKEN=$(... | tail -n1)``); only its hash
is stored, so this is the one time it can be read.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.http.tokens import token_create
from core.errors import ApplicationError


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it (alone on the last line)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label shown on the tokens page.")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
        except user_model.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; its tokens would not work.")
        try:
            token, raw = token_create(user=user, name=name or "created by manage.py")
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(
            f"API token {token.name!r} ({token.prefix}…) created for {username}. "
            "It is shown only now; send it as 'Authorization: Bearer <token>'."
        )
        self.stdout.write(raw)
