"""Plan mode through the API: the mode per conversation and per message, a whole plan run
streamed as documented events, steps on the models their hints ask for, and Auto.

The LLM is the scripted OpenAI-compatible server over loopback: its rules tell the
planner, the steps, the analyzer and the answer writer apart by their prompts (steps run
at the same time, so replies in call order could not say which step gets which).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from conversations.models import Run
from conversations.runs import launcher
from engine.plan import prompts
from llms.models import LLMModel, RoleAssignment

from .test_sse import is_done

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "Compare the weather in Tokyo and Paris"
PLAN = {
    "steps": [
        {"id": "tokyo", "task": "Weather in Tokyo", "dependencies": [], "model_hint": "fast"},
        {"id": "paris", "task": "Weather in Paris", "dependencies": []},
        {"id": "compare", "task": "Compare both", "dependencies": ["tokyo", "paris"]},
    ]
}
ANSWER = "Tokyo is **warmer** than Paris."
VERDICT = {"achieved": True, "confidence": 0.9, "final_answer": "", "reasoning": "All there."}


def system_rule(prompt: str, response: dict) -> dict:
    return {"contains": prompt[:60], "in": "any", "response": response}


def step_rule(task: str, answer: str) -> dict:
    return {"contains": f"## Your step\n{task}", "response": {"content": answer}}


def plan_rules() -> list[dict]:
    return [
        system_rule(
            prompts.planner_system_prompt(10),
            {"tool_calls": [{"name": "submit_plan", "arguments": PLAN}]},
        ),
        system_rule(
            prompts.ANALYZER_SYSTEM_PROMPT,
            {"tool_calls": [{"name": "submit_analysis", "arguments": VERDICT}]},
        ),
        system_rule(
            prompts.ANSWER_SYSTEM_PROMPT,
            {
                "content": "Tokyo is **warmer** than Paris.",
                "chunks": ["Tokyo is ", "**warmer** ", "than Paris."],
            },
        ),  # fmt: skip
        step_rule("Weather in Tokyo", "Tokyo: 18 °C"),
        step_rule("Weather in Paris", "Paris: 9 °C"),
        step_rule("Compare both", "Tokyo is 9 degrees warmer."),
    ]


def text(request: dict) -> str:
    """What the model was sent: its messages' text."""
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def phase(events, name: str) -> dict:
    return next(e.data for e in events if e.event == "phase" and e.data["phase"] == name)


async def start(http, content: str, **body) -> dict:
    created = await http.post("/api/conversations", json={"title": "plan", **body})
    assert created.status_code == 201, created.text
    conversation = created.json()
    posted = await http.post(
        f"/api/conversations/{conversation['id']}/messages", json={"content": content}
    )
    assert posted.status_code == 202, posted.text
    http.run_ids.append(posted.json()["run_id"])
    return conversation


async def test_a_plan_runs_its_steps_and_streams_one_answer(
    http, sse, token, chat_model, llm_server
):
    llm_server.set_rules(plan_rules())
    conversation = await start(http, GOAL, mode="plan")
    assert conversation["mode"] == "plan"

    stream = await sse(f"/api/conversations/{conversation['id']}/events", token=token)
    events = await stream.events_until(is_done, timeout=20)

    phases = [e.data["phase"] for e in events if e.event == "phase"]
    assert phases[:4] == ["planning", "executing", "analyzing", "analyzed"]
    executing = next(
        e.data for e in events if e.event == "phase" and e.data["phase"] == "executing"
    )
    assert [s["id"] for s in executing["plan"]["steps"]] == ["tokyo", "paris", "compare"]
    progress = [e.data for e in events if e.event == "step_progress"]
    ends = {p["step_id"]: p for p in progress if p["event"] == "completed"}
    assert ends["tokyo"]["result"] == "Tokyo: 18 °C" and ends["paris"]["result"] == "Paris: 9 °C"
    # "compare" starts only once both steps it depends on have completed.
    order = [(p["step_id"], p["event"]) for p in progress]
    assert order.index(("compare", "started")) > order.index(("tokyo", "completed"))
    assert order.index(("compare", "started")) > order.index(("paris", "completed"))
    analyzed = phase(events, "analyzed")
    assert analyzed["achieved"] is True and analyzed["confidence"] == 0.9

    answer = [e.data for e in events if e.event == "answer"]
    streamed = "".join(a.get("content", "") for a in answer if a["status"] == "delta")
    assert streamed == "Tokyo is **warmer** than Paris."
    assert events[-1].event == "done" and events[-1].data["answer"] == streamed
    # The answer writer saw every step's result.
    writer = next(r for r in llm_server.requests if prompts.ANSWER_SYSTEM_PROMPT[:60] in text(r))
    assert "Tokyo: 18 °C" in text(writer) and "Paris: 9 °C" in text(writer)

    detail = (await http.get(f"/api/conversations/{conversation['id']}")).json()
    assert detail["runs"][0]["status"] == "succeeded"
    assert detail["messages"][-1]["content"] == streamed


