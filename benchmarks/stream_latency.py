"""Streaming latency through the whole path: LLM -> runner -> channel layer -> consumer -> ws.

The scripted LLM server (a real process) streams tokens at a fixed rate and stamps each
with its emission time (``time.monotonic()``, one clock for every process on this host).
Websocket clients, logged in like a browser, parse the stamps out of the HTML frames they
receive, so the added latency per token is ``receipt - emission``. Printed per mode:

- token latency p50/p99 for 1 run (embedded: daphne alone; team: Redis + Celery + daphne)
  and for 50, 100 and 200 concurrent runs in team mode (20 tokens/s each by default);
- time-to-first-token overhead: message POST -> first answer frame, for 1 and 20
  concurrent conversations, minus the scripted LLM's own time (it records when each call
  arrived and when its answer, or a stream's first content chunk, was out), with the
  medians of when the POST was answered, the first LLM request arrived and the first
  frame came (where a burst's first tokens wait);
- DB writes per answer (the runner's "run N finished: ... F frames, W log writes" line);
- server CPU per run and per frame (utime + stime of daphne and the worker from /proc),
  and while idle: 20 chats open, nothing streaming, CPU per second for 3 s.
- first, the floor of the machine now: a minimal relay of each mode's shape
  (benchmarks/relay_floor.py), shown beside the one-run p50 and CPU-per-frame verdicts.

    .venv/bin/python benchmarks/stream_latency.py [--tokens 300] [--rate 20]
        [--concurrency 50,100,200] [--modes embedded,team] [--no-floor]
        [--profile-dir DIR [--profile top|stream|first-token|burst] [--profiler CMD]]

Everything runs on this machine (2 cores here): the servers, Redis, PostgreSQL, the
scripted LLM and all websocket clients share the CPUs, as in the reference measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time
import timeit
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import relay_floor  # noqa: E402
from percentiles import pct  # noqa: E402

from tests.integration.stack import (  # noqa: E402
    Browser,
    Process,
    Stack,
    async_wait_for,
    run_id_of,
    running_stack,
)

DELTA = re.compile(r'<span hx-swap-oob="beforeend:#answer-src-(\d+)">(.*?)</span>', re.S)
STAMP = re.compile(r"@@(\d+\.\d+)@@")
FINISHED = re.compile(r'id="footer-(\d+)"')
RUN_LOG = re.compile(r"run (\d+) finished: (\w+) in ([\d.]+)s, (\d+) frames, (\d+) log writes")

# Measured as deployed: DEBUG off (no SQL query log, no debug toolbar paths).
# The API's per-user rate limit is off: one benchmark user posts far more than 120
# messages a minute, and the limiter is not what is measured here.
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(40),
    "AGENTSITE_API_RATE_LIMIT": "0",
}

TARGETS = {
    "p50_1": 1.0,  # ms added per token, one run
    "p99_1": 5.0,
    "ttft_1": 15.0,  # ms, first-token overhead alone
    "ttft_20": 100.0,  # ms, with 20 concurrent conversations (p50)
    "cpu_run": 20.0,  # ms CPU per run
    "cpu_frame": None,  # reported; the 0.1 ms target was withdrawn (below a Python server)
    "p99_200": 100.0,  # ms, 200 concurrent runs
    "writes_per_s": None,  # reported: every frame is logged before it is sent
}


PY_SPY = f"{Path(sys.executable).with_name('py-spy')} record --gil --format raw --rate 200"
DEFAULT_PROFILER = PY_SPY + " --pid {pid} --output {out}"


# ------------------------------------------------------------------------- measuring


@dataclass
class Trace:
    """What one websocket client saw of one run."""

    conversation_id: int
    run_id: int = 0
    posted_at: float = 0.0
    answered_at: float | None = None  # the message POST's response received
    first_llm_at: float | None = None  # the scripted LLM received the run's first request
    first_delta_at: float | None = None
    llm_time: float = 0.0  # the scripted LLM's own time before the first token
    frames: int = 0
    latencies: list[float] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class RunLog:
    status: str
    elapsed: float
    frames: int
    writes: int


@dataclass
class Result:
    label: str
    mode: str
    runs: int
    tokens: int
    latencies: list[float]
    window_latencies: list[float]
    ttfts: list[float]
    logs: list[RunLog]
    stages: dict[str, list[float]]  # first-token scenarios: seconds after each POST
    cpu: dict[str, float]
    wall: float
    failed: int
    note: str = ""
    load: float = 0.0  # 1-minute load average of the machine (2 cores) around the scenario
    db_connections: int = 0  # peak PostgreSQL connections to the app's database

    @property
    def frames(self) -> int:
        return sum(log.frames for log in self.logs)

    @property
    def server_cpu(self) -> float:
        return sum(v for k, v in self.cpu.items() if k == "daphne" or k.startswith("worker"))


def cpu_of(processes: dict[str, Process]) -> dict[str, float]:
    return {name: p.cpu_seconds() for name, p in processes.items() if p.alive()}


async def read_frames(ws: Any, trace: Trace) -> None:
    async for frame in ws:
        now = time.monotonic()
        trace.frames += 1
        for _run, text in DELTA.findall(frame):
            if trace.first_delta_at is None:
                trace.first_delta_at = now
            for stamp in STAMP.findall(text):
                emitted = float(stamp)
                trace.stamps.append(emitted)
                trace.received.append(now)
                trace.latencies.append(now - emitted)
        if FINISHED.search(frame) and 'class="run-status' in frame:
            trace.finished.set()


def run_logs(processes: list[Process], run_ids: set[int]) -> dict[int, RunLog]:
    """The runner's "run N finished" lines of ``run_ids``, from whichever process ran each."""
    found = {}
    for process in processes:
        for match in RUN_LOG.finditer(process.text()):
            run_id = int(match[1])
            if run_id in run_ids:
                found[run_id] = RunLog(match[2], float(match[3]), int(match[4]), int(match[5]))
    return found


