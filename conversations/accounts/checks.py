"""``manage.py check`` on the single sign-on settings: a half-configured provider is an
error at start, not a login page that fails for everyone."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

__all__ = ["check_sso_settings"]


@register(Tags.security)
def check_sso_settings(app_configs: Any, **kwargs: Any) -> list[Error | Warning]:
    problems: list[Error | Warning] = []
    if settings.AGENTSITE_OIDC_ISSUER:
        missing = [
            name
            for name, value in (
                ("AGENTSITE_OIDC_CLIENT_ID", settings.OIDC_RP_CLIENT_ID),
                ("AGENTSITE_OIDC_CLIENT_SECRET", settings.OIDC_RP_CLIENT_SECRET),
            )
            if not value
        ]
        if missing:
            problems.append(
                Error(
                    f"AGENTSITE_OIDC_ISSUER is set but {' and '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} not.",
                    hint="Register agentsite as a confidential client at the provider "
                    "(redirect URI https://<your host>/oidc/callback/) and set both.",
                    id="agentsite.E010",
                )
            )
        if "openid" not in settings.OIDC_RP_SCOPES.split():
            problems.append(
                Error(
                    "AGENTSITE_OIDC_SCOPES must include openid.",
                    id="agentsite.E011",
                )
            )
    elif settings.AGENTSITE_SSO_ONLY:
        problems.append(
            Warning(
                "AGENTSITE_SSO_ONLY is set but no OpenID Connect provider is "
                "(AGENTSITE_OIDC_ISSUER): the password form stays.",
                id="agentsite.W010",
            )
        )
    if settings.AUTH_LDAP_SERVER_URI and not settings.AUTH_LDAP_BIND_DN:
        problems.append(
            Warning(
                "AGENTSITE_LDAP_SERVER_URI is set without AGENTSITE_LDAP_BIND_DN: the "
                "directory is searched anonymously, and users removed from it cannot be "
                "noticed unless anonymous reads are allowed.",
                id="agentsite.W011",
            )
        )
    return problems
