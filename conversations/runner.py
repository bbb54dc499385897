"""The one coroutine that executes a run, wherever it is launched from.

Embedded mode awaits it on the ASGI server's loop; in team mode a Celery task hands it to
its worker process's one run loop and waits. LLM calls never happen inside a DB transaction:
every ORM access is a short ``sync_to_async`` call. The process's run poller
(:mod:`conversations.watcher`) heart-beats, turns the durable Stop flag into cancelling
the token and delivers follow-ups (inject messages) to the engine's queue.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations import compaction, eventlog, launcher
from conversations.asyncdb import db
from conversations.markdown import render_markdown
from conversations.models import Conversation, Message, Run
from conversations.publisher import RunPublisher, write_event_rows
from conversations.services import (
    default_model_cached,
    followups_left_over,
    message_create,
    next_message_seq,
    run_claim,
    run_close,
    run_create_followup,
)
from conversations.watcher import poller
from engine import CancelledRun, CancelToken, InterruptQueue, LLMError, ReActAgent
from engine.agent import AgentResult
from engine.events import Compact, Done, ErrorEvent, Inject
from engine.loops import PerLoop

logger = logging.getLogger(__name__)


def _setup_slots() -> asyncio.Semaphore:
    """Runs of one process in their set-up (claim, load, build the agent) or in their
    closing (save the answer, close the run) at once: ``AGENTSITE_RUN_SETUP_CONCURRENCY``
    each. The steps are a database thread's CPU for a few ms, and runs arrive and end in
    bursts: 200 runs starting together kept a worker's loop saturated for two seconds
    while the runs already streaming waited (tokens 100-400 ms late), and sixteen threads
    saving answers at once left the loop a sixteenth of the interpreter lock. Admitted in
    order, a burst takes no longer in all, and each step is quicker.
    """
    return asyncio.Semaphore(settings.AGENTSITE_RUN_SETUP_CONCURRENCY)


_startups: PerLoop[asyncio.Semaphore] = PerLoop(_setup_slots)
_closings: PerLoop[asyncio.Semaphore] = PerLoop(_setup_slots)


@dataclass
class RunSetup:
    run: Run
    conversation: Conversation
    user: Any
    query: str
    history: compaction.StoredHistory
    start_seq: int
    model: Any = None
    llm: Any = None
    registry: Any = None
    setup_error: str = ""  # why the agent cannot be built (shown to the user)
    followups_waiting: bool = False
    trigger_seq: int = 0  # the number of the message that started the run


def _prepare(run_id: int, task_id: str = "") -> RunSetup | None:
    """Claim the run and build its agent's parts: one ORM round trip before the first LLM
    call instead of two (each costs a thread hop and connection checks)."""
    setup = _claim(run_id, task_id)
    if setup is None:
        return None
    try:
        setup.model, setup.llm, setup.registry = _build_agent_parts(setup)
    except LLMSetupError as exc:
        setup.setup_error = str(exc)
    return setup


def _claim(run_id: int, task_id: str = "") -> RunSetup | None:
    """Mark the run running (only if still queued) and load what it needs."""
    run = run_claim(run_id=run_id, task_id=task_id)
    if run is None:
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.CANCELLED, finished_at=timezone.now()
        )
        return None
    conversation = run.conversation
    trigger = run.trigger_message
    query = trigger.content if trigger else ""
    trigger_seq = trigger.seq if trigger else 0
    history = compaction.history_load(run=run)
    return RunSetup(
        run=run,
        conversation=conversation,
        user=conversation.owner,
        query=query,
        history=history,
        start_seq=conversation.last_event_seq,
        # A message numbered after the trigger may be a follow-up for this run, saved
        # while it was queued: the poller checks at once. Most runs have none.
        followups_waiting=conversation.last_message_seq > trigger_seq,
        trigger_seq=trigger_seq,
    )


def _build_agent_parts(setup: RunSetup):
    from agentsite.configcache import config_cache, current_token
    from agentsite.errors import ApplicationError
    from llms.selectors import model_get_for_user
    from llms.services import build_llm
    from tools.registry import ToolContext
    from tools.services import tool_rows_for_user, tools_for_user

    user = setup.user
    token = current_token()  # the model and tool rows are cached while it is unchanged
    model_id = setup.conversation.model_id
    if model_id is not None:
        # Re-checked at run start: an admin may have disabled it or changed its groups.
        try:
            model = config_cache.get(
                ("model", user.pk, model_id),
                token,
                lambda: model_get_for_user(user=user, model_id=model_id),
            )
        except ApplicationError as exc:
            raise LLMSetupError(f"{exc.message} Pick another model for this conversation.") from exc
    else:
        model = default_model_cached(user=user)
    if model is None:
        raise LLMSetupError(
            "No language model is configured. An administrator can add one in the admin "
            "(LLM providers and models)."
        )
    llm = build_llm(model=model)
    context = ToolContext(
        user_id=user.pk, conversation_id=setup.conversation.pk, run_id=setup.run.pk
    )
    rows = config_cache.get(("tools", user.pk), token, lambda: tool_rows_for_user(user=user))
    registry = tools_for_user(user=user, context=context, rows=rows)
    return model, llm, registry


class LLMSetupError(Exception):
    """The run cannot start (no model, provider misconfigured)."""


async def execute_run(
    run_id: int, *, token: CancelToken | None = None, task_id: str = ""
) -> str | None:
    """Execute one run end to end; returns its final status (None if it never started)."""
    token = token or CancelToken()
    queue = InterruptQueue()
    inject_ids: list[int] = []  # the publisher's view renders Inject events against them

    def deliver(message_id: int, content: str) -> None:
        # The id first: the engine's Inject event for this text is rendered against it.
        inject_ids.append(message_id)
        queue.put(content)

    # Watched before the claim: a Stop or follow-up saved from now on wakes the poller;
    # one saved before is caught by the claim (Stop) or seen by it (follow-up, below).
    await poller.watch(run_id, token, deliver)
    try:
        async with _startups.get():
            setup = await db(_prepare)(run_id, task_id)
    except Exception:
        poller.forget(run_id)
        logger.exception("run %s could not start", run_id)
        await db(_fail_unstarted)(run_id)
        return Run.Status.FAILED
    if setup is None:
        poller.forget(run_id)
        logger.info("run %s was cancelled before it started", run_id)
        return None
    if setup.followups_waiting:
        poller.wake(run_id)
    publisher = RunPublisher(
        run_id=run_id, conversation_id=setup.conversation.pk, start_seq=setup.start_seq
    )
    publisher.view.inject_ids = inject_ids
    started = time.perf_counter()
    status, error, result, llm = Run.Status.FAILED, "", None, None
    finished = False
    unsaved = False  # the answer could not be saved (the engine goes on: its callback failed)
    taken_in = 0  # follow-ups the agent took in (one Inject event each, delivery order)
    followup: tuple[Run, list[Message]] | None = None  # the run answering the others

    async def on_event(event) -> None:
        nonlocal finished, taken_in, followup, unsaved
        if isinstance(event, Inject):
            taken_in += 1
        if isinstance(event, Done) and result is not None:
            # The answer saved, the run closed and its last events written, in one
            # transaction, before the done frame goes out: the live footer can pin the
            # answer, and a message sent by someone who has seen "done" starts a new run
            # (numbering its events after this one's) instead of joining this one.
            await publisher.send_pending_delta()
            elapsed = time.perf_counter() - started
            closing = functools.partial(
                _save_answer_and_finish, setup, event.answer, event.usage, result, elapsed,
                taken_in=inject_ids[:taken_in], shown_answer=publisher.view.answer_text,
            )  # fmt: skip
            try:
                async with _closings.get():
                    entry, (message, followup) = await publisher.write_last(
                        event.channel, event.to_dict(), closing
                    )
            except Exception:
                logger.exception("run %s could not save its answer", run_id)
                unsaved = True
                return
            publisher.view.assistant_message = message
            finished = True
            await publisher.send_written(entry)
            return
        await publisher.on_event(event)

    try:
        if setup.setup_error:
            raise LLMSetupError(setup.setup_error)
        model, llm, registry = setup.model, setup.llm, setup.registry
        guard = compaction.context_guard_for(model, llm)
        loaded = await compaction.compact_on_load(setup.history, query=setup.query, guard=guard)
        if loaded.compacted:
            await db(compaction.summary_store)(run_id=run_id, result=loaded, model_used=str(model))
            await publisher.on_event(Compact(loaded.original_messages, loaded.kept_messages))
        agent = ReActAgent(
            llm,
            registry,
            interrupt_queue=queue,
            on_event=on_event,
            cancel=token,
            context_guard=guard,
        )
        result = await agent.run(setup.query, loaded.messages)
        if result.status in (Run.Status.SUCCEEDED, Run.Status.PAUSED):
            async for _chunk in agent.stream_answer(result, setup.query):
                pass
        status = result.status
        error = result.error or ""
        if unsaved:
            status, error = Run.Status.FAILED, UNSAVED_ANSWER
        if status == Run.Status.FAILED and not error:
            error = result.answer
    except CancelledRun:
        status = Run.Status.CANCELLED
    except LLMSetupError as exc:
        error = str(exc)
    except LLMError as exc:
        error = f"The language model request failed: {exc}"
    except Exception as exc:  # the conversation must stay consistent whatever broke
        logger.exception("run %s crashed", run_id)
        error = f"The run stopped because of an internal error ({type(exc).__name__})."
    finally:
        poller.forget(run_id)
        if llm is not None and hasattr(llm, "aclose"):
            await llm.aclose()
    elapsed = time.perf_counter() - started
    if status == Run.Status.FAILED:
        await publisher.publish("error", ErrorEvent(_readable(error), "failed").to_dict())
    elif status == Run.Status.CANCELLED:
        await publisher.publish("error", ErrorEvent("Stopped.", "cancelled").to_dict())
    await publisher.close()
    if not finished:
        async with _closings.get():
            followup = await db(_finish_unanswered)(
                setup, status, error, result, elapsed, inject_ids[:taken_in]
            )
    if followup is not None:
        await _start_followup(publisher, *followup)
    logger.info(
        "run %s finished: %s in %.2fs, %d frames, %d log writes, %d iterations%s",
        run_id, status, elapsed, publisher.frames_sent, publisher.db_writes,
        result.iterations if result is not None else 0,
        f", Celery task {task_id}" if task_id else "",
    )  # fmt: skip
    return status


async def _start_followup(publisher: RunPublisher, run: Run, messages: list[Message]) -> None:
    """Announce the run answering this one's left-over follow-ups, then launch it: its
    block is on the page (and its number reserved in the log) before its first frame."""
    await publisher.publish(
        "followup",
        {
            "run_id": run.pk,
            "messages": [{"id": m.pk, "content": m.content, "pinned": m.pinned} for m in messages],
        },
    )
    await publisher.close()
    await asyncio.to_thread(launcher.launch, run.pk)


UNSAVED_ANSWER = (
    "The answer could not be saved because of an internal error. Send the message again."
)


def _readable(error: str) -> str:
    return error or "The run failed."


def _save_answer_and_finish(
    setup: RunSetup,
    answer: str,
    usage: dict,
    result: AgentResult,
    elapsed: float,
    log_entries: list[eventlog.Entry],
    *,
    taken_in: list[int],
    shown_answer: str = "",
) -> tuple[Message, tuple[Run, list[Message]] | None]:
    """Save the answer, close the run and write its last events (``log_entries``, the
    done event last). Returns the message and the follow-up run, if any (see
    :func:`_finish`).

    ``shown_answer`` (the streamed text, as the done frame will render it) is rendered
    here first, off the event loop, so the done frame finds it in the render cache: a
    300-token answer takes 1.6 ms of markdown, and when many runs end together those
    renders queued up on the loop ahead of every other run's tokens.
    """
    if shown_answer:
        render_markdown(shown_answer)
    with transaction.atomic():
        done_seq = log_entries[-1][0]
        seq, _title = next_message_seq(setup.conversation.pk, events_through=done_seq)
        write_event_rows([(setup.conversation.pk, log_entries)])
        message = message_create(
            conversation=setup.conversation,
            seq=seq,
            role=Message.Role.ASSISTANT,
            content=answer,
            run=setup.run,
            usage=usage,
        )
        # Numbered right after the trigger: nobody wrote during the run, no follow-ups.
        nothing_sent = seq == setup.trigger_seq + 1
        followup = _finish(
            setup, result.status, result.error or "", result, elapsed,
            taken_in, check_followups=not nothing_sent,
        )  # fmt: skip
    return message, followup


def _fail_unstarted(run_id: int) -> None:
    """A run whose setup crashed: failed with a message, never left "running"."""
    from conversations.publisher import publish_events_sync

    error = "The run could not start because of an internal error. Send the message again."
    updated = Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).update(
        status=Run.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if updated:
        publish_events_sync(run=Run.objects.get(pk=run_id), events=[ErrorEvent(error, "failed")])


def _finish_unanswered(
    setup: RunSetup,
    status: str,
    error: str,
    result: AgentResult | None,
    elapsed: float,
    taken_in: list[int],
) -> tuple[Run, list[Message]] | None:
    """Close a run that ended without an answer (its events are all written by now);
    returns the follow-up run, if any (see :func:`_finish`)."""
    with transaction.atomic():
        Conversation.objects.filter(pk=setup.conversation.pk).update(updated_at=timezone.now())
        return _finish(setup, status, error, result, elapsed, taken_in)


def _finish(
    setup: RunSetup,
    status: str,
    error: str,
    result: AgentResult | None,
    elapsed: float,
    taken_in: list[int],
    *,
    check_followups: bool = True,
) -> tuple[Run, list[Message]] | None:
    """Mark the run finished; its follow-ups other than ``taken_in`` become a new run.

    Those were handed to the run too late, or while its answer was being written (the
    poller delivers until the run ends): no model call of this run saw them. Called
    holding the conversation's row lock, as a message post does (the caller's first
    statement updates that row): a follow-up posted meanwhile either committed before
    the query below, or sees this run closed and joins the new one (or starts its own).
    Without the lock, PostgreSQL could leave it behind. Returns the new run, not yet
    launched, with the messages it answers.
    """
    usage = result.usage.to_dict() if result is not None else {}
    run_close(
        run_id=setup.run.pk,
        status=status,
        error=error if status != Run.Status.SUCCEEDED else "",
        iterations=result.iterations if result is not None else 0,
        usage=usage,
        elapsed=elapsed,
    )
    if usage:
        from llms.services import usage_record

        # The model the run was built with (the conversation may have switched since).
        usage_record(user=setup.user, model=setup.model, usage=usage)
    if not check_followups:
        return None
    left_over = followups_left_over(run_id=setup.run.pk, taken_in=taken_in)
    return run_create_followup(run=setup.run, message_ids=left_over)
