"""Plan mode: plan the goal as a graph of steps, run them in parallel, check, answer.

:meth:`PlanAgent.run` emits ``phase`` events for each round (``planning``, ``executing``
with the plan, ``analyzing``, ``analyzed`` with the verdict, ``replanning`` with why),
the steps' ``step_progress`` events, ``inject`` for follow-ups taken in, and finally the
answer as it streams (``answer`` start and deltas), exactly like
:class:`~engine.agent.ReActAgent`; :meth:`PlanAgent.stream_answer` ends the answer and
emits the run's one ``Done`` (:mod:`engine.answer`, shared with ReActAgent).

Choices: the answer is always one streamed call on the conversation's model that sees
the conversation, the goal, the follow-ups and every step's result, even when the
analyzer wrote a confident ``final_answer`` (that draft is passed to it, and used as the
answer if the call fails before its first token): answers read the same whichever way the
analysis went, and the first token reaches the user as soon as the model sends it. If the
first plan cannot be made, a plain ReActAgent answers the goal instead
(``planning_failed``); if a later plan cannot be made, the answer is written from the
results so far. A follow-up skips the round's analysis (its goal changed) and replans
without spending the replan budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

from engine import answer as answer_phase
from engine.agent import BROKEN_ANSWER, AgentResult, ContextGuardLike, ReActAgent, Step
from engine.agent import FAILED as AGENT_FAILED
from engine.answer import (
    CANCELLED,
    CHARS_PER_TOKEN,
    DEFAULT_MAX_ANSWER_TOKENS,
    INCOMPLETE,
    SUCCEEDED,
    length_limit_reason,
)
from engine.approval import Approver
from engine.cancel import CancelledRun, CancelToken
from engine.events import AgentEvent, AnswerSignal, EventCallback, Inject, Phase, emit
from engine.interrupts import InterruptSource
from engine.llm.base import LLM, ChatDelta, LLMError, plain_message
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage, Usage
from engine.plan import prompts
from engine.plan.analyzer import OLDER_RESULT_CHARS, Analysis, analyze, should_replan
from engine.plan.common import cut, drain_followups, history_text, llm_for_role
from engine.plan.config import PlanConfig
from engine.plan.executor import PlanExecutor
from engine.plan.planner import make_plan
from engine.plan.results import ExecutionReport
from engine.prompts import SystemPrompt, current_system_prompt, format_interrupt
from engine.replies import AnswerOnPage
from engine.streaming import CUT, StreamBroken, stream_reply
from engine.tools import Tool, ToolRegistry

__all__ = ["ANSWER_FALLBACK_NOTE", "PlanAgent"]

logger = logging.getLogger(__name__)

ANSWER_FALLBACK_NOTE = (
    "The answer could not be written by the model; these are the plan's results as found."
)
FALLBACK_RESULT_CHARS = 2_000
REASONING_ROLE = "reasoning"


@dataclass
class _PlanRun:
    """Mutable state of one ``run()``; the agent object itself stays reusable."""

    query: str
    history: list[ChatMessage]
    started: float
    context: str = ""  # the conversation as the planner and analyzer read it
    usage: Usage = field(default_factory=Usage)
    reports: list[ExecutionReport] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)  # follow-ups taken in
    analysis: Analysis | None = None

    @property
    def iterations(self) -> int:
        return sum(report.iterations for report in self.reports)

    @property
    def steps(self) -> list[Step]:
        return [step for report in self.reports for step in report.tool_steps]

    @property
    def step_usage(self) -> Usage:
        total = Usage()
        for report in self.reports:
            total = total + report.usage
        return total


class PlanAgent:
    """Plan mode over a :class:`ModelRegistry`; same result and answer contract as
    :class:`~engine.agent.ReActAgent`.

    ``llm`` is the conversation's model (default: the registry's default). The planner and
    analyzer use the model registered for the ``reasoning`` role, else ``llm``; each step
    uses the model registered for its ``model_hint``, else ``llm``.
    """

    def __init__(
        self,
        registry: ModelRegistry,
        tools: ToolRegistry | Iterable[Tool] | None = None,
        *,
        llm: LLM | None = None,
        on_event: EventCallback | None = None,
        cancel: CancelToken | None = None,
        interrupt_queue: InterruptSource | None = None,
        context_guard: ContextGuardLike | None = None,
        max_answer_tokens: int | None = None,
        approver: Approver | None = None,
        system_prompt: SystemPrompt = None,
        config: PlanConfig | None = None,
    ) -> None:
        self.registry = registry
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools or ())
        self.llm = llm if llm is not None else registry.get_default()
        self.on_event = on_event
        self.cancel = cancel
        self.interrupt_queue = interrupt_queue
        self.context_guard = context_guard
        self.max_answer_tokens = max_answer_tokens
        self.approver = approver
        self.system_prompt = system_prompt
        self.config = config or PlanConfig()

    @property
    def planner_llm(self) -> LLM:
        """The planner's and analyzer's model."""
        return llm_for_role(self.registry, REASONING_ROLE, self.llm)

    def executor(self) -> PlanExecutor:
        return PlanExecutor(
            self.registry,
            self.tools,
            llm=self.llm,
            config=self.config,
            on_event=self.on_event,
            cancel=self.cancel,
            interrupt_queue=self.interrupt_queue,
            approver=self.approver,
            context_guard=self.context_guard,
            system_prompt=self.system_prompt,
        )

    # ------------------------------------------------------------------ run

    async def run(self, query: str, history: Sequence[ChatMessage] = ()) -> AgentResult:
        """Plan, execute, analyze (replanning while needed), then stream the answer.

        Like ReActAgent, never raises for provider errors or cancellation: the result's
        ``status`` says how the run ended.
        """
        run = _PlanRun(query=query, history=list(history), started=time.perf_counter())
        try:
            return await self._run(run)
        except CancelledRun:
            logger.info("plan run cancelled after %d round(s)", len(run.reports))
            return self._result(run, "", status=CANCELLED, stop_reason="cancelled")

    async def _run(self, run: _PlanRun) -> AgentResult:
        run.context = await self._history_context(run.history)
        run.instructions.extend(await self._take_followups())
        executor = self.executor()
        round_no, replans = 1, 0
        reason: str | None = None
        while True:
            await self._emit(Phase("planning", {"round": round_no}))
            outcome = await make_plan(
                self.planner_llm,
                run.query,
                tools=self.tools,
                history=run.context,
                max_steps=self.config.max_steps,
                reports=run.reports,
                reason=reason,
                instructions=run.instructions,
                latest_chars=self.config.replan_latest_chars,
                older_chars=self.config.replan_older_chars,
                system_prompt=current_system_prompt(self.system_prompt),
                cancel=self.cancel,
            )
            run.usage = run.usage + outcome.usage
            if outcome.plan is None:
                if not run.reports:
                    return await self._react_instead(run, outcome.error or "no plan")
                logger.warning("replanning failed, answering from the results so far")
                break
            analysis: Analysis | None = None
            # A follow-up sent while the plan was made changes the goal: plan again first.
            followups = await self._take_followups()
            if not followups:
                plan = outcome.plan.to_dict()
                await self._emit(Phase("executing", {"round": round_no, "plan": plan}))
                report = await executor.run(outcome.plan, run.query, round_no=round_no)
                run.reports.append(report)
                followups = report.followups
            if not followups:  # after a follow-up the round is not judged: its goal changed
                analysis = await self._analyze(run, round_no)
                followups = await self._take_followups()
            if followups:
                run.instructions.extend(followups)
                reason = "The user sent a follow-up: " + " / ".join(followups)
            elif analysis is not None and should_replan(analysis, self.config, replans):
                replans += 1
                reason = analysis.reasoning or "The results do not achieve the goal yet."
            else:
                break
            round_no += 1
            await self._emit(Phase("replanning", {"round": round_no, "reason": reason}))
        return await self._answer(run)

    async def _analyze(self, run: _PlanRun, round_no: int) -> Analysis:
        await self._emit(Phase("analyzing", {"round": round_no}))
        analysis = await analyze(
            self.planner_llm,
            run.query,
            run.reports,
            history=run.context,
            instructions=run.instructions,
            result_chars=self.config.analyzer_result_chars,
            cancel=self.cancel,
        )
        run.analysis = analysis
        run.usage = run.usage + analysis.usage
        verdict = {
            "round": round_no,
            "achieved": analysis.achieved,
            "confidence": analysis.confidence,
            "reasoning": analysis.reasoning,
        }
        await self._emit(Phase("analyzed", verdict))
        return analysis

    async def _history_context(self, history: Sequence[ChatMessage]) -> str:
        """The conversation for the planner and analyzer: compacted with the planner's
        hint when a guard is set (it keeps intent, decisions, constraints, data)."""
        messages = list(history)
        if self.context_guard is not None and messages:
            messages = await self.context_guard.check_and_compact(messages, hint="planner_input")
        return history_text(messages)

    async def _react_instead(self, run: _PlanRun, reason: str) -> AgentResult:
        """No plan could be made: a plain ReAct agent answers the goal."""
        await self._emit(Phase("planning_failed", {"reason": reason}))
        agent = ReActAgent(
            self.llm,
            self.tools,
            system_prompt=self.system_prompt,
            context_guard=self.context_guard,
            interrupt_queue=self.interrupt_queue,
            on_event=self.on_event,
            cancel=self.cancel,
            max_answer_tokens=self.max_answer_tokens,
            approver=self.approver,
        )
        query = run.query
        if run.instructions:  # taken in already (inject sent): they travel with the query
            query = f"{query}\n\n{format_interrupt(run.instructions)}"
        result = await agent.run(query, run.history)
        result.usage = run.usage + result.usage
        result.elapsed = time.perf_counter() - run.started
        return result

    # ------------------------------------------------------------------ the answer

    async def _answer(self, run: _PlanRun) -> AgentResult:
        """One streamed call writes the answer; its deltas go out as they arrive."""
        results = prompts.render_results(
            run.reports,
            self.config.analyzer_result_chars,
            min(self.config.analyzer_result_chars, OLDER_RESULT_CHARS),
        )
        draft = run.analysis.final_answer if run.analysis is not None else ""
        messages: list[ChatMessage] = [
            ChatMessage(
                "system", prompts.answer_system_prompt(current_system_prompt(self.system_prompt))
            ),
            *(m for m in run.history if m.role != "system"),
            ChatMessage(
                "user",
                prompts.answer_user_prompt(
                    run.query, results=results, instructions=run.instructions, draft=draft
                ),
                pinned=True,
            ),
        ]
        if self.context_guard is not None:
            messages = await self.context_guard.check_and_compact(messages, hint="general")
        page = AnswerOnPage()

        async def on_delta(delta: ChatDelta) -> None:
            await page.add(delta.content, self._emit)

        limit = self.max_answer_tokens or DEFAULT_MAX_ANSWER_TOKENS
        try:
            reply = await stream_reply(
                self.llm,
                messages,
                on_delta=on_delta,
                cancel=self.cancel,
                max_chars=limit * CHARS_PER_TOKEN,
            )
        except StreamBroken as exc:
            run.usage = run.usage + exc.partial.usage
            if not page.text:
                return await self._fallback_answer(run, exc.cause)
            logger.warning("plan answer stream failed midway, keeping the partial answer")
            return self._result(
                run, page.text, status=INCOMPLETE, error=BROKEN_ANSWER,
                stop_reason="stream_broken", streamed=True, messages=messages,
            )  # fmt: skip
        except LLMError as exc:
            return await self._fallback_answer(run, exc)
        run.usage = run.usage + reply.usage
        if not page.text.strip():
            return await self._fallback_answer(run, None)
        if reply.finish_reason in (CUT, "length"):
            if reply.finish_reason == CUT and self.max_answer_tokens:
                reason = length_limit_reason(self.max_answer_tokens)
            else:
                reason = "The answer reached the model's output limit and was cut."
            return self._result(
                run, page.text, status=INCOMPLETE, error=reason, stop_reason="length",
                streamed=True, messages=messages,
            )  # fmt: skip
        return self._result(run, page.text, streamed=True, messages=messages)

    async def _fallback_answer(self, run: _PlanRun, exc: LLMError | None) -> AgentResult:
        """The answer call gave nothing: the analyzer's draft, else the results as they
        are; only with no result at all has the run failed."""
        if exc is not None:
            logger.warning("plan answer call failed: %s", exc)
        draft = run.analysis.final_answer if run.analysis is not None else ""
        found = [result for report in run.reports for result in report.results if result.completed]
        if draft:
            answer = draft
        elif found:
            answer = "\n\n".join(
                f"**{r.step.task}**\n\n{cut(r.result, FALLBACK_RESULT_CHARS)}" for r in found
            )
        elif exc is not None:
            result = self._result(
                run, plain_message(exc), status=AGENT_FAILED, stop_reason="llm_error",
                error=f"{type(exc).__name__}: {exc}",
            )  # fmt: skip
            return result
        else:
            answer = "The plan produced no result and no answer could be written."
        result = self._result(run, answer, error=ANSWER_FALLBACK_NOTE)
        await self._emit(AnswerSignal())  # the answer is still to be written
        return result

    def _result(
        self,
        run: _PlanRun,
        answer: str,
        *,
        status: str = SUCCEEDED,
        stop_reason: str = "answer",
        error: str | None = None,
        streamed: bool = False,
        messages: list[ChatMessage] | None = None,
    ) -> AgentResult:
        history = list(messages or [])
        if answer and streamed:
            history.append(ChatMessage("assistant", answer))
        return AgentResult(
            answer=answer,
            messages=history,
            steps=run.steps,
            iterations=run.iterations,
            usage=run.usage + run.step_usage,
            elapsed=time.perf_counter() - run.started,
            status=status,
            pending_injections=drain_followups(self.interrupt_queue),
            error=error,
            stop_reason=stop_reason,
            answer_streamed=streamed,
            history=list(run.history),
        )

    # ------------------------------------------------------------------ helpers

    async def _take_followups(self) -> list[str]:
        """Follow-ups sent meanwhile, each taken in with an ``inject`` event."""
        texts = drain_followups(self.interrupt_queue)
        for text in texts:
            await self._emit(Inject(text))
        return texts

    async def _emit(self, event: AgentEvent) -> None:
        await emit(self.on_event, event)

    # ------------------------------------------------------------------ phase 2

    def stream_answer(self, result: AgentResult, query: str) -> AsyncIterator[str]:
        """End the answer, then emit ``AnswerDone`` and ``Done``: the same contract as
        :meth:`ReActAgent.stream_answer` (:func:`engine.answer.stream_answer`). The
        answer that streamed in ``run()`` is yielded at once; a fallback answer streams
        now; on cancellation ``result.status`` becomes ``cancelled`` and no ``Done``
        follows."""
        return answer_phase.stream_answer(
            self.llm,
            result,
            query,
            cancel=self.cancel,
            emit=self._emit,
            max_tokens=self.max_answer_tokens,
            rewrite=False,
            context_guard=self.context_guard,
        )

    async def finish(self, result: AgentResult, answer: str | None = None) -> None:
        """Emit the run's one ``Done`` event (``stream_answer`` calls this at its end)."""
        await answer_phase.finish(result, answer, emit=self._emit)
