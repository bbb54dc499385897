"""JSON log lines (``AGENTSITE_LOG_FORMAT=json``): one object a line, for a log shipper.

Each record becomes ``{"time", "level", "logger", "message"}`` plus ``exception`` (the
formatted traceback) when there is one and the ids ``core/logcontext.py``'s filter put on
it (``request_id``, ``user_id``, ``conversation_id``, ``run_id``, ``task_id``) when known.
``time`` is ISO 8601 in UTC with milliseconds. Non-ASCII is escaped, so a message with
line breaks of any kind stays on its line.

A small :class:`logging.Formatter` subclass rather than python-json-logger: the fields are
fixed and few, the standard library's ``json`` writes them, and a dependency would add
configuration (field renaming, reserved attributes) without removing code here.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from core.logcontext import FIELDS


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)
