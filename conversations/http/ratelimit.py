"""A per-client request rate limit kept in Django's cache (Redis in team mode).

Sliding-window counter: the current minute's count plus the previous minute's count
weighted by how much of it still overlaps the last 60 seconds. Unlike a fixed window it
does not allow a double burst around a minute boundary, and it needs two cache keys per
client instead of one entry per request. Refused requests are not counted, so a client
that backs off for ``Retry-After`` seconds is let in again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

__all__ = ["RateLimitResult", "rate_limit", "rate_limit_hit"]

WINDOW_SECONDS = 60


def rate_limit() -> int:
    """Requests allowed per client per minute (``AGENTSITE_API_RATE_LIMIT``; 0 = off)."""
    return int(settings.AGENTSITE_API_RATE_LIMIT)


@dataclass(frozen=True)
class RateLimitResult:
    allowed: bool
    limit: int
    remaining: int
    retry_after: int = 0


def _key(client: str, window_index: int) -> str:
    return f"agentsite:ratelimit:{client}:{window_index}"


def _count(key: str) -> int:
    return int(cache.get(key) or 0)


def _incr(key: str) -> int:
    cache.add(key, 0, timeout=WINDOW_SECONDS * 2 + 5)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add() and incr()
        cache.set(key, 1, timeout=WINDOW_SECONDS * 2 + 5)
        return 1


def rate_limit_hit(
    client: str, *, limit: int | None = None, now: float | None = None
) -> RateLimitResult:
    """Count one request of ``client``; refuse it when the last minute is already full."""
    limit = rate_limit() if limit is None else limit
    if limit <= 0:
        return RateLimitResult(allowed=True, limit=0, remaining=0)
    now = time.time() if now is None else now
    index = int(now // WINDOW_SECONDS)
    elapsed = now - index * WINDOW_SECONDS
    previous = _count(_key(client, index - 1))
    weight = 1 - elapsed / WINDOW_SECONDS
    current = _incr(_key(client, index))
    estimate = previous * weight + current
    if estimate <= limit:
        return RateLimitResult(
            allowed=True, limit=limit, remaining=max(0, math.floor(limit - estimate))
        )
    cache.decr(_key(client, index))
    return RateLimitResult(
        allowed=False,
        limit=limit,
        remaining=0,
        retry_after=_retry_after(previous, current - 1, elapsed, limit),
    )


def _retry_after(previous: int, current: int, elapsed: float, limit: int) -> int:
    """Seconds until one more request fits, assuming the client sends nothing meanwhile."""
    room = limit - 1 - current  # what the previous window's weighted count may still be
    if room >= 0 and previous > 0:
        # Still in this window: previous * (1 - (elapsed + t) / W) <= room.
        wait = WINDOW_SECONDS * (1 - room / previous) - elapsed
        if wait <= WINDOW_SECONDS - elapsed:
            return max(1, math.ceil(wait))
    # In the next window this one's count decays: current * (1 - s / W) <= limit - 1.
    decay = WINDOW_SECONDS * max(0.0, 1 - (limit - 1) / current) if current else 0.0
    return max(1, math.ceil(WINDOW_SECONDS - elapsed + decay))
