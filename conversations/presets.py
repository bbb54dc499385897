"""Presets (issue 46): a chat's set-up to reuse and share. Reads and writes of presets,
and a conversation started from one.

A user sees their own presets, those shared with a group of theirs and those an admin
made for everyone (no owner); only the owner changes one (the admin changes any in the
admin). A preset is checked against its owner's rights when saved, and against the
rights of whoever starts a chat with it: a model or a tool that user may not use is
refused, saying which, never dropped or widened; of its knowledge bases, those the user
may not read are left out (they would only narrow what the agent searches).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from conversations import chat_settings
from conversations.models import AgentMode, Conversation, Preset
from core.errors import ApplicationError
from knowledge.selectors import readable_bases
from llms.models import LLMModel
from llms.selectors import default_model_for_user, models_for_user

__all__ = [
    "STARTERS_MAX",
    "preset_create",
    "preset_delete",
    "preset_get_readable",
    "preset_get_writable",
    "preset_settings_for",
    "preset_update",
    "presets_for",
]

STARTERS_MAX = 4
STARTER_MAX_CHARS = 500
NAME_MAX_CHARS = 100
DESCRIPTION_MAX_CHARS = 300
FIELDS = (
    "name",
    "description",
    "model",
    "system_prompt",
    "tools",
    "knowledge",
    "params",
    "mode",
    "starters",
    "groups",
)
READ_ONLY = "This preset is shared with you read-only: only its owner can change it."


def _refuse(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, extra={field: [message]})


# --------------------------------------------------------------------------- reads


def presets_for(user: Any) -> QuerySet[Preset]:
    """Yours, your groups', and everyone's (an admin's, without an owner)."""
    visible = Q(owner=user) | Q(owner__isnull=True) | Q(shared_groups__in=user.groups.all())
    ids = Preset.objects.filter(visible).values("id")
    return (
        Preset.objects.filter(id__in=ids)
        .select_related("owner", "model")
        .prefetch_related("knowledge", "shared_groups")
    )


def preset_get_readable(user: Any, preset_id: int) -> Preset:
    found = presets_for(user).filter(pk=preset_id).first()
    if found is None:
        raise Http404("No such preset.")
    return found


def preset_get_writable(user: Any, preset_id: int) -> Preset:
    """Your own preset; another's is the same 404 as a missing one, or read-only."""
    preset = preset_get_readable(user, preset_id)
    if preset.owner_id != user.pk:
        raise Http404(READ_ONLY)
    return preset


# -------------------------------------------------------------------------- checks


def _model(user: Any, model_id: Any) -> LLMModel | None:
    if model_id in (None, ""):
        return None
    model = models_for_user(user=user).filter(pk=model_id).first()
    if model is None:
        raise _refuse("model", _("This model is not available to you. Pick one from the list."))
    return model


def _knowledge(user: Any, ids: Iterable[int]) -> list[int]:
    wanted = list(dict.fromkeys(int(i) for i in ids))
    readable = set(readable_bases(user).filter(pk__in=wanted).values_list("pk", flat=True))
    if missing := [i for i in wanted if i not in readable]:
        raise _refuse(
            "knowledge", _("No knowledge base of yours has the id %(id)s.") % {"id": missing[0]}
        )
    return wanted


def _starters(starters: Iterable[Any]) -> list[str]:
    cleaned = [str(text).strip() for text in starters if str(text).strip()]
    if len(cleaned) > STARTERS_MAX:
        raise _refuse(
            "starters",
            _("A preset has at most %(limit)s starter prompts.") % {"limit": STARTERS_MAX},
        )
    if any(len(text) > STARTER_MAX_CHARS for text in cleaned):
        raise _refuse(
            "starters",
            _("A starter prompt has at most %(limit)s characters.") % {"limit": STARTER_MAX_CHARS},
        )
    return cleaned


def _groups(user: Any, ids: Iterable[int]) -> list[Group]:
    """Groups you are in: a user shares with their own groups (an admin, in the admin,
    with any)."""
    wanted = list(dict.fromkeys(int(i) for i in ids))
    mine = {group.pk: group for group in user.groups.filter(pk__in=wanted)}
    if missing := [i for i in wanted if i not in mine]:
        raise _refuse(
            "groups", _("You are not in the group with the id %(id)s.") % {"id": missing[0]}
        )
    return [mine[i] for i in wanted]


def _text(field: str, value: Any, limit: int, *, required: bool = False) -> str:
    text = " ".join(str(value or "").split()) if field != "system_prompt" else str(value or "")
    text = text.strip()
    if required and not text:
        if field == "name":
            raise _refuse(field, _("A preset needs a name."))
        raise _refuse(field, _("A preset needs a %(field)s.") % {"field": field})
    if len(text) > limit:
        raise _refuse(
            field,
            _("A preset's %(field)s has at most %(limit)s characters.")
            % {"field": field, "limit": f"{limit:,}"},
        )
    return text


def _checked(user: Any, fields: Mapping[str, Any], current: Preset | None) -> dict[str, Any]:
    """``fields`` checked with ``user``'s rights; the model the params are checked for is
    the given one, else the preset's, else the user's default."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise _refuse(unknown[0], _("Unknown field %(field)s.") % {"field": unknown[0]})
    out: dict[str, Any] = {}
    if "name" in fields:
        out["name"] = _text("name", fields["name"], NAME_MAX_CHARS, required=True)
    if "description" in fields:
        out["description"] = _text("description", fields["description"], DESCRIPTION_MAX_CHARS)
    if "system_prompt" in fields:
        out["system_prompt"] = _text(
            "system_prompt", fields["system_prompt"], chat_settings.SYSTEM_PROMPT_MAX_CHARS
        )
    if "model" in fields:
        out["model"] = _model(user, fields["model"])
    if "tools" in fields:
        out["tools"] = chat_settings.tools_clean(user, fields["tools"])
    if "knowledge" in fields:
        out["knowledge"] = _knowledge(user, fields["knowledge"] or [])
    if "mode" in fields:
        if fields["mode"] not in AgentMode.values:
            raise _refuse(
                "mode",
                _("Choose a mode among %(modes)s.") % {"modes": ", ".join(AgentMode.values)},
            )
        out["mode"] = fields["mode"]
    if "starters" in fields:
        out["starters"] = _starters(fields["starters"] or [])
    if "groups" in fields:
        out["groups"] = _groups(user, fields["groups"] or [])
    if "params" in fields or "model" in fields:
        model = out.get("model") if "model" in fields else (current.model if current else None)
        params = fields.get("params", current.params if current else {}) or {}
        out["params"] = chat_settings.params_clean(
            {k: v for k, v in params.items() if v is not None},
            model or default_model_for_user(user=user),
        )
    return out


# -------------------------------------------------------------------------- writes


def _save(preset: Preset, values: dict[str, Any]) -> Preset:
    knowledge = values.pop("knowledge", None)
    groups = values.pop("groups", None)
    for name, value in values.items():
        setattr(preset, name, value)
    preset.save()
    if knowledge is not None:
        preset.knowledge.set(knowledge)
    if groups is not None:
        preset.shared_groups.set(groups)
    return preset


def preset_create(owner: Any, fields: Mapping[str, Any]) -> Preset:
    if "name" not in fields:
        raise _refuse("name", _("A preset needs a name."))
    values = _checked(owner, fields, None)
    with transaction.atomic():
        return _save(Preset(owner=owner), values)


def preset_update(preset: Preset, user: Any, fields: Mapping[str, Any]) -> Preset:
    values = _checked(user, fields, preset)
    with transaction.atomic():
        return _save(preset, values)


def preset_delete(preset: Preset) -> None:
    preset.delete()  # its chats keep their copies of its settings (preset: SET_NULL)


# ------------------------------------------------------------ a chat started from one


def preset_settings_for(user: Any, preset: Preset) -> dict[str, Any]:
    """What a chat of ``user`` started from ``preset`` gets, checked with ``user``'s
    rights: a model or tool they may not use is refused, naming it."""
    model = None
    if preset.model_id is not None:
        model = models_for_user(user=user).filter(pk=preset.model_id).first()
        if model is None:
            if preset.model is None:
                message = _(
                    "The preset “%(name)s” uses the model that was deleted, which is not "
                    "available to you: ask its owner or an administrator."
                ) % {"name": preset.name}
            else:
                message = _(
                    "The preset “%(name)s” uses the model %(model)s, which is not available "
                    "to you: ask its owner or an administrator."
                ) % {"name": preset.name, "model": preset.model}
            raise _refuse("preset", message)
    if preset.tools is not None:
        allowed = {tool["name"] for tool in chat_settings.tool_choices(user)}
        if refused := [name for name in preset.tools if name not in allowed]:
            raise _refuse(
                "preset",
                _(
                    "The preset “%(name)s” offers tools you may not use: %(tools)s. Ask its "
                    "owner or an administrator."
                )
                % {"name": preset.name, "tools": ", ".join(refused)},
            )
    effective_model = model or default_model_for_user(user=user)
    readable = set(readable_bases(user).values_list("pk", flat=True))
    return {
        "model": model,
        "mode": preset.mode,
        "system_prompt": preset.system_prompt,
        "params": chat_settings.effective_params_of(preset.params, effective_model),
        "tools": list(preset.tools) if preset.tools is not None else None,
        "knowledge": [base.pk for base in preset.knowledge.all() if base.pk in readable],
    }


def conversation_apply_preset(conversation: Conversation, preset: Preset, values: dict) -> None:
    """Copy ``values`` (from :func:`preset_settings_for`) into a new conversation."""
    conversation.preset = preset
    conversation.system_prompt = values["system_prompt"]
    conversation.params = values["params"]
    conversation.tools = values["tools"]
    conversation.save(update_fields=["preset", "system_prompt", "params", "tools", "updated_at"])
    conversation.knowledge.set(values["knowledge"])
