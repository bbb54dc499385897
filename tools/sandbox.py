"""Run an untrusted Python snippet in a separate, limited process.

What holds, and how (checked by tests/tools/test_sandbox.py):

- **Process**: a fresh ``python -I -S -u`` (isolated mode, no site-packages, unbuffered) in
  a new temporary directory, its own session (the whole group is killed at the end), an
  environment with nothing from the server (no secrets, no DATABASE_URL).
- **Limits** (``setrlimit``, applied by the bootstrap before any user code runs, rather
  than in a ``preexec_fn``, which is unsafe in a threaded server): CPU seconds (SIGXCPU
  kills), address space (allocation fails with MemoryError), file size (writes fail with
  "File too large"; this also caps stdout/stderr, which go to files), open files, no core
  dumps, and processes (``RLIMIT_NPROC``: no fork, so no ``subprocess``). The parent
  enforces a wall-clock timeout and cuts the output.
- **User**: when the server runs as root the bootstrap drops to a throwaway uid/gid
  (random, unprivileged, no groups), so the snippet cannot touch root-owned files and
  ``RLIMIT_NPROC`` applies. When the server is not root the snippet runs as the server's
  user and CAN read whatever that user can (the database file, settings): that is why the
  tool is disabled by default. Either way world-readable files are readable.
- **Network**: the bootstrap enters a new network namespace (``unshare(CLONE_NEWNET)``; as
  a non-root user through a user namespace when the kernel allows it), where no interface
  is up, so no packet can leave, whatever the code does. As a second layer it replaces
  socket creation, ``ctypes``, ``exec``/``fork``/``posix_spawn`` with functions raising
  ``PermissionError``. The Python layer alone is not a security boundary; the result's
  ``isolation`` field reports whether the namespace held.
- **Files**: regular files the snippet leaves in its directory (at most ``max_files``, each
  within the file-size limit) are returned as artifacts; the directory is then deleted.
  The disk space the snippet may use is bounded only by file size x CPU time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import mimetypes
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine import Artifact

__all__ = ["SandboxLimits", "SandboxResult", "SandboxUnavailable", "pick_interpreter", "run_python"]

SANDBOX_UID_RANGE = (200_000, 260_000)
SYSTEM_INTERPRETERS = ("/usr/bin/python3", "/usr/local/bin/python3")


class SandboxUnavailable(RuntimeError):
    """No way to run the sandbox on this machine (message is shown to the model)."""


_BOOTSTRAP = r"""
import json, os, resource, signal, sys
cfg = json.loads(sys.argv[1])
with open(cfg["code_path"], encoding="utf-8") as fh:
    code = fh.read()

isolation = "none"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) == 0:  # CLONE_NEWNET
        isolation = "netns"
    elif os.geteuid() != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(0x10000000 | 0x40000000) == 0:  # CLONE_NEWUSER | CLONE_NEWNET
            for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                with open("/proc/self/" + path, "w") as fh:
                    fh.write(text)
            isolation = "userns+netns"
    del ctypes, libc
except Exception:
    pass
with open(cfg["status_path"], "w") as fh:
    json.dump({"isolation": isolation}, fh)

cpu = cfg["cpu_seconds"]
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
if os.geteuid() == 0 and cfg.get("uid"):
    os.setgroups([])
    os.setgid(cfg["uid"])
    os.setuid(cfg["uid"])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.umask(0o077)

def _deny(*args, **kwargs):
    raise PermissionError(1, "not permitted in the sandbox (no network, no processes)")

import socket, _socket, posix
class _NoSocket(socket.socket):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None:
            _deny()
        super().__init__(family, type, proto, fileno)
socket.socket = socket.SocketType = _socket.socket = _socket.SocketType = _NoSocket
socket.fromfd = _socket.dup = _deny
for mod in (os, posix):
    for name in ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp",
                 "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                 "execlpe", "kill", "killpg"):
        if hasattr(mod, name):
            setattr(mod, name, _deny)
import _posixsubprocess
_posixsubprocess.fork_exec = _deny
for name in ("ctypes", "_ctypes", "cffi", "_cffi_backend"):
    sys.modules[name] = None
del socket, _socket, posix, _posixsubprocess, mod, name, fh

