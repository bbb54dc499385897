"""System check: the python tool's sandbox can run on this machine.

A warning, not an error: the tool is off by default and the rest of the site works
without bubblewrap. The tool itself refuses to run code while the check fails
(:class:`tools.sandbox.SandboxUnavailable`): there is no unsandboxed fallback.
"""

from __future__ import annotations

from django.core.checks import Tags, Warning, register

from tools.sandbox import sandbox_problems


@register(Tags.security)
def check_python_sandbox(app_configs, **kwargs) -> list[Warning]:
    """Warn when bubblewrap (or the seccomp layer) is missing."""
    return [
        Warning(
            f"The python tool's sandbox is unavailable or weakened: {problem}",
            hint="Install the Debian packages bubblewrap and libseccomp2 (make system-deps); "
            "until then the python tool refuses to run code.",
            id="tools.W001",
        )
        for problem in sandbox_problems()
    ]
