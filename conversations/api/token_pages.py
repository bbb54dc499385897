"""The API tokens settings page: list, create (the plaintext is shown once), revoke."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from audit.services import client_of
from conversations.http import tokens
from core.crypto import decrypt, encrypt
from core.errors import ApplicationError

TEMPLATE = "conversations/tokens.html"


# The session key holding a new token, encrypted, until the page after the redirect shows it.
CREATED_KEY = "api_token_created"


@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """GET lists the tokens; POST creates one and redirects to the list (a reload never
    creates another), which shows the new token's plaintext once.

    Between the two the plaintext waits in the session, encrypted with the site's key, and
    the GET that shows it removes it.
    """
    created = None
    error = ""
    if request.method == "POST":
        try:
            token, raw = tokens.token_create(
                user=request.user, name=request.POST.get("name", ""), client=client_of(request)
            )
        except ApplicationError as exc:
            error = exc.message
        else:
            request.session[CREATED_KEY] = {"id": token.pk, "raw": encrypt(raw)}
            return redirect("token_list")
    elif (waiting := request.session.pop(CREATED_KEY, None)) is not None:
        token = tokens.token_get(user=request.user, token_id=waiting["id"])
        created = {"token": token, "raw": decrypt(waiting["raw"])}
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
    tokens.token_revoke(token=token, actor=request.user, client=client_of(request))
    flash.success(
        request,
        _("Token “%(name)s” (%(prefix)s…) revoked.") % {"name": token.name, "prefix": token.prefix},
    )
    return redirect("token_list")