async def gather_limited(limit: int, coros: list[Any]) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


class PeakConnections:
    """Samples the number of PostgreSQL connections to the stack's database."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakConnections:
        if self.stack.database is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _sample(self) -> None:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        while not self._stop.wait(0.25):
            with contextlib.suppress(Exception):
                self.peak = max(self.peak, self.stack.query(sql)[0][0] - 1)  # minus ours


async def scenario(
    stack: Stack,
    browser: Browser,
    *,
    label: str,
    runs: int,
    tokens: int,
    rate: float,
    profile_dir: Path | None = None,
    profiler: str = DEFAULT_PROFILER,
) -> Result:
    """Open ``runs`` conversations with a socket each, post to all, wait for every answer."""
    chunks = [f"w{i} " for i in range(tokens)]
    stack.script(
        reset=True,
        default={
            "content": "Done.",
            "chunks": chunks,
            "chunk_delay": 1.0 / rate if tokens > 1 else 0,
            "stamp_chunks": True,
        },
    )
    try:
        conversation_ids = await gather_limited(
            8, [browser.new_conversation() for _ in range(runs)]
        )
        traces = [Trace(cid) for cid in conversation_ids]
        sockets = await gather_limited(
            16, [browser.socket(cid).__aenter__() for cid in conversation_ids]
        )
    except Exception as exc:  # e.g. the database refused more connections
        note = f"setup failed: {type(exc).__name__}: {str(exc)[:200]}"
        return Result(label, stack.mode, runs, tokens, [], [], [], [], {}, {}, 0.0, runs, note)
    readers = [
        asyncio.ensure_future(read_frames(ws, t)) for ws, t in zip(sockets, traces, strict=True)
    ]
    executors = stack.workers if stack.mode == "team" else [stack.daphne]
    servers = {
        k: p
        for k, p in stack.processes.items()
        if k in ("daphne", "redis") or k.startswith("worker")
    }
    profilers = start_profilers(servers, profile_dir, label, profiler) if profile_dir else []
    load_before = os.getloadavg()[0]
    cpu_before = cpu_of(servers)
    started = time.monotonic()
    logs: dict[int, RunLog] = {}
    unfinished, error = runs, ""

    post_errors: list[str] = []

    async def post(trace: Trace) -> None:
        trace.posted_at = time.monotonic()
        response = await browser.post(
            f"/c/{trace.conversation_id}/messages/",
            {"content": f"benchmark {label} {marker(trace)}: stream"},
        )
        if response.status_code != 200:
            title = re.search(r"<title>\s*(.*?)\s*</title>", response.text, re.S)
            post_errors.append(f"POST {response.status_code} {title[1] if title else ''}".strip())
            trace.finished.set()
            return
        trace.answered_at = time.monotonic()
        trace.run_id = run_id_of(response)

    try:
        with PeakConnections(stack) as connections:
            await gather_limited(16, [post(t) for t in traces])
            budget = 60 + tokens / rate + runs * 0.2
            waiting = [asyncio.ensure_future(t.finished.wait()) for t in traces]
            _done, pending = await asyncio.wait(waiting, timeout=budget)
            for task in pending:
                task.cancel()
            unfinished = len(pending)
            run_ids = {t.run_id for t in traces if t.run_id}
            with contextlib.suppress(TimeoutError):
                await async_wait_for(
                    lambda: len(logs.update(run_logs(executors, run_ids)) or logs) == len(run_ids),
                    timeout=30 if not pending else 5,
                    what="the runner's log lines",
                    interval=0.2,
                )
    except Exception as exc:  # report the scenario as failed, keep benchmarking
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        wall = time.monotonic() - started
        cpu_after = cpu_of(servers)
        for profiler in profilers:
            profiler.send_signal(2)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
        for profiler in profilers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(30)

    if runs <= 20:  # first-token scenarios: subtract the scripted LLM's own time
        with contextlib.suppress(Exception):
            add_llm_time(traces, await asyncio.to_thread(stack.llm_requests))
    # The window in which every run was streaming: latency under the full load.
    starts = [min(t.stamps) for t in traces if t.stamps]
    ends = [max(t.stamps) for t in traces if t.stamps]
    lo, hi = (max(starts), min(ends)) if starts else (0.0, 0.0)
    window = [
        lat for t in traces for s, lat in zip(t.stamps, t.latencies, strict=True) if lo <= s <= hi
    ]
    notes = [error] if error else []
    if post_errors:
        kinds = sorted(set(post_errors))
        notes.append(f"{len(post_errors)} message POSTs failed: {', '.join(kinds)[:200]}")
    if runs > 1 and tokens > 2 and not hi > lo:
        notes.append("streams did not all overlap")
    unsucceeded = sum(1 for log in logs.values() if log.status != "succeeded")
    for executor in executors:
        log_text = executor.text()
        errors = re.findall(r"OperationalError|Traceback", log_text)
        if errors:
            first = re.search(r"^\S*(?:Error|Exception)\b.*$", log_text, re.M)
            example = f" (first: {first[0][:160]})" if first else ""
            notes.append(f"{len(errors)} errors in the {executor.name} log so far{example}")
    return Result(
        label=label,
        mode=stack.mode,
        runs=runs,
        tokens=tokens,
        latencies=[lat for t in traces for lat in t.latencies],
        window_latencies=window if runs > 1 else [],
        ttfts=[t.first_delta_at - t.posted_at - t.llm_time for t in traces if t.first_delta_at],
        logs=[logs[rid] for rid in sorted(logs)],
        stages=stages_of(traces),
        cpu={k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after},
        wall=wall,
        failed=max(unfinished, runs - len(logs)) + unsucceeded,
        note="; ".join(notes),
        load=(load_before + os.getloadavg()[0]) / 2,
        db_connections=connections.peak if stack.database is not None else 0,
    )


def marker(trace: Trace) -> str:
    return f"[bench-{trace.conversation_id}]"


def add_llm_time(traces: list[Trace], requests: list[dict[str, Any]]) -> None:
    """Each run's LLM calls up to its first token: request received -> answer out; and
    when the first of them arrived."""
    for trace in traces:
        tag = marker(trace)
        for request in requests:
            if request.get("answered") is None or tag not in json.dumps(request["body"]):
                continue
            trace.llm_time += request["answered"] - request["time"]
            if trace.first_llm_at is None or request["time"] < trace.first_llm_at:
                trace.first_llm_at = request["time"]


STAGES = {
    "POST answered": "answered_at",
    "first LLM request": "first_llm_at",
    "first frame": "first_delta_at",
}


def stages_of(traces: list[Trace]) -> dict[str, list[float]]:
    """Where a first token's time goes: each stage's time after the run's POST was sent
    (the scripted LLM's own time not subtracted; every clock is this machine's monotonic
    clock, shared by the processes)."""
    return {
        stage: [getattr(t, attr) - t.posted_at for t in traces if getattr(t, attr) is not None]
        for stage, attr in STAGES.items()
    }


def python_speed_us() -> float:
    """A reference figure: CPU figures scale with it from one machine (or day) to another."""
    best = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5))
    return best / 2000 * 1e6


def wake_costs_us() -> tuple[float, float]:
    """CPU (this process) of one wake-up after 50 ms idle, and of one warm thread hop.

    The floor under "CPU per frame" at 20 tokens/s: each process on a frame's path sleeps
    between tokens and pays for waking up (and every executor call for two thread
    switches). On some virtual machines a wake-up alone costs more than 0.1 ms.
    """

    async def measure() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        started = time.process_time()
        for _ in range(20):
            await asyncio.sleep(0.05)
        wake = (time.process_time() - started) / 20
        await loop.run_in_executor(None, int)
        started = time.process_time()
        for _ in range(200):
            await loop.run_in_executor(None, int)
        hop = (time.process_time() - started) / 200
        return wake * 1e6, hop * 1e6

    return asyncio.run(measure())


def start_profilers(
    servers: dict[str, Process], directory: Path, label: str, template: str = DEFAULT_PROFILER
) -> list[subprocess.Popen[bytes]]:
    """A profiler on daphne and the worker for the scenario, stopped with SIGINT at its end.

    ``template`` is a command line with ``{pid}`` and ``{out}`` (default: py-spy's
    collapsed stacks of the GIL holder, idle excluded; e.g. ``perf record -g -p {pid} -o
    {out}`` or ``strace -c -f -p {pid} -o {out}`` work too).
    """
    directory.mkdir(parents=True, exist_ok=True)
    profilers = []
    for name in servers:
        if name == "redis":
            continue
        out = directory / f"{label.replace(' ', '_').replace(':', '')}-{name}.txt"
        command = template.format(pid=servers[name].pid, out=out).split()
        profilers.append(
            subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return profilers


# --------------------------------------------------------------------------- running


async def measure_mode(
    stack: Stack, args: argparse.Namespace, concurrency: list[int]
) -> list[Result]:
    """Every scenario of one mode, on one running stack."""
    results: list[Result] = []
    mode = stack.mode

    def done(result: Result) -> Result:
        print(
            f"  {result.label:40} p50 {ms(pct(result.latencies, 50)):>6} ms  "
            f"p99 {ms(pct(result.latencies, 99)):>7} ms  first token p50 "
            f"{ms(pct(result.ttfts, 50)):>6} ms  CPU/frame "
            f"{ms(result.server_cpu / result.frames if result.frames else float('nan')):>5} ms  "
            f"load {result.load:4.1f}" + (f"  [{result.note}]" if result.note else ""),
            flush=True,
        )
        results.append(result)
        return result

    def profiling(which: str) -> dict[str, Any]:
        """Profiler arguments for the scenario ``which`` names, if it is the one asked for."""
        if args.profile_dir is None or args.profile != which:
            return {}
        return {"profile_dir": args.profile_dir, "profiler": args.profiler}

    top = max(concurrency, default=0)
    async with Browser(stack.base_url) as browser:
        await browser.login()
        # Warm-up: imports, connections, template caches.
        await scenario(stack, browser, label="warm-up", runs=2, tokens=5, rate=args.rate)
        await print_idle_cpu(stack, browser)
        singles = [
            await scenario(
                stack, browser, label=f"ttft-{i}", runs=1, tokens=2, rate=50,
                **profiling("first-token"),
            )
            for i in range(args.ttft_repeats)
        ]  # fmt: skip
        done(merge(singles, f"{mode}: first token, 1 conversation"))
        bursts = [
            await scenario(
                stack,
                browser,
                label=f"burst-{i}",
                runs=20,
                tokens=2,
                rate=50,
                **profiling("burst"),
            )
            for i in range(args.ttft_bursts)
        ]
        done(merge(bursts, f"{mode}: first token, 20 concurrent"))
        one = f"{mode}: 1 run"
        done(
            await scenario(
                stack, browser, label=one, runs=1, tokens=args.tokens, rate=args.rate,
                **profiling("stream"),
            )
        )  # fmt: skip
        for runs in concurrency:
            label = f"{mode}: {runs} concurrent"
            result = await scenario(
                stack,
                browser,
                label=label,
                runs=runs,
                tokens=args.tokens,
                rate=args.rate,
                **(profiling("top") if runs == top else {}),
            )
            done(result)
    return results


IDLE_SOCKETS = 20
IDLE_SECONDS = 3.0


def thread_cpu_seconds(pid: int) -> float:
    """CPU time of a process's live threads in nanoseconds' precision (``schedstat``):
    ``/proc/<pid>/stat`` counts in 10 ms ticks, too coarse for an idle process."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[0])
    return total / 1e9


