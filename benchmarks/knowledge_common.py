"""What the knowledge benchmarks share: the machine's description, a fresh database of
each kind, and a child process that runs Django on it.

A figure is measured in a child process of its own (``<script> --child ...``): Django is
set up once per database, and the child's memory is the measurement's alone. SQLite is a
fresh file in a temporary folder; PostgreSQL a fresh database on the server the tests use
(``tests.integration.stack.provide_postgres``: 127.0.0.1:5432, or
``AGENTSITE_TEST_DATABASE_URL``, or a private cluster), dropped afterwards.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PYTHON = sys.executable
DATABASES = ("sqlite", "postgres")


def log(*parts: object) -> None:
    print(*parts, flush=True)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def machine() -> list[str]:
    """Lines describing this machine and build, for the head of a benchmark's output."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    memory = next(
        (
            int(line.split()[1]) // 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    changed = len([line for line in git("status", "--porcelain").splitlines() if line])
    return [
        f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"machine: {os.cpu_count()} CPUs ({cpu}), {memory} MB RAM, load average "
        f"{os.getloadavg()[0]:.2f} at start; {platform.platform()}",
        f"agentsite {git('rev-parse', '--short', 'HEAD')}"
        + (f" + {changed} changed files in the work tree" if changed else "")
        + f"; Python {platform.python_version()}, Django "
        f"{importlib.metadata.version('django')}, SQLite {sqlite3.sqlite_version}, pypdf "
        f"{importlib.metadata.version('pypdf')}",
    ]


def postgres_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url, connect_timeout=3) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


@contextlib.contextmanager
def fresh_database(kind: str, work: Path) -> Iterator[tuple[str, str]]:
    """A fresh, empty database of ``kind`` (sqlite, postgres): its URL and where it is."""
    if kind == "sqlite":
        path = work / f"bench-{secrets.token_hex(3)}.sqlite3"
        try:
            yield f"sqlite:///{path}", f"SQLite {sqlite3.sqlite_version}, file {path.name}"
        finally:
            for leftover in work.glob(path.name + "*"):
                leftover.unlink(missing_ok=True)
        return
    from tests.integration.stack import provide_postgres

    database = provide_postgres(work)
    try:
        version = postgres_version(database.url)
        yield database.url, f"PostgreSQL {version}, {database.origin}"
    finally:
        database.cleanup()


def child_env(work: Path, database_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "AGENTSITE_EXECUTION")
    }
    var = work / f"var-{secrets.token_hex(3)}"
    var.mkdir(parents=True)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
            "SECRET_KEY": secrets.token_urlsafe(32),
            "DEBUG": "false",
            "AGENTSITE_VAR_DIR": str(var),
            "DATABASE_URL": database_url,
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def run_child(
    script: Path, args: list[str], env: dict[str, str], timeout: float = 7200
) -> dict[str, Any]:
    """Run ``script --child ARGS``; its last stdout line is JSON. Its other lines and its
    stderr's tail are shown on failure."""
    done = subprocess.run(
        [PYTHON, str(script), "--child", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"{script.name} --child {' '.join(args)} failed ({done.returncode}):\n"
            + done.stdout[-3000:]
            + done.stderr[-5000:]
        )
    for line in lines[:-1]:
        log("   ", line)
    return json.loads(lines[-1])


def child_django() -> None:
    """In a child: Django set up and the fresh database migrated. Documents are indexed
    by calling ``knowledge.indexing.index_document`` in the child (what the background
    task runs), so their scheduling on commit is switched off: a process without a
    runtime would fail them."""
    import django

    django.setup()
    from django.core.management import call_command

    from knowledge import indexing

    call_command("migrate", verbosity=0)
    indexing.schedule = lambda document_id: True


@contextlib.contextmanager
def scratch(keep: bool = False) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="agentsite-kb-bench-"))
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def rss_kb(pid: int | str = "self") -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB: its resident memory now and at its peak."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


def reset_peak(pid: int | str = "self") -> bool:
    """Start a new peak: VmHWM back to the current RSS (Linux's clear_refs, value 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True
