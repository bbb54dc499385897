"""Organising conversations (conversations.organise): folders one level deep, tags, pins,
and the filters of the list, each scoped to its owner."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404
from django.utils import timezone

from conversations import selectors, services
from conversations.models import Conversation, Folder, Tag
from conversations.organise import folders, pins, tags
from conversations.selectors import NO_FOLDER
from core.errors import ApplicationError

pytestmark = pytest.mark.django_db


def chat(owner, title: str) -> Conversation:
    return services.conversation_create(owner=owner, title=title)


def listed(user, **filters) -> list[str]:
    return [c.title for c in selectors.conversation_list(user=user, **filters)]


# --------------------------------------------------------------------------- folders


def test_folders_nest_one_level_deep(user):
    work = folders.folder_create(owner=user, name="  Work ")
    clients = folders.folder_create(owner=user, name="Clients", parent_id=work.pk)
    assert work.name == "Work" and clients.parent == work

    with pytest.raises(ApplicationError) as deeper:
        folders.folder_create(owner=user, name="Acme", parent_id=clients.pk)
    assert "one level deep" in deeper.value.message and "parent" in deeper.value.extra
    # Moving a folder that holds sub-folders under another would make two levels.
    home = folders.folder_create(owner=user, name="Home")
    with pytest.raises(ApplicationError) as holder:
        folders.folder_change(folder=work, parent_id=home.pk, move=True)
    assert "has sub-folders" in holder.value.message
    with pytest.raises(ApplicationError, match="inside itself"):
        folders.folder_change(folder=home, parent_id=home.pk, move=True)
    assert Folder.objects.count() == 3 and Folder.objects.get(pk=work.pk).parent is None

    # A sub-folder moves to the top level, or into another top-level folder.
    folders.folder_change(folder=clients, parent_id=None, move=True)
    folders.folder_change(folder=clients, parent_id=home.pk, move=True)
    assert Folder.objects.get(pk=clients.pk).parent == home
    assert [(n.folder.name, [c.name for c in n.children]) for n in folders.folder_tree(
        user=user
    )] == [("Home", ["Clients"]), ("Work", [])]  # fmt: skip


def test_the_model_refuses_a_deeper_folder_too(user, other_user):
    top = Folder.objects.create(owner=user, name="Top")
    sub = Folder.objects.create(owner=user, name="Sub", parent=top)
    with pytest.raises(ValidationError, match="one level deep"):
        Folder(owner=user, name="Deeper", parent=sub).full_clean()
    with pytest.raises(ValidationError, match="same owner"):
        Folder(owner=other_user, name="Theirs", parent=top).full_clean()
    top.parent = Folder.objects.create(owner=user, name="Other")
    with pytest.raises(ValidationError, match="stays at the top"):
        top.full_clean()


def test_folder_names_are_trimmed_required_and_unique_among_siblings_in_any_case(user):
    work = folders.folder_create(owner=user, name="Work")
    for name, words in [("   ", "needs a name"), ("x" * 101, "at most 100"), ("a\x00b", "control")]:
        with pytest.raises(ApplicationError, match=words) as refused:
            folders.folder_create(owner=user, name=name)
        assert list(refused.value.extra) == ["name"]
    with pytest.raises(ApplicationError, match="already have a folder named “wORK”"):
        folders.folder_create(owner=user, name="wORK")
    # The same name elsewhere is fine: inside Work, or another user's.
    inner = folders.folder_create(owner=user, name="work", parent_id=work.pk)
    other = folders.folder_create(owner=user, name="Home")
    with pytest.raises(ApplicationError, match="in “Work”"):
        folders.folder_change(folder=other, name="WORK", parent_id=work.pk, move=True)
    folders.folder_change(folder=work, name="Work stuff")
    assert Folder.objects.get(pk=work.pk).name == "Work stuff"
    assert Folder.objects.get(pk=inner.pk).name == "work"


def test_a_user_has_at_most_so_many_folders(user, monkeypatch):
    monkeypatch.setattr(folders, "FOLDERS_MAX", 2)
    folders.folder_create(owner=user, name="One")
    folders.folder_create(owner=user, name="Two")
    with pytest.raises(ApplicationError, match="2 folders"):
        folders.folder_create(owner=user, name="Three")


def test_deleting_a_folder_keeps_its_chats(user):
    work = folders.folder_create(owner=user, name="Work")
    clients = folders.folder_create(owner=user, name="Clients", parent_id=work.pk)
    sub = folders.folder_create(owner=user, name="Sub", parent_id=work.pk)
    in_work, in_clients, in_sub = chat(user, "in work"), chat(user, "in clients"), chat(user, "s")
    folders.conversation_move(conversation=in_work, folder_id=work.pk)
    folders.conversation_move(conversation=in_clients, folder_id=clients.pk)
    folders.conversation_move(conversation=in_sub, folder_id=sub.pk)

    # A sub-folder's chats go up into its parent.
    folders.folder_delete(folder=sub)
    assert Conversation.objects.get(pk=in_sub.pk).folder == work
    # A top-level folder's chats, and its sub-folders', go out of any folder.
    folders.folder_delete(folder=work)
    assert not Folder.objects.exists()
    assert Conversation.objects.filter(folder__isnull=True).count() == 3


def test_another_users_folder_is_not_found(user, other_user):
    theirs = folders.folder_create(owner=other_user, name="Theirs")
    mine = chat(user, "mine")
    with pytest.raises(ApplicationError) as refused:
        folders.conversation_move(conversation=mine, folder_id=theirs.pk)
    assert refused.value.code == "not_found" and "folder" in refused.value.extra
    with pytest.raises(ApplicationError) as as_parent:
        folders.folder_create(owner=user, name="Sneaky", parent_id=theirs.pk)
    assert as_parent.value.code == "not_found" and "parent" in as_parent.value.extra
    with pytest.raises(Http404):
        folders.folder_get(user=user, folder_id=theirs.pk)
    assert folders.folder_tree(user=user) == []
    assert Conversation.objects.get(pk=mine.pk).folder is None


def test_organising_leaves_the_chats_place_in_the_list(user):
    then = timezone.now() - dt.timedelta(days=3)
    old = chat(user, "old")
    Conversation.objects.filter(pk=old.pk).update(updated_at=then)
    old.refresh_from_db()
    work = folders.folder_create(owner=user, name="Work")

    folders.conversation_move(conversation=old, folder_id=work.pk)
    pins.conversation_pin(conversation=old, pinned=True)
    tags.conversation_set_tags(conversation=old, names=["x"])

    old.refresh_from_db()
    assert old.updated_at == then and old.folder == work and old.pinned_at is not None


# ------------------------------------------------------------------------------ pins


def test_pins_keep_their_time_and_unpin(user):
    first, second = chat(user, "first"), chat(user, "second")
    pins.conversation_pin(conversation=first, pinned=True)
    pinned_at = Conversation.objects.get(pk=first.pk).pinned_at
    pins.conversation_pin(conversation=second, pinned=True)
    pins.conversation_pin(conversation=first, pinned=True)  # already: stays where it is
    assert Conversation.objects.get(pk=first.pk).pinned_at == pinned_at

    pins.conversation_pin(conversation=second, pinned=False)
    assert Conversation.objects.get(pk=second.pk).pinned_at is None
    assert listed(user, pinned=True) == ["first"] and listed(user, pinned=False) == ["second"]


# ------------------------------------------------------------------------------ tags


def test_tags_are_trimmed_and_deduplicated_in_any_case(user):
    conversation = chat(user, "tagged")
    names = tags.conversation_set_tags(
        conversation=conversation, names=[" Work ", "work", "", "  ", "WORK", "Straße", "STRASSE"]
    )
    assert names == ["Work", "Straße"]  # the first spelling; ß case-folds to ss
    assert tags.tag_names(Conversation.objects.get(pk=conversation.pk)) == ["Straße", "Work"]
    # Another chat's "work" is the same tag, shown as first typed.
    other = chat(user, "other")
    assert tags.conversation_set_tags(conversation=other, names=["wOrK"]) == ["Work"]
    assert Tag.objects.count() == 2


@pytest.mark.parametrize(
    ("names", "words"),
    [
        ([f"t{n}" for n in range(21)], "at most 20 tags"),
        (["x" * 33], "at most 32 characters"),
        (["a,b"], "comma"),
        (["bell\x07"], "control characters"),
    ],
)
def test_tags_refused_name_the_field(user, names, words):
    conversation = chat(user, "tagged")
    tags.conversation_set_tags(conversation=conversation, names=["kept"])
    with pytest.raises(ApplicationError, match=words) as refused:
        tags.conversation_set_tags(conversation=conversation, names=names)
    assert list(refused.value.extra) == ["tags"]
    assert tags.tag_names(conversation) == ["kept"]  # nothing changed


def test_twenty_tags_of_32_characters_are_fine(user):
    conversation = chat(user, "full")
    names = [f"{n:02d}" + "x" * 30 for n in range(20)]
    assert tags.conversation_set_tags(conversation=conversation, names=names) == names


def test_tags_no_chat_has_any_longer_are_forgotten(user, other_user):
    one, two = chat(user, "one"), chat(user, "two")
    tags.conversation_set_tags(conversation=one, names=["shared", "only one"])
    tags.conversation_set_tags(conversation=two, names=["shared"])
    tags.conversation_set_tags(conversation=chat(other_user, "theirs"), names=["theirs"])

    tags.conversation_set_tags(conversation=one, names=[])

    assert [t.name for t in tags.tags_in_use(user=user)] == ["shared"]
    assert set(Tag.objects.values_list("name", flat=True)) == {"shared", "theirs"}


# --------------------------------------------------------------------------- filters


def test_the_list_filters_by_tag_folder_and_pin_within_the_owners_chats(user, other_user):
    work = folders.folder_create(owner=user, name="Work")
    report, trip = chat(user, "report"), chat(user, "trip")
    chat(user, "loose")
    folders.conversation_move(conversation=report, folder_id=work.pk)
    tags.conversation_set_tags(conversation=report, names=["Urgent", "q3"])
    tags.conversation_set_tags(conversation=trip, names=["urgent"])
    pins.conversation_pin(conversation=trip, pinned=True)
    theirs = chat(other_user, "theirs")
    tags.conversation_set_tags(conversation=theirs, names=["urgent"])

    assert sorted(listed(user, tag="URGENT ")) == ["report", "trip"]
    assert listed(user, tag="q3") == ["report"] and listed(user, tag="nope") == []
    assert listed(user, folder=work.pk) == ["report"]
    assert sorted(listed(user, folder=NO_FOLDER)) == ["loose", "trip"]
    assert listed(user, tag="urgent", pinned=True) == ["trip"]
    assert listed(user, tag="urgent", search="rep") == ["report"]
    assert listed(other_user, tag="urgent") == ["theirs"]
    assert listed(user, folder=work.pk, archived=True) == []
