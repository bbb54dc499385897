"""Run an untrusted Python snippet in a kernel-enforced sandbox (bubblewrap).

The boundary is the kernel's, set up by bubblewrap (:mod:`tools.sandbox.bwrap` lists exactly what
the sandbox sees and which limits hold; tests/tools/test_sandbox_escapes.py tries each
escape from inside):

- **Filesystem**: only ``/usr`` (and the interpreter's installation) read-only, a minimal
  read-only ``/dev`` and a private ``/tmp`` tmpfs of ``disk_mb``, gone when the run ends.
  Nothing of the app (database, media root, source tree, secrets) and no socket file.
- **Sockets**: a network namespace with only a down loopback, and a seccomp filter
  (:mod:`tools.sandbox.seccomp`) that makes ``socket()``/``socketpair()`` fail with EPERM.
- **Limits**: CPU seconds, address space, file size, open files and processes, set with
  ``prlimit`` for every process in the sandbox; the tmpfs size bounds the disk (RAM) it
  can fill; the runner inside and this process both enforce the wall clock.
- **User**: when the server runs as root, bubblewrap itself runs under a throwaway uid
  (random, unprivileged, no groups), so even a kernel bug in the namespaces leaves it a
  nobody; otherwise as the server's user, in a user namespace without capabilities.

Without bwrap the tool refuses to run (:class:`SandboxUnavailable`); there is no fallback
(and :mod:`tools.sandbox.checks` warns at ``manage.py check``).
Inside, :mod:`tools.sandbox.runner` is PID 1: it runs the snippet (prefixed by
:mod:`tools.sandbox.bootstrap`), kills what the snippet left, and reports the files left
in ``/tmp/work`` on a pipe only it holds. Those become artifacts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import mimetypes
import os
import secrets
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from engine import Artifact
from tools.sandbox import bwrap
from tools.sandbox.seccomp import SeccompUnavailable, filter_fd

__all__ = [
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "pick_interpreter",
    "run_python",
    "sandbox_problems",
]

SANDBOX_UID_RANGE = (200_000, 260_000)
SYSTEM_INTERPRETERS = ("/usr/bin/python3", "/usr/local/bin/python3")
SETPRIV = "/usr/bin/setpriv"
# Beyond the wall clock: the runner's start, and the report of up to max_files files.
GRACE_SECONDS = 10.0
_HERE = Path(__file__).resolve().parent
RUNNER_SOURCE = (_HERE / "runner.py").read_text(encoding="utf-8")
BOOTSTRAP_SOURCE = (_HERE / "bootstrap.py").read_text(encoding="utf-8")


class SandboxUnavailable(RuntimeError):
    """No way to run the sandbox on this machine (message is shown to the model)."""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 5
    wall_seconds: float = 15.0
    memory_mb: int = 256
    max_file_bytes: int = 10 * 1024 * 1024
    max_files: int = 10
    max_output_chars: int = 10_000
    disk_mb: int = 64  # the /tmp tmpfs: everything the snippet writes, in RAM
    max_processes: int = 1  # the snippet's own included: 1 means no fork, no thread
    interpreter: str | None = None  # None: see pick_interpreter()


@dataclass
class SandboxResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cpu_exceeded: bool = False
    output_truncated: bool = False
    isolation: str = "bwrap"  # "bwrap+seccomp" when the seccomp filter was loaded too
    artifacts: list[Artifact] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The observation the model sees."""
        parts: list[str] = []
        if self.timed_out:
            parts.append("Killed: wall-clock time limit exceeded.")
        elif self.cpu_exceeded:
            parts.append("Killed: CPU time limit exceeded.")
        elif self.exit_code not in (0, None):
            parts.append(f"Exit code {self.exit_code}.")
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr}")
        if self.output_truncated:
            parts.append("[output truncated]")
        if self.artifacts:
            files = ", ".join(f"{a.name} ({a.size:,} bytes)" for a in self.artifacts)
            parts.append(f"Files written: {files}")
        if self.skipped_files:
            parts.append(f"Files not kept (too many or too large): {', '.join(self.skipped_files)}")
        return "\n".join(parts) or "(no output)"


# --------------------------------------------------------------------------- interpreter


def _world_accessible(executable: str) -> bool:
    """Whether a throwaway uid can run ``executable`` (every parent directory searchable)."""
    path = Path(os.path.realpath(executable))
    try:
        if path.stat().st_mode & 0o005 != 0o005:
            return False
        return all(parent.stat().st_mode & 0o001 for parent in path.parents)
    except OSError:
        return False


