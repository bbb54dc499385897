"""A real OpenID Connect provider for the sign-in tests: :mod:`testing.oidc_provider` in a
process of its own, and :class:`OIDCProvider` to steer it over its control endpoint.

    with running_oidc_provider(tmp_path) as idp:
        idp.register_client("agentsite", "s3cret", redirect_uris=[callback])
        idp.add_user("ada", "pw", groups=["staff"])
        ...  # the app under test uses idp.issuer (discovery at idp.discovery_url)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.tools.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0  # migrating a fresh SQLite database takes a few seconds on a slow box
LOG_TAIL_LINES = 60


class ProviderError(RuntimeError):
    """The provider refused a control request, or did not start."""


@dataclass
class OIDCProvider:
    """A running provider: ``url`` is its origin, ``issuer`` what ID tokens carry as iss."""

    url: str
    control_token: str
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def login_url(self) -> str:
        return f"{self.url}/accounts/login/"

    def discovery(self) -> dict[str, Any]:
        response = httpx.get(self.discovery_url, timeout=10)
        response.raise_for_status()
        return response.json()

    def add_user(
        self,
        username: str,
        password: str,
        *,
        email: str | None = None,
        name: str = "",
        groups: Iterable[str] = (),
        active: bool = True,
        email_verified: bool = True,
    ) -> str:
        """Create (or reset) a user; returns its ``sub``. ``email`` defaults to
        ``<username>@example.test``."""
        return self._control(
            "user",
            username=username,
            password=password,
            email=f"{username}@example.test" if email is None else email,
            name=name,
            groups=list(groups),
            active=active,
            email_verified=email_verified,
        )["sub"]

    def update_user(
        self,
        username: str,
        *,
        password: str | None = None,
        email: str | None = None,
        name: str | None = None,
        groups: Iterable[str] | None = None,
        active: bool | None = None,
        email_verified: bool | None = None,
    ) -> str:
        """Change only what is given (e.g. ``active=False``, new ``groups``)."""
        changes = {
            "password": password,
            "email": email,
            "name": name,
            "groups": None if groups is None else list(groups),
            "active": active,
            "email_verified": email_verified,
        }
        given = {key: value for key, value in changes.items() if value is not None}
        return self._control("user", username=username, **given)["sub"]

    def register_client(
        self,
        client_id: str,
        client_secret: str,
        *,
        redirect_uris: Iterable[str],
        post_logout_redirect_uris: Iterable[str] = (),
    ) -> None:
        """A confidential authorization-code client, no consent screen, RS256 ID tokens.
        Registering the same client_id again replaces its secret and URIs."""
        self._control(
            "client",
            client_id=client_id,
            client_secret=client_secret,
            redirect_uris=list(redirect_uris),
            post_logout_redirect_uris=list(post_logout_redirect_uris),
        )

    def misbehave(self, *, id_token: str) -> None:
        """ID tokens issued from now on: ``"normal"``, ``"tamper"`` (payload altered after
        signing), ``"expired"`` (signed, exp an hour ago), ``"wrong_audience"`` (signed for
        another client)."""
        self._control("misbehave", id_token=id_token)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _control(self, action: str, **body: Any) -> dict[str, Any]:
        response = httpx.post(
            f"{self.url}/_control/{action}",
            json=body,
            headers={"X-Control-Token": self.control_token},
            timeout=10,
        )
        if response.status_code != 200:
            raise ProviderError(f"control {action}: {response.status_code} {response.text}")
        return response.json()


def _discovery_answers(provider: OIDCProvider) -> bool:
    try:
        return httpx.get(provider.discovery_url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _child_env(control_token: str) -> dict[str, str]:
    """This process's environment without agentsite's Django settings: the provider is
    another site, configured by ``python -m testing.oidc_provider`` alone."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["OIDC_PROVIDER_CONTROL_TOKEN"] = control_token
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def running_oidc_provider(tmp_path: Path) -> Iterator[OIDCProvider]:
    """Start the provider on a free loopback port with its data (database, signing key) and
    log in ``tmp_path``; yield once discovery answers; stop it at exit."""
    port = free_port()
    token = secrets.token_urlsafe(24)
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "oidc-provider.log"
    command = [
        sys.executable,
        "-m",
        "testing.oidc_provider",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path / "oidc-provider"),
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=REPO, env=_child_env(token), stdout=output, stderr=subprocess.STDOUT
        )
    provider = OIDCProvider(f"http://127.0.0.1:{port}", token, log, process)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _discovery_answers(provider):
            if process.poll() is not None:
                raise ProviderError(
                    f"the OIDC provider exited with code {process.returncode}:\n"
                    + provider.log_tail()
                )
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"the OIDC provider did not answer within {START_TIMEOUT:.0f}s:\n"
                    + provider.log_tail()
                )
            time.sleep(0.05)
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
