"""The executor: every step of a plan run by its own agent, as soon as it can run.

Each step gets a fresh :class:`~engine.agent.ReActAgent` with no memory, its own copy of
the tool registry, the model its ``model_hint`` asks for and a time limit. Ready steps run
concurrently under a semaphore; a step that fails fails the steps that need it; steps
that can never run (their dependencies are missing or circular) fail as a deadlock.

The step agents' events become ``step_progress`` events (their answers are the steps'
results, never shown as the answer); approval requests pass through unchanged.

Stop: every running step is cancelled (the agents share the run's cancel token, so their
HTTP requests end too) and :meth:`PlanExecutor.run` raises ``CancelledRun``.
A follow-up from the user: it is taken in (``inject``), steps not started yet are skipped,
running steps finish (their results are worth keeping for the new plan), and the report
carries the follow-up so the agent replans.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.agent import FAILED as AGENT_FAILED
from engine.agent import AgentResult, ContextGuardLike, ReActAgent, Step
from engine.answer import CANCELLED as AGENT_CANCELLED
from engine.answer import PAUSED as AGENT_PAUSED
from engine.approval import Approver
from engine.cancel import CancelledRun, CancelToken
from engine.events import (
    Approval,
    EventCallback,
    Inject,
    IterationDone,
    IterationStart,
    StepProgress,
    ThinkingStart,
    emit,
)
from engine.interrupts import InterruptSource
from engine.llm.base import LLM, ChatDelta, ChatResponse
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage, Usage
from engine.plan import prompts
from engine.plan.common import drain_followups, llm_for_role, model_name
from engine.plan.config import PlanConfig
from engine.plan.model import Plan, PlanStep
from engine.plan.results import (
    CANCELLED,
    COMPLETED,
    FAILED,
    SKIPPED,
    ExecutionReport,
    StepResult,
)
from engine.prompts import SystemPrompt, current_system_prompt
from engine.tools import ToolRegistry

__all__ = ["RESULT_EVENT_CHARS", "PlanExecutor"]

logger = logging.getLogger(__name__)

# A completed step's result as its ``step_progress`` event carries it.
RESULT_EVENT_CHARS = 2_000
CANCELLED_BY_USER = "Cancelled by the user"
FOLLOWUP_SKIP = "The user sent a follow-up: the plan is being made again."


class _MeteredLLM:
    """A step's model, counting tokens as each call ends, so a running step's progress
    events can say how many it has used so far."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.abilities = llm.abilities
        self.usage = Usage()

    async def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        response = await self.llm.chat(messages, **kwargs)
        self.usage = self.usage + response.usage
        return response

    async def stream_chat(
        self, messages: Sequence[ChatMessage], **opts: Any
    ) -> AsyncIterator[ChatDelta]:
        stream = self.llm.stream_chat(messages, **opts)
        try:
            async for delta in stream:
                if delta.usage is not None:
                    self.usage = self.usage + delta.usage
                yield delta
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


