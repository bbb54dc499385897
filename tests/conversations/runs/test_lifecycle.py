"""A run's state changes: claimed once, closed with how it ended."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

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