async def print_idle_cpu(stack: Stack, browser: Browser) -> None:
    """What the servers burn while nothing happens: chats open, no run streaming."""
    conversation_ids = [await browser.new_conversation() for _ in range(IDLE_SOCKETS)]
    sockets = [await browser.socket(cid).__aenter__() for cid in conversation_ids]
    servers = {k: p for k, p in stack.processes.items() if k == "daphne" or k.startswith("worker")}
    try:
        before = {name: thread_cpu_seconds(p.pid) for name, p in servers.items()}
        await asyncio.sleep(IDLE_SECONDS)
        after = {name: thread_cpu_seconds(p.pid) for name, p in servers.items()}
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    per_second = ", ".join(
        f"{name} {(after[name] - before[name]) / IDLE_SECONDS * 1e3:.2f}" for name in sorted(after)
    )
    print(
        f"  {stack.mode}: idle with {IDLE_SOCKETS} chats open, CPU ms per second: {per_second}",
        flush=True,
    )


def merge(results: list[Result], label: str) -> Result:
    """Sequential repetitions of one scenario as one result."""
    first = results[0]
    cpu: dict[str, float] = {}
    for r in results:
        for k, v in r.cpu.items():
            cpu[k] = cpu.get(k, 0.0) + v
    return Result(
        label=label,
        mode=first.mode,
        runs=sum(r.runs for r in results),
        tokens=first.tokens,
        latencies=[x for r in results for x in r.latencies],
        window_latencies=[],
        ttfts=[x for r in results for x in r.ttfts],
        stages={stage: [x for r in results for x in r.stages.get(stage, [])] for stage in STAGES},
        logs=[x for r in results for x in r.logs],
        cpu=cpu,
        wall=sum(r.wall for r in results),
        failed=sum(r.failed for r in results),
        note="; ".join(sorted({r.note for r in results if r.note})),
        load=statistics.mean(r.load for r in results),
        db_connections=max(r.db_connections for r in results),
    )


