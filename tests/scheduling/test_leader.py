"""The scheduler's leader lock and its triggers, on the real Redis and PostgreSQL."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.cache import cache
from django.core.management import call_command
from django.test import override_settings

from tasweb.celery import app as celery_app
from tasweb.cluster.services import object_upsert
from tasweb.core.deadline import DeadlineExceeded
from tasweb.scheduling.leader import (
    FileLeaderLock,
    LeadershipLost,
    RedisLeaderLock,
    held_in_this_process,
    leadership,
    scheduler_key,
    scheduler_lock,
)
from tasweb.scheduling.models import EventKind, PodSetAssignment, SchedulingPass, WorkloadEvent
from tasweb.scheduling.services import changes_pending, leader_pass_run, request_pass, scheduling_pass_run

from .support import (
    EXAMPLE_ADMISSIBLE,
    PROJECT_ROOT,
    admitted_count,
    import_example_cluster,
    small_workload,
    wait_for,
)

pytestmark = pytest.mark.services


@pytest.fixture
def client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def lock_name(client: redis.Redis, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"tasweb:test:leader:{request.node.name}"
    client.delete(name)
    yield name
    client.delete(name)


def redis_lock(client: redis.Redis, name: str, ttl: float = 5) -> RedisLeaderLock:
    return RedisLeaderLock(client=client, name=name, ttl=ttl)


HOLDER = r"""
import sys, time
import django
django.setup()
from pathlib import Path
import redis
from django.conf import settings
from django.core.cache import cache
from tasweb.scheduling.leader import FileLeaderLock, RedisLeaderLock
kind, name = sys.argv[1], sys.argv[2]
if kind == "redis":
    lock = RedisLeaderLock(client=redis.Redis.from_url(settings.REDIS_URL), name=name, ttl=2)
else:
    lock = FileLeaderLock(path=Path(name))
assert lock.acquire(wait=5)
print("held", flush=True)
time.sleep(600)
"""


def hold_in_another_process(kind: str, name: str) -> subprocess.Popen:
    """A process that takes the lock and keeps it (renewing it) until it is killed."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tasweb.settings.test"}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, kind, name], cwd=PROJECT_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "held":
        proc.kill()
        pytest.fail(f"the holder did not take the lock: {proc.stderr.read() if proc.stderr else ''}")
    return proc


# ---------------------------------------------------------------- the Redis lock


def test_redis_lock_is_exclusive_until_released(client, lock_name):
    first, second = redis_lock(client, lock_name), redis_lock(client, lock_name)

    assert first.acquire(wait=0)
    assert not second.acquire(wait=0.3)
    first.release()
    assert second.acquire(wait=0)
    second.release()
    assert client.get(lock_name) is None


def test_redis_lock_is_renewed_while_held(client, lock_name):
    holder = redis_lock(client, lock_name, ttl=1)
    assert holder.acquire(wait=0)
    try:
        time.sleep(2.5)  # more than twice the TTL: only the watchdog keeps it
        assert not redis_lock(client, lock_name).acquire(wait=0)
        holder.confirm()
        assert 0 < client.pttl(lock_name) <= 1000
    finally:
        holder.release()


def test_dead_holders_lock_expires_and_another_takes_over(client, lock_name):
    holder = hold_in_another_process("redis", lock_name)  # TTL 2 s, renewed while it lives
    try:
        time.sleep(2.5)
        assert not redis_lock(client, lock_name).acquire(wait=0)  # alive: renewed past its TTL
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        killed_at = time.monotonic()
        successor = redis_lock(client, lock_name)
        assert successor.acquire(wait=5)
        assert time.monotonic() - killed_at <= 3
        successor.release()
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_lost_lock_is_reported_and_not_released_over_the_new_holder(client, lock_name):
    holder = redis_lock(client, lock_name)
    assert holder.acquire(wait=0)
    client.delete(lock_name)  # what a Redis restarted empty, or an expiry, does
    successor = redis_lock(client, lock_name)
    assert successor.acquire(wait=0)

    with pytest.raises(LeadershipLost):
        holder.confirm()
    holder.release()
    assert client.get(lock_name) is not None  # still the successor's
    successor.confirm()
    successor.release()


