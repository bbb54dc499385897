"""An outage is one warning with its traceback and one line when it ends, with a count:
not a traceback per failed frame."""

from __future__ import annotations

import logging

from core.episodes import OutageLog


def test_an_outage_logs_once_with_a_traceback_and_its_end_with_the_count(caplog):
    redis = OutageLog("the channel layer")
    caplog.set_level(logging.DEBUG, logger="core.outages")

    for frame in range(1000):
        redis.failed(ConnectionError("Connection refused"), doing=f"sending event {frame}")
    redis.recovered()
    redis.recovered()  # nothing more to say

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2
    first, end = warnings
    assert "the channel layer is not answering" in first.getMessage()
    assert first.exc_info is not None and end.exc_info is None
    assert "after" in end.getMessage() and "1000 failed calls" in end.getMessage()
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 999


def test_each_outage_is_its_own_episode(caplog):
    database = OutageLog("the database")
    caplog.set_level(logging.WARNING, logger="core.outages")

    for _episode in range(2):
        database.failed(OSError("gone"), doing="a heartbeat")
        assert database.failing
        database.recovered()

    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4 and "(1 failed call)" in messages[1]
    assert not database.failing
