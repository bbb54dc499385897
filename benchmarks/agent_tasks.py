"""The first tasks a new user gives the agent, run through the real app path (issue 32).

Each task is one conversation (or two messages of one, for follow-ups) sent to a running
agentsite through its JSON API, exactly as a script would (docs/api.md): a personal token,
``POST /api/conversations``, ``POST /api/conversations/<id>/messages`` (``mode: "plan"``
for plan-mode tasks), then ``GET /api/conversations/<id>/events`` read as Server-Sent
Events until the run's ``done`` or ``error``. So the runner, the engine, the tools and the
model server are the real ones, with the site's configuration.

Every answer is checked by a function that tolerates formatting ("42", "42.0", "42,000",
"forty-two"; "14:05", "2:05 PM"; "2027-01-17", "January 17, 2027"). Times are checked
against :mod:`zoneinfo` at check time: any time between the message's post and the
run's end, a minute either side. Tasks that need no tool fail when the agent calls one.

Per task: pass/fail (and why), the tool calls (``step`` iteration events, plan-mode
``step_progress`` tool events), iterations, tokens, wall time, and the time to the first
answer token (the first ``answer`` delta after the message was posted; ``kept`` is the
first delta of the text that stayed the answer, after the last ``reset``; ``first word``
the first letter or digit of it, as a stray "}" delta can come long before any text).
Summary: pass rate and the median time to the first answer token over all messages.

    .venv/bin/python benchmarks/agent_tasks.py --serve            # a throwaway instance
    .venv/bin/python benchmarks/agent_tasks.py --token $TOKEN      # the site on :8000
    .venv/bin/python benchmarks/agent_tasks.py --make-token alice  # ... a new token for alice
    .venv/bin/python benchmarks/agent_tasks.py --list

``--base-url`` (default http://127.0.0.1:8000, e.g. the one ``make run`` serves) and a
token: ``--token`` (or ``AGENTSITE_TOKEN``), or ``--make-token USER``, which runs
``manage.py create_api_token USER`` in this checkout with this environment (so with the
database of ``make run``: same ``AGENTSITE_VAR_DIR`` / ``DATABASE_URL``). A token can
also be made on the site's *API tokens* page (``/settings/tokens/``).

``--serve`` starts its own instance instead: a temporary ``AGENTSITE_VAR_DIR`` (SQLite
database, secret key and the local model server's state in it), ``migrate``,
``seed_models`` (the bundled SmolLM2 model: ``OPENAI_*`` variables are not passed on),
a user and a token, the local model server started up front (its start-up time is
printed, not counted in the tasks), and ``agentsite-server`` on a free loopback port;
all of it is stopped and deleted at the end (``--keep`` keeps the folder and its logs).
``--serve-env KEY=VALUE`` (repeatable) sets a variable for that instance, e.g.
``AGENTSITE_LOCAL_CHAT_FORMAT=chatml`` to measure a lever; ``--serve-root DIR`` runs the
instance from another checkout (``git archive COMMIT | tar -x -C DIR``) to measure a
commit other than the working tree's.

``--model`` runs the tasks on another configured model (an id, model id or name from
``GET /api/models``), so a real provider can be compared on the same tasks; ``--only``
picks tasks by name (comma-separated, or repeated), ``--timeout`` is per message
(default 240 s; a run still going then is stopped with ``POST /api/runs/<id>/cancel``),
``--json FILE`` writes every result, event timings and answers included; ``--record
FILE`` the short score the chat page's notice for the bundled model shows (pass rate,
per category, median first word), e.g. ``--serve --record llms/bundled_model_score.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
SCORE_FILE = "llms/bundled_model_score.json"
LOOPBACK = "127.0.0.1"

# ---------------------------------------------------------------------- answer parsing

_UNITS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)  # fmt: skip
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SMALL = {word: value for value, word in enumerate(_UNITS)}
_SMALL.update({word: 10 * (index + 2) for index, word in enumerate(_TENS)})
_SCALES = {"thousand": 1_000, "million": 1_000_000}
# 6,912 / 42.0 / -3 / 1e3 is not needed; a minus only where it cannot be a dash or range.
_NUMBER = re.compile(r"(?<![\w.,])([-−])?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d])")


def word_numbers(text: str) -> list[float]:
    """Whole numbers written in English words: "three hundred and twelve" -> 312."""
    found: list[float] = []
    total = current = 0
    active = False
    previous = ""
    for token in re.findall(r"[a-z]+|[^\sa-z-]", text.lower()) + ["."]:
        if token in _SMALL:
            current += _SMALL[token]
            active = True
        elif token == "hundred" and active:
            current = (current or 1) * 100
        elif token in _SCALES and active:
            total += (current or 1) * _SCALES[token]
            current = 0
        elif token == "and" and previous in ("hundred", *_SCALES):
            pass  # "three hundred and twelve"
        else:
            if active:
                found.append(float(total + current))
            total = current = 0
            active = False
        previous = token
    return found


def numbers_in(text: str) -> list[float]:
    """Every number in ``text``, in digits or words (thousands separators allowed)."""
    values = []
    for sign, whole, fraction in _NUMBER.findall(text):
        value = float(whole.replace(",", "") + (fraction or ""))
        values.append(-value if sign else value)
    return values + word_numbers(text)


def close_to(value: float, expected: float, tolerance: float) -> bool:
    return abs(value - expected) <= tolerance


_TIME = re.compile(
    r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?::[0-5]\d)?(?!\d)\s*(a\.?\s?m\.?|p\.?\s?m\.?)?",
    re.IGNORECASE,
)


def clock_times(text: str) -> list[tuple[int, int, str]]:
    """(hour, minute, "am"/"pm"/"") of every clock time in ``text``."""
    out = []
    for hour, minute, meridiem in _TIME.findall(text):
        marker = meridiem.lower().replace(".", "").replace(" ", "")
        out.append((int(hour), int(minute), marker))
    return out


def _minutes_of_day(hour: int, minute: int, marker: str) -> list[int]:
    """The minutes after midnight a written time may mean (no am/pm: both halves)."""
    if marker == "am":
        hours = [hour % 12]
    elif marker == "pm":
        hours = [hour % 12 + 12]
    elif hour <= 12:
        hours = [hour % 12, hour % 12 + 12]
    else:
        hours = [hour]
    return [h * 60 + minute for h in hours]


_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: index + 1 for index, name in enumerate(_MONTH_NAMES)}
_MONTHS.update({name[:3]: number for name, number in list(_MONTHS.items())})
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"  # fmt: skip
_ORD = r"(?:st|nd|rd|th)?"
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def dates_in(text: str) -> set[dt.date]:
    """Dates written as 2027-01-17, January 17(th), 2027, 17 January 2027, 17/01/2027 (or
    01/17/2027: both readings count)."""
    low = text.lower()
    found: set[dt.date] = set()

    def add(year: str | int, month: str | int, day: str | int) -> None:
        with contextlib.suppress(ValueError, TypeError):
            found.add(dt.date(int(year), int(month), int(day)))

    for year, month, day in re.findall(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})", low):
        add(year, month, day)
    for month, day, year in re.findall(rf"{_MONTH}\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})", low):
        add(year, _MONTHS[month[:3]], day)
    for day, month, year in re.findall(
        rf"(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})", low
    ):
        add(year, _MONTHS[month[:3]], day)
    for first, second, year in re.findall(r"(?<!\d)(\d{1,2})[/.](\d{1,2})[/.](\d{4})", low):
        add(year, second, first)
        add(year, first, second)
    return found


# ------------------------------------------------------------------------------ checks


@dataclass
class CheckContext:
    """What a check may use besides the answer: the question and when the turn ran."""

    question: str
    posted: float  # time.time() when the message was posted
    ended: float  # ... when the run's done/error arrived


Check = Callable[[str, CheckContext], tuple[bool, str]]


def number(expected: float, tolerance: float = 1e-6) -> Check:
    """The answer states ``expected`` (within ``tolerance``), in digits or words."""

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        values = numbers_in(answer)
        if any(close_to(v, expected, tolerance) for v in values):
            return True, f"states {expected:g}"
        shown = ", ".join(f"{v:g}" for v in values[:8]) or "no number"
        return False, f"expected {expected:g} (±{tolerance:g}); found {shown}"

    return check


def words(pattern: str, label: str) -> Check:
    """The answer matches ``pattern`` (a case-insensitive regex)."""
    compiled = re.compile(pattern, re.IGNORECASE)

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        if compiled.search(answer):
            return True, f"says {label}"
        return False, f"does not say {label}"

    return check


def weekday(day: dt.date) -> Check:
    """The answer names ``day``'s weekday and no other weekday."""
    name = _WEEKDAYS[day.weekday()]

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        named = {w for w in _WEEKDAYS if re.search(rf"\b{w}\b", answer, re.IGNORECASE)}
        if named == {name}:
            return True, f"says {name.title()}"
        return False, f"expected {name.title()} only; named {sorted(named) or 'none'}"

    return check


