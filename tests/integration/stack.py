"""Real processes on loopback for the team-mode test and the stream benchmark.

:class:`Stack` starts what the product runs on: Redis, PostgreSQL (a fresh database,
migrated), the scripted OpenAI-compatible server, a Celery worker and daphne; or, in
embedded mode, only daphne on SQLite. :class:`Browser` drives it the way a browser does:
HTTP with the session cookie and CSRF token, and the conversation websocket.

Services are found or started, never assumed:

- Redis: ``AGENTSITE_TEST_REDIS_URL`` if set, else a private ``redis-server`` on a free port.
- PostgreSQL: ``AGENTSITE_TEST_DATABASE_URL`` if set, else the server on 127.0.0.1:5432
  (user postgres), else a private cluster (``initdb`` + ``postgres`` in a temp dir, run as
  an unprivileged user when we are root). In the first two cases a database with a random
  name is created and dropped afterwards.

When none of these works, :class:`StackError` says why; the test fails rather than skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
LOOPBACK = "127.0.0.1"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
USERNAME = "alice"
PASSWORD = "integration-pw-4242"
MODEL = "scripted-model"

T = TypeVar("T")


class StackError(RuntimeError):
    """A service the stack needs could not be found or started."""


# ----------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_for(
    predicate: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy; raise TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        time.sleep(interval)


async def async_wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> Any:
    """:func:`wait_for` for coroutines: ``predicate`` may be sync or async."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        await asyncio.sleep(interval)


def clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


@dataclass
class Process:
    """A child process with its output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    stop_signal: int = signal.SIGTERM
    start: Callable[[], subprocess.Popen[bytes]] | None = None  # the same command again

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 40) -> str:
        body = "\n".join(self.text().splitlines()[-lines:])
        state = "alive" if self.alive() else f"exited {self.popen.returncode}"
        return f"--- {self.name} (pid {self.pid}, {state}) ---\n{body}"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (from /proc)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / clock_ticks()

    def stop(self, timeout: float = 10.0) -> None:
        """Signal the process group (while its leader lives), SIGKILL after ``timeout``."""
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, self.stop_signal)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def kill(self) -> None:
        """kill -9 of the whole process group (a crash: nothing gets to clean up)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def restart(self) -> None:
        """Start the same command again (after :meth:`stop` or :meth:`kill`); the log goes on."""
        assert self.start is not None and not self.alive(), f"{self.name} cannot restart"
        self.popen = self.start()


def stop_all(processes: list[Process], timeout: float = 10.0) -> None:
    """Stop processes concurrently (each gets ``timeout`` before SIGKILL)."""
    threads = [threading.Thread(target=p.stop, args=(timeout,)) for p in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def spawn(
    name: str,
    args: list[str],
    *,
    env: dict[str, str],
    log_dir: Path,
    stop_signal: int = signal.SIGTERM,
    user: int | None = None,
    group: int | None = None,
) -> Process:
    """Start ``args`` in its own process group, output to ``log_dir/<name>.log``."""
    log = log_dir / f"{name}.log"

    def start() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                args,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=user,
                group=group,
                extra_groups=[] if user is not None else None,
            )

    log.write_bytes(b"")
    return Process(name=name, popen=start(), log=log, stop_signal=stop_signal, start=start)


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1, trust_env=False).status_code < 500
    except httpx.HTTPError:
        return False


# ------------------------------------------------------------------------------ redis


