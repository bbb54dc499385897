"""agentsite's streaming figures beside Open WebUI's: same run, same machine, same LLM.

One timestamping scripted LLM serves both systems: the shared ``tsfake.py`` (from
shared/bench/openwebui, through :mod:`tsfake_tokens`, which only lets a message choose the
stream's length). Every streamed chunk carries its send time, ``[k=<i> t=<time.time()>]``,
so a client subtracts it from the time it received the token. Both systems are driven the
way their browser page drives them:

- agentsite: logged in, the message POSTed, the answer read from the conversation's
  websocket (HTML frames; every stamp in every frame is parsed, escaped or not, and each
  token counts when it is first seen); embedded mode (daphne on SQLite) and team mode
  (daphne + Celery worker, Redis, PostgreSQL);
- Open WebUI 0.12.4: its browser path (``sockbench.py``: the page's POST with a socket.io
  session, the answer as socket.io events), and its OpenAI-compatible API path
  (``bench.py``, SSE) as a second column.

"First token" (the issue's figure) is the first visible answer token minus the LLM's own
first token: received by the client minus sent by the LLM (its stamp ``[k=0 t=..]``), for
the call whose content became the answer (agentsite: the stamps of the saved assistant
message; an engine that calls the LLM twice streams the answer from the last call). Also
shown: the time from sending the message to that token, less the LLM's own time to its
first token (its request received -> that token sent: ``[rx=..]``), which adds the POST
and the run's start.
Server CPU is utime + stime from /proc of the server's process tree; CPU per conversation and
per token come from 20 concurrent conversations streaming 1 token and N tokens (README's
split). After every agentsite scenario the saved assistant messages are read from the
database and compared with what each websocket client accumulated.

    .venv/bin/python benchmarks/beside_openwebui.py [--quick] [--skip-openwebui]
        [--owui-dir /tmp/owui] [--owui-url http://127.0.0.1:8080] [--concurrency 200,500]
        [--tokens 300] [--rate 20]

Open WebUI is installed into a scratch folder (``--owui-dir``, with ``venv/``) as
shared/bench/openwebui/README.md says; it is started on a free port with a fresh data
folder (``--owui-url`` reuses a running one instead: its OpenAI connection is pointed at
this run's LLM for the run and restored afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import glob
import html
import importlib.metadata
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

import stream_latency  # noqa: E402 - benchmarks/ is the script's folder
from percentiles import pct  # noqa: E402

from tests.integration.stack import (  # noqa: E402
    LOOPBACK,
    Browser,
    Process,
    Stack,
    free_port,
    run_id_of,
    running_stack,
)

STAMP = re.compile(r"\[k=(\d+) t=(\d+\.\d+)\]")
RX = re.compile(r"\[rx=(\d+\.\d+)\]")
# The answer's streamed text where the frames have this shape (``#answer-N``, or the hidden
# markdown source ``#answer-src-N`` that the page renders): compared exactly with the saved
# message; without it the stamps alone are compared.
DELTA = re.compile(r'<span hx-swap-oob="beforeend:#answer(?:-src)?-\d+">(.*?)</span>', re.S)
FINISHED = re.compile(r'id="footer-\d+"')
TERMINAL = ("succeeded", "failed", "cancelled", "paused", "incomplete")
TICKS = os.sysconf("SC_CLK_TCK")
SHARED = ROOT.parent / "shared" / "bench" / "openwebui"
OWUI_EMAIL = "bench-admin@example.com"
OWUI_PASSWORD = "Bench-pass-4242!"
OWUI_MODEL = "tsfake"
BURST = 20  # conversations posted at once for the "20 concurrent" figures

TARGETS = {  # agentsite's, in ms / MB / s
    "first_1": 15.0,
    "first_20": 100.0,
    "p50_1": 2.0,
    "p99_1": 10.0,
    "p99_200": 250.0,  # issue 29: 200 streams at 20 tokens/s, team mode
    "rss": 150.0,
    "start": 3.0,
}


def log(text: str) -> None:
    print(text, flush=True)


# ----------------------------------------------------------------------- processes


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        if not Path(f"/proc/{current}").exists():
            continue
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                queue.extend(int(c) for c in children.read_text().split())
    return found


def tree_cpu(pid: int) -> float:
    """utime + stime (s) of a process and its live descendants, from /proc."""
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{member}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / TICKS


def tree_rss_mb(pid: int) -> float:
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, StopIteration):
            status = Path(f"/proc/{member}/status").read_text()
            line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
            total += int(line.split()[1])
    return total / 1024


def root_cpu(pid: int) -> float:
    """:func:`tree_cpu` plus the CPU of the root's children that exited (cutime + cstime:
    PostgreSQL's backends, say)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return tree_cpu(pid) + (int(fields[13]) + int(fields[14])) / TICKS
    return 0.0


# Where the processes started here are (callables: pids change on restart).
KNOWN: list[Callable[[], list[int]]] = []


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = values[:7]  # steal: not this machine's
    return (user + nice + system + irq + softirq) / TICKS


def ours() -> float:
    """CPU seconds of everything this benchmark started, and of itself."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)  # e.g. sockbench.py, finished
    total = own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime
    return total + sum(root_cpu(pid) for source in KNOWN for pid in source())


class Foreign:
    """CPU that other processes on the machine used during a scenario (their noise)."""

    def __init__(self) -> None:
        self.busy, self.ours, self.started = machine_busy(), ours(), time.monotonic()

    def seconds(self) -> float:
        return max(0.0, (machine_busy() - self.busy) - (ours() - self.ours))

    def share(self, other: float) -> float:
        """Of the machine's cores, the share ``other`` seconds took (0-1)."""
        elapsed = time.monotonic() - self.started
        return other / max(1e-9, elapsed * (os.cpu_count() or 1))


def listening_pid(port: int) -> int | None:
    """The process listening on a local TCP port (for a reused Open WebUI)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{parts[9]}]")
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd) in inodes:
                return int(fd.split("/")[2])
    return None


def stop_group(popen: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM to the process group we started, SIGKILL after ``timeout``."""
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    try:
        popen.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(5)


def wait_healthy(
    url: str, alive: Callable[[], bool], timeout: float = 300, started: float | None = None
) -> float:
    """Poll ``url`` every 50 ms until it answers 200; the seconds since ``started``."""
    started = time.monotonic() if started is None else started
    with httpx.Client(trust_env=False, timeout=2) as client:
        while time.monotonic() - started < timeout:
            with contextlib.suppress(httpx.HTTPError):
                if client.get(url).status_code == 200:
                    return time.monotonic() - started
            if not alive():
                raise RuntimeError(f"the server exited before {url} answered")
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout:.0f} s")


