"""A run's state changes: claimed once, closed with how it ended."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Message, Run
from conversations.runs import lifecycle
from conversations.runs.control import beat_and_read

pytestmark = pytest.mark.django_db


def queued_run(user, content: str = "Summarise this") -> Run:
    conversation = services.conversation_create(owner=user)
    trigger = Message.objects.create(
        conversation=conversation, seq=1, role=Message.Role.USER, content=content
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_message_seq=1)
    return Run.objects.create(conversation=conversation, trigger_message=trigger)


def test_claiming_a_queued_run_marks_it_running_and_loads_what_it_executes_with(user):
    run = queued_run(user)

    claimed = lifecycle.run_claim(run_id=run.pk, task_id="celery-task-7")

    with CaptureQueriesContext(connection) as reads:
        loaded = (
            claimed.conversation.owner.pk, claimed.conversation.model_id,
            claimed.conversation.last_message_seq, claimed.conversation.mode,
            claimed.trigger_message.content, claimed.trigger_message.seq,
            claimed.model_id, claimed.mode,
        )  # fmt: skip
    assert loaded == (user.pk, None, 1, "react", "Summarise this", 1, None, "")
    assert reads.captured_queries == []  # all of it came with the claim
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.task_id == "celery-task-7"
    assert run.started_at is not None and run.heartbeat_at == run.started_at


def test_a_run_is_claimed_once_and_never_after_its_stop(user):
    run = queued_run(user)
    assert lifecycle.run_claim(run_id=run.pk) is not None
    assert lifecycle.run_claim(run_id=run.pk) is None  # running already: someone has it

    stopped = queued_run(user)
    Run.objects.filter(pk=stopped.pk).update(cancel_requested=True)
    assert lifecycle.run_claim(run_id=stopped.pk) is None
    stopped.refresh_from_db()
    assert stopped.status == Run.Status.QUEUED and stopped.started_at is None


def test_claiming_without_a_task_id_keeps_the_one_recorded(user):
    run = queued_run(user)
    Run.objects.filter(pk=run.pk).update(task_id="earlier")
    lifecycle.run_claim(run_id=run.pk)
    run.refresh_from_db()
    assert run.task_id == "earlier"


def test_closing_a_run_records_how_it_ended(user):
    run = queued_run(user)
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}

    claimed = lifecycle.run_claim(run_id=run.pk)

    followup = lifecycle.run_close_unanswered(
        run=claimed, model=None, taken_in=[], status=Run.Status.FAILED,
        error="The model is unreachable.", iterations=2, usage=usage, elapsed=1.25,
    )  # fmt: skip

    run.refresh_from_db()
    assert (run.status, run.error, run.iterations, run.usage, run.elapsed) == (
        "failed",
        "The model is unreachable.",
        2,
        usage,
        1.25,
    )
    assert run.finished_at is not None and run.finished_at >= run.started_at
    assert followup is None


def test_a_heartbeat_before_the_claim_does_not_stop_the_run(user):
    """A run listens for Stop from before its claim; under load a beat can come first.
    It must not read "not running" as a stop (a burst of 200 runs lost one this way)."""
    queued = queued_run(user)
    stopped = queued_run(user, "Stop me")
    Run.objects.filter(pk=stopped.pk).update(cancel_requested=True)
    ended = queued_run(user, "Over")
    Run.objects.filter(pk=ended.pk).update(status=Run.Status.FAILED)

    states = beat_and_read([queued.pk, stopped.pk, ended.pk])

    assert states == {queued.pk: (False, []), stopped.pk: (True, []), ended.pk: (True, [])}
    assert lifecycle.run_claim(run_id=queued.pk) is not None


# ------------------------------------------------------------- runs without a live owner


def inject(run: Run, content: str) -> Message:
    """A follow-up the user sent while ``run`` was active (not delivered to it)."""
    seq = Conversation.objects.get(pk=run.conversation_id).last_message_seq + 1
    Conversation.objects.filter(pk=run.conversation_id).update(last_message_seq=seq)
    return Message.objects.create(
        conversation_id=run.conversation_id, seq=seq, role=Message.Role.USER,
        content=content, kind=Message.Kind.INJECT, run=run, pinned=True,
    )  # fmt: skip


def published(run: Run) -> list[tuple[str, dict]]:
    return list(run.events.order_by("seq").values_list("channel", "payload"))


def test_a_queued_run_a_worker_holds_is_beaten_and_never_swept(user, settings):
    """A worker that took the run but cannot claim it yet (the database was away) owns it:
    its beats keep the sweep off, however long ago the run was created."""
    settings.AGENTSITE_EXECUTION = "celery"
    run = queued_run(user)
    long_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(created_at=long_ago)

    beat_and_read([run.pk])

    assert lifecycle.run_sweep_stale() == 0
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.heartbeat_at > long_ago
    assert lifecycle.run_claim(run_id=run.pk) is not None


def test_a_queued_run_nobody_took_is_reported_with_its_follow_ups_released(user, settings):
    settings.AGENTSITE_EXECUTION = "celery"
    settings.AGENTSITE_RUN_STALE_SECONDS = 25
    run = queued_run(user)
    waiting = inject(run, "and the weather?")
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=26))

    assert lifecycle.run_sweep_stale() == 1

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "no worker took it within 25 seconds" in run.error and "Retry" in run.error
    waiting.refresh_from_db()
    assert (waiting.kind, waiting.pinned) == (Message.Kind.CHAT, False)  # a plain message now
    (error_channel, error), (unanswered_channel, unanswered) = published(run)
    assert error_channel == "error" and error["message"] == run.error
    assert unanswered_channel == "unanswered"
    assert [m["content"] for m in unanswered["messages"]] == ["and the weather?"]


def test_a_run_that_failed_to_start_releases_its_follow_ups_live(user):
    run = queued_run(user)
    waiting = inject(run, "also this")

    lifecycle.run_fail_unstarted(run.pk, lifecycle.DATABASE_DOWN_AT_START)

    run.refresh_from_db()
    waiting.refresh_from_db()
    assert run.error == lifecycle.DATABASE_DOWN_AT_START and waiting.kind == Message.Kind.CHAT
    assert [channel for channel, _ in published(run)] == ["error", "unanswered"]


@pytest.mark.parametrize("execution, swept", [("embedded", 1), ("celery", 0)])
def test_embedded_runs_from_before_the_server_started_are_dead_at_once(
    user, settings, execution, swept
):
    """In embedded mode the one server executes every run: one that last showed life
    before it started has no owner, whatever the stale period says."""
    settings.AGENTSITE_EXECUTION = execution
    settings.AGENTSITE_RUN_STALE_SECONDS = 3600
    running = queued_run(user)
    before_start = lifecycle.PROCESS_STARTED - timedelta(seconds=1)
    Run.objects.filter(pk=running.pk).update(status=Run.Status.RUNNING, heartbeat_at=before_start)

    assert lifecycle.run_is_stale(Run.objects.get(pk=running.pk)) == bool(swept)
    assert lifecycle.run_sweep_stale() == swept
    if swept:
        running.refresh_from_db()
        assert running.status == Run.Status.FAILED and "interrupted" in running.error


def test_start_failures_say_what_failed():
    from django.db import OperationalError

    from core.outages import is_disk_full

    full = OperationalError("could not extend file: No space left on device")
    assert is_disk_full(full) and is_disk_full(OperationalError("database or disk is full"))
    assert lifecycle.start_failure(full) == lifecycle.DISK_FULL_AT_START
    assert lifecycle.start_failure(OperationalError("connection refused")) == (
        lifecycle.DATABASE_DOWN_AT_START
    )
    assert lifecycle.start_failure(KeyError("bug")) == lifecycle.COULD_NOT_START
