"""One Redis connection pool per server and process for Django's Redis cache (team mode).

Django builds a cache object per request context under ASGI, and each builds its own
connection pool: every page load would open (and leave to the garbage collector) a new
Redis connection. Given as the cache's documented ``pool_class`` option,
:class:`SharedConnectionPool` hands every cache object the process's one pool for a URL.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import redis


class SharedConnectionPool(redis.ConnectionPool):
    _shared: ClassVar[dict[tuple[str, str], redis.ConnectionPool]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> redis.ConnectionPool:
        key = (url, repr(sorted(kwargs.items())))
        with cls._lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = super().from_url(url, **kwargs)
            return pool
