"""Which agent answers a run: one ReAct loop, or a plan of steps on the models their
hints ask for (DESIGN.md section 2), or, in Auto mode, whichever a quick call picks.

The models of plan mode's roles are the ones an admin assigned to the user's groups
(``llms.selectors.role_models_for_user``); a role nobody assigned is answered by the
run's own model, so a plan never fails for want of a "fast" model.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.models import AgentMode, Run
from engine import LLM, AgentResult, ChatMessage, ModelRegistry, ReActAgent
from engine.events import Phase
from engine.plan import PlanAgent, choose_mode
from llms.selectors import role_models_for_user
from llms.services import build_llm

logger = logging.getLogger(__name__)

SMALL_MODEL_NO_PLAN = gettext_noop(
    "Plan mode needs a larger model: this small model answers step by step."
)


@dataclass
class RunModels:
    """The run's mode and, for plan and auto, its models by role (clients to close)."""

    mode: str
    registry: ModelRegistry | None = None
    clients: list[Any] = field(default_factory=list)  # role models' clients, not the run's

    async def aclose(self) -> None:
        for client in self.clients:
            if hasattr(client, "aclose"):
                await client.aclose()


def run_mode(run: Run) -> str:
    return run.mode or run.conversation.mode or AgentMode.REACT


def run_models(run: Run, model: Any, llm: LLM) -> RunModels:
    """The models plan steps may use: the run's own as the default, the user's role
    models beside it (database reads: called while the run is prepared)."""
    mode = run_mode(run)
    if mode == AgentMode.REACT:
        return RunModels(mode)
    registry = ModelRegistry()
    own_roles = []
    others: dict[int, tuple[Any, list[str]]] = {}
    for role, role_model in role_models_for_user(user=run.conversation.owner).items():
        if role_model.pk == model.pk:
            own_roles.append(role)
        else:
            others.setdefault(role_model.pk, (role_model, []))[1].append(role)
    registry.register(str(model), llm, roles=own_roles, default=True)
    clients = []
    for role_model, roles in others.values():
        client = build_llm(model=role_model)
        clients.append(client)
        registry.register(f"{role_model} (#{role_model.pk})", client, roles=roles)
    return RunModels(mode, registry, clients)


async def agent_for(
    models: RunModels,
    *,
    llm: LLM,
    tools: Any,
    query: str,
    history: Sequence[ChatMessage],
    rewrite_answer: bool,
    on_event: Any,
    small_model: bool = False,
    **common: Any,
) -> ReActAgent | PlanAgent:
    """The agent for the run's mode; Auto asks the fast model (any failure: ReAct).

    A small model runs in ReAct mode whatever was asked, and the ``routed`` phase says
    why: its plans are nonsense steps that take minutes each.
    """
    mode = models.mode
    if mode != AgentMode.REACT and small_model:
        mode = AgentMode.REACT
        await on_event(Phase("routed", {"mode": mode, "reason": _(SMALL_MODEL_NO_PLAN)}))
    elif mode == AgentMode.AUTO:
        assert models.registry is not None
        router = models.registry.get_by_role("fast")
        mode = await choose_mode(router, query, history)
        await on_event(Phase("routed", {"mode": mode}))
    if mode == AgentMode.PLAN:
        assert models.registry is not None
        return PlanAgent(models.registry, tools, llm=llm, on_event=on_event, **common)
    return ReActAgent(
        llm,
        tools,
        on_event=on_event,
        rewrite_answer=rewrite_answer,
        small_model=small_model,
        **common,
    )


async def agent_run(
    agent: ReActAgent | PlanAgent,
    query: str,
    history: Sequence[ChatMessage],
    *,
    resume: Sequence[ChatMessage] = (),
    go_on: bool = False,
    images: Sequence[dict[str, Any]] = (),
) -> AgentResult:
    """Run ``agent``; ``resume`` is the trace of the paused run it goes on from (a
    resumed run is a ReAct run: plan mode keeps no trace to go on from), or with
    ``go_on`` its own trace, handed over by a worker that stopped (runs/handover.py)."""
    if not resume and not images:
        return await agent.run(query, history)
    if not isinstance(agent, ReActAgent):
        raise TypeError("only a ReAct agent goes on from a run's trace or reads images")
    return await agent.run(query, history, resume=resume, go_on=go_on, images=images)


def trace_to_keep(agent: ReActAgent | PlanAgent, result: AgentResult) -> list[ChatMessage]:
    """What a run keeps to be resumed later: a paused ReAct loop's trace; nothing for a
    run that did not pause, or a plan (whose steps' loops are gone with it)."""
    if result.status != Run.Status.PAUSED or not isinstance(agent, ReActAgent):
        return []
    return result.trace
