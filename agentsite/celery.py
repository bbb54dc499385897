"""Celery application for team mode (``REDIS_URL`` set).

Without Redis the broker is in-memory and tasks run eagerly; the chat itself then runs on
the ASGI server's event loop instead (see conversations.runs.launcher).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

app = Celery("agentsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _tune_worker(**_kwargs: object) -> None:
    # Here, not at the top: every manage.py command and server imports this module (through
    # agentsite/__init__.py), and the runtime module loads the LLM client (about 0.5 s).
    from core.checks import refuse_to_serve_without_key
    from core.runtime import tune_for_streaming

    refuse_to_serve_without_key()
    tune_for_streaming()


@worker_ready.connect
def _freeze_worker_heap(**_kwargs: object) -> None:
    # Here, not at the top: see _tune_worker.
    from core.runtime import tune_garbage_collection, warm_up

    warm_up()
    tune_garbage_collection()