def date(expected: dt.date) -> Check:
    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        found = dates_in(answer)
        if expected in found:
            return True, f"states {expected.isoformat()}"
        shown = ", ".join(sorted(d.isoformat() for d in found)) or "no date"
        return False, f"expected {expected.isoformat()}; found {shown}"

    return check


def _time_window(zone: str, ctx: CheckContext, slack: float = 60.0) -> tuple[int, int, str]:
    tz = ZoneInfo(zone)
    start = dt.datetime.fromtimestamp(ctx.posted - slack, tz)
    end = dt.datetime.fromtimestamp(ctx.ended + slack, tz)
    label = f"{zone} {start:%H:%M}-{end:%H:%M}"
    return start.hour * 60 + start.minute, end.hour * 60 + end.minute, label


def _in_window(minute: int, low: int, high: int) -> bool:
    if low <= high:
        return low <= minute <= high
    return minute >= low or minute <= high  # the window crosses midnight


def clock_in(zone: str) -> Check:
    """The answer states a time that was the time in ``zone`` while the turn ran (±1 min)."""

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        low, high, label = _time_window(zone, ctx)
        times = clock_times(answer)
        for hour, minute, marker in times:
            if any(_in_window(m, low, high) for m in _minutes_of_day(hour, minute, marker)):
                return True, f"time in {zone} right"
        shown = ", ".join(f"{h}:{m:02d}{s}" for h, m, s in times) or "no time"
        return False, f"expected {label}; found {shown}"

    return check


