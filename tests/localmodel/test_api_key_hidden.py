"""The local server's API key is in no process's command line (issue 28).

``/proc/<pid>/cmdline`` is readable by every local user; the key goes to the server in
its environment instead (``/proc/<pid>/environ``: its own user and root only).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from llms.local_server import LocalServer, LocalServerConfig

N_CTX = 512  # starts fastest; this server answers no completions


def _cmdlines() -> dict[int, bytes]:
    lines: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:  # gone meanwhile
                continue
    return lines


def test_api_key_not_in_any_cmdline(tmp_path: Path):
    server = LocalServer(LocalServerConfig(state_dir=tmp_path, n_ctx=N_CTX))
    info = server.ensure()
    try:
        key = info.api_key.encode()
        assert len(key) >= 24
        assert b"llama_cpp.server" in _cmdlines()[info.pid]
        leaking = [pid for pid, line in _cmdlines().items() if key in line]
        assert leaking == []
        # It reached the server through its environment, and the server enforces it.
        environ = Path(f"/proc/{info.pid}/environ").read_bytes().split(b"\0")
        assert b"API_KEY=" + key in environ
        models = f"{info.base_url}/models"
        assert httpx.get(models, headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.get(models, headers={"Authorization": f"Bearer {info.api_key}"})
        assert ok.status_code == 200
    finally:
        server.stop()
