"""System checks for a safe production configuration."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection

from core.keys import describe, key_setting_words, key_source, undecryptable_secrets
from core.secrets import is_marked_insecure


@register(Tags.security, deploy=False)
def check_production_secret(app_configs, **kwargs) -> list[Error]:
    """Refuse to run without a key, or with DEBUG off on a key from the environment that
    Django's ``django-insecure-`` mark says is not meant for production."""
    try:
        key = settings.SECRET_KEY
    except ImproperlyConfigured:  # Django refuses to hand out an empty key
        key = ""
    if not key:
        return [missing_secret_error()]
    from_environment = settings.AGENTSITE_SECRET_KEY_FILE is None
    if settings.DEBUG or not (from_environment and is_marked_insecure(key)):
        return []
    return [
        Error(
            "DEBUG is off but SECRET_KEY (from the environment) is marked django-insecure-.",
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
        hint="Run `make run`, or `python manage.py prepare_instance` to generate this "
        "instance's key, or set SECRET_KEY in the environment.",
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


@register(Tags.security)
def check_stored_secrets_decrypt(app_configs, **kwargs) -> list[Error]:
    """Refuse a key that cannot read the secrets stored under the one before it."""
    error = undecryptable_error()
    return [error] if error is not None else []


def undecryptable_error() -> Error | None:
    try:
        found = undecryptable_secrets()
    except DatabaseError:  # the database is away: the outage is reported elsewhere
        return None
    if not found:
        return None
    return Error(
        f"{len(found)} stored secret(s) cannot be decrypted with the configured "
        f"{key_setting_words()}: {describe(found)}. The key they were encrypted with "
        "changed or is missing.",
        hint=f"Set {key_source()} back to the key they "
        "were encrypted with (ENCRYPTION_KEYS may list old keys after the new one), or run "
        "`python manage.py forget_undecryptable_secrets` to empty them and enter them "
        "again in the admin.",
        id="agentsite.E003",
    )


def refuse_to_serve_without_key() -> None:
    """Servers and workers run no system checks: without a key they stop here, at start,
    saying what to do, instead of failing every request (no database needed: the ASGI
    module calls it when imported)."""
    try:
        settings.SECRET_KEY  # noqa: B018 (Django refuses to hand out an empty key)
    except ImproperlyConfigured:
        error = missing_secret_error()
        raise ImproperlyConfigured(f"{error.msg} {error.hint}") from None


def refuse_to_serve_misconfigured() -> None:
    """What ``agentsite-server`` and a Celery worker check when they start: a key, and
    one that reads the stored secrets (a changed key would fail every page that loads a
    provider)."""
    refuse_to_serve_without_key()
    try:
        error = undecryptable_error()
    finally:
        connection.close()  # this thread serves no request: its connection goes back
    if error is not None:
        raise ImproperlyConfigured(f"{error.msg} {error.hint}")
