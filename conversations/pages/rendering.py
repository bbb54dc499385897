"""The one place where protocol events become HTML (DESIGN.md section 3).

:class:`RunView` is the render state of one run, rebuilt by replaying its events in
sequence order. ``apply()`` returns the HTML frame for one live event (``hx-swap-oob``
fragments addressed by stable DOM ids derived from primary keys), and the whole run block
can be rendered from the same state, so a page load, a reconnect and the live stream all
produce the same DOM.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape
from django.utils.translation import gettext as _

from conversations.models import Run
from conversations.pages.citations import Citation, link_citations
from conversations.pages.items import (
    FollowupMessage,
    StepItem,
    ToolCard,
    partial,
)
from conversations.pages.plan_view import PlanTracker
from tools.builtin.search_knowledge import citations
from tools.markdown.render import render_markdown

_CONTENT_SLOT = "\x00content\x00"  # survives HTML escaping unchanged
# The composer's Stop and status line, out of band (its state follows the run's).
COMPOSER_RUN = "conversations/composer_state.html#composer-run"


def composer_frame(view: RunView | None) -> str:
    """The composer's run state for ``view`` (working: Stop and what the agent does; ended
    or None: Send), for the frames and responses that change which run works or how."""
    return render_to_string(COMPOSER_RUN, {"view": view})


def _slot_wrapper(name: str, context: dict[str, Any]) -> tuple[str, str]:
    """Partial ``name`` rendered once around a slot (the one context value that is
    ``_CONTENT_SLOT``), split at the slot: filled with escaped text per frame.

    For the frames a run sends again and again (answer deltas, status lines): the
    template is rendered once per run instead of once per frame, and the markup stays in
    the template. A name with "#" is a whole template name (another file's partial).
    """
    html = render_to_string(name, context) if "#" in name else partial(name, context)
    before, slot, after = html.partition(_CONTENT_SLOT)
    if not slot or _CONTENT_SLOT in after:
        raise ValueError(f"the {name} partial must show its slot exactly once")
    return before, after


@dataclass
class RunView:
    run_id: int
    inject_ids: list[int] = field(default_factory=list)
    items: list[StepItem] = field(default_factory=list)
    status_text: str = ""
    answer_text: str = ""
    answer_started: bool = False
    done: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    last_seq: int = 0
    assistant_message: Any = None
    followup: dict[str, Any] | None = None  # the run answering left-over follow-ups
    # A paused run that kept its trace: Continue may go on from it (the run that executes
    # it knows; a page load reads the run's row).
    resumable: bool = False
    unanswered: list[dict[str, Any]] = field(default_factory=list)  # left over by a Stop
    title: str = ""  # the conversation's automatic title, given after this run's answer
    # Why the run failed, technically (Run.error_detail: status code, the provider's
    # message, which request), set only when its owner is staff (timeline.staff_detail):
    # never in the HTML of anyone else.
    error_detail: str = ""
    plan: PlanTracker = field(init=False)  # plan mode's rounds and steps
    _open: dict[tuple[int, str], deque[ToolCard]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    _cards: int = 0
    _injects: int = 0
    _delta_wrapper: tuple[str, str] | None = None
    _status_wrapper: tuple[str, str] | None = None
    _composer_wrapper: tuple[str, str] | None = None
    _thoughts: dict[int, StepItem] = field(default_factory=dict)  # streaming, by iteration
    _thought_wrappers: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plan = PlanTracker(self.run_id)

    # ids -----------------------------------------------------------------
    @property
    def steps_id(self) -> str:
        return f"steps-{self.run_id}"

    @property
    def answer_id(self) -> str:
        return f"answer-{self.run_id}"

    @property
    def finished(self) -> bool:
        return self.done is not None or self.error is not None

    @property
    def taken_in_ids(self) -> list[int]:
        """The follow-ups the agent took in so far (one inject event each)."""
        return self.inject_ids[: self._injects]

    def open_cards(self) -> list[ToolCard]:
        return [card for cards in self._open.values() for card in cards]

    # state + frames ----------------------------------------------------------
    def apply(self, seq: int, channel: str, payload: dict[str, Any], *, render: bool = True) -> str:
        """Advance the state by one event; return its HTML frame ("" if nothing shows)."""
        self.last_seq = max(self.last_seq, seq)
        handler = getattr(self, f"_on_{channel}", None)
        if handler is None:
            return ""
        return handler(payload, render) or ""

    def set_status(self, text: str, render: bool) -> str:
        """The run's status line, in its block and above the composer (with its Stop)."""
        self.status_text = text
        if not render:
            return ""
        if not text or self.finished:  # the template's default text, or no spinner
            return partial("run-status", {"view": self, "oob": True}) + composer_frame(self)
        if self._status_wrapper is None or self._composer_wrapper is None:
            self.status_text = _CONTENT_SLOT
            try:
                self._status_wrapper = _slot_wrapper("run-status", {"view": self, "oob": True})
                self._composer_wrapper = _slot_wrapper(COMPOSER_RUN, {"view": self})
            finally:
                self.status_text = text
        shown = escape(text)
        return shown.join(self._status_wrapper) + shown.join(self._composer_wrapper)

    def _on_step(self, payload: dict[str, Any], render: bool) -> str:
        kind, status = payload.get("type"), payload.get("status")
        if kind == "thinking" and status == "start":
            return self.set_status(
                _("Thinking (step %(step)s)…") % {"step": payload.get("iteration", 0)}, render
            )
        if kind == "thinking" and status == "delta":
            return self._thought_delta(
                payload.get("iteration", 0), payload.get("content", ""), render
            )
        if kind == "thinking":
            return self._thought_done(
                payload.get("iteration", 0), (payload.get("reasoning") or "").strip(), render
            )
        if kind == "iteration" and status == "start":
            self._cards += 1
            card = ToolCard(
                dom_id=f"card-{self.run_id}-{self._cards}",
                iteration=payload.get("iteration", 0),
                tool_name=payload.get("tool_name", ""),
                tool_args=payload.get("tool_args") or {},
            )
            self._open[(card.iteration, card.tool_name)].append(card)
            item = StepItem(kind="card", card=card, dom_id=card.dom_id)
            self.items.append(item)
            frame = self.append_item(item, render)
            return frame + self.set_status(
                _("Running %(tool)s…") % {"tool": card.tool_name}, render
            )
        if kind == "iteration":
            key = (payload.get("iteration", 0), payload.get("tool_name", ""))
            queue = self._open.get(key)
            if not queue:
                return ""
            card = queue.popleft()
            card.observation = payload.get("observation") or ""
            card.error = payload.get("error")
            card.elapsed = payload.get("iter_elapsed")
            card.done = True
            card.waiting = False
            return self._card_frame(card, render)
        if kind == "answer":
            return self.set_status(_("Writing the answer…"), render)
        return ""

    def _thought_delta(self, iteration: int, content: str, render: bool) -> str:
        """A step's thought as it streams: a collapsed "Thinking…" item that grows."""
        item = self._thoughts.get(iteration)
        if item is None:
            item = self._thoughts[iteration] = self._new_thought(content, live=True)
            return self.append_item(item, render)
        item.text += content
        if not render or not content:
            return ""
        wrapper = self._thought_wrappers.get(item.dom_id)
        if wrapper is None:
            wrapper = _slot_wrapper("thought-delta", {"item": item, "content": _CONTENT_SLOT})
            self._thought_wrappers[item.dom_id] = wrapper
        before, after = wrapper
        return before + escape(content) + after

    def _thought_done(self, iteration: int, reasoning: str, render: bool) -> str:
        """The step's whole thought: replaces what streamed (empty: keep it as it is)."""
        item = self._thoughts.pop(iteration, None)
        if item is None:
            return self.append_item(self._new_thought(reasoning), render) if reasoning else ""
        item.extra["live"] = False
        if reasoning:
            item.text = reasoning
        if not render:
            return ""
        return partial("thought-item", {"item": item, "oob": True})

    def _new_thought(self, text: str, *, live: bool = False) -> StepItem:
        item = StepItem(
            kind="thought",
            text=text,
            dom_id=f"thought-{self.run_id}-{len(self.items)}",
            extra={"live": True} if live else {},
        )
        self.items.append(item)
        return item

    def append_item(self, item: StepItem, render: bool) -> str:
        if not render:
            return ""
        return partial("append-step", {"view": self, "item": item})

    def _on_answer(self, payload: dict[str, Any], render: bool) -> str:
        status = payload.get("status")
        if status == "start":
            self.answer_started = True
            return self.set_status(_("Writing the answer…"), render)
        if status == "reset":  # what streamed was a step's thought: its ThinkingDone shows it
            self.answer_text, self.answer_started = "", False
            return partial("run-answer", {"view": self, "oob": True}) if render else ""
        if status == "delta":
            content = payload.get("content", "")
            self.answer_text += content
            if not render or not content:
                return ""
            if self._delta_wrapper is None:
                self._delta_wrapper = _slot_wrapper(
                    "answer-delta", {"view": self, "content": _CONTENT_SLOT}
                )
            before, after = self._delta_wrapper
            return before + escape(content) + after
        return ""

    def _on_phase(self, payload: dict[str, Any], render: bool) -> str:
        frame = self.plan.on_phase(self, payload, render)
        if frame is not None:
            return frame
        if payload.get("phase") == "selecting_tools":
            return self.set_status(
                _("Choosing the right tools among %(count)s…")
                % {"count": payload.get("total_tools", "?")},
                render,
            )
        return self.set_status(
            str(payload.get("phase", "")).replace("_", " ").capitalize() + "…", render
        )

    def _on_step_progress(self, payload: dict[str, Any], render: bool) -> str:
        return self.plan.on_progress(self, payload, render)

    def _on_inject(self, payload: dict[str, Any], render: bool) -> str:
        index = self._injects
        self._injects += 1
        message_id = self.inject_ids[index] if index < len(self.inject_ids) else None
        dom_id = f"inject-{message_id}" if message_id else f"inject-{self.run_id}-{index}"
        item = StepItem(
            kind="inject", text=payload.get("content", ""), dom_id=dom_id, extra={"delivered": True}
        )
        self.items.append(item)
        if not render:
            return ""
        # The "sent" item waits below the run's answer (#followups-<run>); taken in, it is
        # one of the run's steps.
        return partial("inject-taken", {"item": item, "view": self})

    def _on_approval(self, payload: dict[str, Any], render: bool) -> str:
        """A tool call waiting for the user's approval: an Approve / Deny card in the steps,
        updated in place with the decision."""
        call_id = str(payload.get("call_id", ""))
        if payload.get("status") == "requested":
            item = StepItem(
                kind="approval",
                dom_id=f"approval-{self.run_id}-{len(self.items)}",
                extra={
                    "call_id": call_id,
                    "tool_name": payload.get("tool_name", ""),
                    "tool_args": payload.get("tool_args") or {},
                    "reason": payload.get("reason", ""),
                    # What the call would send (its tool's preview): method, URL, body,
                    # credentials by name; {} for a tool without one.
                    "request": payload.get("request") or {},
                    "status": "requested",
                },
            )
            self.items.append(item)
            frame = self.append_item(item, render)
            card = self._card_asked_about(item.extra["tool_name"], item.extra["tool_args"])
            if card is not None:
                card.waiting = True
                item.extra["card"] = card
                frame += self._card_frame(card, render)
            return frame + self.set_status(
                _("Waiting for your approval of %(tool)s…") % {"tool": item.extra["tool_name"]},
                render,
            )
        item = self.approval_item(call_id)
        if item is None:
            return ""
        item.extra["status"] = payload.get("status", "")
        card = item.extra.get("card")
        card_frame = ""
        if card is not None and card.waiting:
            card.waiting = False  # approved: it runs; refused: its end follows
            card_frame = self._card_frame(card, render)
        if not render:
            return ""
        return partial("approval-item", {"item": item, "view": self, "oob": True}) + card_frame

    def _card_asked_about(self, tool_name: str, tool_args: dict[str, Any]) -> ToolCard | None:
        """The open card of the call an approval asks about: the same tool and arguments,
        else the latest open card of that tool."""
        open_cards = [*self.open_cards(), *self.plan.open_cards()]
        cards = [c for c in open_cards if c.tool_name == tool_name and not c.waiting]
        same = [c for c in cards if c.tool_args == tool_args]
        return (same or cards or [None])[-1]

    def _card_frame(self, card: ToolCard, render: bool) -> str:
        """The frame redrawing ``card``: itself, or in plan mode the step holding it."""
        if not render:
            return ""
        step = self.plan.step_of(card)
        if step is not None:
            return partial("plan-step", {"step": step, "oob": True})
        return partial("tool-card", {"card": card, "oob": True})

    def approval_item(self, call_id: str) -> StepItem | None:
        return next(
            (i for i in self.items if i.kind == "approval" and i.extra["call_id"] == call_id), None
        )

    def _on_resume(self, payload: dict[str, Any], render: bool) -> str:
        """The run goes on from a paused run's trace: said first in its steps."""
        item = StepItem(
            kind="resume",
            dom_id=f"resume-{self.run_id}",
            extra={
                "run_id": payload.get("resumed_run_id"),
                "tool_results": payload.get("tool_results", 0),
            },
        )
        self.items.append(item)
        return self.append_item(item, render)

    def _on_compact(self, payload: dict[str, Any], render: bool) -> str:
        item = StepItem(
            kind="compact",
            dom_id=f"compact-{self.run_id}-{len(self.items)}",
            extra={
                "original": payload.get("original_messages", 0),
                "kept": payload.get("kept_messages", 0),
            },
        )
        self.items.append(item)
        return self.append_item(item, render)

    def _on_followup(self, payload: dict[str, Any], render: bool) -> str:
        self.followup = payload
        return self.followup_frame() if render else ""

    def _on_unanswered(self, payload: dict[str, Any], render: bool) -> str:
        self.unanswered = payload.get("messages", [])
        return self.followup_frame() if render else ""

    def followup_frame(self) -> str:
        """The follow-ups this run left over, out of its steps, as user messages, and the
        run answering them if any (a Stop leaves them unanswered), in this run's "next"
        slot: a repeated frame replaces, never duplicates. "" when none were left over."""
        if self.followup:
            messages = self.followup.get("messages", [])
            next_view: RunView | None = RunView(run_id=self.followup["run_id"])
        elif self.unanswered:
            messages, next_view = self.unanswered, None
        else:
            return ""
        frame = partial(
            "followup",
            {
                "view": self,
                "messages": [FollowupMessage(**m) for m in messages],
                "next_view": next_view,
            },
        )
        # The run answering them works now: the composer's Stop is its.
        return frame + composer_frame(next_view) if next_view is not None else frame

    def _on_title(self, payload: dict[str, Any], render: bool) -> str:
        """The conversation's automatic title (conversations/runs/titling.py)."""
        self.title = str(payload.get("title") or "")
        return self.title_frame() if render else ""

    def title_frame(self) -> str:
        """The chat header's title, marked so that the page also reloads the sidebar's
        list and renames its tab (static/js/chat.js); "" before a title came."""
        if not self.title:
            return ""
        context = {"conversation": {"title": self.title}, "oob": True, "retitled": True}
        return partial("title-input", context)

    def _on_done(self, payload: dict[str, Any], render: bool) -> str:
        self.done = payload
        self.status_text = ""
        if payload.get("answer") and not self.answer_text:
            self.answer_text = payload["answer"]
        return self._finish_frame(render)

    def _on_handover(self, payload: dict[str, Any], render: bool) -> str:
        """A stopped worker handed the run back and another goes on from its last completed
        step (runs/handover.py): the answer so far is taken back (it is written again),
        the thoughts that were streaming end, and the status says what happened."""
        self.answer_text, self.answer_started = "", False
        frames = [partial("run-answer", {"view": self, "oob": True})] if render else []
        for item in self._thoughts.values():
            item.extra["live"] = False
            if render:
                frames.append(partial("thought-item", {"item": item, "oob": True}))
        self._thoughts.clear()
        frames.append(self.set_status(str(payload.get("message") or ""), render))
        return "".join(frames)

    def _on_error(self, payload: dict[str, Any], render: bool) -> str:
        self.error = payload
        self.status_text = ""
        for card in self.open_cards():
            card.done = True
            card.error = card.error or _("[interrupted]")
        self._open.clear()
        return self._finish_frame(render)

    def _on_saved(self, payload: dict[str, Any], render: bool) -> str:
        """The run's end, sent before it could be written, is in the log now."""
        for ending in (self.done, self.error):
            if ending is not None:
                ending.pop("unsaved", None)
        return self._finish_frame(render) if self.finished else ""

    def _finish_frame(self, render: bool) -> str:
        unfinished = self.plan.close()  # steps a Stop or a failure left behind
        if not render:
            return ""
        frames = [partial("plan-step", {"step": step, "oob": True}) for step in unfinished]
        frames += [partial("run-finish", {"view": self, "oob": True}), composer_frame(self)]
        return "".join(frames)

    # helpers for templates -------------------------------------------------
    RETRYABLE: ClassVar[tuple[str, ...]] = Run.RETRYABLE_STATUSES  # shown with a Retry

    @property
    def incomplete(self) -> str:
        """Why the saved answer is cut short ("" when it is complete)."""
        done = self.done or {}
        if done.get("status") != "incomplete":
            return ""
        return done.get("reason") or _("The answer is incomplete.")

    @property
    def paused(self) -> bool:
        """A loop guard stopped the run so the user can step in (Continue, if resumable)."""
        return (self.done or {}).get("status") == Run.Status.PAUSED

    @property
    def unsaved(self) -> str:
        """Why the end shown is not saved yet ("" once it is, or when it was at once)."""
        ending = self.done or self.error or {}
        return ending.get("unsaved", "")

    @property
    def note(self) -> str:
        """What a reader should know about a complete answer (e.g. it was not rewritten)."""
        done = self.done or {}
        return done.get("reason", "") if done.get("status") == "succeeded" else ""

    @property
    def answer_html(self) -> str:
        """The finished answer, its "[n]" linked to the passages of the run's sources (the
        live stream shows the plain rendering until the finish frame brings this one)."""
        html = render_markdown(self.answer_text)
        sources = self.sources
        if not sources:
            return html
        return link_citations(html, passage_links(sources))

    @property
    def sources(self) -> list[dict[str, Any]]:
        """The knowledge passages the answer may cite, by number (from the run's
        search_knowledge cards: they are in the log, so they survive a reload)."""
        if not self.finished:
            return []
        return sources_of(item.card for item in self.items if item.card is not None)

    @property
    def footer(self) -> dict[str, Any] | None:
        if not self.done:
            return None
        usage = self.done.get("usage") or {}
        # A plan counts its steps (a step's own loop turns are the engine's iterations:
        # a 4-step plan of 2 turns each is 8 of those).
        plan_steps = sum(len(plan_round.steps) for plan_round in self.plan.rounds.values())
        return {
            "iterations": self.done.get("iterations", 0),
            "plan_steps": plan_steps,
            "tokens": usage.get("total_tokens", 0),
            "elapsed": self.done.get("elapsed", 0.0),
        }


def sources_of(cards: Iterable[ToolCard]) -> list[dict[str, Any]]:
    """The numbered knowledge passages of a run's finished search_knowledge cards, each
    once, in number order: ``[{number, chunk_id, where}]``."""
    found: dict[int, dict[str, Any]] = {}
    for card in cards:
        if card.tool_name == "search_knowledge" and card.done:
            for citation in citations(card.observation):
                found.setdefault(citation["number"], citation)
    return [found[number] for number in sorted(found)]


def passage_links(sources: Iterable[dict[str, Any]]) -> list[Citation]:
    """The sources as inline citations opening the live passage (its readers only)."""
    return [
        Citation(s["number"], reverse("knowledge_passage", args=[s["chunk_id"]]), s["where"])
        for s in sources
    ]


def build_run_view(
    run_id: int, events: list[tuple[int, str, dict[str, Any]]], inject_ids: list[int]
) -> RunView:
    """Replay stored events into a RunView without rendering frames."""
    view = RunView(run_id=run_id, inject_ids=list(inject_ids))
    for seq, channel, payload in events:
        view.apply(seq, channel, payload, render=False)
    return view


def render_run_block(
    view: RunView, run, *, pending_injects=(), oob: bool = False, with_next_slot: bool = False
) -> str:
    """The whole run block (steps, answer, footer) for a page load or a reconnect;
    ``with_next_slot`` adds the empty slot where a follow-up run will appear (once per
    page: a reconnect's re-render must not empty a filled slot)."""
    html = partial(
        "run-block", {"view": view, "run": run, "pending_injects": pending_injects, "oob": oob}
    )
    return html + partial("run-next", {"view": view}) if with_next_slot else html
