"""Every text plan mode sends to a model, in one place so wording is reviewed together."""

from __future__ import annotations

from collections.abc import Sequence

from engine.plan.common import cut
from engine.plan.model import PlanStep
from engine.plan.results import COMPLETED, ExecutionReport

__all__ = [
    "ANALYZER_SYSTEM_PROMPT",
    "ANSWER_SYSTEM_PROMPT",
    "ROUTER_SYSTEM_PROMPT",
    "analyzer_user_prompt",
    "answer_system_prompt",
    "answer_user_prompt",
    "planner_system_prompt",
    "planner_user_prompt",
    "render_rounds",
    "router_user_prompt",
    "step_query",
    "step_system_prompt",
]

NO_HISTORY = "(this is the start of the conversation)"

_PLANNER_PROMPT = """\
You are the planner of an AI assistant. Break the user's goal into steps; each step is \
carried out by its own agent with tools, and steps whose dependencies are done run at the \
same time.

Rules:
- A simple goal needs 2 to 4 steps; never use more than {max_steps}.
- Maximise parallelism: a step depends only on the steps whose results it needs. \
Independent steps have no dependencies.
- Each task must be self-contained: the agent doing it sees only its task and the results \
of its dependencies, not the conversation. Put every name, number, date and constraint it \
needs into the task.
- Write the tasks in the language of the user's goal.
- Do not add a step that only writes the final answer: the results are combined for the \
user afterwards.
- id: a short unique string ("s1", "s2", ...). dependencies: ids of earlier steps.
- tool_hint: the name of the tool the step will most likely need, or null.
- model_hint: "fast" for a simple lookup or transformation, "reasoning" for hard analysis \
or calculation, else null.

Reply with a JSON object: {{"steps": [{{"id": "s1", "task": "...", "dependencies": [], \
"tool_hint": null, "model_hint": null}}]}}"""

_STEP_PROMPT = """\
You carry out one step of a larger plan, on your own: nobody will answer questions, and \
other agents do the other steps.
- Do only your step, with the tools you have; use the results of earlier steps you are \
given instead of redoing their work.
- Your final reply is your step's result, read by the next steps and by the writer of the \
final answer: state the facts, numbers, names and sources found, concisely. If you could \
not do the step, say what is missing and why."""

ANALYZER_SYSTEM_PROMPT = """\
You check whether the work done by an AI assistant's plan achieves the user's goal.
- achieved: true only if the results answer the goal fully (every part of it).
- confidence: how sure you are that the results are enough to answer the goal well, \
from 0 to 1.
- final_answer: the answer to the goal from the results, in the language of the goal \
(empty if they are not enough).
- reasoning: one or two sentences; when the goal is not achieved, say exactly what is \
missing or wrong, so a new plan can fix it.
Judge only from the results shown; do not add facts of your own."""

ANSWER_SYSTEM_PROMPT = """\
You write the final answer to the user's question from the work already done: the \
results of the steps of a plan.

- Present the results directly, as the answer itself. No meta-commentary: do not mention \
plans, steps, agents, tools or "the results provided".
- Use Markdown where it helps: headings, lists, tables, code blocks, links from the results.
- Use only facts supported by the results; if a part could not be found or a step failed, \
say briefly what is missing.
- Take the user's later instructions into account, if there are any.
- Be complete but concise.
- Answer in the same language as the user's question."""

ROUTER_SYSTEM_PROMPT = """\
You decide how an AI assistant will handle the user's request.
- "plan": the request splits into several independent parts that can be worked on at the \
same time (for example: compare several things, research several topics, gather data \
from several sources), then combined.
- "react": anything else: a question, a chat message, a single task, or steps that must \
happen one after the other.
When in doubt, choose "react".
Reply with a JSON object: {"mode": "react" or "plan", "reason": "<a few words>"}."""


def _with_extra(prompt: str, extra: str | None) -> str:
    """The caller's own instructions (persona, date, house rules) come first."""
    return f"{extra.strip()}\n\n{prompt}" if extra and extra.strip() else prompt


def planner_system_prompt(max_steps: int, extra: str | None = None) -> str:
    return _with_extra(_PLANNER_PROMPT.format(max_steps=max_steps), extra)


def _instructions(instructions: Sequence[str]) -> str:
    return "\n".join(f"{n}. {text}" for n, text in enumerate(instructions, 1))


