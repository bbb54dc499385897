"""The Chinese and Japanese catalogues: complete, compiled, and true to their placeholders."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest
from django.core.management import call_command

LOCALE = Path(__file__).resolve().parents[2] / "locale"
CATALOGUES = sorted(LOCALE.glob("*/LC_MESSAGES/*.po"))
PLACEHOLDER = re.compile(r"%\(\w+\)[sdif]|%[sdif]|<[^>]+>")


def test_there_are_chinese_and_japanese_catalogues_for_pages_and_scripts() -> None:
    names = {f"{p.parts[-3]}/{p.name}" for p in CATALOGUES}
    assert names == {
        "zh_Hans/django.po",
        "zh_Hans/djangojs.po",
        "ja/django.po",
        "ja/djangojs.po",
    }


@pytest.mark.parametrize("path", CATALOGUES, ids=lambda p: f"{p.parts[-3]}-{p.stem}")
def test_every_string_is_translated_and_keeps_its_placeholders(path: Path) -> None:
    catalogue = polib.pofile(str(path))
    untranslated = [e.msgid for e in catalogue.untranslated_entries()]
    fuzzy = [e.msgid for e in catalogue.fuzzy_entries()]
    assert (untranslated, fuzzy) == ([], [])
    broken = []
    for entry in catalogue:
        wanted = sorted(PLACEHOLDER.findall(entry.msgid_plural or entry.msgid))
        # Chinese and Japanese have one plural form: it serves every count.
        for text in [entry.msgstr, *entry.msgstr_plural.values()]:
            if text and sorted(PLACEHOLDER.findall(text)) != wanted:
                broken.append((entry.msgid, text))
    assert broken == []


def test_the_catalogues_hold_every_marked_string_and_are_compiled() -> None:
    """What `make messages` would write is what is committed (strings marked since, or
    no longer marked, and a .mo file older than its .po all fail here)."""
    call_command("messages", "--check", verbosity=0)
