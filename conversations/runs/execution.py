"""The one coroutine that executes a run, wherever it is launched from.

Embedded mode awaits it on the ASGI server's loop; a Celery task hands it to its worker's
run loop and waits. LLM calls never happen inside a database transaction: every ORM
access is a short call on a database thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.chat_settings import effective_params
from conversations.history import compaction, traces
from conversations.history.attachments import (
    conversation_file,
    image_parts,
    load_files,
    message_files,
    readable_file_ids,
    with_files,
)
from conversations.instructions import system_prompt_for
from conversations.models import AgentMode, Message, Run
from conversations.preferences import run_language
from conversations.runs import handover, lifecycle, titling
from conversations.runs.agents import RunModels, agent_for, agent_run, run_models, trace_to_keep
from conversations.runs.approvals import RunApprover
from conversations.runs.control import RunControl, loop_control, read_runs_state
from conversations.runs.db import DATABASE_OUTAGES, db, patiently
from conversations.runs.metering import RunMeter
from conversations.runs.publisher import Entry, RunPublisher
from conversations.runs.wording import duration_words
from core import logcontext
from core.configcache import cached, current_token
from core.errors import ApplicationError
from core.outages import is_disk_full
from engine import (
    AgentResult,
    CancelledRun,
    CancelToken,
    ChatMessage,
    InterruptQueue,
    LLMError,
    ReActAgent,
)
from engine.events import AgentEvent, Compact, Done, ErrorEvent, Inject, IterationStart
from files.models import StoredFile
from knowledge import retrieval as knowledge_retrieval
from knowledge import selectors as knowledge_selectors
from llms.failures import failure_message, retry_helps, translated
from llms.selectors import default_model_for_user, model_get_for_user
from llms.services import build_llm
from tools.builtin.read_file import read_file_tool
from tools.builtin.search_knowledge import search_knowledge_tool
from tools.markdown.render import render_markdown
from tools.registry import ToolContext
from tools.services import tool_rows_for_user, tools_for_user

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Readers who join while a run's end cannot be written hear of it this often.
UNSAVED_RESEND_SECONDS = 5.0
UNSAVED_ANSWER = gettext_noop(
    "The answer could not be saved because of an internal error. Send the message again."
)


def unsaved_reason(error: BaseException) -> str:
    """What readers are told while the end of a run they watched cannot be written."""
    if is_disk_full(error):
        return _(
            "Not saved yet: the server's disk is full. It will be saved as soon as there is "
            "room again; until then, copy anything you need from this page."
        )
    return _("Not saved yet: the database is not answering. Trying again…")


def deadline_message(seconds: float) -> str:
    return _("The run reached its time limit (%(duration)s) and was stopped.") % {
        "duration": duration_words(seconds)
    }


@dataclass
class RunOutcome:
    status: str | None  # None: the run never started (stopped while queued)
    followup_run_id: int | None = None  # the run answering follow-ups this one left over
    # Handed back by a process that is stopping (runs/handover.py): queued again, for
    # whoever launched it to launch again where runs are launched.
    handed_back: bool = False


async def execute_run(run_id: int, *, task_id: str = "") -> RunOutcome:
    """Execute one run end to end. The follow-up run, if any, is announced on the page
    but not launched: the caller launches it where it launches runs."""
    return await RunExecution(run_id, task_id=task_id).execute()


class LLMSetupError(Exception):
    """The run cannot start (no model, provider misconfigured)."""


@dataclass
class RunSetup:
    """What the run executes with, loaded when it is claimed."""

    run: Run
    query: str
    history: compaction.StoredHistory
    start_seq: int  # the conversation's last event before the run's first
    reserved: tuple[int, int]  # the event numbers reserved for the run
    model: Any = None
    llm: Any = None
    registry: Any = None
    models: RunModels | None = None  # the mode, and plan mode's models by role
    error: str = ""  # why the agent cannot be built (shown to the user)
    # A Stop and the follow-ups saved before the claim: (cancel, [(message id, content)]).
    state: tuple[bool, list[tuple[int, str]]] = (False, [])
    # A run resuming a paused one: that run, and the trace it goes on from.
    resumes_run_id: int | None = None
    resume: list[ChatMessage] = field(default_factory=list)
    # Handed back by a stopped worker: ``resume`` is its own trace (``go_on``), and the
    # follow-ups it took in before are its own (runs/handover.py).
    handed_over: bool = False
    go_on: bool = False
    taken_in_before: list[int] = field(default_factory=list)
    # The question's images as image parts (a model with vision).
    images: list[dict[str, Any]] = field(default_factory=list)
    # What the agent is told besides the engine's rules, rebuilt before each LLM call
    # (conversations.instructions).
    system_prompt: Any = None
    # The chat's sampling parameters, as its LLM requests carry them (chat_settings).
    params: dict[str, Any] = field(default_factory=dict)
    # The language of the run's words (conversations.preferences.run_language).
    language: str | None = None


class RunExecution:
    def __init__(self, run_id: int, *, task_id: str = "") -> None:
        self.run_id = run_id
        self.task_id = task_id
        self.token = CancelToken()
        self.interrupts = InterruptQueue()
        self.inject_ids: list[int] = []  # follow-ups handed to the engine, in order
        self.taken_in = 0  # how many of them the engine took in (one Inject event each)
        self.control = RunControl(
            run_id, token=self.token, deliver=self._deliver, on_restart=self._note_restart
        )
        self.agent: Any = None  # once built
        self.tool_cut = False  # a tool call was under way when its process stopped it
        self.steps_begun = False  # it called a tool or began a plan's steps
        self.setup: RunSetup | None = None
        self.publisher: RunPublisher | None = None
        self.result: AgentResult | None = None
        self.meter = RunMeter()
        self.answered = False  # the answer is saved and the run closed
        self.unsaved = False  # saving the answer failed
        self.followup: Run | None = None
        self.started = time.perf_counter()
        self.deadline_reached = False
        self.error_detail = ""  # the technical cause of a failure, for admins
        self.retryable = True  # False: a Retry cannot help (llms.failures.retry_helps)
        self.swept = False  # reported interrupted by a sweep before it could close
        self.claimed: Run | None = None  # the run, once this execution claimed it
        self.saved_late = False  # readers saw the run's end before it could be written

    async def execute(self) -> RunOutcome:
        """Execute the run; the loop counts it as executing until its end is written (a
        stopping process waits for that, runs/shutdown.py)."""
        executing = loop_control()
        executing.begin(self.run_id)
        try:
            # The run's language is activated once it is read (_execute): for this task only.
            with translation.override(None):
                return await self._execute()
        finally:
            executing.end(self.run_id)

    async def _execute(self) -> RunOutcome:
        # The log context of the run's task (core/logcontext.py); the conversation once read.
        logcontext.bind(run_id=self.run_id, task_id=self.task_id or None)
        # Wake-ups are received before the claim: a Stop or follow-up saved from now on
        # reaches the run; one saved before is seen by the claim or the first check.
        await self.control.start()
        try:
            try:
                # While the database is away the run stays queued, this process its live
                # owner (the loop's heartbeat says so), and starts once it is back.
                self.setup = await patiently(
                    db(self._prepare),
                    patience=settings.AGENTSITE_RUN_DEADLINE_SECONDS or 600.0,
                    what=f"starting run {self.run_id}",
                )
            except Exception as exc:
                if not isinstance(exc, DATABASE_OUTAGES):
                    logger.exception("run %s could not start", self.run_id)
                await self._fail_start(lifecycle.start_failure(exc))
                return RunOutcome(Run.Status.FAILED)
            if self.setup is None:
                logger.info("run %s was stopped before it started", self.run_id)
                return RunOutcome(None)
            # Its words from here on (failure reasons, frames' labels) are in its language.
            translation.activate(self.setup.language or settings.LANGUAGE_CODE)
            self.meter.start(self.setup.model)
            logger.info(
                "run %s started%s",
                self.run_id,
                f" (Celery task {self.task_id})" if self.task_id else "",
            )
            logcontext.bind(conversation_id=self.setup.run.conversation_id)
            if self.setup.taken_in_before:  # handed back: in the trace it goes on from
                self.inject_ids = list(self.setup.taken_in_before)
                self.taken_in = len(self.inject_ids)
            self.control.apply_state(*self.setup.state)  # saved while it was queued
            deadline = settings.AGENTSITE_RUN_DEADLINE_SECONDS
            timer = (
                asyncio.get_running_loop().call_later(deadline, self._reach_deadline)
                if deadline > 0
                else None
            )
            try:
                status, error = await self._run_agent()
            finally:
                if timer is not None:
                    timer.cancel()
            if self.deadline_reached and status == Run.Status.CANCELLED:
                # Stopped by the deadline, not by the user: incomplete if it began answering.
                began = self.publisher is not None and bool(self.publisher.progress.answer_text)
                status = Run.Status.INCOMPLETE if began else Run.Status.FAILED
                error = deadline_message(deadline)
        finally:
            await self.control.stop()
            llm = self.setup.llm if self.setup is not None else None
            if llm is not None and hasattr(llm, "aclose"):
                await llm.aclose()
            if self.setup is not None and self.setup.models is not None:
                await self.setup.models.aclose()
        if self._stopped_for_restart(status):
            ending = await self._hand_back()
            if ending is None:
                return await self._handed_back()
            status, error = ending
        await self._end(status, error)
        self.meter.end(status, self.result.usage if self.result is not None else None)
        try:
            await self.publisher.release_numbers()
        except Exception:  # they stay a gap in the numbers, nothing more
            logger.warning("run %s could not give back its event numbers", self.run_id)
        logger.info(
            "run %s finished: %s in %.2fs, %d frames, %d log writes, %d iterations%s",
            self.run_id, status, time.perf_counter() - self.started,
            self.publisher.frames_sent, self.publisher.db_writes,
            self.result.iterations if self.result is not None else 0,
            f", Celery task {self.task_id}" if self.task_id else "",
        )  # fmt: skip
        if status == Run.Status.SUCCEEDED and self.answered:
            # Its own task, after everything above: the answer is on the page already.
            titling.after_answer(self.run_id)
        return RunOutcome(status, self.followup.pk if self.followup is not None else None)

    # ------------------------------------------------------------------------ set-up
    def _prepare(self) -> RunSetup | None:
        """Claim the run and load what it executes with (one database thread hop; tried
        again after an outage, the claim once made is kept)."""
        if self.claimed is None:
            self.claimed = lifecycle.run_claim(run_id=self.run_id, task_id=self.task_id)
            if self.claimed is None:
                return None
        # In the same database hop: the language of the run's words (its owner's choice,
        # else the one it was asked in), which the rest of the set-up already speaks.
        language = run_language(self.run_id)
        with translation.override(language):
            setup = self._prepare_claimed(self.claimed)
        setup.language = language
        return setup

    def _prepare_claimed(self, run: Run) -> RunSetup:
        trigger = run.trigger_message
        # Handed back by a stopped worker, it goes on from its own trace (none: it starts
        # again); resuming a paused run, it reads the history before that run's question.
        handed = traces.handed_over_point(run)
        own = handed.trace if handed is not None else []
        resuming = handed if own else traces.resume_point(run)
        attached = None
        if trigger is not None:
            load_files([trigger])
            attached = with_files(trigger.content, message_files(trigger))
        setup = RunSetup(
            run=run,
            query=attached.text if attached else "",
            history=compaction.history_load(run=resuming.history_run if resuming else run),
            start_seq=run.last_event_seq,
            reserved=run.reserved_event_numbers,
        )
        if handed is not None:
            setup.handed_over = True
            setup.taken_in_before = handover.taken_in_before(run.pk)
        if own:
            setup.resume, setup.go_on = own, True
        elif resuming is not None:
            setup.resumes_run_id, setup.resume = resuming.paused_run_id, resuming.trace
            if not resuming.trace:
                setup.error = _("The paused run kept no trace to go on from. Ask again instead.")
        # A message numbered after the trigger may be a follow-up saved while the run was
        # queued (most runs have none: no query for them).
        if trigger is None or run.conversation.last_message_seq > trigger.seq:
            setup.state = read_runs_state([self.run_id])[self.run_id]
        try:
            setup.model, setup.llm, setup.registry, setup.params = _build_agent_parts(run)
            if attached is not None and attached.images:
                setup.images = _images_for(setup.model, attached.images)
            _offer_read_file(setup.registry, run)
            _offer_search_knowledge(setup.registry, run)
            setup.system_prompt = system_prompt_for(
                conversation=run.conversation,
                model=setup.model,
                tool_names=setup.registry.names(),
            )
            # A trace goes on as the ReAct loop that wrote it; images go to a ReAct loop
            # (plan mode's planner and steps read text).
            setup.models = (
                RunModels(AgentMode.REACT)
                if setup.go_on or setup.images
                else run_models(run, setup.model, setup.llm)
            )
        except LLMSetupError as exc:
            setup.error = str(exc)
        return setup

    async def _fail_start(self, reason: str) -> None:
        """Fail the run that could not start, saying why; if even that cannot be written,
        the sweep reports it once the database is back (no process beats for it now)."""
        try:
            await patiently(
                functools.partial(db(lifecycle.run_fail_unstarted), self.run_id, reason),
                what=f"failing run {self.run_id}",
            )
        except DATABASE_OUTAGES:
            logger.warning("run %s could not start; the sweep will report it", self.run_id)

    def _reach_deadline(self) -> None:
        """The run's time is up: it stops as a Stop would, and says why."""
        self.deadline_reached = True
        self.token.cancel()

    def _deliver(self, message_id: int, content: str) -> None:
        # The id first: the engine's Inject event for this text is rendered against it.
        self.inject_ids.append(message_id)
        self.interrupts.put(content)

    # ----------------------------------------------------------------------- the run
    async def _run_agent(self) -> tuple[str, str]:
        """Run the agent and stream its answer; the run's status and error."""
        setup = self.setup
        assert setup is not None
        self.publisher = RunPublisher(
            run_id=self.run_id,
            conversation_id=setup.run.conversation_id,
            start_seq=setup.start_seq,
            reserved=setup.reserved,
        )
        try:
            # First: which run this one goes on from (said once, not again after a hand-over).
            if setup.resumes_run_id is not None and not setup.handed_over:
                await self.publisher.publish("resume", _resume_payload(setup))
            if setup.error:
                raise LLMSetupError(setup.error)
            guard = compaction.context_guard_for(setup.model, setup.llm)
            loaded = await compaction.compact_on_load(setup.history, query=setup.query, guard=guard)
            if loaded.compacted:
                await db(compaction.summary_store)(
                    run_id=self.run_id, result=loaded, model_used=str(setup.model)
                )
                await self.publisher.on_event(
                    Compact(loaded.original_messages, loaded.kept_messages)
                )
            assert setup.models is not None
            agent = await agent_for(
                setup.models,
                llm=setup.llm,
                tools=setup.registry,
                query=setup.query,
                history=loaded.messages,
                rewrite_answer=setup.model.rewrite_answer,
                small_model=setup.model.small,
                on_event=self._on_event,
                interrupt_queue=self.interrupts,
                cancel=self.token,
                context_guard=guard,
                max_answer_tokens=setup.params.get("max_tokens") or setup.model.max_output_tokens,
                system_prompt=setup.system_prompt,
                approver=RunApprover(self.run_id, self.control),
            )
            self.agent = agent
            self.result = await agent_run(
                agent,
                setup.query,
                loaded.messages,
                resume=setup.resume,
                go_on=setup.go_on,
                images=setup.images,
            )
            await self._keep_trace(trace_to_keep(agent, self.result))
            if self.result.status in (
                Run.Status.SUCCEEDED,
                Run.Status.PAUSED,
                Run.Status.INCOMPLETE,
            ):
                async for _chunk in agent.stream_answer(self.result, setup.query):
                    pass
            if self.unsaved:
                return Run.Status.FAILED, _(UNSAVED_ANSWER)
            status, error = self.result.status, self.result.error or ""
            if status == Run.Status.FAILED:
                # The engine's answer says it in plain words; its error is the detail.
                self.error_detail, error = error, translated(self.result.answer) or error
                self.retryable = retry_helps(self.result.answer)
            return status, error
        except CancelledRun:
            return Run.Status.CANCELLED, ""
        except LLMSetupError as exc:
            return Run.Status.FAILED, str(exc)
        except LLMError as exc:
            self.error_detail = f"{type(exc).__name__}: {exc}"
            self.retryable = retry_helps(exc)
            return Run.Status.FAILED, failure_message(exc)
        except Exception as exc:  # the conversation must stay consistent whatever broke
            logger.exception("run %s crashed", self.run_id)
            self.error_detail = f"{type(exc).__name__}: {exc}"
            return Run.Status.FAILED, _("The run stopped because of an internal error. Retry?")

    async def _keep_trace(self, trace: list[ChatMessage]) -> None:
        """Store a paused run's trace before its end is written, so that Continue works
        the moment the page shows it; without it the run is not resumable, not failed."""
        if not trace:
            return
        try:
            await db(traces.trace_store)(run_id=self.run_id, trace=trace)
        except Exception:
            logger.exception("run %s could not keep its trace: it cannot be resumed", self.run_id)

    async def _on_event(self, event: AgentEvent) -> None:
        """The engine's events: the run's ``Done`` closes the run with its answer."""
        assert self.publisher is not None
        self.meter.on_event(event)
        if isinstance(event, Inject):
            self.taken_in += 1
        if isinstance(event, IterationStart) or event.channel == "step_progress":
            self.steps_begun = True
        if isinstance(event, Done) and self.result is not None:
            await self._close_with_answer(event)
            return
        await self.publisher.on_event(event)

    async def _close_with_answer(self, done: Done) -> None:
        """Save the answer, close the run and write its done event in one transaction,
        then send the done frame: by then the live footer can pin the answer, and a
        message sent by someone who saw "done" starts a new run instead of joining this
        one."""
        publisher, setup, result = self.publisher, self.setup, self.result
        assert publisher is not None and setup is not None and result is not None
        outcome = {
            "status": result.status,
            "error": result.error or "",
            "iterations": result.iterations,
            "usage": done.usage,
            "elapsed": time.perf_counter() - self.started,
        }
        entry = None
        try:
            await publisher.drain()
            entry = await publisher.reserve(done.channel, done.to_dict())
            closing = functools.partial(
                db(_close_with_answer),
                run=setup.run,
                model=setup.model,
                answer=done.answer,
                outcome=outcome,
                events=[entry],
                taken_in=self.inject_ids[: self.taken_in],
            )
            _message, self.followup = await self._write_end(closing, entry)
        except lifecycle.RunSwept:
            logger.warning("run %s was reported interrupted meanwhile: answer dropped", self.run_id)
            if entry is not None:
                publisher.release(entry)
            self.swept = True
            return
        except Exception:
            logger.exception("run %s could not save its answer", self.run_id)
            if entry is not None:
                publisher.release(entry)
            self.unsaved = True
            return
        self.answered = True
        await publisher.send_written(entry)
        await self._announce_saved()

    # ---------------------------------------------------------------------- restarts
    def _note_restart(self) -> None:
        """Its process stops it (runs/shutdown.py): note whether a tool call is under way
        now, before the engine reports the calls it cuts as ended."""
        publisher = self.publisher
        self.tool_cut = publisher is not None and bool(publisher.progress.unfinished_calls())

    def _stopped_for_restart(self, status: str) -> bool:
        """Stopped by its process stopping, not by a Stop, its deadline or a sweep."""
        return (
            status == Run.Status.CANCELLED
            and self.control.restarting
            and not self.control.stop_requested
            and not self.deadline_reached
            and not self.answered
        )

    async def _hand_back(self) -> tuple[str, str] | None:
        """Queue the run again to go on from its last completed step on another worker
        (runs/handover.py); None once it is, else the status and the error (said to the
        user) it ends with instead."""
        publisher, setup = self.publisher, self.setup
        assert publisher is not None and setup is not None
        react = isinstance(self.agent, ReActAgent)
        try:
            handovers = await db(handover.handovers_of)(self.run_id)
        except Exception:
            logger.exception("run %s: could not count its hand-overs", self.run_id)
            return Run.Status.FAILED, _(handover.SERVER_RESTARTED)
        refusal = handover.refusal(
            react=react, tool_cut=self.tool_cut, steps_begun=self.steps_begun, handovers=handovers
        )
        if refusal is not None:
            return Run.Status.FAILED, refusal
        trace = self.result.trace if react and self.result is not None else []
        entry = None
        try:
            await publisher.drain()
            payload = {"message": _(handover.HANDED_OVER), "handovers": handovers + 1}
            entry = await publisher.reserve(handover.HANDOVER_CHANNEL, payload)
            await publisher.flush()
            handed = await db(handover.run_hand_back)(
                run=setup.run,
                trace=handover.go_on_from(trace),
                taken_in=self.inject_ids[: self.taken_in],
                events=[entry],
            )
        except lifecycle.RunSwept:  # _end leaves the sweep's report standing
            self.swept = True
            handed = False
        except Exception:
            logger.exception("run %s could not be handed back", self.run_id)
            handed = None
        if handed:
            assert entry is not None
            await publisher.send_written(entry)
            return None
        if entry is not None:
            publisher.release(entry)
        if handed is False and not self.swept:  # a Stop was saved first: it wins
            return Run.Status.CANCELLED, ""
        return Run.Status.FAILED, _(handover.SERVER_RESTARTED)

    async def _handed_back(self) -> RunOutcome:
        """The run is queued again: give back its unused event numbers and say so."""
        assert self.publisher is not None
        self.meter.end("handed_back", self.result.usage if self.result is not None else None)
        try:
            await self.publisher.release_numbers()
        except Exception:  # they stay a gap in the numbers, nothing more
            logger.warning("run %s could not give back its event numbers", self.run_id)
        logger.info(
            "run %s handed back after %.2fs: another worker goes on from its last step",
            self.run_id,
            time.perf_counter() - self.started,
        )
        return RunOutcome(Run.Status.QUEUED, handed_back=True)

    # ------------------------------------------------------------------------ ending
    async def _end(self, status: str, error: str) -> None:
        """Report how the run ended, close it if its answer did not (the report written
        in the same transaction, then sent: a client that saw it finds the run closed),
        announce the run answering its left-over follow-ups."""
        publisher, setup = self.publisher, self.setup
        assert publisher is not None and setup is not None
        if self.swept:  # the sweep reported how it ended, and kept what the log held
            await publisher.close()
            return
        kept = publisher.progress.answer_text  # saved as the incomplete answer below
        ended = _report(status, error, kept, answered=self.answered, retryable=self.retryable)
        if self.answered:  # closed with its answer already: only the report is left
            try:
                if ended is not None:
                    await publisher.publish(ended.channel, ended.to_dict())
                await publisher.close()
            except Exception:
                logger.exception("run %s could not log how it ended", self.run_id)
        else:
            entry = None
            try:
                await publisher.drain()
                if ended is not None:
                    entry = await publisher.reserve(ended.channel, ended.to_dict())
            except Exception:  # the run is closed below all the same
                logger.exception("run %s could not log how it ended", self.run_id)
            result = self.result
            closing = functools.partial(
                db(lifecycle.run_close_unanswered),
                run=setup.run,
                model=setup.model,
                taken_in=self.inject_ids[: self.taken_in],
                # What the page showed of an answer stopped or broken off mid-stream.
                partial_answer=kept,
                events=[entry] if entry is not None else [],
                status=status,
                error=error,
                error_detail=self.error_detail,
                iterations=result.iterations if result is not None else 0,
                usage=result.usage.to_dict() if result is not None else {},
                elapsed=time.perf_counter() - self.started,
            )
            try:
                self.followup = await self._write_end(closing, entry)
            except lifecycle.RunSwept:
                logger.warning("run %s was reported interrupted meanwhile", self.run_id)
                if entry is not None:
                    publisher.release(entry)
                return
            except BaseException:
                if entry is not None:
                    publisher.release(entry)
                raise
            if entry is not None:
                await publisher.send_written(entry)
            await self._announce_saved()
        if status == Run.Status.CANCELLED:
            await self._announce_unanswered()
        if self.followup is not None:
            # On the page (and numbered in the log) before the new run's first frame.
            messages = await db(_followup_messages)(self.followup.pk)
            payload = {"run_id": self.followup.pk, "messages": messages}
            try:
                await publisher.publish("followup", payload)
            except Exception:  # a reload shows the new run all the same
                logger.exception("run %s could not announce its follow-up run", self.run_id)

    async def _write_end(self, closing: Callable[[], Awaitable[T]], entry: Entry | None) -> T:
        """Write the run's end: its events not yet in the log, then ``closing`` (the close
        with the ``entry`` reporting how it ended), in that order.

        While the database refuses (it restarts, its disk is full), readers are not left
        watching a spinner: the end's frame goes out at once marked as not saved yet
        (again every ``UNSAVED_RESEND_SECONDS`` for readers who joined since), and the
        write is tried again until it succeeds; then a ``saved`` event clears the mark.
        """
        publisher = self.publisher
        assert publisher is not None
        told_at: float | None = None
        delay = 0.25
        while True:
            try:
                await publisher.flush()
                return await closing()
            except DATABASE_OUTAGES as exc:
                now = time.monotonic()
                if entry is not None and (
                    told_at is None or now - told_at >= UNSAVED_RESEND_SECONDS
                ):
                    await publisher.send_unsaved(entry, unsaved_reason(exc))
                    told_at = now
                self.saved_late = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _announce_saved(self) -> None:
        """Clear the "not saved yet" mark of an end that readers saw before it was written."""
        if not self.saved_late:
            return
        try:
            await self.publisher.publish("saved", {"run_id": self.run_id})
        except Exception:  # a reload shows the saved run all the same
            logger.exception("run %s could not announce that its end was saved", self.run_id)

    async def _announce_unanswered(self) -> None:
        """Show the follow-ups the Stop left unanswered as the ordinary messages they
        became (the page showed them waiting for the run)."""
        assert self.publisher is not None
        try:
            unanswered = await db(lifecycle.followups_unanswered)(run_id=self.run_id)
            if unanswered is not None:
                await self.publisher.publish(unanswered.channel, unanswered.to_dict())
        except Exception:  # a reload shows them all the same
            logger.exception("run %s could not show its unanswered follow-ups", self.run_id)


