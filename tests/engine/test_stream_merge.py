"""Answer chunks already read together travel downstream as one delta, in order."""

from __future__ import annotations

import asyncio

from engine.llm.base import ChatDelta, Usage
from engine.streaming import merge_ready


async def test_waiting_text_chunks_become_one_delta_and_the_final_delta_is_kept():
    queue: asyncio.Queue = asyncio.Queue()
    final = ChatDelta(usage=Usage(1, 2, 3), finish_reason="stop")
    end = object()  # whatever follows the held item stays queued
    for item in (ChatDelta(content="b"), ChatDelta(content="c"), final, end):
        queue.put_nowait(item)

    merged, held = merge_ready(ChatDelta(content="a"), queue)

    assert merged.content == "abc"
    assert held is final  # the usage-carrying delta is handled next, not merged away
    assert queue.get_nowait() is end


async def test_a_delta_alone_passes_through_unchanged():
    queue: asyncio.Queue = asyncio.Queue()
    delta = ChatDelta(content="only")
    assert merge_ready(delta, queue) == (delta, None)
    reasoning = ChatDelta(reasoning_content="thinking")
    queue.put_nowait(ChatDelta(content="x"))
    assert merge_ready(reasoning, queue) == (reasoning, None)  # not plain text: as is
    assert queue.qsize() == 1
