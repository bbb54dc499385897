"""Team mode's Django cache on a real Redis: one pool and one client per process."""

from __future__ import annotations

import secrets
import threading

import pytest

from agentsite.cache import RedisCache

pytestmark = pytest.mark.integration

OPTIONS = {"OPTIONS": {"pool_class": "agentsite.cache.SharedConnectionPool"}}


def test_values_round_trip_and_expire_on_delete(redis_url):
    cache = RedisCache(redis_url, OPTIONS)
    key = f"test:{secrets.token_hex(4)}"

    cache.set(key, {"user": 1, "name": "alice"}, 30)
    assert cache.get(key) == {"user": 1, "name": "alice"}
    cache.delete(key)
    assert cache.get(key) is None


def test_every_thread_and_cache_object_shares_one_pool_and_client(redis_url):
    """Django builds a cache object per thread: they must not each open connections,
    and no call may build a new client (each build copies redis-py's callback table)."""
    clients = []

    def use_cache() -> None:
        cache = RedisCache(redis_url, OPTIONS)  # what each thread gets
        cache.set("test:shared", "x", 30)
        assert cache.get("test:shared") == "x"
        clients.append(cache._cache.get_client())  # noqa: SLF001 - the object under test
        clients.append(cache._cache.get_client(write=True))  # noqa: SLF001

    threads = [threading.Thread(target=use_cache) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(clients) == 8
    assert len({id(client) for client in clients}) == 1
