"""Flavor fallback when TAS placement fails: the flavor scan resumes where the last attempt
stopped (Kueue's LastAssignment), across cycles and passes of a long-lived engine, and
starts over on Kueue's reset events."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.flavorassigner import FlavorScanProgress

from .factories import (
    HOSTNAME,
    NOW,
    admitted,
    cluster_queue,
    domains_json,
    gates,
    local_queue,
    node,
    parse,
    parse_one,
    resource_flavor,
    result_of,
    run,
    topology,
    workload,
)

FIRST, SECOND = "f1", "f2"
PENDING_KEY = "default/pending"
NO_ROOM = ("couldn't assign flavors to pod set main: topology \"hosts\" doesn't allow to fit any of 1 pod(s). "
           "Total nodes: 1; excluded: resource \"cpu\": 1")


def two_flavors(*, full: tuple[str, ...] = (FIRST,), quota: str = "4") -> list[dict]:
    """A ClusterQueue with two TAS flavors, one 2-CPU node each, and quota for two pods on each;
    the nodes of the flavors in `full` are taken by an admitted workload, and `pending` asks
    for a whole node."""
    objects = [
        topology("hosts", levels=(HOSTNAME,)),
        resource_flavor(FIRST, topology_name="hosts", node_labels={"pool": FIRST}),
        resource_flavor(SECOND, topology_name="hosts", node_labels={"pool": SECOND}),
        cluster_queue(flavors=(FIRST, SECOND), quota={"cpu": quota}),
        local_queue(),
        node("n1", labels={"pool": FIRST}, cpu="2"),
        node("n2", labels={"pool": SECOND}, cpu="2"),
    ]
    for flavor, host in ((FIRST, "n1"), (SECOND, "n2")):
        if flavor in full:
            blocker = workload(f"blocker-{flavor}", cpu="2", required=HOSTNAME, created=-60)
            objects.append(admitted(blocker, assignments={"main": domains_json([HOSTNAME], [(host, 1)])},
                                    flavor=flavor))
    objects.append(workload("pending", cpu="2", required=HOSTNAME))
    return objects


def engine_of(objects: list[dict], **gate_values: bool) -> Engine:
    return Engine.from_parsed(parse(objects), gates(**gate_values))


def one_cycle(engine: Engine, n: int = 0):
    """One pass of one scheduling cycle, `n` seconds after NOW; the pending workload's result."""
    outcome = engine.run_pass(NOW + timedelta(seconds=n), cycles=1)
    (result,) = engine.results_for([PENDING_KEY], outcome)
    return result


def flavor_of(result) -> str:
    (ps,) = result.pod_sets
    return ps.flavors.get("cpu", "")


class TestFallback:
    def test_first_attempt_stays_on_the_flavor_quota_chose(self):
        pending = result_of(run(two_flavors(), cycles=1), "pending")
        assert pending.status == "Pending"  # back in its queue at once: a flavor is left to try
        assert pending.message == NO_ROOM
        assert flavor_of(pending) == FIRST

    def test_next_cycle_admits_on_the_next_flavor(self):
        pending = result_of(run(two_flavors(), cycles=2), "pending")
        assert pending.status == "Admitted"
        assert flavor_of(pending) == SECOND
        (ps,) = pending.pod_sets
        assert [d.values for d in ps.assignment.domains] == [("n2",)]

    def test_a_pass_runs_the_cycle_that_tries_the_next_flavor(self):
        pending = result_of(run(two_flavors()), "pending")
        assert (pending.status, flavor_of(pending)) == ("Admitted", SECOND)

    def test_a_flavor_with_room_first_needs_no_fallback(self):
        pending = result_of(run(two_flavors(full=(SECOND,)), cycles=1), "pending")
        assert (pending.status, flavor_of(pending)) == ("Admitted", FIRST)

    def test_no_flavor_fits(self):
        engine = engine_of(two_flavors(full=(FIRST, SECOND)))
        first = one_cycle(engine)
        assert (first.status, first.message, flavor_of(first)) == ("Pending", NO_ROOM, FIRST)
        second = one_cycle(engine, 1)
        # the scan reached the last flavor: nothing left to try, parked with Kueue's reason
        assert (second.status, second.message, flavor_of(second)) == ("Inadmissible", NO_ROOM, SECOND)
        assert PENDING_KEY not in engine.queues.scan_progress
        condition = next(c for c in second.conditions if c.type == "QuotaReserved")
        assert (condition.status, condition.reason) == ("False", "WaitingForQuota")


