"""The tests' hand on the provider: ``POST /_control/<action>`` with a JSON body and the
``X-Control-Token`` header given at start (without it: 403).

Actions: ``user`` (create or update a user), ``client`` (register or update a confidential
client), ``misbehave`` (make the ID tokens issued from now on invalid in one chosen way).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import get_application_model

from testing.oidc_provider.models import Profile

Body = dict[str, Any]

# normal: as issued; tamper: payload altered after signing (the signature no longer
# verifies); expired: properly signed, exp an hour ago; wrong_audience: properly signed
# for another client.
ID_TOKEN_MODES = ("normal", "tamper", "expired", "wrong_audience")


@dataclass
class Misbehaviour:
    """Process-wide: the provider is one process (threads share this)."""

    id_token: str = "normal"


misbehaviour = Misbehaviour()


def save_user(body: Body) -> Body:
    """Only the keys present change, so a test can disable a user or change their groups
    without restating the rest."""
    with transaction.atomic():
        user, _ = User.objects.get_or_create(username=body["username"])
        if "password" in body:
            user.set_password(body["password"])
        if "email" in body:
            user.email = body["email"]
        if "name" in body:
            # get_full_name() joins them again with one space: the name round-trips.
            user.first_name, _, user.last_name = str(body["name"]).partition(" ")
        if "active" in body:
            user.is_active = bool(body["active"])
        user.save()
        if "groups" in body:
            user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
        if "email_verified" in body:
            Profile.objects.update_or_create(
                user=user, defaults={"email_verified": bool(body["email_verified"])}
            )
    return {"sub": str(user.pk)}


def save_client(body: Body) -> Body:
    """A confidential authorization-code client, without a consent screen, signing with
    RS256: what an app's "Sign in with ..." is registered as at a real provider."""
    application_model = get_application_model()
    client_id = body["client_id"]
    client = application_model.objects.filter(client_id=client_id).first()
    if client is None:
        client = application_model(client_id=client_id)
    client.name = client_id
    client.client_secret = body["client_secret"]  # hashed on save
    client.client_type = application_model.CLIENT_CONFIDENTIAL
    client.authorization_grant_type = application_model.GRANT_AUTHORIZATION_CODE
    client.redirect_uris = " ".join(body["redirect_uris"])
    client.post_logout_redirect_uris = " ".join(body.get("post_logout_redirect_uris", ()))
    client.skip_authorization = True
    client.algorithm = application_model.RS256_ALGORITHM
    client.full_clean()
    client.save()
    return {"client_id": client_id}


def misbehave(body: Body) -> Body:
    mode = body.get("id_token", "normal")
    if mode not in ID_TOKEN_MODES:
        raise ValueError(f"id_token must be one of {', '.join(ID_TOKEN_MODES)}")
    misbehaviour.id_token = mode
    return {"id_token": mode}


ACTIONS: dict[str, Callable[[Body], Body]] = {
    "user": save_user,
    "client": save_client,
    "misbehave": misbehave,
}


@csrf_exempt
@require_POST
def control(request: HttpRequest, action: str) -> JsonResponse:
    given = request.headers.get("X-Control-Token", "").encode()
    if not hmac.compare_digest(given, settings.CONTROL_TOKEN.encode()):
        return JsonResponse({"error": "forbidden"}, status=403)
    if action not in ACTIONS:
        return JsonResponse({"error": f"unknown action {action!r}"}, status=404)
    try:
        body = json.loads(request.body or b"{}")
        return JsonResponse(ACTIONS[action](body))
    except (KeyError, TypeError, ValueError, ValidationError) as error:
        return JsonResponse({"error": f"{type(error).__name__}: {error}"}, status=400)
