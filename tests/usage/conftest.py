"""Fixtures for the usage tests: a priced model, usage rows written by the real service,
and the API clients of tests/conversations/api (a JSON client, an in-process ASGI one)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from engine import Usage
from llms.models import LLMModel, UsageRecord
from llms.pricing import price_now
from llms.services import usage_record
from tests.conversations.api.conftest import JsonClient, http  # noqa: F401  (fixtures)

# $3 per million prompt tokens, $15 per million completion tokens.
INPUT_PRICE = Decimal("3.00")
OUTPUT_PRICE = Decimal("15.00")


@pytest.fixture
def priced_model(chat_model) -> LLMModel:
    """The scripted default model, priced like a mid-range hosted model."""
    chat_model.input_price = INPUT_PRICE
    chat_model.output_price = OUTPUT_PRICE
    chat_model.currency = "USD"
    chat_model.save()
    return chat_model


@pytest.fixture
def api(client, token) -> JsonClient:
    return JsonClient(client, token)


@pytest.fixture
def anon_api(client) -> JsonClient:
    return JsonClient(client, None)


def spend(user: Any, model: LLMModel | None, prompt: int, completion: int, *, days_ago: int = 0):
    """Usage of ``user`` with ``model``: today's through the service runs use; an earlier
    day's as a row the service would have written that day (at today's prices)."""
    usage = Usage(prompt, completion, prompt + completion)
    if not days_ago:
        usage_record(user=user, model=model, usage=usage)
        return
    cost = price_now(model=model).cost(usage)
    UsageRecord.objects.create(
        user=user,
        model=model,
        day=timezone.localdate() - dt.timedelta(days=days_ago),
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cost=cost.amount if cost else None,
        currency=cost.currency if cost else "",
        runs=1,
    )