def start_redis(
    work: Path,
    *,
    password: str | None = None,
    unix_socket: Path | None = None,
    private: bool = False,
) -> tuple[str, Process | None]:
    """The Redis URL to use, and the private server started for it (if any).

    With ``private``, a ``password`` or a ``unix_socket`` a private server is always
    started (the URL then says ``redis://:password@...``; the socket is an extra way in).
    """
    given = os.environ.get("AGENTSITE_TEST_REDIS_URL")
    if given and not private and password is None and unix_socket is None:
        _redis_ping(given, timeout=5)
        return given, None
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise StackError(
            "redis-server is not installed: run `make system-deps` (apt-get install "
            "redis-server) or set AGENTSITE_TEST_REDIS_URL"
        )
    port = free_port()
    data = work / "redis"
    data.mkdir()
    args = [binary, "--bind", LOOPBACK, "--port", str(port), "--dir", str(data)]
    args += ["--save", "", "--appendonly", "no", "--maxclients", "4000"]
    if password is not None:
        args += ["--requirepass", password]
    if unix_socket is not None:
        args += ["--unixsocket", str(unix_socket), "--unixsocketperm", "700"]
    process = spawn("redis", args, env=dict(os.environ), log_dir=work)
    credentials = f":{password}@" if password is not None else ""
    url = f"redis://{credentials}{LOOPBACK}:{port}/0"
    try:
        _redis_ping(url, timeout=10, process=process)
    except Exception:
        process.stop()
        raise
    return url, process


def _redis_ping(url: str, *, timeout: float, process: Process | None = None) -> None:
    import redis

    def ping() -> bool:
        if process is not None and not process.alive():
            raise StackError(f"redis-server exited:\n{process.tail()}")
        try:
            return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    wait_for(ping, timeout=timeout, what=f"Redis at {url}")


# ------------------------------------------------------------------------- postgresql


@dataclass
class Database:
    url: str
    cleanup: Callable[[], None]
    origin: str
    server: Process | None = None  # a private cluster's postmaster, which a test may restart


def provide_postgres(work: Path, *, private: bool = False) -> Database:
    """A fresh PostgreSQL database: given by env, on localhost:5432, or a private cluster.

    ``private=True`` always starts a private cluster (benchmarks that need more than the
    usual 100 connections).
    """
    import psycopg

    if private:
        return _private_cluster(work)
    given = os.environ.get("AGENTSITE_TEST_DATABASE_URL")
    if given:
        try:
            return _fresh_database(given, origin="AGENTSITE_TEST_DATABASE_URL")
        except psycopg.errors.InsufficientPrivilege:
            return Database(url=given, cleanup=lambda: None, origin="AGENTSITE_TEST_DATABASE_URL")
        except psycopg.Error as exc:
            raise StackError(f"AGENTSITE_TEST_DATABASE_URL is not usable: {exc}") from exc
    problems: list[str] = []
    try:
        return _fresh_database(DEFAULT_POSTGRES, origin="local server on 127.0.0.1:5432")
    except psycopg.Error as exc:
        problems.append(f"{DEFAULT_POSTGRES}: {str(exc).strip()}")
    try:
        return _private_cluster(work)
    except StackError as exc:
        problems.append(str(exc))
    raise StackError(
        "No PostgreSQL for the team-mode test. Set AGENTSITE_TEST_DATABASE_URL, run a server "
        "on 127.0.0.1:5432 (trust auth for user postgres), or install PostgreSQL so a private "
        "cluster can be started (apt-get install postgresql).\n" + "\n".join(problems)
    )


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _fresh_database(server_url: str, *, origin: str) -> Database:
    import psycopg

    name = f"agentsite_it_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(server_url, autocommit=True, connect_timeout=3) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return Database(url=_with_dbname(server_url, name), cleanup=drop, origin=origin)