async def test_a_step_runs_on_the_model_its_hint_asks_for(
    http, sse, token, user, chat_model, llm_server
):
    fast = await sync_to_async(LLMModel.objects.create)(
        provider=chat_model.provider,
        model_id="fast-model",
        display_name="Fast",
        abilities=chat_model.abilities,
        context_window=32_000,
    )
    await sync_to_async(RoleAssignment.objects.create)(role="fast", model=fast)
    llm_server.set_rules(plan_rules())
    conversation = await start(http, GOAL, mode="plan")

    stream = await sse(f"/api/conversations/{conversation['id']}/events", token=token)
    events = await stream.events_until(is_done, timeout=20)

    started = {
        e.data["step_id"]: e.data["model"]
        for e in events
        if e.event == "step_progress" and e.data["event"] == "started"
    }
    assert "Fast" in started["tokyo"]  # model_hint "fast"
    assert started["paris"] == started["compare"] == str(chat_model)  # no hint: the chat's
    asked = {r["model"] for r in llm_server.requests if "## Your step\nWeather in Tokyo" in text(r)}
    assert asked == {"fast-model"}


async def test_the_mode_can_be_chosen_per_message_and_changed(http, chat_model, llm_server):
    created = (await http.post("/api/conversations", json={"title": "modes"})).json()
    assert created["mode"] == "react"
    url = f"/api/conversations/{created['id']}"

    refused = await http.patch(url, json={"mode": "fastest"})
    assert refused.status_code == 400 and "mode" in refused.json()["fields"]
    assert (await http.patch(url, json={"mode": "auto"})).json()["mode"] == "auto"

    llm_server.set_rules(plan_rules())
    posted = await http.post(f"{url}/messages", json={"content": GOAL, "mode": "plan"})
    assert posted.status_code == 202
    http.run_ids.append(posted.json()["run_id"])
    await asyncio.wait_for(launcher.wait_for(posted.json()["run_id"]), 20)
    run = await sync_to_async(Run.objects.get)(pk=posted.json()["run_id"])
    assert run.mode == "plan" and run.status == Run.Status.SUCCEEDED
    answer = await run.messages.filter(role="assistant").aget()
    assert answer.content == ANSWER
    bad = await http.post(f"{url}/messages", json={"content": "hi", "mode": "x"})
    assert bad.status_code == 400


async def test_auto_routes_a_plain_question_to_react(http, sse, token, chat_model, llm_server):
    llm_server.set_rules(
        [
            system_rule(
                prompts.ROUTER_SYSTEM_PROMPT,
                {"content": json.dumps({"mode": "react", "reason": "one question"})},
            )
        ]
    )
    llm_server.push("Hello! How can I help?")
    conversation = await start(http, "Hello", mode="auto")

    stream = await sse(f"/api/conversations/{conversation['id']}/events", token=token)
    events = await stream.events_until(is_done, timeout=20)

    assert events[0].event == "phase" and events[0].data == {"phase": "routed", "mode": "react"}
    assert not [e for e in events if e.event == "step_progress"]
    assert events[-1].data["answer"] == "Hello! How can I help?"


@pytest.mark.parametrize("mode", ["auto", "plan"])
async def test_a_small_model_runs_in_react_mode_and_says_why(
    mode, http, sse, token, chat_model, llm_server
):
    """A 135M model's plans are nonsense steps of minutes each: it is never given one."""
    chat_model.small = True
    await chat_model.asave(update_fields=["small"])
    llm_server.push("Hello! How can I help?")
    conversation = await start(http, "Compare three cities in detail", mode=mode)

    stream = await sse(f"/api/conversations/{conversation['id']}/events", token=token)
    events = await stream.events_until(is_done, timeout=20)

    assert events[0].data["phase"] == "routed" and events[0].data["mode"] == "react"
    assert "larger model" in events[0].data["reason"]
    assert events[-1].data["answer"] == "Hello! How can I help?"
    assert not [r for r in llm_server.requests if prompts.ROUTER_SYSTEM_PROMPT[:60] in text(r)]
    assert not [e for e in events if e.event == "step_progress"]


async def test_a_follow_up_mid_plan_skips_what_has_not_started_and_replans(
    http, sse, token, chat_model, llm_server
):
    rules = plan_rules()
    held = {"content": "Paris: 9 °C", "after_release": "paris"}
    rules[4] = {"contains": "## Your step\nWeather in Paris", "response": held}
    llm_server.set_rules(rules)
    conversation = await start(http, GOAL, mode="plan")
    stream = await sse(f"/api/conversations/{conversation['id']}/events", token=token)
    await stream.events_until(lambda e: e.data.get("step_id") == "paris")  # it started

    followup = await http.post(
        f"/api/conversations/{conversation['id']}/messages", json={"content": "Add London too"}
    )
    assert followup.json()["injected"] is True
    await stream.events_until(lambda e: e.event == "inject")
    llm_server.release("paris")
    events = await stream.events_until(is_done, timeout=20)

    skipped = [e.data["step_id"] for e in events if e.data.get("event") == "skipped"]
    assert skipped == ["compare"]  # it waited for Paris: never started
    replanning = phase(events, "replanning")
    assert replanning["round"] == 2
    assert events[-1].event == "done" and events[-1].data["status"] == "succeeded"
    planner_requests = [
        r for r in llm_server.requests if prompts.planner_system_prompt(10)[:60] in text(r)
    ]
    assert len(planner_requests) == 2 and "Add London too" in text(planner_requests[1])