def _close_with_answer(*, answer: str, **close: Any) -> tuple[Message, Run | None]:
    """Close the run with its answer (:func:`lifecycle.run_close_with_answer`), then render
    the answer's markdown into the renderer's cache here, off the event loop: the done
    frame shows it, and runs ending together would otherwise render on the loop ahead of
    every other run's tokens."""
    closed = lifecycle.run_close_with_answer(answer=answer, **close)
    render_markdown(answer)
    return closed


def _report(
    status: str, error: str, kept: str, *, answered: bool, retryable: bool = True
) -> ErrorEvent | None:
    """The error event telling how a run without a complete answer ended, if it needs one
    (an incomplete answer that was saved says so in its done event); a failure that a
    Retry cannot cure says so (the page then offers none)."""
    if status == Run.Status.FAILED:
        return ErrorEvent(error or _("The run failed."), "failed", kept, retryable)
    if status == Run.Status.CANCELLED:
        return ErrorEvent(_("Stopped."), "cancelled", kept)
    if status == Run.Status.INCOMPLETE and not answered:
        return ErrorEvent(error, "incomplete", kept)
    return None


def _resume_payload(setup: RunSetup) -> dict[str, Any]:
    """The ``resume`` event: the paused run this one goes on from, and how much of its
    work the model sees again."""
    results = traces.tool_results(setup.resume)
    return {"resumed_run_id": setup.resumes_run_id, "tool_results": results}


