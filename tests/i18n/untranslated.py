"""Finding English left in a page rendered in Chinese or Japanese.

A page in another language should hold no English words of ours. Words the translators
kept (API, URL, Markdown, ...), words of the test's own data (user names, model and tool
names) and code are allowed; any other run of Latin letters in the page's text or in an
attribute people read is a string that was never marked for translation, or whose
translation is missing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path

import django.conf
import django.contrib.admin
import polib

LOCALE = Path(__file__).resolve().parents[2] / "locale"
# Content that is not ours to translate: code, the agent's and the user's words.
SKIPPED_TAGS = {"head", "script", "style", "code", "pre", "textarea", "svg", "math", "template"}
# Elements whose text is the user's or the model's (marked in the templates).
USER_CONTENT_ATTRIBUTE = "data-user-content"
READ_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt", "data-confirm")
VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip
WORD = re.compile(r"[A-Za-z][A-Za-z'’]+")
# Not words of a sentence: URLs and paths, e-mail addresses, file names, time zones
# (Asia/Tokyo), placeholders, identifiers (tool_call, auth.login).
NOT_WORDS = re.compile(
    r"https?://\S+|\b[A-Z]\w*(?:/[\w+-]+)+|/[\w./?=&%-]*|\b[\w.+-]+@[\w.-]+\b"
    r"|\b\w+\.(?:py|md|txt|pdf|csv|json|png)\b|%\([a-z_]+\)[sd]|\b[\w-]+_[\w-]+\b"
    r"|\b[a-z]+(?:\.[a-z_]+)+\b"
)


def kept_words() -> set[str]:
    """Latin words the Chinese and Japanese translations themselves use: ours and those
    of Django's admin, which our admin pages show (Control, Command, Mac)."""
    words: set[str] = set()
    paths = [LOCALE / language / "LC_MESSAGES" for language in ("zh_Hans", "ja")]
    for package in (django.conf, django.contrib.admin):
        shipped = Path(package.__file__).parent / "locale"
        paths += [shipped / language / "LC_MESSAGES" for language in ("zh_Hans", "ja")]
    for directory in paths:
        for domain in ("django", "djangojs"):
            path = directory / f"{domain}.po"
            if not path.exists():
                continue
            for entry in polib.pofile(str(path)):
                texts = [entry.msgstr, *entry.msgstr_plural.values()]
                for text in texts:
                    words.update(w.lower() for w in WORD.findall(NOT_WORDS.sub(" ", text)))
    return words


@functools.cache
def django_untranslated(language: str) -> frozenset[str]:
    """Django's own strings its catalogue for ``language`` does not translate (its
    admin's newer labels, in Chinese): not ours to fix."""
    catalogue = {"zh-hans": "zh_Hans", "ja": "ja"}[language]
    untranslated: set[str] = set()
    for package in (django.conf, django.contrib.admin):
        shipped = Path(package.__file__).parent / "locale"
        translated = {
            e.msgid
            for e in polib.pofile(str(shipped / catalogue / "LC_MESSAGES" / "django.po"))
            if e.translated()
        }
        for other in shipped.glob("*/LC_MESSAGES/django.po"):
            if other.parts[-3] in {"ja", "zh_Hans", "en"}:
                untranslated |= {e.msgid for e in polib.pofile(str(other))} - translated
    return frozenset(untranslated)


class _Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.found: list[str] = []

    @property
    def skipping(self) -> bool:
        return any(skipped for _, skipped in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        skipped = tag in SKIPPED_TAGS or USER_CONTENT_ATTRIBUTE in named
        if not self.skipping and not skipped:
            for attribute in READ_ATTRIBUTES:
                if named.get(attribute):
                    self.found.append(named[attribute] or "")
            if tag == "input" and named.get("type") in {"submit", "button"} and named.get("value"):
                self.found.append(named["value"] or "")
        if tag not in VOID_TAGS:
            self.stack.append((tag, skipped))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data: str) -> None:
        if not self.skipping and data.strip():
            self.found.append(data)


def english_left(html: str, allowed: Iterable[str], ignored: Iterable[str] = ()) -> list[str]:
    """The texts of ``html`` (a page or a fragment) with a Latin word that is neither
    allowed nor kept by the translators; texts in ``ignored`` are not looked at."""
    parser = _Texts()
    parser.feed(html)
    known = {word.lower() for word in allowed}
    skipped = {" ".join(text.split()) for text in ignored}
    left = []
    for text in parser.found:
        if " ".join(text.split()) in skipped:
            continue
        words = WORD.findall(NOT_WORDS.sub(" ", text))
        if any(word.lower() not in known for word in words):
            left.append(" ".join(text.split()))
    return left
