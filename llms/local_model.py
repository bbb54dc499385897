"""The bundled offline model as a provider row: seeding it and verifying what it can do.

``manage.py seed_models`` calls :func:`local_model_seed` on a fresh site without an API key:
it creates provider ``local`` (kind ``local``) and model ``SmolLM2`` as the default, starts
the server, runs the capability probe (:mod:`llms.probe`) plus a schema-constrained
output check the generic probe does not make, and applies the verified abilities.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import jsonschema
from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from engine import LLM, ChatMessage, LLMError, OpenAICompatibleLLM
from llms.local_server import DEFAULT_MODEL_ALIAS, config_from_settings, get_server
from llms.models import LLMModel
from llms.probe import PROBE_TIMEOUT, ProbeCheck, ProbeReport, build_probe_llm, probe_llm
from llms.providers.local import DEFAULT_MAX_TOKENS, PLACEHOLDER_BASE_URL
from llms.services import (
    model_apply_verified_abilities,
    model_probe_store,
    model_upsert,
    provider_upsert,
)

__all__ = [
    "JSON_SCHEMA_CHECK",
    "JSON_SCHEMA_DIALECT",
    "LOCAL_MODEL_ID",
    "LOCAL_PROVIDER_NAME",
    "check_json_schema",
    "local_model_probe",
    "local_model_seed",
]

LOCAL_PROVIDER_NAME = "local"
LOCAL_MODEL_ID = DEFAULT_MODEL_ALIAS
LOCAL_DISPLAY_NAME = "SmolLM2 135M (offline demo)"
# llama.cpp's server reads ``{"type": "json_object", "schema": ...}``.
JSON_SCHEMA_DIALECT = "llamacpp"
JSON_SCHEMA_CHECK = "json_schema"
PROBE_MAX_TOKENS = 128
JSON_SCHEMA_PROMPT = (
    "Probe: JSON schema. Reply with a JSON object naming a European capital and its country."
)
JSON_SCHEMA_PROBE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Madrid"]},
        "country": {"type": "string"},
    },
    "required": ["city", "country"],
}
# Until probed: what llama.cpp's server offers this model (JSON mode with a schema).
SEED_ABILITIES: dict[str, Any] = {
    "tool_call": False,
    "tool_choice": False,
    "json_mode": True,
    "json_schema": True,
    "json_schema_dialect": JSON_SCHEMA_DIALECT,
    "streaming": True,
    "vision": False,
}


async def check_json_schema(
    llm: LLM, *, dialect: str = JSON_SCHEMA_DIALECT, max_tokens: int = 64
) -> ProbeCheck:
    """Does ``response_format`` in ``dialect`` constrain the reply to a schema (enum kept)?"""
    if dialect == "llamacpp":
        response_format = {"type": "json_object", "schema": JSON_SCHEMA_PROBE}
    else:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": "capital", "schema": JSON_SCHEMA_PROBE},
        }
    started = time.perf_counter()
    try:
        response = await llm.chat(
            [ChatMessage("user", JSON_SCHEMA_PROMPT)],
            response_format=response_format,
            max_tokens=max_tokens,
        )
        value = json.loads(response.content)
        jsonschema.validate(value, JSON_SCHEMA_PROBE)
    except LLMError as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc.message}"
    except ValueError as exc:
        ok, detail = False, f"not valid JSON: {exc}"
    except jsonschema.ValidationError as exc:
        ok, detail = False, f"valid JSON that breaks the schema: {exc.message}"
    else:
        ok, detail = True, f"{dialect} schema honoured: {json.dumps(value)[:120]}"
    latency = round((time.perf_counter() - started) * 1000)
    return ProbeCheck(JSON_SCHEMA_CHECK, ok, detail, latency)


async def local_model_probe(llm: LLM, *, label: str, timeout: float = PROBE_TIMEOUT) -> ProbeReport:
    """The generic probe plus the schema check, in one report."""
    report = await probe_llm(llm, label=label, timeout=timeout)
    report.checks[JSON_SCHEMA_CHECK] = await check_json_schema(llm)
    return report


def abilities_from_report(report: ProbeReport) -> dict[str, Any]:
    """Verified abilities, read for how the agent will use them.

    ``tool_call`` means the native agent loop works, and that loop sends
    ``tool_choice="auto"``: a model that calls a tool only when forced (llama.cpp's
    chatml-function-calling grammar does that for any model) runs better in JSON mode
    with schema-constrained actions.
    """
    return {
        **report.verified_abilities,
        "tool_call": report.ok("tool_call_auto"),
        "json_schema": report.ok(JSON_SCHEMA_CHECK),
    }


def local_model_seed(*, timeout: float = PROBE_TIMEOUT) -> tuple[LLMModel, ProbeReport]:
    """Create provider ``local`` + default model ``SmolLM2``, probe it, apply the verdicts.

    Starts the local model server (it is stopped when this process exits unless another
    process shares it). Raises :class:`llms.local_server.LocalModelError` if it cannot
    be served.
    """
    config = config_from_settings()
    get_server().ensure()  # fails before any row exists when the model cannot be served
    with transaction.atomic():
        provider, _ = provider_upsert(
            name=LOCAL_PROVIDER_NAME, kind="local", base_url=PLACEHOLDER_BASE_URL, timeout=300
        )
        model, _ = model_upsert(
            provider=provider,
            model_id=LOCAL_MODEL_ID,
            display_name=LOCAL_DISPLAY_NAME,
            abilities=SEED_ABILITIES,
            context_window=config.n_ctx,
            max_output_tokens=DEFAULT_MAX_TOKENS,
            small=True,
            is_default=True,
        )
    report = async_to_sync(_probe)(model, timeout)
    model_probe_store(model=model, report=report)
    verified = abilities_from_report(report)
    model.verified_abilities = verified
    model.save(update_fields=["verified_abilities", "updated_at"])
    if report.reachable:
        model_apply_verified_abilities(model=model)
        model.abilities = {**model.abilities, "json_schema_dialect": JSON_SCHEMA_DIALECT}
        model.save(update_fields=["abilities", "updated_at"])
    return model, report


async def _probe(model: LLMModel, timeout: float) -> ProbeReport:
    llm, _, label = await sync_to_async(build_probe_llm)(model, timeout)
    if isinstance(llm, OpenAICompatibleLLM):
        # Short replies tell what the model can do; a rambling 1,024 tokens only takes time.
        llm.default_params["max_tokens"] = PROBE_MAX_TOKENS
    try:
        return await local_model_probe(llm, label=label, timeout=timeout)
    finally:
        with contextlib.suppress(Exception):
            await llm.aclose()  # type: ignore[attr-defined]
