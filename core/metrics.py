"""Prometheus metrics (prometheus-client) and ``GET /metrics``.

Every process records into prometheus-client's default registry. With several processes
on a host (servers and workers), set ``PROMETHEUS_MULTIPROC_DIR`` to one empty folder
for all of them, as prometheus-client's multiprocess mode asks: each process writes its
values there and ``/metrics``, on any server, adds them up (gauges of processes still
alive only). The queue depth is read from the database when scraped.

``/metrics`` answers only ``Authorization: Bearer <AGENTSITE_METRICS_TOKEN>``, and is a
404 while that setting is empty.
"""

from __future__ import annotations

import hmac
import os

from django.apps import apps
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "APPROVALS_WAITING",
    "CLIENTS_OPEN",
    "LLM_FIRST_TOKEN",
    "LLM_TOKENS",
    "RUNS",
    "RUNS_STARTED",
    "RUN_DURATION",
    "TOOL_CALLS",
    "TOOL_ERRORS",
    "ProcessMetrics",
    "metrics_view",
    "process_ended",
]

# Seconds: from a quick answer to a long agent run.
RUN_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, float("inf"))
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, float("inf"))

RUNS_STARTED = Counter("agentsite_runs_started", "Runs that began executing.")
RUNS = Counter("agentsite_runs", "Runs that ended, by their final status.", ["status"])
RUN_DURATION = Histogram(
    "agentsite_run_duration_seconds",
    "From a run's start to its end, by final status.",
    ["status"],
    buckets=RUN_BUCKETS,
)
LLM_FIRST_TOKEN = Histogram(
    "agentsite_llm_first_token_seconds",
    "From a run's start to the first token of its answer or of a step's thought, by model.",
    ["model"],
    buckets=FIRST_TOKEN_BUCKETS,
)
LLM_TOKENS = Counter(
    "agentsite_llm_tokens", "Tokens the LLM counted, by model and kind.", ["model", "kind"]
)
TOOL_CALLS = Counter("agentsite_tool_calls", "Tool calls that ended, by tool.", ["tool"])
TOOL_ERRORS = Counter("agentsite_tool_errors", "Tool calls that ended in an error.", ["tool"])
# Gauges add up across live processes ("livesum"); a stopped process's values go with it.
APPROVALS_WAITING = Gauge(
    "agentsite_approvals_waiting",
    "Tool calls waiting for the user's approval.",
    multiprocess_mode="livesum",
)
CLIENTS_OPEN = Gauge(
    "agentsite_clients_open",
    "Open live connections, by kind (websocket, sse).",
    ["kind"],
    multiprocess_mode="livesum",
)


class QueueDepth(Collector):
    """Runs queued and not yet started, read from the database when scraped."""

    def collect(self):
        run = apps.get_model("conversations", "Run")
        queued = run.objects.filter(status=run.Status.QUEUED).count()
        yield GaugeMetricFamily(
            "agentsite_queue_depth", "Runs queued and not yet started.", value=queued
        )


def _exposition() -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    queue = CollectorRegistry()
    queue.register(QueueDepth())
    return generate_latest(registry) + generate_latest(queue)


@login_not_required
@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.AGENTSITE_METRICS_TOKEN
    if not token:
        raise Http404("Metrics are off (AGENTSITE_METRICS_TOKEN is not set).")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
        return HttpResponse(
            "Send Authorization: Bearer <AGENTSITE_METRICS_TOKEN>.\n",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    return HttpResponse(_exposition(), content_type=CONTENT_TYPE_LATEST)


def process_ended() -> None:
    """Drop this process's live gauges from the sums (multiprocess mode; at shutdown)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(os.getpid())


class ProcessMetrics:
    """A part of the process's runtime: when it closes, the process's live gauges leave
    the sums."""

    async def aclose(self) -> None:
        process_ended()