# ------------------------------------------------------------------------- the LLM


class TsFake:
    """The shared tsfake.py on a free port, one process for both systems."""

    def __init__(self, shared: Path, rate: float, work: Path) -> None:
        self.port = free_port()
        self.log = work / "tsfake-requests.jsonl"
        self.log.write_text("")
        self.output = (work / "tsfake.out").open("wb")
        args = [sys.executable, str(BENCH / "tsfake_tokens.py"), str(shared), str(self.port)]
        args += ["50", f"{1 / rate:.6f}"]
        env = {**os.environ, "TSFAKE_LOG": str(self.log), "PYTHONDONTWRITEBYTECODE": "1"}
        self.popen = subprocess.Popen(
            args, stdout=self.output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        wait_healthy(f"{self.url}/models", lambda: self.popen.poll() is None, timeout=30)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    def requests(self) -> int:
        return len(self.log.read_text().splitlines())

    def calls_since(self, start: int) -> tuple[int, int]:
        """(chat calls, streamed chat calls) logged after line ``start``."""
        lines = [json.loads(x) for x in self.log.read_text().splitlines()[start:]]
        chats = [x for x in lines if x.get("path", "").endswith("/chat/completions")]
        return len(chats), sum(1 for x in chats if x.get("stream"))

    def stop(self) -> None:
        stop_group(self.popen, 5)
        self.output.close()


# ------------------------------------------------------------------------ results


@dataclass
class Figures:
    """What one scenario measured, for either system."""

    label: str
    runs: int
    tokens: int
    first: list[float] = field(default_factory=list)  # s, first token's receipt - its send
    overhead: list[float] = field(default_factory=list)  # s, POST -> first token - LLM's own
    # s after the message was sent: its POST answered, the LLM asked (the answer's call)
    answered: list[float] = field(default_factory=list)
    asked: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # s, every token
    cpu: dict[str, float] = field(default_factory=dict)  # s, by server process
    errors: list[str] = field(default_factory=list)
    compared: int = 0  # answers compared with the saved message
    equal: int = 0
    by_text: int = 0  # of them compared as text (else by their stamps)
    calls: tuple[int, int] = (0, 0)  # LLM chat calls, of which streamed
    wall: float = 0.0
    foreign: float = 0.0  # CPU s used by processes not started here, during the scenario
    foreign_share: float = 0.0  # of the machine's cores
    client: float = 0.0  # CPU s of the websocket clients (this process)
    frames: int = 0  # websocket frames (agentsite) or socket.io events (Open WebUI) received

    @property
    def server_cpu(self) -> float:
        return sum(self.cpu.values())

    def line(self) -> str:
        def ms(values: list[float], q: float) -> str:
            return f"{pct(values, q) * 1e3:7.1f}" if values else "      -"

        calls = ""
        if self.calls[0]:
            calls = f"  LLM calls/run {self.calls[0] / self.runs:.1f} "
            calls += f"({self.calls[1] / self.runs:.1f} streamed)"
        saved = ""
        if self.compared:
            how = "text" if self.by_text == self.compared else f"{self.by_text} by text"
            saved = f"  saved==streamed {self.equal}/{self.compared} ({how})"
        errors = f"  ERRORS {len(self.errors)}: {'; '.join(self.errors[:3])}" if self.errors else ""
        noise = f"  other processes {self.foreign:.1f} CPU s ({self.foreign_share:.0%})"
        if self.client:
            noise = f"  clients {self.client:.1f} CPU s{noise}"
        if self.frames:
            noise = f"  frames/run {self.frames / self.runs:.1f}{noise}"
        return (
            f"  {self.label:44} first token p50 {ms(self.overhead, 50)} ms (delivery "
            f"{ms(self.first, 50).strip()})  token p50 "
            f"{ms(self.latencies, 50)} p99 {ms(self.latencies, 99)} ms  CPU "
            f"{self.server_cpu:6.2f} s  wall {self.wall:5.1f} s{noise}{calls}{saved}{errors}"
        )


def merged(label: str, parts: list[Figures]) -> Figures:
    out = Figures(label, sum(p.runs for p in parts), parts[0].tokens)
    for p in parts:
        out.first += p.first
        out.overhead += p.overhead
        out.answered += p.answered
        out.asked += p.asked
        out.latencies += p.latencies
        out.errors += p.errors
        out.compared += p.compared
        out.equal += p.equal
        out.by_text += p.by_text
        out.calls = (out.calls[0] + p.calls[0], out.calls[1] + p.calls[1])
        out.wall += p.wall
        out.foreign += p.foreign
        out.client += p.client
        out.frames += p.frames
        for k, v in p.cpu.items():
            out.cpu[k] = out.cpu.get(k, 0.0) + v
    out.foreign_share = out.foreign / max(1e-9, out.wall * (os.cpu_count() or 1))
    return out


def cpu_split(one: Figures, many: Figures) -> tuple[float, float]:
    """(CPU per conversation, CPU per token) in s, from 1-token and N-token batches."""
    per_conversation = one.server_cpu / max(1, one.runs)
    extra_tokens = many.runs * (many.tokens - 1)
    return per_conversation, (many.server_cpu - one.server_cpu * many.runs / one.runs) / max(
        1, extra_tokens
    )


# ----------------------------------------------------------------------- agentsite


@dataclass
class Stream:
    """What one websocket client saw of one run."""

    conversation_id: int
    run_id: int = 0
    posted: float = 0.0
    answered: float = 0.0  # the POST's response received
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)  # t -> (k, received)
    order: list[str] = field(default_factory=list)  # stamps' t in the order first seen
    text: list[str] = field(default_factory=list)  # the answer deltas, unescaped
    frames: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    error: str = ""


async def read_stream(ws: Any, stream: Stream) -> None:
    async for frame in ws:
        now = time.time()
        stream.frames += 1
        text = html.unescape(frame) if "&" in frame else frame
        for k, t in STAMP.findall(text):
            if t not in stream.seen:
                stream.seen[t] = (int(k), now)
                stream.order.append(t)
        stream.text += [html.unescape(x) for x in DELTA.findall(frame)]
        if FINISHED.search(frame) and "run-status" in frame:
            stream.finished.set()


