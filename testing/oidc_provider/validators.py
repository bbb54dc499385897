"""DOT's validator with the claims the app reads, refusals for disabled users, and the
misbehaviour modes of :mod:`testing.oidc_provider.control`."""

from __future__ import annotations

import json
import time
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request

from testing.oidc_provider.control import misbehaviour
from testing.oidc_provider.models import Profile

HOUR = 3600


def email_verified(user: Any) -> bool:
    profile = Profile.objects.filter(user=user).first()
    return True if profile is None else profile.email_verified


def tampered(token: str) -> str:
    """The same header and signature over a payload whose ``sub`` changed after signing:
    what an attacker who edits a token gets, a signature that no longer verifies."""
    header, payload, signature = token.split(".")
    claims = json.loads(urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = f"tampered-{claims['sub']}"
    altered = urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{altered}.{signature}"


class ProviderValidator(OAuth2Validator):
    # The claims of the "groups" scope, next to OIDC's standard ones.
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self) -> dict[str, Callable[[Request], Any]]:
        """Request-agnostic (no ``request`` parameter), so discovery's claims_supported
        lists them; DOT adds ``sub`` (the user's pk as a string) and filters by scope. The
        same claims go into the ID token and the userinfo answer."""
        return {
            "email": lambda r: r.user.email,
            "email_verified": lambda r: email_verified(r.user),
            "preferred_username": lambda r: r.user.get_username(),
            "name": lambda r: r.user.get_full_name(),
            "given_name": lambda r: r.user.first_name,
            "family_name": lambda r: r.user.last_name,
            "groups": lambda r: sorted(r.user.groups.values_list("name", flat=True)),
        }

    # A disabled account is refused everywhere a token could still carry it, as Keycloak
    # does; DOT checks is_active only at login (the session) and for the password grant.

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        valid = super().validate_code(client_id, code, client, request, *args, **kwargs)
        return valid and request.user.is_active

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        valid = super().validate_refresh_token(refresh_token, client, request, *args, **kwargs)
        return valid and request.user.is_active  # False: oauthlib answers invalid_grant

    def validate_bearer_token(self, token: str, scopes: list[str], request: Request) -> bool:
        return super().validate_bearer_token(token, scopes, request) and request.user.is_active

    # Misbehaviour: claims changed before signing (still a valid signature) ...

    def get_id_token_dictionary(
        self, token: dict[str, Any], token_handler: Any, request: Request
    ) -> tuple[dict[str, Any], datetime]:
        claims, expires = super().get_id_token_dictionary(token, token_handler, request)
        if misbehaviour.id_token == "expired":
            now = int(time.time())
            claims.update(iat=now - 2 * HOUR, exp=now - HOUR)
            expires = timezone.now() - timedelta(seconds=HOUR)
        elif misbehaviour.id_token == "wrong_audience":
            claims["aud"] = "some-other-client"  # overrides the aud oauthlib set
        return claims, expires

    # ... or after.

    def finalize_id_token(
        self, id_token: dict[str, Any], token: dict[str, Any], token_handler: Any, request: Request
    ) -> str:
        signed = super().finalize_id_token(id_token, token, token_handler, request)
        return tampered(signed) if misbehaviour.id_token == "tamper" else signed
