"""Stop mid-plan over real HTTP: every running step's request to the provider is closed
(a provider left streaming keeps generating, and billing, after the user pressed Stop)."""

from __future__ import annotations

import asyncio

import pytest

from engine.cancel import CancelledRun, CancelToken
from engine.llm.openai import OpenAICompatibleLLM
from engine.llm.registry import ModelRegistry
from engine.plan import Plan, PlanConfig, PlanExecutor, PlanStep
from engine.tools import ToolRegistry


async def test_stop_closes_the_streams_of_every_running_step(scripted_server) -> None:
    # Each step's reply starts streaming, then stalls.
    scripted_server.set_rules(
        [
            {"contains": "## Your step\nTokyo", "response": {"content": "a b", "hang": 30}},
            {"contains": "## Your step\nParis", "response": {"content": "c d", "hang": 30}},
        ]
    )
    llm = OpenAICompatibleLLM(
        base_url=scripted_server.base_url, api_key="sk-test", model="m", max_retries=0
    )
    registry = ModelRegistry()
    registry.register("m", llm, default=True)
    token = CancelToken()
    plan = Plan([PlanStep("t", "Tokyo"), PlanStep("p", "Paris")])
    executor = PlanExecutor(registry, ToolRegistry([]), llm=llm, config=PlanConfig(), cancel=token)
    try:
        run = asyncio.ensure_future(executor.run(plan, "goal"))
        assert await asyncio.to_thread(scripted_server.wait_for_requests, 2, 5.0)
        token.cancel()
        with pytest.raises(CancelledRun):
            await asyncio.wait_for(run, 5)
        assert await asyncio.to_thread(scripted_server.wait_for_disconnect, 5.0, 2)
    finally:
        await llm.aclose()