class Agentsite:
    """One running stack (embedded or team) and a logged-in browser."""

    def __init__(self, stack: Stack, browser: Browser, llm: TsFake) -> None:
        self.stack = stack
        self.browser = browser
        self.llm = llm

    @property
    def servers(self) -> dict[str, Process]:
        return {
            k: p for k, p in self.stack.processes.items() if k == "daphne" or k.startswith("worker")
        }

    def _log_errors(self) -> dict[str, int]:
        return {
            name: len(re.findall(r"Traceback|OperationalError", p.text()))
            for name, p in self.servers.items()
        }

    def _query_in(self, sql: str, ids: list[int]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ", ".join(["%s"] * len(chunk))
            rows += self.stack.query(sql.format(ids=marks), *chunk)
        return rows

    async def scenario(
        self, label: str, *, runs: int, tokens: int, post_limit: int = 16, rate: float = 20
    ) -> Figures:
        """``runs`` conversations, a socket each, posted (``post_limit`` at a time), every
        answer awaited; then the saved answers compared with what the sockets received."""
        figures = Figures(label, runs, tokens)
        gather = stream_latency.gather_limited
        try:
            ids = await gather(8, [self.browser.new_conversation() for _ in range(runs)])
            sockets = await gather(16, [self.browser.socket(c).__aenter__() for c in ids])
        except Exception as exc:  # e.g. the database refused more connections
            figures.errors.append(f"setup failed: {type(exc).__name__}: {str(exc)[:160]}")
            return figures
        streams = [Stream(c) for c in ids]
        readers = [
            asyncio.ensure_future(read_stream(ws, s))
            for ws, s in zip(sockets, streams, strict=True)
        ]
        errors_before = self._log_errors()
        calls_before = self.llm.requests()
        cpu_before = {name: tree_cpu(p.pid) for name, p in self.servers.items()}
        foreign = Foreign()
        client = time.process_time()
        started = time.monotonic()

        async def post(stream: Stream) -> None:
            stream.posted = time.time()
            content = f"beside {label} [c{stream.conversation_id}] tsfake-tokens={tokens}"
            try:
                response = await self.browser.post(
                    f"/c/{stream.conversation_id}/messages/", {"content": content}
                )
                if response.status_code != 200:
                    stream.error = f"POST {response.status_code}"
                else:
                    stream.answered = time.time()
                    stream.run_id = run_id_of(response)
            except Exception as exc:
                stream.error = f"POST {type(exc).__name__}"
            if stream.error:
                stream.finished.set()

        try:
            await gather(post_limit, [post(s) for s in streams])
            expected = 10 + tokens / rate + runs * 0.1
            await self._wait_finished(streams, expected, budget=60 + tokens / rate + runs * 0.2)
        finally:
            figures.wall = time.monotonic() - started
            figures.client = time.process_time() - client
            figures.foreign = foreign.seconds()
            figures.foreign_share = foreign.share(figures.foreign)
            cpu_after = {name: tree_cpu(p.pid) for name, p in self.servers.items()}
            figures.cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
        figures.calls = self.llm.calls_since(calls_before)
        figures.frames = sum(s.frames for s in streams)
        await asyncio.to_thread(self._check, streams, figures)
        errors_after = self._log_errors()
        for name, count in errors_after.items():
            if count > errors_before.get(name, 0):
                figures.errors.append(f"{count - errors_before.get(name, 0)} errors in {name} log")
        return figures

    async def _wait_finished(self, streams: list[Stream], expected: float, budget: float) -> None:
        """Every run's last frame; after ``expected`` s the database is asked too: a run
        that ended there 3 s ago lost its last frame (no more waiting for it)."""
        waiting = [asyncio.ensure_future(s.finished.wait()) for s in streams]
        _done, pending = await asyncio.wait(waiting, timeout=expected)
        for task in pending:
            task.cancel()
        deadline = time.monotonic() + budget - expected
        ended_at: dict[int, float] = {}
        while time.monotonic() < deadline:
            left = [s for s in streams if not s.finished.is_set()]
            if not left:
                return
            ids = [s.run_id for s in left if s.run_id]
            if ids:
                rows = await asyncio.to_thread(
                    self._query_in,
                    "SELECT id, status FROM conversations_run WHERE id IN ({ids})",
                    ids,
                )
                now = time.monotonic()
                for run_id, status in rows:
                    if status in TERMINAL:
                        ended_at.setdefault(run_id, now)
                if all(now - ended_at.get(s.run_id, now + 1) > 3 for s in left):
                    return
            await asyncio.sleep(1.0)

    def _check(self, streams: list[Stream], figures: Figures) -> None:
        """Latencies of the answer's tokens; the saved answers against the streamed ones."""
        ids = [s.run_id for s in streams if s.run_id]
        saved: dict[int, str] = {}
        statuses: dict[int, str] = {}
        for _attempt in range(3):
            saved = dict(
                self._query_in(
                    "SELECT run_id, content FROM conversations_message "
                    "WHERE role = 'assistant' AND run_id IN ({ids})",
                    ids,
                )
            )
            statuses = dict(
                self._query_in("SELECT id, status FROM conversations_run WHERE id IN ({ids})", ids)
            )
            if len(saved) == len(ids) and all(v in TERMINAL for v in statuses.values()):
                break
            time.sleep(2)
        problems: dict[str, int] = {}

        def problem(kind: str) -> None:
            problems[kind] = problems.get(kind, 0) + 1

        for s in streams:
            if s.error:
                problem(s.error)
                continue
            if not s.finished.is_set():
                problem("no last frame")
            status = statuses.get(s.run_id, "missing")
            if status != "succeeded":
                problem(f"run {status}")
            answer = saved.get(s.run_id)
            if answer is None:
                problem("no saved answer")
                stamps = self._last_call(s)
            else:
                stamps = [t for _k, t in STAMP.findall(answer)]
                if len(stamps) != figures.tokens:
                    problem(f"saved answer has {len(stamps)}/{figures.tokens} tokens")
                figures.compared += 1
                if s.text:
                    figures.by_text += 1
                    same = "".join(s.text).strip() == answer.strip()
                else:  # the frames changed shape: compare the tokens seen, in order
                    same = [t for t in s.order if t in set(stamps)] == stamps
                figures.equal += same
                if not same:
                    problem("streamed != saved")
            missing = [t for t in stamps if t not in s.seen]
            if missing:
                problem("tokens never shown")
            figures.latencies += [s.seen[t][1] - float(t) for t in stamps if t in s.seen]
            first = [t for t in stamps if t in s.seen and s.seen[t][0] == 0]
            if first:
                shown, sent = s.seen[first[0]][1], float(first[0])
                figures.first.append(shown - sent)
                rx = RX.findall(answer or "".join(s.text))
                if rx:  # the LLM's own time to this token: request received -> token sent
                    figures.overhead.append(shown - s.posted - (sent - float(rx[0])))
                    figures.asked.append(float(rx[0]) - s.posted)
            if s.answered:
                figures.answered.append(s.answered - s.posted)
        figures.errors += [f"{n} x {kind}" for kind, n in sorted(problems.items())]

    @staticmethod
    def _last_call(stream: Stream) -> list[str]:
        """Without a saved answer: the stamps of the last call seen (k restarts per call)."""
        starts = [t for t in stream.order if stream.seen[t][0] == 0]
        if not starts:
            return list(stream.order)
        last = max(starts, key=float)
        return [t for t in stream.order if float(t) >= float(last)]


def restart_timed(stack: Stack, name: str) -> float:
    """Stop a server and start it again: seconds to its first healthy response (daphne:
    the login page answers 200; a worker: its "ready." line)."""
    process = stack.processes[name]
    process.stop()
    if name.startswith("worker"):
        before = process.text().count(" ready.")
        started = time.monotonic()
        process.restart()
        while process.text().count(" ready.") <= before:
            if not process.alive() or time.monotonic() - started > 120:
                raise RuntimeError(f"{name} did not become ready:\n{process.tail()}")
            time.sleep(0.05)
        return time.monotonic() - started
    time.sleep(0.5)  # the port's listener is gone
    started = time.monotonic()
    process.restart()
    url = f"{stack.server_urls[name]}/accounts/login/"
    return wait_healthy(url, process.alive, 120, started)


# ---------------------------------------------------------------------- Open WebUI


class OpenWebUI:
    """Open WebUI started here (free port, fresh data folder) or reused (``url``)."""

    def __init__(
        self, owui_dir: Path, shared: Path, llm: TsFake, work: Path, url: str = ""
    ) -> None:
        self.dir = owui_dir
        self.shared = shared
        self.llm = llm
        self.work = work
        self.python = owui_dir / "venv" / "bin" / "python"
        self.reused = bool(url)
        self.popen: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self.port = int(url.rsplit(":", 1)[1].split("/")[0]) if url else free_port()
        self.base = url.rstrip("/") if url else f"http://{LOOPBACK}:{self.port}"
        self.data = work / "owui-data"
        self.log = work / "owui.log"
        self.tokens_file = work / "owui-tokens.json"
        self.tokens: list[str] = []
        self.first_start = self.start_time = float("nan")
        self.idle_rss = float("nan")
        self.version = "?"
        self.restore: dict[str, Any] | None = None
        self.http = httpx.Client(base_url=self.base, trust_env=False, timeout=60)

    # -- lifecycle

    def env(self) -> dict[str, str]:
        """The shared owui_env.sh (offline, OpenAI connection on), on a clean environment;
        this run's LLM, port and data folder."""
        script = f'set -a; source "{self.shared}/owui_env.sh"; env -0'
        base = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        out = subprocess.run(
            ["bash", "-c", script],
            env={**base, "OWUI": str(self.dir)},
            capture_output=True,
            check=True,
        ).stdout.decode()
        env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
        env.update(
            DATA_DIR=str(self.data),
            OPENAI_API_BASE_URL=self.llm.url,
            CORS_ALLOW_ORIGIN=self.base,
            PYTHONDONTWRITEBYTECODE="1",
        )
        return env

    def start(self) -> float:
        self.data.mkdir(exist_ok=True)
        env = self.env()
        command = [str(self.dir / "venv" / "bin" / "open-webui"), "serve"]
        command += ["--host", LOOPBACK, "--port", str(self.port)]
        started = time.monotonic()
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                command,
                cwd=self.data,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        popen = self.popen
        try:
            return wait_healthy(f"{self.base}/health", lambda: popen.poll() is None, 300, started)
        except Exception:
            raise RuntimeError(
                f"Open WebUI did not start:\n{self.log.read_text()[-3000:]}"
            ) from None

    def stop(self) -> None:
        if self.popen is not None:
            stop_group(self.popen)
            self.popen = None

    @property
    def pid(self) -> int:
        if self.popen is not None:
            return self.popen.pid
        if self._pid is None:  # a reused server: found once (scanning /proc is slow)
            self._pid = listening_pid(self.port)
        if self._pid is None:
            raise RuntimeError(f"no local process listens on port {self.port}")
        return self._pid

    def pids(self) -> list[int]:
        if self.popen is not None:
            return [self.popen.pid] if self.popen.poll() is None else []
        if self.reused and self._pid is not None and Path(f"/proc/{self._pid}").exists():
            return [self._pid]
        return []

    def up(self) -> None:
        """Started (first start on a fresh data folder, then a timed restart) or reused;
        users and their tokens; the model served by this run's LLM."""
        if not self.reused:
            log("starting Open WebUI (fresh data folder) ...")
            self.first_start = self.start()
            log(f"  first start (creates its database): healthy after {self.first_start:.1f} s")
        self.tokens = [self._user(0)]
        if self.reused:
            self._point_at_llm()
        self.tokens += [self._user(i) for i in range(1, BURST)]
        self.tokens_file.write_text(json.dumps(self.tokens))
        if not self.reused:
            self.stop()
            time.sleep(1)
            self.start_time = self.start()
            time.sleep(3)
            self.idle_rss = tree_rss_mb(self.pid)
            log(
                f"  restart: healthy after {self.start_time:.1f} s, idle RSS "
                f"{self.idle_rss:.0f} MB (3 s later)"
            )
        self.version = str(self.http.get("/api/version").json().get("version"))
        models = self.http.get("/api/models", headers=self._auth(0)).json()["data"]
        if not any(m["id"] == OWUI_MODEL for m in models):
            raise RuntimeError(
                f"Open WebUI does not list {OWUI_MODEL}: {[m['id'] for m in models]}"
            )

    def down(self) -> None:
        if self.restore is not None:
            with contextlib.suppress(httpx.HTTPError):
                self.http.post("/openai/config/update", json=self.restore, headers=self._auth(0))
        self.stop()
        self.http.close()

    def _auth(self, index: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[index]}"}

    def _user(self, index: int) -> str:
        """A JWT for bench user ``index`` (0: the admin, signed up first)."""
        email = OWUI_EMAIL if index == 0 else f"bench-user-{index}@example.com"
        form = {"email": email, "password": OWUI_PASSWORD}
        if index == 0:
            response = self.http.post("/api/v1/auths/signup", json={"name": "bench", **form})
        else:
            body = {"name": f"bench {index}", "role": "admin", **form}  # admins see the model
            response = self.http.post("/api/v1/auths/add", json=body, headers=self._auth(0))
        if response.status_code != 200:  # a reused instance: the user exists
            response = self.http.post("/api/v1/auths/signin", json=form)
        if response.status_code != 200:
            raise RuntimeError(
                f"Open WebUI user {email}: {response.status_code} {response.text[:200]} "
                f"(a reused instance needs the admin {OWUI_EMAIL} / {OWUI_PASSWORD})"
            )
        return response.json()["token"]

    def _point_at_llm(self) -> None:
        current = self.http.get("/openai/config", headers=self._auth(0)).json()
        self.restore = {
            k: current[k]
            for k in (
                "ENABLE_OPENAI_API",
                "OPENAI_API_BASE_URLS",
                "OPENAI_API_KEYS",
                "OPENAI_API_CONFIGS",
            )
        }
        body = {
            "ENABLE_OPENAI_API": True,
            "OPENAI_API_BASE_URLS": [self.llm.url],
            "OPENAI_API_KEYS": ["sk-fake"],
            "OPENAI_API_CONFIGS": {},
        }
        self.http.post("/openai/config/update", json=body, headers=self._auth(0)).raise_for_status()

    # -- measuring, with the shared scripts

    async def sock(self, label: str, *, streams: int, concurrency: int, tokens: int) -> Figures:
        """The browser path: sockbench.py (one socket.io session per user)."""
        args = ["sockbench.py", "--base", self.base, "--tokens", str(self.tokens_file)]
        args += ["--n", str(tokens), "--max-tokens"]
        return await self._run(label, args, streams, concurrency, tokens)

    async def api(self, label: str, *, streams: int, concurrency: int, tokens: int) -> Figures:
        """The OpenAI-compatible API path: bench.py (SSE)."""
        args = ["bench.py", "--url", f"{self.base}/api/chat/completions"]
        args += ["--token", self.tokens[0], "--model", OWUI_MODEL, "--max-tokens", str(tokens)]
        return await self._run(label, args, streams, concurrency, tokens)

    async def _run(
        self, label: str, args: list[str], streams: int, concurrency: int, tokens: int
    ) -> Figures:
        figures = Figures(label, streams, tokens)
        out = self.work / f"owui-{re.sub(r'[^a-z0-9]+', '-', label.lower())}.json"
        command = [str(self.python), *args, "--streams", str(streams)]
        command += ["--concurrency", str(concurrency), "--label", label, "--out", str(out)]
        command += ["--pid", str(self.pid)]
        # the scripts' warm-up streams are as long as the measured ones: only for short ones
        command += ["--warmup", "1" if tokens <= BURST else "0"]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_PROXY": "*", "no_proxy": "*"}
        env.pop("VIRTUAL_ENV", None)
        foreign = Foreign()
        started = time.monotonic()
        done = await asyncio.to_thread(
            subprocess.run,
            command,
            cwd=self.shared,
            env=env,
            capture_output=True,
            text=True,
            timeout=120 + streams * (tokens * 0.1 + 5),
            check=False,
        )
        figures.wall = time.monotonic() - started
        figures.foreign = foreign.seconds()
        figures.foreign_share = foreign.share(figures.foreign)
        if done.returncode != 0 or not out.exists():
            figures.errors.append(f"{args[0]} exited {done.returncode}: {done.stderr[-300:]}")
            return figures
        data = json.loads(out.read_text())
        summary, records = data["summary"], data["raw"]
        figures.cpu = {"open-webui": sum(v["cpu_s"] for v in summary.get("cpu", {}).values())}
        problems: dict[str, int] = {}
        for record in records:
            figures.latencies += record["lat"]
            first = [lat for k, lat in zip(record["ks"], record["lat"], strict=True) if k == 0]
            figures.first += first[:1]
            if first and "rx_delay" in record:  # = POST -> shown - (rx -> sent)
                figures.overhead.append(record["rx_delay"] + first[0])
                figures.asked.append(record["rx_delay"])
            if "post_ms" in record:
                figures.answered.append(record["post_ms"] / 1000)
            if record.get("timeout"):
                problems["timeout"] = problems.get("timeout", 0) + 1
            if record.get("status") != 200:
                kind = f"status {record.get('status')}"
                problems[kind] = problems.get(kind, 0) + 1
            if len(set(record["ks"])) < tokens:
                problems["tokens missing"] = problems.get("tokens missing", 0) + 1
        figures.errors += [f"{n} x {kind}" for kind, n in sorted(problems.items())]
        figures.frames = sum(r.get("events", 0) for r in records)
        return figures


# --------------------------------------------------------------------------- phases


@dataclass
class Plan:
    alone: int  # conversations, one at a time, for the first-token figure
    alone_tokens: int
    bursts: int  # rounds of 20 concurrent conversations
    burst_tokens: int
    streams: int  # conversations, one at a time, for the per-token figure
    stream_tokens: int
    splits: int  # rounds of the CPU split (20 x 1 token, 20 x N tokens)
    split_tokens: int
    levels: list[int]  # team mode's concurrent streams
    level_tokens: int
    rate: float


@dataclass
class Results:
    embedded: dict[str, Figures] = field(default_factory=dict)
    team: dict[str, Figures] = field(default_factory=dict)
    sock: dict[str, Figures] = field(default_factory=dict)
    api: dict[str, Figures] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)  # s to healthy, by server
    rss: dict[str, float] = field(default_factory=dict)  # MB idle, by server
    rss_after: dict[str, float] = field(default_factory=dict)  # MB after the runs
    notes: list[str] = field(default_factory=list)


