"""Copy the browser builds of the npm packages in package.json into static/vendor/.

The copies are committed (as django-htmx ships htmx), so serving and testing the app
needs no node: only changing a version does (``make vendor`` runs ``npm ci``, then this).
Each package gets its minified browser files and its licence under
``static/vendor/<package>/``; ``static/vendor/manifest.json`` records the version that
was copied and a SHA-256 per file, which ``tests/test_vendor.py`` checks against
package-lock.json. Trailing ``sourceMappingURL`` comments are dropped: the maps are not
shipped, and a reference to a missing file breaks manifest static storages.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "node_modules"
VENDOR = ROOT / "static" / "vendor"
MANIFEST = VENDOR / "manifest.json"

# package -> {source path in the package: destination path under static/vendor/<package>}
FILES: dict[str, dict[str, str]] = {
    "markdown-it": {
        "dist/markdown-it.min.js": "markdown-it.min.js",
        "LICENSE": "LICENSE",
    },
    "markdown-it-dollarmath": {
        "dist/index.umd.min.js": "markdown-it-dollarmath.min.js",
        "LICENSE": "LICENSE",
    },
    "markdown-it-task-lists": {
        "dist/markdown-it-task-lists.min.js": "markdown-it-task-lists.min.js",
        "LICENSE": "LICENSE",
    },
    "dompurify": {
        "dist/purify.min.js": "purify.min.js",
        "LICENSE": "LICENSE",
    },
    "katex": {
        "dist/katex.min.js": "katex.min.js",
        "dist/katex.min.css": "katex.min.css",
        "dist/fonts/": "fonts/",  # every font katex.min.css names
        "LICENSE": "LICENSE",
    },
    "@highlightjs/cdn-assets": {  # highlight.js's own browser build (the common languages)
        "highlight.min.js": "highlight.min.js",
        "styles/a11y-light.min.css": "a11y-light.min.css",
        "styles/a11y-dark.min.css": "a11y-dark.min.css",
        "LICENSE": "LICENSE",
    },
    "mermaid": {
        "dist/mermaid.min.js": "mermaid.min.js",
        "LICENSE": "LICENSE",
    },
    "axe-core": {  # a test tool: tests/e2e/axe.py injects it; no page of the site loads it
        "axe.min.js": "axe.min.js",
        "LICENSE": "LICENSE",
        "LICENSE-3RD-PARTY.txt": "LICENSE-3RD-PARTY.txt",
    },
}

_SOURCE_MAP = re.compile(rb"\n?//# sourceMappingURL=\S+\s*$")


def folder(package: str) -> Path:
    """``static/vendor/<package>`` (a scope's "@" and "/" are dropped from the name)."""
    return VENDOR / package.lstrip("@").replace("/", "-")


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    if source.suffix in (".js", ".css"):
        data = _SOURCE_MAP.sub(b"\n", data)
    target.write_bytes(data)


def _pairs(package: str) -> list[tuple[Path, Path]]:
    base, out = NODE_MODULES / package, folder(package)
    pairs = []
    for source, target in FILES[package].items():
        if source.endswith("/"):
            for path in sorted((base / source).iterdir()):
                pairs.append((path, out / target / path.name))
        else:
            pairs.append((base / source, out / target))
    return pairs


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendor() -> dict[str, dict[str, object]]:
    """Copy every package's files; return the manifest."""
    manifest: dict[str, dict[str, object]] = {}
    for package in FILES:
        meta = json.loads((NODE_MODULES / package / "package.json").read_text())
        shutil.rmtree(folder(package), ignore_errors=True)
        files = {}
        for source, target in _pairs(package):
            _copy(source, target)
            files[target.relative_to(VENDOR).as_posix()] = sha256(target)
        manifest[package] = {"version": meta["version"], "files": files}
    return manifest


def main() -> int:
    if not NODE_MODULES.is_dir():
        print("node_modules/ is missing: run `npm ci` first (`make vendor` does)", file=sys.stderr)
        return 1
    manifest = vendor()
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in VENDOR.rglob("*") if p.is_file())
    print(f"static/vendor/: {len(manifest)} packages, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
