"""``manage.py add_provider --name NAME --base-url URL [--api-key KEY]``: idempotent."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApplicationError
from llms.providers import PROVIDER_KINDS
from llms.services import provider_upsert


class Command(BaseCommand):
    help = (
        "Create or update an LLM provider by name. Re-running updates the given options and "
        "keeps the others (an omitted --api-key keeps the stored key; --api-key '' clears it)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--base-url", help="e.g. https://api.openai.com/v1 (required to create)"
        )
        parser.add_argument("--api-key", help="stored encrypted; prefer --api-key-env in scripts")
        parser.add_argument(
            "--api-key-env", metavar="VAR", help="read the API key from this environment variable"
        )
        parser.add_argument("--kind", choices=sorted(PROVIDER_KINDS), help="default: openai")
        parser.add_argument("--timeout", type=float, help="request timeout in seconds")
        parser.add_argument(
            "--header",
            action="append",
            metavar="NAME=VALUE",
            help="extra HTTP header (repeatable; replaces all stored headers; values encrypted)",
        )

    def handle(self, *args: object, **options: object) -> None:
        api_key = options["api_key"]
        if options["api_key_env"]:
            api_key = os.environ.get(str(options["api_key_env"]))
            if api_key is None:
                raise CommandError(f"environment variable {options['api_key_env']} is not set")
        headers = None
        if options["header"] is not None:
            headers = {}
            for item in options["header"]:  # type: ignore[union-attr]
                name, sep, value = str(item).partition("=")
                if not sep or not name.strip():
                    raise CommandError(f"--header expects NAME=VALUE, got {item!r}")
                headers[name.strip()] = value.strip()
        try:
            provider, created = provider_upsert(
                name=str(options["name"]),
                base_url=options["base_url"],  # type: ignore[arg-type]
                kind=options["kind"],  # type: ignore[arg-type]
                api_key=api_key,  # type: ignore[arg-type]
                extra_headers=headers,
                timeout=options["timeout"],  # type: ignore[arg-type]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        verb = "Created" if created else "Updated"
        self.stdout.write(
            f"{verb} provider {provider.name!r} ({provider.kind}, {provider.base_url}). "
            f"{provider.api_key_hint}"
        )
