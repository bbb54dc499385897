"""With two MCP servers plus the built-ins the registry passes 12 tools, so the engine's
tool-selection phase runs and the model is offered at most 6 (DESIGN.md section 2)."""

from __future__ import annotations

import json
import sys

import pytest
from asgiref.sync import sync_to_async

from engine import ToolRegistry
from engine.agent import ReActAgent
from engine.events import Phase
from engine.selection import TOOL_SELECTION_MAX, TOOL_SELECTION_THRESHOLD
from testing.scripted_llm import ScriptedLLM
from tests.tools.conftest import TIME_SERVER_STDIO_ARGS
from tools.builtin import calculator, current_time, http_request, python_exec, web_fetch, web_search
from tools.mcp.services import amcp_server_refresh, mcp_tools_for_user
from tools.models import MCPServer
from tools.registry import ToolContext

ENDPOINTS = [
    {
        "name": f"crm_{what}",
        "description": f"CRM: {what} records",
        "url_template": "https://crm.example/",
    }
    for what in ("customers", "invoices", "contacts", "deals")
]


def _registry(user, context: ToolContext) -> ToolRegistry:
    tools = []
    for module in (calculator, current_time, web_fetch, web_search, python_exec):
        tools += module.build(module.SPEC.default_config, context)
    tools += http_request.build({"endpoints": ENDPOINTS}, context)
    tools += mcp_tools_for_user(user=user, context=context)
    return ToolRegistry(tools)


@pytest.mark.django_db(transaction=True)
async def test_many_mcp_tools_trigger_selection(user, mcp_http_url):
    stdio = await MCPServer.objects.acreate(
        name="time", command=sys.executable, args=list(TIME_SERVER_STDIO_ARGS), timeout=20
    )
    http = await MCPServer.objects.acreate(
        name="clock", transport="http", url=mcp_http_url, timeout=20
    )
    for row in (stdio, http):
        assert (await amcp_server_refresh(row)).tool_count == 2
    registry = await sync_to_async(_registry)(user, ToolContext(user_id=user.pk))
    assert len(registry) > TOOL_SELECTION_THRESHOLD
    assert {"time__get_current_time", "clock__convert_time"} <= set(registry.names())

    llm = ScriptedLLM(
        [
            {
                "tool_calls": [
                    {
                        "name": "select_tools",
                        "arguments": {"tools": ["time__get_current_time", "calculator"]},
                    }
                ]
            },
            {
                "tool_calls": [
                    {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
                ]
            },
            "It is evening in Tokyo.",
        ],
        abilities={"tool_call": True},
    )
    events = []
    agent = ReActAgent(llm, registry, on_event=events.append, max_iterations=5)
    result = await agent.run("Tokyo now?")

    phases = [e for e in events if isinstance(e, Phase)]
    assert phases and phases[0].phase == "selecting_tools"
    assert phases[0].extra["total_tools"] == len(registry)

    selection_call, loop_call = llm.calls[0], llm.calls[1]
    assert selection_call["tool_choice"] is not None  # the structured selection call
    catalog = selection_call["messages"][-1].content
    assert "time__get_current_time" in catalog and "crm_deals" in catalog
    offered = [t["function"]["name"] for t in loop_call["tools"]]
    assert len(offered) <= TOOL_SELECTION_MAX
    assert offered == ["calculator", "time__get_current_time"]  # registry order

    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert json.loads(tool_messages[0].content)["timezone"] == "Asia/Tokyo"  # real MCP call
    assert result.answer == "It is evening in Tokyo."
