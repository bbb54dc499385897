"""Fixtures for the browser tests: a real daphne, the scripted LLM server and Chromium.

Everything runs as it does in production, in separate processes: the scripted
OpenAI-compatible server (``testing.scripted_server``) answers the app's LLM calls,
a ``daphne`` subprocess serves the app in embedded mode from a temporary var dir, and
Debian's ``chromium`` binary is driven by Playwright's sync API. Process logs, console
logs and screenshots go to ``test-artifacts/e2e/``.

The fixtures are package-scoped, not session-scoped: Playwright's sync API keeps an event
loop running in the main thread, which would break the rest of the suite (Django refuses
synchronous ORM calls there), so everything is torn down when this package is done.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
USERS = {"alice": "alice-e2e-pw-7431", "bob": "bob-e2e-pw-9182"}
PROVIDER = "scripted"
MODEL = "scripted-model"
VISION_MODEL = "scripted-vision"  # the same server, declared able to read images
START_TIMEOUT = 30.0
TIMEOUT_MS = 10_000

# A variable that points the app at other services would break the embedded setup.
_SCRUBBED_ENV = (
    "REDIS_URL",
    "DATABASE_URL",
    "AGENTSITE_EXECUTION",
    "ALLOWED_HOSTS",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


# ------------------------------------------------------------------------ processes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll until something accepts connections on ``port`` (fail fast if ``proc`` died)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[0]} exited with {proc.returncode}:\n{_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    pytest.fail(f"nothing listens on port {port} after {START_TIMEOUT:.0f} s:\n{_tail(log)}")


@pytest.fixture(scope="package")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="package")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of the app's processes: embedded mode on a fresh temporary var dir."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env.update(
        AGENTSITE_VAR_DIR=str(tmp_path_factory.mktemp("agentsite-var")),
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        PYTHONUNBUFFERED="1",
    )
    return env


def _setup_script(base_url: str) -> str:
    """Python for ``manage.py shell -c``: the database, the users, the scripted model."""
    return f"""
from django.contrib.auth import get_user_model
from django.core.management import call_command

call_command("migrate", interactive=False, verbosity=0)
for name, password in {USERS!r}.items():
    get_user_model().objects.create_user(name, password=password)
call_command("add_provider", name={PROVIDER!r}, base_url={base_url!r}, api_key="e2e-key")
call_command(
    "add_model", provider={PROVIDER!r}, model={MODEL!r},
    abilities="tool_call,json_mode,streaming", default=True,
)
call_command(
    "add_model", provider={PROVIDER!r}, model={VISION_MODEL!r},
    abilities="tool_call,json_mode,streaming,vision",
)
"""


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode:
        pytest.fail(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass
class ScriptedLLM:
    """Client of the scripted server's control endpoints."""

    url: str  # without /v1

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _call(self, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def script(
        self,
        *responses: dict[str, Any] | str,
        default: dict[str, Any] | str | None = None,
        rules: list[dict[str, Any]] | None = None,
    ) -> None:
        """Forget everything, then answer the next chat requests with ``responses``, and
        every one after them with ``default`` (when given); ``rules`` answer the requests
        they match first (testing/scripted_server.py)."""
        body: dict[str, Any] = {"reset": True, "responses": list(responses)}
        if default is not None:
            body["default"] = default
        if rules is not None:
            body["rules"] = rules
        self._call("/_script", body)

    def release(self, name: str) -> None:
        """Let the responses scripted with ``after_release: name`` answer."""
        self._call("/_release", {"name": name})

    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat requests received since the last ``script()``."""
        return [entry["body"] for entry in self._call("/_requests")]


@pytest.fixture(scope="package")
def scripted_server(artifacts: Path, server_env: dict[str, str]) -> Iterator[ScriptedLLM]:
    """The scripted OpenAI-compatible server, a subprocess on a free loopback port."""
    log = artifacts / "scripted-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "testing.scripted_server", "--port", "0"],
            cwd=ROOT,
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        match = None
        while match is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the scripted server did not start:\n{_tail(log)}")
            match = re.search(r"(http://127\.0\.0\.1:\d+)/v1", log.read_text(errors="replace"))
            time.sleep(0.05)
        yield ScriptedLLM(match.group(1))
    finally:
        _stop(proc)


@pytest.fixture(scope="package")
def app_server(
    artifacts: Path, server_env: dict[str, str], scripted_server: ScriptedLLM
) -> Iterator[str]:
    """A migrated database with two users and the scripted model, served by daphne."""
    with serve_app(server_env, scripted_server, artifacts / "daphne.log") as url:
        yield url


@contextlib.contextmanager
def serve_app(server_env: dict[str, str], scripted_server: ScriptedLLM, log: Path) -> Iterator[str]:
    """daphne serving the app with ``server_env`` (its ``AGENTSITE_VAR_DIR`` holds the
    database: migrated, with the two users and the scripted model); its base URL."""
    server = BIN / "agentsite-server"
    if not server.exists():
        pytest.fail(f"{server} is missing: run `make install`")
    port = _free_port()
    with log.open("wb") as out:
        # Started first: it imports the app while the database is being set up (the app
        # touches the database only when serving).
        proc = subprocess.Popen(
            [str(server), "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"],
            cwd=ROOT,
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # One process (Django starts slowly): migrate, the two users, then the scripted
        # provider and its model through the add_provider/add_model management commands.
        _manage(server_env, "shell", "-c", _setup_script(scripted_server.base_url))
        _wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture
def llm(scripted_server: ScriptedLLM) -> ScriptedLLM:
    """The scripted server, reset: each test scripts the replies it needs."""
    scripted_server.script()
    return scripted_server


# -------------------------------------------------------------------------- browser


@pytest.fixture(scope="package")
def chromium() -> Path:
    """Debian's Chromium; its absence fails the tests (``make test`` installs it)."""
    if not (CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"{CHROMIUM} not found: the browser tests need Debian's chromium package "
            "(`make system-deps` installs it, or `apt-get install chromium`)",
            pytrace=False,
        )
    return CHROMIUM


@pytest.fixture(scope="package")
def new_context(chromium: Path, app_server: str) -> Iterator[Callable[..., BrowserContext]]:
    """A factory of isolated browser contexts (own cookies) of one Chromium process.

    Playwright starts Chromium with a fresh temporary ``--user-data-dir`` and removes it
    at exit, so no profile of the machine is read or written.
    """
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )

        def make(base_url: str = app_server, **options: Any) -> BrowserContext:
            """``options`` go to Playwright's ``new_context`` (a phone: ``viewport``,
            ``has_touch``, ``is_mobile``)."""
            options.setdefault("viewport", {"width": 1280, "height": 900})
            context = browser.new_context(base_url=base_url, **options)
            context.set_default_timeout(TIMEOUT_MS)
            return context

        try:
            yield make
        finally:
            browser.close()


