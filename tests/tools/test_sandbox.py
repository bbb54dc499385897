"""The Python sandbox, with real processes: limits, network, files."""

from __future__ import annotations

import os
import socket
import textwrap
import threading

import pytest

from tools.builtin.python_exec import build
from tools.registry import ToolContext
from tools.sandbox import SandboxLimits, SandboxUnavailable, pick_interpreter, run_python


def _sandbox_available() -> bool:
    try:
        pick_interpreter()
    except SandboxUnavailable:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _sandbox_available(), reason="no interpreter the sandbox user can run"
)

# A generous wall clock: other work on a 2-core machine must not turn a CPU kill into a timeout.
FAST = SandboxLimits(cpu_seconds=1, wall_seconds=30, memory_mb=128, max_output_chars=2000)


async def test_runs_code_and_returns_output():
    result = await run_python("import math\nprint(math.factorial(20))", FAST)
    assert result.exit_code == 0 and result.stdout == "2432902008176640000"
    assert not result.timed_out and not result.cpu_exceeded


async def test_traceback_shows_the_snippet():
    result = await run_python("x = 1\n1 / 0", FAST)
    assert result.exit_code == 1
    assert 'File "snippet.py", line 2' in result.stderr and "ZeroDivisionError" in result.stderr


async def test_infinite_loop_is_killed_by_the_cpu_limit():
    result = await run_python("while True:\n    pass", FAST)
    assert result.cpu_exceeded and not result.timed_out
    assert "CPU time limit" in result.summary()


async def test_sleeping_snippet_is_killed_by_the_wall_clock():
    result = await run_python("import time\ntime.sleep(30)", SandboxLimits(wall_seconds=1))
    assert result.timed_out and "wall-clock" in result.summary()


async def test_memory_bomb_is_refused():
    result = await run_python("x = bytearray(2 * 1024 ** 3)\nprint('allocated')", FAST)
    assert "MemoryError" in result.stderr and "allocated" not in result.stdout


async def test_output_is_cut():
    result = await run_python("print('y' * 100_000)", FAST)
    assert result.output_truncated and len(result.stdout) == 2000


async def test_no_processes():
    code = "import subprocess\nprint(subprocess.run(['id'], capture_output=True))"
    result = await run_python(code, FAST)
    assert result.exit_code != 0 and "PermissionError" in result.stderr


@pytest.fixture
def listener():
    """A loopback TCP listener recording whether anyone connected."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, addr = server.accept()
            except OSError:
                continue
            accepted.append(addr)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
        "import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {port}))",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', timeout=2)",
        "import ctypes",
    ],
)
async def test_network_attempts_fail(listener, code):
    port, accepted = listener
    result = await run_python(code.format(port=port) + "\nprint('CONNECTED')", FAST)
    assert "CONNECTED" not in result.stdout and result.exit_code != 0
    assert accepted == []


async def test_socket_creation_is_refused_by_the_kernel(listener):
    """Kernel level: with the Python guard undone (ctypes back), socket() itself fails."""
    port, accepted = listener
    code = (
        "import sys\nsys.modules.pop('ctypes', None); sys.modules.pop('_ctypes', None)\n"
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.socket(2, 1, 0), ctypes.get_errno())"
    )
    result = await run_python(code, FAST)
    if result.isolation != "bwrap+seccomp":
        pytest.skip("no seccomp filter here (libseccomp missing): the namespaces alone hold")
    assert result.stdout == "-1 1"  # EPERM from the seccomp filter
    assert accepted == []


async def test_privileges_dropped_when_root():
    result = await run_python("import os\nprint(os.getuid())\nopen('/etc/shadow').read()", FAST)
    if os.geteuid() != 0:
        pytest.skip("server not running as root")
    assert int(result.stdout) >= 200_000
    # Not even there: the sandbox has no /etc (tests/tools/test_sandbox_escapes.py).
    assert "FileNotFoundError" in result.stderr or "PermissionError" in result.stderr


async def test_files_become_artifacts():
    code = textwrap.dedent(
        """
        import os
        os.mkdir("out")
        with open("report.html", "w") as f:
            f.write("<h1>Report</h1>")
        with open("out/data.csv", "w") as f:
            f.write("a,b\\n1,2\\n")
        os.symlink("/etc/passwd", "link")
        print("done")
        """
    )
    result = await run_python(code, FAST)
    assert result.stdout == "done", result.stderr
    names = {a.name: a for a in result.artifacts}
    assert set(names) == {"report.html", "out/data.csv"}  # the symlink is not followed
    assert names["report.html"].content == b"<h1>Report</h1>"
    assert names["report.html"].mime_type == "text/html"
    assert names["out/data.csv"].size == 8


async def test_file_limits():
    limits = SandboxLimits(cpu_seconds=2, max_file_bytes=1000, max_files=2)
    code = textwrap.dedent(
        """
        for n in range(4):
            open(f"f{n}.txt", "w").write("x")
        with open("big", "w") as f:
            f.write("y" * 5000)
        """
    )
    result = await run_python(code, limits)
    assert "File too large" in result.stderr
    assert [a.name for a in result.artifacts] == ["big", "f0.txt"]
    assert result.artifacts[0].size == 1000
    assert result.skipped_files == ["f1.txt", "f2.txt", "f3.txt"]


async def test_tool_is_disabled_by_default_and_returns_artifacts():
    from tools.builtin.python_exec import SPEC

    assert SPEC.enabled_by_default is False
    (tool,) = build({"cpu_seconds": 2}, ToolContext())
    result = await tool.invoke({"code": "open('a.md', 'w').write('# hi')\nprint(6 * 7)"})
    assert not result.is_error and "stdout:\n42" in result.content
    assert [a.name for a in result.artifacts] == ["a.md"]
    assert "[Artifact generated: a.md]" in result.observation()
    failed = await tool.invoke({"code": "raise SystemExit(3)"})
    assert failed.is_error and "Exit code 3" in failed.content
