"""The prelude of the snippet's process inside the sandbox: read the code, guard, run it.

Not imported by the app: :mod:`tools.sandbox.runner` starts ``python -I -S -u -c
<this source>`` and writes the snippet's code on its stdin. The boundary is the kernel's
(bubblewrap's namespaces, the seccomp filter, the limits set by prlimit: see
:mod:`tools.sandbox.bwrap`). The Python-level guard below (no sockets, processes or ctypes) is a
second layer only: code can undo it, and nothing relies on it.
"""

import os
import signal
import sys


def _read_code() -> str:
    code = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return code


def _deny(*args, **kwargs):
    raise PermissionError(1, "not permitted in the sandbox (no network, no processes)")


def _guard() -> None:
    import _posixsubprocess
    import _socket
    import posix
    import socket

    class NoSocket(socket.socket):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None:
                _deny()
            super().__init__(family, type, proto, fileno)

    socket.socket = socket.SocketType = _socket.socket = _socket.SocketType = NoSocket
    socket.fromfd = _socket.dup = _deny
    names = ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv")
    names += ("execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe")
    names += ("kill", "killpg")
    for module in (os, posix):
        for name in names:
            if hasattr(module, name):
                setattr(module, name, _deny)
    _posixsubprocess.fork_exec = _deny
    for name in ("ctypes", "_ctypes", "cffi", "_cffi_backend"):
        sys.modules[name] = None


def _run(code: str) -> None:
    import linecache
    import traceback

    linecache.cache["snippet.py"] = (len(code), None, code.splitlines(True), "snippet.py")
    sys.argv = ["snippet.py"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, "snippet.py", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.exit(1)


if __name__ == "__main__":
    _snippet = _read_code()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the file-size limit: an error
    os.umask(0o077)
    _guard()
    del _guard, _read_code
    _run(_snippet)
