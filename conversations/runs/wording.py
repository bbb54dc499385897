"""Numbers in the sentences a user reads: "1 minute", "90 seconds", never "1 minutes"."""

from __future__ import annotations

from django.utils.translation import ngettext


def duration_words(seconds: float) -> str:
    """``seconds`` in whole minutes when it is at least one and a whole number of them,
    else in seconds: "10 minutes", "1 minute", "90 seconds", "1 second"."""
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return ngettext("%(count)d minute", "%(count)d minutes", minutes) % {"count": minutes}
    if seconds == int(seconds):
        whole = int(seconds)
        return ngettext("%(count)d second", "%(count)d seconds", whole) % {"count": whole}
    return ngettext("%(count)s second", "%(count)s seconds", 2) % {"count": f"{seconds:g}"}
