"""Shared links: a read-only snapshot of a conversation's selected branch, by token.

The snapshot is copied when the link is made (questions, tool cards, answers as their
markdown source, a copy of each knowledge passage an answer cites and, if the owner ticks
them, the artifacts' and the attached files' bytes), so later messages never appear and
the public page reads nothing but the link's row: no owner, no ids of the conversation,
its runs, artifacts, files or passages. The answers' citations open the copied passage on
the share itself, never the knowledge base (which the reader may not see, and which may
change). Revoking empties the snapshot: a revoked token answers 404 like an unknown one.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.services import Client, record
from conversations.models import Conversation, Message, Run, SharedLink
from conversations.pages.arguments import code_arguments, other_arguments
from conversations.pages.citations import Citation, cited_numbers, link_citations
from conversations.pages.items import OBSERVATION_PREVIEW_CHARS, ToolCard, card_state
from conversations.pages.rendering import sources_of
from conversations.transfer.exporting import ENDINGS, Branch, branch_load, run_cards, run_ending
from files.models import StoredFile
from knowledge.models import Chunk
from knowledge.selectors import readable_bases
from tools.artifacts import artifacts_for_run
from tools.markdown.render import render_markdown

__all__ = [
    "SNAPSHOT_VERSION",
    "share_create",
    "share_get",
    "share_list",
    "share_public",
    "share_revoke",
    "share_url",
    "snapshot_artifact",
    "snapshot_build",
    "snapshot_file",
    "snapshot_page",
    "snapshot_passage",
]

SNAPSHOT_VERSION = 1
OBSERVATION_MAX_CHARS = 20_000
INLINE_MARKDOWN_BYTES = 512 * 1024

# ----------------------------------------------------------------------- services


def share_create(
    *,
    conversation: Conversation,
    include_artifacts: bool = False,
    include_files: bool = False,
    client: Client | None = None,
) -> SharedLink:
    """A new link to a snapshot of the branch the owner is on now (audited as
    ``share.created``; the link's token never reaches the log)."""
    share = SharedLink.objects.create(
        owner_id=conversation.owner_id,
        conversation=conversation,
        token=secrets.token_urlsafe(32),
        title=conversation.title[:200],
        snapshot=snapshot_build(
            conversation, include_artifacts=include_artifacts, include_files=include_files
        ),
        include_artifacts=include_artifacts,
        include_files=include_files,
    )
    record(
        "share.created",
        actor=conversation.owner,
        target=share,
        changes={
            "conversation": [None, conversation.pk],
            "include_artifacts": [None, include_artifacts],
            "include_files": [None, include_files],
        },
        client=client,
    )
    return share


def share_list(*, user) -> QuerySet[SharedLink]:
    """The user's links, newest first (without their snapshots: only the list shows)."""
    return SharedLink.objects.filter(owner=user).defer("snapshot").order_by("-created_at", "-id")


def share_get(*, user, share_id: int) -> SharedLink:
    """The link if ``user`` made it; 404 otherwise."""
    return get_object_or_404(SharedLink.objects.defer("snapshot"), pk=share_id, owner=user)


def share_revoke(*, share: SharedLink, actor=None, client: Client | None = None) -> SharedLink:
    """Revoke (once; later calls keep the first time) and drop the snapshot's copy.
    Audited as ``share.revoked`` by ``actor`` (default: the owner)."""
    if share.revoked_at is None:
        share.revoked_at = timezone.now()
        share.snapshot = {}
        share.save(update_fields=["revoked_at", "snapshot"])
        record(
            "share.revoked",
            actor=actor if actor is not None else share.owner,
            target=share,
            client=client,
        )
    return share


def share_url(share: SharedLink) -> str:
    """The public page's path (the token is the only key to it)."""
    return reverse("shared_page", args=[share.token])


def share_public(*, token: str) -> SharedLink:
    """The live link with this token; 404 for an unknown or revoked one, or one whose
    owner's account was deactivated (it answers again if the account is reactivated)."""
    if not token or len(token) > 64:
        raise Http404("No such shared link.")
    return get_object_or_404(
        SharedLink, token=token, revoked_at__isnull=True, owner__is_active=True
    )


# ----------------------------------------------------------------------- snapshot


def snapshot_build(
    conversation: Conversation, *, include_artifacts: bool, include_files: bool = False
) -> dict[str, Any]:
    """What the public page shows, copied now: items in page order, the artifacts and
    attached files ticked, the passages the answers cite."""
    branch = branch_load(conversation)
    cards = run_cards([run.pk for run in branch.runs])
    budget = _ByteBudget()
    copies = _Copies(
        artifacts=_ArtifactCopier(enabled=include_artifacts, budget=budget),
        files=_FileCopier(enabled=include_files, budget=budget),
        passages=_PassageCopier(owner=conversation.owner),
    )
    return {
        "version": SNAPSHOT_VERSION,
        "title": conversation.title,
        "shared_at": timezone.now().isoformat(),
        "items": _items(branch, cards, copies),
        "artifacts": copies.artifacts.copied,
        "files": copies.files.copied,
        "passages": copies.passages.copied,
    }


def _items(
    branch: Branch, cards: dict[int, list[ToolCard]], copies: _Copies
) -> list[dict[str, Any]]:
    runs = {run.pk: run for run in branch.runs}
    items: list[dict[str, Any]] = []
    placed: set[int] = set()

    def run_item(run_id: int, answer: Message | None) -> None:
        placed.add(run_id)
        run = runs[run_id]
        ending = ""
        if run.status in ENDINGS:
            ending = run_ending(run)
        usage = run.usage or {}
        its_cards = cards.get(run_id, [])
        text = answer.content if answer is not None else ""
        items.append(
            {
                "kind": "run",
                "cards": [_card(run_id, card, copies.artifacts) for card in its_cards],
                "answer": text,
                "sources": copies.passages.cite(text, its_cards),
                "ending": ending,
                "footer": {
                    "iterations": run.iterations,
                    "tokens": usage.get("total_tokens", 0) if isinstance(usage, dict) else 0,
                    "elapsed": run.elapsed or 0,
                }
                if run.status == Run.Status.SUCCEEDED
                else None,
            }
        )

    previous: int | None = None
    for message in branch.messages:
        carrier = branch.carriers[message.pk]
        if previous is not None and carrier != previous and previous not in placed:
            run_item(previous, None)  # a run that ended without an answer
        if message.role == Message.Role.ASSISTANT and carrier is not None:
            if carrier not in placed:
                run_item(carrier, message)
        elif message.role == Message.Role.USER:
            items.append(
                {
                    "kind": "message",
                    "content": message.content,
                    "followup": message.kind == Message.Kind.INJECT,
                    "files": copies.files.copy(message),
                }
            )
        previous = carrier
    for run in branch.runs:
        if run.pk not in placed:
            run_item(run.pk, None)
    return items


_CHUNK_ID = re.compile(r" \(chunk \d+\)$", re.MULTILINE)  # a search_knowledge passage's


def _card(run_id: int, card: ToolCard, artifacts: _ArtifactCopier) -> dict[str, Any]:
    observation = card.observation[:OBSERVATION_MAX_CHARS]
    if card.tool_name == "search_knowledge":  # the passages' ids are the owner's business
        observation = _CHUNK_ID.sub("", observation)
    return {
        "tool_name": card.tool_name,
        "tool_args": card.tool_args,
        "observation": observation,
        "observation_cut": len(card.observation) > OBSERVATION_MAX_CHARS,
        "error": card.error,
        "elapsed": card.elapsed,
        "done": card.done,
        "artifacts": artifacts.copy(run_id, card),
    }


class _ByteBudget:
    """The bytes a shared link copies into its row, artifacts and attached files together:
    each at most ``AGENTSITE_SHARE_ARTIFACT_MAX_BYTES``, all at most
    ``AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES`` (the first ones in page order are kept)."""

    def __init__(self) -> None:
        self.total = 0
        self.each_max = int(settings.AGENTSITE_SHARE_ARTIFACT_MAX_BYTES)
        self.total_max = int(settings.AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES)

    def fill(self, entry: dict[str, Any], size: int, open_file: Callable[[], IO[bytes]]) -> None:
        """Set the entry's ``data`` (base64) or why it is ``omitted``."""
        entry["data"], entry["omitted"] = "", ""
        if size > self.each_max:
            entry["omitted"] = _("too large to share")
        elif self.total + size > self.total_max:
            entry["omitted"] = _("over the size limit of a shared link")
        else:
            try:
                with open_file() as handle:
                    data = handle.read(self.each_max)
            except (OSError, ValueError):
                entry["omitted"] = _("the file is missing")
            else:
                self.total += len(data)
                entry["data"] = base64.b64encode(data).decode("ascii")


class _ArtifactCopier:
    """Copies the artifacts a card shows into the snapshot, within the size limits."""

    def __init__(self, *, enabled: bool, budget: _ByteBudget) -> None:
        self.enabled = enabled
        self.budget = budget
        self.copied: list[dict[str, Any]] = []

    def copy(self, run_id: int, card: ToolCard) -> list[int]:
        """Indexes (in ``copied``) of the card's artifacts; none unless enabled."""
        if not self.enabled or not card.artifact_names:
            return []

        rows = artifacts_for_run(run_id).filter(
            tool_name=card.tool_name, name__in=card.artifact_names
        )
        return [self._copy_one(row) for row in rows]

    def _copy_one(self, artifact) -> int:
        entry: dict[str, Any] = {
            "name": artifact.name,
            "mime_type": artifact.mime_type,
            "size": artifact.size,
            "kind": artifact.kind,
            "inline_image": artifact.inline_image,
        }
        self.budget.fill(entry, artifact.size, lambda: artifact.file.open("rb"))
        self.copied.append(entry)
        return len(self.copied) - 1


class _FileCopier:
    """Copies a message's attached files (what they are and their bytes, within the size
    limits) into the snapshot; nothing at all unless the owner ticked it."""

    def __init__(self, *, enabled: bool, budget: _ByteBudget) -> None:
        self.enabled = enabled
        self.budget = budget
        self.copied: list[dict[str, Any]] = []

    def copy(self, message: Message) -> list[int]:
        """Indexes (in ``copied``) of the message's files, in their order."""
        if not self.enabled:
            return []
        return [self._copy_one(attachment.file) for attachment in message.attachments.all()]

    def _copy_one(self, file: StoredFile) -> int:
        entry: dict[str, Any] = {
            "name": file.name,
            "size": file.size,
            "content_type": file.content_type,
            "kind": file.kind,
        }
        self.budget.fill(entry, file.size, lambda: file.blob.open("rb"))
        self.copied.append(entry)
        return len(self.copied) - 1


class _PassageCopier:
    """Copies the knowledge passages each answer cites (by number, in its prose), as they
    read now, once each. Only from bases the owner may still read: sharing must not
    publish a passage its owner lost access to since the run."""

    def __init__(self, *, owner) -> None:
        self.owner = owner
        self.copied: list[dict[str, Any]] = []
        self._index: dict[int, int] = {}  # chunk id -> index in copied (ids stay private)

    def cite(self, answer: str, cards: Iterable[ToolCard]) -> list[dict[str, Any]]:
        """The run's sources the answer cites: ``[{number, where, passage}]``, ``passage``
        the copy's index, or None when the passage is gone or no longer readable."""
        sources = sources_of(cards)
        if not sources or not answer:
            return []
        cited = cited_numbers(render_markdown(answer))
        used = [source for source in sources if source["number"] in cited]
        if not used:
            return []
        chunks = (
            Chunk.objects.filter(document__base__in=readable_bases(self.owner))
            .select_related("document")
            .in_bulk([source["chunk_id"] for source in used])
        )
        return [
            {
                "number": source["number"],
                "where": source["where"],
                "passage": self._copy(chunks[source["chunk_id"]])
                if source["chunk_id"] in chunks
                else None,
            }
            for source in used
        ]

    def _copy(self, chunk: Chunk) -> int:
        if chunk.pk not in self._index:
            self._index[chunk.pk] = len(self.copied)
            self.copied.append(
                {
                    "document": chunk.document.name,
                    "page": chunk.page,
                    "heading": chunk.heading,
                    "text": chunk.text,
                }
            )
        return self._index[chunk.pk]


@dataclass
class _Copies:
    artifacts: _ArtifactCopier
    files: _FileCopier
    passages: _PassageCopier


# ------------------------------------------------------------------ public reading


def snapshot_artifact(share: SharedLink, index: int) -> tuple[dict[str, Any], bytes]:
    """One copied artifact of the snapshot and its bytes; 404 when absent or omitted."""
    copied = share.snapshot.get("artifacts") or []
    if not share.include_artifacts or not 0 <= index < len(copied):
        raise Http404("No such artifact.")
    entry = copied[index]
    if entry.get("omitted") or not entry.get("data"):
        raise Http404("This artifact was not shared.")
    try:
        return entry, base64.b64decode(entry["data"], validate=True)
    except (binascii.Error, ValueError):
        raise Http404("This artifact was not shared.") from None


def snapshot_file(share: SharedLink, index: int) -> tuple[dict[str, Any], bytes]:
    """One copied attached file and its bytes; 404 unless the owner shared the files and
    this one was copied."""
    copied = share.snapshot.get("files") or []
    if not share.include_files or not 0 <= index < len(copied):
        raise Http404("No such file.")
    entry = copied[index]
    if entry.get("omitted") or not entry.get("data"):
        raise Http404("This file was not shared.")
    try:
        return entry, base64.b64decode(entry["data"], validate=True)
    except (binascii.Error, ValueError):
        raise Http404("This file was not shared.") from None


def snapshot_passage(share: SharedLink, index: int) -> dict[str, Any]:
    """One copied passage (document, page, heading, text); 404 when absent."""
    copied = share.snapshot.get("passages") or []
    if not 0 <= index < len(copied):
        raise Http404("No such passage.")
    return copied[index]


def snapshot_page(share: SharedLink) -> dict[str, Any]:
    """The template's context: answers rendered as the chat renders them (sanitised
    markdown, citations linked to the copied passages), artifacts with what their preview
    needs, attached files if shared."""
    snapshot = share.snapshot or {}
    copied = (snapshot.get("artifacts") or []) if share.include_artifacts else []
    files = (snapshot.get("files") or []) if share.include_files else []
    passages = snapshot.get("passages") or []
    items = []
    for item in snapshot.get("items", []):
        if item.get("kind") == "run":
            sources = [_source_page(share, s, passages) for s in item.get("sources", [])]
            citations = [Citation(s["number"], s["href"], s["where"]) for s in sources if s["href"]]
            item = {
                **item,
                "answer_html": link_citations(render_markdown(item.get("answer", "")), citations),
                "sources": sources,
                "cards": [_card_page(card, copied) for card in item.get("cards", [])],
            }
        elif item.get("kind") == "message":
            item = {**item, "files": _files_page(share, item.get("files", []), files)}
        items.append(item)
    return {"title": snapshot.get("title", ""), "items": items}


def _source_page(
    share: SharedLink, source: dict[str, Any], passages: list[dict[str, Any]]
) -> dict[str, Any]:
    index = source.get("passage")
    shared = isinstance(index, int) and 0 <= index < len(passages)
    return {
        "number": source.get("number"),
        "where": source.get("where", ""),
        "href": reverse("shared_passage", args=[share.token, index]) if shared else "",
    }


def _files_page(
    share: SharedLink, indexes: list[Any], files: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    shown = []
    for index in indexes:
        if isinstance(index, int) and 0 <= index < len(files):
            entry = files[index]
            copied = bool(entry.get("data")) and not entry.get("omitted")
            shown.append(
                {
                    **{k: v for k, v in entry.items() if k != "data"},
                    "image": entry.get("kind") == StoredFile.Kind.IMAGE,
                    "href": reverse("shared_file", args=[share.token, index]) if copied else "",
                }
            )
    return shown


def _card_page(card: dict[str, Any], copied: list[dict[str, Any]]) -> dict[str, Any]:
    observation = card.get("observation", "")
    artifacts = []
    for index in card.get("artifacts", []):
        if isinstance(index, int) and 0 <= index < len(copied):
            artifacts.append({**_artifact_page(copied[index]), "index": index})
    tool_name, args = card.get("tool_name", ""), card.get("tool_args")
    return {
        **card,
        "state": card_state(done=True, error=card.get("error")),
        # Code as code, the rest as JSON, as the chat shows them (pages/arguments.py).
        "code_arguments": code_arguments(tool_name, args),
        "other_arguments": other_arguments(tool_name, args),
        "observation_preview": observation[:OBSERVATION_PREVIEW_CHARS],
        "observation_truncated": len(observation) > OBSERVATION_PREVIEW_CHARS
        or card.get("observation_cut", False),
        "artifacts": artifacts,
    }


def _artifact_page(entry: dict[str, Any]) -> dict[str, Any]:
    page = {k: v for k, v in entry.items() if k != "data"}
    if entry.get("kind") == "markdown" and entry.get("data") and not entry.get("omitted"):
        try:
            raw = base64.b64decode(entry["data"])[:INLINE_MARKDOWN_BYTES]
        except (binascii.Error, ValueError):
            raw = b""
        page["markdown_html"] = render_markdown(
            raw.decode("utf-8", errors="replace"), highlight=True
        )
    return page
