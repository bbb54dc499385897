"""The floor under the streaming targets on this machine: a minimal relay, no framework.

stream_latency.py measures what agentsite adds between an LLM emitting a token and a
websocket client receiving it, and the server CPU per frame. This script measures the
same two figures for the least any Python server can do on the same path, so the targets
can be read against what the machine allows on the day:

- one hop (embedded mode's shape): a process on uvloop reads each SSE chunk from the
  "LLM", parses its JSON and writes a frame to the client;
- two hops through Redis (team mode's shape): one process reads and parses the chunk and
  PUBLISHes it, a second one SUBSCRIBEd to the channel writes the frame to the client.

Each process is its own interpreter (like the real stack) and counts its CPU with
``time.process_time()`` from its tenth frame on. The "LLM" sends a chunk every 1/rate
seconds, stamped with ``time.monotonic()``; the client (this process) subtracts the stamp
from the time it read the frame.

    .venv/bin/python benchmarks/relay_floor.py [--tokens 200] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import hiredis
from percentiles import pct

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAMP = re.compile(rb"@@(\d+\.\d+)@@")
END = b"@@end@@"
CHANNEL = "relay-floor"
WARM_UP = 10  # frames before a relay starts counting its CPU


@dataclass
class Floor:
    label: str
    cpu_per_frame: float  # seconds, all relay processes together
    latencies: list[float]  # seconds, LLM write -> client read

    @property
    def p50(self) -> float:
        return pct(self.latencies, 50)

    def line(self) -> str:
        return (
            f"{self.label:28} CPU {self.cpu_per_frame * 1e6:5.0f} us/frame  "
            f"latency p50 {self.p50 * 1e3:5.2f} ms  p99 {pct(self.latencies, 99) * 1e3:5.2f} ms"
            f"  (n={len(self.latencies)})"
        )


# -------------------------------------------------------------------- the processes


def feed(port: int, tokens: int, rate: float) -> None:
    """The "LLM": one connection, ``tokens`` stamped SSE chunks at ``rate``, then END."""
    with socket.create_server(("127.0.0.1", port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
    with conn:
        time.sleep(0.2)  # the relays finish connecting
        for _ in range(tokens):
            time.sleep(1 / rate)
            chunk = {"choices": [{"delta": {"content": f"@@{time.monotonic():.6f}@@"}}]}
            conn.sendall(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        conn.sendall(b"data: " + json.dumps({"end": True}).encode() + b"\n\n")


def frame(content: bytes) -> bytes:
    """A websocket text frame (unmasked, server to client) around a little HTML."""
    body = b'<span hx-swap-oob="beforeend:#answer-src-1">' + content + b"</span>"
    length = bytes([len(body)]) if len(body) < 126 else b"\x7e" + len(body).to_bytes(2, "big")
    return b"\x81" + length + body


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class Meter:
    """Counts frames and the process's CPU from the WARM_UP-th on."""

    def __init__(self) -> None:
        self.frames = 0
        self.started = 0.0

    def tick(self) -> None:
        self.frames += 1
        if self.frames == WARM_UP:
            self.started = time.process_time()

    def report(self) -> None:
        counted = self.frames - WARM_UP
        cpu = (time.process_time() - self.started) / counted if counted > 0 else 0.0
        print(json.dumps({"frames": self.frames, "cpu_per_frame": cpu}), flush=True)


class ChunkReader(asyncio.Protocol):
    """Hands each delta of the LLM's SSE stream to ``handle`` (None at its end)."""

    def __init__(self, handle: Callable[[bytes | None], None]) -> None:
        self.handle = handle
        self.pending = b""

    def data_received(self, data: bytes) -> None:
        *events, self.pending = (self.pending + data).split(b"\n\n")
        for event in events:
            chunk = json.loads(event[len(b"data: ") :])
            self.handle(
                None if chunk.get("end") else chunk["choices"][0]["delta"]["content"].encode()
            )


async def from_llm(source: int, send: Callable[[bytes], None]) -> None:
    """Read the LLM's deltas and ``send`` each (then END), counting frames; report the CPU."""
    loop = asyncio.get_running_loop()
    done, meter = loop.create_future(), Meter()

    def forward(content: bytes | None) -> None:
        send(content or END)
        if content is None:
            done.set_result(None)
        else:
            meter.tick()

    await loop.create_connection(lambda: ChunkReader(forward), "127.0.0.1", source)
    await done
    meter.report()


async def relay(source: int, sink: int) -> None:
    """One hop: LLM chunk -> JSON -> frame to the client."""
    out, _ = await asyncio.get_running_loop().create_connection(asyncio.Protocol, "127.0.0.1", sink)
    await from_llm(source, lambda content: out.write(frame(content)))


async def publish(source: int, redis: str) -> None:
    """Team hop 1: LLM chunk -> JSON -> PUBLISH, with replies off (nothing wakes it but
    the LLM)."""
    out, _ = await asyncio.get_running_loop().create_connection(asyncio.Protocol, *host_port(redis))
    out.write(hiredis.pack_command(("CLIENT", "REPLY", "OFF")))
    await from_llm(
        source, lambda content: out.write(hiredis.pack_command(("PUBLISH", CHANNEL, content)))
    )


