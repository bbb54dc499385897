"""Fixtures shared by the conversation tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_launch(monkeypatch):
    """Runs are created but not started: the test awaits the runner itself (or not at all)."""
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)
