"""The local server's API key goes through the environment, not the command line.

The real server is checked in tests/localmodel/test_api_key_hidden.py (every process's
/proc/<pid>/cmdline); this is the fast check of what the supervisor builds.
"""

from __future__ import annotations

from pathlib import Path

from llms.local_server import LocalServer, LocalServerConfig, _child_env


def test_command_line_has_no_key_and_the_environment_has_it(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("API_KEY", "inherited-key-must-not-pass")
    key = "-secret-key-0123456789abcdef"
    server = LocalServer(LocalServerConfig(state_dir=tmp_path, api_key=key))
    command = server._command(tmp_path / "model.gguf", 8080)
    assert not any(key in arg or "api_key" in arg for arg in command)
    assert _child_env(key)["API_KEY"] == key
    assert "API_KEY" not in _child_env("")