class TestProgressAcrossCycles:
    def test_recorded_where_the_scan_stopped(self):
        engine = engine_of(two_flavors())
        one_cycle(engine)
        progress = engine.queues.scan_progress[PENDING_KEY]
        assert progress.last_tried == {("main", 0): 0}
        assert progress.pending_flavors and progress.next_flavor(("main", 0)) == 1

    def test_kept_from_one_pass_to_the_next(self):
        engine = engine_of(two_flavors())
        assert flavor_of(one_cycle(engine)) == FIRST
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Admitted", SECOND)
        assert PENDING_KEY not in engine.queues.scan_progress

    def test_kept_when_the_workload_is_updated_without_changing_shape(self):
        engine = engine_of(two_flavors())
        one_cycle(engine)
        relabelled = workload("pending", cpu="2", required=HOSTNAME, annotations={"team": "a"})
        engine.upsert(parse_one(relabelled))
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Admitted", SECOND)


class TestReset:
    """Kueue forgets the progress when the ClusterQueue's AllocatableResourceGeneration advanced
    since it was recorded (with FlavorFungibilityPreserveScanProgress, only once it is older than
    the previous cycle), and when the workload changed."""

    @staticmethod
    def bump_generation(engine: Engine) -> None:
        """A ClusterQueue definition change that changes nothing for the pending workload."""
        engine.upsert(parse_one(cluster_queue(flavors=(FIRST, SECOND), quota={"cpu": "5"})))

    def test_generation_advanced_without_the_gate(self):
        engine = engine_of(two_flavors(), FlavorFungibilityPreserveScanProgress=False)
        one_cycle(engine)
        self.bump_generation(engine)
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Pending", FIRST)  # scanned from the first flavor again

    def test_generation_advanced_with_the_gate_keeps_the_previous_cycle(self):
        engine = engine_of(two_flavors())
        one_cycle(engine)
        self.bump_generation(engine)
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Admitted", SECOND)

    def test_generation_advanced_with_the_gate_after_an_older_cycle(self):
        engine = engine_of(two_flavors())
        one_cycle(engine)
        engine.queues.scheduling_cycle += 1  # a cycle went by in which the workload was not a head
        self.bump_generation(engine)
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Pending", FIRST)

    def test_quota_released_in_the_cluster_queue(self):
        objects = two_flavors()
        finished = admitted(workload("done", cpu="0", created=-120), assignments={"main": None}, flavor=FIRST)
        engine = engine_of([*objects, finished], FlavorFungibilityPreserveScanProgress=False)
        one_cycle(engine)
        engine.delete("Workload", "default/done")  # Kueue's cache deletes it: the generation advances
        result = one_cycle(engine, 1)
        assert (result.status, flavor_of(result)) == ("Pending", FIRST)

    def test_any_update_without_the_gate(self):
        engine = engine_of(two_flavors(), FlavorFungibilityPreserveScanProgress=False)
        one_cycle(engine)
        engine.upsert(parse_one(workload("pending", cpu="2", required=HOSTNAME, annotations={"team": "a"})))
        engine.sync(NOW)
        assert PENDING_KEY not in engine.queues.scan_progress

    def test_the_workload_changed_shape(self):
        engine = engine_of(two_flavors())
        one_cycle(engine)
        engine.upsert(parse_one(workload("pending", cpu="1500m", required=HOSTNAME)))
        result = one_cycle(engine, 1)
        # the second flavor's node has room for it: back on the first, the scan started over
        assert (result.status, flavor_of(result)) == ("Pending", FIRST)

    def test_flavor_fungibility_off_always_starts_at_the_first_flavor(self):
        engine = engine_of(two_flavors(), FlavorFungibility=False)
        one_cycle(engine)
        assert flavor_of(one_cycle(engine, 1)) == FIRST


@pytest.mark.parametrize(("generation", "cycle", "shape", "preserve", "outdated"), [
    (3, 5, "s", True, False),  # the ClusterQueue did not change
    (4, 5, "s", False, True),  # it changed: stale without the gate
    (4, 6, "s", True, False),  # with the gate, the previous cycle's progress still holds
    (4, 7, "s", True, True),  # but not an older one
    (3, 5, "t", True, True),  # another shape: the indexes mean nothing for it
])
def test_outdated(generation, cycle, shape, preserve, outdated):
    progress = FlavorScanProgress({("main", 0): 0}, cluster_queue_generation=3, scheduling_cycle=5, shape="s")
    assert progress.outdated(generation, cycle, shape, preserve=preserve) is outdated