@pytest.mark.django_db(transaction=True)
def test_pass_that_lost_the_lock_writes_nothing(client):
    import_example_cluster()
    lock = scheduler_lock()
    assert isinstance(lock, RedisLeaderLock)
    assert lock.acquire(wait=0)
    try:
        client.delete(scheduler_key("leader"))
        with pytest.raises(LeadershipLost):
            scheduling_pass_run(before_commit=lambda record: lock.confirm())
    finally:
        lock.release()

    assert not SchedulingPass.objects.exists()
    assert admitted_count() == 0
    assert not PodSetAssignment.objects.exists()
    assert not WorkloadEvent.objects.exists()


def test_a_pass_past_its_time_limit_is_stopped_writes_nothing_and_frees_the_lock(scheduler, settings, monkeypatch,
                                                                                 client):
    settings.TAS_SCHEDULER_PASS_TIME_LIMIT = 1
    scheduling_pass_run()  # the state is built and a first pass committed on it
    object_upsert(kind="Workload", obj=small_workload("after-the-first-pass"))
    started = time.monotonic()
    stopped = r"^the scheduling pass ran past its time limit of 1 s \(TAS_SCHEDULER_PASS_TIME_LIMIT\)$"
    with pytest.raises(DeadlineExceeded, match=stopped):
        # held inside its transaction, everything written
        scheduling_pass_run(before_commit=lambda record: time.sleep(5))
    assert time.monotonic() - started < 4
    assert SchedulingPass.objects.count() == 1
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert not WorkloadEvent.objects.filter(workload_key="ml/after-the-first-pass").exists()

    # as the leader: the lock goes with the stopped pass
    scheduling_pass_run()  # a state built afresh, the workload admitted
    assert admitted_count() == EXAMPLE_ADMISSIBLE + 1
    object_upsert(kind="Workload", obj=small_workload("after-the-second-pass"))
    monkeypatch.setenv("TAS_TEST_PASS_DELAY", "5")
    with pytest.raises(DeadlineExceeded, match=stopped):
        leader_pass_run(trigger=SchedulingPass.Trigger.MANUAL)
    assert client.get(scheduler_key("leader")) is None
    assert not held_in_this_process()
    assert SchedulingPass.objects.count() == 2

    # the next pass, in time, starts from a state built afresh from the database
    monkeypatch.delenv("TAS_TEST_PASS_DELAY")
    outcome = leader_pass_run(trigger=SchedulingPass.Trigger.MANUAL)
    assert outcome.outcome == "ran"
    assert admitted_count() == EXAMPLE_ADMISSIBLE + 2


@pytest.mark.parametrize("observe", [False, True], ids=["first-on-a-new-state", "observe"])
def test_a_pass_that_starts_from_scratch_runs_to_its_end_past_the_time_limit(scheduler, settings, observe):
    # stopping it would only start the same work over: the scheduler would never commit
    from tasweb.scheduling.runtime import runtime_discard

    settings.TAS_SCHEDULER_PASS_TIME_LIMIT = 1
    runtime_discard("a cold start")
    record = scheduling_pass_run(observe=observe, before_commit=lambda record: time.sleep(1.5))
    assert SchedulingPass.objects.get() == record
    assert admitted_count() == (0 if observe else EXAMPLE_ADMISSIBLE)


# ---------------------------------------------------------------- the file lock (no Redis)


def test_embedded_default_uses_a_file_lock(tmp_path):
    with override_settings(REDIS_URL=None, VAR_DIR=tmp_path):
        lock = scheduler_lock()
    assert isinstance(lock, FileLeaderLock)
    assert lock.path == tmp_path / "scheduler.lock"


def test_file_lock_is_exclusive_and_dies_with_its_holder(tmp_path: Path):
    path = tmp_path / "scheduler.lock"
    first, second = FileLeaderLock(path=path), FileLeaderLock(path=path)
    assert first.acquire(wait=0)
    assert not second.acquire(wait=0.2)
    first.release()
    assert second.acquire(wait=0)
    second.release()

    holder = hold_in_another_process("file", str(path))
    try:
        assert not first.acquire(wait=0.2)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert first.acquire(wait=1)  # the kernel released it with the process
        first.confirm()
        first.release()
    finally:
        holder.kill()
        holder.wait(timeout=10)