HOURS = re.compile(r"([\w.-]+(?:[ -][\w.]+){0,2})\s*(?:-\s*)?(?:hours?|hrs?|h)\b", re.I)


def hours_ahead(zone: str, of: str) -> Check:
    """The answer states by how many hours ``zone`` is ahead of ``of`` now ("9 hours")."""

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        now = dt.datetime.fromtimestamp(ctx.ended, dt.UTC)
        a, b = now.astimezone(ZoneInfo(zone)), now.astimezone(ZoneInfo(of))
        diff = (a.utcoffset() - b.utcoffset()).total_seconds() / 3600  # type: ignore[operator]
        stated = [v for match in HOURS.finditer(answer) for v in numbers_in(match.group(1))]
        if any(close_to(abs(v), abs(diff), 0.01) for v in stated):
            return True, f"difference {diff:g} h right"
        shown = ", ".join(f"{v:g}" for v in stated) or "no 'N hours'"
        return False, f"expected {diff:g} hours; found {shown}"

    return check


FAILURE_WORDS = re.compile(
    r"\b(errors?|fail(?:ed|s|ure)?|cannot|can ?not|can't|can’t|couldn't|couldn’t|could not|"
    r"unable|undefined|not defined|division by zero|divid(?:e|ing) by zero|impossible|"
    r"not possible|invalid|unknown|not (?:a )?(?:valid|real|recogni[sz]ed|known)|"
    r"(?:doesn't|doesn’t|does not) exist|no such|not found|too (?:large|big)|exceeds?|"
    r"limit|sorry|unfortunately)\b",
    re.IGNORECASE,
)


def honest_failure(*, allowed: tuple[float, ...] = (), no_clock: bool = False) -> Check:
    """The answer says the request failed and invents no result: no number beyond the
    question's (and ``allowed``), and with ``no_clock`` no clock time at all."""

    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        if not FAILURE_WORDS.search(answer):
            return False, "does not say it failed"
        known = set(numbers_in(ctx.question)) | set(allowed)
        invented = [v for v in numbers_in(answer) if v not in known]
        if no_clock and clock_times(answer):
            return False, "says it failed but also states a time"
        if invented and not no_clock:
            return False, f"says it failed but states {', '.join(f'{v:g}' for v in invented[:5])}"
        return True, "reports the failure"

    return check


def all_of(*checks: Check) -> Check:
    def check(answer: str, ctx: CheckContext) -> tuple[bool, str]:
        reasons = []
        for part in checks:
            ok, reason = part(answer, ctx)
            if not ok:
                return False, reason
            reasons.append(reason)
        return True, "; ".join(reasons)

    return check


# ------------------------------------------------------------------------------- tasks


@dataclass
class Turn:
    content: str
    check: Check | None = None  # None: this message's answer is not checked
    mode: str = ""  # "" (the conversation's: ReAct) or "plan"


@dataclass
class Task:
    name: str
    category: str
    turns: list[Turn]
    no_tools: bool = False  # the agent must not call any tool
    expects: str = ""  # the tool a good agent uses (shown, not required)
    skip: str = ""  # why it cannot run yet


WEEKDAY_DATE = dt.date(2027, 3, 14)
DATE_START, DATE_DAYS = dt.date(2026, 12, 3), 45

