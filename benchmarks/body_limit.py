"""What the body limit costs (agentsite/body_limit.py): ``agentsite-server``, which reads
every request head with h11 on its way to daphne, beside plain ``daphne`` serving the same
app, in the same run (embedded mode, one server each, one after the other).

- small requests: ``GET /healthz`` over one kept-alive connection, one at a time:
  latency percentiles and the server's CPU per request;
- uploads: a 20 MiB body posted to ``/healthz`` (daphne reads it whole before the app
  answers): the time to the answer and the server's CPU per upload.

    .venv/bin/python benchmarks/body_limit.py [--requests 2000] [--uploads 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from percentiles import pct  # noqa: E402

from tests.integration.stack import running_stack  # noqa: E402

UPLOAD = b"x" * (20 * 1024 * 1024)


@dataclass
class Figures:
    server: str
    small: list[float]  # seconds per GET /healthz
    small_cpu: float  # server CPU seconds per GET
    uploads: list[float]  # seconds per 20 MiB POST
    upload_cpu: float  # server CPU seconds per upload

    def lines(self) -> list[str]:
        ms = 1000
        return [
            f"{self.server:17} GET /healthz   p50 {pct(self.small, 50) * ms:6.2f} ms"
            f"  p99 {pct(self.small, 99) * ms:6.2f} ms  CPU {self.small_cpu * ms:5.2f} ms/request",
            f"{self.server:17} 20 MiB upload  p50 {pct(self.uploads, 50) * ms:6.1f} ms"
            f"  max {max(self.uploads) * ms:6.1f} ms  CPU {self.upload_cpu * ms:6.1f} ms/upload",
        ]


def measure(server: str, requests: int, uploads: int) -> Figures:
    with running_stack(mode="embedded", server=server) as stack:
        process = stack.daphne
        with httpx.Client(base_url=stack.base_url, trust_env=False, timeout=60) as client:
            for _ in range(50):  # warm up: imports, the first connection
                client.get("/healthz")
            small = []
            cpu = process.cpu_seconds()
            for _ in range(requests):
                started = time.perf_counter()
                response = client.get("/healthz")
                small.append(time.perf_counter() - started)
                response.raise_for_status()
            small_cpu = (process.cpu_seconds() - cpu) / requests

            timed = []
            cpu = process.cpu_seconds()
            for _ in range(uploads):
                started = time.perf_counter()
                client.post("/healthz", content=UPLOAD)
                timed.append(time.perf_counter() - started)
            upload_cpu = (process.cpu_seconds() - cpu) / uploads
    return Figures(server, small, small_cpu, timed, upload_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--uploads", type=int, default=10)
    args = parser.parse_args()
    for server in ("daphne", "agentsite-server"):
        for line in measure(server, args.requests, args.uploads).lines():
            print(line, flush=True)


if __name__ == "__main__":
    main()
