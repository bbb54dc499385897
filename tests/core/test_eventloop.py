"""The event loop choice (AGENTSITE_EVENT_LOOP): uvloop by default, asyncio on request."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
import uvloop
from django.core.exceptions import ImproperlyConfigured

from core import eventloop


def test_the_default_loop_is_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTSITE_EVENT_LOOP", raising=False)
    loop = eventloop.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, result="ran")) == "ran"
    finally:
        loop.close()


def test_asyncio_keeps_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSITE_EVENT_LOOP", "asyncio")
    loop = eventloop.new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()


def test_an_unknown_loop_is_a_clear_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSITE_EVENT_LOOP", "tokio")
    with pytest.raises(ImproperlyConfigured, match="AGENTSITE_EVENT_LOOP='tokio'.*uvloop, asyncio"):
        eventloop.new_event_loop()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("", "_UnixSelectorEventLoop"), ("uvloop", "Loop"), ("asyncio", "_UnixSelectorEventLoop")],
)
def test_daphnes_reactor_runs_on_the_configured_loop(setting: str, expected: str) -> None:
    """daphne creates its reactor's loop when imported: agentsite.server chooses it first
    (a fresh interpreter, as the server starts; the team-mode test checks the server's log).
    asyncio's loop unless asked: twisted on uvloop misses reset connections."""
    probe = (
        "from core import eventloop; eventloop.install_for_server(); "
        "import daphne.server; from twisted.internet import reactor; "
        "print(type(reactor._asyncioEventloop).__qualname__)"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("EVENT_LOOP")}
    if setting:
        env["AGENTSITE_SERVER_EVENT_LOOP"] = setting
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
