"""One log line per outage, not one per failed call.

While Redis or the database is away, every frame, heartbeat and write fails: logged one
by one with tracebacks, a 5-second outage was a thousand warnings per process, and the
one line that mattered (when it began, what it cost, when it ended) was lost among them.
An :class:`OutageLog` logs the first failure of an episode as a warning with its
traceback, the others at debug level, and the recovery with the count.
"""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("core.outages")


class OutageLog:
    """The failures of one dependency (``what``: "the database", "the channel layer"),
    grouped in episodes; thread-safe, as database threads and event loops both report."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, error: BaseException, *, doing: str) -> None:
        """A call to it failed while ``doing`` something."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
            self._failures += 1
        if first:
            logger.warning(
                "%s is not answering (%s: %s); further failures are logged at debug level",
                self.what, doing, error, exc_info=error,
            )  # fmt: skip
        else:
            logger.debug("%s still not answering (%s)", self.what, doing, exc_info=error)

    def recovered(self) -> None:
        """A call to it succeeded: the episode, if one was open, is over."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, failures = self._since, self._failures
            self._since, self._failures = None, 0
        if since is None:
            return
        logger.warning(
            "%s answers again after %.1fs (%d failed %s)",
            self.what,
            time.monotonic() - since,
            failures,
            "call" if failures == 1 else "calls",
        )
