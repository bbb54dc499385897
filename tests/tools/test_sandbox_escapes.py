"""Issue 28: every escape the attacker used, run from INSIDE the sandbox via the real tool.

No mocks: each test builds the real ``python`` tool, which runs real bubblewrap. Where a
Python-level guard would stop the attempt first, the snippet undoes it (ctypes back, raw
libc calls), so what is tested is the kernel's boundary. Snippets print one ``RESULT``
line of JSON; :func:`run` returns it with the tool's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import stat
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from engine import ToolResult
from tools.builtin.python_exec import SandboxSlots, build
from tools.registry import ToolContext
from tools.sandbox import SandboxLimits, bwrap, pick_interpreter, sandbox_problems
from tools.sandbox.checks import check_python_sandbox

# Generous wall clocks: a busy 2-core machine must not turn a limit into a timeout.
BASE = {"cpu_seconds": 5, "wall_seconds": 60, "memory_mb": 256}

# Undo the Python-level guard: ctypes back, so libc's functions are called directly.
UNGUARD = """
import sys
for _name in ("ctypes", "_ctypes"):
    sys.modules.pop(_name, None)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
"""


async def run(code: str, **config: Any) -> tuple[dict[str, Any], ToolResult]:
    """Run ``code`` through the python tool; its ``RESULT {...}`` line, and the result."""
    (tool,) = build({**BASE, **config}, ToolContext())
    result = await tool.invoke({"code": textwrap.dedent(code)})
    for line in result.content.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :]), result
    raise AssertionError(f"no RESULT line in:\n{result.content}")


def host_processes_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
    return found


# ---------------------------------------------------------------------- the app's files


async def test_app_files_and_host_paths_do_not_exist_inside():
    database = settings.DATABASES["default"]["NAME"]
    paths = {
        "var": str(settings.VAR_DIR),
        "db": str(Path(settings.VAR_DIR) / "db.sqlite3"),
        "test_db": str(database),
        "secret": str(Path(settings.VAR_DIR) / "secret_key"),
        "media": str(settings.MEDIA_ROOT),
        "source": str(settings.BASE_DIR),
        "settings": str(Path(settings.BASE_DIR) / "agentsite" / "settings.py"),
        "home": os.path.expanduser("~"),
        "etc": "/etc/passwd",
        "proc": "/proc/1/environ",
        "sys": "/sys",
        "run": "/run",
        "var_run": "/var/run",
        "var_lib": "/var/lib",
        "pg_socket_dir": "/var/run/postgresql",
        "redis_dir": "/var/run/redis",
        "host_tmp_file": next(str(p) for p in Path(tempfile.gettempdir()).iterdir()),
    }
    code = f"""
    import json, os
    seen = {{}}
    for key, path in {paths!r}.items():
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            seen[key] = "READ"
        except OSError as exc:
            seen[key] = exc.errno
    layout = {{d: sorted(os.listdir(d)) for d in ("/", "/tmp", "/var", "/dev/shm")}}
    print("RESULT", json.dumps({{"seen": seen, "layout": layout, "cwd": os.getcwd()}}))
    """
    found, _ = await run(code)
    assert found["seen"] == {key: errno.ENOENT for key in paths}
    expected_root = {"dev", "tmp", "usr", "var"}
    expected_root |= {d.lstrip("/") for d in bwrap.SYSTEM_DIRS if os.path.lexists(d)}
    prefix = bwrap.interpreter_prefix(pick_interpreter())
    if prefix is not None:
        expected_root.add(prefix.parts[1])
    assert set(found["layout"]["/"]) == expected_root
    assert found["layout"]["/tmp"] == ["work"]  # the private scratch tmpfs, not the host's
    assert found["layout"]["/var"] == ["tmp"]
    assert found["layout"]["/dev/shm"] == []
    assert found["cwd"] == bwrap.WORK


async def test_no_socket_file_and_nothing_writable_outside_the_scratch():
    code = """
    import json, os, stat
    try:
        open("/dev/pts/x", "w")  # a private devpts: ptys only, no files
        pts = "WROTE"
    except OSError as exc:
        pts = exc.errno
    sockets, writable = [], []
    for root, dirs, files in os.walk("/", followlinks=False):
        if os.access(root, os.W_OK) and not root.startswith("/tmp"):
            writable.append(root)
        for name in files + dirs:
            path = os.path.join(root, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    sockets.append(path)
            except OSError:
                pass
    print("RESULT", json.dumps({"sockets": sockets, "writable": writable, "pts": pts}))
    """
    found, _ = await run(code, cpu_seconds=60, wall_seconds=120)
    assert found == {"sockets": [], "writable": ["/dev/pts"], "pts": errno.EACCES}


# ------------------------------------------------------------------------------ sockets


class Listener:
    """A server socket owned by the test, recording whether anyone connected."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.accepted: list[object] = []
        self._stop = threading.Event()
        sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(addr or "unix peer")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def unix_listener() -> Iterator[tuple[str, Listener]]:
    """A Unix-socket server anyone on the host may connect to (0777 directory and socket)."""
    directory = tempfile.mkdtemp(prefix="agentsite-sock-")
    os.chmod(directory, 0o777)
    path = os.path.join(directory, "app.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o777)
    sock.listen()
    listener = Listener(sock)
    probe = socket.socket(socket.AF_UNIX)  # the server really answers on the host
    probe.connect(path)
    probe.close()
    deadline = time.monotonic() + 5
    while not listener.accepted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.accepted
    listener.accepted.clear()
    try:
        yield path, listener
    finally:
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def tcp_listener() -> Iterator[tuple[int, Listener]]:
    listener = Listener(socket.create_server(("127.0.0.1", 0)))
    try:
        yield listener.sock.getsockname()[1], listener
    finally:
        listener.close()


CONNECT_UNIX = """
class sockaddr_un(ctypes.Structure):
    _fields_ = [("sun_family", ctypes.c_ushort), ("sun_path", ctypes.c_char * 108)]

def connect_unix(path):
    fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
    if fd < 0:
        return ["socket", ctypes.get_errno()]
    addr = sockaddr_un(1, path.encode())
    if libc.connect(fd, ctypes.byref(addr), ctypes.sizeof(addr)) < 0:
        return ["connect", ctypes.get_errno()]
    return ["CONNECTED", 0]
"""


async def test_unix_sockets_are_unreachable(unix_listener):
    path, listener = unix_listener
    targets = [path, "/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432"]
    targets += [
        "/tmp/.s.PGSQL.5432",
        "/var/run/redis/redis-server.sock",
        "/run/dbus/system_bus_socket",
    ]
    code = (
        UNGUARD
        + CONNECT_UNIX
        + f"""
import json, os
found = {{p: [os.path.exists(p), connect_unix(p)] for p in {targets!r}}}
print("RESULT", json.dumps(found))
"""
    )
    found, result = await run(code)
    for target in targets:
        visible, (step, err) = found[target]
        assert not visible, target
        assert step != "CONNECTED", target
        if "seccomp" in _isolation():
            assert (step, err) == ("socket", errno.EPERM)  # refused before any lookup
    assert listener.accepted == []


async def test_tcp_to_loopback_is_refused(tcp_listener):
    port, listener = tcp_listener
    code = f"""
    import json, socket
    real_socket = socket.socket.__bases__[0]  # the guard's subclass undone
    try:
        s = real_socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(("127.0.0.1", {port}))
        outcome = "CONNECTED"
    except OSError as exc:
        outcome = exc.errno
    print("RESULT", json.dumps(outcome))
    """
    outcome, _ = await run(code)
    assert outcome != "CONNECTED" and listener.accepted == []
    if "seccomp" in _isolation():
        assert outcome == errno.EPERM


def test_namespaces_alone_hide_sockets_without_seccomp(unix_listener, tcp_listener):
    """Layer check: bwrap's namespaces with no seccomp filter and no Python guard."""
    path, unix = unix_listener
    port, tcp = tcp_listener
    code = f"""
import json, os, socket
out = {{"unix_visible": os.path.exists({path!r})}}
for family, address in ((socket.AF_UNIX, {path!r}), (socket.AF_INET, ("127.0.0.1", {port}))):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(address)
        out[str(family)] = "CONNECTED"
    except OSError as exc:
        out[str(family)] = exc.errno
out["interfaces"] = socket.if_nameindex()
print(json.dumps(out))
"""
    limits = bwrap.Rlimits(cpu_seconds=5, memory_bytes=256 << 20, file_bytes=1 << 20, nproc=2)
    interpreter = pick_interpreter()
    command = bwrap.command(
        bwrap.bwrap_path(), interpreter, limits, 1 << 20, None, ["-I", "-S", "-c", code]
    )
    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=231777", "--regid=231777", "--clear-groups", *command]
    import subprocess

    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["unix_visible"] is False
    assert out[str(int(socket.AF_UNIX))] == errno.ENOENT
    # bwrap brings up the new namespace's own loopback: nobody listens there.
    assert out[str(int(socket.AF_INET))] in (errno.ECONNREFUSED, errno.ENETUNREACH)
    assert out["interfaces"] == [[1, "lo"]]
    assert unix.accepted == [] and tcp.accepted == []


def _isolation() -> str:
    return "bwrap" if sandbox_problems() else "bwrap+seccomp"


# ------------------------------------------------------------------------ disk and /dev/shm


async def test_disk_is_bounded_and_shm_is_read_only():
    marker = f"escape-{secrets.token_hex(6)}"
    code = f"""
    import json, os
    total, error = 0, None
    chunk = b"x" * (1024 * 1024)
    try:
        for n in range(64):
            for i, directory in enumerate((".", "/tmp", "/var/tmp")):
                with open(os.path.join(directory, "{marker}-%d-%d" % (n, i)), "wb") as f:
                    total += f.write(chunk)
    except OSError as exc:
        error = exc.errno
    shm = []
    for path in ("/dev/shm/{marker}", "/{marker}", "/usr/{marker}", "/dev/{marker}"):
        try:
            open(path, "wb").write(b"x")
            shm.append("WROTE")
        except OSError as exc:
            shm.append(exc.errno)
    print("RESULT", json.dumps({{"total": total, "error": error, "others": shm}}))
    """
    found, result = await run(code, disk_mb=8, max_file_bytes=4 * 1024 * 1024, max_files=2)
    assert found["error"] == errno.ENOSPC
    assert 6 * 1024 * 1024 <= found["total"] <= 8 * 1024 * 1024
    assert found["others"] == [errno.EROFS] * 4
    for host_dir in ("/tmp", "/var/tmp", "/dev/shm", str(settings.BASE_DIR)):
        assert not list(Path(host_dir).glob(f"{marker}*")), host_dir
    assert len(result.artifacts) == 2  # max_files still applies to what comes back


async def test_nothing_outlives_a_run():
    marker = f"lf{secrets.token_hex(3)}"  # a process name (comm: 15 bytes at most)
    first = (
        UNGUARD
        + f"""
import json, os
for path in ("left.txt", "/tmp/left.txt", "/var/tmp/left.txt", os.path.expanduser("~/.rc")):
    open(path, "w").write("x")
pid = libc.fork()
if pid == 0:
    libc.prctl(15, b"{marker}", 0, 0, 0)  # PR_SET_NAME
    while True:
        libc.pause()
print("RESULT", json.dumps(pid > 0))
"""
    )
    forked, _ = await run(first, max_processes=2)
    assert forked is True
    assert host_processes_named(marker) == []  # killed with the sandbox
    second = """
    import json, os
    found = [os.path.join(root, name) for root, dirs, files in os.walk("/tmp")
             for name in files + dirs]
    print("RESULT", json.dumps([found, os.readlink("/var/tmp"), os.listdir("/dev/shm")]))
    """
    found, _ = await run(second)
    assert found == [["/tmp/work"], "/tmp", []]


# --------------------------------------------------------------------- processes, memory, CPU


async def test_fork_bomb_is_bounded_by_the_process_limit():
    marker = f"fb{secrets.token_hex(3)}"
    code = (
        UNGUARD
        + f"""
import json, os
count = 0
while True:
    pid = libc.fork()
    if pid == 0:
        libc.prctl(15, b"{marker}", 0, 0, 0)
        while True:
            libc.pause()
    if pid < 0:
        break
    count += 1
    if count > 500:
        break
print("RESULT", json.dumps([count, ctypes.get_errno()]))
"""
    )
    (count, err), _ = await run(code, max_processes=4)
    assert (count, err) == (3, errno.EAGAIN)  # 4 processes: the snippet and 3 children
    assert host_processes_named(marker) == []
    (count, err), _ = await run(code)  # default: the snippet alone, no fork at all
    assert (count, err) == (0, errno.EAGAIN)


async def test_threads_count_as_processes():
    code = (
        UNGUARD
        + """
import json, threading
try:
    threading.Thread(target=lambda: None).start()
    outcome = "STARTED"
except RuntimeError as exc:
    outcome = str(exc)
print("RESULT", json.dumps(outcome))
"""
    )
    outcome, _ = await run(code)
    assert outcome == "can't start new thread"


async def test_memory_bomb_is_bounded():
    code = (
        UNGUARD
        + """
import json, mmap
out = {}
try:
    bytearray(1024 ** 3)
    out["bytearray"] = "ALLOCATED"
except MemoryError:
    out["bytearray"] = "MemoryError"
try:
    mmap.mmap(-1, 1024 ** 3)
    out["mmap"] = "MAPPED"
except OSError as exc:
    out["mmap"] = exc.errno
libc.malloc.restype = ctypes.c_void_p
out["malloc"] = libc.malloc(1024 ** 3)
print("RESULT", json.dumps(out))
"""
    )
    out, _ = await run(code, memory_mb=128)
    assert out == {"bytearray": "MemoryError", "mmap": errno.ENOMEM, "malloc": None}


async def test_anonymous_shared_memory_cannot_hold_memory_past_the_bound():
    """memfd pages written with write() are not in the address space: 300 MiB in memfds
    slipped past the 128 MiB bound. memfd_create (and memfd_secret, SysV shmget) fail."""
    code = (
        UNGUARD
        + """
import errno, json, os
out = {"written": 0}
try:
    chunk = b"x" * (1024 * 1024)
    for n in range(30):
        fd = os.memfd_create("hoard%d" % n)
        for _ in range(10):
            out["written"] += os.write(fd, chunk)
    out["memfd"] = "CREATED"
except OSError as exc:
    out["memfd"] = exc.errno
libc.syscall.restype = ctypes.c_long
for name, number, args in (("memfd_secret", 447, (0,)), ("shmget", 29, (0, 1 << 28, 0o1600))):
    result = libc.syscall(number, *args)
    out[name] = ctypes.get_errno() if result == -1 else "ALLOWED"
print("RESULT", json.dumps(out))
"""
    )
    out, _ = await run(code, memory_mb=128)
    assert out == {
        "written": 0, "memfd": errno.EPERM, "memfd_secret": errno.EPERM, "shmget": errno.EPERM,
    }  # fmt: skip


async def test_sandboxes_at_once_are_capped(settings, runtime):
    """Each sandbox holds its own memory bound: more than the cap at once wait for a slot,
    so the host's RAM is bounded by the cap times one sandbox's bound."""
    settings.AGENTSITE_SANDBOX_CONCURRENCY = 2
    runtime.get(SandboxSlots).semaphore = asyncio.Semaphore(2)  # as a process started so
    code = """
    import json, time
    started = time.time()
    time.sleep(1.0)
    print("RESULT", json.dumps({"started": started, "ended": time.time()}))
    """
    spans = [found for found, _ in await asyncio.gather(*(run(code) for _ in range(5)))]
    most = max(
        sum(1 for other in spans if other["started"] <= span["started"] < other["ended"])
        for span in spans
    )
    assert most <= 2, spans


async def test_cpu_loop_is_killed_even_when_it_ignores_sigxcpu():
    code = """
    import signal
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # the soft limit's warning, ignored
    print("RESULT null", flush=True)
    while True:
        pass
    """
    started = time.monotonic()
    _, result = await run(code, cpu_seconds=1, wall_seconds=60)
    assert result.is_error and "Killed: CPU time limit exceeded." in result.content
    assert time.monotonic() - started < 30  # the hard limit (2 s of CPU), not the wall clock


async def test_the_snippet_cannot_touch_the_runner_or_its_report():
    """PID 1 (the runner) holds the report pipe: the snippet has no descriptor of it,
    cannot kill it (init of the PID namespace), trace it or nest a user namespace."""
    code = (
        UNGUARD
        + """
import json, os
fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
open("kept.txt", "w").write("still reported")
out = {"fds": fds, "pid": os.getpid(), "ppid": os.getppid()}
out["kill"] = libc.kill(1, 9)
out["ptrace"] = [libc.ptrace(16, 1, 0, 0), ctypes.get_errno()]  # PTRACE_ATTACH
out["userns"] = [libc.unshare(0x10000000), ctypes.get_errno()]  # CLONE_NEWUSER
print("RESULT", json.dumps(out))
"""
    )
    out, result = await run(code)
    assert out["fds"] == [] and (out["pid"], out["ppid"]) == (2, 1)
    assert out["ptrace"] == [-1, errno.EPERM] and out["userns"][0] == -1
    assert not result.is_error  # the runner outlived kill(1, SIGKILL)
    assert [(a.name, a.content) for a in result.artifacts] == [("kept.txt", b"still reported")]


async def test_a_cancelled_run_leaves_no_process():
    """Stop cancels the tool's task: the whole sandbox goes with it."""
    marker = f"cx{secrets.token_hex(3)}"
    code = (
        UNGUARD
        + f"""
libc.prctl(15, b"{marker}", 0, 0, 0)
import time
time.sleep(60)
"""
    )
    task = asyncio.ensure_future(run(code))
    deadline = time.monotonic() + 30
    while not host_processes_named(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert host_processes_named(marker)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while host_processes_named(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert host_processes_named(marker) == []


# ------------------------------------------------------------------------- no bwrap, no run


async def test_without_bwrap_the_tool_refuses_and_the_check_warns(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no bwrap on the PATH
    (tool,) = build(BASE, ToolContext())
    result = await tool.invoke({"code": "open('ran.txt', 'w')"})
    assert result.is_error and "bubblewrap (bwrap) is not installed" in result.content
    assert result.artifacts == []
    assert [w.id for w in check_python_sandbox(None)] == ["tools.W001"]


def test_the_check_passes_here():
    assert sandbox_problems() == []
    assert check_python_sandbox(None) == []


def test_limits_reach_the_command_line():
    limits = SandboxLimits()
    rl = bwrap.Rlimits(cpu_seconds=limits.cpu_seconds, memory_bytes=1, file_bytes=2, nproc=3)
    command = bwrap.command("/usr/bin/bwrap", "/usr/bin/python3", rl, 4096, 9, ["-c", "x"])
    joined = " ".join(command)
    for option in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"):
        assert option in command
    assert "--size 4096 --tmpfs /tmp" in joined and "--seccomp 9" in joined
    assert "--cap-drop ALL" in joined and "--remount-ro /" in joined
    assert "--nproc=3" in joined and "--as=1" in joined and "--fsize=2" in joined
    assert stat.S_IMODE(os.stat(bwrap.bwrap_path()).st_mode) & stat.S_ISUID == 0
