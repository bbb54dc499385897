"""Export a conversation as Markdown or JSON.

The JSON export is the one format :mod:`conversations.transfer.importing` reads: ``format`` and
``version`` say so. It holds the selected branch (what the page shows) or the whole tree
of runs (``tree=True``): every run with its parent and whether it is the one followed at
its fork, so an import shows the same branch and keeps the others to switch to.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from audit.services import Client, record
from conversations import selectors
from conversations.models import Conversation, Message, Run, RunEvent
from conversations.pages.rendering import ToolCard, build_run_view, sources_of
from core.errors import ApplicationError

__all__ = [
    "ENDINGS",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "Branch",
    "branch_load",
    "export_document",
    "export_filename",
    "export_json",
    "export_markdown",
    "run_cards",
    "run_ending",
]

EXPORT_FORMAT = "agentsite.conversation"
EXPORT_VERSION = 1
MARKDOWN_RESULT_PREVIEW_CHARS = 500


# ----------------------------------------------------------------------- the branch


@dataclass
class Branch:
    """The selected branch: its runs first to last, and its messages in order, each with
    the run of the branch that shows it (``carriers``: a regenerated answer's question is
    saved under the run that first answered it, which is not on the branch)."""

    runs: list[Run]
    messages: list[Message]
    carriers: dict[int, int | None]  # message id -> run id on the branch (None: no run)


def branch_load(conversation: Conversation) -> Branch:
    tree = selectors.conversation_tree(conversation=conversation)
    path = tree.selected_path()
    messages = selectors.branch_messages(conversation=conversation, tree=tree)
    runs_by_id = conversation.runs.select_related("model").in_bulk([n.run_id for n in path])
    seq_of = {m.pk: m.seq for m in messages}
    # As conversations.history.tree.path_filter decides, but remembering which node asked.
    wanted: dict[int, list[tuple[str, int, int]]] = {}
    for node in path:
        trigger_seq = seq_of.get(node.trigger_id, 0) if node.trigger_id else 0
        owner = tree.question_owner(node.trigger_id)
        if owner is not None:
            wanted.setdefault(owner, []).append(("question", trigger_seq, node.run_id))
        wanted.setdefault(node.run_id, []).append(("own", trigger_seq, node.run_id))
    carriers: dict[int, int | None] = {}
    for message in messages:
        carriers[message.pk] = None
        for part, trigger_seq, carrier in wanted.get(message.run_id, ()):
            if (part == "question" and message.seq <= trigger_seq) or (
                part == "own" and message.seq > trigger_seq
            ):
                carriers[message.pk] = carrier
                break
    return Branch([runs_by_id[n.run_id] for n in path], messages, carriers)


def run_cards(run_ids: list[int]) -> dict[int, list[ToolCard]]:
    """Each run's tool cards, replayed from its logged events (as the chat shows them)."""
    events: dict[int, list[tuple[int, str, dict[str, Any]]]] = {pk: [] for pk in run_ids}
    rows = RunEvent.objects.filter(run_id__in=run_ids, channel__in=("step", "error"))
    rows = rows.order_by("seq")
    for seq, run_id, channel, payload in rows.values_list("seq", "run_id", "channel", "payload"):
        events[run_id].append((seq, channel, payload))
    cards: dict[int, list[ToolCard]] = {}
    for run_id, run_events in events.items():
        view = build_run_view(run_id, run_events, [])
        cards[run_id] = [item.card for item in view.items if item.card is not None]
    return cards


def _model_name(run: Run, conversation: Conversation) -> str | None:
    model = run.model if run.model_id else conversation.model
    return str(model) if model is not None else None


# --------------------------------------------------------------------------- export


def export_filename(conversation: Conversation, extension: str) -> str:
    """A file name from the title: ASCII, no path characters."""
    stem = slugify(conversation.title)[:80].strip("-") or f"conversation-{conversation.pk}"
    return f"{stem}.{extension}"


