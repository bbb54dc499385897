"""System checks for a safe production configuration."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register

from agentsite.secrets import is_dev_secret


@register(Tags.security, deploy=False)
def check_production_secret(app_configs, **kwargs) -> list[Error]:
    """Refuse to run with DEBUG off on the generated development key."""
    if settings.DEBUG or not is_dev_secret(settings.SECRET_KEY):
        return []
    return [
        Error(
            "DEBUG is off but SECRET_KEY is the generated development key.",
            hint="Set SECRET_KEY in the environment (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'`) or run with DEBUG=true.",
            id="agentsite.E001",
        )
    ]
