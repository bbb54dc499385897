"""What tokens cost: a model's prices per million tokens and the cost of some usage.

Decimal throughout: a float would drift by fractions of a cent over a month of runs. A
cost is rounded half up (as money is) to the 6 places :class:`llms.models.UsageRecord`
keeps, so a run's own cost and what it adds to the day's row are the same number.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from engine import Usage
from llms.models import LLMModel

__all__ = ["COST_PLACES", "UNPRICED", "Cost", "Price", "money", "price_now"]

PER_TOKENS = Decimal(1_000_000)  # prices are per million tokens
COST_PLACES = Decimal("0.000001")  # UsageRecord.cost's decimal places


@dataclass(frozen=True)
class Cost:
    """An amount in one currency (ISO 4217 code)."""

    amount: Decimal
    currency: str

    def as_usage(self) -> dict[str, str]:
        """The keys a run's ``usage`` JSON holds: the amount as a string, never a float."""
        return {"cost": str(self.amount), "currency": self.currency}


@dataclass(frozen=True)
class Price:
    """A model's prices per million prompt (``input``) and completion (``output``) tokens.

    A model is priced when either is set; the other then counts as free (a model whose
    admin priced only its output still costs something).
    """

    input: Decimal | None
    output: Decimal | None
    currency: str

    @property
    def priced(self) -> bool:
        return self.input is not None or self.output is not None

    def cost(self, usage: Usage) -> Cost | None:
        """What ``usage`` costs at these prices; None when the model is not priced."""
        if not self.priced:
            return None
        spent = usage.prompt_tokens * (self.input or Decimal(0)) + usage.completion_tokens * (
            self.output or Decimal(0)
        )
        amount = (spent / PER_TOKENS).quantize(COST_PLACES, rounding=ROUND_HALF_UP)
        return Cost(amount, self.currency)


UNPRICED = Price(None, None, "")


def price_now(*, model: LLMModel | None) -> Price:
    """The model's prices as the database holds them now: a run loaded its row when it
    started, and an admin may have changed the prices since. A deleted model, or none, is
    not priced."""
    if model is None or model.pk is None:
        return UNPRICED
    row = (
        LLMModel.objects.filter(pk=model.pk)
        .values_list("input_price", "output_price", "currency")
        .first()
    )
    if row is None:
        return UNPRICED
    input_price, output_price, currency = row
    return Price(input_price, output_price, (currency or "").strip().upper())


def money(amount: Any) -> str:
    """An amount for people: at least 2 decimals, at most 6, no trailing zeros past 2
    (``0.012`` rather than ``0.012000``; ``0.00045`` rather than a rounded ``0.00``)."""
    text = f"{Decimal(amount).quantize(COST_PLACES, rounding=ROUND_HALF_UP):,f}"
    whole, _, places = text.partition(".")
    return f"{whole}.{places.rstrip('0').ljust(2, '0')}"
