"""The interface's translation catalogues in locale/ (docs/i18n.md).

``manage.py messages`` extracts every string marked for translation (templates and
Python: domain ``django``; static/js: ``djangojs``) into the Chinese and Japanese
catalogues, then compiles the ``.mo`` files the servers read. The ``.mo`` files are
committed, so ``make run`` needs no gettext; extracting needs it (``make system-deps``).

``manage.py messages --check`` extracts into a temporary copy and fails, naming them, on
strings the committed catalogues lack or hold in vain, and on a ``.mo`` file that is not
the compilation of its ``.po``. It changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

# Catalogue names of settings.LANGUAGES other than English (Django's locale names).
CATALOGUES = ("zh_Hans", "ja")
DOMAINS = ("django", "djangojs")
# Not ours, not shown, or not Django: left out of the extraction.
IGNORED = (
    ".venv",
    "node_modules",
    "var",
    "locale",
    "static/vendor",
    "tests",
    "testing",
    "benchmarks",
    "docs",
    "engine",
    "scripts",
    "deploy",
    "build",
)


@contextlib.contextmanager
def _working_in(directory: Path) -> Iterator[None]:
    """makemessages reads the files under the working directory."""
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _extract(root: Path, locale_dir: Path, *, verbosity: int) -> None:
    """Extract the strings of the files under ``root`` into ``locale_dir``'s catalogues
    (merged with what they hold; strings no longer marked are dropped)."""
    with override_settings(LOCALE_PATHS=[locale_dir]), _working_in(root):
        for domain in DOMAINS:
            call_command(
                "makemessages",
                locale=list(CATALOGUES),
                domain=domain,
                ignore_patterns=list(IGNORED),
                no_obsolete=True,
                add_location="file",
                symlinks=True,
                verbosity=verbosity,
            )


def _source_tree(base: Path, scratch: Path) -> Path:
    """A tree of links to the project's files but not to its locale/: makemessages
    writes to a locale/ directory it finds under its root before LOCALE_PATHS."""
    root = scratch / "source"
    root.mkdir()
    for entry in base.iterdir():
        if entry.name not in IGNORED and not entry.name.startswith("."):
            (root / entry.name).symlink_to(entry)
    return root


def _keys(path: Path) -> set[tuple[str, str, str]]:
    import polib  # noqa: PLC0415 (a test dependency: only --check reads catalogues)

    if not path.exists():
        return set()
    return {(e.msgctxt or "", e.msgid, e.msgid_plural or "") for e in polib.pofile(str(path))}


def _stale_compilations(locale_dir: Path) -> Iterable[str]:
    import polib  # noqa: PLC0415

    for po_path in sorted(locale_dir.glob("*/LC_MESSAGES/*.po")):
        mo_path = po_path.with_suffix(".mo")
        if not mo_path.exists():
            yield f"{mo_path} is missing"
            continue
        compiled = {
            (e.msgctxt or "", e.msgid): (e.msgstr, tuple(sorted(e.msgstr_plural.items())))
            for e in polib.mofile(str(mo_path))
            if e.msgid
        }
        written = {
            (e.msgctxt or "", e.msgid): (e.msgstr, tuple(sorted(e.msgstr_plural.items())))
            for e in polib.pofile(str(po_path)).translated_entries()
            if not e.obsolete
        }
        if compiled != written:
            yield f"{mo_path} is not the compilation of {po_path.name}"


class Command(BaseCommand):
    help = "Extract the strings marked for translation and compile the catalogues."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="Change nothing; fail if the committed catalogues are not up to date.",
        )

    def handle(self, *args: Any, check: bool = False, verbosity: int = 1, **options: Any) -> None:
        locale_dir = Path(settings.LOCALE_PATHS[0])
        if check:
            self._check(locale_dir, verbosity=verbosity)
            return
        _extract(Path(settings.BASE_DIR), locale_dir, verbosity=verbosity)
        with _working_in(Path(settings.BASE_DIR)):
            call_command("compilemessages", locale=list(CATALOGUES), ignore_patterns=list(IGNORED))

    def _check(self, locale_dir: Path, *, verbosity: int) -> None:
        problems = list(_stale_compilations(locale_dir))
        with tempfile.TemporaryDirectory() as scratch:
            fresh = Path(scratch) / "locale"
            shutil.copytree(locale_dir, fresh)
            _extract(_source_tree(Path(settings.BASE_DIR), Path(scratch)), fresh, verbosity=0)
            for catalogue in CATALOGUES:
                for domain in DOMAINS:
                    name = f"{catalogue}/LC_MESSAGES/{domain}.po"
                    now, committed = _keys(fresh / name), _keys(locale_dir / name)
                    problems += [f"{name} lacks {k[1]!r}" for k in sorted(now - committed)]
                    problems += [f"{name} holds unused {k[1]!r}" for k in sorted(committed - now)]
        if problems:
            raise CommandError(
                "The catalogues are not up to date (run `make messages`):\n" + "\n".join(problems)
            )
        if verbosity:
            self.stdout.write("The catalogues are up to date.")