def pick_interpreter(configured: str | None = None) -> str:
    """The Python the sandbox runs: the configured one, else this one when the sandbox user
    can reach its standard library, else the system's (pyenv installs under /root are not
    readable by the throwaway uid bubblewrap runs as)."""
    if configured:
        return configured
    if os.geteuid() != 0 or _world_accessible(sys.executable):
        return sys.executable
    for candidate in SYSTEM_INTERPRETERS:
        if os.path.exists(candidate) and _world_accessible(candidate):
            return candidate
    raise SandboxUnavailable(
        "no Python interpreter is readable by the unprivileged sandbox user; set the "
        "tool's 'interpreter' config to one (e.g. /usr/bin/python3)"
    )


def sandbox_problems() -> list[str]:
    """Why the sandbox cannot run, or is weaker than designed, here (system check)."""
    problems: list[str] = []
    try:
        bwrap.bwrap_path()
    except bwrap.BwrapUnavailable as exc:
        problems.append(str(exc))
    try:
        filter_fd_probe = filter_fd()
        os.close(filter_fd_probe)
    except (SeccompUnavailable, OSError) as exc:
        problems.append(f"no seccomp filter (socket() stays callable inside): {exc}")
    return problems


# ----------------------------------------------------------------------------------- run


async def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` under ``limits``; never raises for anything the snippet does.

    Raises :class:`SandboxUnavailable` when bubblewrap or a usable interpreter is missing,
    or when bubblewrap cannot set the sandbox up on this machine.
    """
    limits = limits or SandboxLimits()
    try:
        bwrap_exe = bwrap.bwrap_path()
    except bwrap.BwrapUnavailable as exc:
        raise SandboxUnavailable(str(exc)) from None
    interpreter = pick_interpreter(limits.interpreter)
    seccomp_fd: int | None = None
    with contextlib.suppress(SeccompUnavailable, OSError):
        seccomp_fd = filter_fd()
    report_r, report_w = os.pipe()
    spawned = False
    try:
        argv = ["-I", "-S", "-c", RUNNER_SOURCE]
        disk = int(limits.disk_mb) * 1024 * 1024
        cmd = bwrap.command(bwrap_exe, interpreter, _rlimits(limits), disk, seccomp_fd, argv)
        fds = (report_w,) if seccomp_fd is None else (report_w, seccomp_fd)
        proc = await asyncio.create_subprocess_exec(
            *_throwaway_user(),
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=fds,
            env={},
            start_new_session=True,
        )
        spawned = True
    finally:
        os.close(report_w)
        if not spawned:
            os.close(report_r)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    job = _job(code, limits, report_w)
    isolation = "bwrap" if seccomp_fd is None else "bwrap+seccomp"
    return await _supervise(proc, report_r, job, limits, isolation)


def _rlimits(limits: SandboxLimits) -> bwrap.Rlimits:
    return bwrap.Rlimits(
        cpu_seconds=int(limits.cpu_seconds),
        memory_bytes=int(limits.memory_mb) * 1024 * 1024,
        file_bytes=int(limits.max_file_bytes),
        nproc=1 + max(1, int(limits.max_processes)),  # + the runner, PID 1
    )


def _job(code: str, limits: SandboxLimits, report_fd: int) -> bytes:
    """What the runner reads on its stdin (tools/sandbox/runner.py)."""
    job = {
        "code": code,
        "bootstrap": BOOTSTRAP_SOURCE,
        "report_fd": report_fd,  # the same number inside: bwrap passes descriptors as they are
        "wall_seconds": float(limits.wall_seconds),
        "max_files": int(limits.max_files),
        "max_file_bytes": int(limits.max_file_bytes),
    }
    return json.dumps(job).encode()


def _throwaway_user() -> list[str]:
    """As root, run bubblewrap (and so the sandbox) as a random unprivileged uid/gid.

    Through ``setpriv`` (util-linux): uvloop's subprocess API has no ``user=``, and a
    ``preexec_fn`` is unsafe in a threaded server.
    """
    if os.geteuid() != 0:
        return []
    if not os.access(SETPRIV, os.X_OK):
        raise SandboxUnavailable(f"{SETPRIV} (util-linux) is missing: root cannot drop to a uid")
    low, high = SANDBOX_UID_RANGE
    uid = low + secrets.randbelow(high - low)
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


@dataclass
class _Collected:
    """What came out of one sandbox process: capped output, the report, how it ended."""

    out: tuple[bytes, bool]
    err: tuple[bytes, bool]
    report: bytes
    returncode: int | None
    timed_out: bool


async def _supervise(
    proc: asyncio.subprocess.Process,
    report_r: int,
    job: bytes,
    limits: SandboxLimits,
    isolation: str,
) -> SandboxResult:
    collected = await _collect(proc, report_r, job, limits)
    records, files = _parse_report(collected.report, limits)
    if not records and not collected.timed_out:
        err = collected.err[0].decode("utf-8", errors="replace").strip()
        message = err or f"exit code {collected.returncode}"
        raise SandboxUnavailable(f"bubblewrap could not start the sandbox: {message}")
    done = records[-1] if records and records[-1].get("event") == "done" else {}
    exit_code = done.get("exit_code", collected.returncode)
    timed_out = collected.timed_out or bool(done.get("timed_out"))
    stdout, cut_out = _decode(*collected.out, limits.max_output_chars)
    stderr, cut_err = _decode(*collected.err, limits.max_output_chars)
    return SandboxResult(
        exit_code=exit_code,
        stdout=stdout.rstrip("\n"),
        stderr=stderr.rstrip("\n"),
        timed_out=timed_out,
        cpu_exceeded=exit_code in (-signal.SIGXCPU, -signal.SIGKILL) and not timed_out,
        output_truncated=cut_out or cut_err,
        isolation=isolation,
        artifacts=files,
        skipped_files=[str(name) for name in done.get("skipped", [])][: limits.max_files * 10],
    )


async def _collect(
    proc: asyncio.subprocess.Process, report_r: int, job: bytes, limits: SandboxLimits
) -> _Collected:
    """Feed the job, read the three pipes (capped), and make sure the sandbox is gone:
    on the wall clock, an error or a cancellation (Stop) alike."""
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    output_cap = limits.max_output_chars * 4 + 4
    report_cap = min(limits.max_files * limits.max_file_bytes, limits.disk_mb * 1024 * 1024)
    report_cap += 64 * 1024 + 1024 * limits.max_files
    loop = asyncio.get_running_loop()
    report = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(report, loop=loop), os.fdopen(report_r, "rb", 0)
    )
    readers = asyncio.gather(
        _read_capped(proc.stdout, output_cap),
        _read_capped(proc.stderr, output_cap),
        _read_capped(report, report_cap),
    )
    timed_out = False
    try:
        with contextlib.suppress(OSError):  # bwrap failed before reading its job
            proc.stdin.write(job)
            await proc.stdin.drain()
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout=limits.wall_seconds + GRACE_SECONDS)
        except TimeoutError:
            timed_out = True
        # bwrap's session: its sandboxed child dies with it (--die-with-parent).
        _kill(proc)
        await proc.wait()
        out, err, (raw_report, _) = await readers
    except BaseException:
        _kill(proc)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
            await readers
        raise
    finally:
        transport.close()
    return _Collected(out, err, raw_report, proc.returncode, timed_out)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    """The first ``cap`` bytes, and whether more came (read to the end and dropped)."""
    kept = bytearray()
    more = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        more = more or len(chunk) > room
    return bytes(kept), more


def _decode(data: bytes, more: bool, limit_chars: int) -> tuple[str, bool]:
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit_chars:
        return text[:limit_chars], True
    return text, more


def _parse_report(data: bytes, limits: SandboxLimits) -> tuple[list[dict], list[Artifact]]:
    """The runner's records and files, re-checked (names, count, size); stops at damage."""
    records: list[dict] = []
    files: list[Artifact] = []
    pos = 0
    while (end := data.find(b"\n", pos)) != -1:
        try:
            record = json.loads(data[pos:end])
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        pos = end + 1
        records.append(record)
        if record.get("event") != "file":
            continue
        size = record.get("size")
        if not isinstance(size, int) or size < 0 or pos + size > len(data):
            break
        content, pos = data[pos : pos + size], pos + size
        name = _safe_name(record.get("name"))
        if name and len(files) < limits.max_files and size <= limits.max_file_bytes:
            mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
            files.append(Artifact(name, mime, size, None, content))
    return records, files


def _safe_name(name: object) -> str | None:
    """A relative path without ``..``, as the runner sends it; anything else is dropped."""
    if not isinstance(name, str) or not name or "\0" in name or len(name) > 1000:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in name.split("/")):
        return None
    return str(path)