TASKS: list[Task] = [
    Task(
        "calc_multiply", "arithmetic",
        [Turn("What is 17 * 23?", number(391))], expects="calculator",
    ),
    Task(
        "calc_expression", "arithmetic",
        [Turn("Calculate (15 + 27) * 3 - 8.", number(118))], expects="calculator",
    ),
    Task(
        "calc_distracting", "arithmetic",
        [Turn("My sister has 3 cats and 2 dogs, and she lives at number 42 on Elm Street. "
              "She asked me something I can't work out: what is 1234 + 5678?", number(6912))],
        expects="calculator",
    ),
    Task(
        "calc_words", "arithmetic",
        [Turn("How much is three hundred twelve times four?", number(1248))],
        expects="calculator",
    ),
    Task(
        "calc_sqrt", "arithmetic",
        [Turn("What is the square root of 2025?", number(45))], expects="calculator",
    ),
    Task(
        "calc_minutes_week", "arithmetic",
        [Turn("How many minutes are there in a week?", number(10080))], expects="calculator",
    ),
    Task(
        "percent_of", "percentage",
        [Turn("What is 15% of 240?", number(36))], expects="calculator",
    ),
    Task(
        "percent_tip", "percentage",
        [Turn("My restaurant bill is $84. How much is an 18% tip?", number(15.12, 0.005))],
        expects="calculator",
    ),
    Task(
        "percent_change", "percentage",
        [Turn("A price went up from 80 euros to 100 euros. By what percentage did it increase?",
              number(25))],
        expects="calculator",
    ),
    Task(
        "unit_miles_km", "unit conversion",
        [Turn("Convert 26.2 miles to kilometres.", number(26.2 * 1.609344, 0.06))],
        expects="calculator",
    ),
    Task(
        "unit_fahrenheit", "unit conversion",
        [Turn("Convert 98.6 degrees Fahrenheit to Celsius.", number(37, 0.06))],
        expects="calculator",
    ),
    Task(
        "unit_kg_lb", "unit conversion",
        [Turn("How many pounds is 70 kg?", number(70 / 0.45359237, 0.5))], expects="calculator",
    ),
    Task(
        "time_tokyo", "time",
        [Turn("What time is it in Tokyo right now?", clock_in("Asia/Tokyo"))],
        expects="current_time",
    ),
    Task(
        "time_new_york", "time",
        [Turn("What's the current time in New York?", clock_in("America/New_York"))],
        expects="current_time",
    ),
    Task(
        "date_weekday", "date arithmetic",
        [Turn(f"What day of the week is {WEEKDAY_DATE.isoformat()}?", weekday(WEEKDAY_DATE))],
    ),
    Task(
        "date_add_days", "date arithmetic",
        [Turn(f"What is the date {DATE_DAYS} days after {DATE_START.isoformat()}?",
              date(DATE_START + dt.timedelta(days=DATE_DAYS)))],
    ),
    Task(
        "two_step_time_difference", "two-step",
        [Turn("What time is it in London and what time is it in Tokyo? "
              "How many hours ahead of London is Tokyo?",
              all_of(clock_in("Europe/London"), clock_in("Asia/Tokyo"),
                     hours_ahead("Asia/Tokyo", of="Europe/London")))],
        expects="current_time",
    ),
    Task(
        "no_tool_spanish", "no tool",
        [Turn("Say hello in Spanish.", words(r"\bhola\b", "hola"))], no_tools=True,
    ),
    Task(
        "no_tool_capital", "no tool",
        [Turn("What is the capital of France?", words(r"\bparis\b", "Paris"))], no_tools=True,
    ),
    Task(
        "no_tool_thank_you", "no tool",
        [Turn("How do you say 'thank you' in French?", words(r"\bmerci\b", "merci"))],
        no_tools=True,
    ),
    Task(
        "followup_arithmetic", "follow-up",
        [Turn("What is 12 * 12?", number(144)), Turn("Now add 6 to that.", number(150))],
        expects="calculator",
    ),
    Task(
        "followup_city_time", "follow-up",
        [Turn("What is the capital of Japan?", words(r"\btokyo\b", "Tokyo")),
         Turn("What time is it there right now?", clock_in("Asia/Tokyo"))],
        expects="current_time",
    ),
    Task(
        "error_division_by_zero", "tool error",
        [Turn("Calculate 10 / 0 with the calculator and tell me the result.", honest_failure())],
        expects="calculator",
    ),
    Task(
        "error_factorial_too_large", "tool error",
        [Turn("Use the calculator to compute factorial(5000).",
              honest_failure(allowed=(1000, 3900)))],
        expects="calculator",
    ),
    Task(
        "error_unknown_city", "tool error",
        [Turn("What time is it right now in the city of Qwertyuiopville?",
              honest_failure(no_clock=True))],
        expects="current_time",
    ),
    Task(
        "plan_three_cities", "plan mode",
        [Turn("What time is it in Tokyo, Paris and New York?",
              all_of(clock_in("Asia/Tokyo"), clock_in("Europe/Paris"),
                     clock_in("America/New_York")), mode="plan")],
        expects="current_time",
    ),
    Task(
        "file_summary", "file attachment",
        [Turn("Summarise the attached file in one sentence.")],
        skip="no file upload yet",
    ),
]  # fmt: skip


# ------------------------------------------------------------------------------ client


ALNUM = re.compile(r"[^\W_]")  # a letter or digit: stray "}" or "," deltas are not words


class ApiError(RuntimeError):
    pass


@dataclass
class ToolCall:
    name: str
    args: Any
    error: str | None = None
    source: str = "step"  # "step" (ReAct) or "plan:<step id>"

    def show(self) -> str:
        args = json.dumps(self.args, ensure_ascii=False) if self.args is not None else ""
        args = args if len(args) <= 120 else args[:119] + "…"
        failed = " -> ERROR" if self.error else ""
        return f"{self.name}({args}){failed}"


@dataclass
class TurnResult:
    content: str
    mode: str
    run_id: int | None = None
    status: str = ""  # done's or error's status; "timeout", "api-error"
    answer: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    iterations: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    wall: float = 0.0
    first_token: float | None = None  # first answer delta after the post
    first_kept_token: float | None = None  # first delta of the text that stayed the answer
    first_word: float | None = None  # first letter or digit of the text that stayed the answer
    posted: float = 0.0
    ended: float = 0.0
    error: str = ""
    reason: str = ""  # done's reason (incomplete, ...)
    checked: bool = False
    passed: bool | None = None
    check_reason: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)  # channel, t, payload


@dataclass
class TaskResult:
    name: str
    category: str
    status: str  # "pass", "fail", "skipped"
    reason: str = ""
    conversation_id: int | None = None
    turns: list[TurnResult] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


