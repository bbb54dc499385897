"""The browser libraries in static/vendor/ are the versions package-lock.json pins.

``make vendor`` (``npm ci`` + ``scripts/vendor_static.py``) copies them and records each
file's SHA-256 in static/vendor/manifest.json; the copies are committed, so the app runs
and tests without node. Here: every copied file is there, unchanged, and nothing else is;
each package's recorded version is the locked one; and where a file names its version in
its banner, it names that one.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "static" / "vendor"
MANIFEST = json.loads((VENDOR / "manifest.json").read_text())
LOCK = json.loads((ROOT / "package-lock.json").read_text())
PACKAGE = json.loads((ROOT / "package.json").read_text())

# Files whose first lines name their version, and how.
BANNERS = {
    "markdown-it/markdown-it.min.js": r"markdown-it {version} ",
    "dompurify/purify.min.js": r"DOMPurify {version} ",
    "highlightjs-cdn-assets/highlight.min.js": r"Highlight\.js v{version} ",
}


def test_every_package_of_package_json_is_vendored_at_its_locked_version():
    assert set(MANIFEST) == set(PACKAGE["dependencies"])
    for name, entry in MANIFEST.items():
        locked = LOCK["packages"][f"node_modules/{name}"]["version"]
        assert entry["version"] == locked == PACKAGE["dependencies"][name], name


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_vendored_files_are_the_copied_ones(name):
    files = MANIFEST[name]["files"]
    assert any(path.endswith("LICENSE") for path in files), f"{name} ships no licence"
    for path, digest in files.items():
        data = (VENDOR / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{path} changed: run `make vendor`"


def test_nothing_else_is_in_static_vendor():
    listed = {path for entry in MANIFEST.values() for path in entry["files"]}
    present = {path.relative_to(VENDOR).as_posix() for path in VENDOR.rglob("*") if path.is_file()}
    assert present - {"manifest.json"} == listed


@pytest.mark.parametrize("path", sorted(BANNERS))
def test_banners_name_the_locked_version(path):
    package = next(name for name, entry in MANIFEST.items() if path in entry["files"])
    pattern = BANNERS[path].format(version=re.escape(MANIFEST[package]["version"]))
    head = (VENDOR / path).read_text(errors="replace")[:400]
    assert re.search(pattern, head), head[:200]


# Vendored for the browser tests only (tests/e2e/axe.py injects it); no page loads it.
TEST_TOOLS = {"axe-core"}


def test_no_vendored_script_evaluates_strings():
    """The CSP has no 'unsafe-eval': a library that needed it would fail in the page."""
    for name, entry in MANIFEST.items():
        if name in TEST_TOOLS:
            continue
        for path in entry["files"]:
            if path.endswith(".js"):
                text = (VENDOR / path).read_text(errors="replace")
                assert not re.search(r"(?<![\w.$])eval\(|new Function\(", text), path


@pytest.mark.parametrize("name", sorted(TEST_TOOLS))
def test_test_tools_are_not_loaded_by_the_site(name):
    """axe-core checks pages in the browser tests; shipping it to users would cost 600 kB."""
    folder_name = name.lstrip("@").replace("/", "-")
    for base in ("templates", "static/js", "static/css"):
        for path in (ROOT / base).rglob("*"):
            if path.is_file() and path.suffix in (".html", ".js", ".css", ".txt"):
                assert f"vendor/{folder_name}/" not in path.read_text(errors="replace"), path
    for app in ROOT.glob("*/templates"):
        for path in app.rglob("*.html"):
            assert f"vendor/{folder_name}/" not in path.read_text(errors="replace"), path
