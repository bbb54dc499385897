"""A chat's own settings (issue 46): its system prompt, its sampling parameters within
what the admin allows for its model, and the tools offered in it.

Parameters are checked against the model the chat uses when they are set (a 400 naming
the field and the allowed range), and clamped into that model's range again when a run
starts: the admin may have narrowed it, or the chat moved to another model, since.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from conversations.models import Conversation
from core.errors import ApplicationError
from llms.models import LLMModel
from llms.selectors import default_model_for_user
from tools.services import tools_available_for_user

__all__ = [
    "PARAMS",
    "ParamRange",
    "conversation_set_params",
    "conversation_set_system_prompt",
    "conversation_set_tools",
    "effective_params",
    "effective_params_of",
    "params_clean",
    "param_from_form",
    "param_ranges",
    "tool_choices",
    "tools_clean",
]

PARAMS = ("temperature", "top_p", "max_tokens")
SYSTEM_PROMPT_MAX_CHARS = 20_000
# A model row that says nothing of its output limit still bounds a chat's max_tokens.
MAX_TOKENS_CEILING = 131_072


@dataclass(frozen=True)
class ParamRange:
    low: float
    high: float
    integer: bool = False

    def bounds(self) -> tuple[str, str]:
        """The lowest and highest value as a refusal writes them."""
        if self.integer:
            return f"{int(self.low):,}", f"{int(self.high):,}"
        return f"{self.low:g}", f"{self.high:g}"

    def clamp(self, value: float) -> float | int:
        clamped = min(max(value, self.low), self.high)
        return int(clamped) if self.integer else clamped


def param_ranges(model: LLMModel | None) -> dict[str, ParamRange]:
    """What a chat may set with ``model`` (the site's defaults without one)."""
    if model is None:
        return {
            "temperature": ParamRange(0.0, 2.0),
            "top_p": ParamRange(0.0, 1.0),
            "max_tokens": ParamRange(1, MAX_TOKENS_CEILING, integer=True),
        }
    return {
        "temperature": ParamRange(model.temperature_min, model.temperature_max),
        "top_p": ParamRange(model.top_p_min, model.top_p_max),
        "max_tokens": ParamRange(1, model.max_output_tokens or MAX_TOKENS_CEILING, integer=True),
    }


def _refuse(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, extra={field: [message]})


def params_clean(params: Mapping[str, Any], model: LLMModel | None) -> dict[str, float | int]:
    """``params`` checked for ``model``: known names, numbers, each in its range."""
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise _refuse(
            "params",
            _("Unknown parameter %(names)s: a chat sets temperature, top_p and max_tokens.")
            % {"names": ", ".join(unknown)},
        )
    ranges = param_ranges(model)
    cleaned: dict[str, float | int] = {}
    for name in PARAMS:
        value = params.get(name)
        if value is None:
            continue
        allowed = ranges[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _refuse(f"params.{name}", _not_a_number(name, integer=allowed.integer))
        if allowed.integer and not float(value).is_integer():
            raise _refuse(f"params.{name}", _not_a_number(name, integer=True))
        if not allowed.low <= value <= allowed.high:
            low, high = allowed.bounds()
            values = {"name": name, "low": low, "high": high, "value": f"{value:g}"}
            if model is None:
                message = _("%(name)s must be between %(low)s and %(high)s (got %(value)s).")
            else:
                values["model"] = str(model)
                message = _(
                    "%(name)s must be between %(low)s and %(high)s for %(model)s (got %(value)s)."
                )
            raise _refuse(f"params.{name}", message % values)
        cleaned[name] = int(value) if allowed.integer else float(value)
    return cleaned


def _not_a_number(name: str, *, integer: bool) -> str:
    """The refusal of a parameter that is not a number (``name`` stays as the API spells it)."""
    if integer:
        return _("%(name)s must be a whole number.") % {"name": name}
    return _("%(name)s must be a number.") % {"name": name}


def _model_of(conversation: Conversation, user: Any) -> LLMModel | None:
    return conversation.model or default_model_for_user(user=user)


def conversation_set_params(
    *, conversation: Conversation, user: Any, params: Mapping[str, Any]
) -> Conversation:
    """Merge ``params`` into the chat's (``None`` takes one back to the model's own), each
    checked against the range of the model the chat uses."""
    merged = {**conversation.params, **params}
    cleaned = params_clean(
        {k: v for k, v in merged.items() if v is not None}, _model_of(conversation, user)
    )
    conversation.params = cleaned
    conversation.save(update_fields=["params", "updated_at"])
    return conversation


def effective_params(conversation: Conversation, model: LLMModel) -> dict[str, float | int]:
    """The chat's parameters as a run sends them: clamped into ``model``'s range now."""
    return effective_params_of(conversation.params, model)


def effective_params_of(
    params: Mapping[str, Any] | None, model: LLMModel | None
) -> dict[str, float | int]:
    """``params`` clamped into ``model``'s range (values of other names dropped)."""
    ranges = param_ranges(model)
    out: dict[str, float | int] = {}
    for name, value in (params or {}).items():
        if name in ranges and isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = ranges[name].clamp(value)
    return out


def tool_choices(user: Any) -> list[dict[str, Any]]:
    """The tools ``user`` may enable in a chat (name, description, server)."""
    return tools_available_for_user(user=user)


def tools_clean(user: Any, tools: Iterable[str] | None) -> list[str] | None:
    """``tools`` without repeats, each one ``user`` may use (``None`` stays: every tool)."""
    if tools is None:
        return None
    names = list(dict.fromkeys(tools))
    allowed = {tool["name"] for tool in tool_choices(user)}
    refused = [name for name in names if name not in allowed]
    if refused:
        choices = ", ".join(sorted(allowed)) or _("none")
        raise _refuse(
            "tools",
            _("Not a tool you may use: %(refused)s. Choose from: %(choices)s.")
            % {"refused": ", ".join(refused), "choices": choices},
        )
    return names


def param_from_form(name: str, raw: str) -> float | int | None:
    """A parameter as a form field sends it: blank is the model's own (``None``)."""
    text = raw.strip()
    if not text:
        return None
    try:
        return int(text) if name == "max_tokens" else float(text)
    except ValueError:
        raise _refuse(f"params.{name}", _not_a_number(name, integer=name == "max_tokens")) from None


def conversation_set_tools(
    *, conversation: Conversation, user: Any, tools: Iterable[str] | None
) -> Conversation:
    """Offer only ``tools`` in this chat (``None``: every tool the user may use)."""
    conversation.tools = tools_clean(user, tools)
    conversation.save(update_fields=["tools", "updated_at"])
    return conversation


def conversation_set_system_prompt(
    *, conversation: Conversation, system_prompt: str
) -> Conversation:
    text = system_prompt.strip()
    if len(text) > SYSTEM_PROMPT_MAX_CHARS:
        raise _refuse(
            "system_prompt",
            _("A system prompt has at most %(limit)s characters (this one has %(count)s).")
            % {"limit": f"{SYSTEM_PROMPT_MAX_CHARS:,}", "count": f"{len(text):,}"},
        )
    conversation.system_prompt = text
    conversation.save(update_fields=["system_prompt", "updated_at"])
    return conversation