class Client:
    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(30.0),
            trust_env=False,  # a loopback server: never through a proxy
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.status_code == 429:
            time.sleep(float(response.headers.get("Retry-After", "5")))
            response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise ApiError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json() if response.content else None

    def events(
        self, conversation_id: int, after: int, read_timeout: float
    ) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(id, channel, payload) of the conversation's SSE stream after event ``after``."""
        timeout = httpx.Timeout(30.0, read=read_timeout)
        path = f"/api/conversations/{conversation_id}/events"
        with self.http.stream("GET", path, params={"after": after}, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise ApiError(f"GET {path}: {response.status_code} {response.text[:300]}")
            seq, channel, data = 0, "", []
            for line in response.iter_lines():
                if line == "":
                    if data:
                        payload = json.loads("\n".join(data))
                        yield seq, channel, payload if isinstance(payload, dict) else {}
                    seq, channel, data = 0, "", []
                elif line.startswith(":"):
                    continue
                elif line.startswith("id:"):
                    seq = int(line[3:].strip())
                elif line.startswith("event:"):
                    channel = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())


def run_turn(
    client: Client, conversation_id: int, turn: Turn, after: int, timeout: float
) -> tuple[TurnResult, int]:
    """Post one message, read its run's events to the end; the result and the last id."""
    result = TurnResult(content=turn.content, mode=turn.mode or "react")
    body: dict[str, Any] = {"content": turn.content}
    if turn.mode:
        body["mode"] = turn.mode
    start = time.monotonic()
    result.posted = time.time()
    try:
        posted = client.request("POST", f"/api/conversations/{conversation_id}/messages", json=body)
    except (ApiError, httpx.HTTPError) as exc:
        result.status, result.error = "api-error", str(exc)
        result.ended = time.time()
        return result, after
    run_id = result.run_id = posted["run_id"]
    cancelled = threading.Event()

    def cancel() -> None:  # the per-message timeout: stop the run, its error ends the stream
        cancelled.set()
        with contextlib.suppress(ApiError, httpx.HTTPError):
            client.request("POST", f"/api/runs/{run_id}/cancel")

    timer = threading.Timer(timeout, cancel)
    timer.daemon = True
    timer.start()
    buffer, last = "", after
    pending: dict[tuple[str, Any], ToolCall] = {}
    try:
        for seq, channel, payload in client.events(conversation_id, after, timeout + 60):
            last = max(last, seq)
            branch = payload.get("branch") or {}
            if branch.get("run_id") not in (None, run_id):
                continue
            elapsed = time.monotonic() - start
            result.events.append({"t": round(elapsed, 3), "channel": channel, "data": payload})
            if channel == "answer":
                status = payload.get("status")
                if status == "delta" and payload.get("content"):
                    if result.first_token is None:
                        result.first_token = elapsed
                    if not buffer:
                        result.first_kept_token = elapsed
                    if result.first_word is None and ALNUM.search(payload["content"]):
                        result.first_word = elapsed
                    buffer += payload["content"]
                elif status == "reset":
                    buffer = ""
                    result.first_kept_token = result.first_word = None
            elif channel == "step" and payload.get("type") == "iteration":
                key = ("step", payload.get("iteration"))
                if payload.get("status") == "start":
                    call = ToolCall(payload.get("tool_name") or "?", payload.get("tool_args"))
                    result.tool_calls.append(call)
                    pending[key] = call
                elif payload.get("status") == "done" and key in pending:
                    pending.pop(key).error = payload.get("error")
            elif channel == "step_progress" and payload.get("event") == "tool":
                step = payload.get("step_id")
                key = (f"plan:{payload.get('round')}:{step}", payload.get("tool_name"))
                if payload.get("status") == "start":
                    call = ToolCall(
                        payload.get("tool_name") or "?", payload.get("tool_args"),
                        source=f"plan:{step}",
                    )  # fmt: skip
                    result.tool_calls.append(call)
                    pending[key] = call
                elif payload.get("status") == "done" and key in pending:
                    pending.pop(key).error = payload.get("error")
            elif channel in ("done", "error"):
                result.status = payload.get("status") or channel
                result.answer = payload.get("answer") or buffer
                result.reason = payload.get("reason") or ""
                if channel == "error":
                    result.error = payload.get("message") or ""
                result.iterations = payload.get("iterations")
                usage = payload.get("usage") or {}
                result.prompt_tokens = usage.get("prompt_tokens")
                result.completion_tokens = usage.get("completion_tokens")
                result.total_tokens = usage.get("total_tokens")
                break
    except (ApiError, httpx.HTTPError, json.JSONDecodeError) as exc:
        result.status = result.status or "api-error"
        result.error = result.error or f"{type(exc).__name__}: {exc}"
    finally:
        timer.cancel()
    if cancelled.is_set():
        result.status = "timeout"
        result.error = f"no answer within {timeout:g} s (run cancelled)" + (
            f"; {result.error}" if result.error else ""
        )
    if not result.status:
        result.status, result.answer = "no-end", buffer
        result.error = result.error or "the event stream ended before done/error"
    result.wall = time.monotonic() - start
    result.ended = time.time()
    return result, last


ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|amp|lt|gt|quot|apos|nbsp);", re.IGNORECASE)
SCAFFOLDING = re.compile(r"^\s*#{1,4}\s*(question|step\s*\d+|answer|thought|observation)\b",
                         re.IGNORECASE | re.MULTILINE)  # fmt: skip


