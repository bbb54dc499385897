"""Date arithmetic for the calculator: "2026-12-03 + 45 days", "weekday of 2027-03-14".

Models cannot count days across months or know the weekday of a date; the standard
library can. ISO dates only (YYYY-MM-DD): they are what the calculator's pattern admits
and what models write when asked for a date.
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["DateError", "date_result"]

_SHIFT = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})\s*(?P<sign>[+-])\s*(?P<count>\d+)\s*"
    r"(?P<unit>days?|weeks?)$"
)
_WEEKDAY = re.compile(r"^(?:(?:week)?day(?: of)?\s+)?(?P<date>\d{4}-\d{2}-\d{2})$")
_BETWEEN = re.compile(
    r"^(?:days? (?:from|between) )?(?P<start>\d{4}-\d{2}-\d{2})\s*(?:to|and|-)\s*"
    r"(?P<end>\d{4}-\d{2}-\d{2})$"
)


class DateError(ValueError):
    """Not a real date (2027-02-30), or out of range."""


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise DateError(f"{text} is not a date") from None


def _shown(day: dt.date) -> str:
    return f"{day.isoformat()} ({day.strftime('%A')})"


def date_result(expression: str) -> str | None:
    """The answer to a date expression, or None when ``expression`` is not one."""
    text = " ".join(expression.lower().split())
    if shift := _SHIFT.match(text):
        count = int(shift["count"]) * (7 if shift["unit"].startswith("week") else 1)
        delta = dt.timedelta(days=count if shift["sign"] == "+" else -count)
        try:
            day = _date(shift["date"]) + delta
        except OverflowError:
            raise DateError("the date is out of range") from None
        return f"{expression.strip()} = {_shown(day)}"
    if weekday := _WEEKDAY.match(text):
        day = _date(weekday["date"])
        return f"{day.isoformat()} is a {day.strftime('%A')}"
    if between := _BETWEEN.match(text):
        days = (_date(between["end"]) - _date(between["start"])).days
        return f"From {between['start']} to {between['end']}: {days} days"
    return None
