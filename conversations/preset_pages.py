"""The Presets pages (issue 46): the presets you may use (yours, your groups', everyone's),
a form to make or change yours, and "Start a chat" (the new-chat page set up by one,
with its starter prompts). :mod:`conversations.presets` checks and keeps them; a refusal
shows the form again, the message by its field, what was typed kept."""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from conversations import chat_settings, presets
from conversations.models import AgentMode, Preset
from core.errors import ApplicationError
from knowledge.selectors import readable_bases
from llms.selectors import models_for_user

LIST = "conversations/presets.html"
EDIT = "conversations/preset_edit.html"
INVALID = 422


def _ids(post: QueryDict, name: str) -> list[int]:
    return [int(value) for value in post.getlist(name) if value.isdigit()]


def fields_from(post: QueryDict, tool_names: list[str]) -> dict[str, Any]:
    """The preset's fields as the form sends them (every tool ticked: every tool, new
    ones too)."""
    ticked = post.getlist("tools")
    return {
        "name": post.get("name", ""),
        "description": post.get("description", ""),
        "model": post.get("model") or None,
        "system_prompt": post.get("system_prompt", ""),
        "tools": None if set(ticked) >= set(tool_names) else ticked,
        "knowledge": _ids(post, "knowledge"),
        "params": {
            name: chat_settings.param_from_form(name, post.get(name, ""))
            for name in chat_settings.PARAMS
        },
        "mode": post.get("mode", AgentMode.REACT),
        "starters": [post.get(f"starter_{n}", "") for n in range(1, presets.STARTERS_MAX + 1)],
        "groups": _ids(post, "groups"),
    }


def _form_of(preset: Preset | None, tool_names: list[str]) -> dict[str, Any]:
    """What the form shows of a preset (or a new one's defaults)."""
    if preset is None:
        return {"mode": AgentMode.REACT, "tools": tool_names, "starters": [""] * 4}
    starters = list(preset.starters or [])
    return {
        "name": preset.name,
        "description": preset.description,
        "model": preset.model_id or "",
        "system_prompt": preset.system_prompt,
        "tools": tool_names if preset.tools is None else preset.tools,
        "knowledge": [base.pk for base in preset.knowledge.all()],
        "mode": preset.mode,
        "starters": starters + [""] * (presets.STARTERS_MAX - len(starters)),
        "groups": [group.pk for group in preset.shared_groups.all()],
        **{name: (preset.params or {}).get(name, "") for name in chat_settings.PARAMS},
    }


def _typed(post: QueryDict) -> dict[str, Any]:
    """The form as typed, to show again after a refusal."""
    return {
        "name": post.get("name", ""),
        "description": post.get("description", ""),
        "model": int(post["model"]) if post.get("model", "").isdigit() else "",
        "system_prompt": post.get("system_prompt", ""),
        "tools": post.getlist("tools"),
        "knowledge": _ids(post, "knowledge"),
        "mode": post.get("mode", ""),
        "starters": [post.get(f"starter_{n}", "") for n in range(1, presets.STARTERS_MAX + 1)],
        "groups": _ids(post, "groups"),
        **{name: post.get(name, "") for name in chat_settings.PARAMS},
    }


def _choices(request: HttpRequest) -> dict[str, Any]:
    return {
        "models": models_for_user(user=request.user),
        "modes": AgentMode.choices,
        "tools": chat_settings.tool_choices(request.user),
        "bases": readable_bases(request.user).order_by("name"),
        "groups": request.user.groups.order_by("name"),
    }


def _errors(exc: ApplicationError) -> dict[str, str]:
    found = {field.removeprefix("params."): msgs[0] for field, msgs in exc.extra.items()}
    return found or {"form": exc.message}


@require_http_methods(["GET", "POST"])
def preset_list(request: HttpRequest) -> HttpResponse:
    """GET: your presets and those shared with you, and a form for a new one. POST: the
    new one, then the list."""
    choices = _choices(request)
    tool_names = [tool["name"] for tool in choices["tools"]]
    form, errors = _form_of(None, tool_names), {}
    if request.method == "POST":
        try:
            created = presets.preset_create(request.user, fields_from(request.POST, tool_names))
        except ApplicationError as exc:
            form, errors = _typed(request.POST), _errors(exc)
        else:
            flash.success(request, _("Preset “%(name)s” created.") % {"name": created.name})
            return redirect("preset_list")
    context = {
        "presets": presets.presets_for(request.user).order_by("name", "id"),
        "form": form,
        "errors": errors,
        **choices,
    }
    return render(request, LIST, context, status=INVALID if errors else 200)


@require_http_methods(["GET", "POST"])
def preset_edit(request: HttpRequest, preset_id: int) -> HttpResponse:
    """Your preset's form (another's, shared with you: read-only, without the form)."""
    preset = presets.preset_get_readable(request.user, preset_id)
    read_only = preset.owner_id != request.user.pk
    choices = _choices(request)
    tool_names = [tool["name"] for tool in choices["tools"]]
    form, errors = _form_of(preset, tool_names), {}
    if request.method == "POST":
        preset = presets.preset_get_writable(request.user, preset_id)
        try:
            presets.preset_update(preset, request.user, fields_from(request.POST, tool_names))
        except ApplicationError as exc:
            form, errors = _typed(request.POST), _errors(exc)
        else:
            flash.success(request, _("Preset “%(name)s” saved.") % {"name": preset.name})
            return redirect("preset_edit", preset_id=preset.pk)
    context = {"preset": preset, "read_only": read_only, "form": form, "errors": errors, **choices}
    return render(request, EDIT, context, status=INVALID if errors else 200)


@require_POST
def preset_delete(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = presets.preset_get_writable(request.user, preset_id)
    presets.preset_delete(preset)
    flash.success(request, _("Preset “%(name)s” deleted.") % {"name": preset.name})
    return redirect("preset_list")