class _StepReporter:
    """Turns one step agent's events into ``step_progress`` events and remembers its tool
    calls (a step that times out has no result to read them from)."""

    def __init__(
        self,
        on_event: EventCallback | None,
        step: PlanStep,
        round_no: int,
        model: str,
        meter: _MeteredLLM | None = None,
    ) -> None:
        self.deliver = on_event
        self.step = step
        self.round_no = round_no
        self.model = model
        self.meter = meter
        self.started: float | None = None
        self.iteration = 0
        self.tool_steps: list[Step] = []
        self._args: dict[tuple[int, str], deque[dict[str, Any]]] = defaultdict(deque)

    @property
    def elapsed(self) -> float:
        return 0.0 if self.started is None else time.perf_counter() - self.started

    @property
    def tokens(self) -> int:
        return self.meter.usage.total_tokens if self.meter is not None else 0

    async def send(self, event: str, *, tokens: int | None = None, **extra: Any) -> None:
        progress = StepProgress(
            self.step.id,
            event,
            self.step.task,
            self.model,
            self.elapsed,
            self.tokens if tokens is None else tokens,
            self.round_no,
            extra,
        )
        await emit(self.deliver, progress)

    async def start(self) -> None:
        self.started = time.perf_counter()
        await self.send("started")

    async def on_event(self, event: Any) -> None:
        if isinstance(event, ThinkingStart):
            self.iteration = event.iteration
            await self.send("iteration", iteration=event.iteration)
        elif isinstance(event, IterationStart):
            self._args[(event.iteration, event.tool_name)].append(event.tool_args)
            await self.send(
                "tool",
                status="start",
                iteration=event.iteration,
                tool_name=event.tool_name,
                tool_args=event.tool_args,
            )
        elif isinstance(event, IterationDone):
            waiting = self._args.get((event.iteration, event.tool_name))
            args = waiting.popleft() if waiting else {}
            self.tool_steps.append(
                Step(
                    event.iteration,
                    event.tool_name,
                    args,
                    event.observation,
                    event.error,
                    event.iter_elapsed,
                )
            )
            await self.send(
                "tool",
                status="done",
                iteration=event.iteration,
                tool_name=event.tool_name,
                observation=event.observation,
                error=event.error,
                iter_elapsed=round(event.iter_elapsed, 4),
            )
        elif isinstance(event, Approval):
            await emit(self.deliver, event)  # the user must see the request to answer it
        # Thinking, thought and answer events stay inside the step: its answer is its result.

    def result(self, status: str, **kwargs: Any) -> StepResult:
        kwargs.setdefault("tool_steps", list(self.tool_steps))
        kwargs.setdefault("iterations", self.iteration)
        kwargs.setdefault("usage", self.meter.usage if self.meter is not None else Usage())
        return StepResult(self.step, status, model=self.model, elapsed=self.elapsed, **kwargs)

    async def fail(self, error: str, *, status: str = FAILED) -> StepResult:
        result = self.result(status, error=error)
        await self.send("failed", error=error, iterations=result.iterations)
        return result

    async def skip(self, reason: str) -> StepResult:
        result = self.result(SKIPPED, error=reason)
        await self.send("skipped", reason=reason)
        return result

    async def finish(self, outcome: AgentResult, max_iterations: int) -> StepResult:
        """The step's result from its agent's."""
        common = {
            "tool_steps": outcome.steps,
            "iterations": outcome.iterations,
            "usage": outcome.usage,
        }
        error: str | None = None
        status = FAILED
        if outcome.status == AGENT_CANCELLED:
            status, error = CANCELLED, CANCELLED_BY_USER
        elif outcome.status in (AGENT_FAILED, AGENT_PAUSED):
            error = outcome.answer or outcome.error or f"the step's agent {outcome.status}"
        elif outcome.stop_reason == "max_iterations":
            error = f"the step did not finish within {max_iterations} iterations"
        elif not outcome.answer.strip():
            error = "the step gave no result"
        else:
            status = COMPLETED
        tokens = outcome.usage.total_tokens
        if status != COMPLETED:
            result = self.result(status, error=error, **common)
            await self.send("failed", tokens=tokens, error=error, iterations=outcome.iterations)
            return result
        result = self.result(COMPLETED, result=outcome.answer.strip(), **common)
        await self.send(
            "completed",
            tokens=tokens,
            result=result.result[:RESULT_EVENT_CHARS],
            iterations=outcome.iterations,
        )
        return result


@dataclass
class _Round:
    """Mutable state of one ``run()``."""

    plan: Plan
    goal: str
    round_no: int
    pending: list[PlanStep]  # not launched yet, in plan order
    running: dict[asyncio.Future[StepResult], PlanStep] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # holding the semaphore
    results: dict[str, StepResult] = field(default_factory=dict)
    followups: list[str] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """A follow-up came: nothing more is started this round."""
        return bool(self.followups)

    def report(self) -> ExecutionReport:
        results = [self.results[s.id] for s in self.plan.steps if s.id in self.results]
        return ExecutionReport(self.round_no, self.plan, results, list(self.followups))