# ---------------------------------------------------------------- triggers


@pytest.fixture
def scheduler(scheduler_state) -> Iterator[None]:
    """The example cluster mirrored, and a clean scheduler state."""
    import_example_cluster()
    yield


def test_beat_pass_runs_and_records_its_trigger(scheduler):
    outcome = leader_pass_run(trigger=SchedulingPass.Trigger.BEAT)

    assert outcome.outcome == "ran"
    assert outcome.scheduling_pass.trigger == SchedulingPass.Trigger.BEAT
    assert outcome.scheduling_pass.admitted == EXAMPLE_ADMISSIBLE
    assert admitted_count() == EXAMPLE_ADMISSIBLE


def test_beat_pass_is_skipped_while_another_leader_works(scheduler):
    with leadership(wait=0) as lock:
        assert lock is not None
        outcome = leader_pass_run(trigger=SchedulingPass.Trigger.BEAT)

    assert outcome.outcome == "busy"
    assert not SchedulingPass.objects.exists()


def beat_pass_beside(target, *, ready: threading.Event, release: threading.Event, name: str | None = None,
                     check=lambda: True):
    """A beat-triggered pass run while `target` runs on a thread of its own: from when it
    sets `ready` (and `check` holds) until the pass is done, then `release` lets it end."""
    thread = threading.Thread(target=target, name=name)
    thread.start()
    try:
        assert ready.wait(10)
        assert check()
        return leader_pass_run(trigger=SchedulingPass.Trigger.BEAT)
    finally:
        release.set()
        thread.join(10)


def assert_left_to_this_workers_other_pass(outcome, caplog) -> None:
    assert outcome.outcome == "busy"
    assert not held_in_this_process()
    skipped = [(r.levelname, r.getMessage()) for r in caplog.records if "left to it" in r.getMessage()]
    assert skipped == [("DEBUG", "scheduling pass (beat): another pass of this worker holds the lock; left to it")]


def test_a_pass_skipped_for_another_pass_of_this_process_does_not_blame_another_worker(scheduler, caplog):
    """As in the embedded worker, whose timer thread runs a change-triggered pass while its
    main thread takes the beat-triggered one."""
    caplog.set_level(logging.DEBUG, logger="tasweb.scheduling")
    held, done = threading.Event(), threading.Event()

    def other_pass() -> None:
        with leadership(wait=0) as lock:
            assert lock is not None
            held.set()
            done.wait(10)

    outcome = beat_pass_beside(other_pass, ready=held, release=done, check=held_in_this_process)
    assert_left_to_this_workers_other_pass(outcome, caplog)


def test_a_pass_that_finds_the_lock_just_taken_by_this_process_does_not_blame_another_worker(
        scheduler, caplog, monkeypatch):
    """The other thread has the lock but has not yet returned from taking it (it writes who
    holds it, say): still this process, not another worker."""
    from tasweb.scheduling import leader

    caplog.set_level(logging.DEBUG, logger="tasweb.scheduling")
    taken, go_on = threading.Event(), threading.Event()
    real = leader.scheduler_lock

    def slow_to_return() -> leader.LeaderLock:
        lock = real()
        if threading.current_thread().name != "taking":
            return lock
        acquire = lock.acquire

        def acquired_then_paused(*, wait: float) -> bool:
            got = acquire(wait=wait)
            taken.set()
            go_on.wait(10)
            return got
        lock.acquire = acquired_then_paused  # type: ignore[method-assign]
        return lock

    monkeypatch.setattr(leader, "scheduler_lock", slow_to_return)

    def other_pass() -> None:
        with leadership(wait=0) as lock:
            assert lock is not None

    outcome = beat_pass_beside(other_pass, ready=taken, release=go_on, name="taking")
    assert_left_to_this_workers_other_pass(outcome, caplog)


