"""The bubblewrap command line of the Python sandbox: namespaces, mounts, limits.

bubblewrap (Debian package ``bubblewrap``, ``make system-deps``) sets up the kernel's
isolation; this module only decides what it is asked for. The sandbox gets:

- new user, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all
  --unshare-user``), no nested user namespaces (``--disable-userns``), no capabilities
  (``--cap-drop ALL``), its own session (``--new-session``: no TIOCSTI on the server's
  terminal), and it dies with its parent (``--die-with-parent``);
- a root filesystem that is an empty, read-only tmpfs holding only: ``/usr`` (and the
  ``/bin``, ``/lib*`` links or directories) read-only, the interpreter's installation when
  it lives elsewhere, read-only, a minimal ``/dev`` (read-only, so ``/dev/shm`` cannot be
  written), and ``/tmp``: a new tmpfs of ``disk_bytes`` (the scratch space, cwd
  ``/tmp/work``, ``/var/tmp`` links to it) that disappears with the sandbox. No ``/proc``,
  ``/sys``, ``/run``, ``/var``, ``/etc``, ``/home``, no host ``/tmp``: nothing of the app
  (database, media, source, secrets) and no socket file exists inside;
- resource limits set by ``prlimit`` (util-linux) inside the sandbox, before the first
  Python process, so they bind every process in it: CPU seconds, address space, file size,
  open files, no core files, and processes. ``RLIMIT_NPROC`` counts per user *per user
  namespace* (Linux >= 5.14), so the limit is the sandbox's own, whatever else runs as
  the same user;
- the seccomp filter of :mod:`tools.sandbox.seccomp` (``--seccomp FD``) when libseccomp loads.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MIN_VERSION",
    "PRLIMIT",
    "SCRATCH",
    "SYSTEM_DIRS",
    "WORK",
    "BwrapUnavailable",
    "Rlimits",
    "bwrap_path",
    "command",
    "interpreter_prefix",
]

MIN_VERSION = (0, 8, 0)  # --disable-userns, --size
PRLIMIT = "/usr/bin/prlimit"
SCRATCH = "/tmp"  # the size-limited tmpfs
WORK = "/tmp/work"  # the snippet's cwd: files left here become artifacts
# Host top-level entries the dynamic loader and interpreter may need: on merged-/usr
# systems they are links into /usr (recreated as links), elsewhere read-only binds.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


class BwrapUnavailable(RuntimeError):
    """bubblewrap is missing or too old (message is shown to the model and the admin)."""


@dataclass(frozen=True)
class Rlimits:
    """Per-process limits (``nproc``: processes of the sandbox, its PID 1 included)."""

    cpu_seconds: int
    memory_bytes: int
    file_bytes: int
    nproc: int
    open_files: int = 64

    def prlimit_args(self) -> list[str]:
        cpu = self.cpu_seconds
        return [
            PRLIMIT,
            f"--cpu={cpu}:{cpu + 1}",  # SIGXCPU at the soft limit, SIGKILL a second later
            f"--as={self.memory_bytes}",
            f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}",
            f"--nproc={self.nproc}",
            "--core=0",
            "--",
        ]


def bwrap_path() -> str:
    """The bwrap executable, checked to be recent enough; raises :class:`BwrapUnavailable`."""
    path = shutil.which("bwrap")
    if path is None:
        raise BwrapUnavailable(
            "bubblewrap (bwrap) is not installed; install the Debian package 'bubblewrap' "
            "(make system-deps). The python tool never runs code without it."
        )
    version = _version(path)
    if version < MIN_VERSION:
        found = ".".join(map(str, version))
        wanted = ".".join(map(str, MIN_VERSION))
        raise BwrapUnavailable(f"bubblewrap {found} is too old: the sandbox needs {wanted}+")
    if not os.access(PRLIMIT, os.X_OK):
        raise BwrapUnavailable(f"{PRLIMIT} (util-linux) is missing: it sets the sandbox's limits")
    return path


@functools.cache
def _version(path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run(  # noqa: S603 - a fixed probe of the found executable
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise BwrapUnavailable(f"cannot run {path}: {exc}") from None
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in match.groups()) if match else (0, 0, 0)


def interpreter_prefix(interpreter: str) -> Path | None:
    """The installation directory to mount for ``interpreter``, None when under /usr."""
    real = Path(os.path.realpath(interpreter))
    if real.is_relative_to("/usr"):
        return None
    return real.parents[1]  # <prefix>/bin/python3.x


def command(
    bwrap: str,
    interpreter: str,
    rlimits: Rlimits,
    disk_bytes: int,
    seccomp_fd: int | None,
    argv: list[str],
) -> list[str]:
    """The full command: bwrap, its options, prlimit, then ``interpreter argv...``."""
    args = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
        *("--setenv", "PATH", SANDBOX_PATH),
        *("--setenv", "HOME", WORK),
        *("--setenv", "TMPDIR", SCRATCH),
        *("--setenv", "LANG", "C.UTF-8"),
        *("--setenv", "LC_ALL", "C.UTF-8"),
        *("--ro-bind", "/usr", "/usr"),
        *_system_dirs(),
    ]
    prefix = interpreter_prefix(interpreter)
    if prefix is not None:
        args += ["--ro-bind", str(prefix), str(prefix)]
    args += [
        *("--dev", "/dev"),
        *("--size", str(int(disk_bytes)), "--tmpfs", SCRATCH),
        *("--perms", "0700", "--dir", WORK),
        *("--dir", "/var"),
        *("--symlink", SCRATCH, "/var/tmp"),
        *("--remount-ro", "/dev"),
        *("--remount-ro", "/"),
        *("--chdir", WORK),
    ]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, "--", *rlimits.prlimit_args(), os.path.realpath(interpreter), *argv]


def _system_dirs() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args
