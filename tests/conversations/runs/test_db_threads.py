"""A run's last writes wait out a short database outage instead of losing the answer."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from conversations.runs.db import patiently


class FlakyDatabase:
    """Refuses ``outage`` calls the way a restarting server does, then answers."""

    def __init__(self, outage: int) -> None:
        self.outage = outage
        self.calls = 0

    async def write(self) -> str:
        self.calls += 1
        if self.calls <= self.outage:
            raise OperationalError("connection refused")
        return "saved"


async def test_a_write_is_tried_again_until_the_database_is_back() -> None:
    database = FlakyDatabase(outage=2)

    assert await patiently(database.write, patience=5) == "saved"
    assert database.calls == 3


async def test_a_longer_outage_fails_after_the_patience() -> None:
    database = FlakyDatabase(outage=1000)

    with pytest.raises(OperationalError):
        await patiently(database.write, patience=0.5)
    assert 1 < database.calls < 10


async def test_other_errors_are_not_retried() -> None:
    async def broken() -> None:
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError):
        await patiently(broken, patience=5)
