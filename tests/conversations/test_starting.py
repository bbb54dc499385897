"""Starting a conversation: the row, its first message and its run, or nothing at all."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message, Run
from conversations.starting import conversation_start
from core.errors import ApplicationError
from llms.models import LLMModel

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_launch(no_launch):
    """Runs are created, not executed: these tests are about what is saved."""


def test_start_saves_the_conversation_its_first_message_and_its_run(user, chat_model):
    conversation, message, run = conversation_start(owner=user, content="  Plan my trip  ")

    assert conversation.owner == user and conversation.model == chat_model
    assert conversation.title == "Plan my trip"
    assert (message.conversation, message.seq, message.content) == (conversation, 1, "Plan my trip")
    assert run.conversation == conversation and run.trigger_message == message
    assert run.status == Run.Status.QUEUED


@pytest.mark.parametrize("content", ["", "   \n "])
def test_an_empty_message_creates_nothing(user, chat_model, content):
    with pytest.raises(ApplicationError, match="Type a message"):
        conversation_start(owner=user, content=content)

    assert not Conversation.objects.exists() and not Message.objects.exists()


def test_a_too_long_message_creates_nothing(user, chat_model, settings):
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 5

    with pytest.raises(ApplicationError) as refused:
        conversation_start(owner=user, content="123456")

    assert refused.value.code == "too_large"
    assert not Conversation.objects.exists() and not Run.objects.exists()


def test_the_chosen_model_answers_and_a_forbidden_one_creates_nothing(user, chat_model):
    from django.contrib.auth.models import Group

    other = LLMModel.objects.create(
        provider=chat_model.provider, model_id="other", display_name="Other"
    )
    conversation, _, _ = conversation_start(owner=user, content="hi", model_id=str(other.pk))
    assert conversation.model == other

    other.allowed_groups.add(Group.objects.create(name="staff only"))
    with pytest.raises(ApplicationError):
        conversation_start(owner=user, content="hi again", model_id=other.pk)
    assert Conversation.objects.count() == 1
