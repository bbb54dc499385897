"""deploy/systemd/: ``systemd-analyze verify`` on the units (with their /opt/agentsite
paths pointed at this checkout, so every ExecStart names a real executable) and
``systemd-analyze security --offline`` for their exposure. No systemd runs as PID 1 here:
the units are not started by the tests."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.stack import REPO

UNITS = REPO / "deploy" / "systemd"
INSTANCES = ["agentsite@8001.service", "agentsite-worker.service", "agentsite-migrate.service"]

pytestmark = pytest.mark.integration  # Debian's systemd (make system-deps)


def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if not found:
        raise AssertionError("systemd-analyze is missing: run `make system-deps` (systemd)")
    return found


@pytest.fixture
def units(tmp_path) -> Path:
    """The units, with the install folder replaced by this checkout (its .venv)."""
    for unit in UNITS.iterdir():
        text = unit.read_text().replace("/opt/agentsite", str(REPO))
        (tmp_path / unit.name).write_text(text)
    assert (REPO / ".venv" / "bin" / "agentsite-server").exists()
    return tmp_path


def test_the_units_verify_without_a_word(units) -> None:
    result = subprocess.run(
        [
            analyze(),
            "verify",
            "--man=no",
            *(f"./{name}" for name in INSTANCES),
            "./agentsite.target",
        ],
        cwd=units,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    # verify exits 0 on unknown keys and bad values, but says so: nothing may be said.
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), (
        result.stdout + result.stderr
    )


@pytest.mark.parametrize(
    ("unit", "most"),
    [
        ("agentsite@8001.service", 2.0),
        ("agentsite-migrate.service", 2.0),
        ("agentsite-worker.service", 3.0),
    ],
)
def test_the_units_are_hardened(units, unit, most) -> None:
    """systemd's exposure score (0 is locked down, 10 unprotected); the worker keeps the
    namespaces bubblewrap needs for the python tool's sandbox."""
    result = subprocess.run(
        [analyze(), "security", "--offline=yes", "--no-pager", f"./{unit}"],
        cwd=units,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    score = re.search(r"Overall exposure level for \S+: ([\d.]+)", result.stdout)
    assert score, result.stdout + result.stderr
    assert float(score[1]) <= most, result.stdout


def test_every_unit_reads_the_environment_file_and_runs_as_agentsite() -> None:
    for name in ("agentsite@.service", "agentsite-worker.service", "agentsite-migrate.service"):
        text = (UNITS / name).read_text()
        assert "EnvironmentFile=/etc/agentsite/agentsite.env" in text, name
        assert "User=agentsite" in text and "StateDirectory=agentsite" in text, name
    target = (UNITS / "agentsite.target").read_text()
    assert "agentsite@8001.service agentsite@8002.service agentsite-worker.service" in target
    example = (UNITS / "agentsite.env.example").read_text()
    assert "AGENTSITE_TRUSTED_PROXY_HOPS=1" in example
    assert "AGENTSITE_VAR_DIR=/var/lib/agentsite" in example
