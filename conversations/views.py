"""HTMX views: thin wrappers over services and selectors."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from conversations import selectors, services


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    conversations = selectors.conversation_list(user=request.user, search=query)
    template = "conversations/list.html"
    if request.htmx:
        template += "#conversation-list"
    return render(request, template, {"conversations": conversations, "q": query})


@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    conversation = services.conversation_create(owner=request.user)
    return redirect("conversation_detail", conversation_id=conversation.pk)


@require_GET
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    return render(request, "conversations/detail.html", {"conversation": conversation})
