"""The Redis broker transport of the deployment: kombu's, with one fault fixed.

kombu 5.7.0 (the newest release) kills a Celery worker on a broker outage. When the worker
loses its connection, Celery first collects the kombu Connection, which detaches the
transport (`transport.client = None`), and then closes it. Closing the channel gives back
the messages the worker holds unacknowledged (tasks waiting for their countdown, late-ack
tasks running) by asking for a fresh Redis client, whose parameters come from
`transport.client`: `AttributeError: 'NoneType' object has no attribute 'hostname'`. It is
not a connection error, so nothing on the way catches it and the worker exits with
"Unrecoverable error" instead of reconnecting. It happens whenever the outage finds the
worker holding a message while it waits for the next one (the scheduler worker nearly always
holds a change-triggered pass waiting for its countdown).

Here a channel whose transport was detached raises a Redis ConnectionError instead, which
is what every caller handles: the close gives up on the requeue, and the unacknowledged
messages, kept in Redis's unacked hash as for any delivery, are put back in their queue by
the next worker's sweep once the visibility timeout has passed (or are gone with a Redis
restarted empty, as every queued message is).

Used through `CELERY_BROKER_TRANSPORT` (tasweb/settings/base.py) when REDIS_URL is set.
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel is closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


__all__ = ["Channel", "Transport"]
