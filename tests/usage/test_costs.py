"""What runs cost: Decimal arithmetic at the model's prices, rounded half up to 6 places;
the day's row incremented in one UPDATE (concurrent runs lose nothing); a run's own cost
in its usage equal to what it added to the day; prices read when the run ends."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection

from conversations import services as conversation_services
from conversations.models import Conversation, Message, Run
from conversations.runs import lifecycle
from engine import Usage
from llms.models import LLMModel, UsageRecord
from llms.pricing import UNPRICED, Cost, Price, money, price_now
from llms.services import usage_record

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------ arithmetic


def test_a_cost_is_exact_decimal_arithmetic_per_million_tokens() -> None:
    price = Price(Decimal("3.00"), Decimal("15.00"), "USD")
    # 1,000 x $3/M + 200 x $15/M = $0.003 + $0.003
    assert price.cost(Usage(1000, 200, 1200)) == Cost(Decimal("0.006000"), "USD")
    # A float would say 0.30000000000000004 for 0.1 + 0.2: Decimal never drifts.
    tenth = Price(Decimal("0.1000"), Decimal("0.2000"), "EUR")
    assert tenth.cost(Usage(1_000_000, 1_000_000, 2_000_000)) == Cost(Decimal("0.300000"), "EUR")
    assert isinstance(price.cost(Usage(1, 1, 2)).amount, Decimal)  # type: ignore[union-attr]


def test_a_cost_is_rounded_half_up_to_six_places() -> None:
    price = Price(Decimal("0.0005"), None, "USD")
    assert price.cost(Usage(1000, 0, 1000)).amount == Decimal("0.000001")  # 0.0000005 up
    assert price.cost(Usage(999, 0, 999)).amount == Decimal("0.000000")  # 0.0000004995 down
    big = Price(Decimal("99999999.9999"), Decimal("0"), "USD")  # the largest price kept
    assert big.cost(Usage(1_000_000, 0, 1_000_000)).amount == Decimal("99999999.999900")


def test_a_model_priced_on_one_side_counts_the_other_as_free() -> None:
    assert Price(None, Decimal("10"), "USD").cost(Usage(5000, 100, 5100)) == Cost(
        Decimal("0.001000"), "USD"
    )
    assert Price(Decimal("2"), None, "USD").cost(Usage(500, 9999, 10499)) == Cost(
        Decimal("0.001000"), "USD"
    )
    assert UNPRICED.cost(Usage(500, 500, 1000)) is None
    assert Price(None, None, "USD").cost(Usage(1, 1, 2)) is None


def test_amounts_read_well() -> None:
    assert money(Decimal("0.012000")) == "0.012"
    assert money(Decimal("0.000450")) == "0.00045"
    assert money(Decimal("1.5")) == "1.50"
    assert money(Decimal("1234.000000")) == "1,234.00"
    assert money(Decimal("0")) == "0.00"


def test_prices_are_read_from_the_database_now(priced_model) -> None:
    stale = LLMModel.objects.get(pk=priced_model.pk)  # a run loaded its row at its start
    LLMModel.objects.filter(pk=priced_model.pk).update(input_price=Decimal("4"), currency="eur")
    assert price_now(model=stale) == Price(Decimal("4.0000"), Decimal("15.0000"), "EUR")
    assert price_now(model=None) is UNPRICED
    priced_model.delete()
    assert price_now(model=stale) is UNPRICED


# ----------------------------------------------------------------- the day's row


def test_usage_record_adds_the_cost_to_the_days_row(user, priced_model) -> None:
    first = usage_record(user=user, model=priced_model, usage=Usage(1000, 200, 1200))
    second = usage_record(user=user, model=priced_model, usage=Usage(2000, 100, 2100))
    assert first == Cost(Decimal("0.006000"), "USD")
    assert second == Cost(Decimal("0.007500"), "USD")
    row = UsageRecord.objects.get()
    assert (row.total_tokens, row.runs, row.cost, row.currency) == (
        3300,
        2,
        Decimal("0.013500"),
        "USD",
    )


def test_an_unpriced_model_counts_tokens_and_no_cost(user, chat_model) -> None:
    assert usage_record(user=user, model=chat_model, usage=Usage(10, 5, 15)) is None
    row = UsageRecord.objects.get()
    assert (row.total_tokens, row.cost, row.currency) == (15, None, "")

    # Priced later that day: the day's cost is what was priced.
    LLMModel.objects.filter(pk=chat_model.pk).update(output_price=Decimal("1000"))
    usage_record(user=user, model=chat_model, usage=Usage(10, 5, 15))
    row.refresh_from_db()
    assert (row.total_tokens, row.cost, row.currency) == (30, Decimal("0.005000"), "USD")

    # And no longer priced: the cost so far stays.
    LLMModel.objects.filter(pk=chat_model.pk).update(output_price=None)
    usage_record(user=user, model=chat_model, usage=Usage(10, 5, 15))
    row.refresh_from_db()
    assert (row.total_tokens, row.cost) == (45, Decimal("0.005000"))


def test_a_currency_changed_mid_day_never_adds_two_currencies(user, priced_model, caplog) -> None:
    usage_record(user=user, model=priced_model, usage=Usage(1000, 0, 1000))
    LLMModel.objects.filter(pk=priced_model.pk).update(currency="EUR")
    cost = usage_record(user=user, model=priced_model, usage=Usage(1000, 0, 1000))
    assert cost == Cost(Decimal("0.003000"), "EUR")
    row = UsageRecord.objects.get()
    assert (row.total_tokens, row.cost, row.currency) == (2000, Decimal("0.003000"), "USD")
    assert "currency changed to EUR" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_lose_no_token_and_no_cent(user, priced_model) -> None:
    """Eight threads (eight database connections) record at once, the day's row not made
    yet: each increment is one UPDATE, and a lost race to create the row falls back to it."""
    threads, each = 8, 12
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def record() -> None:
        try:
            start.wait()
            for _ in range(each):
                usage_record(user=user, model=priced_model, usage=Usage(333, 77, 410))
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=record) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert failures == []
    row = UsageRecord.objects.get()
    n = threads * each
    assert (row.prompt_tokens, row.completion_tokens, row.runs) == (333 * n, 77 * n, n)
    # Each run: 333 x 3/M + 77 x 15/M = 0.000999 + 0.001155 = 0.002154
    assert row.cost == Decimal("0.002154") * n


# ------------------------------------------------------------------------ a run's own


def queued_run(user) -> Run:
    """A run waiting to be claimed, as tests/conversations/runs/test_lifecycle.py makes one."""
    conversation = conversation_services.conversation_create(owner=user)
    trigger = Message.objects.create(
        conversation=conversation, seq=1, role=Message.Role.USER, content="How much?"
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_message_seq=1)
    return Run.objects.create(conversation=conversation, trigger_message=trigger)


def test_a_closed_run_keeps_its_cost_and_adds_the_same_to_the_day(user, priced_model) -> None:
    run = queued_run(user)
    claimed = lifecycle.run_claim(run_id=run.pk)
    LLMModel.objects.filter(pk=priced_model.pk).update(output_price=Decimal("20"))  # mid-run
    usage = {"prompt_tokens": 1234, "completion_tokens": 567, "total_tokens": 1801}

    lifecycle.run_close_unanswered(
        run=claimed, model=priced_model, taken_in=[], status=Run.Status.FAILED,
        error="The model is unreachable.", iterations=1, usage=usage, elapsed=0.5,
    )  # fmt: skip

    run.refresh_from_db()
    # 1234 x 3/M + 567 x 20/M = 0.003702 + 0.01134, at the prices when the run ended
    assert run.usage == {**usage, "cost": "0.015042", "currency": "USD"}
    row = UsageRecord.objects.get()
    assert (row.total_tokens, row.cost, row.currency) == (1801, Decimal("0.015042"), "USD")


def test_a_run_of_an_unpriced_model_has_tokens_only(user, chat_model) -> None:
    run = queued_run(user)
    claimed = lifecycle.run_claim(run_id=run.pk)
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    lifecycle.run_close_unanswered(
        run=claimed, model=chat_model, taken_in=[], status=Run.Status.FAILED, usage=usage
    )
    run.refresh_from_db()
    assert run.usage == usage
    assert UsageRecord.objects.get().cost is None