# -------------------------------------------------------------------------- printing


def ms(value: float) -> str:
    return "-" if value != value else f"{value * 1e3:.1f}"  # NaN -> "-"


def print_results(results: list[Result], args: argparse.Namespace) -> None:
    print()
    print(
        f"Token latency added between the LLM emitting a token and the websocket client "
        f"receiving it; {args.rate:g} tokens/s per run, {args.tokens} tokens per streamed "
        f"answer. 'p99 all-on': tokens emitted while every run of the scenario streamed."
    )
    header = (
        f"{'scenario':38} {'runs':>4} {'tokens':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'p99 all-on':>10} {'frames/run':>10} {'writes/run':>10} {'writes/s':>8} "
        f"{'CPU/run ms':>10} {'CPU/frame ms':>12} {'PG conns':>8} {'load':>5} {'failed':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        frames_per_run = r.frames / max(1, len(r.logs))
        writes = [log.writes for log in r.logs]
        writes_per_s = sum(writes) / max(1e-9, sum(log.elapsed for log in r.logs))
        print(
            f"{r.label:38} {r.runs:4d} {len(r.latencies):6d} {ms(pct(r.latencies, 50)):>7} "
            f"{ms(pct(r.latencies, 99)):>7} {ms(max(r.latencies, default=float('nan'))):>7} "
            f"{ms(pct(r.window_latencies, 99)):>10} {frames_per_run:10.1f} "
            f"{statistics.mean(writes) if writes else 0:10.1f} {writes_per_s:8.2f} "
            f"{r.server_cpu / max(1, r.runs) * 1e3:10.1f} "
            f"{ms(r.server_cpu / r.frames if r.frames else float('nan')):>12} "
            f"{r.db_connections or '-':>8} "
            f"{r.load:5.1f} {r.failed:6d}"
        )
    notes = [(r.label, r.note) for r in results if r.note]
    for label, note in notes:
        print(f"  note, {label}: {note}")
    print()
    print("Time to first token overhead: message POST sent -> first answer frame received,")
    print("minus the scripted LLM's own time (request received -> answer out, each call)")
    for r in results:
        if "first token" in r.label:
            print(
                f"  {r.label:38} p50 {ms(pct(r.ttfts, 50)):>7} ms  p99 {ms(pct(r.ttfts, 99)):>7}"
                f" ms  (n={len(r.ttfts)})"
            )
            stages = ", ".join(
                f"{stage} {ms(pct(values, 50))}" for stage, values in r.stages.items() if values
            )
            if stages:
                print(f"  {'':38} p50 ms after the POST: {stages}")
    print()
    print("Server CPU (s) by process per scenario (daphne + worker count as server CPU):")
    for r in results:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.cpu.items()))
        print(f"  {r.label:38} {parts}; wall {r.wall:.1f} s")


