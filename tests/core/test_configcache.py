"""The per-process configuration cache: admin changes replace the token, entries expire."""

from __future__ import annotations

from core import configcache
from tools.models import MCPServer


def test_config_changes_replace_the_token(db, chat_model):
    before = configcache.current_token()
    chat_model.display_name = "Renamed"
    chat_model.save()
    after_save = configcache.current_token()
    server = MCPServer.objects.create(name="docs", transport="http", url="http://127.0.0.1:9/")
    after_mcp = configcache.current_token()
    from tools.mcp.services import _record_health

    _record_health(server.pk, error="", tools=[])  # a refreshed tool list (a queryset update)

    assert len({before, after_save, after_mcp, configcache.current_token()}) == 4


def test_cache_rebuilds_on_a_new_token_after_max_age_and_drops_the_oldest():
    cache = configcache.VersionedCache(max_age=60.0, max_entries=2)
    builds = []

    def build(value):
        return lambda: builds.append(value) or value

    assert cache.get("a", "t1", build("a1")) == "a1"
    assert cache.get("a", "t1", build("never")) == "a1"
    assert cache.get("a", "t2", build("a2")) == "a2"
    cache.get("b", "t2", build("b"))
    cache.get("c", "t2", build("c"))  # over the bound: "a" was least recently used
    assert cache.get("a", "t2", build("a3")) == "a3"
    stale = configcache.VersionedCache(max_age=0.0)
    stale.get("k", "t", build("k1"))
    assert stale.get("k", "t", build("k2")) == "k2"
    assert builds == ["a1", "a2", "b", "c", "a3", "k1", "k2"]
