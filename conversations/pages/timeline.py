"""What the chat page shows: the branch's messages and runs with each run's state, and the
blocks a reconnecting websocket re-renders (catch-up).

Built from the selectors' data and the event log; each run's state is a
:class:`~conversations.pages.rendering.RunView`.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from conversations.history.numbering import last_event_seq
from conversations.history.tree import RunTree, path_filter
from conversations.models import Conversation, Message, Run, RunEvent
from conversations.pages.items import StepItem
from conversations.pages.rendering import (
    RunView,
    build_run_view,
    composer_frame,
    render_run_block,
)
from conversations.selectors import events_after, run_inject_ids, runs_with_events_after
from conversations.services import quota_refusal

__all__ = ["catch_up_frames", "conversation_timeline", "socket_catch_up"]


def conversation_timeline(*, conversation: Conversation, fresh_run_id: int | None = None) -> dict:
    """Everything the chat page shows of the branch the user is on, in order, with each
    run's rendered state and the alternatives at each fork.

    Finished runs replay only their non-answer events (the answer is the saved message);
    an active run also replays its answer deltas. A run just launched by the request
    (``fresh_run_id``) starts empty: the page applies its frames as they arrive, as it
    does for a run started from the composer.
    """
    # The page shows the log up to here; its websocket catches up from here.
    last_seq = last_event_seq(conversation.pk)
    tree = RunTree.load(conversation.pk)
    path = tree.selected_path()
    path_ids = [node.run_id for node in path]
    messages = path_filter(tree, path, conversation.messages.prefetch_related("attachments__file"))
    runs = list(
        Run.objects.filter(pk__in=path_ids).select_related("model").order_by("created_at", "id")
    )
    events_by_run: dict[int, list] = {run.pk: [] for run in runs}
    active_ids = {run.pk for run in runs if run.is_active}
    logged = [pk for pk in path_ids if not (pk == fresh_run_id and pk in active_ids)]
    rows = RunEvent.objects.filter(conversation=conversation, seq__lte=last_seq, run_id__in=logged)
    rows = rows.filter(Q(run_id__in=active_ids) | ~Q(channel="answer")).order_by("seq")
    for seq, run_id, channel, payload in rows.values_list("seq", "run_id", "channel", "payload"):
        events_by_run.setdefault(run_id, []).append((seq, channel, payload))
    answers = {m.run_id: m for m in messages if m.role == Message.Role.ASSISTANT and m.run_id}
    by_run: dict[int, list[Message]] = {}
    for message in messages:
        if message.run_id:
            by_run.setdefault(message.run_id, []).append(message)
    # A run the quota refused before it started offers no Retry while the quota refuses.
    refused_early = any(r.status == Run.Status.FAILED and r.started_at is None for r in runs)
    quota_blocks = bool(refused_early and quota_refusal(conversation.owner))
    staff = conversation.owner.is_staff  # the page's reader: only the owner sees a chat
    items: list[dict] = []
    runs_by_trigger = {run.trigger_message_id: run for run in runs}
    placed: set[int] = set()
    for message in messages:
        run = runs_by_trigger.get(message.pk)
        if message.role == Message.Role.USER and message.kind == Message.Kind.CHAT:
            question = tree.question_siblings(run.pk) if run is not None else None
            items.append({"kind": "message", "message": message, "question": question})
        if run is not None:
            item = _run_item(
                run, events_by_run, answers, by_run.get(run.pk, []), quota_blocks, staff
            )
            item["answers"] = tree.answer_siblings(run.pk)
            items.append(item)
            placed.add(run.pk)
    for run in runs:  # runs whose trigger message is gone
        if run.pk not in placed:
            items.append(
                _run_item(run, events_by_run, answers, by_run.get(run.pk, []), quota_blocks, staff)
            )
    active = next((run for run in reversed(runs) if run.status in Run.ACTIVE_STATUSES), None)
    # The composer's Stop and status line follow the run that works now (composer_state.html).
    active_view = next(
        (i["view"] for i in items if i["kind"] == "run" and active and i["run"].pk == active.pk),
        None,
    )
    return {"items": items, "last_seq": last_seq, "active_run": active, "active_view": active_view}


def _run_item(
    run: Run,
    events_by_run: dict,
    answers: dict[int, Message],
    run_messages: list[Message],
    quota_blocks: bool = False,
    staff: bool = False,
) -> dict:
    """A run of the timeline, from what the page already read (no query per run); a
    failure's technical detail only for a staff reader."""
    events = sorted(events_by_run.get(run.pk, []), key=lambda e: e[0])
    # Delivered follow-ups in delivery order, as selectors.run_inject_ids reads them.
    delivered = sorted(
        (m for m in run_messages if m.kind == Message.Kind.INJECT and m.delivered_at),
        key=lambda m: (m.delivered_at, m.seq),
    )
    view = build_run_view(run.pk, events, [m.pk for m in delivered])
    answer = answers.get(run.pk)
    if answer is not None:
        view.answer_text = answer.content
        view.assistant_message = answer
    if not run.is_active and not view.finished:
        # Finished without a terminal event (e.g. refused by quota before starting).
        if run.status == run.Status.SUCCEEDED:
            view.done = {
                "iterations": run.iterations,
                "usage": run.usage,
                "elapsed": run.elapsed or 0,
            }
        else:
            view.error = {
                "message": run.error or run.get_status_display(),
                "status": run.status,
                "retryable": not (quota_blocks and run.started_at is None),
            }
    if staff:
        view.error_detail = run.error_detail
    pending = _pending_injects(view, run_messages, run.is_active)
    return {"kind": "run", "run": run, "view": view, "pending_injects": pending}