def verdicts(results: list[Result]) -> list[tuple[str, str, float, float | None]]:
    """(mode, target, measured, limit) for every target the runs measured.

    CPU per run comes from the first-token runs (2-token answers); CPU per frame is the
    streamed run's CPU above that, divided by its extra frames (includes the per-second
    costs of a running run: heartbeat, cancel/follow-up polling, log flushes).
    """
    rows = []
    by_label = {r.label: r for r in results}
    for mode in ("embedded", "team"):
        one = by_label.get(f"{mode}: 1 run")
        single = by_label.get(f"{mode}: first token, 1 conversation")
        many = by_label.get(f"{mode}: first token, 20 concurrent")
        top = by_label.get(f"{mode}: 200 concurrent")
        if one:
            rows.append(
                (mode, "1 run p50 ms/token", pct(one.latencies, 50) * 1e3, TARGETS["p50_1"])
            )
            rows.append(
                (mode, "1 run p99 ms/token", pct(one.latencies, 99) * 1e3, TARGETS["p99_1"])
            )
        if single:
            ttft = pct(single.ttfts, 50) * 1e3
            rows.append((mode, "first token alone ms (p50)", ttft, TARGETS["ttft_1"]))
            per_run = single.server_cpu / max(1, single.runs)
            rows.append((mode, "CPU per run ms", per_run * 1e3, TARGETS["cpu_run"]))
            if one:
                extra_frames = one.frames - single.frames / max(1, single.runs)
                marginal = (one.server_cpu - per_run) / max(1, extra_frames)
                rows.append((mode, "CPU per frame ms", marginal * 1e3, TARGETS["cpu_frame"]))
        if many:
            ttft = pct(many.ttfts, 50) * 1e3
            rows.append((mode, "first token, 20 concurrent ms (p50)", ttft, TARGETS["ttft_20"]))
        if top:
            p99 = pct(top.latencies, 99) * 1e3 if not top.failed else float("inf")
            rows.append((mode, "200 concurrent p99 ms", p99, TARGETS["p99_200"]))
        streamed = [r for r in results if r.mode == mode and r.tokens > 2 and r.logs]
        if streamed:
            worst = max(
                sum(log.writes for log in r.logs) / max(1e-9, sum(log.elapsed for log in r.logs))
                for r in streamed
            )
            rows.append((mode, "DB writes per answer-second", worst, TARGETS["writes_per_s"]))
    return rows