class PlanExecutor:
    """Runs plans; one executor may run several rounds (one plan each)."""

    def __init__(
        self,
        registry: ModelRegistry,
        tools: ToolRegistry,
        *,
        llm: LLM | None = None,
        config: PlanConfig | None = None,
        on_event: EventCallback | None = None,
        cancel: CancelToken | None = None,
        interrupt_queue: InterruptSource | None = None,
        approver: Approver | None = None,
        context_guard: ContextGuardLike | None = None,
        system_prompt: SystemPrompt = None,
    ) -> None:
        self.registry = registry
        self.tools = tools
        self.llm = llm if llm is not None else registry.get_default()
        self.config = config or PlanConfig()
        self.on_event = on_event
        self.cancel = cancel
        self.interrupt_queue = interrupt_queue
        self.approver = approver
        self.context_guard = context_guard
        self.system_prompt = system_prompt

    def _step_system_prompt(self) -> str:
        """A step's system prompt, asked again before each of its calls (the caller's
        part may change while the plan runs: its time of day)."""
        return prompts.step_system_prompt(current_system_prompt(self.system_prompt))

    def llm_for(self, step: PlanStep) -> LLM:
        """The step's model: the one registered for its ``model_hint``, else the
        conversation's."""
        return llm_for_role(self.registry, step.model_hint, self.llm)

    async def run(self, plan: Plan, goal: str, *, round_no: int = 1) -> ExecutionReport:
        """Run ``plan`` (validated by the caller) to its end, a follow-up, or Stop."""
        state = _Round(plan, goal, round_no, list(plan.steps))
        semaphore = asyncio.Semaphore(self.config.concurrency)
        stop = asyncio.ensure_future(self.cancel.wait()) if self.cancel is not None else None
        # Without a queue there is nothing to poll for: wait for the steps themselves.
        poll = self.config.poll_interval if self.interrupt_queue is not None else None
        try:
            while True:
                if self.cancel is not None and self.cancel.cancelled:
                    await self._stop(state)
                    raise CancelledRun("cancelled")
                await self._take_followups(state)
                await self._fail_blocked(state)
                if not state.stopped:
                    self._launch_ready(state, semaphore)
                if not state.running:
                    if state.pending:
                        await self._deadlock(state)
                    break
                waiting: set[asyncio.Future[Any]] = set(state.running)
                if stop is not None:
                    waiting.add(stop)
                done, _ = await asyncio.wait(
                    waiting, timeout=poll, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    if task is not stop:
                        self._collect(state, task)
        finally:
            if stop is not None:
                stop.cancel()
            if state.running:  # leaving by an exception: no step outlives the run
                await self._stop(state)
        report = state.report()
        logger.info(
            "plan round %d: %s",
            round_no,
            ", ".join(f"{r.step.id}={r.status}" for r in report.results),
        )
        return report

    # ------------------------------------------------------------------ scheduling

    def _launch_ready(self, state: _Round, semaphore: asyncio.Semaphore) -> None:
        for step in list(state.pending):
            if all(self._completed(state, dep) for dep in step.dependencies):
                state.pending.remove(step)
                task = asyncio.ensure_future(self._run_step(state, step, semaphore))
                state.running[task] = step

    @staticmethod
    def _completed(state: _Round, step_id: str) -> bool:
        result = state.results.get(step_id)
        return result is not None and result.completed

    async def _fail_blocked(self, state: _Round) -> None:
        """Fail the waiting steps whose dependency ended without a result (transitively:
        a failure marks its dependants, which mark theirs on the next pass)."""
        changed = True
        while changed:
            changed = False
            for step in list(state.pending):
                failed = next(
                    (
                        dep
                        for dep in step.dependencies
                        if dep in state.results and not state.results[dep].completed
                    ),
                    None,
                )
                if failed is not None:
                    state.pending.remove(step)
                    await self._fail_unrun(state, step, f"dependency {failed} failed")
                    changed = True

    async def _deadlock(self, state: _Round) -> None:
        for step in list(state.pending):
            missing = [d for d in step.dependencies if not self._completed(state, d)]
            error = (
                "deadlock: it waits for steps that can never finish "
                f"({', '.join(missing) or 'none'})"
            )
            await self._fail_unrun(state, step, error)
        logger.warning("plan round %d deadlocked: %s", state.round_no, state.pending)
        state.pending.clear()

    async def _fail_unrun(self, state: _Round, step: PlanStep, error: str) -> None:
        reporter = self._reporter(state, step)
        state.results[step.id] = await reporter.fail(error)

    def _collect(self, state: _Round, task: asyncio.Future[StepResult]) -> None:
        step = state.running.pop(task)
        try:
            result = task.result()
        except asyncio.CancelledError:
            result = StepResult(step, CANCELLED, error=CANCELLED_BY_USER)
        except Exception as exc:  # _execute catches everything; this is a bug's net
            logger.exception("plan step %s crashed", step.id)
            result = StepResult(step, FAILED, error=f"{type(exc).__name__}: {exc}")
        state.results[step.id] = result

    async def _stop(self, state: _Round) -> None:
        """Cancel every step still running (or waiting for the semaphore)."""
        tasks = list(state.running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            self._collect(state, task)

    # ------------------------------------------------------------------ follow-ups

    async def _take_followups(self, state: _Round) -> None:
        texts = drain_followups(self.interrupt_queue)
        if not texts:
            return
        for text in texts:
            await emit(self.on_event, Inject(text))
        first = not state.stopped
        state.followups.extend(texts)
        logger.info("plan round %d: %d follow-up(s) taken in", state.round_no, len(texts))
        if not first:
            return
        for step in state.pending:
            state.results[step.id] = await self._reporter(state, step).skip(FOLLOWUP_SKIP)
        state.pending.clear()
        unstarted = [t for t, s in state.running.items() if s.id not in state.started]
        for task in unstarted:
            task.cancel()
        await asyncio.gather(*unstarted, return_exceptions=True)
        for task in unstarted:
            step = state.running.pop(task)
            state.results[step.id] = await self._reporter(state, step).skip(FOLLOWUP_SKIP)

    # ------------------------------------------------------------------ one step

    def _reporter(
        self, state: _Round, step: PlanStep, meter: _MeteredLLM | None = None
    ) -> _StepReporter:
        name = model_name(self.registry, self.llm_for(step))
        return _StepReporter(self.on_event, step, state.round_no, name, meter)

    async def _run_step(
        self, state: _Round, step: PlanStep, semaphore: asyncio.Semaphore
    ) -> StepResult:
        async with semaphore:
            state.started.add(step.id)  # no await before this: a follow-up sees it at once
            return await self._execute(state, step)

    async def _execute(self, state: _Round, step: PlanStep) -> StepResult:
        config = self.config
        meter = _MeteredLLM(self.llm_for(step))
        reporter = self._reporter(state, step, meter)
        await reporter.start()
        dependencies = [
            (dep, state.results[dep_id].result)
            for dep_id in step.dependencies
            if (dep := state.plan.get(dep_id)) is not None and dep_id in state.results
        ]
        query = prompts.step_query(
            state.goal,
            step,
            dependencies,
            dependency_chars=config.dependency_chars,
            tool_hint=step.tool_hint if step.tool_hint in self.tools else None,
        )
        agent = ReActAgent(
            meter,
            self.tools.copy(),
            max_iterations=config.max_step_iterations,
            system_prompt=self._step_system_prompt,
            context_guard=self.context_guard,
            on_event=reporter.on_event,
            cancel=self.cancel,
            approver=self.approver,
        )
        try:
            outcome = await asyncio.wait_for(agent.run(query), config.step_timeout)
        except TimeoutError:
            logger.warning("plan step %s timed out after %gs", step.id, config.step_timeout)
            return await reporter.fail(f"the step timed out after {config.step_timeout:g} s")
        except asyncio.CancelledError:
            await reporter.fail(CANCELLED_BY_USER, status=CANCELLED)
            raise
        except Exception as exc:  # a broken tool adapter must not take the plan down
            logger.exception("plan step %s crashed", step.id)
            return await reporter.fail(f"{type(exc).__name__}: {exc}")
        return await reporter.finish(outcome, config.max_step_iterations)
