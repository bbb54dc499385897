"""System checks for a safe production configuration."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from core.secrets import is_dev_secret


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
    run_threads = int(getattr(settings, "AGENTSITE_DB_THREADS", 16))
    http_threads = int(getattr(settings, "AGENTSITE_HTTP_THREADS", 8))
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
