"""Durations in what users read: the numbers and their plurals agree."""

from __future__ import annotations

import pytest

from conversations.runs.execution import deadline_message
from conversations.runs.wording import duration_words


@pytest.mark.parametrize(
    "seconds, words",
    [
        (60, "1 minute"),
        (600, "10 minutes"),
        (90, "90 seconds"),
        (1, "1 second"),
        (25, "25 seconds"),
        (2.5, "2.5 seconds"),
    ],
)
def test_durations_read_right(seconds, words):
    assert duration_words(seconds) == words


def test_the_deadline_message_says_one_minute():
    assert deadline_message(60) == "The run reached its time limit (1 minute) and was stopped."
