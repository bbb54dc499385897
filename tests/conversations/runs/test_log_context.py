"""A run's log lines carry its run and conversation ids (core/logcontext.py, issue 44)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.runs.execution import execute_run
from core.logcontext import ContextFilter

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_runs_log_lines_carry_its_run_and_conversation(
    user, chat_model, llm_server, no_launch, caplog
):
    llm_server.push({"content": "Hello."})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _message, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="Hi"
    )
    caplog.handler.addFilter(ContextFilter())
    with caplog.at_level(logging.INFO, logger="conversations.runs.execution"):
        outcome = await asyncio.ensure_future(execute_run(run.pk, task_id="celery-1"))
    assert outcome.status == "succeeded"
    [finished] = [r for r in caplog.records if "finished" in r.getMessage()]
    assert (finished.run_id, finished.conversation_id) == (run.pk, conversation.pk)
    assert finished.task_id == "celery-1"