def message_fields(message: Message) -> dict[str, Any]:
    """What a message says, as the API and an export both show it."""
    return {
        "id": message.pk,
        "seq": message.seq,
        "role": message.role,
        "kind": message.kind,
        "content": message.content,
        "reasoning": message.reasoning,
        "incomplete": message.incomplete,
        "pinned": message.pinned,
        "usage": message.usage,
    }


def _message_out(message: Message, run_id: int | None) -> dict[str, Any]:
    created_at = message.created_at.isoformat()
    out = {**message_fields(message), "created_at": created_at, "run_id": run_id}
    files = _file_references(message)
    if files:
        out["files"] = files
    return out


def _file_references(message: Message) -> list[dict[str, Any]]:
    """The message's files as references: what they were, not their bytes (an export is
    a conversation, not a backup of the owner's files)."""
    return [
        {"name": a.file.name, "size": a.file.size, "content_type": a.file.content_type}
        for a in message.attachments.all()
    ]


def _run_out(
    run: Run, conversation: Conversation, *, parent_id, selected: bool, cards: list[ToolCard]
) -> dict:
    out = {
        "id": run.pk,
        "parent_id": parent_id,
        "trigger_message_id": run.trigger_message_id,
        "status": run.status,
        "selected": selected,
        "iterations": run.iterations,
        "usage": run.usage,
        "elapsed": run.elapsed,
        "error": run.error,
        "model": _model_name(run, conversation),
        "created_at": run.created_at.isoformat(),
    }
    sources = sources_of(cards)
    if sources:  # what the answer's "[n]" refer to, as its page lists them
        out["sources"] = [{"number": s["number"], "where": s["where"]} for s in sources]
    return out


def export_json(*, conversation: Conversation, tree: bool = False) -> dict[str, Any]:
    """The export document: the selected branch, or with ``tree`` every run and message."""
    if tree:
        run_tree = selectors.conversation_tree(conversation=conversation)
        chosen = run_tree.followed_ids()
        runs = list(conversation.runs.select_related("model").order_by("created_at", "id"))
        cards = run_cards([run.pk for run in runs])
        runs_out = [
            _run_out(
                run,
                conversation,
                parent_id=run.parent_id,
                selected=run.pk in chosen,
                cards=cards[run.pk],
            )
            for run in runs
        ]
        messages_out = [
            _message_out(m, m.run_id)
            for m in conversation.messages.prefetch_related("attachments__file").order_by("seq")
        ]
    else:
        branch = branch_load(conversation)
        cards = run_cards([run.pk for run in branch.runs])
        runs_out, parent_id = [], None
        for run in branch.runs:
            runs_out.append(
                _run_out(run, conversation, parent_id=parent_id, selected=True, cards=cards[run.pk])
            )
            parent_id = run.pk
        messages_out = [_message_out(m, branch.carriers[m.pk]) for m in branch.messages]
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "scope": "tree" if tree else "branch",
        "exported_at": timezone.now().isoformat(),
        "conversation": {
            "title": conversation.title,
            "model": str(conversation.model) if conversation.model_id else None,
            "created_at": conversation.created_at.isoformat(),
        },
        "messages": messages_out,
        "runs": runs_out,
    }


def export_document(
    *,
    conversation: Conversation,
    fmt: str,
    tree: bool = False,
    actor=None,
    client: Client | None = None,
) -> tuple[str, str, str]:
    """The export as ``(body, content type, file name)``; ``fmt`` is markdown or json.

    Audited as ``conversation.exported`` by ``actor`` (default: the owner)."""
    if fmt == "markdown":
        body = export_markdown(conversation=conversation)
        content_type, filename = "text/markdown; charset=utf-8", export_filename(conversation, "md")
    elif fmt == "json":
        document = export_json(conversation=conversation, tree=tree)
        body = json.dumps(document, ensure_ascii=False, indent=2)
        content_type = "application/json; charset=utf-8"
        filename = export_filename(conversation, "json")
    else:
        raise ApplicationError(
            _("Choose the format markdown or json."), extra={"format": [_("markdown or json")]}
        )
    record(
        "conversation.exported",
        actor=actor if actor is not None else conversation.owner,
        target=conversation,
        changes={"format": [None, f"{fmt}, every branch" if tree and fmt == "json" else fmt]},
        client=client,
    )
    return body, content_type, filename


