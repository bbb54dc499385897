"""deploy/nginx.conf rendered and run for the tests: an unprivileged nginx on a free port.

The site configuration is rendered by ``deploy/render-nginx-conf`` (the command the
plain-host guide runs; the nginx image's template step substitutes the same names), and
wrapped in the ``http {}`` context every nginx install has (Debian's and the image's
``/etc/nginx/nginx.conf``: mime types, then the site), with every path the server writes
(pid, logs, temp files) in a folder of its own. As root, nginx runs as ``nobody``: the
folder is handed to that user, and static files are collected into it, world-readable as
on a host.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.integration.stack import LOOPBACK, REPO, Process, free_port, spawn, wait_for

RENDER = REPO / "deploy" / "render-nginx-conf"
COLLECT_STATIC = REPO / "deploy" / "collect-static"
TEMPLATE = REPO / "deploy" / "nginx.conf"
PLACEHOLDERS = (
    "AGENTSITE_NGINX_LISTEN",
    "AGENTSITE_NGINX_SERVER_NAME",
    "AGENTSITE_NGINX_UPSTREAMS",
    "AGENTSITE_NGINX_STATIC_ROOT",
    "AGENTSITE_NGINX_MAX_BODY_SIZE",
    "AGENTSITE_NGINX_SNIPPETS",
)
# What the access log says of each request: the upstream that answered it ("-": nginx did).
LOG_FORMAT = '$request_id $status $upstream_addr "$request"'

MAIN_CONF = """\
worker_processes 1;
pid {base}/nginx.pid;
error_log {base}/error.log info;
daemon off;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    log_format agentsite_test '{log_format}';
    access_log {base}/access.log agentsite_test;
    client_body_temp_path {base}/tmp/client_body;
    proxy_temp_path {base}/tmp/proxy;
    fastcgi_temp_path {base}/tmp/fastcgi;
    uwsgi_temp_path {base}/tmp/uwsgi;
    scgi_temp_path {base}/tmp/scgi;
    include {base}/agentsite.conf;
}}
"""


class NginxMissing(RuntimeError):
    pass


def nginx_binary() -> str:
    """The nginx executable; a failure that says how to get it otherwise."""
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).exists():
        raise NginxMissing("nginx is not installed: run `make system-deps` (apt-get install nginx)")
    return found


def _unprivileged() -> tuple[int | None, int | None]:
    """(uid, gid) to run nginx as: nobody when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None, None
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def render(values: dict[str, str]) -> str:
    """deploy/nginx.conf through deploy/render-nginx-conf with ``values`` in the env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSITE_NGINX_")}
    env.update(values)
    result = subprocess.run(
        [str(RENDER)], env=env, capture_output=True, text=True, check=False, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def collect_static(dest: Path) -> None:
    """deploy/collect-static DEST, with this interpreter (the project's venv)."""
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", _venv_python())}
    result = subprocess.run(
        [str(COLLECT_STATIC), str(dest)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _venv_python() -> str:
    return sys.executable


@dataclass
class Nginx:
    """A configured nginx folder; :meth:`start` runs the server (``process``)."""

    base: Path
    port: int
    uid: int | None
    gid: int | None
    process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def conf(self) -> Path:
        return self.base / "nginx.conf"

    @property
    def static_root(self) -> Path:
        return self.base / "static"

    @property
    def snippets(self) -> Path:
        return self.base / "snippets"

    def test_config(self) -> subprocess.CompletedProcess[str]:
        """``nginx -t`` on the configuration, as the user that runs it."""
        return subprocess.run(
            [*self._args(), "-t"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
            user=self.uid,
            group=self.gid,
            extra_groups=[] if self.uid is not None else None,
        )

    def _args(self) -> list[str]:
        return [nginx_binary(), "-p", f"{self.base}/", "-c", str(self.conf), "-e", "stderr"]

    def start(self) -> None:
        checked = self.test_config()
        assert checked.returncode == 0, checked.stderr
        self.process = spawn(
            "nginx",
            self._args(),
            env=dict(os.environ),
            log_dir=self.base,
            stop_signal=signal.SIGTERM,
            user=self.uid,
            group=self.gid,
        )

        def answers() -> bool:
            assert self.process is not None
            if not self.process.alive():
                raise RuntimeError(f"nginx exited:\n{self.process.tail()}")
            try:
                return httpx.get(f"{self.url}/_nginx/alive", timeout=1, trust_env=False).is_success
            except httpx.HTTPError:
                return False

        wait_for(answers, timeout=20, what="nginx to answer")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def access_log(self) -> list[dict[str, str]]:
        """The access log's lines as ``{id, status, upstream, request}``."""
        entries = []
        path = self.base / "access.log"
        with contextlib.suppress(FileNotFoundError):
            for line in path.read_text().splitlines():
                request_id, status, upstream, request = line.split(" ", 3)
                entries.append(
                    {
                        "id": request_id,
                        "status": status,
                        "upstream": upstream,
                        "request": request.strip('"'),
                    }
                )
        return entries

    def logs(self) -> str:
        parts = [self.process.tail() if self.process else ""]
        with contextlib.suppress(FileNotFoundError):
            parts.append((self.base / "error.log").read_text()[-4000:])
        return "\n".join(parts)


@contextlib.contextmanager
def configured_nginx(
    upstreams: Sequence[str],
    *,
    static: bool | Path = True,
    snippets: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
) -> Iterator[Nginx]:
    """A folder holding deploy/nginx.conf rendered for ``upstreams`` (host:port), the
    static files collected (``static``: True, or a copy of a tree collected before) and
    ``snippets`` (name -> text) in its snippets folder; removed afterwards. Not started:
    :meth:`Nginx.start`."""
    uid, gid = _unprivileged()
    base = Path(tempfile.mkdtemp(prefix="agentsite-nginx-"))
    nginx = Nginx(base=base, port=free_port(), uid=uid, gid=gid)
    try:
        for folder in ("tmp", "snippets"):
            (base / folder).mkdir()
        for name, text in (snippets or {}).items():
            (nginx.snippets / name).write_text(text)
        if isinstance(static, Path):
            shutil.copytree(static, nginx.static_root)
        elif static:
            collect_static(nginx.static_root)
        else:
            nginx.static_root.mkdir()
        site = render(
            {
                "AGENTSITE_NGINX_LISTEN": f"{LOOPBACK}:{nginx.port}",
                "AGENTSITE_NGINX_SERVER_NAME": "_",
                "AGENTSITE_NGINX_UPSTREAMS": " ".join(f"server {u};" for u in upstreams),
                "AGENTSITE_NGINX_STATIC_ROOT": str(nginx.static_root),
                "AGENTSITE_NGINX_SNIPPETS": str(nginx.snippets),
                **(values or {}),
            }
        )
        (base / "agentsite.conf").write_text(site)
        nginx.conf.write_text(MAIN_CONF.format(base=base, log_format=LOG_FORMAT))
        if uid is not None:
            for path in [base, *base.rglob("*")]:
                os.chown(path, uid, gid, follow_symlinks=False)
        yield nginx
    finally:
        nginx.stop()
        shutil.rmtree(base, ignore_errors=True)


def raw_exchange(port: int, head: bytes | str, *, timeout: float = 10) -> bytes:
    """Send a request head (no body, whatever it declares) and read one answer: its head
    and the body its Content-Length announces."""
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
        sock.sendall(head.encode() if isinstance(head, str) else head)
        received = b""
        while b"\r\n\r\n" not in received:
            data = sock.recv(65536)
            if not data:
                return received
            received += data
        header, _, body = received.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", header)
        while length and len(body) < int(length[1]):
            data = sock.recv(65536)
            if not data:
                break
            body += data
        return header + b"\r\n\r\n" + body