async def subscribe(redis: str, sink: int) -> None:
    """Team hop 2: a published message -> frame to the client."""
    loop = asyncio.get_running_loop()
    done, subscribed, meter = loop.create_future(), loop.create_future(), Meter()
    reader = hiredis.Reader()
    out: asyncio.Transport | None = None  # the client's connection, made once subscribed

    class Messages(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                if reply[0] == b"subscribe":
                    subscribed.set_result(None)
                    continue
                assert out is not None  # nothing is published before the client is connected
                out.write(frame(reply[2]))
                if reply[2] == END:
                    done.set_result(None)
                    return
                meter.tick()

    redis_in, _ = await loop.create_connection(Messages, *host_port(redis))
    redis_in.write(hiredis.pack_command(("SUBSCRIBE", CHANNEL)))
    await subscribed
    out, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", sink)
    await done
    meter.report()


# ----------------------------------------------------------------------- the client


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def receive(conn: socket.socket) -> list[float]:
    """Latencies of the frames a relay sends on ``conn`` until END (warm-up left out)."""
    latencies, pending = [], b""
    conn.settimeout(30)  # a relay that died must not hang the benchmark
    with conn:
        while data := conn.recv(65536):
            now = time.monotonic()
            pending += data
            end = 0
            for match in STAMP.finditer(pending):
                latencies.append(now - float(match[1]))
                end = match.end()
            if END in pending:
                break
            pending = pending[end:]
    return latencies[WARM_UP:]


def cpu_of(process: subprocess.Popen[str]) -> float:
    out, _ = process.communicate(timeout=60)
    if process.returncode:
        raise RuntimeError(f"a relay process failed ({process.returncode})")
    return json.loads(out.strip().splitlines()[-1])["cpu_per_frame"]


def start_llm(tokens: int, rate: float) -> tuple[subprocess.Popen[str], str]:
    """The feeding process, once it listens, and its port."""
    from tests.integration.stack import free_port  # the client only: relays stay lean

    port = str(free_port())
    feeder = spawn("--role", "feed", "--port", port, "--tokens", str(tokens), "--rate", str(rate))
    assert feeder.stdout is not None
    feeder.stdout.readline()
    return feeder, port


def one_hop(tokens: int, rate: float) -> Floor:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        feeder, llm = start_llm(tokens, rate)
        hop = spawn("--role", "relay", "--source", llm, "--sink", str(listener.getsockname()[1]))
        latencies = receive(listener.accept()[0])
    cpu = cpu_of(hop)
    feeder.wait(30)
    return Floor("one hop (embedded shape)", cpu, latencies)


def via_redis(tokens: int, rate: float, redis: str) -> Floor:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sink = str(listener.getsockname()[1])
        second = spawn("--role", "subscribe", "--redis", redis, "--sink", sink)
        conn, _ = listener.accept()  # it connects once subscribed
        feeder, llm = start_llm(tokens, rate)
        first = spawn("--role", "publish", "--source", llm, "--redis", redis)
        latencies = receive(conn)
    cpu = cpu_of(first) + cpu_of(second)
    feeder.wait(30)
    return Floor("two hops via Redis (team)", cpu, latencies)


def plain_address(url: str) -> str | None:
    """``host:port`` of a ``redis://`` URL without credentials (None for any other)."""
    parts = urlsplit(url)
    if parts.scheme != "redis" or parts.username or parts.password:
        return None
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"


def measure(tokens: int = 200, rate: float = 20.0) -> dict[str, Floor]:
    """The floor of each mode's shape, through the Redis the stacks use (the test suite's:
    AGENTSITE_TEST_REDIS_URL, else a private server; a private one too if that URL needs
    credentials, which the relays do not send)."""
    from tests.integration.stack import start_redis

    floors = {"embedded": one_hop(tokens, rate)}
    with tempfile.TemporaryDirectory() as work:
        url, server = start_redis(Path(work))
        try:
            address = plain_address(url)
            if address is None:  # a private server's URL is plain TCP without credentials
                url, server = start_redis(Path(work), unix_socket=Path(work) / "redis.sock")
                address = plain_address(url)
            floors["team"] = via_redis(tokens, rate, address)
        finally:
            if server is not None:
                server.stop()
    return floors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--role", choices=("feed", "relay", "publish", "subscribe"))
    parser.add_argument("--port", type=int)
    parser.add_argument("--source", type=int)
    parser.add_argument("--sink", type=int)
    parser.add_argument("--redis", help="host:port")
    args = parser.parse_args(argv)
    if args.role == "feed":
        feed(args.port, args.tokens, args.rate)
        return 0
    if args.role:
        import uvloop

        work = {
            "relay": lambda: relay(args.source, args.sink),
            "publish": lambda: publish(args.source, args.redis),
            "subscribe": lambda: subscribe(args.redis, args.sink),
        }[args.role]
        uvloop.run(work())
        return 0
    print(f"Minimal relays on this machine, {args.tokens} tokens at {args.rate:g}/s:")
    for floor in measure(args.tokens, args.rate).values():
        print(f"  {floor.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
