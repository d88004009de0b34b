"""Recovery of the running scheduler with the deployment's settings: how fast a SIGKILLed
leader is replaced, how long a lost task's marks hold anything back, how soon the broker
gives a killed worker's task to another, and that workers outlive Redis going away for a
while.

Everything runs on the test settings' servers; the Redis outage stops and starts the local
Redis as the fault tests do (support.redis_stop). PostgreSQL restarts are exercised by
`benchmarks/chaos.py`, which runs the stack on servers of its own.
"""

from __future__ import annotations

import time

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from tasweb.cluster.services import object_upsert
from tasweb.scheduling.leader import lock_ttl, scheduler_key
from tasweb.scheduling.models import SchedulingPass
from tasweb.scheduling.services import pass_schedule, request_pass
from tasweb.scheduling.tasks import run_pass

from .support import (
    EXAMPLE_ADMISSIBLE,
    admitted_count,
    assert_results_whole,
    import_example_cluster,
    redis_start,
    redis_stop,
    small_workload,
    wait_for,
)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# What the deployment runs with (tasweb/settings/base.py), not the fault tests' shortcuts.
DEPLOYED = {"TAS_SCHEDULER_LOCK_TTL": str(int(lock_ttl()))}

def leader_key() -> str:
    return scheduler_key("leader")


def client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _channel_holding_a_message(transport: str):
    """A broker channel that holds one delivered, unacknowledged message, as a worker does."""
    from kombu import Connection, Exchange, Queue

    queue = Queue(f"tasweb-test-recovery-{transport.rsplit(':', 1)[-1]}", Exchange("tasweb-test-recovery"),
                  routing_key="recovery")
    connection = Connection(settings.REDIS_URL, transport=transport)
    channel = connection.default_channel
    bound = queue(channel)
    bound.declare()
    bound.purge()
    connection.Producer(channel).publish({"n": 1}, exchange=queue.exchange, routing_key="recovery")
    message = bound.get(no_ack=False)
    assert message is not None and channel.qos._delivered
    return connection, channel, bound


@pytest.mark.parametrize(("transport", "survives"), [("redis", False), ("tasweb.broker:Transport", True)])
def test_closing_a_broker_connection_that_was_collected_keeps_the_worker_alive(scheduler_state, transport, survives):
    # What Celery does on a lost broker connection: collect the kombu Connection (which
    # detaches the transport), then close it; the channel then gives back what it holds.
    connection, channel, bound = _channel_holding_a_message(transport)
    try:
        channel.connection.client = None  # what Connection.collect() leaves behind
        if not survives:
            # kombu's own transport: the error that killed the worker (not a connection error)
            with pytest.raises(AttributeError, match="hostname"):
                connection.close()
            return
        connection.close()  # a connection error inside, handled as one: nothing escapes
        # the message was not lost: it waits in the unacked hash for the visibility timeout
        assert client().hlen(channel.unacked_key) >= 1
    finally:
        fresh = type(connection)(settings.REDIS_URL, transport=transport)
        fresh.default_channel.client.delete(channel.unacked_key, channel.unacked_index_key)
        bound(fresh.default_channel).delete()
        fresh.close()


def test_deployed_recovery_settings_fit_the_recovery_targets():
    # a dead leader's lock lapses, and a lost task's debounce mark expires, within 10 s
    assert lock_ttl() <= 8
    assert settings.TAS_SCHEDULER_DEBOUNCE + settings.TAS_SCHEDULER_SCHEDULED_SLACK <= 10
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    # a killed worker's task is back in the queue within a minute of its delivery ...
    assert options["visibility_timeout"] + options["unacked_restore_interval"] <= 60
    assert options["unacked_restore_throttle"] == 1
    # ... but never while it still runs: the pass's hard time limit and the retry countdown fit
    assert options["visibility_timeout"] > settings.TAS_SCHEDULER_PASS_TIME_LIMIT + 10
    assert run_pass.retry_backoff_max < options["visibility_timeout"]
    # the broker is waited for, however long it is away
    assert settings.CELERY_BROKER_CONNECTION_MAX_RETRIES is None
    assert settings.CELERY_BROKER_CONNECTION_RETRY and settings.CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP


def test_a_lost_change_task_holds_back_change_passes_for_less_than_10_s(scheduler_state):
    from tasweb.celery import app

    assert pass_schedule(countdown=settings.TAS_SCHEDULER_DEBOUNCE)
    app.control.purge()  # the queued task is lost (its worker was killed holding it)
    ttl = client().ttl(cache.make_key(scheduler_key("scheduled")))
    assert 0 < ttl <= 10
    assert not pass_schedule(countdown=1)  # suppressed while the mark lives ...
    wait_for(lambda: pass_schedule(countdown=1), timeout=11, interval=0.25, what="the stale mark to expire")


