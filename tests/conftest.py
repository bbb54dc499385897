"""Shared fixtures for the web tests (engine tests live in tests/engine and need no DB)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.utils import translation
from pytest_asyncio import is_async_test

from conversations.runtime import build, start_for_worker
from core import eventloop
from core import runtime as core_runtime
from tests.tools.conftest import web_server  # noqa: F401  (an HTTP server on loopback, for all)

# A clean checkout has no var/secret_key (`manage.py prepare_instance` makes it; importing
# the settings writes nothing): the tests bring a key of their own, for this process and
# for the processes they start with its environment.
TEST_SECRET_KEY = "django-insecure-agentsite-tests-" + "k" * 40


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    os.environ.setdefault("SECRET_KEY", TEST_SECRET_KEY)
    try:
        settings.SECRET_KEY  # noqa: B018  (Django refuses an empty one)
    except ImproperlyConfigured:
        settings.SECRET_KEY = os.environ["SECRET_KEY"]
    # Tests script the model's replies in order and read its last request: an automatic
    # title call after each first answer would take one. Off here and in the processes
    # the tests start; tests/conversations/test_titles.py turns it on.
    os.environ["AGENTSITE_AUTO_TITLES"] = "false"
    settings.AGENTSITE_AUTO_TITLES = False
    # Nor var/staticfiles, which WhiteNoise warns about at every handler's start: static
    # files come from the finders (WHITENOISE_USE_FINDERS), that folder stays empty.
    config.addinivalue_line("filterwarnings", "ignore:No directory at.*staticfiles:UserWarning")


@pytest.fixture(scope="session")
def event_loop_policy():
    """Async tests run on the kind of loop the servers and workers run on (pytest-asyncio)."""
    return eventloop.policy()


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """PBKDF2's deliberate slowness buys nothing in tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def default_language():
    """Each test starts in the site's language, as each request picks its own: Django's
    LocaleMiddleware leaves the language of a test client's request active afterwards."""
    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def runtime(request):
    """The process's runtime, as a server or worker has one (conversations/runtime.py):
    on an async test's own loop, where its runs then execute as on a server's; for a sync
    test, on a run loop in a thread of its own, as a worker's. Closed after the test."""
    if is_async_test(request.node):
        yield request.getfixturevalue("runtime_on_test_loop")
        return
    started = start_for_worker()
    yield started
    started.close_from_outside()


@pytest.fixture
async def runtime_on_test_loop():
    started = core_runtime.start_on(asyncio.get_running_loop(), build)
    yield started
    await started.aclose()


@pytest.fixture(autouse=True)
def tools_network_on(settings):
    """Which tools a run gets must not depend on this machine's internet; the tests of
    the reachability check (tests/tools/test_network.py) set it back to "auto"."""
    settings.AGENTSITE_TOOLS_NETWORK = "on"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def token(db, user) -> str:
    """A personal API token of ``user`` (its plaintext)."""
    from conversations.http.tokens import token_create

    return token_create(user=user, name="test")[1]


@pytest.fixture
def other_token(db, other_user) -> str:
    from conversations.http.tokens import token_create

    return token_create(user=other_user, name="bob's")[1]


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Use a SQLite *file* test database (WAL, busy timeout) instead of shared-cache memory.

    Runs, streams and the publisher touch the database from several threads at once. An
    in-memory shared-cache database answers any overlap with an immediate "database
    table is locked" instead of waiting, which production's file database never does.
    Per process, so parallel test sessions in one checkout do not collide.
    """
    from django.conf import settings

    database = settings.DATABASES["default"]
    test = database.setdefault("TEST", {})
    if database["ENGINE"].endswith("sqlite3") and not test.get("NAME"):
        test["NAME"] = _sqlite_test_database()


def _sqlite_test_database() -> str:
    return os.path.join(tempfile.gettempdir(), f"agentsite-test-{os.getpid()}.sqlite3")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Django deletes the SQLite test database but not its WAL files (left behind in the
    temp directory by every session otherwise)."""
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(_sqlite_test_database() + suffix)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Rate-limit counters, sessions and cached run configuration must not leak between
    tests: ids repeat."""
    from core.configcache import config_cache

    for reset in (cache.clear, config_cache.clear):
        reset()
    yield
    for reset in (cache.clear, config_cache.clear):
        reset()


PROVIDER_KEY = "sk-provider-secret-key-do-not-leak-1234"


@pytest.fixture
def llm_server():
    """The scripted OpenAI-compatible server on a loopback port (real HTTP, real httpx)."""
    from testing.scripted_server import ScriptedServer

    with ScriptedServer() as server:
        yield server


@pytest.fixture
def chat_model(db, llm_server):
    """The site's default model, served by ``llm_server``."""
    from llms.models import LLMModel, Provider

    provider = Provider.objects.create(
        name="scripted", base_url=llm_server.base_url, api_key=PROVIDER_KEY
    )
    return LLMModel.objects.create(
        provider=provider,
        model_id="scripted-model",
        display_name="Scripted",
        abilities={"tool_call": True, "json_mode": True, "streaming": True},
        context_window=32_000,
        max_output_tokens=2_000,
        is_default=True,
    )
