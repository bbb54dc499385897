"""What becomes of a run its process stopped for a restart (issue 44).

A worker that gets SIGTERM lets its runs finish within the grace period; a run still
going then is stopped, and either handed back or ended:

- **handed back** (team mode, when nothing can happen twice): in one transaction the run
  goes back to ``queued`` with its trace (the engine's messages from its question on,
  cut after its last completed step) as its own ``resume_trace``, the follow-ups it was
  handed and had not taken in are marked undelivered again, and a ``handover`` event
  tells readers the answer so far is taken back. The worker then queues the run's task
  again; another worker claims the same run and its loop goes on from the trace with no
  new user turn. The run keeps its id, its question and its place in the tree: one
  question, one answer, however many workers it took.
- **ended clearly** otherwise: failed with a message saying the server (or worker)
  restarted, the answer so far kept as an incomplete answer, Retry offered; its
  follow-ups go to a new run as when any run ends.

A run is not handed back when that could do something twice or lose work: a tool call
was under way (it may have done part of its work; the trace would say it was cancelled),
a plan had begun its steps (plan mode keeps no trace to go on from), or it was handed
over :data:`MAX_HANDOVERS` times already. An embedded server is the only process that
could go on with its runs, and it is the one stopping: its runs are ended.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.history import traces
from conversations.models import Message, Run, RunEvent
from conversations.runs.lifecycle import RunSwept
from conversations.runs.publisher import Entry, write_events
from engine import ChatMessage

HANDOVER_CHANNEL = "handover"
MAX_HANDOVERS = 3

# In English (gettext_noop); translated where they are said: the run's status, its error.
HANDED_OVER = gettext_noop(
    "The worker writing this answer restarted; another worker goes on from its last completed step."
)
SERVER_RESTARTED = gettext_noop(
    "Stopped: the server restarted while this answer was being written. What it had "
    "written is kept; press Retry to answer again."
)
WORKER_RESTARTED_IN_TOOL = gettext_noop(
    "Stopped: the worker writing this answer restarted while a tool was running, which may "
    "have done part of its work, so it was not run again elsewhere. What was written is "
    "kept; press Retry to answer again."
)
WORKER_RESTARTED_IN_PLAN = gettext_noop(
    "Stopped: the worker writing this answer restarted after the plan's steps had begun, "
    "and a plan cannot go on elsewhere. What was written is kept; press Retry to answer again."
)
_RESTARTED_AGAIN = gettext_noop(
    "Stopped: the workers writing this answer restarted %(count)d times. What was "
    "written is kept; press Retry to answer again."
)
WORKER_RESTARTED_AGAIN = _RESTARTED_AGAIN % {"count": MAX_HANDOVERS}


def refusal(*, react: bool, tool_cut: bool, steps_begun: bool, handovers: int) -> str | None:
    """Why a run stopped for a restart is ended instead of handed back (None: it is
    handed back). ``react``: its agent is a ReAct loop (whose trace can go on);
    ``tool_cut``: a tool call was under way when it stopped; ``steps_begun``: it had
    called a tool or begun a plan's steps; ``handovers``: how often it was handed back."""
    if settings.AGENTSITE_EXECUTION != "celery":
        return _(SERVER_RESTARTED)
    if tool_cut:
        return _(WORKER_RESTARTED_IN_TOOL)
    if steps_begun and not react:
        return _(WORKER_RESTARTED_IN_PLAN)
    if handovers >= MAX_HANDOVERS:
        return _(_RESTARTED_AGAIN) % {"count": MAX_HANDOVERS}
    return None


def handovers_of(run_id: int) -> int:
    """How many times the run was handed back (its ``handover`` events)."""
    return RunEvent.objects.filter(run_id=run_id, channel=HANDOVER_CHANNEL).count()


def go_on_from(trace: list[ChatMessage]) -> list[ChatMessage]:
    """The part of a stopped run's trace the next worker goes on from: up to its last
    completed step. An answer the loop had finished but not yet rewritten is written again
    (a trace ending with the model's own words would have it answer itself)."""
    trace = list(trace)
    while len(trace) > 1 and trace[-1].role == "assistant" and not trace[-1].tool_calls:
        trace.pop()
    return trace


def run_hand_back(
    *, run: Run, trace: list[ChatMessage], taken_in: list[int], events: list[Entry]
) -> bool:
    """Put a running run back in the queue to go on from ``trace``, with ``events`` (the
    ``handover`` report), in one transaction. False, and nothing written, when a Stop was
    saved first (the run then ends as stopped); :class:`RunSwept` when it is not running
    any more (a sweep reported it)."""
    with transaction.atomic():
        row = (
            Run.objects.select_for_update()
            .filter(pk=run.pk)
            .values("status", "cancel_requested")
            .first()
        )
        if row is None or row["status"] != Run.Status.RUNNING:
            raise RunSwept(run.pk)
        if row["cancel_requested"]:
            return False
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED,
            task_id="",
            # The stale period from now: another worker has that long to take it.
            heartbeat_at=timezone.now(),
            resume_trace=traces.trace_text(trace),
        )
        # Handed to this worker's loop, never seen by a model call: the next one gets them.
        Message.objects.filter(
            run_id=run.pk, kind=Message.Kind.INJECT, delivered_at__isnull=False
        ).exclude(pk__in=taken_in).update(delivered_at=None)
        write_events([(run.conversation_id, events)])
    return True


def taken_in_before(run_id: int) -> list[int]:
    """The follow-ups a handed-back run took in before (delivered, in its trace), in order:
    the worker going on counts them as its own, so none becomes a new run's question."""
    return list(
        Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=False)
        .order_by("seq")
        .values_list("pk", flat=True)
    )