def test_sigkilled_leader_is_replaced_within_10_s_and_held_the_lock_past_its_ttl(workers):
    # A pass longer than two TTLs: only renewals keep the lock while it runs.
    hold = 2.5 * lock_ttl()
    env = {**DEPLOYED, "TAS_TEST_PASS_DELAY": str(hold)}
    first, second = workers("first", env=env), workers("second", env=env)
    first.wait_ready()
    second.wait_ready()
    import_example_cluster()

    request_pass()
    wait_for(lambda: first.trace() or second.trace(), timeout=20, what="a pass to reach its commit",
             workers=(first, second))
    leader, other = (first, second) if first.trace() else (second, first)
    time.sleep(lock_ttl() * 1.5)
    token = client().get(leader_key())
    assert token is not None, "the lock lapsed while its holder was working"
    # the other worker cannot lead meanwhile
    run_pass.delay(trigger=SchedulingPass.Trigger.MANUAL)

    leader.kill()
    killed = time.monotonic()
    wait_for(lambda: client().get(leader_key()) != token, timeout=lock_ttl() + 2, interval=0.05,
             what="the dead leader's lock to lapse")
    lapsed = time.monotonic() - killed
    assert lapsed <= lock_ttl() + 1
    # A change now is served by the other worker (waiting out the lock if needed).
    object_upsert(kind="Workload", obj=small_workload("after-kill"))
    request_pass()
    wait_for(lambda: other.trace(), timeout=max(0.1, 10 - (time.monotonic() - killed)), interval=0.05,
             what="the other worker to lead within 10 s of the kill", workers=(first, second))
    assert other.alive() and not leader.alive()


def test_a_task_lost_with_its_whole_worker_is_redelivered_within_a_minute(workers):
    # Nothing else triggers a pass: only the broker redelivering the dead worker's task does.
    env = {**DEPLOYED, "TAS_TEST_PASS_DELAY": "3"}
    first, second = workers("first", env=env), workers("second", env=env)
    first.wait_ready()
    second.wait_ready()
    import_example_cluster()

    request_pass()
    wait_for(lambda: first.trace() or second.trace(), timeout=20, what="a pass to reach its commit",
             workers=(first, second))
    delivered = time.monotonic()
    leader, other = (first, second) if first.trace() else (second, first)
    leader.kill()
    assert SchedulingPass.objects.count() == 0
    wait_for(lambda: SchedulingPass.objects.exists(), timeout=60, interval=0.25,
             what="the killed worker's task to run on the other worker", workers=(first, second))
    assert time.monotonic() - delivered <= 60
    assert [p.trigger for p in SchedulingPass.objects.all()] == [SchedulingPass.Trigger.CHANGE]
    assert [entry["pid"] for entry in other.trace()] == [other.pid]
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert_results_whole()


def submit_after_redis_outage(name: str) -> None:
    """Submit a small workload and ask for a pass, as soon as Redis takes triggers again."""

    def submitted() -> bool:
        try:
            object_upsert(kind="Workload", obj=small_workload(name))
            request_pass()
        except (redis.exceptions.RedisError, OSError):
            return False
        return True

    wait_for(submitted, timeout=15, what="Redis to take triggers again")


def test_workers_outlive_a_30_s_redis_outage_and_resume_alone(workers):
    # As deployed: prefork and solo pools, gossip, mingle and heartbeats on.
    scheduler = workers("scheduler", env=DEPLOYED, production_flags=True)
    other = workers("other", pool="prefork", env=DEPLOYED, production_flags=True)
    scheduler.wait_ready()
    other.wait_ready()
    import_example_cluster()
    request_pass()
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE, timeout=30, what="the first pass",
             workers=(scheduler, other))

    redis_stop()
    try:
        time.sleep(30)
        assert scheduler.alive() and other.alive()
    finally:
        redis_start()
    back = time.monotonic()

    submit_after_redis_outage("after-redis-outage")
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE + 1, timeout=30,
             what="a pass after the outage", workers=(scheduler, other))
    assert time.monotonic() - back <= 30
    time.sleep(3)  # a crash in the reconnect would show by now
    for worker in (scheduler, other):
        assert worker.alive(), worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()
    assert_results_whole()


def test_a_prefork_worker_keeps_its_pool_through_a_broker_outage_longer_than_the_time_limits(workers):
    # Celery's pool time limits are kept by the worker's event loop, which stops while the
    # broker is away: a pass that ended during the outage was still "running" for it after,
    # so the soft limit was raised in the idle child and the hard one killed the child (at
    # worst mid-way through writing a result: "Unrecoverable error"). The pass keeps its own
    # limit, and so does every task (here shorter than the outage, too).
    env = {**DEPLOYED, "TAS_TEST_PASS_DELAY": "1", "TAS_TASK_TIME_LIMIT": "20"}
    worker = workers("prefork", pool="prefork", env=env, production_flags=True)
    worker.wait_ready()
    import_example_cluster()
    request_pass()
    wait_for(lambda: worker.trace(), timeout=30, what="the pass to reach its commit", workers=(worker,))
    redis_stop()
    try:
        # the worker reconnects past the pass's limit (30 s, from when it started) and the
        # task's (20 s), as it did when Celery kept the limits
        time.sleep(settings.TAS_SCHEDULER_PASS_TIME_LIMIT + 2)
    finally:
        redis_start()

    submit_after_redis_outage("after-outage")
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE + 1, timeout=40, what="a pass after the outage",
             workers=(worker,))
    time.sleep(2)  # a limit firing late would show by now
    log = worker.log()
    assert worker.alive(), log[-3000:]
    for sign in ("time limit", "Unrecoverable error", "exited with", "SoftTimeLimitExceeded"):
        assert sign not in log, log[-5000:]
    assert_results_whole()