def log_in(page: Page, username: str, password: str | None = None) -> None:
    """Log in through the login form and wait for the conversation list."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password or USERS[username])
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".who")).to_have_text(username)


@contextlib.contextmanager
def signed_in_page(
    new_context: Callable[..., BrowserContext],
    username: str,
    password: str | None = None,
    **options: Any,
) -> Iterator[Page]:
    """A tab of a browser of its own (``options``: viewport, touch…), signed in as
    ``username``; the browser is closed afterwards."""
    context = new_context(**options)
    try:
        page = context.new_page()
        log_in(page, username, password)
        yield page
    finally:
        context.close()


@pytest.fixture(scope="package")
def alice_context(new_context: Callable[[], BrowserContext]) -> BrowserContext:
    """A browser context logged in as alice, shared by the chat tests (a tab per test)."""
    context = new_context()
    page = context.new_page()
    log_in(page, "alice")
    page.close()
    return context


class PageLog:
    """Console messages and uncaught page errors of one tab."""

    def __init__(self, page: Page) -> None:
        self.lines: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.lines.append(f"pageerror: {exc}"))

    def _console(self, message: ConsoleMessage) -> None:
        self.lines.append(f"console.{message.type}: {message.text}")


def _test_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"\W+", "_", request.node.name.removeprefix("test_"))


@pytest.fixture
def chat_page(
    request: pytest.FixtureRequest, alice_context: BrowserContext, artifacts: Path
) -> Iterator[Page]:
    """A new tab of alice's browser; its console log is saved next to the screenshots."""
    page = alice_context.new_page()
    log = PageLog(page)
    try:
        yield page
    finally:
        (artifacts / f"{_test_name(request)}.console.txt").write_text("\n".join(log.lines) + "\n")
        page.close()


# `make screenshots` sets this: the tests that show a feature best also save what the
# screen shows as docs/screenshots/<name>.png, the README's pictures. A plain test run
# leaves the committed pictures alone.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
TO_DOCS = "AGENTSITE_SCREENSHOTS_TO_DOCS"


@pytest.fixture
def screenshot(request: pytest.FixtureRequest, artifacts: Path) -> Callable[..., Path]:
    """``screenshot(page)`` saves test-artifacts/e2e/<test>.png, the whole page;
    ``screenshot(page, docs="name")`` also the screen for the docs (see TO_DOCS)."""

    def take(page: Page, docs: str | None = None) -> Path:
        path = artifacts / f"{_test_name(request)}.png"
        page.screenshot(path=str(path), full_page=True)
        if docs is not None and os.environ.get(TO_DOCS):
            DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DOCS_SCREENSHOTS / f"{docs}.png"))
        return path

    return take
