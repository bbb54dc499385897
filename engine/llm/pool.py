"""httpcore's HTTP/1.1 connection pool with its bookkeeping pass in linear time.

httpcore 1.0 runs ``_assign_requests_to_connections`` when every request enters and
leaves the pool. Its clean-up loop counts the pool's connections once per idle
connection (quadratic), and then re-filters every connection for every queued request.
Measured on this machine (benchmarks/llm_pool.py): one request cost 0.45 ms of CPU
with one pooled connection and 2.0 ms with 64 idle ones, the keep-alive size a busy
worker reaches. The same count also closed idle connections while the pool held more
than ``max_keepalive_connections`` of any kind, so a busy pool kept none for the next
runs.
(Upstream: encode/httpcore#1035, still open.)

This subclass replaces that one method; requests, connections and their locking stay
httpcore's. A pass walks the connections once and the requests once:

- closed connections are dropped, expired ones (keep-alive timeout, or the server hung
  up an idle one) are closed, and idle connections beyond the keep-alive limit are
  closed, oldest first;
- each queued request takes an idle connection to its origin, or a new connection while
  the pool is under ``max_connections``, or replaces an idle connection to another
  origin; otherwise it stays queued until a later pass.

A connection handed to a request that has not started on it yet still reports idle: it
is neither given to a second request nor closed as surplus in the meantime (httpcore's
pass could do both; the request then retried). The pool speaks HTTP/1.1 only, so a
connection serves one request at a time.
"""

from __future__ import annotations

import httpcore
from httpcore import AsyncConnectionInterface


class LinearConnectionPool(httpcore.AsyncConnectionPool):
    """An HTTP/1.1-only ``httpcore.AsyncConnectionPool`` whose assignment pass is O(n)."""

    def __init__(self, **options) -> None:
        options["http1"], options["http2"] = True, False
        super().__init__(**options)

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        reserved = {
            id(pool_request.connection)
            for pool_request in self._requests
            if pool_request.connection is not None
        }
        kept: list[AsyncConnectionInterface] = []
        idle: list[AsyncConnectionInterface] = []  # unreserved, oldest first
        for connection in self._connections:
            if connection.is_closed():
                continue
            if connection.has_expired():
                closing.append(connection)
                continue
            kept.append(connection)
            if id(connection) not in reserved and connection.is_idle():
                idle.append(connection)

        surplus = len(idle) - self._max_keepalive_connections
        if surplus > 0:
            evicted, idle = idle[:surplus], idle[surplus:]
            closing.extend(evicted)
            gone = {id(connection) for connection in evicted}
            kept = [connection for connection in kept if id(connection) not in gone]

        taken: set[int] = set()  # idle connections given to a request in this pass
        by_origin: dict[tuple[bytes, bytes, int], list[AsyncConnectionInterface]] = {}
        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            origin = pool_request.request.url.origin
            key = (origin.scheme, origin.host, origin.port)
            if key not in by_origin:  # one scan per origin and pass; popped oldest first
                by_origin[key] = [
                    c for c in reversed(idle) if c.can_handle_request(origin) and c.is_available()
                ]
            candidates = by_origin[key]
            while candidates and id(candidates[-1]) in taken:  # made room for another origin
                candidates.pop()
            if candidates:
                connection = candidates.pop()
                taken.add(id(connection))
            elif len(kept) < self._max_connections:
                connection = self.create_connection(origin)
                kept.append(connection)
            elif spare := [c for c in idle if id(c) not in taken]:
                replaced = spare[0]  # an idle connection to another origin makes room
                taken.add(id(replaced))
                kept.remove(replaced)
                closing.append(replaced)
                connection = self.create_connection(origin)
                kept.append(connection)
            else:
                break  # the pool is full of busy connections: the rest wait as well
            pool_request.assign_to_connection(connection)

        self._connections = kept
        return closing
