"""What the bundled model scored on ``benchmarks/agent_tasks.py``, for the chat's notice.

The file is written by the benchmark (``--record``), never by hand, so the notice says
what was measured: the pass rate, when, and the kinds of task it got right.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from django.utils.translation import gettext, gettext_noop

__all__ = ["SCORE_PATH", "BundledScore", "bundled_score"]

logger = logging.getLogger(__name__)

SCORE_PATH = Path(__file__).resolve().parent / "bundled_model_score.json"
# The benchmark's task categories in a reader's words (English; translated when shown).
CATEGORY_WORDS = {
    "time": gettext_noop("the time in a city"),
    "tool error": gettext_noop("saying when a tool failed"),
    "no tool": gettext_noop("questions without tools"),
    "unit conversion": gettext_noop("unit conversions"),
    "percentage": gettext_noop("percentages"),
    "date arithmetic": gettext_noop("dates"),
    "two-step": gettext_noop("two-step questions"),
    "follow-up": gettext_noop("follow-up questions"),
}


@dataclass(frozen=True)
class BundledScore:
    passed: int
    tasks: int
    measured_on: str
    median_first_word_s: float | None
    good_at: tuple[str, ...]  # kinds of task it passed at least half of

    @property
    def good_at_words(self) -> str:
        """``good_at`` in the current language, as a list for a sentence."""
        return ", ".join(gettext(kind) for kind in self.good_at)

    @property
    def first_word(self) -> str:
        return f"{self.median_first_word_s:.0f} s" if self.median_first_word_s else ""


def _passed_half(record: str) -> bool:
    passed, _slash, total = record.partition("/")
    return int(total) > 0 and 2 * int(passed) >= int(total)


@functools.cache
def bundled_score(path: Path = SCORE_PATH) -> BundledScore | None:
    """The recorded score, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(path.read_text())
        return BundledScore(
            passed=int(data["passed"]),
            tasks=int(data["tasks"]),
            measured_on=str(data["measured_on"]),
            median_first_word_s=data.get("median_first_word_s"),
            good_at=tuple(
                CATEGORY_WORDS.get(kind, kind)
                for kind, record in data.get("by_category", {}).items()
                if _passed_half(record)
            ),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("the bundled model's score in %s is unreadable: %s", path, exc)
        return None
