"""The chat header's Settings panel (issue 46): the chat's system prompt, its sampling
parameters within the model's range, and the tools it offers. The panel loads when first
opened; a save checks everything (:mod:`conversations.chat_settings`) and keeps all or
nothing, each refusal beside its field with what the user typed kept."""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods

from conversations import chat_settings, selectors
from conversations.models import Conversation
from core.errors import ApplicationError
from llms.selectors import default_model_for_user

TEMPLATE = "conversations/chat_settings.html"
INVALID = 422


def _save(request: HttpRequest, conversation: Conversation, choices: list[dict[str, Any]]) -> None:
    """Everything in the form, or nothing (the first refusal is raised)."""
    post = request.POST
    params = {
        name: chat_settings.param_from_form(name, post.get(name, ""))
        for name in chat_settings.PARAMS
    }
    checked = post.getlist("tools")
    every = {tool["name"] for tool in choices}
    with transaction.atomic():
        chat_settings.conversation_set_system_prompt(
            conversation=conversation, system_prompt=post.get("system_prompt", "")
        )
        chat_settings.conversation_set_params(
            conversation=conversation, user=request.user, params=params
        )
        chat_settings.conversation_set_tools(
            conversation=conversation,
            user=request.user,
            tools=None if set(checked) >= every else checked,  # all: new tools too
        )


@require_http_methods(["GET", "POST"])
def conversation_settings(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    choices = chat_settings.tool_choices(request.user)
    errors: dict[str, str] = {}
    saved = False
    form: dict[str, Any] = {
        "system_prompt": conversation.system_prompt,
        **{name: conversation.params.get(name, "") for name in chat_settings.PARAMS},
        "tools": [t["name"] for t in choices] if conversation.tools is None else conversation.tools,
    }
    if request.method == "POST":
        try:
            _save(request, conversation, choices)
        except ApplicationError as exc:
            errors = {field.removeprefix("params."): msgs[0] for field, msgs in exc.extra.items()}
            errors = errors or {"form": exc.message}
            form = {
                "system_prompt": request.POST.get("system_prompt", ""),
                **{name: request.POST.get(name, "") for name in chat_settings.PARAMS},
                "tools": request.POST.getlist("tools"),
            }
            conversation.refresh_from_db()
        else:
            saved = True
        if not request.htmx:
            if errors:
                flash.error(request, next(iter(errors.values())))
            return redirect("conversation_detail", conversation_id=conversation.pk)
    model = conversation.model or default_model_for_user(user=request.user)
    context = {
        "conversation": conversation,
        "form": form,
        "errors": errors,
        "saved": saved,
        "ranges": chat_settings.param_ranges(model),
        "model": model,
        "tools": choices,
    }
    html = render_to_string(f"{TEMPLATE}#panel", context, request)
    return HttpResponse(html, status=INVALID if errors else 200)
