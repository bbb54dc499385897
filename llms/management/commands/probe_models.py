"""``manage.py probe_models [--model ID|--all] [--apply]``: the admin's probe, scripted."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from core.errors import ApplicationError
from llms.models import LLMModel
from llms.probe import CHECKS
from llms.services import model_apply_verified_abilities, model_probe


class Command(BaseCommand):
    help = "Probe models' live endpoints, store the verified abilities, optionally apply them."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--model", help="primary key or API model id")
        which.add_argument("--all", action="store_true", help="every enabled model")
        parser.add_argument(
            "--apply", action="store_true", help="copy verified abilities over the declared ones"
        )
        parser.add_argument("--timeout", type=float, help="seconds per check (default 60)")

    def handle(self, *args: Any, **options: Any) -> None:
        models = LLMModel.objects.select_related("provider")
        if options["all"]:
            models = models.filter(enabled=True)
        else:
            ident = str(options["model"])
            query = Q(model_id=ident) | (Q(pk=int(ident)) if ident.isdigit() else Q())
            models = models.filter(query)
        models = list(models)
        if not models:
            raise CommandError("no matching model")
        unreachable = 0
        for model in models:
            report = model_probe(model=model, timeout=options["timeout"])
            self.stdout.write(report.summary())
            for name, check in report.checks.items():
                mark = "ok  " if check.ok else "FAIL"
                latency = f" {check.latency_ms} ms" if check.latency_ms is not None else ""
                self.stdout.write(f"  {mark} {CHECKS[name]}{latency}: {check.detail}")
            if not report.reachable:
                unreachable += 1
            if options["apply"]:
                try:
                    abilities = model_apply_verified_abilities(model=model)
                except ApplicationError as exc:
                    self.stdout.write(f"  not applied: {exc.message}")
                else:
                    on = ", ".join(k for k, v in abilities.items() if v is True) or "none"
                    self.stdout.write(f"  applied; declared abilities now: {on}")
        if unreachable:
            raise CommandError(f"{unreachable} model(s) did not answer a plain chat")
