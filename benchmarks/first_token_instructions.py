"""CPU instructions per first-token run in daphne (and the worker), counted by callgrind.

Wall-clock CPU on a shared 2-core machine moves by ±30% between runs, so changes worth
a few percent cannot be told apart by ``stream_latency.py``. Instruction counts can:
valgrind's callgrind counts the instructions a process executes (user space: not the
kernel's share of waking up, sending, receiving), and the same code gives the same count
within about 1%. The servers start under callgrind with counting off; after a warm-up the
script turns counting on, runs N first-token exchanges one after another (websocket
connect, message POST, two scripted LLM calls, the streamed answer, the done frame,
websocket close), dumps the counters and prints the instructions per exchange.

    .venv/bin/python benchmarks/first_token_instructions.py [--runs 40] [--chunks 2]
        [--chunk-delay S] [--mode embedded|team]

Embedded mode counts daphne, which runs everything; team mode counts daphne and the
Celery worker separately (Redis and PostgreSQL are not counted). Compare two commits by
running it in a checkout of each. Needs valgrind. The cost of one streamed token: run it
with ``--chunks 202`` and with the default 2; the difference divided by the difference in
answer frames (printed). Compare per-token figures only at equal frames per exchange: the
servers run ~50x slower under valgrind, and chunks that arrive while a frame is still
going out merge into one (``--chunk-delay 0.05 --runs 10`` keeps one frame per chunk).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stream_latency import DELTA, FINISHED, PRODUCTION_ENV  # noqa: E402
from tests.integration.stack import Browser, Stack, running_stack  # noqa: E402

WARM_UP_RUNS = 5


async def exchange(browser: Browser, conversation_id: int) -> int:
    """What a user's first message costs the server: socket, POST, streamed answer.
    Returns the number of answer frames received."""
    async with browser.socket(conversation_id) as ws:
        response = await browser.post(f"/c/{conversation_id}/messages/", {"content": "hi"})
        response.raise_for_status()
        deltas = 0
        async for frame in ws:
            deltas += bool(DELTA.search(frame))
            if FINISHED.search(frame) and 'class="run-status' in frame:
                break
        if not deltas:
            raise RuntimeError("the answer never streamed")
        return deltas


def total_instructions(directory: Path, pid: int) -> int:
    """The largest ``totals:``/``summary:`` figure of one process's callgrind dumps."""
    total = 0
    for dump in directory.glob(f"callgrind.{pid}*"):
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith(("totals:", "summary:")):
                total = max(total, int(line.split()[1]))
    return total


async def measure(
    stack: Stack, runs: int, out: Path, chunks: int = 2, delay: float | None = None
) -> tuple[dict[str, int], int]:
    """Instructions each counted process executed during ``runs`` exchanges, by name, and
    the answer frames those exchanges received."""
    async with Browser(stack.base_url) as browser:
        await browser.login()
        pieces = [f"w{i} " for i in range(chunks)]
        if delay is None:
            delay = 0.02 if chunks <= 2 else 0.01
        stack.script(
            reset=True, default={"content": "Done.", "chunks": pieces, "chunk_delay": delay}
        )
        conversations = [await browser.new_conversation() for _ in range(WARM_UP_RUNS + runs)]
        for conversation_id in conversations[:WARM_UP_RUNS]:
            await exchange(browser, conversation_id)
        counted = {"daphne": stack.daphne.pid}
        if stack.mode == "team":
            counted["worker"] = stack.workers[0].pid
        for pid in counted.values():
            callgrind_control("--instr=on", pid)
        frames = 0
        for conversation_id in conversations[WARM_UP_RUNS:]:
            frames += await exchange(browser, conversation_id)
        for pid in counted.values():
            callgrind_control("--dump", pid)
    for _ in range(100):  # the dumps are written asynchronously
        if all(total_instructions(out, pid) for pid in counted.values()):
            break
        await asyncio.sleep(0.1)
    return {name: total_instructions(out, pid) for name, pid in counted.items()}, frames


def callgrind_control(option: str, pid: int) -> None:
    subprocess.run(["callgrind_control", option, str(pid)], check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="measured exchanges")
    parser.add_argument("--chunks", type=int, default=2, help="streamed answer chunks")
    parser.add_argument(
        "--chunk-delay",
        type=float,
        help="seconds between chunks (default 0.02 for 2 chunks, 0.01 for more); under "
        "valgrind the servers are ~50x slower, so short delays merge chunks into fewer frames",
    )
    parser.add_argument("--mode", choices=["embedded", "team"], default="embedded")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    out = Path(tempfile.mkdtemp(prefix="agentsite-callgrind-"))
    prefix = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no",
        f"--callgrind-out-file={out}/callgrind.%p",
    ]  # fmt: skip
    started = time.monotonic()
    try:
        with running_stack(
            mode=args.mode,
            concurrency=8,
            extra_env=PRODUCTION_ENV,
            daphne_prefix=prefix,
            worker_prefix=prefix if args.mode == "team" else (),
            startup_timeout=600,  # importing Celery and Django under valgrind is slow
        ) as stack:
            totals, frames = asyncio.run(
                measure(stack, args.runs, out, args.chunks, args.chunk_delay)
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for name, total in totals.items():
        print(
            f"{args.mode}: {name} executed {total / args.runs / 1e6:.2f} M instructions per "
            f"first-token exchange of {args.chunks} chunks"
        )
    print(
        f"({args.runs} exchanges after {WARM_UP_RUNS} warm-up, {frames / args.runs:.1f} answer "
        f"frames each; {time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
