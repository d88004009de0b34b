"""Faults of the running scheduler, with real Celery worker processes, the real PostgreSQL
and the real Redis: a worker killed mid-pass, two workers at once, Redis restarting.

Passes are held open inside their transaction by the test-only TAS_TEST_PASS_DELAY, and
each worker notes which of its processes reached the commit in its trace file
(TAS_TEST_PASS_TRACE), so a test knows whom to kill and when.
"""

from __future__ import annotations

import itertools
import os
import signal

import pytest
import redis

from tasweb.cluster.services import object_upsert
from tasweb.scheduling.models import EventKind, PodSetAssignment, SchedulingPass, WorkloadEvent
from tasweb.scheduling.services import request_pass
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


def finished_passes() -> list[SchedulingPass]:
    return list(SchedulingPass.objects.order_by("started_at"))


def test_worker_killed_mid_pass_leaves_nothing_half_written_and_the_pass_runs_again(workers):
    # prefork: the pass runs in a pool child; killing it is what reject_on_worker_lost is for
    worker = workers("killed", pool="prefork", env={"TAS_TEST_PASS_DELAY": "2"})
    worker.wait_ready()
    import_example_cluster()

    request_pass()
    first = wait_for(worker.trace, timeout=20, what="the pass to reach its commit", workers=(worker,))[0]
    assert first["pid"] != worker.pid  # a pool child, not the worker itself

    # Everything is written inside the open transaction, and none of it is visible.
    assert SchedulingPass.objects.count() == 0
    assert admitted_count() == 0
    assert not PodSetAssignment.objects.exists()
    assert not WorkloadEvent.objects.exists()

    os.kill(first["pid"], signal.SIGKILL)

    # The task comes back (acks late, rejected on worker loss); a new child waits out the dead
    # child's lock (TTL 3 s) and runs the whole pass again.
    wait_for(lambda: SchedulingPass.objects.exists(), timeout=30, what="the pass to run again", workers=(worker,))
    passes = finished_passes()
    assert len(passes) == 1
    assert passes[0].trigger == SchedulingPass.Trigger.CHANGE
    assert passes[0].admitted == EXAMPLE_ADMISSIBLE
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert_results_whole()
    reruns = worker.trace()[1:]
    assert reruns and all(entry["pid"] != first["pid"] for entry in reruns)
    assert worker.alive()
    assert "WorkerLostError" in worker.log()


def test_dead_leader_is_replaced_and_its_pass_is_not_lost(workers):
    # A short visibility timeout makes the dead worker's unacknowledged task visible again
    # within seconds (45 s in the settings: there, beat and new changes come first).
    quick_redelivery = {"visibility_timeout": 4, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
    first = workers("first", env={"TAS_TEST_PASS_DELAY": "2"}, broker_options=quick_redelivery)
    second = workers("second", env={"TAS_TEST_PASS_DELAY": "2"}, broker_options=quick_redelivery)
    first.wait_ready()
    second.wait_ready()
    import_example_cluster()

    request_pass()
    wait_for(lambda: first.trace() or second.trace(), timeout=20, what="a pass to reach its commit",
             workers=(first, second))
    leader, other = (first, second) if first.trace() else (second, first)
    leader.kill()  # the whole worker: no ack, no lock release, no rollback message

    assert SchedulingPass.objects.count() == 0
    wait_for(lambda: SchedulingPass.objects.exists(), timeout=40, what="the other worker to run the pass",
             workers=(first, second))
    passes = finished_passes()
    assert [p.trigger for p in passes] == [SchedulingPass.Trigger.CHANGE]
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert_results_whole()
    assert [entry["pid"] for entry in other.trace()] == [other.pid]
    assert other.alive() and not leader.alive()


def test_two_workers_only_one_runs_a_pass_at_a_time(workers):
    a = workers("a", env={"TAS_TEST_PASS_DELAY": "0.5", "TAS_SCHEDULER_LOCK_WAIT": "10"})
    b = workers("b", env={"TAS_TEST_PASS_DELAY": "0.5", "TAS_SCHEDULER_LOCK_WAIT": "10"})
    a.wait_ready()
    b.wait_ready()
    import_example_cluster()

    triggers = 6
    for _ in range(triggers):
        run_pass.delay(trigger=SchedulingPass.Trigger.MANUAL)
    wait_for(lambda: SchedulingPass.objects.count() >= triggers, timeout=40, what=f"{triggers} passes",
             workers=(a, b))

    passes = finished_passes()
    assert len(passes) == triggers
    for before, after in itertools.pairwise(passes):
        assert before.finished_at <= after.started_at, f"passes {before.id} and {after.id} overlap"
    # Both workers consumed triggers and both ran passes (each reached its commit, see
    # _test_only_hold), never together.
    assert len(a.trace()) >= 1
    assert len(b.trace()) >= 1
    assert len(a.trace()) + len(b.trace()) == triggers
    assert {entry["pid"] for entry in a.trace()} == {a.pid}
    assert {entry["pid"] for entry in b.trace()} == {b.pid}
    # The first two passes started together from the same pending workloads; a second
    # scheduler would have admitted them again.
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    assert sum(p.admitted for p in passes) == EXAMPLE_ADMISSIBLE
    assert_results_whole()


def test_redis_restart_workers_reconnect_and_nothing_is_lost(workers):
    worker = workers("survivor", pool="prefork", env={"TAS_TEST_PASS_DELAY": "2"})
    worker.wait_ready()
    import_example_cluster()
    request_pass()
    wait_for(worker.trace, timeout=20, what="a pass to reach its commit", workers=(worker,))

    try:
        # Redis goes away (and comes back empty) under a pass that is about to commit.
        redis_stop()
        # The mirror lives in PostgreSQL and keeps changing; the trigger cannot be sent and
        # says so, for the source's task to retry.
        object_upsert(kind="Workload", obj=small_workload("during-outage"))
        with pytest.raises((redis.exceptions.ConnectionError, OSError)):
            request_pass()
    finally:
        redis_start()

    # The pass could not confirm its lock and rolled back rather than commit unguarded.
    wait_for(lambda: "LeadershipLost" in worker.log(), timeout=20, what="the pass under the outage to give up",
             workers=(worker,))
    assert_results_whole()

    # Triggers sent after the restart: the same worker, reconnected, runs the passes, and
    # every change, including those mirrored before and during the outage, is read by one.
    new = ["after-restart-1", "after-restart-2", "after-restart-3"]
    for name in new:
        object_upsert(kind="Workload", obj=small_workload(name))
        request_pass()
    names = ["during-outage", *new]
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE + len(names), timeout=45,
             what="every workload mirrored around the restart to be admitted", workers=(worker,))

    assert worker.alive()
    assert "Connection to broker lost" in worker.log()
    passes = finished_passes()
    assert passes and all(p.trigger == SchedulingPass.Trigger.CHANGE for p in passes)
    for name in names:
        assert WorkloadEvent.objects.filter(workload__name=name, kind=EventKind.ADMITTED).count() == 1
    assert_results_whole()
