"""Folders of conversations: create, rename, move, delete, and put a chat in one.

Folders nest one level deep (a top-level folder may hold sub-folders, a sub-folder none):
a sidebar two levels deep would need a tree of its own, and Open WebUI's users asked for
no more. Names are unique among a folder's siblings, whatever their case. Deleting a
folder keeps its chats: they move to its parent (out of any folder, for a top-level
one), and its sub-folders go with it, their chats moved out of folders.

Another user's folder is a 404, whether named in the path or in a request's body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _

from conversations.models import Conversation, Folder
from conversations.organise.names import name_clean
from core.errors import ApplicationError

NAME_MAX = 100
FOLDERS_MAX = 100  # per user: every row's "Move to" menu lists them all


@dataclass
class FolderNode:
    """A top-level folder and its sub-folders, as the sidebar and menus show them."""

    folder: Folder
    children: list[Folder] = field(default_factory=list)


def folder_get(*, user, folder_id: int) -> Folder:
    """The user's folder, or a 404 (never reveal another user's ids)."""
    return get_object_or_404(Folder, pk=folder_id, owner=user)


def folder_tree(*, user) -> list[FolderNode]:
    """The user's folders by name, each top-level one with its sub-folders (one query)."""
    folders = list(Folder.objects.filter(owner=user).order_by("name", "id"))
    nodes = {f.pk: FolderNode(f) for f in folders if f.parent_id is None}
    for folder in folders:
        if folder.parent_id is not None and folder.parent_id in nodes:
            nodes[folder.parent_id].children.append(folder)
    return list(nodes.values())


def _owned(owner_id: int, folder_id: int, *, field_name: str) -> Folder:
    """A folder named in a request's body: the owner's, else a 404 naming the field."""
    found = Folder.objects.filter(pk=folder_id, owner_id=owner_id).first()
    if found is None:
        message = _("You have no folder %(id)s.") % {"id": folder_id}
        raise ApplicationError(message, code="not_found", extra={field_name: [message]})
    return found


def _parent_for(
    owner_id: int, parent_id: int | None, *, folder: Folder | None = None
) -> Folder | None:
    """The parent a folder may go into: one of the owner's top-level folders, not itself,
    and only if the folder has no sub-folders of its own (one level deep)."""
    if parent_id is None:
        return None
    parent = _owned(owner_id, parent_id, field_name="parent")
    refusal = None
    if parent.parent_id is not None:
        refusal = _(
            "“%(name)s” is a sub-folder: folders nest one level deep, so a folder "
            "cannot go inside a sub-folder."
        ) % {"name": parent.name}
    elif folder is not None and parent.pk == folder.pk:
        refusal = _("A folder cannot go inside itself.")
    elif folder is not None and folder.pk and folder.children.exists():
        refusal = _(
            "“%(name)s” has sub-folders: folders nest one level deep, so it stays at the top level."
        ) % {"name": folder.name}
    if refusal:
        raise ApplicationError(refusal, extra={"parent": [refusal]})
    return parent


def _name_free(
    owner_id: int, name: str, parent: Folder | None, *, folder: Folder | None = None
) -> None:
    """Refuse a name a sibling has, whatever its case (Python's casefold: the same on
    SQLite, whose LOWER() knows only ASCII, and on PostgreSQL)."""
    siblings = Folder.objects.filter(owner_id=owner_id, parent=parent)
    if folder is not None and folder.pk:
        siblings = siblings.exclude(pk=folder.pk)
    taken = {other.casefold() for other in siblings.values_list("name", flat=True)}
    if name.casefold() in taken:
        if parent:
            message = _("You already have a folder named “%(name)s” in “%(parent)s”.") % {
                "name": name,
                "parent": parent.name,
            }
        else:
            message = _("You already have a folder named “%(name)s” at the top level.") % {
                "name": name
            }
        raise ApplicationError(message, extra={"name": [message]})


def _saved(folder: Folder, **save: object) -> Folder:
    """Save, turning a name taken by a concurrent request into the same 400."""
    try:
        with transaction.atomic():
            folder.save(**save)  # type: ignore[arg-type]
    except IntegrityError:
        message = _("You already have a folder named “%(name)s” there.") % {"name": folder.name}
        raise ApplicationError(message, extra={"name": [message]}) from None
    return folder


def folder_create(*, owner, name: object, parent_id: int | None = None) -> Folder:
    name = name_clean(name, field="name", what="folder", limit=NAME_MAX)
    parent = _parent_for(owner.pk, parent_id)
    if Folder.objects.filter(owner=owner).count() >= FOLDERS_MAX:
        message = _("You have %(count)d folders, the most there can be: delete one first.") % {
            "count": FOLDERS_MAX
        }
        raise ApplicationError(message, extra={"name": [message]})
    _name_free(owner.pk, name, parent)
    return _saved(Folder(owner=owner, name=name, parent=parent))


def folder_change(
    *, folder: Folder, name: object = None, parent_id: int | None = None, move: bool = False
) -> Folder:
    """Rename (``name`` given) and/or move (``move``: into ``parent_id``, None for the
    top level) one of the owner's folders; both or neither."""
    new_name = folder.name
    if name is not None:
        new_name = name_clean(name, field="name", what="folder", limit=NAME_MAX)
    parent = _parent_for(folder.owner_id, parent_id, folder=folder) if move else folder.parent
    _name_free(folder.owner_id, new_name, parent, folder=folder)
    folder.name, folder.parent = new_name, parent
    return _saved(folder, update_fields=["name", "parent"])


@transaction.atomic
def folder_delete(*, folder: Folder) -> None:
    """Delete the folder and its sub-folders; every chat in them stays (see above)."""
    Conversation.objects.filter(folder=folder).update(folder=folder.parent)
    Conversation.objects.filter(folder__parent=folder).update(folder=None)
    folder.delete()


def conversation_move(*, conversation: Conversation, folder_id: int | None) -> Conversation:
    """Put the conversation in one of its owner's folders (None: out of any folder).

    Organising is not a change of the chat: ``updated_at`` (its place in the lists) stays.
    """
    folder = None
    if folder_id is not None:
        folder = _owned(conversation.owner_id, folder_id, field_name="folder")
    Conversation.objects.filter(pk=conversation.pk).update(folder=folder)
    conversation.folder = folder
    return conversation
