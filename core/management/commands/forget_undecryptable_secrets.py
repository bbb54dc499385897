"""``manage.py forget_undecryptable_secrets``: empty the stored secrets no key decrypts.

For a key that is lost for good: the providers, tools and MCP servers keep their other
settings, and an admin enters their secrets again. With the key at hand, set it instead
(``ENCRYPTION_KEYS``, or ``SECRET_KEY`` when the key derives from it): nothing is lost.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core.crypto import reset_cache
from core.keys import forget_undecryptable, undecryptable_secrets


class Command(BaseCommand):
    help = "Empty every stored secret that no configured key decrypts (to enter it again)."
    # The check this command answers (agentsite.E003) would refuse to run it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="only list the secrets that would be emptied"
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        reset_cache()  # the keys configured now
        found = undecryptable_secrets() if dry_run else forget_undecryptable()
        verb = "would empty" if dry_run else "emptied"
        for item in found:
            self.stdout.write(f"{verb} {item}")
        if not found:
            self.stdout.write("every stored secret decrypts with the configured keys")
        elif not dry_run:
            self.stdout.write(
                f"{len(found)} secret(s) emptied: enter them again in the admin "
                "(LLM providers, tool settings, MCP servers)."
            )