def _pending_injects(
    view: RunView, messages: Iterable[Message], run_active: bool
) -> list[_PendingInject]:
    """The run's follow-ups its agent has not taken in (no inject event yet), oldest
    first: not delivered to the run yet, or delivered (the run's wake-up marks them at
    once) and waiting for the agent's current step to end. A finished run's delivered
    follow-up without an event (an imported conversation keeps no events) shows as
    delivered: no step is left to read it."""
    taken_in = set(view.taken_in_ids)
    return [
        _PendingInject(m, delivered=not run_active and m.delivered_at is not None)
        for m in messages
        if m.kind == Message.Kind.INJECT and m.pk not in taken_in
    ]


class _PendingInject:
    """Adapter so the template renders a follow-up without an event like an inject item."""

    def __init__(self, message, delivered: bool) -> None:
        self.as_inject_item = StepItem(
            kind="inject", text=message.content, dom_id=f"inject-{message.pk}",
            extra={"delivered": delivered},
        )  # fmt: skip


def socket_catch_up(*, conversation_id: int, after_seq: int) -> tuple[list[str], int, bool]:
    """A websocket's catch-up (its owner checked): :func:`catch_up_frames` and whether a
    run of the conversation is active (its last events may be sent but not yet written)."""
    frames, last_seq = catch_up_frames(conversation_id=conversation_id, after_seq=after_seq)
    active = Run.objects.filter(
        conversation_id=conversation_id, status__in=Run.ACTIVE_STATUSES
    ).exists()
    return frames, last_seq, active


def catch_up_frames(*, conversation_id: int, after_seq: int) -> tuple[list[str], int]:
    """Frames re-rendering every run with events after ``after_seq``; and the seq reached."""
    run_ids, last_seq = runs_with_events_after(conversation_id, after_seq)
    if not run_ids:
        return [], after_seq
    frames = []
    for run_id in run_ids:
        run = Run.objects.get(pk=run_id)
        events = [(s, c, p) for s, _r, c, p in events_after(conversation_id, 0, run_id=run_id)]
        view = build_run_view(run_id, events, run_inject_ids(run_id))
        view.error_detail = staff_detail(run_id)
        answer = run.messages.filter(role=Message.Role.ASSISTANT).order_by("-seq").first()
        if answer is not None:
            view.answer_text = answer.content
            view.assistant_message = answer
        # The block replaces the page's: follow-ups not yet taken in must stay in it.
        pending = _pending_injects(
            view, run.messages.filter(kind=Message.Kind.INJECT).order_by("seq"), run.is_active
        )
        # With the composer's state for that run: the last run re-rendered sets it.
        block = render_run_block(view, run, pending_injects=pending, oob=True)
        frames.append(block + composer_frame(view))
        if any(seq > after_seq and channel == "title" for seq, channel, _ in events):
            frames.append(view.title_frame())  # given while the page was not listening
        # Fills the slot after this run (with the next run's block, if any, coming next).
        if leftovers := view.followup_frame():
            frames.append(leftovers)
    return frames, last_seq


def logged_run_view(run_id: int) -> RunView:
    """A run's render state from its log: its steps (open tool cards, approvals), the
    answer text that reached the log, the follow-ups it took in."""
    stored = list(
        RunEvent.objects.filter(run_id=run_id)
        .order_by("seq")
        .values_list("seq", "channel", "payload")
    )
    return build_run_view(run_id, stored, run_inject_ids(run_id))


# Events whose frame shows what the run's rows say besides the event: the follow-up taken
# in (its message id), the end (the answer's message for its pin, whether Continue works).
READS_ROWS = frozenset({"inject", "done", "error", "saved"})


def live_run_view(run_id: int, through: int) -> RunView:
    """A run's render state from its logged events numbered up to ``through`` (a web
    server that starts showing a run mid-way)."""
    stored = list(
        RunEvent.objects.filter(run_id=run_id, seq__lte=through)
        .order_by("seq")
        .values_list("seq", "channel", "payload")
    )
    view = build_run_view(run_id, stored, [])
    read_run_rows(view)
    return view


def read_run_rows(view: RunView, channel: str | None = None) -> None:
    """What the run's rows add to its events (for an event on ``channel``, what that event
    shows; None: all): the follow-ups it took in (in delivery order), its saved answer's
    message, whether a paused run kept its trace."""
    if channel in (None, "inject"):
        view.inject_ids = run_inject_ids(view.run_id)
    if channel == "inject":
        return
    view.assistant_message = (
        Message.objects.filter(run_id=view.run_id, role=Message.Role.ASSISTANT)
        .order_by("-seq")
        .first()
    )
    view.resumable = Run.objects.filter(pk=view.run_id, resume_trace__isnull=False).exists()
    if channel in (None, "error", "saved"):
        view.error_detail = staff_detail(view.run_id)


def staff_detail(run_id: int) -> str:
    """The run's technical failure detail when its conversation's owner is staff, else
    "": a chat's live frames and pages are its owner's only, so the owner is the reader,
    and a user who is not staff never gets the detail in any HTML."""
    detail = (
        Run.objects.filter(pk=run_id, conversation__owner__is_staff=True)
        .values_list("error_detail", flat=True)
        .first()
    )
    return detail or ""