def run_task(client: Client, task: Task, model_pk: int | None, timeout: float) -> TaskResult:
    result = TaskResult(task.name, task.category, "fail")
    if task.skip:
        result.status, result.reason = "skipped", task.skip
        return result
    body: dict[str, Any] = {"title": f"agent_tasks: {task.name}"}
    if model_pk is not None:
        body["model"] = model_pk
    try:
        conversation = client.request("POST", "/api/conversations", json=body)
    except (ApiError, httpx.HTTPError) as exc:
        result.reason = f"could not create the conversation: {exc}"
        return result
    result.conversation_id = conversation["id"]
    after = 0
    for turn in task.turns:
        outcome, after = run_turn(client, conversation["id"], turn, after, timeout)
        result.turns.append(outcome)
        if turn.check is not None:
            outcome.checked = True
            ctx = CheckContext(turn.content, outcome.posted, outcome.ended)
            outcome.passed, outcome.check_reason = turn.check(outcome.answer, ctx)
        if outcome.status not in ("succeeded", "incomplete"):
            break  # a follow-up needs the answer before it
    reasons = []
    for number_, outcome in enumerate(result.turns, 1):
        prefix = f"message {number_}: " if len(task.turns) > 1 else ""
        if outcome.status not in ("succeeded", "incomplete"):
            reasons.append(f"{prefix}run {outcome.status}: {outcome.error or outcome.reason}")
        elif outcome.checked and not outcome.passed:
            reasons.append(prefix + outcome.check_reason)
        if task.no_tools and outcome.tool_calls:
            names = ", ".join(c.name for c in outcome.tool_calls)
            reasons.append(f"{prefix}called a tool ({names}) where none was needed")
        if ENTITY.search(outcome.answer):
            result.flags.append("html-entities")
        if SCAFFOLDING.search(outcome.answer):
            result.flags.append("prompt-scaffolding")
        if outcome.status == "incomplete":
            result.flags.append("incomplete")
        last = number_ == len(result.turns)
        if last and task.expects and all(c.name != task.expects for c in outcome.tool_calls):
            result.flags.append(f"no {task.expects} call")
    if len(result.turns) < len(task.turns):
        reasons.append("stopped before the last message")
    result.flags = sorted(set(result.flags))
    if reasons:
        result.reason = "; ".join(reasons)
    else:
        result.status = "pass"
        result.reason = "; ".join(t.check_reason for t in result.turns if t.checked)
    return result


# ------------------------------------------------------------------------------ output


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def one_line(text: str, limit: int = 220) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def print_task(result: TaskResult, width: int) -> None:
    if result.status == "skipped":
        print(f"SKIP {result.name:<{width}}  skipped: {result.reason}", flush=True)
        return
    turns = result.turns
    calls = [c.show() for t in turns for c in t.tool_calls]
    iterations = sum(t.iterations or 0 for t in turns)
    tokens = sum(t.total_tokens or 0 for t in turns)
    wall = sum(t.wall for t in turns)
    first = "/".join(_seconds(t.first_token) for t in turns)
    kept = "/".join(_seconds(t.first_kept_token) for t in turns)
    word = "/".join(_seconds(t.first_word) for t in turns)
    mark = "PASS" if result.status == "pass" else "FAIL"
    print(
        f"{mark} {result.name:<{width}}  iter {iterations}  tokens {tokens}  wall {wall:.1f}s  "
        f"first token {first} (kept {kept}, first word {word})",
        flush=True,
    )
    print(f"     tools: {'; '.join(calls) if calls else 'none'}", flush=True)
    for number_, turn in enumerate(turns, 1):
        label = f"answer {number_}" if len(turns) > 1 else "answer"
        print(f"     {label}: {one_line(turn.answer) or '(empty)'}", flush=True)
    print(f"     {'why' if mark == 'FAIL' else 'check'}: {result.reason}", flush=True)
    if result.flags:
        print(f"     flags: {', '.join(result.flags)}", flush=True)


def summarize(results: list[TaskResult]) -> dict[str, Any]:
    ran = [r for r in results if r.status != "skipped"]
    passed = [r for r in ran if r.status == "pass"]
    firsts = [t.first_token for r in ran for t in r.turns if t.first_token is not None]
    kept = [t.first_kept_token for r in ran for t in r.turns if t.first_kept_token is not None]
    word = [t.first_word for r in ran for t in r.turns if t.first_word is not None]
    messages = sum(len(r.turns) for r in ran)
    walls = [sum(t.wall for t in r.turns) for r in ran]
    return {
        "tasks": len(ran),
        "passed": len(passed),
        "skipped": len(results) - len(ran),
        "pass_rate": len(passed) / len(ran) if ran else 0.0,
        "messages": messages,
        "messages_with_answer_token": len(firsts),
        "median_first_token_s": statistics.median(firsts) if firsts else None,
        "max_first_token_s": max(firsts) if firsts else None,
        "median_first_kept_token_s": statistics.median(kept) if kept else None,
        "median_first_word_s": statistics.median(word) if word else None,
        "median_wall_s": statistics.median(walls) if walls else None,
        "total_wall_s": sum(walls),
        "by_category": {
            category: f"{sum(r.status == 'pass' for r in ran if r.category == category)}/"
            f"{sum(r.category == category for r in ran)}"
            for category in dict.fromkeys(r.category for r in ran)
        },
        "flags": {
            flag: sum(flag in r.flags for r in ran)
            for flag in sorted({f for r in ran for f in r.flags})
        },
    }