import linecache, traceback
linecache.cache["snippet.py"] = (len(code), None, code.splitlines(True), "snippet.py")
sys.argv = ["snippet.py"]
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    exec(compile(code, "snippet.py", "exec"), namespace)
except SystemExit as exc:
    raise
except BaseException as exc:
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
"""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 5
    wall_seconds: float = 15.0
    memory_mb: int = 256
    max_file_bytes: int = 10 * 1024 * 1024
    max_files: int = 10
    max_output_chars: int = 10_000
    interpreter: str | None = None  # None: see pick_interpreter()


@dataclass
class SandboxResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cpu_exceeded: bool = False
    output_truncated: bool = False
    isolation: str = "none"  # "netns", "userns+netns" or "none" (Python-level guard only)
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


def _read_head(path: Path, limit_chars: int) -> tuple[str, bool]:
    with path.open("rb") as fh:
        data = fh.read(limit_chars * 4 + 4)
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit_chars:
        return text[:limit_chars], True
    more = path.stat().st_size > len(data)
    return text, more


def _collect_files(work: Path, limits: SandboxLimits) -> tuple[list[Artifact], list[str]]:
    artifacts: list[Artifact] = []
    skipped: list[str] = []
    for root, dirs, files in os.walk(work, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root, name)
            rel = str(path.relative_to(work))
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            if len(artifacts) >= limits.max_files or info.st_size > limits.max_file_bytes:
                skipped.append(rel)
                continue
            with path.open("rb") as fh:
                content = fh.read(limits.max_file_bytes + 1)
            mime = mimetypes.guess_type(rel)[0] or "application/octet-stream"
            artifacts.append(Artifact(rel, mime, len(content), None, content))
    return artifacts, skipped


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
    readable once privileges are dropped)."""
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


def _sandbox_env(work: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


async def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` under ``limits``; never raises for anything the snippet does.

    Raises :class:`SandboxUnavailable` when no usable interpreter exists.
    """
    limits = limits or SandboxLimits()
    interpreter = pick_interpreter(limits.interpreter)
    base = Path(tempfile.mkdtemp(prefix="agentsite-sandbox-"))
    try:
        return await _run(code, limits, base, interpreter)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _run(code: str, limits: SandboxLimits, base: Path, interpreter: str) -> SandboxResult:
    work = base / "work"
    work.mkdir(mode=0o700)
    code_path = base / "snippet.py"
    code_path.write_text(code, encoding="utf-8")
    uid = 0
    if os.geteuid() == 0:
        uid = SANDBOX_UID_RANGE[0] + secrets.randbelow(SANDBOX_UID_RANGE[1] - SANDBOX_UID_RANGE[0])
        os.chown(work, uid, uid)
    config = {
        "code_path": str(code_path),
        "status_path": str(base / "status.json"),
        "cpu_seconds": int(limits.cpu_seconds),
        "memory_bytes": int(limits.memory_mb) * 1024 * 1024,
        "file_bytes": int(limits.max_file_bytes),
        "uid": uid,
    }
    out_path, err_path = base / "stdout", base / "stderr"
    timed_out = False
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            interpreter, "-I", "-S", "-u", "-c", _BOOTSTRAP, json.dumps(config),
            stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=err, cwd=work,
            env=_sandbox_env(work), start_new_session=True,
        )  # fmt: skip
        try:
            await asyncio.wait_for(proc.wait(), timeout=limits.wall_seconds)
        except TimeoutError:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    stdout, cut_out = _read_head(out_path, limits.max_output_chars)
    stderr, cut_err = _read_head(err_path, limits.max_output_chars)
    isolation = "none"
    with contextlib.suppress(OSError, ValueError):
        isolation = json.loads((base / "status.json").read_text())["isolation"]
    artifacts, skipped = _collect_files(work, limits)
    code_ = proc.returncode
    return SandboxResult(
        exit_code=code_,
        stdout=stdout.rstrip("\n"),
        stderr=stderr.rstrip("\n"),
        timed_out=timed_out,
        cpu_exceeded=code_ in (-signal.SIGXCPU, -signal.SIGKILL) and not timed_out,
        output_truncated=cut_out or cut_err,
        isolation=isolation,
        artifacts=artifacts,
        skipped_files=skipped,
    )
