"""A Redis connection pool per server and process for Django's cache (team mode).

Django's cache handler makes one cache object per thread, each with its own connection
pool, and a server's sync code runs on several threads (the HTTP pool, channels' sync
threads, the run threads): each would open and keep Redis connections of its own. When
Django's ASGI handler still ran every request on a new thread, that meant a new Redis
connection per page load. Given as the cache's ``pool_class``, this hands every cache
object the process's one pool for that server.
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
