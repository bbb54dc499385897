"""Tags on conversations: the owner's labels, set per chat and filtered by.

A tag is a row (``Tag``: owner, name, ``key``) joined to conversations, not a JSON list
on the conversation: filtering by a tag is then an indexed join on both databases, while
SQLite has no JSON containment lookup at all (Django refuses ``contains`` on its JSON
fields) and a case-insensitive match inside a JSON array would need a function per
database. ``key`` is the name case-folded by Python, so "Work", "work" and "WORK" are one
tag on SQLite (whose LOWER() knows only ASCII) as on PostgreSQL; the name shown is the
one first typed.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from conversations.models import Conversation, Tag
from conversations.organise.names import name_clean
from core.errors import ApplicationError

TAGS_MAX = 20  # per conversation
TAG_CHARS = 32
SEPARATOR = ","  # the sidebar's field lists tags so, so a name cannot hold one


def tag_key(name: str) -> str:
    """What tags are matched by: the trimmed name, case-folded."""
    return name.strip().casefold()


def tags_parse(text: str) -> list[str]:
    """The names typed in the sidebar's field: comma-separated."""
    return text.split(SEPARATOR)


def tags_clean(names: Iterable[object]) -> list[str]:
    """The names trimmed, blanks dropped, each kept once (the first spelling, whatever
    the case); refused (400 naming ``tags``) past ``TAGS_MAX`` or ``TAG_CHARS``."""
    kept: dict[str, str] = {}
    for raw in names:
        if isinstance(raw, str) and not raw.strip():
            continue
        name = name_clean(raw, field="tags", what="tag", limit=TAG_CHARS)
        if SEPARATOR in name:
            message = _("A tag cannot hold a comma: “%(name)s”.") % {"name": name}
            raise ApplicationError(message, extra={"tags": [message]})
        kept.setdefault(tag_key(name), name)
    if len(kept) > TAGS_MAX:
        message = _("A conversation has at most %(max)d tags (%(given)d given).") % {
            "max": TAGS_MAX,
            "given": len(kept),
        }
        short = _("At most %(max)d tags.") % {"max": TAGS_MAX}
        raise ApplicationError(message, extra={"tags": [short]})
    return list(kept.values())


def _tag_for(owner_id: int, name: str) -> Tag:
    key = tag_key(name)
    try:
        with transaction.atomic():
            tag, _created = Tag.objects.get_or_create(
                owner_id=owner_id, key=key, defaults={"name": name}
            )
    except IntegrityError:  # a concurrent request made it first
        tag = Tag.objects.get(owner_id=owner_id, key=key)
    return tag


@transaction.atomic
def conversation_set_tags(*, conversation: Conversation, names: Iterable[object]) -> list[str]:
    """Give the conversation exactly these tags (``[]``: none); the owner's tags no chat
    has any longer are deleted, so the filter offers only tags in use. Returns the names."""
    cleaned = tags_clean(names)
    before = set(conversation.tags.values_list("pk", flat=True))
    tags = [_tag_for(conversation.owner_id, name) for name in cleaned]
    conversation.tags.set(tags)
    dropped = before - {tag.pk for tag in tags}
    Tag.objects.filter(pk__in=dropped, conversations__isnull=True).delete()
    return [tag.name for tag in tags]


def tag_names(conversation: Conversation) -> list[str]:
    """The conversation's tags by name (a prefetched ``tags`` is used as it is)."""
    return [tag.name for tag in sorted(conversation.tags.all(), key=lambda tag: tag.key)]


def tags_in_use(*, user) -> list[Tag]:
    """The user's tags that some conversation has, by name: what the filter offers."""
    return list(Tag.objects.filter(owner=user, conversations__isnull=False).distinct())
