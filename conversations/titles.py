"""Automatic titles (issue 46): after a conversation's first answer, one small call to a
model turns the question into a short title, unless the user gave one.

The first message titles a new conversation at once (``services._title_from``); this
replaces that with a few words that say what it is about. Nothing here may hurt the
answer: the call is bounded, a failing or empty reply keeps the title there is, and the
title is written with a conditional UPDATE, so a title the user gave (on creating the
conversation, or by renaming it, even while the call is under way) is never replaced.
:mod:`conversations.runs.titling` says when this runs and tells the open pages.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

from conversations.models import Conversation, Message, Run
from core.errors import ApplicationError
from engine import ChatMessage, Usage
from llms.models import LLMModel
from llms.selectors import default_model_for_user, model_get_for_user, role_models_for_user
from llms.services import build_llm

__all__ = [
    "TitleJob",
    "TitleReply",
    "clean_title",
    "title_job",
    "title_messages",
    "title_reply",
    "title_save",
]

logger = logging.getLogger(__name__)

TITLE_MAX_CHARS = 80
TITLE_MAX_TOKENS = 40  # 3-6 words in any language, with room for a stray prefix
TITLE_TIMEOUT_SECONDS = 15.0
# What the model reads: the question, and the start of the answer for context.
QUESTION_CHARS = 1_500
ANSWER_CHARS = 600

INSTRUCTIONS = (
    "Write a title for the conversation below: 3 to 6 words, in the language of the "
    "user's question, saying what it is about. Reply with the title only: no quotes, no "
    "markdown, no punctuation at the end."
)


@dataclass(frozen=True)
class TitleJob:
    """What one title call needs, read from the rows (a database thread's work)."""

    conversation_id: int
    owner: Any  # the conversation's owner, whose usage the call counts towards
    question: str
    answer: str
    model: LLMModel


@dataclass(frozen=True)
class TitleReply:
    title: str = ""  # cleaned; "" when the call failed or said nothing usable
    usage: Usage | None = None  # what the call cost, when it answered


def title_job(run_id: int) -> TitleJob | None:
    """The title call after ``run_id``, or None when it gets none: the run is not the
    conversation's first answer (a run answering a first question, on any branch, after
    which no earlier run had succeeded), the user gave the title, or no model is left."""
    run = (
        Run.objects.select_related("conversation__owner", "trigger_message")
        .filter(pk=run_id)
        .first()
    )
    if run is None or run.status != Run.Status.SUCCEEDED or run.parent_id is not None:
        return None
    conversation = run.conversation
    if conversation.title_by_user or run.trigger_message is None:
        return None
    earlier = Run.objects.filter(
        conversation_id=conversation.pk, status=Run.Status.SUCCEEDED, pk__lt=run.pk
    )
    if earlier.exists():
        return None
    answer = (
        Message.objects.filter(run_id=run.pk, role=Message.Role.ASSISTANT)
        .order_by("-seq")
        .values_list("content", flat=True)
        .first()
    )
    question = run.trigger_message.content.strip()
    model = _title_model(run)
    if not question or not answer or model is None:
        return None
    return TitleJob(conversation.pk, conversation.owner, question, answer, model)


def _title_model(run: Run) -> LLMModel | None:
    """The user's "fast" model when there is one (a title needs no more), else the model
    that answered (re-checked: an admin may have taken it away since), else their default."""
    owner = run.conversation.owner
    fast = role_models_for_user(user=owner).get("fast")
    if fast is not None:
        return fast
    model_id = run.model_id or run.conversation.model_id
    if model_id is not None:
        try:
            return model_get_for_user(user=owner, model_id=model_id)
        except ApplicationError:
            return None
    return default_model_for_user(user=owner)


def title_messages(question: str, answer: str) -> list[ChatMessage]:
    """The title prompt: the question, and the start of the answer as context."""
    asked = question[:QUESTION_CHARS]
    answered = answer[:ANSWER_CHARS]
    return [
        ChatMessage(role="system", content=INSTRUCTIONS),
        ChatMessage(
            role="user",
            content=f"Question:\n{asked}\n\nStart of the answer:\n{answered}\n\nTitle:",
        ),
    ]


async def title_reply(job: TitleJob, *, timeout: float = TITLE_TIMEOUT_SECONDS) -> TitleReply:
    """Ask the model once (not streamed, no retries, within ``timeout``). Never raises: a
    failure is logged at info level (the conversation keeps its title; nothing is wrong
    with the run)."""
    llm = build_llm(model=job.model, max_retries=0)
    try:
        async with asyncio.timeout(timeout):
            response = await llm.chat(
                title_messages(job.question, job.answer), max_tokens=TITLE_MAX_TOKENS
            )
    except Exception as exc:  # TimeoutError, the provider's errors, anything else
        reason = "no reply in time" if isinstance(exc, TimeoutError) else type(exc).__name__
        logger.info(
            "conversation %s keeps its title: the title call failed (%s)",
            job.conversation_id,
            reason,
        )
        return TitleReply()
    finally:
        if hasattr(llm, "aclose"):
            await llm.aclose()
    title = clean_title(response.content)
    if not title:
        logger.info("conversation %s keeps its title: the model's was empty", job.conversation_id)
    return TitleReply(title, response.usage)


_THOUGHTS = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_PREFIX = re.compile(r"^(title|titre|titel|título|标题|標題|タイトル)\s*[:：]\s*", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_LEADING_MARKS = re.compile(r"^(?:[#>*+\-]+\s*|\d+[.)]\s+)+")
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_QUOTES = "\"'“”‘’„«»‹›「」『』〈〉《》"
_TRAILING = ".,;:!?…。，、；：！？·"


def clean_title(reply: str | None) -> str:
    """The model's reply as a title: its first line without thoughts, a "Title:" prefix,
    markdown, quotes or punctuation at the end, spaces collapsed, at most
    ``TITLE_MAX_CHARS`` characters ("" when nothing is left)."""
    text = _THOUGHTS.sub("", reply or "")
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = _LINK.sub(r"\1", line)
    line = _LEADING_MARKS.sub("", line.strip())
    line = _EMPHASIS.sub("", line)
    line = _PREFIX.sub("", line.strip())
    line = " ".join(line.split())
    for _ in range(2):  # a cut may leave punctuation or quotes at the end again
        line = line.strip(_QUOTES + " ").rstrip(_TRAILING + _QUOTES + " ")
        if len(line) > TITLE_MAX_CHARS:
            cut = line[:TITLE_MAX_CHARS]
            space = cut.rfind(" ")
            line = cut[:space] if space >= TITLE_MAX_CHARS // 2 else cut
    return line


def title_save(*, conversation_id: int, title: str) -> bool:
    """Set the automatic title unless the user gave one (also meanwhile: the condition is
    in the UPDATE); whether it changed."""
    return bool(
        Conversation.objects.filter(pk=conversation_id, title_by_user=False)
        .exclude(title=title)
        .update(title=title)
    )
