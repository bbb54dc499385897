"""Conversations, their messages, agent runs and the durable event log.

Business rules live in :mod:`conversations.services`; these classes only describe rows.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone, translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.crypto import EncryptedTextField


def active_language() -> str:
    """The language active where a row is made (a request's, a run's)."""
    return translation.get_language() or settings.LANGUAGE_CODE


class AgentMode(models.TextChoices):
    """How a run works: one ReAct loop, a plan of parallel steps, or a router's choice."""

    REACT = "react", _("ReAct")
    PLAN = "plan", _("Plan")
    AUTO = "auto", _("Auto")


class Folder(models.Model):
    """A folder of the owner's conversations in the sidebar, inside at most one other
    (``conversations.organise.folders`` and :meth:`clean` refuse a deeper one)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_folders"
    )
    name = models.CharField(max_length=100)
    # Deleting a folder deletes its sub-folders; their chats stay (Conversation.folder).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("folder")
        verbose_name_plural = _("folders")
        ordering = ["name", "id"]
        constraints = [
            # Two: a NULL parent is never equal to another in a unique constraint.
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=models.Q(parent__isnull=True),
                name="folder_name_top_level",
            ),
            models.UniqueConstraint(
                fields=["owner", "parent", "name"], name="folder_name_in_parent"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """One level of nesting, within the owner's folders (the admin's check)."""
        parent = self.parent
        if parent is None:
            return
        if parent.owner_id != self.owner_id or (self.pk and parent.pk == self.pk):
            raise ValidationError({"parent": gettext("Choose another folder of the same owner.")})
        if parent.parent_id is not None:
            raise ValidationError({"parent": gettext("A folder can only go one level deep.")})
        if self.pk and self.children.exists():
            raise ValidationError(
                {"parent": gettext("A folder with sub-folders stays at the top.")}
            )


class Tag(models.Model):
    """A label the owner puts on conversations; ``key`` (the name case-folded in Python,
    the same on SQLite and PostgreSQL) makes "Work" and "work" one tag."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_tags"
    )
    name = models.CharField(max_length=32)
    key = models.CharField(max_length=100)  # casefold() may lengthen a name (ß: ss)

    class Meta:
        verbose_name = _("tag")
        verbose_name_plural = _("tags")
        ordering = ["key", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="tag_key_per_owner")]

    def __str__(self) -> str:
        return self.name


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="conversations",
    )
    title = models.CharField(verbose_name=_("title"), max_length=200, blank=True)
    model = models.ForeignKey(
        "llms.LLMModel",
        verbose_name=_("model"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversations",
    )
    archived = models.BooleanField(verbose_name=_("archived"), default=False)
    mode = models.CharField(
        verbose_name=_("mode"), max_length=8, choices=AgentMode.choices, default=AgentMode.REACT
    )
    # The knowledge bases its runs search (the search_knowledge tool): the owner's or
    # shared with them (checked when attached, and again by every search).
    knowledge = models.ManyToManyField(
        "knowledge.KnowledgeBase",
        verbose_name=_("knowledge"),
        related_name="conversations",
        blank=True,
    )
    # The sidebar's organisation (conversations.organise): a folder, tags, and when it was
    # pinned (pins list newest pin first; null: not pinned).
    folder = models.ForeignKey(
        Folder,
        verbose_name=_("folder"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversations",
    )
    tags = models.ManyToManyField(
        Tag, verbose_name=_("tags"), related_name="conversations", blank=True
    )
    pinned_at = models.DateTimeField(verbose_name=_("pinned at"), null=True, blank=True)
    # What this chat's agent is told besides the user's instructions and the model's
    # default (conversations.prompts says in which order).
    system_prompt = models.TextField(verbose_name=_("system prompt"), blank=True)
    # Sampling for this chat, within the model's limits (conversations.chat_settings):
    # {"temperature", "top_p", "max_tokens"}, each optional; absent: the model's own.
    params = models.JSONField(verbose_name=_("params"), default=dict, blank=True)
    # The tools offered in this chat, by name (null: every tool the user may use).
    tools = models.JSONField(verbose_name=_("tools"), null=True, blank=True)
    # A title the user gave (on create or by renaming) is never replaced by an automatic one.
    title_by_user = models.BooleanField(verbose_name=_("title by user"), default=False)
    # The preset it was started from (its settings were copied in then; kept for the
    # preset's use figures).
    preset = models.ForeignKey(
        "conversations.Preset",
        verbose_name=_("preset"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversations",
    )
    # Hands out per-conversation message numbers under the row's lock
    # (conversations.history.numbering).
    last_message_seq = models.PositiveIntegerField(verbose_name=_("last message seq"), default=0)
    # Event numbers up to here are handed out (conversations.history.numbering): a number is never
    # given twice, even when its event was sent but never written (its process died).
    event_seq_reserved = models.PositiveBigIntegerField(
        verbose_name=_("event seq reserved"), default=0
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "archived", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or gettext("Conversation %(id)s") % {"id": self.pk}


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")
        SYSTEM = "system", _("System")

    class Kind(models.TextChoices):
        CHAT = "chat", _("Chat")
        INJECT = "inject", _("Inject")

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="messages",
    )
    seq = models.PositiveIntegerField(verbose_name=_("seq"))
    role = models.CharField(verbose_name=_("role"), max_length=16, choices=Role.choices)
    kind = models.CharField(
        verbose_name=_("kind"), max_length=16, choices=Kind.choices, default=Kind.CHAT
    )
    content = models.TextField(verbose_name=_("content"))
    pinned = models.BooleanField(verbose_name=_("pinned"), default=False)
    reasoning = models.TextField(verbose_name=_("reasoning"), blank=True)
    # An answer cut short (its run was stopped, failed or interrupted while it streamed):
    # the text the user saw, kept as it was.
    incomplete = models.BooleanField(verbose_name=_("incomplete"), default=False)
    usage = models.JSONField(verbose_name=_("usage"), default=dict, blank=True)
    run = models.ForeignKey(
        "Run",
        verbose_name=_("run"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="messages",
    )
    # For follow-ups sent during a run: when the worker picked it up (null = pending).
    delivered_at = models.DateTimeField(verbose_name=_("delivered at"), null=True, blank=True)
    # The owner's files attached to a user message (files/), in the order attached.
    files = models.ManyToManyField(
        "files.StoredFile",
        verbose_name=_("files"),
        through="MessageFile",
        related_name="messages",
        blank=True,
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="message_seq_unique")
        ]

    def __str__(self) -> str:
        return f"{self.role}#{self.seq}: {self.content[:40]}"


class MessageFile(models.Model):
    """A file attached to a message, at its place among the message's files."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="attachments")
    file = models.ForeignKey("files.StoredFile", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name = _("message file")
        verbose_name_plural = _("message files")
        ordering = ["message", "position"]
        constraints = [
            models.UniqueConstraint(fields=["message", "file"], name="message_file_once")
        ]


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")
        PAUSED = "paused", _("Paused")
        # Answered, but the answer was cut short (its stream broke off, it reached its
        # length limit, or the run reached its time limit while answering).
        INCOMPLETE = "incomplete", _("Incomplete")

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)
    # Ended without a complete answer: the user may answer the question again (Retry).
    RETRYABLE_STATUSES = (Status.FAILED, Status.CANCELLED, Status.INCOMPLETE)

    conversation = models.ForeignKey(
        Conversation, verbose_name=_("conversation"), on_delete=models.CASCADE, related_name="runs"
    )
    trigger_message = models.ForeignKey(
        Message,
        verbose_name=_("trigger message"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The conversation is a tree of runs (conversations.history.tree): a run continues the branch
    # whose last run is ``parent`` (none: it answers a first question). Runs with the same
    # parent are alternatives: edits of the question (other trigger messages) or
    # regenerated answers (the same trigger message).
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
    )
    # Among its siblings, the one chosen last is shown (the branch the user is on).
    selected_at = models.DateTimeField(verbose_name=_("selected at"), default=timezone.now)
    # The model asked for when the answer was regenerated with another one (else the
    # conversation's model answers).
    model = models.ForeignKey(
        "llms.LLMModel",
        verbose_name=_("model"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The mode asked for with the message (the API may choose per message); blank: the
    # conversation's mode when the run starts.
    mode = models.CharField(
        verbose_name=_("mode"), max_length=8, choices=AgentMode.choices, blank=True
    )
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    iterations = models.PositiveIntegerField(verbose_name=_("iterations"), default=0)
    usage = models.JSONField(verbose_name=_("usage"), default=dict, blank=True)
    elapsed = models.FloatField(verbose_name=_("elapsed"), null=True, blank=True)
    # What the user is told, in plain words.
    error = models.TextField(verbose_name=_("error"), blank=True)
    # The technical cause (the provider's response, the exception): for admins only.
    error_detail = models.TextField(verbose_name=_("error detail"), blank=True)
    task_id = models.CharField(verbose_name=_("task id"), max_length=64, blank=True)
    # The interface language of the request that asked for the run: its words (a failure's
    # reason) are in it unless the owner chose one (conversations.preferences.run_language).
    language = models.CharField(
        verbose_name=_("language"), max_length=16, blank=True, default=active_language
    )
    # A ReAct run that paused (a loop guard stopped it so the user can step in) keeps the
    # engine's messages from its question on, as JSON text (ChatMessage.to_dict; text, not
    # jsonb, which reorders keys: the model gets its calls back byte for byte): Continue
    # goes on from them. Null: nothing to go on from (not paused, or paused in plan mode).
    resume_trace = models.TextField(
        verbose_name=_("resume trace"), null=True, blank=True, editable=False
    )
    # This run goes on from its parent's trace (the parent paused; the user chose Continue).
    resumes_parent = models.BooleanField(verbose_name=_("resumes parent"), default=False)
    cancel_requested = models.BooleanField(verbose_name=_("cancel requested"), default=False)
    heartbeat_at = models.DateTimeField(verbose_name=_("heartbeat at"), null=True, blank=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    started_at = models.DateTimeField(verbose_name=_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(verbose_name=_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["conversation", "status"])]

    def __str__(self) -> str:
        return gettext("Run %(id)s (%(status)s)") % {
            "id": self.pk,
            "status": self.get_status_display(),
        }

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES


class RunEvent(models.Model):
    """One event of the protocol (DESIGN.md section 4), in conversation-wide order."""

    run = models.ForeignKey(
        Run, verbose_name=_("run"), on_delete=models.CASCADE, related_name="events"
    )
    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="events",
    )
    seq = models.PositiveBigIntegerField(verbose_name=_("seq"))
    channel = models.CharField(verbose_name=_("channel"), max_length=16)
    payload = models.JSONField(verbose_name=_("payload"))
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_seq_unique")
        ]

    def __str__(self) -> str:
        return f"{self.channel}#{self.seq}"


class ToolApproval(models.Model):
    """The user's decision on a tool call that waits for approval (the run's
    ``approval`` events show it; this row is what the decision endpoints and the run read)."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        APPROVED = "approved", _("Approved")
        DENIED = "denied", _("Denied")
        EXPIRED = "expired", _("Expired")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    tool_args = models.JSONField(default=dict)
    # engine.approval.call_binding of the call asked about, set by whoever makes the row
    # (the run, or a decision that came first): a call takes the decision only if it is
    # its own (same tool, same arguments).
    binding = models.CharField(max_length=64, blank=True, editable=False)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("tool approval")
        verbose_name_plural = _("tool approvals")
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="one_approval_per_call")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.get_status_display()})"


