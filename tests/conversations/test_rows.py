"""Plain-SQL row writes: the same rows as the ORM's, for the models they write."""

from __future__ import annotations

import pytest
from django.db.models.signals import post_save, pre_save
from django.forms.models import model_to_dict

from conversations import rows, services
from conversations.models import Conversation, Message, Run

pytestmark = pytest.mark.django_db


def test_an_inserted_message_is_the_row_the_orm_would_write(user):
    conversation = services.conversation_create(owner=user)
    fields = {
        "conversation": conversation, "role": Message.Role.ASSISTANT, "content": "é <b>x</b>",
        "usage": {"total_tokens": 7, "nested": [1, None]}, "pinned": True,
    }  # fmt: skip

    ours = rows.insert(Message(seq=1, **fields))
    theirs = Message.objects.create(seq=2, **fields)

    assert ours.pk and not ours._state.adding
    stored_ours, stored_theirs = Message.objects.get(pk=ours.pk), Message.objects.get(pk=theirs.pk)
    skip = {"id", "seq"}
    assert {k: v for k, v in model_to_dict(stored_ours).items() if k not in skip} == {
        k: v for k, v in model_to_dict(stored_theirs).items() if k not in skip
    }
    assert stored_ours.created_at == ours.created_at  # auto_now_add set on the instance too
    assert stored_ours.kind == Message.Kind.CHAT and stored_ours.reasoning == ""  # defaults


def test_update_sets_columns_and_takes_a_related_instance_as_its_key(user):
    conversation = services.conversation_create(owner=user)
    message = rows.insert(Message(conversation=conversation, seq=1, role="user", content="hi"))
    run = rows.insert(Run(conversation=conversation, trigger_message=message))

    assert rows.update(Message, message.pk, run=run, pinned=True) == 1
    assert rows.update(Message, message.pk + 1000, pinned=True) == 0  # no such row

    message.refresh_from_db()
    assert (message.run_id, message.pinned) == (run.pk, True)
    assert Run.objects.get(pk=run.pk).trigger_message_id == message.pk


@pytest.mark.parametrize("model", [Message, Run])
def test_nothing_listens_to_the_saves_these_writes_skip(model) -> None:
    assert not pre_save.has_listeners(model)
    assert not post_save.has_listeners(model)


def test_a_read_row_equals_the_orms_with_converted_values(user, other_user):
    conversation = services.conversation_create(owner=user, title="Plans ✓")
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=9, archived=True)
    orm = Conversation.objects.get(pk=conversation.pk)

    ours = rows.get(Conversation, conversation.pk, owner_id=user.pk)

    assert model_to_dict(ours) == model_to_dict(orm)
    assert (ours.created_at, ours.updated_at) == (orm.created_at, orm.updated_at)  # datetimes
    assert ours.created_at.tzinfo is not None and ours.archived is True
    assert not ours._state.adding
    assert rows.get(Conversation, conversation.pk, owner_id=other_user.pk) is None
    assert rows.get(Conversation, conversation.pk + 1000) is None