# The verdicts shown beside the same figure of a minimal relay (benchmarks/relay_floor.py).
FLOOR_FIGURES = {
    "1 run p50 ms/token": lambda floor: floor.p50 * 1e3,
    "CPU per frame ms": lambda floor: floor.cpu_per_frame * 1e3,
}


def print_verdicts(
    rows: list[tuple[str, str, float, float | None]], floors: dict[str, relay_floor.Floor]
) -> None:
    """Each target, and for the one-run p50 and CPU per frame the same figure for the
    least a Python relay can do on this machine now (:mod:`relay_floor`)."""
    print()
    print("Figures and targets" + ("; floor = a minimal relay of the same shape" if floors else ""))
    for mode, name, measured, limit in rows:
        floor, figure = floors.get(mode), FLOOR_FIGURES.get(name)
        beside = f"  (floor {figure(floor):.3f})" if floor and figure else ""
        if limit is None:
            print(f"  {mode:9} {name:38} {measured:9.3f}  (no target){beside}")
            continue
        verdict = "ok" if measured < limit else "MISSED"
        print(f"  {mode:9} {name:38} {measured:9.3f}  < {limit:<7g} {verdict}{beside}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=300, help="tokens per streamed answer")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second per run")
    parser.add_argument("--concurrency", default="50,100,200", help="team-mode concurrent runs")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="Celery worker processes in team mode (a thread-pool worker uses one core)",
    )
    parser.add_argument("--modes", default="embedded,team")
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip measuring the minimal relays (20 s) that the verdicts are shown against",
    )
    parser.add_argument("--ttft-repeats", type=int, default=5)
    parser.add_argument(
        "--ttft-bursts",
        type=int,
        default=5,
        help="repetitions of the 20-conversation burst (its median moved by ±25%% between "
        "single bursts of the same code)",
    )
    parser.add_argument(
        "--private-postgres",
        action="store_true",
        help="team mode on a private PostgreSQL cluster allowing 1000 connections (default: "
        "the usual test database, e.g. the local server with its 100 connections)",
    )
    parser.add_argument(
        "--py-spy",
        "--profile-dir",
        dest="profile_dir",
        type=Path,
        help="profile daphne and the worker during one scenario, writing here",
    )
    parser.add_argument(
        "--profile",
        choices=["top", "stream", "first-token", "burst"],
        default="top",
        help="which scenario to profile: the top concurrency, the 1-run stream, the "
        "first-token runs or the 20-conversation bursts (one file per run or burst)",
    )
    parser.add_argument(
        "--profiler",
        default=DEFAULT_PROFILER,
        help="profiler command line with {pid} and {out} (default: py-spy, GIL holder)",
    )
    args = parser.parse_args(argv)
    needs_py_spy = args.profiler == DEFAULT_PROFILER
    if args.profile_dir and needs_py_spy and not Path(PY_SPY.split()[0]).exists():
        parser.error("profiling needs py-spy in the venv: .venv/bin/pip install py-spy")
    concurrency = [int(n) for n in args.concurrency.split(",") if n.strip()]
    if concurrency != [50, 100, 200]:
        print(f"NOTE: concurrency scaled to {concurrency} (the issue asks for 50, 100 and 200)")
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start; "
        f"every server, Redis, PostgreSQL, the scripted LLM and all clients share them."
    )
    print(f"Python speed on this machine: {python_speed_us():.1f} us for sum(range(1000))")
    wake, hop = wake_costs_us()
    print(
        f"Wake-up cost on this machine: {wake:.0f} us CPU to wake after 50 ms idle, "
        f"{hop:.0f} us per thread hop (the floor under CPU per frame at a low token rate)"
    )
    floors: dict[str, relay_floor.Floor] = {}
    if not args.no_floor:
        print("Minimal relays on this machine now (benchmarks/relay_floor.py):", flush=True)
        floors = relay_floor.measure(rate=args.rate)
        for floor in floors.values():
            print(f"  {floor.line()}")
    results: list[Result] = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        started = time.monotonic()
        workers = f" with {args.workers} worker processes" if mode == "team" else ""
        print(f"starting the {mode}-mode stack{workers} ...", flush=True)
        worker_threads = max([8, *concurrency]) + 10
        with running_stack(
            mode=mode,
            concurrency=worker_threads,
            private_postgres=args.private_postgres,
            workers=args.workers,
            extra_env=PRODUCTION_ENV,
        ) as stack:
            origin = stack.database.origin if stack.database else "SQLite"
            print(f"  up in {time.monotonic() - started:.1f} s (database: {origin})", flush=True)
            levels = concurrency if mode == "team" else []
            results += asyncio.run(measure_mode(stack, args, levels))
    print_results(results, args)
    print_verdicts(verdicts(results), floors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
