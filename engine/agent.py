"""The ReAct agent: a tool loop whose every LLM call streams, then the answer's end.

Phase 1 (:meth:`ReActAgent.run`) streams one call per iteration (:mod:`engine.streaming`).
Native mode passes the tools in the request and runs every call of a reply concurrently;
JSON mode puts the catalog in the system prompt and reads one JSON action (or the classic
``Thought/Action/Finish`` text, :mod:`engine.actions`) per reply, for models without
function calling. How a reply shows while it streams (as the answer, or as the step's
thought) is :mod:`engine.replies`: the answer appears at the model's first token, with no
second call. Guards keep a confused model from burning the budget: an
:class:`ErrorTracker`, an empty-turn counter and a repeated-call check.

Phase 2 (:meth:`ReActAgent.stream_answer`, :mod:`engine.answer`) ends the answer: the one
the loop streamed, a rewrite of it (a per-model option), or the guard's explanation.

Events: ``run()`` emits thinking/thought/iteration/phase/inject events and the answer's
start and deltas as they stream; ``stream_answer()`` emits ``AnswerDone`` and finally the
run's single ``Done`` (through :meth:`ReActAgent.finish`, which callers that do not stream
call themselves).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import answer as answer_phase
from engine import prompts
from engine.actions import ACTION_FORMAT_NAME, action_schema, parse_action
from engine.answer import CHARS_PER_TOKEN, length_limit_reason
from engine.approval import APPROVED, ApprovalIds, ApprovalRequest, Approver, refusal
from engine.cancel import CancelledRun, CancelToken, run_cancellable
from engine.errors import AgentPaused, ErrorTracker
from engine.events import (
    AgentEvent,
    AnswerSignal,
    Approval,
    EventCallback,
    Inject,
    IterationDone,
    IterationStart,
    ThinkingDone,
    ThinkingStart,
    emit,
)
from engine.interrupts import InterruptSource
from engine.llm.base import LLM, ChatResponse, ContextOverflowError, LLMError, plain_message
from engine.messages import ChatMessage, ToolCall, Usage
from engine.outcomes import (
    CANCELLED,
    FAILED,
    INCOMPLETE,
    PAUSED,
    SUCCEEDED,
    AgentResult,
    ContextGuardLike,
    Step,
)
from engine.replies import AnswerOnPage, JsonReplyPresenter, NativeReplyPresenter
from engine.selection import TOOL_SELECTION_THRESHOLD, choose_tools
from engine.streaming import CUT, StreamBroken, stream_reply
from engine.structured import json_response_format
from engine.tools import (
    Tool,
    ToolArgumentError,
    ToolRegistry,
    ToolResult,
    ToolTimeoutError,
)

__all__ = ["AgentResult", "ReActAgent", "Step"]

logger = logging.getLogger(__name__)

MAX_EMPTY_TURNS = 3
MAX_IDENTICAL_CALLS = 2
# finish_reason values of a reply that stopped at an output limit (ours, or the provider's).
_LENGTH_STOPS = frozenset({CUT, "length"})
BROKEN_ANSWER = "The model's server stopped sending the answer partway."


class _AnswerCut(Exception):
    """The answer that streamed is all there will be (an output limit, a broken stream)."""

    def __init__(self, reason: str, stop_reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stop_reason = stop_reason


@dataclass
class _Outcome:
    """What one tool call produced, before it becomes a Step and a message."""

    result: ToolResult | None
    error: str | None = None
    error_type: str | None = None
    elapsed: float = 0.0
    observation_override: str | None = None

    @property
    def observation(self) -> str:
        if self.observation_override is not None:
            return self.observation_override
        if self.error is not None:
            return f"Error: {self.error}"
        return self.result.observation() if self.result is not None else ""


@dataclass
class _Run:
    """Mutable state of one ``run()``; the agent object itself stays reusable."""

    query: str
    tools: ToolRegistry
    started: float
    images: list[dict[str, Any]] = field(default_factory=list)  # image parts of the query
    messages: list[ChatMessage] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    tracker: ErrorTracker = field(default_factory=ErrorTracker)
    empty_turns: int = 0
    overflow_retried: bool = False
    hit_max_iterations: bool = False
    unseen_injections: list[str] = field(default_factory=list)
    last_call: tuple[str, str] | None = None
    last_call_count: int = 0
    page: AnswerOnPage = field(default_factory=AnswerOnPage)
    answer_streamed: bool = False
    # Follow-ups sent before the answer on the page began: they defer it (drained next).
    held_injections: list[str] = field(default_factory=list)
    # The first message of the run's trace: its question (or, resumed, the question of
    # the run it goes on from).
    trace_start: ChatMessage | None = None
    # The mode's whole system prompt around the caller's part (rebuilt before each call
    # when that part is a function).
    system_for: Callable[[str | None], str] | None = None


class ReActAgent:
    """A tool-using agent over any :class:`~engine.llm.base.LLM`.

    ``run()`` never raises for provider errors, guards or cancellation: the result's
    ``status`` says how it ended (``succeeded``, ``paused``, ``cancelled``, ``failed``).
    """

    def __init__(
        self,
        llm: LLM,
        tools: ToolRegistry | Iterable[Tool] | None = None,
        *,
        use_native_tools: bool = True,
        max_iterations: int = 50,
        system_prompt: prompts.SystemPrompt = None,
        context_guard: ContextGuardLike | None = None,
        interrupt_queue: InterruptSource | None = None,
        on_event: EventCallback | None = None,
        cancel: CancelToken | None = None,
        selection_llm: LLM | None = None,
        tool_timeout: float | None = None,
        max_answer_tokens: int | None = None,
        approver: Approver | None = None,
        rewrite_answer: bool = False,
        small_model: bool = False,
    ) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.llm = llm
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools or ())
        self.use_native_tools = use_native_tools
        self.max_iterations = max_iterations
        self.system_prompt = system_prompt
        self.context_guard = context_guard
        self.interrupt_queue = interrupt_queue
        self.on_event = on_event
        self.cancel = cancel
        self.selection_llm = selection_llm
        self.tool_timeout = tool_timeout
        self.max_answer_tokens = max_answer_tokens
        self.approver = approver
        # A separate streamed call rewrites the answer of a run that used tools (a model
        # setting for models whose answers after tools are poor): engine.answer.
        self.rewrite_answer = rewrite_answer
        # A model marked small gets JSON mode's short prompt with worked examples, replies
        # without a reasoning field (engine.prompts.small_json_system_prompt), and one tool
        # call whose result, or failure, is its answer.
        self.small_model = small_model
        # Approval requests get ids of the loop's own, never the model's call ids: a call
        # reusing the id of one the user approved must not run on that decision.
        self.approval_ids = ApprovalIds()

    @property
    def _native_mode_active(self) -> bool:
        return bool(self.use_native_tools and self.llm.abilities.get("tool_call"))

    # ------------------------------------------------------------------ phase 1

    async def run(
        self,
        query: str,
        history: Sequence[ChatMessage] = (),
        *,
        resume: Sequence[ChatMessage] = (),
        go_on: bool = False,
        images: Sequence[dict[str, Any]] = (),
    ) -> AgentResult:
        """Run the tool loop for ``query`` (appended to ``history`` as a pinned message).

        ``images``: OpenAI-style ``image_url`` content parts sent with ``query`` (a model
        with the ``vision`` ability; the caller checks it).

        ``resume`` goes on from a run that paused so the user could step in: that run's
        :attr:`AgentResult.trace` (its question, tool calls and results, exactly as it
        sent them), with ``history`` the conversation before its question. The model sees
        the trace, then ``query`` (the user's note, or a request to continue); the
        context guard bounds it like any history. The result's trace holds the earlier
        one too, so a resumed run that pauses again can be resumed in turn.

        ``go_on``: ``resume`` is this run's own trace (its question first), cut where its
        process stopped, so the loop goes on from there with no new user turn; ``query``
        is then only what tool selection reads.
        """
        run = _Run(query=query, tools=self.tools, started=time.perf_counter(), images=list(images))
        run.page.on_start = lambda: run.held_injections.extend(self._pending_interrupts())
        mode = "native" if self._native_mode_active else "json"
        # DEBUG: an application logs its own line per run (the web app's runner does); more
        # INFO lines per run would cost a busy worker's event loop and say nothing new.
        logger.debug("agent run started: mode=%s tools=%d", mode, len(self.tools))
        status, answer, error, stop_reason = SUCCEEDED, "", None, "answer"
        try:
            run.tools = await self._select_tools(run)
            run.messages = self._initial_messages(run, history, resume, go_on=go_on)
            if self._native_mode_active:
                answer = await self._run_native(run)
            else:
                answer = await self._run_json(run)
            if run.hit_max_iterations:
                stop_reason = "max_iterations"
        except CancelledRun:
            status, stop_reason = CANCELLED, "cancelled"
        except _AnswerCut as exc:
            status, answer, error = INCOMPLETE, run.page.text, exc.reason
            stop_reason, run.answer_streamed = exc.stop_reason, True
        except AgentPaused as exc:
            status, answer, error, stop_reason = PAUSED, exc.message, exc.message, exc.reason
        except LLMError as exc:
            status, stop_reason = FAILED, "llm_error"
            error = f"{type(exc).__name__}: {exc}"  # the technical detail
            answer = plain_message(exc)  # what the user is told
            logger.warning("agent run failed: %s", error)
        result = AgentResult(
            answer=answer,
            messages=run.messages,
            steps=run.steps,
            iterations=run.iterations,
            usage=run.usage,
            elapsed=time.perf_counter() - run.started,
            status=status,
            pending_injections=self._leftover_injections(run),
            error=error,
            stop_reason=stop_reason,
            answer_streamed=run.answer_streamed,
            history=list(history),
            trace=_trace(run.messages, run.trace_start),
        )
        if status in (SUCCEEDED, PAUSED) and not run.answer_streamed:
            await self._emit(AnswerSignal())  # the answer is still to be written
        logger.debug(
            "agent run ended: status=%s reason=%s iterations=%d steps=%d elapsed=%.3fs",
            status,
            stop_reason,
            result.iterations,
            len(result.steps),
            result.elapsed,
        )
        return result

    async def _select_tools(self, run: _Run) -> ToolRegistry:
        if len(self.tools) <= TOOL_SELECTION_THRESHOLD:
            return self.tools
        selection = await choose_tools(
            self.selection_llm or self.llm,
            self.tools,
            run.query,
            on_event=self._emit,
            cancel=self.cancel,
        )
        run.usage = run.usage + selection.usage
        return selection.registry

    def _initial_messages(
        self,
        run: _Run,
        history: Sequence[ChatMessage],
        resume: Sequence[ChatMessage] = (),
        *,
        go_on: bool = False,
    ) -> list[ChatMessage]:
        tools = run.tools
        if self._native_mode_active:
            run.system_for = prompts.native_system_prompt
        elif self.small_model:
            run.system_for = functools.partial(
                prompts.small_json_system_prompt, tools.to_small_catalog(), tools.examples()
            )
        else:
            run.system_for = functools.partial(
                prompts.json_system_prompt, tools.to_prompt_catalog()
            )
        system = run.system_for(prompts.current_system_prompt(self.system_prompt))
        content: str | list[dict[str, Any]] = run.query
        if run.images:
            content = [{"type": "text", "text": run.query}, *run.images]
        query = ChatMessage("user", content, pinned=True)
        run.trace_start = resume[0] if resume else query
        if go_on and resume:
            return [ChatMessage("system", system), *history, *resume]
        return [ChatMessage("system", system), *history, *resume, query]

    async def _run_json(self, run: _Run) -> str:
        """JSON mode: one action per reply, observations as ``Observation:`` messages."""
        chat_kwargs: dict[str, Any] = {}
        response_format = self._json_response_format(run.tools)
        if response_format is not None:
            chat_kwargs["response_format"] = response_format
        parse_failed = False
        while run.iterations < self.max_iterations:
            self._check_cancel()
            run.iterations += 1
            iteration = run.iterations
            turn_kwargs = self._json_turn_kwargs(run, chat_kwargs)
            presenter = JsonReplyPresenter(
                iteration, run.page, self._emit, answer_live=self._answer_live(run)
            )
            reply = await self._call_llm(run, iteration, presenter, **turn_kwargs)
            content = reply.content or ""
            action = parse_action(content, run.tools)
            reasoning = action.reasoning or reply.reasoning_content or ""
            if content.strip():
                run.messages.append(
                    ChatMessage("assistant", content, reasoning=reply.reasoning_content)
                )
            if reply.finish_reason in _LENGTH_STOPS and run.page.text:
                await self._emit(ThinkingDone(iteration, reasoning))
                raise _AnswerCut(self._length_reason(reply), "length")
            drained = await self._drain_interrupts(run)
            answering = action.kind == "final_answer" and not drained
            if answering and action.reasoning == prompts.PARSE_FAILURE_SENTINEL:
                answering = parse_failed  # the second unparseable reply is the answer
            if not answering:
                await run.page.reset(self._emit)
            await self._emit(ThinkingDone(iteration, reasoning))

            if action.kind == "empty":
                if not drained:
                    self._remind(run)
                continue
            run.empty_turns = 0
            if action.kind == "final_answer":
                if answering:
                    return await self._answer(run, presenter, action.answer)
                if action.reasoning == prompts.PARSE_FAILURE_SENTINEL and not parse_failed:
                    parse_failed = True
                    run.messages.append(ChatMessage("user", prompts.JSON_REFORMAT_REQUEST))
                continue  # or the follow-up comes first: the answer is deferred
            parse_failed = False
            call = ToolCall(f"call_{iteration}", action.tool_name, action.tool_args)
            cut = reply.finish_reason in _LENGTH_STOPS
            (step,) = await self._run_tool_calls(run, iteration, [call], native=False, cut=cut)
            if self.small_model and not await self._drain_interrupts(run):
                # A small model garbles what it was told ("23:10" for 21:19) and "fixes"
                # an error by calling something else: the tool's own words are the
                # honest answer, a failure included.
                return await self._answer(run, presenter, prompts.small_model_answer(step))
        return self._max_iterations_answer(run)

    async def _run_native(self, run: _Run) -> str:
        """Native mode: tools in the request, all calls of a reply run concurrently."""
        tools = run.tools.to_openai_tools()
        chat_kwargs: dict[str, Any] = {"tools": tools, "tool_choice": "auto"} if tools else {}
        while run.iterations < self.max_iterations:
            self._check_cancel()
            run.iterations += 1
            iteration = run.iterations
            presenter = NativeReplyPresenter(
                iteration, run.page, self._emit, answer_live=self._answer_live(run)
            )
            reply = await self._call_llm(run, iteration, presenter, **chat_kwargs)
            content = reply.content or ""
            calls = _normalise_calls(reply.tool_calls or [], iteration)
            reasoning = reply.reasoning_content or ""
            # What streamed was a step's thought, not the answer: it shows as the thought.
            as_thought = _joined(reasoning, content)

            if calls:
                await run.page.reset(self._emit)
                await self._emit(ThinkingDone(iteration, as_thought))
                run.empty_turns = 0
                run.messages.append(
                    ChatMessage(
                        "assistant",
                        content,
                        tool_calls=calls,
                        reasoning=reply.reasoning_content,
                    )
                )
                cut = reply.finish_reason in _LENGTH_STOPS
                await self._run_tool_calls(run, iteration, calls, native=True, cut=cut)
                await self._drain_interrupts(run)
                continue
            if not content.strip():
                await self._emit(ThinkingDone(iteration, reasoning))
                if not await self._drain_interrupts(run):
                    self._remind(run)
                continue
            run.empty_turns = 0
            run.messages.append(
                ChatMessage("assistant", content, reasoning=reply.reasoning_content)
            )
            if reply.finish_reason in _LENGTH_STOPS:
                await self._emit(ThinkingDone(iteration, reasoning))
                await run.page.settle(content, self._emit)
                raise _AnswerCut(self._length_reason(reply), "length")
            if await self._drain_interrupts(run):
                # The follow-up comes first: the answer is deferred.
                await run.page.reset(self._emit)
                await self._emit(ThinkingDone(iteration, as_thought))
                continue
            await self._emit(
                ThinkingDone(iteration, reasoning if presenter.answer_live else as_thought)
            )
            return await self._answer(run, presenter, content.strip())
        return self._max_iterations_answer(run)

    def _answer_live(self, run: _Run) -> bool:
        """Whether a reply's answer streams as the answer (not when it will be rewritten)."""
        return not (self.rewrite_answer and run.steps)

    async def _answer(
        self, run: _Run, presenter: NativeReplyPresenter | JsonReplyPresenter, answer: str
    ) -> str:
        """The loop's answer, complete on the page when it streamed live."""
        if not presenter.answer_live:
            return answer  # a draft, for the rewrite
        run.answer_streamed = True
        return await run.page.settle(answer, self._emit)

    def _length_reason(self, reply: ChatResponse) -> str:
        if reply.finish_reason == CUT and self.max_answer_tokens:
            return length_limit_reason(self.max_answer_tokens)
        return "The answer reached the model's output limit and was cut."

    # ------------------------------------------------------------------ LLM calls

    async def _call_llm(
        self,
        run: _Run,
        iteration: int,
        presenter: NativeReplyPresenter | JsonReplyPresenter,
        **kwargs: Any,
    ) -> ChatResponse:
        """One loop call, streamed: compaction first, one compact-and-retry on context
        overflow (reported before anything streams)."""
        await self._emit(ThinkingStart(iteration))
        self._refresh_system_prompt(run)
        guard = self.context_guard
        if guard is not None:
            run.messages = await guard.check_and_compact(run.messages, hint="react_iteration")
        try:
            response = await self._stream(run, presenter, **kwargs)
        except ContextOverflowError:
            if guard is None or run.overflow_retried:
                raise
            run.overflow_retried = True
            budget = guard.budget_tokens // 2
            logger.warning("context overflow reported; compacting to %d tokens", budget)
            run.messages = await guard.check_and_compact(
                run.messages, hint="react_iteration", budget_tokens=budget
            )
            response = await self._stream(run, presenter, **kwargs)
        run.usage = run.usage + response.usage
        run.unseen_injections.clear()
        return response

    def _refresh_system_prompt(self, run: _Run) -> None:
        """A system prompt given as a function is asked again before every call."""
        if not callable(self.system_prompt) or run.system_for is None:
            return
        if run.messages and run.messages[0].role == "system":
            text = run.system_for(prompts.current_system_prompt(self.system_prompt))
            run.messages[0] = ChatMessage("system", text)

    async def _stream(
        self, run: _Run, presenter: NativeReplyPresenter | JsonReplyPresenter, **kwargs: Any
    ) -> ChatResponse:
        limit = self.max_answer_tokens or answer_phase.DEFAULT_MAX_ANSWER_TOKENS
        try:
            return await stream_reply(
                self.llm,
                run.messages,
                on_delta=presenter.feed,
                cancel=self.cancel,
                max_chars=limit * CHARS_PER_TOKEN,
                **kwargs,
            )
        except StreamBroken as exc:
            run.usage = run.usage + exc.partial.usage
            if not run.page.text:
                raise exc.cause from exc  # nothing of an answer shown: the run failed
            logger.warning("answer stream failed midway, keeping the partial answer: %s", exc)
            raise _AnswerCut(BROKEN_ANSWER, "stream_broken") from exc

    def _json_response_format(self, tools: ToolRegistry) -> dict[str, Any] | None:
        abilities = self.llm.abilities
        if not (abilities.get("json_mode") or abilities.get("json_schema")):
            return None
        schema = action_schema(tools, reasoning=not self.small_model)
        return json_response_format(abilities, ACTION_FORMAT_NAME, schema)

    def _json_turn_kwargs(self, run: _Run, chat_kwargs: dict[str, Any]) -> dict[str, Any]:
        """A schema-constrained model that just repeated a call loses that tool for a turn.

        Small models loop on the same call instead of answering; with constrained output
        the grammar can break the loop: the next reply must be another tool or the final
        answer (only the final answer when that was the only tool).
        """
        if not (
            self.llm.abilities.get("json_schema")
            and "response_format" in chat_kwargs
            and run.last_call is not None
            and run.last_call_count >= MAX_IDENTICAL_CALLS
        ):
            return chat_kwargs
        repeated = run.last_call[0]
        others = run.tools.filter_by_names(n for n in run.tools.names() if n != repeated)
        return {**chat_kwargs, "response_format": self._json_response_format(others)}

    # ------------------------------------------------------------------ tools

    async def _run_tool_calls(
        self, run: _Run, iteration: int, calls: list[ToolCall], *, native: bool, cut: bool = False
    ) -> list[Step]:
        """Run ``calls`` concurrently, then append their results in call order. ``cut``:
        the reply ended at the model's output limit, inside its calls, so their arguments
        may be cut short (a repaired half path is still a path): none of them runs.

        ``IterationDone`` events are emitted as calls finish but never out of call
        order, so a renderer can match them to their ``IterationStart``.
        """
        self._check_cancel()
        repeated = [self._is_repeat(run, call) for call in calls]
        for call in calls:
            await self._emit(IterationStart(iteration, call.name, call.arguments))
        outcomes: list[_Outcome | None] = [None] * len(calls)
        emitted = [asyncio.Event() for _ in calls]

        async def run_one(k: int) -> None:
            call = calls[k]
            if cut:
                outcome = _Outcome(
                    None,
                    error="Cut off at the model's output limit; not run",
                    error_type="CutToolCall",
                    observation_override=prompts.CUT_TOOL_CALL,
                )
            elif repeated[k]:
                outcome = _Outcome(
                    None,
                    error="Repeated call with identical arguments; not run again",
                    error_type="RepeatedCall",
                    observation_override=prompts.repeated_call_warning(call.name),
                )
            else:
                outcome = await self._execute(run.tools, call)
            outcomes[k] = outcome
            if k:
                await emitted[k - 1].wait()
            try:
                await self._emit(
                    IterationDone(
                        iteration, call.name, outcome.observation, outcome.error, outcome.elapsed
                    )
                )
            finally:
                emitted[k].set()

        work = (
            run_one(0)
            if len(calls) == 1
            else asyncio.gather(*(run_one(k) for k in range(len(calls))), return_exceptions=True)
        )
        try:
            await run_cancellable(work, self.cancel)
        except CancelledRun:
            for k, outcome in enumerate(outcomes):
                if outcome is None:
                    outcomes[k] = cancelled = _Outcome(
                        None, "Cancelled by the user", "CancelledRun"
                    )
                    await self._emit(
                        IterationDone(
                            iteration, calls[k].name, cancelled.observation, cancelled.error, 0.0
                        )
                    )
            self._record_steps(run, iteration, calls, outcomes, native=native)
            raise
        steps = self._record_steps(run, iteration, calls, outcomes, native=native)
        for outcome in outcomes:
            if outcome is not None and outcome.error is not None:
                run.tracker.record(outcome.error_type or "Error", outcome.error)
        if run.tracker.should_stop:
            signature = run.tracker.repeated or ""
            raise AgentPaused(
                prompts.repeated_error_message(signature, run.tracker.counts[signature]),
                reason="repeated_error",
            )
        return steps

    def _record_steps(
        self,
        run: _Run,
        iteration: int,
        calls: list[ToolCall],
        outcomes: Sequence[_Outcome | None],
        *,
        native: bool,
    ) -> list[Step]:
        """Turn outcomes into Steps and messages, in call order."""
        steps = []
        for call, outcome in zip(calls, outcomes, strict=True):
            outcome = outcome or _Outcome(None, "No result", "MissingResult")
            observation = outcome.observation
            step = Step(
                iteration=iteration,
                tool_name=call.name,
                tool_args=call.arguments,
                observation=observation,
                error=outcome.error,
                elapsed=outcome.elapsed,
                artifacts=list(outcome.result.artifacts) if outcome.result else [],
                tool_call_id=call.id,
            )
            steps.append(step)
            if native:
                run.messages.append(
                    ChatMessage("tool", observation, tool_call_id=call.id, name=call.name)
                )
            else:
                run.messages.append(ChatMessage("user", prompts.OBSERVATION_PREFIX + observation))
        run.steps.extend(steps)
        return steps

    def _is_repeat(self, run: _Run, call: ToolCall) -> bool:
        """True for the third identical call in a row (which is then not run)."""
        key = (call.name, _args_key(call.arguments))
        if key == run.last_call:
            run.last_call_count += 1
        else:
            run.last_call, run.last_call_count = key, 1
        return run.last_call_count > MAX_IDENTICAL_CALLS

    async def _execute(self, tools: ToolRegistry, call: ToolCall) -> _Outcome:
        """Invoke one tool (after the user's approval, if it needs it); every failure
        becomes an error outcome, never an exception."""
        tool = tools.get(call.name)
        if tool is None:
            available = ", ".join(tools.names()) or "none"
            return _Outcome(
                None,
                error=f"Unknown tool '{call.name}'. Available tools: {available}",
                error_type="UnknownToolError",
            )
        reason = tool.confirmation_reason(call.arguments)
        if reason is not None and tool.validation_error(call.arguments) is None:
            decision = await self._ask_approval(
                ApprovalRequest(
                    self.approval_ids.next(),
                    tool.name,
                    call.arguments,
                    reason,
                    tool.call_preview(call.arguments),
                )  # fmt: skip
            )
            if decision != APPROVED:
                return _Outcome(None, refusal(decision), "NotApproved")
        started = time.perf_counter()  # the tool's time, not the user's
        logger.debug("tool %s called with %r", call.name, call.arguments)
        try:
            result = await self._invoke(tool, call.arguments)
        except CancelledRun:
            raise
        except (ToolArgumentError, ToolTimeoutError) as exc:
            outcome = _Outcome(None, str(exc), type(exc).__name__)
        except Exception as exc:
            message = f"Tool '{call.name}' failed: {type(exc).__name__}: {exc}"
            outcome = _Outcome(None, message, type(exc).__name__)
        else:
            if result.is_error:
                # The observation says "Error: " itself; tools often start with it too.
                text = result.content.removeprefix("Error:").strip()
                outcome = _Outcome(result, text or "the tool reported an error", "ToolError")
            else:
                outcome = _Outcome(result)
        outcome.elapsed = time.perf_counter() - started
        logger.info(
            "tool %s %s in %.3fs",
            call.name,
            "failed" if outcome.error else "succeeded",
            outcome.elapsed,
        )
        return outcome

    async def _ask_approval(self, request: ApprovalRequest) -> str | None:
        """The user's decision on a call (None: there is nobody to ask)."""
        if self.approver is None:
            return None
        await self._emit(
            Approval("requested", request.call_id, request.tool_name, request.tool_args,
                     request.reason, request.request)
        )  # fmt: skip
        decision = await self.approver(request)
        await self._emit(Approval(decision, request.call_id))
        return decision

    async def _invoke(self, tool: Tool, arguments: dict[str, Any]) -> ToolResult:
        if self.tool_timeout is None:
            return await tool.invoke(arguments)
        try:
            return await asyncio.wait_for(tool.invoke(arguments), self.tool_timeout)
        except ToolTimeoutError:
            raise
        except TimeoutError as exc:
            raise ToolTimeoutError(
                f"Tool '{tool.name}' timed out after {self.tool_timeout:g} s"
            ) from exc

    # ------------------------------------------------------------------ guards

    def _remind(self, run: _Run) -> None:
        """An empty turn: remind the model, or pause after too many in a row."""
        run.empty_turns += 1
        if run.empty_turns >= MAX_EMPTY_TURNS:
            raise AgentPaused(prompts.no_progress_message(run.empty_turns), reason="no_progress")
        run.messages.append(ChatMessage("user", prompts.EMPTY_TURN_REMINDER))

    def _max_iterations_answer(self, run: _Run) -> str:
        run.hit_max_iterations = True
        logger.warning("agent hit max_iterations=%d", self.max_iterations)
        return prompts.max_iterations_answer(
            self.max_iterations, [(s.tool_name, s.error) for s in run.steps]
        )

    def _check_cancel(self) -> None:
        if self.cancel is not None:
            self.cancel.raise_if_cancelled()

    # ------------------------------------------------------------------ interrupts

    def _pending_interrupts(self) -> list[str]:
        if self.interrupt_queue is None:
            return []
        return [text for text in self.interrupt_queue.drain() if text and text.strip()]

    async def _drain_interrupts(self, run: _Run) -> bool:
        """Turn whatever the user sent meanwhile into ONE pinned message.

        While an answer is showing, only what was sent before it began counts: a follow-up
        sent while the user watched the answer being written is the next run's question.
        """
        texts, run.held_injections = run.held_injections, []
        if not run.page.started:
            texts.extend(self._pending_interrupts())
        if not texts:
            return False
        run.messages.append(ChatMessage("user", prompts.format_interrupt(texts), pinned=True))
        run.unseen_injections.extend(texts)
        for text in texts:
            await self._emit(Inject(text))
        logger.info("drained %d interrupt(s)", len(texts))
        return True

    def _leftover_injections(self, run: _Run) -> list[str]:
        """Follow-ups no model call has seen yet: the next run's input."""
        return [*run.unseen_injections, *run.held_injections, *self._pending_interrupts()]

    # ------------------------------------------------------------------ events

    async def _emit(self, event: AgentEvent) -> None:
        await emit(self.on_event, event)

    # ------------------------------------------------------------------ phase 2

    def stream_answer(self, result: AgentResult, query: str) -> AsyncIterator[str]:
        """Stream the final answer, then emit ``AnswerDone`` and ``Done``.

        See :func:`engine.answer.stream_answer`: the answer the loop streamed is yielded
        at once, a rewrite (``rewrite_answer``) or a paused or failed run's explanation
        streams now; on cancellation ``result.status`` becomes ``cancelled`` and no
        ``Done`` follows.
        """
        return answer_phase.stream_answer(
            self.llm,
            result,
            query,
            cancel=self.cancel,
            emit=self._emit,
            max_tokens=self.max_answer_tokens,
            rewrite=self.rewrite_answer,
            context_guard=self.context_guard,
        )

    async def finish(self, result: AgentResult, answer: str | None = None) -> None:
        """Emit the run's one ``Done`` event (``stream_answer`` calls this at its end)."""
        await answer_phase.finish(result, answer, emit=self._emit)


# ---------------------------------------------------------------------- helpers


def _normalise_calls(calls: Sequence[ToolCall], iteration: int) -> list[ToolCall]:
    """Give every call a unique, non-empty id (some servers omit or repeat them)."""
    seen: set[str] = set()
    out = []
    for k, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = ToolCall(f"call_{iteration}_{k}", call.name, call.arguments)
        seen.add(call.id)
        out.append(call)
    return out


def _trace(messages: Sequence[ChatMessage], start: ChatMessage | None) -> list[ChatMessage]:
    """``messages`` from the run's first own message on.

    Compaction keeps that message (the question is pinned) but may have copied it (cut
    or unpinned): then the first user message with its text's beginning marks it.
    """
    if start is None:
        return []
    for k, message in enumerate(messages):
        if message is start:
            return list(messages[k:])
    head = start.text()[:200]
    for k, message in enumerate(messages):
        if message.role == start.role and head and message.text().startswith(head):
            return list(messages[k:])
    return []


def _joined(*parts: str) -> str:
    return "\n\n".join(part.strip() for part in parts if part and part.strip())


def _args_key(arguments: Any) -> str:
    try:
        return json.dumps(arguments, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(arguments)