def _fence(text: str, info: str = "") -> str:
    """``text`` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _card_markdown(card: ToolCard) -> str:
    args = json.dumps(card.tool_args, ensure_ascii=False, indent=2, sort_keys=True)
    parts = [f"**{_('Tool call:')}** `{card.tool_name}`", _fence(args, "json")]
    if card.error:
        parts.append(
            _("Error:") + "\n\n" + _fence(card.error[:MARKDOWN_RESULT_PREVIEW_CHARS], "text")
        )
    if card.observation:
        preview = card.observation[:MARKDOWN_RESULT_PREVIEW_CHARS]
        if len(card.observation) > MARKDOWN_RESULT_PREVIEW_CHARS:
            preview += "…"
        parts.append(_("Result:") + "\n\n" + _fence(preview, "text"))
    return "\n\n".join(parts)


ENDINGS = (Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.INCOMPLETE)


def run_ending(run: Run) -> str:
    """How a run that did not succeed ended, with its error when it has one."""
    if run.error:
        if run.status == Run.Status.FAILED:
            return _("The run failed: %(error)s") % {"error": run.error}
        if run.status == Run.Status.CANCELLED:
            return _("The run was stopped: %(error)s") % {"error": run.error}
        return _("The answer is incomplete: %(error)s") % {"error": run.error}
    if run.status == Run.Status.FAILED:
        return _("The run failed.")
    if run.status == Run.Status.CANCELLED:
        return _("The run was stopped.")
    return _("The answer is incomplete.")


def _sources(cards) -> str:
    """The knowledge passages the answer may cite, as its page lists them."""
    found = sources_of(cards)
    if not found:
        return ""
    lines = "\n".join(f"[{source['number']}] {source['where']}  " for source in found)
    return f"\n\n**{_('Sources')}**\n\n{lines}"


def export_markdown(*, conversation: Conversation) -> str:
    """The selected branch as a readable document: questions, tool calls, answers (their
    markdown source, as the copy button copies them)."""
    branch = branch_load(conversation)
    runs = {run.pk: run for run in branch.runs}
    cards = run_cards(list(runs))
    title = conversation.title or _("Conversation %(id)s") % {"id": conversation.pk}
    blocks = [f"# {title}"]
    with_cards: set[int] = set()
    finished: set[int] = set()

    def add_cards(run_id: int | None) -> None:  # before the run's answer, once
        if run_id is not None and run_id not in with_cards:
            with_cards.add(run_id)
            blocks.extend(_card_markdown(card) for card in cards.get(run_id, ()))

    def finish(run_id: int | None) -> None:  # after the run's last message
        if run_id is None or run_id in finished:
            return
        finished.add(run_id)
        add_cards(run_id)
        run = runs[run_id]
        if run.status in ENDINGS:
            blocks.append(f"*{run_ending(run)}*")

    previous: int | None = None
    for message in branch.messages:
        carrier = branch.carriers[message.pk]
        if carrier != previous:
            finish(previous)
        if message.role == Message.Role.ASSISTANT:
            add_cards(carrier)
            sources = _sources(cards.get(carrier, ()))
            blocks.append(f"## {_('Assistant')}\n\n{message.content}{sources}")
        else:
            attached = "".join(
                "\n\n*%s*"
                % (
                    _("Attached: %(name)s (%(size)s)")
                    % {"name": f["name"], "size": filesizeformat(f["size"])}
                )
                for f in _file_references(message)
            )
            blocks.append(f"## {_role_label(message)}\n\n{message.content}{attached}")
        previous = carrier
    finish(previous)
    for run in branch.runs:  # runs none of whose messages are on the branch
        finish(run.pk)
    return "\n\n".join(blocks) + "\n"


def _role_label(message: Message) -> str:
    if message.role == Message.Role.SYSTEM:
        return _("System")
    return _("User (follow-up)") if message.kind == Message.Kind.INJECT else _("User")
