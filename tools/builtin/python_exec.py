"""``python``: run a short Python snippet in the sandbox (tools/sandbox/).

The sandbox is bubblewrap's (kernel namespaces, a seccomp filter, resource limits): the
snippet sees no file of the app, no socket and no network, and its scratch space is a
size-limited tmpfs gone after the run (tools/sandbox/bwrap.py lists what holds). Without bwrap
the tool refuses to run. Still DISABLED BY DEFAULT: an admin decides that running
model-written code on this machine is wanted. Files the snippet writes in its working
directory become artifacts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings

import tools.sandbox.checks  # noqa: F401  (registers the sandbox's system check)
from core import runtime
from engine import Tool, ToolResult
from tools.artifacts import persist_artifacts
from tools.registry import ToolContext, ToolSpec, register
from tools.sandbox import GRACE_SECONDS, SandboxLimits, SandboxUnavailable, run_python

__all__ = ["SandboxSlots", "python_exec"]

DEFAULTS = SandboxLimits()
MAX_CODE_CHARS = 50_000


class SandboxSlots:
    """Sandboxes running at once on one event loop (a worker's, or the embedded server's):
    each holds its own memory and disk bound, so the host's RAM is bounded by this many of
    them. A part of the process's runtime."""

    def __init__(self) -> None:
        self.semaphore = asyncio.Semaphore(settings.AGENTSITE_SANDBOX_CONCURRENCY)


async def python_exec(code: str, limits: SandboxLimits) -> ToolResult:
    if len(code) > MAX_CODE_CHARS:
        return ToolResult(f"Error: code longer than {MAX_CODE_CHARS:,} characters", is_error=True)
    slots = runtime.part(SandboxSlots).semaphore
    try:
        async with asyncio.timeout(limits.wall_seconds):
            await slots.acquire()
    except TimeoutError:
        return ToolResult(
            f"Error: every Python sandbox of this server is busy "
            f"({settings.AGENTSITE_SANDBOX_CONCURRENCY} run at once); try again shortly.",
            is_error=True,
        )
    try:
        result = await run_python(code, limits)
    except SandboxUnavailable as exc:
        return ToolResult(f"Error: the Python sandbox is unavailable: {exc}", is_error=True)
    finally:
        slots.release()
    failed = result.timed_out or result.cpu_exceeded or result.exit_code != 0
    return ToolResult(result.summary(), "text", result.artifacts, is_error=failed)


def _limits(config: dict[str, Any]) -> SandboxLimits:
    def pick(key: str, default: Any, cast: type) -> Any:
        value = config.get(key)
        return cast(value) if value not in (None, "") else default

    return SandboxLimits(
        cpu_seconds=pick("cpu_seconds", DEFAULTS.cpu_seconds, int),
        wall_seconds=pick("wall_seconds", DEFAULTS.wall_seconds, float),
        memory_mb=pick("memory_mb", DEFAULTS.memory_mb, int),
        max_file_bytes=pick("max_file_bytes", DEFAULTS.max_file_bytes, int),
        max_files=pick("max_files", DEFAULTS.max_files, int),
        max_output_chars=pick("max_output_chars", DEFAULTS.max_output_chars, int),
        disk_mb=pick("disk_mb", DEFAULTS.disk_mb, int),
        max_processes=pick("max_processes", DEFAULTS.max_processes, int),
        interpreter=pick("interpreter", None, str),
    )


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    limits = _limits(config)

    async def run(code: str) -> ToolResult:
        return await python_exec(code, limits)

    tool = Tool(
        name="python",
        description=(
            "Run a short Python 3 script (standard library only; no network, threads or "
            f"subprocesses, {limits.cpu_seconds} s CPU, {limits.memory_mb} MB memory) and "
            "return what it prints. Files it writes in the current directory (e.g. "
            "report.html, chart.svg, data.csv) are shown to the user as downloads."
        ),
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python source to run"}},
            "required": ["code"],
        },
        func=run,
        timeout=limits.wall_seconds + GRACE_SECONDS + 5,
    )
    return persist_artifacts([tool], context)


SPEC = register(
    ToolSpec(
        name="python",
        description="Run Python snippets in a sandbox (disabled by default: see tools/sandbox/).",
        build=build,
        enabled_by_default=False,
        config_schema={
            "type": "object",
            "properties": {
                "cpu_seconds": {"type": "integer", "minimum": 1, "maximum": 300},
                "wall_seconds": {"type": "number", "minimum": 1, "maximum": 600},
                "memory_mb": {"type": "integer", "minimum": 32, "maximum": 8192},
                "max_file_bytes": {"type": "integer", "minimum": 1024},
                "max_files": {"type": "integer", "minimum": 0, "maximum": 100},
                "max_output_chars": {"type": "integer", "minimum": 100},
                "disk_mb": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 4096,
                    "description": "Size of the snippet's scratch tmpfs (/tmp), in RAM.",
                },
                "max_processes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 64,
                    "description": "Processes and threads the snippet may have (1: none).",
                },
                "interpreter": {
                    "type": "string",
                    "description": "Python executable to run (default: this one, or the "
                    "system's when privileges are dropped); its installation is mounted "
                    "read-only in the sandbox.",
                },
            },
        },
        default_config={
            "cpu_seconds": DEFAULTS.cpu_seconds,
            "wall_seconds": DEFAULTS.wall_seconds,
            "memory_mb": DEFAULTS.memory_mb,
            "max_file_bytes": DEFAULTS.max_file_bytes,
            "max_files": DEFAULTS.max_files,
            "max_output_chars": DEFAULTS.max_output_chars,
            "disk_mb": DEFAULTS.disk_mb,
            "max_processes": DEFAULTS.max_processes,
        },
    )
)