class APIToken(models.Model):
    """A personal API token. Only its SHA-256 is stored: the plaintext is shown once.

    ``prefix`` (the token's first characters) lets the owner tell tokens apart in the UI
    without the database holding anything that authenticates.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=8, db_index=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = _("API tokens")
        verbose_name = _("API token")
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ExternalIdentity(models.Model):
    """A user as the team's identity provider (OIDC) or directory (LDAP) knows them.

    The user is found by ``subject`` (OIDC's ``sub``, LDAP's username), never by e-mail.
    ``groups`` are the group names the provider gave at the last sync, so a group an
    admin gave by hand is never taken away by a sync. ``refresh_token`` (encrypted) lets
    the site ask the provider whether the account is still enabled without the user;
    ``checked_at`` is when it last said so.
    """

    class Source(models.TextChoices):
        OIDC = "oidc", _("OpenID Connect")
        LDAP = "ldap", _("LDAP")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="external_identities",
    )
    source = models.CharField(verbose_name=_("source"), max_length=8, choices=Source.choices)
    subject = models.CharField(verbose_name=_("subject"), max_length=255)
    groups = models.JSONField(verbose_name=_("groups"), default=list, blank=True)
    refresh_token = EncryptedTextField(verbose_name=_("refresh token"), blank=True)
    checked_at = models.DateTimeField(verbose_name=_("checked at"), default=timezone.now)
    # Set when the provider stopped letting the user in (and the site followed); an
    # account an admin disabled by hand has none and stays disabled at the next sign-in.
    disabled_at = models.DateTimeField(verbose_name=_("disabled at"), null=True, blank=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("external identity")
        verbose_name_plural = _("external identities")
        constraints = [
            models.UniqueConstraint(fields=["source", "subject"], name="identity_source_subject")
        ]

    def __str__(self) -> str:
        return f"{self.get_source_display()}: {self.subject}"


class CompactionSummary(models.Model):
    """A stored summary of a conversation's older messages, reused and extended by runs."""

    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="summaries",
    )
    run = models.ForeignKey(
        Run,
        verbose_name=_("run"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="summaries",
    )
    summary = models.TextField(verbose_name=_("summary"))
    covers_up_to_seq = models.PositiveIntegerField(
        verbose_name=_("covers up to seq"),
        help_text=_("Messages with this sequence number or lower are summarised (unless pinned)."),
    )
    original_count = models.PositiveIntegerField(verbose_name=_("original count"))
    kept_count = models.PositiveIntegerField(verbose_name=_("kept count"))
    model_used = models.CharField(verbose_name=_("model used"), max_length=200, blank=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("compaction summary")
        ordering = ["conversation", "-covers_up_to_seq", "-id"]
        verbose_name_plural = _("compaction summaries")

    def __str__(self) -> str:
        return gettext("Summary of %(conversation)s up to #%(seq)s") % {
            "conversation": self.conversation,
            "seq": self.covers_up_to_seq,
        }


class SharedLink(models.Model):
    """A read-only snapshot of a conversation's branch, reachable by whoever has the link.

    The snapshot is copied at sharing time (messages, tool cards, the passages the answers
    cite and, if the owner ticked them, artifacts and the messages' attached files): later
    messages never appear, and the public page reads nothing else.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="shared_links",
    )
    conversation = models.ForeignKey(
        Conversation,
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="shared_links",
    )
    token = models.CharField(verbose_name=_("token"), max_length=64, unique=True)
    title = models.CharField(verbose_name=_("title"), max_length=200, blank=True)
    snapshot = models.JSONField(verbose_name=_("snapshot"), default=dict)
    include_artifacts = models.BooleanField(verbose_name=_("include artifacts"), default=False)
    include_files = models.BooleanField(
        verbose_name=_("include files"), default=False
    )  # the messages' attached files
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    revoked_at = models.DateTimeField(verbose_name=_("revoked at"), null=True, blank=True)

    class Meta:
        verbose_name = _("shared link")
        verbose_name_plural = _("shared links")
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title or f"Shared link {self.pk}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class UserSettings(models.Model):
    """A user's own settings: custom instructions for every chat, interface language,
    time zone and theme (``GET/PATCH /api/me/settings``, the Settings page)."""

    class Theme(models.TextChoices):
        SYSTEM = "system", _("As the system")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agentsite_settings"
    )
    instructions = models.TextField(blank=True)
    # A code of settings.LANGUAGES; blank: from the browser's Accept-Language.
    language = models.CharField(max_length=16, blank=True)
    # An IANA zone name ("Europe/Paris"); blank: the server's TIME_ZONE.
    timezone = models.CharField(max_length=64, blank=True)
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("user settings")
        verbose_name_plural = _("user settings")

    def __str__(self) -> str:
        return gettext("Settings of %(user)s") % {"user": self.user}


class Preset(models.Model):
    """A reusable set-up of a chat (an "assistant"): model, system prompt, tools,
    knowledge bases, sampling parameters, mode and up to four starter prompts. Owned by a
    user and shared with groups, or made by an admin for everyone (no owner). Starting a
    chat with it copies these into the conversation (conversations.presets)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="chat_presets",
        help_text=_("Empty: made by an administrator for everyone."),
    )
    name = models.CharField(verbose_name=_("name"), max_length=100)
    description = models.CharField(verbose_name=_("description"), max_length=300, blank=True)
    model = models.ForeignKey(
        "llms.LLMModel",
        verbose_name=_("model"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="presets",
        help_text=_("Empty: the site's default model."),
    )
    system_prompt = models.TextField(verbose_name=_("system prompt"), blank=True)
    # Tool names offered in its chats (null: every tool the user may use).
    tools = models.JSONField(verbose_name=_("tools"), null=True, blank=True)
    knowledge = models.ManyToManyField(
        "knowledge.KnowledgeBase", verbose_name=_("knowledge"), related_name="presets", blank=True
    )
    params = models.JSONField(verbose_name=_("params"), default=dict, blank=True)
    mode = models.CharField(
        verbose_name=_("mode"), max_length=8, choices=AgentMode.choices, default=AgentMode.REACT
    )
    starters = models.JSONField(
        verbose_name=_("starters"), default=list, blank=True
    )  # at most four prompts
    shared_groups = models.ManyToManyField(
        "auth.Group", verbose_name=_("shared groups"), related_name="chat_presets", blank=True
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("preset")
        verbose_name_plural = _("presets")
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name