def blocks(total: int, size: int) -> Iterator[int]:
    while total > 0:
        yield min(size, total)
        total -= size


async def measure_agentsite(
    mode: str,
    stack: Stack,
    llm: TsFake,
    owui: OpenWebUI | None,
    plan: Plan,
    results: Results,
) -> None:
    """Every scenario of one mode; in embedded mode Open WebUI's, interleaved."""
    table = results.embedded if mode == "embedded" else results.team
    rate = plan.rate
    async with Browser(stack.base_url) as browser:
        await browser.login()
        site = Agentsite(stack, browser, llm)
        log(f"{mode}: warm-up")
        log((await site.scenario(f"{mode} warm-up", runs=2, tokens=5, rate=rate)).line())
        if owui is not None:
            log((await owui.sock("owui warm-up", streams=2, concurrency=1, tokens=5)).line())
            log((await owui.api("owui api warm-up", streams=2, concurrency=1, tokens=5)).line())

        def keep(where: dict[str, Figures], key: str, parts: list[Figures], label: str) -> None:
            where[key] = merged(label, parts)
            log(where[key].line())

        # 1. first token, one conversation at a time
        ours, sock, api = [], [], []
        for size in blocks(plan.alone, 5):
            for _ in range(size):
                ours.append(
                    await site.scenario(
                        f"{mode} alone", runs=1, tokens=plan.alone_tokens, rate=rate
                    )
                )
            if owui is not None:
                sock.append(
                    await owui.sock(
                        "owui sock alone", streams=size, concurrency=1, tokens=plan.alone_tokens
                    )
                )
                api.append(
                    await owui.api(
                        "owui api alone", streams=size, concurrency=1, tokens=plan.alone_tokens
                    )
                )
        keep(table, "alone", ours, f"{mode}: first token, 1 conversation")
        if sock:
            keep(results.sock, "alone", sock, "Open WebUI browser: first token, 1 conversation")
            keep(results.api, "alone", api, "Open WebUI API: first token, 1 conversation")
        # 1. first token, 20 concurrent conversations (all posted at once)
        ours, sock, api = [], [], []
        for _ in range(plan.bursts):
            ours.append(
                await site.scenario(
                    f"{mode} burst",
                    runs=BURST,
                    tokens=plan.burst_tokens,
                    post_limit=BURST,
                    rate=rate,
                )
            )
            if owui is not None:
                sock.append(
                    await owui.sock(
                        "owui sock burst",
                        streams=BURST,
                        concurrency=BURST,
                        tokens=plan.burst_tokens,
                    )
                )
                api.append(
                    await owui.api(
                        "owui api burst", streams=BURST, concurrency=BURST, tokens=plan.burst_tokens
                    )
                )
        keep(table, "burst", ours, f"{mode}: first token, {BURST} concurrent")
        if sock:
            keep(
                results.sock, "burst", sock, f"Open WebUI browser: first token, {BURST} concurrent"
            )
            keep(results.api, "burst", api, f"Open WebUI API: first token, {BURST} concurrent")
        # 2. per-token delay, one conversation streaming
        ours, sock, api = [], [], []
        for _ in range(plan.streams):
            ours.append(
                await site.scenario(f"{mode} stream", runs=1, tokens=plan.stream_tokens, rate=rate)
            )
            if owui is not None:
                sock.append(
                    await owui.sock(
                        "owui sock stream", streams=1, concurrency=1, tokens=plan.stream_tokens
                    )
                )
                api.append(
                    await owui.api(
                        "owui api stream", streams=1, concurrency=1, tokens=plan.stream_tokens
                    )
                )
        keep(table, "stream", ours, f"{mode}: 1 conversation, {plan.stream_tokens} tokens")
        if sock:
            where = f"1 conversation, {plan.stream_tokens} tokens"
            keep(results.sock, "stream", sock, f"Open WebUI browser: {where}")
            keep(results.api, "stream", api, f"Open WebUI API: {where}")
        # 4. CPU split: 20 concurrent x 1 token, 20 concurrent x N tokens
        one, many, sock_one, sock_many = [], [], [], []
        for _ in range(plan.splits):
            one.append(
                await site.scenario(
                    f"{mode} split 1", runs=BURST, tokens=1, post_limit=BURST, rate=rate
                )
            )
            if owui is not None:
                sock_one.append(
                    await owui.sock("owui sock split 1", streams=BURST, concurrency=BURST, tokens=1)
                )
            many.append(
                await site.scenario(
                    f"{mode} split N",
                    runs=BURST,
                    tokens=plan.split_tokens,
                    post_limit=BURST,
                    rate=rate,
                )
            )
            if owui is not None:
                sock_many.append(
                    await owui.sock(
                        "owui sock split N",
                        streams=BURST,
                        concurrency=BURST,
                        tokens=plan.split_tokens,
                    )
                )
        keep(table, "split1", one, f"{mode}: {BURST} concurrent x 1 token")
        keep(table, "splitN", many, f"{mode}: {BURST} concurrent x {plan.split_tokens} tokens")
        if sock_one:
            keep(results.sock, "split1", sock_one, f"Open WebUI browser: {BURST} x 1 token")
            keep(
                results.sock,
                "splitN",
                sock_many,
                f"Open WebUI browser: {BURST} x {plan.split_tokens} tokens",
            )
        # 3. team mode under load
        if mode == "team":
            for level in plan.levels:
                figures = await site.scenario(
                    f"team {level} concurrent", runs=level, tokens=plan.level_tokens, rate=rate
                )
                table[f"level{level}"] = figures
                log(figures.line())