def _private_cluster(work: Path) -> Database:
    """initdb + postgres on a free port in a temp dir (as an unprivileged user when root)."""
    binaries = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(re.search(r"/(\d+)/bin", p).group(1)),  # type: ignore[union-attr]
    )
    initdb = binaries[-1] if binaries else shutil.which("initdb")
    if not initdb:
        raise StackError("initdb not found (/usr/lib/postgresql/*/bin/initdb): no private cluster")
    postgres_bin = str(Path(initdb).with_name("postgres"))
    uid = gid = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        for candidate in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                entry = pwd.getpwnam(candidate)
                uid, gid = entry.pw_uid, entry.pw_gid
                break
        if uid is None:
            raise StackError("running as root and no 'postgres' or 'nobody' user to run initdb")
    # Its own temp dir: pytest's tmp dirs are private to root, which the server user can't enter.
    base = Path(tempfile.mkdtemp(prefix="agentsite-pg-"))
    if uid is not None:
        os.chown(base, uid, gid)
    data = base / "data"
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    initdb_args = [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]
    result = subprocess.run(
        [*initdb_args, "--no-sync"],
        env=env,
        capture_output=True,
        user=uid,
        group=gid,
        extra_groups=[] if uid is not None else None,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise StackError(f"initdb failed: {result.stderr.decode(errors='replace')[-2000:]}")
    port = free_port()
    options = {
        "listen_addresses": LOOPBACK,
        "fsync": "off",  # a throw-away cluster: durability is not wanted
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "1000",
    }
    args = [postgres_bin, "-D", str(data), "-p", str(port), "-k", str(base)]
    for name, value in options.items():
        args += ["-c", f"{name}={value}"]
    process = spawn(
        "postgres",
        args,
        env=env,
        log_dir=work,
        stop_signal=signal.SIGINT,  # fast shutdown
        user=uid,
        group=gid,
    )
    server_url = f"postgres://postgres@{LOOPBACK}:{port}/postgres"

    def ready() -> bool:
        import psycopg

        if not process.alive():
            raise StackError(f"private postgres exited:\n{process.tail()}")
        try:
            with psycopg.connect(server_url, connect_timeout=1):
                return True
        except psycopg.Error:
            return False

    def stop_cluster() -> None:
        process.stop(timeout=20)
        shutil.rmtree(base, ignore_errors=True)

    try:
        wait_for(ready, timeout=30, what="the private PostgreSQL cluster")
        database = _fresh_database(server_url, origin=f"private cluster on port {port}")
    except Exception:
        stop_cluster()
        raise
    return Database(url=database.url, cleanup=stop_cluster, origin=database.origin, server=process)


# ------------------------------------------------------------------------------ stack


@dataclass
class Stack:
    """The running processes of one deployment on loopback."""

    mode: str  # "team" | "embedded"
    work: Path
    env: dict[str, str]
    base_url: str
    llm_base: str  # the scripted server, without /v1
    processes: dict[str, Process] = field(default_factory=dict)
    database: Database | None = None
    redis_url: str = ""

    server_urls: dict[str, str] = field(default_factory=dict)  # ASGI server name -> base URL

    @property
    def daphne(self) -> Process:
        return self.processes["daphne"]

    @property
    def servers(self) -> list[Process]:
        """Every ASGI server process, the first one (``base_url``) first."""
        return [self.processes[name] for name in self.server_urls]

    @property
    def worker(self) -> Process | None:
        return self.processes.get("worker")

    @property
    def workers(self) -> list[Process]:
        """Every Celery worker process (team mode), the first one first."""
        return [p for name, p in self.processes.items() if name.startswith("worker")]

    def logs(self, lines: int = 40) -> str:
        return "\n".join(p.tail(lines) for p in self.processes.values())

    # -- faults: a service or server stopped and started again on the same port

    def restart_server(self, name: str = "daphne") -> None:
        """Start a stopped or killed ASGI server again and wait until it serves."""
        self.processes[name].restart()
        url = self.server_urls[name]
        wait_for(
            lambda: _http_ok(f"{url}/accounts/login/"),
            timeout=60,
            what=f"{name} to serve again",
            detail=self.logs,
        )

    def restart_redis(self) -> None:
        """Start the stack's private Redis again (empty: it keeps nothing on disk)."""
        self.processes["redis"].restart()
        _redis_ping(self.redis_url, timeout=10, process=self.processes["redis"])

    @property
    def postgres(self) -> Process:
        assert self.database is not None and self.database.server is not None, (
            "no private PostgreSQL cluster (running_stack(private_postgres=True))"
        )
        return self.database.server

    def restart_postgres(self) -> None:
        """Start the private cluster again and wait until it accepts connections."""
        import psycopg

        self.postgres.restart()

        def ready() -> bool:
            try:
                with psycopg.connect(self.database.url, connect_timeout=1):  # type: ignore[union-attr]
                    return True
            except psycopg.Error:
                return False

        wait_for(ready, timeout=30, what="PostgreSQL to accept connections again")

    # -- the scripted LLM, over its control endpoints

    def script(self, **spec: Any) -> None:
        response = httpx.post(f"{self.llm_base}/_script", json=spec, timeout=5, trust_env=False)
        response.raise_for_status()

    def release(self, name: str) -> None:
        """Let the scripted responses waiting on ``name`` go on (``after_release``,
        ``resume_on``)."""
        response = httpx.post(
            f"{self.llm_base}/_release", json={"name": name}, timeout=5, trust_env=False
        )
        response.raise_for_status()

    def llm_requests(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.llm_base}/_requests", timeout=5, trust_env=False).json()

    def llm_state(self) -> dict[str, int]:
        return httpx.get(f"{self.llm_base}/_state", timeout=5, trust_env=False).json()

    # -- the database, read directly (the test process has no Django database)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``%s`` placeholders) on PostgreSQL, or embedded mode's SQLite."""
        if self.database is None:
            import sqlite3

            with contextlib.closing(sqlite3.connect(self.work / "var" / "db.sqlite3")) as conn:
                return list(conn.execute(sql.replace("%s", "?"), params).fetchall())
        import psycopg

        with psycopg.connect(self.database.url, autocommit=True) as conn:
            return list(conn.execute(sql, params).fetchall())


SETUP_SCRIPT = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
call_command("prepare_instance", verbosity=0)  # var/: the settings write nothing
call_command("migrate", interactive=False, verbosity=0)
call_command("add_provider", name="scripted", base_url={llm!r}, api_key="k")
call_command("add_model", provider="scripted", model={model!r},
             abilities="tool_call,json_mode,streaming", default=True)
get_user_model().objects.create_user(username={user!r}, password={password!r})
"""


def _base_env(work: Path, extra_env: dict[str, str] | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "AGENTSITE_EXECUTION")
        and not key.lower().endswith("_proxy")
    }
    env.update(
        {
            # The children use the settings the caller uses (pytest-django sets this).
            "DJANGO_SETTINGS_MODULE": os.environ.get(
                "DJANGO_SETTINGS_MODULE", "agentsite.settings"
            ),
            "SECRET_KEY": secrets.token_urlsafe(32),
            "DEBUG": "true",
            "AGENTSITE_VAR_DIR": str(work / "var"),
            "PYTHONUNBUFFERED": "1",
            "NO_PROXY": "*",
            "no_proxy": "*",
            "LOG_LEVEL": "INFO",
        }
    )
    env.update(extra_env or {})
    return env


POSTGRES_PRELUDE = """\
import django

django.setup()

from django.core.management import call_command
from django.db import connection

assert connection.vendor == "postgresql", connection.vendor
call_command("migrate", verbosity=0)
"""


def run_on_fresh_postgres(
    work: Path, script: str, extra_env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run a Python ``script`` against a fresh PostgreSQL database, Django set up and the
    database migrated first (:data:`POSTGRES_PRELUDE`).

    For code whose PostgreSQL path differs from SQLite's (the test suite's own database).
    The script's exit code and output come back; the database is dropped afterwards.
    """
    database = provide_postgres(work)
    try:
        env = _base_env(work, {"DATABASE_URL": database.url, **(extra_env or {})})
        return subprocess.run(
            [PYTHON, "-c", POSTGRES_PRELUDE + script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        database.cleanup()


@contextlib.contextmanager
def running_stack(
    *,
    mode: str = "team",
    work: Path | None = None,
    concurrency: int = 8,
    pool: str = "threads",
    stamp: bool = False,
    extra_env: dict[str, str] | None = None,
    private_postgres: bool = False,
    private_redis: bool = False,
    workers: int = 1,
    servers: int = 1,
    daphne_prefix: Sequence[str] = (),
    worker_prefix: Sequence[str] = (),
    startup_timeout: float = 120,
    server: str = "agentsite-server",
    setup_extra: str = "",
) -> Iterator[Stack]:
    """Start every process of ``mode`` (team or embedded); tear all of it down on exit.

    The database is migrated (``migrate`` plus a provider, a default model pointing at the
    scripted server, and a user) while daphne and the worker import, to save start-up time.
    ``daphne_prefix`` runs daphne under a tool (e.g. ``valgrind --tool=callgrind ...``),
    ``worker_prefix`` the first worker. ``server`` is ``agentsite-server`` (daphne on
    the configured loop) or ``daphne`` as shipped; ``servers`` of them run side by side,
    each on its own port (``Stack.server_urls``). ``private_redis``/``private_postgres``
    start services of the stack's own, which a test may stop and restart.
    ``pool`` is the workers' Celery pool (``threads``, as deployed; ``prefork`` starts the
    runtime in each child). ``setup_extra`` is Python run after the set-up (Django ready,
    the provider ``scripted`` and the model in place), e.g. to change the provider's
    timeout.
    """
    own_work = work is None
    work = Path(tempfile.mkdtemp(prefix=f"agentsite-{mode}-")) if work is None else work
    cleanups: list[Callable[[], None]] = []  # services, after the app processes stopped
    processes: dict[str, Process] = {}
    app_processes: dict[str, Process] = {}
    try:
        env = _base_env(work, extra_env)
        database = redis_url = None
        if mode == "team":
            redis_url, redis_process = start_redis(work, private=private_redis)
            if redis_process is not None:
                processes["redis"] = redis_process
                cleanups.append(redis_process.stop)
            database = provide_postgres(work, private=private_postgres)
            cleanups.append(database.cleanup)
            env["REDIS_URL"] = redis_url
            env["DATABASE_URL"] = database.url

        llm_port = free_port()
        llm_base = f"http://{LOOPBACK}:{llm_port}"
        llm_args = [PYTHON, "-m", "testing.scripted_server", "--port", str(llm_port)]
        llm = spawn("llm", llm_args + (["--stamp"] if stamp else []), env=env, log_dir=work)
        processes["llm"] = app_processes["llm"] = llm
        setup = SETUP_SCRIPT.format(
            llm=f"{llm_base}/v1", model=MODEL, user=USERNAME, password=PASSWORD
        ) + textwrap.dedent(setup_extra)
        migrate = spawn("migrate", [PYTHON, "-c", setup], env=env, log_dir=work)
        app_processes["migrate"] = migrate
        if mode == "team":
            worker_args = [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "agentsite",
                "worker",
                "--loglevel",
                "INFO",
            ]
            worker_args += ["--pool", pool, "--concurrency", str(concurrency)]
            worker_args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
            for number in range(1, workers + 1):  # one process per core scales a host out
                name = "worker" if number == 1 else f"worker{number}"
                prefix = list(worker_prefix) if number == 1 else []
                args = [*prefix, *worker_args, "-n", f"it{llm_port}-{number}@%h"]
                processes[name] = app_processes[name] = spawn(name, args, env=env, log_dir=work)
        module = {"agentsite-server": "agentsite.server", "daphne": "daphne"}[server]
        server_urls: dict[str, str] = {}
        for number in range(1, servers + 1):
            name, port = ("daphne" if number == 1 else f"daphne{number}"), free_port()
            prefix = list(daphne_prefix) if number == 1 else []
            daphne_args = [*prefix, PYTHON, "-m", module]
            daphne_args += ["-b", LOOPBACK, "-p", str(port), "agentsite.asgi:application"]
            processes[name] = app_processes[name] = spawn(name, daphne_args, env=env, log_dir=work)
            server_urls[name] = f"http://{LOOPBACK}:{port}"
        stack = Stack(
            mode=mode,
            work=work,
            env=env,
            base_url=server_urls["daphne"],
            llm_base=llm_base,
            processes=processes,
            database=database,
            redis_url=redis_url or "",
            server_urls=server_urls,
        )

        def up() -> bool:
            for process in processes.values():
                if not process.alive():
                    raise StackError(f"{process.name} exited during start-up:\n{process.tail()}")
            if migrate.popen.poll() is None:
                return False
            if migrate.popen.returncode != 0:
                raise StackError(f"migrate + setup failed:\n{migrate.tail(60)}")
            if not all(_http_ok(f"{url}/accounts/login/") for url in server_urls.values()):
                return False
            if not _http_ok(f"{llm_base}/health"):
                return False
            return mode != "team" or all(" ready." in w.text() for w in stack.workers)

        wait_for(
            up,
            timeout=startup_timeout,
            what=f"the {mode}-mode stack to start",
            interval=0.1,
            detail=lambda: "\n".join(p.tail() for p in {**processes, **app_processes}.values()),
        )
        yield stack
    finally:
        stop_all(list(app_processes.values()))
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- browser


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
RUN_ID = re.compile(r'data-run="(\d+)"')


class Browser:
    """What a logged-in browser does: form posts with CSRF, and the conversation socket."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(
            base_url=base_url, trust_env=False, timeout=30, follow_redirects=False
        )

    async def __aenter__(self) -> Browser:
        return self

    def on(self, base_url: str) -> Browser:
        """The same browser session (cookies) talking to another server of the site."""
        other = Browser(base_url)
        other.http.cookies.update(self.http.cookies)
        return other

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def login(self, username: str = USERNAME, password: str = PASSWORD) -> None:
        page = await self.http.get("/accounts/login/")
        match = CSRF_INPUT.search(page.text)
        assert match, f"no CSRF token on the login page ({page.status_code})"
        response = await self.http.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": match[1]},
        )
        assert response.status_code == 302, f"login failed: {response.status_code}"
        assert "sessionid" in self.http.cookies, "no session cookie after login"

    async def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        headers = {"X-CSRFToken": self.http.cookies["csrftoken"], "HX-Request": "true"}
        return await self.http.post(path, data=data or {}, headers=headers)

    async def new_conversation(self) -> int:
        """An empty conversation, created through the JSON API (the chat page creates one
        only with its first message)."""
        headers = {"X-CSRFToken": self.http.cookies["csrftoken"]}
        response = await self.http.post("/api/conversations", json={}, headers=headers)
        assert response.status_code == 201, (response.status_code, response.text[:300])
        return int(response.json()["id"])

    async def send(self, conversation_id: int, content: str) -> httpx.Response:
        response = await self.post(f"/c/{conversation_id}/messages/", {"content": content})
        assert response.status_code == 200, (response.status_code, response.text[:500])
        return response

    async def cancel(self, run_id: int) -> httpx.Response:
        return await self.post(f"/runs/{run_id}/cancel/")

    def socket(self, conversation_id: int, after: int = 0):
        """An un-entered ``websockets`` connection to the conversation's socket."""
        from websockets.asyncio.client import connect

        cookie = "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())
        ws_url = self.base_url.replace("http://", "ws://", 1)
        return connect(
            f"{ws_url}/ws/conversations/{conversation_id}/?after={after}",
            origin=self.base_url,  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            proxy=None,
            compression=None,
            open_timeout=20,
            max_size=None,
        )


async def stop_reading(task: asyncio.Task[None] | None) -> None:
    """Cancel a background reader and wait for it, whatever it ended with."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def run_id_of(response: httpx.Response) -> int:
    match = RUN_ID.search(response.text)
    assert match, f"no run block in the response: {response.text[:500]}"
    return int(match[1])


class Frames:
    """Collects a websocket's frames in the background; tests wait on them by predicate."""

    def __init__(self, connect: Any, *, describe: Callable[[], str] = lambda: "") -> None:
        self._connect = connect
        self._describe = describe
        self.frames: list[str] = []
        self.received_at: list[float] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ws: Any = None

    async def __aenter__(self) -> Frames:
        self.ws = await self._connect.__aenter__()
        self._task = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_reading(self._task)
        await self._connect.__aexit__(None, None, None)

    async def _read(self) -> None:
        async for frame in self.ws:
            self.frames.append(frame)
            self.received_at.append(time.monotonic())
            self._changed.set()

    async def wait(self, predicate: Callable[[str], bool], *, timeout: float, what: str) -> str:
        """The first frame (already received or coming) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for frame in self.frames[seen:]:
                if predicate(frame):
                    return frame
            seen = len(self.frames)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self._task is not None and self._task.done()):
                closed = " (the socket closed)" if self._task and self._task.done() else ""
                raise AssertionError(
                    f"no websocket frame {what} within {timeout:.0f}s{closed}; "
                    f"{len(self.frames)} frames:\n"
                    + "\n".join(f[:300] for f in self.frames)
                    + "\n"
                    + self._describe()
                )
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
