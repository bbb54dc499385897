"""CPU per LLM request by connection-pool size: httpcore's pool vs engine.llm.pool.

Every run's LLM calls go through one connection pool per process (engine.llm.openai).
A worker streaming many answers holds one connection per answer and keeps up to 64 idle
ones for the next runs, so the pool's own bookkeeping per request matters. This script
serves plain HTTP/1.1 on loopback in the same process and prints, for each pool, the CPU
time of one request once the pool holds N connections, and of a burst of 200 requests
started together against an empty pool (as when 200 runs start at once).

    .venv/bin/python benchmarks/llm_pool.py [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time
from pathlib import Path

import httpcore
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.llm.netbackend import AsyncioBackend, AsyncioHTTPTransport  # noqa: E402

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=64)


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(REPLY)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        writer.close()


def transport(stock: bool) -> AsyncioHTTPTransport:
    built = AsyncioHTTPTransport(ssl_context=ssl.create_default_context(), limits=LIMITS)
    if stock:  # the same transport and network backend with httpcore's own pool
        built._pool = httpcore.AsyncConnectionPool(
            max_connections=None,
            max_keepalive_connections=LIMITS.max_keepalive_connections,
            network_backend=AsyncioBackend(),
        )
    return built


async def per_request(url: str, stock: bool, connections: int, requests: int) -> float:
    """CPU seconds per sequential request once ``connections`` were opened at once."""
    async with httpx.AsyncClient(transport=transport(stock)) as client:
        opened = asyncio.Event()
        streams = 0

        async def hold() -> None:
            nonlocal streams
            async with client.stream("GET", url) as response:
                await response.aread()
                streams += 1
                if streams == connections:
                    opened.set()
                await opened.wait()

        await asyncio.gather(*(hold() for _ in range(connections)))
        started = time.process_time()
        for _ in range(requests):
            (await client.get(url)).read()
        return (time.process_time() - started) / requests


async def burst(url: str, stock: bool, size: int) -> float:
    """CPU seconds for ``size`` requests started together against an empty pool."""
    async with httpx.AsyncClient(transport=transport(stock)) as client:
        started = time.process_time()
        await asyncio.gather(*(client.get(url) for _ in range(size)))
        return time.process_time() - started


async def main(requests: int) -> None:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    print("CPU per request (us; client and server share this process), by pooled connections")
    print(f"{'connections':>12} {'httpcore pool':>14} {'linear pool':>12}")
    for connections in (1, 20, 64, 200):
        stock = await per_request(url, True, connections, requests)
        linear = await per_request(url, False, connections, requests)
        print(f"{connections:>12} {stock * 1e6:>14.0f} {linear * 1e6:>12.0f}")
    stock, linear = await burst(url, True, 200), await burst(url, False, 200)
    print(f"200 requests at once (ms): httpcore pool {stock * 1e3:.0f}, linear {linear * 1e3:.0f}")
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    asyncio.run(main(parser.parse_args().requests))
