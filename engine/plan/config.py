"""The numbers of plan mode (ENGINE-NOTES.md, "DAG (plan) mode"), in one object."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PlanConfig"]


@dataclass(frozen=True)
class PlanConfig:
    """Limits of one plan run.

    ``poll_interval`` is how often (seconds) the executor looks for a follow-up while it
    waits for running steps: the interrupt queue cannot wake it.
    """

    concurrency: int = 5
    step_timeout: float = 600.0
    max_step_iterations: int = 15
    dependency_chars: int = 50_000
    analyzer_result_chars: int = 10_000
    max_replans: int = 3
    confidence_target: float = 0.8
    replan_latest_chars: int = 500
    replan_older_chars: int = 200
    max_steps: int = 10
    poll_interval: float = 0.2

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.max_step_iterations < 1:
            raise ValueError("max_step_iterations must be at least 1")
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.max_replans < 0:
            raise ValueError("max_replans must not be negative")
