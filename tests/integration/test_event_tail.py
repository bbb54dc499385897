"""The Redis event tail under many concurrent appends (team mode's hot path)."""

from __future__ import annotations

import asyncio
import contextlib

from conversations.eventlog import TAIL_CONNECTIONS, RedisTail
from tests.integration.stack import start_redis


async def test_more_concurrent_appends_than_connections_all_land_in_order(tmp_path):
    url, server = await asyncio.to_thread(start_redis, tmp_path)
    try:
        tail = RedisTail(url)
        conversations = range(1, 4 * TAIL_CONNECTIONS + 1)  # 4 appends wait per connection

        async def stream(conversation_id: int) -> None:
            for seq in range(1, 6):
                await tail.append(conversation_id, (seq, 7, "answer", {"content": f"w{seq}"}))

        await asyncio.gather(*(stream(c) for c in conversations))

        for conversation_id in conversations:
            entries = tail.get(conversation_id)
            assert [entry[0] for entry in entries] == [1, 2, 3, 4, 5]
        await tail.drop(1, 2)
        assert [entry[0] for entry in tail.get(1)] == [3, 4, 5]
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop()
