"""``/healthz`` and ``/readyz``: what a load balancer, compose or systemd asks a process.

``/healthz`` says the process answers (no database, no network: a stuck database must not
get a healthy server restarted). ``/readyz`` says it can serve: the database answers, its
migrations are applied, the cache (Redis in team mode) and, when runs go to Celery, the
broker answer; otherwise 503 naming the part that failed. Both are public, cheap and JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import current_app
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)

BROKER_TIMEOUT = 2.0  # seconds: a readiness probe answers within its own timeout

__all__ = ["healthz", "readyz"]


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    for name, check in CHECKS:
        try:
            checks[name] = check()
        except Exception as exc:  # the probe's answer: which part, and why
            checks[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    ready = all(not result.startswith("failed") for result in checks.values())
    if not ready:
        logger.warning("not ready: %s", checks)
    return JsonResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks},
        status=200 if ready else 503,
    )


def _database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


class _Migrations:
    """Whether every migration is applied: read from the database until it is, then
    remembered (a running process never sees them unapplied again)."""

    def __init__(self) -> None:
        self.applied = False

    def __call__(self) -> str:
        if not self.applied:
            executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
            plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if plan:
                names = ", ".join(f"{m.app_label}.{m.name}" for m, _backwards in plan[:5])
                raise RuntimeError(
                    f"{len(plan)} migration(s) not applied ({names}): run manage.py migrate"
                )
            self.applied = True
        return "ok"


def _cache() -> str:
    cache.get("agentsite:readyz")  # a round trip to Redis in team mode
    return "ok"


def _broker() -> str:
    if settings.AGENTSITE_EXECUTION != "celery":
        return "not used (runs execute on this server)"
    with current_app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT)
    return "ok"


CHECKS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("database", _database),
    ("migrations", _Migrations()),
    ("cache", _cache),
    ("broker", _broker),
)
