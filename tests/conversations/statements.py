"""SQL statements a piece of code runs, in whichever thread (settings.DEBUG must be on)."""

from __future__ import annotations

import logging


class Statements(logging.Handler):
    """SQL statements run meanwhile (in any thread, or only in ``thread``)."""

    def __init__(self, thread: str = "") -> None:
        super().__init__()
        self.thread = thread
        self.statements: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "sql", None) and self.thread in ("", record.threadName):
            self.statements.append(str(record.sql))

    def __enter__(self) -> Statements:
        logger = logging.getLogger("django.db.backends")
        self._level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("django.db.backends")
        logger.removeHandler(self)
        logger.setLevel(self._level)
