"""The Redis cache fails over to process memory while Redis is unreachable: the API answers, throttling still counts."""

from __future__ import annotations

import pytest
from django.test import override_settings

from config.cache import FailoverRedisCache
from tests.faults.conftest import free_port

DOWN = {
    "default": {
        "BACKEND": "config.cache.FailoverRedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}


def test_it_serves_from_process_memory_while_redis_is_down():
    cache = FailoverRedisCache(f"redis://127.0.0.1:{free_port()}/0", {"OPTIONS": {"socket_connect_timeout": 0.5}})
    assert cache.get("missing", "default") == "default"
    assert cache.add("slot", "a", 30) is True and cache.add("slot", "b", 30) is False
    cache.set("n", 1)
    assert cache.incr("n") == 2 and cache.get_many(["n", "slot"]) == {"n": 2, "slot": "a"}


def test_it_goes_back_to_redis_once_it_answers(private_redis_url):
    cache = FailoverRedisCache(private_redis_url, {})
    cache.set("k", "in redis")
    assert FailoverRedisCache(private_redis_url, {}).get("k") == "in redis"


@pytest.fixture
def private_redis_url():
    import shutil

    from conftest import need
    from tests.faults.conftest import PrivateRedis

    need(shutil.which("redis-server") is not None, "needs redis-server on PATH")
    redis = PrivateRedis()
    redis.start()
    yield redis.url
    redis.stop()
    shutil.rmtree(redis.dir, ignore_errors=True)


@override_settings(CACHES=DOWN)
def test_the_api_answers_and_still_throttles_while_the_cache_redis_is_down(client, bob, study, monkeypatch):
    from annotate.studies.tokens import token_create
    from api.throttling import TokenRateThrottle

    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"anon": "60/min", "user": "3/min"})
    _, key = token_create(user=bob, name="cache down")
    statuses = [client.get("/api/v1/studies/", HTTP_AUTHORIZATION=f"Token {key}").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]  # counted in process memory meanwhile
