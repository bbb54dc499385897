"""Django's Redis cache (team mode) with one pool and one client per server and process.

Django's cache handler makes one cache object per thread, each with its own connection
pool, and a server's sync code runs on several threads (the HTTP pool, channels' sync
threads, the run threads): each would open and keep Redis connections of its own. When
Django's ASGI handler still ran every request on a new thread, that meant a new Redis
connection per page load. Given as the cache's ``pool_class``, :class:`SharedConnectionPool`
hands every cache object the process's one pool for that server.

Django also builds a new ``redis.Redis`` client for every cache call, and building one
copies redis-py's table of ~200 reply callbacks: 0.1-0.2 ms of CPU per call, and a request
makes two (its session, its user). :class:`RedisCache` keeps one client per pool (clients
are thread-safe; their connections come from the pool per command).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import redis
from django.core.cache.backends import redis as django_redis


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


_clients: dict[int, redis.Redis] = {}  # by id of a (process-wide) connection pool
_clients_lock = threading.Lock()


class _ReusedClientCacheClient(django_redis.RedisCacheClient):
    """Django's cache client with one ``redis.Redis`` per connection pool, built once."""

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = _clients.get(id(pool))
        if client is None:
            with _clients_lock:
                client = _clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class RedisCache(django_redis.RedisCache):
    """Django's ``RedisCache`` whose client object is reused across calls."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ReusedClientCacheClient