def print_summary(summary: dict[str, Any]) -> None:
    print("\n=== summary ===")
    print(
        f"passed {summary['passed']}/{summary['tasks']} ({summary['pass_rate']:.0%})"
        + (f", {summary['skipped']} skipped" if summary["skipped"] else "")
    )
    print(
        f"median time to first answer token: {_seconds(summary['median_first_token_s'])} "
        f"(max {_seconds(summary['max_first_token_s'])}; "
        f"{summary['messages_with_answer_token']} of {summary['messages']} messages had one); "
        f"first kept token {_seconds(summary['median_first_kept_token_s'])}, "
        f"first word {_seconds(summary['median_first_word_s'])}"
    )
    print(
        f"median wall per task {_seconds(summary['median_wall_s'])}, "
        f"total {summary['total_wall_s'] / 60:.1f} min"
    )
    print("by category: " + ", ".join(f"{k} {v}" for k, v in summary["by_category"].items()))
    if summary["flags"]:
        print("flags: " + ", ".join(f"{k} x{v}" for k, v in summary["flags"].items()))


# ------------------------------------------------------------------------------- serve


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str, timeout: float = 600, root: Path = ROOT) -> str:
    """``manage.py ARGS`` in checkout ``root``; its stdout (raises with its output on failure)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


CREATE_USER = """
import django, sys
django.setup()
from django.contrib.auth import get_user_model
get_user_model().objects.create_user(username=sys.argv[1], password=sys.argv[2])
"""


def _no_proxy(env: dict[str, str]) -> None:
    for key in ("NO_PROXY", "no_proxy"):
        hosts = [h for h in env.get(key, "").split(",") if h]
        env[key] = ",".join(dict.fromkeys([*hosts, "127.0.0.1", "localhost", "::1"]))


@contextlib.contextmanager
def serve(extra_env: dict[str, str], keep: bool, root: Path = ROOT) -> Iterator[tuple[str, str]]:
    """A throwaway agentsite on a free port with the bundled model: (base URL, token).

    ``root`` is the checkout whose code it runs (e.g. ``git archive`` of another commit,
    extracted: this venv's Python then imports that tree's packages first)."""
    work = Path(tempfile.mkdtemp(prefix="agent-tasks-"))
    dropped = ("DATABASE_URL", "REDIS_URL", "AGENTSITE_EXECUTION", "OPENAI_API_KEY",
               "OPENAI_BASE_URL", "AGENTSITE_MODEL", "SECRET_KEY")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        {
            "DEBUG": "true",
            "AGENTSITE_VAR_DIR": str(work / "var"),
            "SECRET_KEY": secrets.token_urlsafe(32),
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        }
    )
    _no_proxy(env)
    env.update(extra_env)
    server: subprocess.Popen[bytes] | None = None
    local_started = False
    ok = False
    try:
        print(f"serve: instance in {work}, code from {root}", flush=True)
        (work / "var").mkdir(parents=True, exist_ok=True)  # settings create nothing
        manage(env, "migrate", "--noinput", root=root)
        began = time.monotonic()
        seeded = manage(env, "seed_models", root=root)
        print("serve: " + seeded.strip().replace("\n", "\nserve: "), flush=True)
        print(f"serve: seed_models took {time.monotonic() - began:.1f}s", flush=True)
        username, password = "bench", secrets.token_urlsafe(16)
        subprocess.run(
            [sys.executable, "-c", CREATE_USER, username, password],
            cwd=root, env=env, check=True, timeout=120,
        )  # fmt: skip
        token = manage(env, "create_api_token", username, "--name", "agent_tasks", root=root)
        token = token.strip().splitlines()[-1]
        if "created provider 'local'" in seeded or "SmolLM2" in seeded:
            began = time.monotonic()
            started = manage(env, "local_model", "--start", root=root)
            print("serve: " + started.strip(), flush=True)
            local_started = True
            print(f"serve: local model server start took {time.monotonic() - began:.1f}s")
        port = free_port()
        log = (work / "server.log").open("wb")
        server = subprocess.Popen(
            [sys.executable, "-m", "agentsite.server", "-b", LOOPBACK, "-p", str(port),
             "agentsite.asgi:application"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base_url = f"http://{LOOPBACK}:{port}"
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"agentsite-server exited:\n{_tail(work / 'server.log')}")
            with contextlib.suppress(httpx.HTTPError):
                headers = {"Authorization": f"Bearer {token}"}
                ready = httpx.get(f"{base_url}/api/models", headers=headers, trust_env=False)
                if ready.status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"agentsite-server not up:\n{_tail(work / 'server.log')}")
            time.sleep(0.5)
        print(f"serve: agentsite-server at {base_url} (log {work / 'server.log'})", flush=True)
        yield base_url, token
        ok = True
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if local_started:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                manage(env, "local_model", "--stop", timeout=60, root=root)
        if keep or not ok:
            print(f"serve: kept {work}", flush=True)
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)


def _tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def make_token(username: str) -> str:
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    out = manage(env, "create_api_token", username, "--name", "agent_tasks")
    return out.strip().splitlines()[-1]


# -------------------------------------------------------------------------------- main


def pick_model(client: Client, wanted: str) -> tuple[int | None, str]:
    models = client.request("GET", "/api/models")["models"]
    if not wanted:
        default = next((m for m in models if m.get("is_default")), models[0] if models else None)
        return None, default["name"] if default else "(none configured)"
    for model in models:
        keys = {str(model["id"]), str(model.get("model_id", "")).lower(), model["name"].lower()}
        if wanted.lower() in keys:
            return model["id"], model["name"]
    names = ", ".join(f"{m['id']}: {m['name']}" for m in models) or "none"
    raise SystemExit(f"No model {wanted!r} for this user. Available: {names}")


def selected(names: list[str]) -> list[Task]:
    if not names:
        return TASKS
    wanted = [n.strip() for group in names for n in group.split(",") if n.strip()]
    known = {t.name: t for t in TASKS}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"Unknown task(s): {', '.join(unknown)}. Known: {', '.join(known)}")
    return [known[n] for n in wanted]


def run_suite(args: argparse.Namespace, base_url: str, token: str) -> int:
    client = Client(base_url, token)
    model_pk, model_name = pick_model(client, args.model)
    tools = [t.get("name") for t in client.request("GET", "/api/tools").get("tools", [])]
    tasks = selected(args.only)
    print(f"agent_tasks: {len(tasks)} tasks on {base_url}, model {model_name}")
    print(f"tools offered to this user: {', '.join(tools) or 'none'}; timeout {args.timeout:g}s")
    width = max(len(t.name) for t in tasks)
    results: list[TaskResult] = []
    started = time.time()
    for task in tasks:
        result = run_task(client, task, model_pk, args.timeout)
        results.append(result)
        print_task(result, width)
    summary = summarize(results)
    print_summary(summary)
    if args.json:
        report = {
            "base_url": base_url,
            "model": model_name,
            "tools": tools,
            "started": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
            "commit": _commit(args.serve_root if args.serve else ROOT),
            "timeout": args.timeout,
            "serve_env": args.serve_env,
            "serve_root": str(args.serve_root) if args.serve else None,
            "summary": summary,
            "results": [asdict(r) for r in results],
        }
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))
        print(f"results written to {args.json}")
    if args.record:
        score = {
            "model": model_name,
            "measured_on": dt.datetime.fromtimestamp(started, dt.UTC).date().isoformat(),
            "commit": args.commit or _commit(args.serve_root if args.serve else ROOT),
            "passed": summary["passed"],
            "tasks": summary["tasks"],
            "median_first_word_s": summary["median_first_word_s"],
            "by_category": summary["by_category"],
        }
        Path(args.record).write_text(json.dumps(score, indent=2) + "\n")
        print(f"score recorded in {args.record} (the chat page's notice shows it)")
    return 0


def _commit(root: Path) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=root, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return done.stdout.strip()
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, help="a running agentsite")
    parser.add_argument("--token", default=os.environ.get("AGENTSITE_TOKEN", ""),
                        help="a personal API token (default $AGENTSITE_TOKEN)")  # fmt: skip
    parser.add_argument("--make-token", metavar="USER",
                        help="create a token for USER with manage.py create_api_token")  # fmt: skip
    parser.add_argument("--serve", action="store_true",
                        help="start a throwaway instance with the bundled model")  # fmt: skip
    parser.add_argument("--serve-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the --serve instance")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the --serve folder")
    parser.add_argument("--serve-root", type=Path, default=ROOT, metavar="DIR",
                        help="the checkout whose code --serve runs (default this one)")  # fmt: skip
    parser.add_argument("--model", default="", help="model id, model_id or name (GET /api/models)")
    parser.add_argument("--only", action="append", default=[], help="task names, comma-separated")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per message")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--record",
        metavar="FILE",
        help=f"write the score the demo notice shows (for the bundled model: {SCORE_FILE})",
    )
    parser.add_argument("--commit", default="", help="the commit measured, for --record")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    args = parser.parse_args(argv)

    if args.list:
        for task in selected(args.only):
            turns = " | ".join(
                (f"[{t.mode}] " if t.mode else "") + t.content for t in task.turns
            )  # fmt: skip
            notes = ["no tool allowed"] if task.no_tools else []
            notes += [f"expects {task.expects}"] if task.expects else []
            notes += [f"skipped: {task.skip}"] if task.skip else []
            print(f"{task.name:<28} {task.category:<16} {turns}"
                  + (f"  ({'; '.join(notes)})" if notes else ""))  # fmt: skip
        return 0
    if args.serve:
        extra = {}
        for item in args.serve_env:
            key, sep, value = item.partition("=")
            if not sep:
                parser.error(f"--serve-env needs KEY=VALUE, not {item!r}")
            extra[key] = value
        with serve(extra, args.keep, args.serve_root.resolve()) as (base_url, token):
            return run_suite(args, base_url, token)
    token = args.token
    if args.make_token:
        token = make_token(args.make_token)
        print(f"created an API token for {args.make_token} (prefix {token[:8]}…)")
    if not token:
        parser.error(
            "a token is needed: --token (or AGENTSITE_TOKEN), --make-token USER, or --serve. "
            "Create one with `manage.py create_api_token USER` or on /settings/tokens/."
        )
    return run_suite(args, args.base_url, token)


if __name__ == "__main__":
    sys.exit(main())
