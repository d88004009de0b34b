"""Free capacity of a TAS flavor: allocatable, minus non-TAS pods, minus admitted TAS workloads."""

from __future__ import annotations

from .factories import (
    BLOCK,
    FLAVOR,
    HOSTNAME,
    RACK,
    admitted,
    domains,
    domains_json,
    flavor_snapshot,
    grid,
    node,
    place,
    pod,
    tas_setup,
    workload,
)


def row(snap, matrix, name: str) -> dict[str, int]:
    leaf = snap.tree.leaves.index_by_id[name]
    return {r: int(matrix[leaf, col]) for r, col in snap.resources.column.items() if matrix[leaf, col]}


def free(snap, name: str) -> dict[str, int]:
    """What is left on a leaf for new TAS pods."""
    return row(snap, snap.remaining(), name)


def base() -> list[dict]:
    return [
        *tas_setup(),
        node("x1", block="b1", rack="r1", cpu="8", memory="32Gi", pods="10"),
        node("x2", block="b1", rack="r1", cpu="8", memory="32Gi", pods="10"),
        node("outside", block="b1", rack="r1", cpu="8", ready="False"),
    ]


class TestNonTASPods:
    def test_allocatable_when_nothing_runs(self):
        snap = flavor_snapshot(base())
        assert free(snap, "x1") == {"cpu": 8000, "memory": 32 * 2**30, "pods": 10}

    def test_running_pod_takes_its_requests_and_one_pod_slot(self):
        snap = flavor_snapshot([*base(), pod("web", node="x1", cpu="1500m", memory="1Gi")])
        assert free(snap, "x1") == {"cpu": 6500, "memory": 31 * 2**30, "pods": 9}
        assert free(snap, "x2") == {"cpu": 8000, "memory": 32 * 2**30, "pods": 10}

    def test_pod_without_requests_still_takes_a_pod_slot(self):
        snap = flavor_snapshot([*base(), pod("idle", node="x2", containers=[{"name": "c", "image": "x"}])])
        assert free(snap, "x2")["pods"] == 9
        assert free(snap, "x2")["cpu"] == 8000

    def test_pending_but_bound_pods_count(self):
        snap = flavor_snapshot([*base(), pod("starting", node="x1", cpu="1", phase="Pending")])
        assert free(snap, "x1")["cpu"] == 7000

    def test_pods_that_do_not_count(self):
        ignored = [
            pod("done", node="x1", cpu="1", phase="Succeeded"),
            pod("crashed", node="x1", cpu="1", phase="Failed"),
            pod("unbound", cpu="1", phase="Pending"),
            pod("tas", node="x1", cpu="1", annotations={"kueue.x-k8s.io/podset-required-topology": RACK}),
            pod("tas-loose", node="x1", cpu="1", annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
            pod("elsewhere", node="not-in-flavor", cpu="1"),
            pod("on-not-ready", node="outside", cpu="1"),
        ]
        snap = flavor_snapshot(base() + ignored)
        assert free(snap, "x1") == {"cpu": 8000, "memory": 32 * 2**30, "pods": 10}

    def test_several_pods_add_up(self):
        pods = [pod(f"p{i}", node="x1", cpu="2") for i in range(3)]
        snap = flavor_snapshot(base() + pods)
        assert free(snap, "x1") == {"cpu": 2000, "memory": 32 * 2**30, "pods": 7}

    def test_non_tas_usage_is_part_of_free_not_of_tas_usage(self):
        snap = flavor_snapshot([*base(), pod("web", node="x1", cpu="3")])
        assert row(snap, snap.free, "x1")["cpu"] == 5000
        assert not row(snap, snap.tas_usage, "x1")
        assert row(snap, snap.remaining(simulate_empty=True), "x1")["cpu"] == 5000


class TestAdmittedTASWorkloads:
    def test_admitted_workload_usage_comes_off(self):
        running = admitted(workload("running", count=3, cpu="2", required=RACK),
                           assignments={"main": domains_json([HOSTNAME], [("x1", 2), ("x2", 1)])})
        snap = flavor_snapshot([*base(), running])
        assert free(snap, "x1") == {"cpu": 4000, "memory": 32 * 2**30, "pods": 8}
        assert free(snap, "x2") == {"cpu": 6000, "memory": 32 * 2**30, "pods": 9}
        assert row(snap, snap.tas_usage, "x1") == {"cpu": 4000, "pods": 2}
        # simulating an empty cluster ignores TAS usage only
        assert row(snap, snap.remaining(simulate_empty=True), "x1")["cpu"] == 8000

    def test_both_kinds_of_usage_together(self):
        running = admitted(workload("running", count=1, cpu="2"),
                           assignments={"main": domains_json([HOSTNAME], [("x1", 1)])})
        snap = flavor_snapshot([*base(), running, pod("web", node="x1", cpu="1")])
        assert free(snap, "x1") == {"cpu": 5000, "memory": 32 * 2**30, "pods": 8}

    def test_finished_workload_holds_nothing(self):
        done = admitted(workload("done", count=2, cpu="4"),
                        assignments={"main": domains_json([HOSTNAME], [("x1", 2)])}, finished=True)
        snap = flavor_snapshot([*base(), done])
        assert free(snap, "x1")["cpu"] == 8000

    def test_pending_workload_holds_nothing(self):
        snap = flavor_snapshot([*base(), workload("waiting", count=8, cpu="1")])
        assert free(snap, "x1")["cpu"] == 8000

    def test_assignment_on_a_node_that_left_is_ignored(self):
        stale = admitted(workload("stale", count=2, cpu="1"),
                         assignments={"main": domains_json([HOSTNAME], [("outside", 1), ("x2", 1)])})
        snap = flavor_snapshot([*base(), stale])
        assert free(snap, "x2")["cpu"] == 7000
        assert free(snap, "x1")["cpu"] == 8000

    def test_admission_in_another_flavor_is_not_counted_here(self):
        other = admitted(workload("other", count=2, cpu="1"), flavor="other-flavor",
                         assignments={"main": domains_json([HOSTNAME], [("x1", 2)])})
        snap = flavor_snapshot([*base(), other])
        assert free(snap, "x1")["cpu"] == 8000


class TestAggregatedLeaves:
    """With a lowest level other than the hostname, one leaf sums several nodes."""

    def objects(self) -> list[dict]:
        return tas_setup(levels=[BLOCK, RACK]) + grid(blocks=1, racks=2, nodes=2, cpu="2", pods="4")

    def test_leaf_capacity_is_the_sum_of_its_nodes(self):
        snap = flavor_snapshot([*self.objects(), pod("web", node="b1-r2-n1", cpu="500m")])
        assert free(snap, "b1,r1") == {"cpu": 4000, "pods": 8}
        assert free(snap, "b1,r2") == {"cpu": 3500, "pods": 7}

    def test_a_pod_larger_than_any_node_fits_the_summed_leaf(self):
        assignment, reason = place(self.objects(), workload("big", count=1, cpu="3", required=RACK))
        assert reason == ""
        assert assignment.levels == (BLOCK, RACK)
        assert domains(assignment) == [("b1/r1", 1)]

    def test_no_leaf_holds_two_such_pods(self):
        _, reason = place(self.objects(), workload("big", count=2, cpu="3", required=RACK))
        assert reason == 'topology "default" allows to fit only 1 out of 2 pod(s)'
        assignment, reason = place(self.objects(), workload("big", count=2, cpu="3", preferred=RACK))
        assert reason == ""
        assert domains(assignment) == [("b1/r1", 1), ("b1/r2", 1)]

    def test_admitted_usage_on_an_aggregated_leaf(self):
        running = admitted(workload("running", count=3, cpu="1"),
                           assignments={"main": domains_json([BLOCK, RACK], [(["b1", "r1"], 3)])})
        snap = flavor_snapshot([*self.objects(), running], flavor=FLAVOR)
        assert free(snap, "b1,r1") == {"cpu": 1000, "pods": 5}


# ---------------------------------------------------------------- amounts beyond any node
# A pod's request beyond int64 saturates (as Kueue reads it); several such pods on one node,
# or a leaf of several nodes that each offer close to 2^62, add up to more than int64 holds.
# The matrices hold every amount within AMOUNT_CAP instead of failing or wrapping around
# (which would make a full node look empty).

HUGE_CPU = "1e16"  # cores: 10^19 milli-CPU, beyond int64


def test_non_tas_pods_asking_beyond_int64_fill_their_node_and_nothing_fails():
    from scheduler.snapshot import AMOUNT_CAP

    objects = [*base(), pod("big-1", node="x1", cpu=HUGE_CPU), pod("big-2", node="x1", cpu=HUGE_CPU)]
    snap = flavor_snapshot(objects)
    leaf = snap.tree.leaves.index_by_id["x1"]
    cpu = snap.resources.column["cpu"]
    assert int(snap.non_tas_usage[leaf, cpu]) == AMOUNT_CAP
    assert int(snap.free[leaf, cpu]) < 0 and int(snap.remaining()[leaf, cpu]) < 0
    assignment, _ = place(objects, workload("w", count=2, cpu="1", required=RACK))
    assert domains(assignment) == [("x2", 2)]


def test_a_leaf_of_nodes_near_the_largest_allocatable_is_held_within_bounds():
    from scheduler.snapshot import AMOUNT_CAP

    near_most = "4611686018427387"  # cores: 2^62 milli-CPU, the most a Node may offer
    objects = [*tas_setup(levels=[BLOCK, RACK]),
               node("x1", block="b1", rack="r1", hostname=False, cpu=near_most),
               node("x2", block="b1", rack="r1", hostname=False, cpu=near_most)]
    snap = flavor_snapshot(objects)
    assert int(snap.free[0, snap.resources.column["cpu"]]) == AMOUNT_CAP
    assignment, _ = place(objects, workload("w", count=3, cpu="1000", required=RACK))
    assert domains(assignment) == [("b1/r1", 3)]


def test_an_admitted_workload_asking_beyond_int64_leaves_its_node_full_not_empty():
    huge = admitted(workload("huge", count=4, cpu="99999999999999999999Ti", required=RACK),
                    assignments={"main": domains_json([BLOCK, RACK, HOSTNAME], [(["b1", "r1", "x1"], 4)])})
    objects = [*base(), huge]
    snap = flavor_snapshot(objects)
    cpu = snap.resources.column["cpu"]
    assert int(snap.remaining()[snap.tree.leaves.index_by_id["x1"], cpu]) < 0
    assignment, _ = place(objects, workload("w", count=2, cpu="1", required=RACK))
    assert domains(assignment) == [("x2", 2)]
