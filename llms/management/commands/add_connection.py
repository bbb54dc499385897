"""``manage.py add_connection --name N --base-url URL [--api-key-env VAR] [--model ID ...|--all]
[--default ID]``: the admin's "Add a connection", scripted (:mod:`llms.connection_setup`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApplicationError
from llms.connection_setup import (
    FETCH_TIMEOUT,
    connection_add,
    connection_kinds,
    endpoint_models_fetch,
)
from llms.management.environment import api_key_from_environment


class Command(BaseCommand):
    help = (
        "Connect an OpenAI-compatible endpoint: fetch its model list, add the chosen models "
        "(or --all), probe each and apply its verified abilities, optionally make one the "
        "default. Without --model or --all it only lists the endpoint's models."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="the provider's name")
        parser.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1")
        parser.add_argument(
            "--api-key-env", metavar="VAR", help="read the API key from this environment variable"
        )
        parser.add_argument(
            "--kind",
            default="openai",
            choices=[kind for kind, _label in connection_kinds()],
            help="default: openai",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--model", action="append", metavar="ID", help="a model to add (repeatable)"
        )
        which.add_argument("--all", action="store_true", help="add every listed chat model")
        parser.add_argument("--default", metavar="ID", help="make this added model the default")
        parser.add_argument("--timeout", type=float, help="probe: seconds per check (default 60)")
        parser.add_argument(
            "--fetch-timeout", type=float, default=FETCH_TIMEOUT, help="model list: seconds"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        api_key = api_key_from_environment(options["api_key_env"])
        if not options["model"] and not options["all"]:
            self._list(options, api_key)
            return
        self.stdout.write("Fetching the model list, then probing each model (up to a minute each)…")
        try:
            added = connection_add(
                name=options["name"],
                base_url=options["base_url"],
                api_key=api_key,
                kind=options["kind"],
                model_ids=None if options["all"] else options["model"],
                default=options["default"],
                probe_timeout=options["timeout"],
                fetch_timeout=options["fetch_timeout"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        for line in added.lines():
            self.stdout.write(line)
        if added.failed:
            raise CommandError(f"{added.failed} model(s) did not answer a plain chat")

    def _list(self, options: dict[str, Any], api_key: str | None) -> None:
        try:
            models = endpoint_models_fetch(
                base_url=options["base_url"], api_key=api_key, timeout=options["fetch_timeout"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{options['base_url']} lists {len(models)} chat model(s):")
        for model_id in models:
            self.stdout.write(f"  {model_id}")
        self.stdout.write("Add some with --model ID (repeatable) or --all; nothing was changed.")