def _followup_messages(run_id: int) -> list[dict[str, Any]]:
    return [
        {"id": pk, "content": content, "pinned": pinned}
        for pk, content, pinned in Message.objects.filter(run_id=run_id)
        .order_by("seq")
        .values_list("pk", "content", "pinned")
    ]


def _images_for(model: Any, images: list[StoredFile]) -> list[dict[str, Any]]:
    """The question's images as image parts, or why the model cannot see them (it was
    switched to one without vision after the message was sent)."""
    if not (model.abilities or {}).get("vision"):
        raise LLMSetupError(
            f"{model} cannot read images, and this question has {len(images)}. Pick a "
            "model with vision for this conversation, then Retry."
        )
    return image_parts(images)


def _offer_read_file(registry: Any, run: Run) -> None:
    """The read_file tool, when the conversation has files too long to show whole."""
    owner_id, conversation_id = run.conversation.owner_id, run.conversation_id
    file_ids = readable_file_ids(conversation_id=conversation_id, owner_id=owner_id)
    if file_ids and "read_file" not in registry:
        registry.register(
            read_file_tool(
                lambda file_id: conversation_file(
                    conversation_id=conversation_id, owner_id=owner_id, file_id=file_id
                ),
                file_ids,
            )
        )


def _offer_search_knowledge(registry: Any, run: Run) -> None:
    """The search_knowledge tool, over the conversation's knowledge bases that its owner
    may still read (a base unshared since it was attached is left out)."""
    owner = run.conversation.owner
    bases = list(
        knowledge_selectors.readable_bases(owner)
        .filter(conversations=run.conversation_id)
        .order_by("name")
    )
    if not bases or "search_knowledge" in registry:
        return
    base_ids = [base.pk for base in bases]
    registry.register(
        search_knowledge_tool(
            lambda query, k: knowledge_retrieval.search(owner, base_ids, query, k),
            [base.name for base in bases],
        )
    )


