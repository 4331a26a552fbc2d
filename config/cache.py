"""A Redis cache that fails over to process memory while Redis is unreachable.

Everything Faultline keeps in the cache can be rebuilt or is advisory: API
throttle counters and the per-study LLM request slots. When the cache shares
its Redis with the Celery broker, a Redis outage must not turn every API call
into a 500, so instead of raising, this backend serves from a local-memory
cache of its own for `FAILOVER_S` seconds and then tries Redis again. During
an outage, limits are therefore counted per process instead of per site:
looser, never absent. docs/deploy.md explains the choice.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
FAILOVER_S = 5.0


class FailoverRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._local = LocMemCache(f"failover-{id(self)}", {"TIMEOUT": params.get("TIMEOUT", 300)})
        self._down_until = 0.0

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() < self._down_until:
            return getattr(self._local, name)(*args, **kwargs)
        try:
            return getattr(super(), name)(*args, **kwargs)
        except UNREACHABLE as exc:
            if not self._down_until:
                log.warning("cache: Redis unreachable (%s); using process memory for %.0f s", exc, FAILOVER_S)
            self._down_until = time.monotonic() + FAILOVER_S
            return getattr(self._local, name)(*args, **kwargs)

    def add(self, *args, **kwargs):
        return self._call("add", *args, **kwargs)

    def get(self, *args, **kwargs):
        return self._call("get", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._call("set", *args, **kwargs)

    def touch(self, *args, **kwargs):
        return self._call("touch", *args, **kwargs)

    def delete(self, *args, **kwargs):
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args, **kwargs):
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args, **kwargs):
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args, **kwargs):
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args, **kwargs):
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args, **kwargs):
        return self._call("delete_many", *args, **kwargs)

    def clear(self):
        self._local.clear()
        return self._call("clear")
