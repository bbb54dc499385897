"""``manage.py add_model --provider NAME --model MODEL_ID [...]``: idempotent."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApplicationError
from llms.models import ABILITY_FLAGS, ROLES, Provider
from llms.services import model_upsert


def parse_abilities(text: str) -> dict[str, bool]:
    """``tool_call,json_mode,streaming`` -> every flag, listed ones true.

    ``tool_choice`` (forced tool calls) follows ``tool_call`` unless given explicitly;
    ``no-<flag>`` turns a flag off, e.g. ``tool_call,no-tool_choice`` for thinking models.
    """
    items = [item.strip() for item in text.split(",") if item.strip()]
    on = {item for item in items if not item.startswith("no-")}
    off = {item[3:] for item in items if item.startswith("no-")}
    unknown = sorted((on | off) - set(ABILITY_FLAGS))
    if unknown:
        raise CommandError(
            f"unknown abilities: {', '.join(unknown)} (known: {', '.join(ABILITY_FLAGS)})"
        )
    abilities = {flag: flag in on for flag in ABILITY_FLAGS}
    if "tool_choice" not in on and "tool_choice" not in off:
        abilities["tool_choice"] = abilities["tool_call"]
    return abilities


def parse_roles(text: str) -> list[str]:
    roles = [item.strip() for item in text.split(",") if item.strip()]
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise CommandError(f"unknown roles: {', '.join(unknown)} (known: {', '.join(ROLES)})")
    return roles


class Command(BaseCommand):
    help = (
        "Create or update a model of a provider. Re-running updates the given options and "
        "keeps the others."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", required=True, help="provider name (see add_provider)")
        parser.add_argument("--model", required=True, help="the API model id, e.g. gpt-4o-mini")
        parser.add_argument(
            "--abilities",
            help=f"comma-separated, from: {', '.join(ABILITY_FLAGS)} (unlisted = off; "
            "tool_choice follows tool_call unless listed or given as no-tool_choice)",
        )
        parser.add_argument("--context-window", type=int, help="in tokens")
        parser.add_argument("--max-output-tokens", type=int, help="in tokens")
        parser.add_argument("--display-name")
        parser.add_argument("--roles", help=f"comma-separated, from: {', '.join(ROLES)}")
        parser.add_argument("--default", action="store_true", help="make it the default model")
        state = parser.add_mutually_exclusive_group()
        state.add_argument("--enable", dest="enabled", action="store_true", default=None)
        state.add_argument("--disable", dest="enabled", action="store_false")

    def handle(self, *args: Any, **options: Any) -> None:
        provider = Provider.objects.filter(name=options["provider"]).first()
        if provider is None:
            raise CommandError(
                f"no provider named {options['provider']!r}; create it with add_provider"
            )
        abilities = options["abilities"]
        roles = options["roles"]
        try:
            model, created = model_upsert(
                provider=provider,
                model_id=options["model"],
                display_name=options["display_name"],
                abilities=parse_abilities(abilities) if abilities is not None else None,
                context_window=options["context_window"],
                max_output_tokens=options["max_output_tokens"],
                roles=parse_roles(roles) if roles is not None else None,
                enabled=options["enabled"],
                is_default=options["default"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        on = [flag for flag in ABILITY_FLAGS if model.abilities.get(flag) is True]
        self.stdout.write(
            f"{'Created' if created else 'Updated'} model {model.model_id!r} of {provider.name!r} "
            f"(id {model.pk}{', default' if model.is_default else ''}; "
            f"abilities: {', '.join(on) or 'none'})."
        )