def planner_user_prompt(
    goal: str,
    *,
    history: str,
    catalog: str,
    rounds: str = "",
    reason: str | None = None,
    instructions: Sequence[str] = (),
) -> str:
    parts = [
        f"## Conversation so far\n{history or NO_HISTORY}",
        f"## Goal\n{goal}",
        f"## Tools the step agents have\n{catalog or '(no tools: steps can only reason)'}",
    ]
    if instructions:
        parts.append(
            "## New instructions from the user (sent while the assistant worked; they take "
            f"precedence)\n{_instructions(instructions)}"
        )
    if rounds:
        parts.append(f"## Work done in earlier rounds\n{rounds}")
        if reason:
            parts.append(f"## Why a new plan is needed\n{reason}")
        parts.append(
            "Plan only what is still missing: use the results above instead of redoing "
            "steps that succeeded."
        )
    else:
        parts.append("Make the plan.")
    return "\n\n".join(parts)


def render_rounds(reports: Sequence[ExecutionReport], latest_chars: int, older_chars: int) -> str:
    """Earlier rounds for a replan: every step and how it ended, results cut (the latest
    round to ``latest_chars``, older ones to ``older_chars``)."""
    blocks = []
    for k, report in enumerate(reports):
        limit = latest_chars if k == len(reports) - 1 else older_chars
        lines = [f"### Round {report.round}"]
        for result in report.results:
            head = f"- [{result.step.id}] ({result.status}) {result.step.task}"
            if result.status == COMPLETED:
                lines.append(f"{head}\n  Result: {cut(result.result, limit)}")
            elif result.error:
                lines.append(f"{head}\n  Error: {cut(result.error, limit)}")
            else:
                lines.append(head)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_results(reports: Sequence[ExecutionReport], latest_chars: int, older_chars: int) -> str:
    """The completed steps' results (the latest round's to ``latest_chars``, older ones'
    to ``older_chars``), and one line per step that did not complete."""
    blocks = []
    for k, report in enumerate(reports):
        limit = latest_chars if k == len(reports) - 1 else older_chars
        for result in report.results:
            title = f"### [{result.step.id}] {result.step.task}"
            if len(reports) > 1:
                title += f" (round {report.round})"
            if result.status == COMPLETED:
                blocks.append(f"{title}\n{cut(result.result, limit)}")
            else:
                why = f": {cut(result.error, 300)}" if result.error else ""
                blocks.append(f"{title}\n({result.status}{why})")
    return "\n\n".join(blocks) or "(no step produced a result)"


def step_system_prompt(extra: str | None = None) -> str:
    return _with_extra(_STEP_PROMPT, extra)


def step_query(
    goal: str,
    step: PlanStep,
    dependencies: Sequence[tuple[PlanStep, str]],
    *,
    dependency_chars: int,
    tool_hint: str | None = None,
) -> str:
    """The step agent's query: the goal for context, its task, its dependencies' results
    sharing ``dependency_chars`` evenly."""
    parts = [f"## Overall goal (for context only)\n{goal}", f"## Your step\n{step.task}"]
    if tool_hint:
        parts.append(f"Suggested tool: {tool_hint}")
    if dependencies:
        share = max(1, dependency_chars // len(dependencies))
        blocks = [f"### [{dep.id}] {dep.task}\n{cut(text, share)}" for dep, text in dependencies]
        parts.append("## Results of the steps yours depends on\n" + "\n\n".join(blocks))
    parts.append("Do your step now, then reply with its result.")
    return "\n\n".join(parts)


def analyzer_user_prompt(
    goal: str, *, history: str, results: str, instructions: Sequence[str] = ()
) -> str:
    parts = [f"## Conversation so far\n{history or NO_HISTORY}", f"## Goal\n{goal}"]
    if instructions:
        parts.append(f"## Later instructions from the user\n{_instructions(instructions)}")
    parts.append(f"## Results of the plan's steps\n{results}")
    parts.append("Is the goal achieved?")
    return "\n\n".join(parts)


def answer_system_prompt(extra: str | None = None) -> str:
    return _with_extra(ANSWER_SYSTEM_PROMPT, extra)


def answer_user_prompt(
    goal: str, *, results: str, instructions: Sequence[str] = (), draft: str = ""
) -> str:
    parts = [f"## Question\n{goal}"]
    if instructions:
        parts.append(
            "## Later instructions from the user (they take precedence)\n"
            + _instructions(instructions)
        )
    parts.append(f"## Work done\n{results}")
    if draft:
        parts.append(f"## Draft answer\n{draft}")
    parts.append("Write the final answer to the question.")
    return "\n\n".join(parts)


def router_user_prompt(query: str, history: str) -> str:
    return (
        f"## Conversation so far\n{history or NO_HISTORY}\n\n## Request\n{query}\n\n"
        "Does this request split into independent parts that can run in parallel?"
    )
