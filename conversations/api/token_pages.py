"""The API tokens settings page: list, create (the plaintext is shown once), revoke."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agentsite.errors import ApplicationError
from conversations.api import tokens

TEMPLATE = "conversations/tokens.html"


@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """GET lists the tokens; POST creates one and renders the page with its plaintext.

    The new token is rendered in the POST response itself (never stored in the session
    or a flash message), so it exists in exactly one HTTP response.
    """
    created = None
    error = ""
    if request.method == "POST":
        try:
            token, raw = tokens.token_create(user=request.user, name=request.POST.get("name", ""))
            created = {"token": token, "raw": raw}
        except ApplicationError as exc:
            error = exc.message
    response = render(
        request,
        TEMPLATE,
        {"tokens": tokens.token_list(user=request.user), "created": created, "error": error},
        status=400 if error else 200,
    )
    if created:
        response["Cache-Control"] = "no-store"
    return response


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = tokens.token_get(user=request.user, token_id=token_id)
    tokens.token_revoke(token=token)
    flash.success(request, f"Token “{token.name}” ({token.prefix}…) revoked.")
    return redirect("token_list")
