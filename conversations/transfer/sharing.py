"""Shared links: a read-only snapshot of a conversation's selected branch, by token.

The snapshot is copied when the link is made (questions, tool cards, answers as their
markdown source and, if the owner ticks it, the artifacts' bytes), so later messages
never appear and the public page reads nothing but the link's row: no owner, no ids of
the conversation, its runs or artifacts. Revoking empties the snapshot: a revoked token
answers 404 like an unknown one.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone

from audit.services import Client, record
from conversations.models import Conversation, Message, Run, SharedLink
from conversations.pages.items import OBSERVATION_PREVIEW_CHARS, ToolCard
from conversations.transfer.exporting import Branch, branch_load, run_cards
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
    "snapshot_page",
]

SNAPSHOT_VERSION = 1
OBSERVATION_MAX_CHARS = 20_000
INLINE_MARKDOWN_BYTES = 512 * 1024

_ENDINGS = {
    Run.Status.FAILED: "The run failed",
    Run.Status.CANCELLED: "The run was stopped",
    Run.Status.INCOMPLETE: "The answer is incomplete",
}


# ----------------------------------------------------------------------- services


def share_create(
    *, conversation: Conversation, include_artifacts: bool = False, client: Client | None = None
) -> SharedLink:
    """A new link to a snapshot of the branch the owner is on now (audited as
    ``share.created``; the link's token never reaches the log)."""
    share = SharedLink.objects.create(
        owner_id=conversation.owner_id,
        conversation=conversation,
        token=secrets.token_urlsafe(32),
        title=conversation.title[:200],
        snapshot=snapshot_build(conversation, include_artifacts=include_artifacts),
        include_artifacts=include_artifacts,
    )
    record(
        "share.created",
        actor=conversation.owner,
        target=share,
        changes={
            "conversation": [None, conversation.pk],
            "include_artifacts": [None, include_artifacts],
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


def snapshot_build(conversation: Conversation, *, include_artifacts: bool) -> dict[str, Any]:
    """What the public page shows, copied now: items in page order and artifacts."""
    branch = branch_load(conversation)
    cards = run_cards([run.pk for run in branch.runs])
    artifacts = _ArtifactCopier(enabled=include_artifacts)
    return {
        "version": SNAPSHOT_VERSION,
        "title": conversation.title,
        "shared_at": timezone.now().isoformat(),
        "items": _items(branch, cards, artifacts),
        "artifacts": artifacts.copied,
    }


def _items(
    branch: Branch, cards: dict[int, list[ToolCard]], artifacts: _ArtifactCopier
) -> list[dict[str, Any]]:
    runs = {run.pk: run for run in branch.runs}
    items: list[dict[str, Any]] = []
    placed: set[int] = set()

    def run_item(run_id: int, answer: Message | None) -> None:
        placed.add(run_id)
        run = runs[run_id]
        ending = ""
        if run.status in _ENDINGS:
            ending = _ENDINGS[run.status] + (f": {run.error}" if run.error else ".")
        usage = run.usage or {}
        items.append(
            {
                "kind": "run",
                "cards": [_card(run_id, card, artifacts) for card in cards.get(run_id, ())],
                "answer": answer.content if answer is not None else "",
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
                }
            )
        previous = carrier
    for run in branch.runs:
        if run.pk not in placed:
            run_item(run.pk, None)
    return items


def _card(run_id: int, card: ToolCard, artifacts: _ArtifactCopier) -> dict[str, Any]:
    observation = card.observation[:OBSERVATION_MAX_CHARS]
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


class _ArtifactCopier:
    """Copies the artifacts a card shows into the snapshot, within the size limits."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.copied: list[dict[str, Any]] = []
        self.total = 0
        # Artifacts are copied into the row: a shared link holds at most this much of them.
        self.each_max = int(settings.AGENTSITE_SHARE_ARTIFACT_MAX_BYTES)
        self.total_max = int(settings.AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES)

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
            "data": "",
            "omitted": "",
        }
        if artifact.size > self.each_max:
            entry["omitted"] = "too large to share"
        elif self.total + artifact.size > self.total_max:
            entry["omitted"] = "over the size limit of a shared link"
        else:
            try:
                with artifact.file.open("rb") as handle:
                    data = handle.read(self.each_max)
            except (OSError, ValueError):
                entry["omitted"] = "the file is missing"
            else:
                self.total += len(data)
                entry["data"] = base64.b64encode(data).decode("ascii")
        self.copied.append(entry)
        return len(self.copied) - 1


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


def snapshot_page(share: SharedLink) -> dict[str, Any]:
    """The template's context: answers rendered as the chat renders them (sanitised
    markdown), artifacts with what their preview needs."""
    snapshot = share.snapshot or {}
    copied = (snapshot.get("artifacts") or []) if share.include_artifacts else []
    items = []
    for item in snapshot.get("items", []):
        if item.get("kind") == "run":
            item = {
                **item,
                "answer_html": render_markdown(item.get("answer", "")),
                "cards": [_card_page(card, copied) for card in item.get("cards", [])],
            }
        items.append(item)
    return {"title": snapshot.get("title", ""), "items": items}


def _card_page(card: dict[str, Any], copied: list[dict[str, Any]]) -> dict[str, Any]:
    observation = card.get("observation", "")
    artifacts = []
    for index in card.get("artifacts", []):
        if isinstance(index, int) and 0 <= index < len(copied):
            artifacts.append({**_artifact_page(copied[index]), "index": index})
    return {
        **card,
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
