"""A base's files are the owner's StoredFiles that conversations do not take with them:
deleting a conversation a base's file is attached to keeps it, deleting the file itself is
a 409 naming the base, and the document's (or base's) deletion removes it unless a message
still holds it."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations.models import MessageFile
from conversations.services import conversation_create, conversation_delete, message_create
from files import services as file_services
from files.models import StoredFile
from knowledge import services
from knowledge.models import Document, KnowledgeBase

pytestmark = pytest.mark.django_db


def attach(user, file: StoredFile):
    conversation = conversation_create(owner=user, title="chat")
    message = message_create(conversation=conversation, role="user", content="see")
    MessageFile.objects.create(message=message, file=file)
    return conversation


@pytest.fixture
def document(user) -> Document:
    base = services.base_create(user, "Base")
    return services.document_add(base, SimpleUploadedFile("doc.txt", b"kept text"))


def test_a_conversations_deletion_keeps_the_bases_file(user, document) -> None:
    conversation = attach(user, document.file)
    conversation_delete(conversation=conversation)
    assert StoredFile.objects.filter(pk=document.file_id).exists()
    assert file_services.delete_unattached([document.file]) == 0


def test_deleting_the_file_itself_says_a_base_holds_it(client, user, document) -> None:
    client.force_login(user)
    response = client.delete(f"/api/files/{document.file_id}")
    assert response.status_code == 409
    assert "knowledge base" in response.json()["error"]


def test_a_document_removed_keeps_a_file_a_message_holds(user, document) -> None:
    attach(user, document.file)
    services.document_delete(document)
    assert StoredFile.objects.filter(pk=document.file_id).exists()


def test_a_bases_deletion_removes_its_files(user, document) -> None:
    services.base_delete(document.base)
    assert not StoredFile.objects.filter(pk=document.file_id).exists()


def test_an_accounts_deletion_takes_bases_and_files(user, document) -> None:
    user.delete()
    assert (KnowledgeBase.objects.count(), StoredFile.objects.count()) == (0, 0)
