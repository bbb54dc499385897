"""PID 1 of the Python sandbox: runs the snippet, then reports the files it left.

Not imported by the app: :mod:`tools.sandbox` runs this file's source inside bubblewrap
as ``python -I -S -c <source>`` (standard library only, any Python 3.8+). It reads its
job, a JSON object, on stdin and writes its report on the descriptor the job names: one
JSON line per record, a file's bytes right after its line.

Why a separate PID 1: the snippet runs in a child process that does not inherit the
report descriptor, and PID 1 of a PID namespace gets no signal it has no handler for from
inside it, so the snippet can neither write the report nor kill this process. After the
snippet exits (or its wall-clock time is up) it kills every other process in the
sandbox, then walks the scratch directory without following links.
"""

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys

WORK = "/tmp/work"
CHUNK = 65536


def main() -> int:
    job = json.loads(sys.stdin.buffer.read())
    report = os.fdopen(job["report_fd"], "wb")
    _emit(report, {"event": "started"})
    exit_code, timed_out = _run_snippet(job)
    _kill_the_rest()
    skipped = _send_files(report, int(job["max_files"]), int(job["max_file_bytes"]))
    done = {"event": "done", "exit_code": exit_code, "timed_out": timed_out, "skipped": skipped}
    _emit(report, done)
    report.close()
    return 0


def _emit(report, record: dict) -> None:
    report.write(json.dumps(record).encode() + b"\n")
    report.flush()  # "started" must reach the parent even if this process is killed


def _run_snippet(job: dict) -> tuple:
    command = [sys.executable, "-I", "-S", "-u", "-c", job["bootstrap"]]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, cwd=WORK, close_fds=True)
    try:
        proc.stdin.write(job["code"].encode("utf-8"))
        proc.stdin.close()
    except OSError:  # it died before reading its code
        pass
    try:
        return proc.wait(timeout=float(job["wall_seconds"])), False
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(), True


def _kill_the_rest() -> None:
    """Every process but this one (PID 1 is exempt from kill(-1)), then reap them."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _send_files(report, max_files: int, max_bytes: int) -> list:
    sent, skipped = 0, []
    for root, dirs, names in os.walk(WORK, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, WORK)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:  # a link, a socket...: not a file to keep
                continue
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if sent >= max_files or info.st_size > max_bytes:
                    skipped.append(rel)
                    continue
                _emit(report, {"event": "file", "name": rel, "size": info.st_size})
                _copy(handle, report, info.st_size)
                sent += 1
    return skipped


def _copy(source, report, size: int) -> None:
    """Exactly ``size`` bytes (zero-padded should the file have shrunk: framing holds)."""
    left = size
    while left:
        chunk = source.read(min(CHUNK, left)) or b"\0" * min(CHUNK, left)
        report.write(chunk)
        left -= len(chunk)


if __name__ == "__main__":
    sys.exit(main())