def test_a_pass_skipped_for_another_process_says_another_worker_leads(scheduler, caplog):
    caplog.set_level(logging.INFO, logger="tasweb.scheduling")
    holder = hold_in_another_process("redis", scheduler_key("leader"))
    try:
        assert not held_in_this_process()
        outcome = leader_pass_run(trigger=SchedulingPass.Trigger.BEAT)
    finally:
        holder.kill()
        holder.wait(timeout=10)

    assert outcome.outcome == "busy"
    assert [(r.levelname, r.getMessage()) for r in caplog.records if "left to it" in r.getMessage()] == [
        ("INFO", "scheduling pass (beat): another worker is the leader; left to it")]


def test_change_pass_runs_once_per_unread_change(scheduler):
    assert leader_pass_run(trigger=SchedulingPass.Trigger.CHANGE).outcome == "covered"

    request_pass()
    assert changes_pending()
    outcome = leader_pass_run(trigger=SchedulingPass.Trigger.CHANGE)
    assert outcome.outcome == "ran"
    assert outcome.scheduling_pass.trigger == SchedulingPass.Trigger.CHANGE
    assert not changes_pending()
    assert leader_pass_run(trigger=SchedulingPass.Trigger.CHANGE).outcome == "covered"
    assert SchedulingPass.objects.count() == 1


def test_change_pass_finding_another_leader_queues_itself_again(scheduler):
    request_pass()
    cache.delete(scheduler_key("scheduled"))
    celery_app.control.purge()

    with leadership(wait=0) as lock:
        assert lock is not None
        outcome = leader_pass_run(trigger=SchedulingPass.Trigger.CHANGE)

    assert outcome.outcome == "busy"
    assert changes_pending()  # still unread
    assert cache.get(scheduler_key("scheduled"))  # and a pass is queued for it
    assert celery_app.control.purge() == 1


def test_manual_pass_command_runs_as_the_leader(scheduler):
    out = io.StringIO()
    call_command("tas_pass", stdout=out)

    record = SchedulingPass.objects.get()
    assert record.trigger == SchedulingPass.Trigger.MANUAL
    assert out.getvalue().startswith(f"pass {record.id}: ")
    assert f"{EXAMPLE_ADMISSIBLE} admitted" in out.getvalue()


def test_manual_pass_command_asks_the_busy_leader_instead(scheduler):
    celery_app.control.purge()
    out = io.StringIO()
    with leadership(wait=0) as lock, override_settings(TAS_SCHEDULER_LOCK_WAIT=0):
        assert lock is not None
        call_command("tas_pass", stdout=out)

    assert "another worker is the scheduler's leader" in out.getvalue()
    assert not SchedulingPass.objects.exists()
    assert changes_pending()  # the leader's next pass reads it
    celery_app.control.purge()


# ---------------------------------------------------------------- triggers through a worker


@pytest.fixture
def worker(scheduler):
    with start_worker(celery_app, pool="solo", concurrency=1, perform_ping_check=False, shutdown_timeout=10):
        yield


def test_a_burst_of_changes_causes_one_pass(worker):
    for _ in range(50):
        request_pass()

    wait_for(lambda: SchedulingPass.objects.exists(), timeout=20, what="the pass")
    time.sleep(2.5)  # longer than the debounce: a second pass would have started by now
    assert list(SchedulingPass.objects.values_list("trigger", flat=True)) == [SchedulingPass.Trigger.CHANGE]
    assert admitted_count() == EXAMPLE_ADMISSIBLE


def test_a_change_arriving_while_the_leader_works_is_not_lost(worker):
    with leadership(wait=0) as lock:  # another leader, busy for a while
        assert lock is not None
        request_pass()
        time.sleep(4)  # the triggered task found the lock held and queued itself again
        assert not SchedulingPass.objects.exists()

    wait_for(lambda: SchedulingPass.objects.exists(), timeout=20, what="the pass after the leader let go")
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert WorkloadEvent.objects.filter(kind=EventKind.ADMITTED).count() == EXAMPLE_ADMISSIBLE
