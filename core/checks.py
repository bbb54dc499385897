"""System checks for a safe production configuration."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from core.secrets import is_dev_secret


@register(Tags.security, deploy=False)
def check_production_secret(app_configs, **kwargs) -> list[Error]:
    """Refuse to run without a key, or with DEBUG off on the generated development key."""
    try:
        key = settings.SECRET_KEY
    except ImproperlyConfigured:  # Django refuses to hand out an empty key
        key = ""
    if not key:
        return [missing_secret_error()]
    if settings.DEBUG or not is_dev_secret(key):
        return []
    return [
        Error(
            "DEBUG is off but SECRET_KEY is the generated development key.",
            hint="Set SECRET_KEY in the environment (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'`) or run with DEBUG=true.",
            id="agentsite.E001",
        )
    ]


def missing_secret_error() -> Error:
    """No SECRET_KEY in the environment and no generated one: the settings only read
    (agentsite/settings.py), ``manage.py prepare_instance`` generates it."""
    return Error(
        "SECRET_KEY is not set and there is no generated key in "
        f"{settings.AGENTSITE_SECRET_KEY_FILE or 'AGENTSITE_VAR_DIR'}.",
        hint="Run `make run`, or `python manage.py prepare_instance` to generate a "
        "development key, or set SECRET_KEY in the environment.",
        id="agentsite.E002",
    )


# Besides the run and HTTP threads: the event log's writer, channels' sync thread (socket
# connects), Celery's own threads.
POOL_HEADROOM = 4


@register(Tags.database)
def check_connection_pool_size(app_configs, **kwargs) -> list[Warning]:
    """Warn when the PostgreSQL pool cannot serve every run and HTTP thread at once.

    Each database and HTTP thread keeps its connection between calls; with a smaller
    pool, run steps and page requests wait (up to the pool's timeout) for one to come
    back.
    """
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if not isinstance(pool, dict):
        return []
    run_threads = int(settings.AGENTSITE_DB_THREADS)
    http_threads = int(settings.AGENTSITE_HTTP_THREADS)
    needed = run_threads + http_threads + POOL_HEADROOM
    if pool.get("max_size", needed) >= needed:
        return []
    return [
        Warning(
            f"DB_POOL_SIZE ({pool['max_size']}) is below AGENTSITE_DB_THREADS + "
            f"AGENTSITE_HTTP_THREADS + {POOL_HEADROOM} ({needed}): runs and pages will "
            "wait for connections.",
            hint=f"Set DB_POOL_SIZE to at least {needed}, or lower the thread counts.",
            id="agentsite.W001",
        )
    ]


def refuse_to_serve_without_key() -> None:
    """Servers and workers run no system checks: without a key they stop here, at start,
    saying what to do, instead of failing every request."""
    try:
        settings.SECRET_KEY  # noqa: B018 (Django refuses to hand out an empty key)
    except ImproperlyConfigured:
        error = missing_secret_error()
        raise ImproperlyConfigured(f"{error.msg} {error.hint}") from None