def agentsite_phase(
    mode: str,
    llm: TsFake,
    owui: OpenWebUI | None,
    plan: Plan,
    results: Results,
    workers: int = 1,
) -> None:
    # Each worker process takes up to its thread count of runs (prefetch 1): with several,
    # a burst spreads over them.
    most = max([8, BURST, *plan.levels])
    threads = -(-most // workers) + 10 if mode == "team" else 8
    extra = provider_setup(llm.url)
    started = time.monotonic()
    log(f"starting agentsite, {mode} mode ...")
    with running_stack(
        mode=mode,
        concurrency=threads,
        workers=workers if mode == "team" else 1,
        private_postgres=mode == "team",
        extra_env=stream_latency.PRODUCTION_ENV,
        setup_extra=extra,
    ) as stack:

        def pids() -> list[int]:
            found = [p.pid for p in stack.processes.values() if p.alive()]
            if stack.database is not None and stack.database.server is not None:
                found.append(stack.database.server.pid)  # a private PostgreSQL cluster
            return found

        KNOWN.append(pids)
        try:
            origin = stack.database.origin if stack.database else "SQLite"
            log(f"  stack up in {time.monotonic() - started:.1f} s (database: {origin})")
            names = ["daphne", *(w for w in stack.processes if w.startswith("worker"))]
            for name in names:
                seconds = restart_timed(stack, name)
                results.starts[f"{mode} {name}"] = seconds
                log(f"  {name} restarted: healthy after {seconds:.2f} s")
            time.sleep(3)
            for name in names:
                results.rss[f"{mode} {name}"] = tree_rss_mb(stack.processes[name].pid)
            log(
                "  idle RSS: "
                + ", ".join(f"{n} {results.rss[f'{mode} {n}']:.0f} MB" for n in names)
            )
            asyncio.run(measure_agentsite(mode, stack, llm, owui, plan, results))
            for name in names:
                results.rss_after[f"{mode} {name}"] = tree_rss_mb(stack.processes[name].pid)
            if owui is not None:
                results.rss_after["owui"] = tree_rss_mb(owui.pid)
        finally:
            KNOWN.remove(pids)


def provider_setup(llm_url: str) -> str:
    """Set-up code run by the stack: its provider talks to this run's tsfake."""
    return (
        "from llms.models import Provider\n"
        f"Provider.objects.filter(name='scripted').update(base_url={llm_url!r})\n"
    )


# ------------------------------------------------------------------------- printing


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.{digits}f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or ours != ours or theirs != theirs or theirs <= 0:
        return "-"
    return f"{ours / theirs:.2f}x"


def verdict(value: float | None, limit: float | None, theirs: float | None = None) -> str:
    if value is None or value != value or limit is None:
        return ""
    ok = value < limit and (theirs is None or theirs != theirs or value < theirs)
    beside = " and < Open WebUI" if theirs is not None else ""
    return f"< {limit:g}{beside}: {'ok' if ok else 'MISSED'}"


def p(figures: Figures | None, q: float, what: str = "latencies") -> float | None:
    if figures is None:
        return None
    values = getattr(figures, what)
    return pct(values, q) * 1e3 if values else None


def print_table(results: Results, plan: Plan) -> None:
    rows: list[tuple[str, str, str, str, str, str]] = []

    def row(name: str, ours: Any, sock: Any = None, api: Any = None, target: str = "") -> None:
        def cell(x: Any) -> str:
            return x if isinstance(x, str) else fmt(x)

        r = ratio(ours, sock) if not isinstance(ours, str) and not isinstance(sock, str) else "-"
        rows.append(
            (
                name,
                cell(ours),
                cell(sock) if sock is not None else "-",
                r,
                cell(api) if api is not None else "-",
                target,
            )
        )

    s, a = results.sock, results.api
    for mode in ("embedded", "team"):
        t = results.embedded if mode == "embedded" else results.team
        if not t:
            continue
        for key, what, limit in (
            ("alone", "1 conv", "first_1"),
            ("burst", f"{BURST} concurrent", "first_20"),
        ):
            # The figure the issue sets: the first answer token on the page minus the
            # moment the LLM sent it.
            ours, theirs = p(t.get(key), 50, "first"), p(s.get(key), 50, "first")
            row(
                f"1. first answer token minus the LLM's, p50, {what} [ms] ({mode})",
                ours,
                theirs,
                p(a.get(key), 50, "first"),
                verdict(ours, TARGETS[limit], theirs),
            )
            row(
                f"   (info) send to first token, less the LLM's time, p50, {what} [ms] ({mode})",
                p(t.get(key), 50, "overhead"),
                p(s.get(key), 50, "overhead"),
                p(a.get(key), 50, "overhead"),
            )
    for mode in ("embedded", "team"):
        t = results.embedded if mode == "embedded" else results.team
        if not t:
            continue
        for q, key in ((50, "p50_1"), (99, "p99_1")):
            ours = p(t.get("stream"), q)
            row(
                f"2. per-token delay p{q}, 1 conv [ms] ({mode})",
                ours,
                p(s.get("stream"), q),
                p(a.get("stream"), q),
                verdict(ours, TARGETS[key]),
            )
        row(
            f"   (info) per-token p50/p99, {BURST} conc. [ms] ({mode})",
            f"{fmt(p(t.get('burst'), 50))} / {fmt(p(t.get('burst'), 99))}",
            f"{fmt(p(s.get('burst'), 50))} / {fmt(p(s.get('burst'), 99))}",
            f"{fmt(p(a.get('burst'), 50))} / {fmt(p(a.get('burst'), 99))}",
        )
    team = results.team
    for level in plan.levels:
        f = team.get(f"level{level}")
        if f is None:
            continue
        ours = p(f, 99) if f.latencies else None
        row(
            f"3. team, {level} streams: p99 token delay [ms]",
            ours,
            "n/a",
            "n/a",
            verdict(ours, TARGETS["p99_200"]) if level == 200 else "",
        )
        row(
            f"3. team, {level} streams: errors",
            f"{len(f.errors)}",
            "n/a",
            "n/a",
            "0: " + ("ok" if not f.errors else "MISSED"),
        )
        row(
            f"3. team, {level} streams: streamed == saved",
            f"{f.equal}/{level}",
            "n/a",
            "n/a",
            f"{level}/{level}: " + ("ok" if f.equal == level else "MISSED"),
        )
    sock_split = (s.get("split1"), s.get("splitN"))
    theirs_conv = theirs_token = None
    if all(sock_split):
        theirs_conv, theirs_token = cpu_split(*sock_split)  # type: ignore[arg-type]
    for mode in ("embedded", "team"):
        t = results.embedded if mode == "embedded" else results.team
        if "split1" not in t:
            continue
        conv, token = cpu_split(t["split1"], t["splitN"])
        servers = "daphne" if mode == "embedded" else "daphne + worker"
        row(
            f"4. server CPU per token [ms] ({mode}: {servers})",
            token * 1e3,
            theirs_token * 1e3 if theirs_token is not None else None,
        )
        row(
            f"4. server CPU per conversation [ms] ({mode})",
            conv * 1e3,
            theirs_conv * 1e3 if theirs_conv is not None else None,
        )
    owui_rss = results.rss.get("owui")
    owui_start = results.starts.get("owui")
    for key, value in results.rss.items():
        if key == "owui":
            continue
        row(
            f"5. idle RSS [MB] ({key})",
            value,
            owui_rss,
            None,
            verdict(value, TARGETS["rss"]) if "daphne" in key else "",
        )
    for key, value in results.starts.items():
        if key == "owui":
            continue
        what = "start to first healthy response" if "daphne" in key else "start to ready"
        row(
            f"5. {what} [s] ({key})",
            value,
            owui_start,
            None,
            verdict(value, TARGETS["start"]) if "daphne" in key else "",
        )

    headers = ("figure", "agentsite", "Open WebUI", "ratio", "OWUI API", "agentsite target")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = " | ".join(
        h.ljust(w) if i in (0, 5) else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    log("")
    log(line)
    log("-" * len(line))
    for r in rows:
        log(
            " | ".join(
                c.ljust(w) if i in (0, 5) else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    log("")
    log("Open WebUI = its browser path (socket.io, sockbench.py); OWUI API = its OpenAI-compatible")
    log("SSE path (bench.py); ratio = agentsite / Open WebUI browser path. Team rows have the same")
    log("Open WebUI figure beside them: it has no team mode. Percentiles by nearest rank.")
    log("First token = (message sent -> first answer token shown) - (LLM: request received ->")
    log("first token sent); its delivery alone = first token shown - sent by the LLM.")


def print_details(results: Results) -> None:
    log("")
    log("Every scenario (merged repeats):")
    for where in (results.embedded, results.team, results.sock, results.api):
        for figures in where.values():
            log(figures.line())
            if figures.overhead:
                log(
                    f"  {'':44} first token p90 {pct(figures.overhead, 90) * 1e3:.1f} ms, max "
                    f"{max(figures.overhead) * 1e3:.1f} ms (n={len(figures.overhead)}); "
                    f"its delivery p90 {pct(figures.first, 90) * 1e3:.1f} ms"
                )
                stages = [("POST answered", figures.answered), ("LLM asked", figures.asked)]
                log(
                    f"  {'':44} p50 ms after the message was sent: "
                    + ", ".join(f"{k} {pct(v, 50) * 1e3:.1f}" for k, v in stages if v)
                )
    if results.rss_after:
        log(
            "RSS after the runs: "
            + ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(results.rss_after.items()))
        )
    for note in results.notes:
        log(f"note: {note}")


def header(args: argparse.Namespace, plan: Plan) -> None:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    changed = len(git("status", "--porcelain").splitlines())
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    log("agentsite beside Open WebUI: streaming figures, same run, same machine, same LLM")
    log(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S} UTC")
    log(
        f"machine: nproc {os.cpu_count()}, {cpu_model}, load average {os.getloadavg()[0]:.2f} "
        f"at start; {platform.platform()}"
    )
    log(
        f"agentsite {git('rev-parse', '--short', 'HEAD')}"
        + (f" + {changed} uncommitted changes in the work tree" if changed else "")
        + f"; Python {platform.python_version()}, Django {version('django')}, channels "
        f"{version('channels')}, daphne {version('daphne')}, Celery {version('celery')}"
    )
    log(
        "method: one tsfake.py (shared/bench/openwebui) serves both systems at "
        f"{plan.rate:g} tokens/s per stream, each chunk stamped with its send time; every "
        "server, the LLM and all clients share this machine's CPUs."
    )
    log(
        f"  first token: {plan.alone} conversations one at a time ({plan.alone_tokens} tokens), "
        f"{plan.bursts} rounds of {BURST} posted at once ({plan.burst_tokens} tokens); per-token: "
        f"{plan.streams} x 1 conversation of {plan.stream_tokens} tokens; CPU: {plan.splits} "
        f"rounds of {BURST} x 1 and {BURST} x {plan.split_tokens} tokens; team: "
        f"{', '.join(map(str, plan.levels)) or 'no'} concurrent streams of {plan.level_tokens} "
        "tokens. Systems interleaved scenario by scenario (embedded mode with Open WebUI)."
    )


# ----------------------------------------------------------------------------- main


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: the finally blocks stop what was started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no 500 streams")
    parser.add_argument("--skip-openwebui", action="store_true", help="agentsite's column only")
    parser.add_argument(
        "--owui-dir",
        type=Path,
        default=Path("/tmp/owui"),
        help="the scratch folder Open WebUI is installed in (venv/)",
    )
    parser.add_argument("--owui-url", default="", help="reuse a running Open WebUI")
    parser.add_argument(
        "--shared",
        type=Path,
        default=SHARED,
        help="the folder of tsfake.py, sockbench.py, bench.py, owui_env.sh",
    )
    parser.add_argument(
        "--concurrency",
        default=None,
        help="team mode's concurrent streams (default 200,500; --quick: 200)",
    )
    parser.add_argument("--tokens", type=int, default=300, help="tokens per team-mode stream")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second per stream")
    parser.add_argument("--modes", default="embedded,team")
    parser.add_argument(
        "--workers", type=int, default=1, help="team mode's Celery worker processes"
    )
    args = parser.parse_args(argv)
    if args.concurrency is None:
        args.concurrency = "200" if args.quick else "200,500"
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "team" not in modes:
        levels = []
    quick = args.quick
    plan = Plan(
        alone=5 if quick else 20,
        alone_tokens=5,
        bursts=1 if quick else 3,
        burst_tokens=20,
        streams=1 if quick else 3,
        stream_tokens=200,
        splits=1 if quick else 2,
        split_tokens=100 if quick else 200,
        levels=levels,
        level_tokens=args.tokens,
        rate=args.rate,
    )
    for needed in ("tsfake.py", "sockbench.py", "bench.py", "owui_env.sh"):
        if not (args.shared / needed).exists():
            parser.error(f"{args.shared / needed} is missing (--shared)")
    use_owui = not args.skip_openwebui and "embedded" in modes  # measured beside embedded
    if use_owui and not (args.owui_dir / "venv" / "bin" / "python").exists():
        parser.error(
            f"no Open WebUI in {args.owui_dir} (venv/): install it as "
            f"{args.shared}/README.md says, or pass --skip-openwebui"
        )
    signal.signal(signal.SIGTERM, interrupt)
    header(args, plan)
    started = time.monotonic()
    results = Results()
    work = Path(tempfile.mkdtemp(prefix="beside-owui-"))
    llm = owui = None
    try:
        llm = TsFake(args.shared, args.rate, work)
        log(f"tsfake on {llm.url} (pid {llm.popen.pid})")
        KNOWN.append(lambda: [llm.popen.pid] if llm.popen.poll() is None else [])
        if use_owui:
            owui = OpenWebUI(args.owui_dir, args.shared, llm, work, args.owui_url)
            KNOWN.append(owui.pids)
            try:
                owui.up()
            except Exception as exc:  # agentsite's column is still worth printing
                log(f"Open WebUI failed: {type(exc).__name__}: {exc}")
                results.notes.append(f"Open WebUI not measured: {str(exc)[:300]}")
                owui.down()
                owui = None
        if owui is not None:
            log(f"Open WebUI {owui.version} at {owui.base} (pid {owui.pid})")
            if not owui.reused:
                results.starts["owui"] = owui.start_time
                results.rss["owui"] = owui.idle_rss
            else:
                results.notes.append("Open WebUI reused: its start time and idle RSS not measured")
        for mode in modes:
            try:
                agentsite_phase(
                    mode,
                    llm,
                    owui if mode == "embedded" else None,
                    plan,
                    results,
                    workers=args.workers,
                )
            except Exception as exc:  # print what the other phases measured
                log(f"agentsite {mode} mode failed: {type(exc).__name__}: {exc}")
                results.notes.append(f"agentsite {mode} mode failed: {str(exc)[:300]}")
            if owui is not None and mode == "embedded":
                owui.down()  # team mode is agentsite's alone: Open WebUI no longer runs
                owui = None
    except KeyboardInterrupt:
        log("interrupted: stopping everything started here")
        return 130
    finally:
        if owui is not None:
            owui.down()
        if llm is not None:
            llm.stop()
        shutil.rmtree(work, ignore_errors=True)
    print_table(results, plan)
    print_details(results)
    log(f"\ntotal time: {(time.monotonic() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
