"""Capability probe: ask the live endpoint what it really does, instead of trusting labels.

Each check is one small request, run one after another (local servers often serve one
request at a time, which would skew latencies) and independently: a failing or hanging
check is recorded and the next one still runs. Checks:

- ``chat``: a plain completion answers with text (its latency is the model's latency);
- ``streaming``: ``stream=true`` yields content chunks;
- ``usage``: the plain reply reported token usage (else the engine estimates it);
- ``tool_call_forced``: a forced ``tool_choice`` returns a native call of that tool; an
  HTTP 400 here is typical of "thinking" models and means ``tool_choice: false``;
- ``tool_call_auto``: ``tool_choice="auto"`` on a prompt that needs the tool returns a call;
- ``json_mode``: ``response_format={"type": "json_object"}`` returns a valid JSON object;
- ``vision``: a 16x16 red PNG, then a blue one, as image parts, asking their colour, are
  answered "red" and "blue" (one colour could be a blind guess; both hardly are).

Verified abilities: ``tool_call`` = the auto check (the agent's native mode relies on
``tool_choice="auto"``; a model that only obeys forced calls, like the bundled SmolLM2,
stays in JSON mode), ``tool_choice`` = the forced one,
``json_mode``, ``streaming``, ``vision``. ``json_schema`` is not probed and never
overwritten. Secrets (API key, header values) are redacted from every detail and log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.debug import sensitive_variables

from engine import LLM, BadRequestError, ChatMessage, ChatResponse, LLMError
from engine.llm.openai import OpenAICompatibleLLM
from llms.providers import get_backend

if TYPE_CHECKING:
    from llms.models import LLMModel

__all__ = [
    "CHECKS",
    "PROMPTS",
    "PROBE_TIMEOUT",
    "ProbeCheck",
    "ProbeReport",
    "build_probe_llm",
    "probe_llm",
    "probe_model",
    "probe_summary",
]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 60.0
MAX_DETAIL_CHARS = 300

# label per check, in run order (``usage`` reads the ``chat`` reply: no request of its own)
CHECKS: dict[str, Any] = {
    "chat": gettext_lazy("Plain chat"),
    "streaming": gettext_lazy("Streaming"),
    "usage": gettext_lazy("Usage reported"),
    "tool_call_forced": gettext_lazy("Tool call (forced tool_choice)"),
    "tool_call_auto": gettext_lazy("Tool call (auto)"),
    "json_mode": gettext_lazy("JSON mode"),
    "vision": gettext_lazy("Vision (an image)"),
}
# Distinct phrases per check, so a scripted server can answer each by a ``contains`` rule.
PROMPTS: dict[str, str] = {
    "chat": "Probe: plain chat. Reply with the single word: pong",
    "streaming": "Probe: streaming. Count from 1 to 10, separated by spaces.",
    "tool_call_forced": "Probe: forced tool call. Look up the current weather in Paris.",
    "tool_call_auto": (
        "Probe: automatic tool call. What is the weather in Paris right now? "
        "Use the get_weather tool to find out."
    ),
    "json_mode": (
        "Probe: JSON mode. Reply with a JSON object of the form "
        '{"city": "Paris", "country": "France"} and nothing else.'
    ),
    "vision": "Probe: vision. What colour is this image? Reply with the single word.",
}
# 16x16 solid squares: any model that sees images names their colours.
SQUARES_PNG = {
    "red": (
        "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAFklEQVR42mP4z8BAEmIY1TCqYfhqAACQ+f8B8u7o"
        "VwAAAABJRU5ErkJggg=="
    ),
    "blue": (
        "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAFUlEQVR42mNgYPhPIhrVMKph2GoAAJLb/wHQPqPS"
        "AAAAAElFTkSuQmCC"
    ),
}
PROBE_TOOL_NAME = "get_weather"
PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}


@dataclass
class ProbeCheck:
    name: str
    ok: bool
    detail: str
    latency_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, "latency_ms": self.latency_ms}


@dataclass
class ProbeReport:
    """What one probe found; ``to_dict()`` is what ``LLMModel.probe_report`` stores."""

    model: str
    checks: dict[str, ProbeCheck] = field(default_factory=dict)
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    finished_at: dt.datetime | None = None

    def ok(self, name: str) -> bool:
        check = self.checks.get(name)
        return bool(check and check.ok)

    @property
    def reachable(self) -> bool:
        """The endpoint answered a plain chat: the other results mean something."""
        return self.ok("chat")

    @property
    def latency_ms(self) -> int | None:
        check = self.checks.get("chat")
        return check.latency_ms if check and check.ok else None

    @property
    def verified_abilities(self) -> dict[str, bool]:
        return {
            "tool_call": self.ok("tool_call_auto"),
            "tool_choice": self.ok("tool_call_forced"),
            "json_mode": self.ok("json_mode"),
            "streaming": self.ok("streaming"),
            "vision": self.ok("vision"),
        }

    @property
    def passed(self) -> int:
        return sum(1 for check in self.checks.values() if check.ok)

    def summary(self) -> str:
        if not self.reachable:
            detail = self.checks["chat"].detail if "chat" in self.checks else _("not run")
            return _("%(model)s: the endpoint did not answer a plain chat (%(detail)s).") % {
                "model": self.model,
                "detail": detail,
            }
        flags = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in self.verified_abilities.items())
        return _(
            "%(model)s: %(passed)d/%(total)d checks passed, latency %(latency)s ms; "
            "verified %(flags)s."
        ) % {
            "model": self.model,
            "passed": self.passed,
            "total": len(self.checks),
            "latency": self.latency_ms,
            "flags": flags,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "latency_ms": self.latency_ms,
            "reachable": self.reachable,
            "checks": {name: check.to_dict() for name, check in self.checks.items()},
            "verified_abilities": self.verified_abilities,
        }


# Short names of the verified abilities, for probe_summary (ProbeReport.verified_abilities).
ABILITY_SHORT_LABELS: dict[str, Any] = {
    "tool_call": gettext_lazy("tool calls"),
    "tool_choice": gettext_lazy("forced tool choice"),
    "json_mode": gettext_lazy("JSON mode"),
    "streaming": gettext_lazy("streaming"),
    "vision": gettext_lazy("vision"),
}


def probe_summary(model: LLMModel) -> str:
    """One line on a model's last probe, for admins choosing models (lists, role picks).

    Read from the stored report only: no request, no query.
    """
    report = model.probe_report if isinstance(model.probe_report, dict) else {}
    if not model.probed_at or not report:
        return _("Not probed")
    when = timezone.localtime(model.probed_at).strftime("%Y-%m-%d %H:%M")
    if not report.get("reachable"):
        return _("Unreachable (probed %(when)s)") % {"when": when}
    checks = report.get("checks") if isinstance(report.get("checks"), dict) else {}
    passed = sum(1 for check in checks.values() if isinstance(check, dict) and check.get("ok"))
    verified = report.get("verified_abilities") or model.verified_abilities
    verified = verified if isinstance(verified, dict) else {}
    abilities = [str(label) for name, label in ABILITY_SHORT_LABELS.items() if verified.get(name)]
    figures = {
        "passed": passed,
        "total": len(checks),
        "abilities": ", ".join(abilities) or _("plain chat only"),
        "latency": report.get("latency_ms"),
        "when": when,
    }
    if figures["latency"] is not None:
        return (
            _(
                "%(passed)d/%(total)d checks passed (%(abilities)s), latency %(latency)s ms; "
                "probed %(when)s"
            )
            % figures
        )
    return _("%(passed)d/%(total)d checks passed (%(abilities)s); probed %(when)s") % figures


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def _user(check: str) -> list[ChatMessage]:
    return [ChatMessage("user", PROMPTS[check])]


def _tool_call_detail(response: ChatResponse) -> tuple[bool, str]:
    calls = [c for c in response.tool_calls if c.name == PROBE_TOOL_NAME]
    if calls:
        return True, f"called {PROBE_TOOL_NAME}({json.dumps(calls[0].arguments)})"
    if response.tool_calls:
        names = ", ".join(c.name for c in response.tool_calls)
        return False, f"called unexpected tool(s): {names}"
    return False, f"answered in text instead of calling the tool: {response.content!r}"


@sensitive_variables("secrets")
async def probe_llm(
    llm: LLM, *, label: str = "model", secrets: Iterable[str] = (), timeout: float = PROBE_TIMEOUT
) -> ProbeReport:
    """Run every check against ``llm`` (any engine LLM) and return the report."""
    secrets = [s for s in secrets if s]
    report = ProbeReport(model=label)
    replies: dict[str, ChatResponse] = {}

    async def chat() -> tuple[bool, str]:
        response = await llm.chat(_user("chat"))
        replies["chat"] = response
        text = response.content.strip()
        return bool(text), (f"answered {text!r}" if text else "answered with empty content")

    async def streaming() -> tuple[bool, str]:
        chunks, text, first_ms, usage = 0, "", None, None
        started = time.perf_counter()
        async with contextlib.aclosing(llm.stream_chat(_user("streaming"))) as stream:
            async for delta in stream:
                if delta.content:
                    chunks += 1
                    text += delta.content
                    if first_ms is None:
                        first_ms = round((time.perf_counter() - started) * 1000)
                usage = delta.usage or usage
        if not text.strip():
            return False, "the stream carried no content"
        detail = f"{chunks} content chunk(s), first after {first_ms} ms"
        if chunks == 1:
            detail += " (the reply came in one piece: the server may not really stream)"
        if usage is not None and not usage.estimated:
            detail += "; usage reported in the stream"
        return True, detail

    async def usage() -> tuple[bool, str]:
        response = replies.get("chat")
        if response is None:
            return False, "no plain-chat reply to read usage from"
        reported = response.usage
        if reported.estimated or not reported.total_tokens:
            return False, "the server reported no token usage (the site will estimate it)"
        return True, (
            f"{reported.prompt_tokens} prompt + {reported.completion_tokens} completion tokens"
        )

    async def tool_call_forced() -> tuple[bool, str]:
        forced = {"type": "function", "function": {"name": PROBE_TOOL_NAME}}
        try:
            response = await llm.chat(
                _user("tool_call_forced"), tools=[PROBE_TOOL], tool_choice=forced
            )
        except BadRequestError as exc:
            return False, f"the server rejected a forced tool_choice: {exc.message}"
        return _tool_call_detail(response)

    async def tool_call_auto() -> tuple[bool, str]:
        response = await llm.chat(_user("tool_call_auto"), tools=[PROBE_TOOL], tool_choice="auto")
        return _tool_call_detail(response)

    async def json_mode() -> tuple[bool, str]:
        response = await llm.chat(_user("json_mode"), response_format={"type": "json_object"})
        try:
            value = json.loads(response.content.strip())
        except ValueError:
            return False, f"not valid JSON: {response.content!r}"
        if not isinstance(value, dict):
            return False, f"valid JSON but not an object: {response.content!r}"
        return True, f"valid JSON object with keys {sorted(value)}"

    async def vision() -> tuple[bool, str]:
        answers = []
        for colour, data in SQUARES_PNG.items():
            image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
            question = [{"type": "text", "text": PROMPTS["vision"]}, image]
            try:
                response = await llm.chat([ChatMessage("user", question)])
            except BadRequestError as exc:
                return False, f"the server refused an image: {exc.message}"
            answer = response.content.strip()
            answers.append(repr(answer))
            if colour not in answer.lower():
                return False, f"did not see the {colour} image (answered {answer!r})"
        return True, f"named both images' colours: {', '.join(answers)}"

    runners: dict[str, Callable[[], Awaitable[tuple[bool, str]]]] = {
        "chat": chat,
        "streaming": streaming,
        "usage": usage,
        "tool_call_forced": tool_call_forced,
        "tool_call_auto": tool_call_auto,
        "json_mode": json_mode,
        "vision": vision,
    }
    for name, runner in runners.items():
        started = time.perf_counter()
        try:
            ok, detail = await asyncio.wait_for(runner(), timeout)
        except TimeoutError:
            ok, detail = False, f"no answer within {timeout:g} s"
        except LLMError as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc.message}"
        except Exception as exc:  # noqa: BLE001 - a probe records every failure, never raises
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        latency = None if name == "usage" else round((time.perf_counter() - started) * 1000)
        check = ProbeCheck(name, ok, _clip(_redact(detail, secrets)), latency)
        report.checks[name] = check
        if not ok:
            logger.info("probe %s: %s failed: %s", label, name, check.detail)
    report.finished_at = dt.datetime.now(dt.UTC)
    logger.info("probe %s", report.summary())
    return report


@sensitive_variables("api_key", "secrets")
def build_probe_llm(model: LLMModel, timeout: float) -> tuple[LLM, list[str], str]:
    """The row's LLM without retries, the secrets to redact, and a label for reports."""
    provider = model.provider
    llm = get_backend(provider.kind).build_llm(provider, model, max_retries=0)
    if isinstance(llm, OpenAICompatibleLLM):
        llm.timeout = min(float(provider.timeout), timeout)
    secrets = [provider.api_key, *provider.extra_headers.values()]
    return llm, secrets, f"{model} ({provider.name})"


@sensitive_variables("target", "api_key", "secrets")
async def probe_model(
    target: LLMModel | tuple[str, str | None, str],
    *,
    extra_headers: dict[str, str] | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> ProbeReport:
    """Probe a model row, or ``(base_url, api_key, model_id)`` before any row exists.

    Retries are off: a probe reports what one request does. Storing the result is the
    caller's business (:func:`llms.services.model_probe` does both).
    """
    if isinstance(target, tuple):
        base_url, api_key, model_id = target
        llm: LLM = OpenAICompatibleLLM(
            base_url, api_key, model_id, timeout=timeout, max_retries=0, extra_headers=extra_headers
        )
        secrets = [api_key or "", *(extra_headers or {}).values()]
        label = model_id
    else:
        llm, secrets, label = await sync_to_async(build_probe_llm)(target, timeout)
    try:
        return await probe_llm(llm, label=label, secrets=secrets, timeout=timeout)
    finally:
        aclose = getattr(llm, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
