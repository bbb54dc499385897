"""Plan mode in the browser: choose it, watch the steps run in place, reload mid-plan,
read the verdict and the answer, on a desktop and on a phone-width screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from engine.plan import prompts
from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

PLAN = {
    "steps": [
        {"id": "tokyo", "task": "Weather in Tokyo", "dependencies": []},
        {"id": "paris", "task": "Weather in Paris", "dependencies": []},
        {"id": "compare", "task": "Compare both cities", "dependencies": ["tokyo", "paris"]},
    ]
}
VERDICT = {"achieved": True, "confidence": 0.92, "final_answer": "", "reasoning": "Both found."}
ANSWER = "Tokyo is **warmer** than Paris today."


def plan_rules() -> list[dict]:
    def system(prompt: str, response: dict) -> dict:
        return {"contains": prompt[:60], "in": "any", "response": response}

    def step(task: str, response: dict) -> dict:
        return {"contains": f"## Your step\n{task}", "response": response}

    return [
        system(
            prompts.planner_system_prompt(10),
            {"tool_calls": [{"name": "submit_plan", "arguments": PLAN}]},
        ),
        system(
            prompts.ANALYZER_SYSTEM_PROMPT,
            {"tool_calls": [{"name": "submit_analysis", "arguments": VERDICT}]},
        ),
        system(prompts.ANSWER_SYSTEM_PROMPT, {"content": ANSWER}),
        step("Weather in Tokyo", {"content": "Tokyo: 18 °C, sunny."}),
        # Held until the test releases it: the step is provably running meanwhile.
        step("Weather in Paris", {"content": "Paris: 9 °C, rain.", "after_release": "paris"}),
        step("Compare both cities", {"content": "Tokyo is 9 degrees warmer."}),
    ]


def choose_plan_mode(page: Page) -> None:
    with page.expect_response(lambda r: r.url.endswith("/mode/") and r.ok):
        page.get_by_role("combobox", name="Agent mode").select_option("plan")


def test_a_plan_runs_live_survives_a_reload_and_answers(
    chat_page: Page, llm: ScriptedLLM, screenshot
):
    llm.script(rules=plan_rules())
    new_conversation(chat_page)
    choose_plan_mode(chat_page)
    send(chat_page, "Compare the weather in Tokyo and Paris")
    run_id = latest_run(chat_page)

    plan = chat_page.locator(f"#plan-{run_id}-1")
    expect(plan).to_be_visible()
    tokyo, paris, compare = (plan.locator(f"#plan-{run_id}-1-{i}") for i in range(3))
    expect(tokyo).to_have_class("plan-step done depth-0")
    expect(tokyo).to_contain_text("Weather in Tokyo")
    expect(paris).to_have_class("plan-step running depth-0")
    expect(compare).to_have_class("plan-step waiting depth-1")
    expect(compare).to_contain_text("after tokyo, paris")

    chat_page.reload()  # mid-plan: the same plan, the same states, still live
    expect(tokyo).to_have_class("plan-step done depth-0")
    expect(paris).to_have_class("plan-step running depth-0")
    tokyo.locator("summary").click()
    expect(tokyo).to_contain_text("Tokyo: 18 °C, sunny.")

    llm.release("paris")
    wait_finished(chat_page, run_id)
    expect(paris).to_have_class("plan-step done depth-0")
    expect(compare).to_have_class("plan-step done depth-1")
    expect(chat_page.locator(f"#plan-{run_id}-1-verdict")).to_contain_text("Goal met")
    expect(chat_page.locator(f"#answer-{run_id}")).to_contain_text("Tokyo is warmer than Paris")
    screenshot(chat_page)
    # The select keeps the conversation's mode after a reload.
    chat_page.reload()
    expect(chat_page.get_by_role("combobox", name="Agent mode")).to_have_value("plan")


def test_the_plan_fits_a_phone_screen(chat_page: Page, llm: ScriptedLLM, screenshot):
    chat_page.set_viewport_size({"width": 390, "height": 844})
    llm.script(rules=plan_rules())
    new_conversation(chat_page)
    choose_plan_mode(chat_page)
    send(chat_page, "Compare the weather in Tokyo and Paris")
    run_id = latest_run(chat_page)
    llm.release("paris")
    wait_finished(chat_page, run_id)

    compare = chat_page.locator(f"#plan-{run_id}-1-2")
    expect(compare).to_be_visible()
    box = compare.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390
    overflow = chat_page.evaluate("() => document.documentElement.scrollWidth")
    assert overflow <= 390
    screenshot(chat_page)