def _build_agent_parts(run: Run) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The run's model row, LLM client, tool registry and sampling parameters. The model
    is re-checked at run start (an admin may have disabled it or changed its groups since
    it was picked); the rows come from the configuration cache while the configuration
    is unchanged. The chat's own settings narrow the tools and set the parameters."""
    user = run.conversation.owner
    # A regenerated answer may ask for another model than the conversation's.
    model_id = run.model_id or run.conversation.model_id
    token = current_token()
    if model_id is not None:
        try:
            model = cached(
                ("model", user.pk, model_id),
                lambda: model_get_for_user(user=user, model_id=model_id),
                token=token,
            )
        except ApplicationError as exc:
            raise LLMSetupError(
                _("%(refusal)s Pick another model for this conversation.")
                % {"refusal": exc.message}
            ) from exc
    else:
        model = cached(
            ("default-model", user.pk), lambda: default_model_for_user(user=user), token=token
        )
    if model is None:
        raise LLMSetupError(
            _(
                "No language model is configured. An administrator can add one in the admin "
                "(LLM providers and models)."
            )
        )
    rows = cached(("tools", user.pk), lambda: tool_rows_for_user(user=user), token=token)
    context = ToolContext(user_id=user.pk, conversation_id=run.conversation_id, run_id=run.pk)
    registry = tools_for_user(user=user, context=context, rows=rows)
    if run.conversation.tools is not None:  # the chat offers only the tools it names
        registry = registry.filter_by_names(run.conversation.tools)
    params = effective_params(run.conversation, model)
    return model, build_llm(model=model, params=params), registry, params
