"""A conversation whose answer cites knowledge passages and whose question has files, built
from rows as a run leaves them, for the sharing and export tests.

    Q "How much holiday do I get?"  + notes.txt, chart.png
    R search_knowledge -> [1] Holidays, [2] Carry-over, [3] Sick leave
      A "You get 25 days a year [1]; unused days carry over [2]. ... [9]"
        ([3] only inside a code block: listed by the search, not cited)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, MessageFile, Run
from files import services as file_services
from files.models import StoredFile
from knowledge import services as knowledge_services
from knowledge.models import Chunk, Document, KnowledgeBase
from tests.conversations.branches.trees import tool_events
from tools.builtin.search_knowledge import search_knowledge_tool

# An 8x8 red PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d494844520000000800000008080200000"
    "04b6d29dc0000001549444154789c63f8cfc0f09f0115c0c4401a0000"
    "f7f10fc17d8f3e5b0000000049454e44ae426082"
)
NOTES = b"Remember: ask about the carry-over.\n"
PASSAGES = [
    (3, "Holidays", "Everyone gets 25 days of holiday a year."),
    (4, "Holidays › Carry-over", "Unused days carry over to the next year."),
    (9, "Sick leave", "Sick days do not count as holiday."),
]
ANSWER = (
    "You get 25 days a year [1]; unused days carry over [2].\n\n"
    "```\nleave[3] = 0\n```\n\nThe contract [9] says more."
)


@dataclass
class CitedChat:
    conversation: Conversation
    run: Run
    base: KnowledgeBase
    chunks: list[Chunk]
    files: list[StoredFile]


def handbook(owner, name: str = "Handbook") -> tuple[KnowledgeBase, list[Chunk]]:
    """A base with one indexed PDF of three passages (rows as indexing leaves them)."""
    base = knowledge_services.base_create(owner, name)
    text = "\n".join(text for _, _, text in PASSAGES)
    stored = StoredFile.objects.create(
        owner=owner,
        name="handbook.pdf",
        kind="pdf",
        content_type="application/pdf",
        size=len(text),
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        blob=ContentFile(text.encode(), name="blob"),
        text=text,
        pages=[0],
    )
    document = Document.objects.create(
        base=base, file=stored, name="handbook.pdf", status=Document.Status.READY, chunk_count=3
    )
    chunks = [
        Chunk.objects.create(document=document, position=n, page=page, heading=heading, text=text)
        for n, (page, heading, text) in enumerate(PASSAGES)
    ]
    return base, chunks


@dataclass
class _Hit:
    chunk_id: int
    document_name: str
    page: int | None
    heading: str
    text: str


def search_observation(chunks: list[Chunk]) -> str:
    """What the search_knowledge tool answers when it finds these passages."""
    hits = [_Hit(c.pk, c.document.name, c.page, c.heading, c.text) for c in chunks]
    tool = search_knowledge_tool(lambda query, k: hits, ["Handbook"])
    return tool.func(query="holiday").content


def cited_chat(owner, *, base_owner=None, answer: str = ANSWER) -> CitedChat:
    """The conversation above; the base belongs to ``base_owner`` (default: ``owner``)."""
    base, chunks = handbook(base_owner or owner)
    conversation = services.conversation_create(owner=owner, title="Holidays")
    question = services.message_create(
        conversation=conversation, role="user", content="How much holiday do I get?"
    )
    files = [
        file_services.store(owner, SimpleUploadedFile("notes.txt", NOTES)),
        file_services.store(owner, SimpleUploadedFile("chart.png", PNG)),
    ]
    for position, stored in enumerate(files):
        MessageFile.objects.create(message=question, file=stored, position=position)
    run = Run.objects.create(
        conversation=conversation,
        trigger_message=question,
        status=Run.Status.SUCCEEDED,
        iterations=2,
        usage={"total_tokens": 42},
        elapsed=1.5,
        selected_at=timezone.now(),
        finished_at=timezone.now(),
    )
    question.run = run
    question.save(update_fields=["run"])
    services.message_create(conversation=conversation, role="assistant", content=answer, run=run)
    tool_events(run, {"query": "holiday"}, search_observation(chunks), "search_knowledge")
    return CitedChat(conversation, run, base, chunks, files)
