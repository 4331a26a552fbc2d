"""A fix for kombu's Redis transport that keeps a worker alive across a broker outage.

When Redis goes away while a worker holds unacknowledged messages (every
running job: tasks are acknowledged late), Celery's consumer first collects
the broken connection, which detaches the transport from its channel, and
then closes the connection. Closing the channel restores the unacknowledged
messages, and building a Redis client for that reads the detached transport's
`client`, which is None by then:

    Unrecoverable error: AttributeError("'NoneType' object has no attribute 'hostname'")

from `kombu/transport/redis.py` `_connparams`, via `QoS.restore_unacked`. The
AttributeError is not one of the connection errors Celery ignores while it
reconnects, so the worker exits (seen with kombu 5.7 and Celery 5.7).

The patch raises a Redis ConnectionError instead, which Celery treats as what
it is: the broker is unreachable. The consumer then reconnects as usual. The
messages stay in Redis's unacked set, and kombu restores them after the
visibility timeout; the jobs themselves do not wait for that, because each
job's lease (annotate.jobs) hands it to another worker if its own is lost.
"""

from __future__ import annotations


def patch_kombu_redis_detached_channel() -> None:
    from kombu.transport import redis as kombu_redis

    channel_class = kombu_redis.Channel
    if getattr(channel_class, "_faultline_patched", False):
        return
    original = channel_class._connparams

    def _connparams(self, asynchronous=False):
        transport = getattr(self, "connection", None)
        if transport is None or getattr(transport, "client", None) is None:
            import redis

            raise redis.exceptions.ConnectionError("the broker connection was closed while the channel closed")
        return original(self, asynchronous=asynchronous)

    channel_class._connparams = _connparams
    channel_class._faultline_patched = True
