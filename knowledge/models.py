"""Knowledge bases, their documents and the documents' chunks. Writes go through
:mod:`knowledge.services`, reads through :mod:`knowledge.selectors`; the full-text index
over chunks is :mod:`knowledge.fulltext`'s."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class KnowledgeBase(models.Model):
    """A named collection of one user's documents. Its owner alone changes it; members of
    ``shared_groups`` (or everyone, which only an admin sets) read and search it."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="knowledge_bases",
    )
    name = models.CharField(verbose_name=_("name"), max_length=200)
    description = models.TextField(verbose_name=_("description"), blank=True)
    shared_groups = models.ManyToManyField(
        Group,
        verbose_name=_("shared groups"),
        blank=True,
        related_name="knowledge_bases",
        help_text=_("Members of these groups may read and search this base (never change it)."),
    )
    shared_with_everyone = models.BooleanField(
        verbose_name=_("shared with everyone"),
        default=False,
        help_text=_("Every signed-in user may read and search this base."),
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("knowledge base")
        verbose_name_plural = _("knowledge bases")
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "name"], name="kb_owner_name")]

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One document of a base: an uploaded file or a fetched page, kept as the owner's
    :class:`~files.models.StoredFile` (whose extracted text is what gets indexed)."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        INDEXING = "indexing", _("Indexing")
        READY = "ready", _("Ready")
        FAILED = "failed", _("Failed")

    base = models.ForeignKey(
        KnowledgeBase, verbose_name=_("base"), on_delete=models.CASCADE, related_name="documents"
    )
    # RESTRICT: a base's file outlives the conversations it is also attached to
    # (files.services.delete_unattached skips it), while the owner's account's deletion
    # takes both; the document's deletion removes it (knowledge.services).
    file = models.ForeignKey(
        "files.StoredFile",
        verbose_name=_("file"),
        on_delete=models.RESTRICT,
        related_name="knowledge_documents",
    )
    name = models.CharField(verbose_name=_("name"), max_length=255)
    source_url = models.URLField(verbose_name=_("source url"), max_length=2000, blank=True)
    status = models.CharField(
        verbose_name=_("status"), max_length=10, choices=Status.choices, default=Status.QUEUED
    )
    error = models.TextField(verbose_name=_("error"), blank=True)  # why it failed, for its owner
    chunk_count = models.PositiveIntegerField(verbose_name=_("chunk count"), default=0)
    # The embedding model's signature its chunks' vectors came from (llms.EmbeddingModel);
    # empty: found by full text only (no model then, or it failed: ``error`` says why).
    embedded_with = models.CharField(
        verbose_name=_("embedded with"), max_length=300, blank=True, editable=False
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    indexed_at = models.DateTimeField(verbose_name=_("indexed at"), null=True, blank=True)
    # Whether its background indexing still has an owner (knowledge.recovery): when it was
    # last queued; when a process claimed it, kept fresh by a worker's heartbeat while it
    # indexes; how many times it was found without an owner and queued again.
    queued_at = models.DateTimeField(
        verbose_name=_("queued at"), default=timezone.now, editable=False
    )
    claimed_at = models.DateTimeField(
        verbose_name=_("claimed at"), null=True, blank=True, editable=False
    )
    attempts = models.PositiveSmallIntegerField(
        verbose_name=_("attempts"), default=0, editable=False
    )

    class Meta:
        verbose_name = _("document")
        verbose_name_plural = _("documents")
        ordering = ["-created_at", "-id"]
        # The sweep's look for unfinished documents (knowledge.recovery), every few seconds.
        indexes = [models.Index(fields=["status"], name="kb_document_status")]

    def __str__(self) -> str:
        return self.name


class Chunk(models.Model):
    """A passage of a document: its text, the heading it sits under and its page (PDF).

    On SQLite an FTS5 table mirrors ``heading`` and ``text`` (triggers keep it in step); on
    PostgreSQL ``search`` holds their ``tsvector`` (GIN-indexed), written when indexed."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()
    page = models.PositiveIntegerField(null=True, blank=True)  # 1-based; None: no pages
    heading = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    search = SearchVectorField(null=True, editable=False)  # PostgreSQL only

    class Meta:
        verbose_name = _("chunk")
        verbose_name_plural = _("chunks")
        ordering = ["document", "position"]
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="kb_chunk_position")
        ]

    def __str__(self) -> str:
        return f"{self.document} #{self.position}"
