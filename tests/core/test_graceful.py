"""The parts of a graceful stop that need no process: the grace period's split and the
registry of a server's open connections (the processes: tests/integration/test_restarts.py)."""

from __future__ import annotations

import asyncio

from core.graceful import Deadline, OpenClients


def test_runs_get_most_of_the_grace_period_and_the_rest_ends_them():
    deadline = Deadline(started=100.0, grace=25.0)
    assert (deadline.runs_until, deadline.ends_by, deadline.exit_by) == (120.0, 122.5, 125.0)
    short = Deadline(started=0.0, grace=5.0)
    assert short.runs_until == 4.0 and short.exit_by == 5.0
    assert Deadline.left(0.0) == 0.0  # never negative


async def test_every_open_connection_is_closed_and_waited_for():
    clients = OpenClients()
    closed: list[str] = []
    keys: dict[str, int] = {}

    def closer(name: str):
        async def close() -> None:
            closed.append(name)
            # The client answers the close a moment later, and the connection goes.
            asyncio.get_running_loop().call_soon(clients.discard, keys[name])

        return close

    for name in ("socket", "stream"):
        keys[name] = clients.add(closer(name))

    assert await clients.close_all(timeout=5) == 2
    assert sorted(closed) == ["socket", "stream"] and len(clients) == 0

    # One opening while the server closes them is closed at once.
    late_closed = asyncio.Event()

    async def late() -> None:
        late_closed.set()

    clients.discard(clients.add(late))
    await asyncio.wait_for(late_closed.wait(), 5)


async def test_a_connection_that_never_goes_does_not_hold_the_stop():
    clients = OpenClients()

    async def ignore() -> None:
        pass

    clients.add(ignore)
    assert await clients.close_all(timeout=0.05) == 1
    assert len(clients) == 1  # left to the process's end
