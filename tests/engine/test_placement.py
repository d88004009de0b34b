"""Placement of PodSets on a TAS flavor snapshot: levels, BestFit / LeastFreeCapacity,
node constraints, Kueue's failure messages, groups and slices."""

from __future__ import annotations

import pytest

from scheduler.placement import Placer
from scheduler.topology_assignment import find_topology_assignment, find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    domains,
    flavor_snapshot,
    gates,
    grid,
    node,
    place,
    pod,
    pod_set,
    preferred_affinity,
    required_affinity,
    resource_flavor,
    taint,
    tas_requests,
    tas_setup,
    toleration,
    topology,
    workload,
)


def cluster(**node_kwargs) -> list[dict]:
    """2 blocks x 2 racks x 2 nodes; with the default 4 CPUs a node takes 4 one-CPU pods."""
    node_kwargs.setdefault("cpu", "4")
    return tas_setup() + grid(**node_kwargs)


def with_labels(objects: list[dict], name: str, labels: dict[str, str]) -> list[dict]:
    for obj in objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == name:
            obj["metadata"]["labels"].update(labels)
    return objects


def racks_of(assignment) -> set[str]:
    """The racks of grid hostnames: `b1-r2-n1` is in rack `b1-r2`."""
    return {"-".join(d.values[-1].split("-")[:2]) for d in assignment.domains}


def placed(objects, wl, **kwargs):
    assignment, reason = place(objects, wl, **kwargs)
    assert reason == "", reason
    return domains(assignment)


def failure(objects, wl, **kwargs) -> str:
    assignment, reason = place(objects, wl, **kwargs)
    assert assignment is None and reason
    return reason


# ---------------------------------------------------------------- required


class TestRequired:
    def test_fits_in_one_rack(self):
        assert placed(cluster(), workload("w", count=6, required=RACK)) == [("b1-r1-n1", 4), ("b1-r1-n2", 2)]

    def test_fits_in_one_node(self):
        assert placed(cluster(), workload("w", count=3, required=HOSTNAME)) == [("b1-r1-n1", 3)]

    def test_fits_in_one_block(self):
        result = placed(cluster(), workload("w", count=12, required=BLOCK))
        assert result == [("b1-r1-n1", 4), ("b1-r1-n2", 4), ("b1-r2-n1", 4)]

    def test_rack_too_small(self):
        reason = failure(cluster(), workload("w", count=9, required=RACK))
        assert reason == 'topology "default" allows to fit only 8 out of 9 pod(s)'

    def test_nothing_fits(self):
        reason = failure(cluster(), workload("w", count=2, cpu="5", required=RACK))
        assert reason == "topology \"default\" doesn't allow to fit any of 2 pod(s). " \
                         'Total nodes: 8; excluded: resource "cpu": 8'

    def test_message_names_the_topology(self):
        objects = [topology("fabric"), resource_flavor(topology_name="fabric"), *grid(cpu="1")]
        reason = failure(objects, workload("w", count=3, required=RACK))
        assert reason == 'topology "fabric" allows to fit only 2 out of 3 pod(s)'

    def test_resource_no_node_offers(self):
        reason = failure(cluster(), workload("w", count=1, extra={"example.com/fpga": "1"}, required=RACK))
        assert reason == "topology \"default\" doesn't allow to fit any of 1 pod(s). " \
                         'Total nodes: 8; excluded: resource "example.com/fpga": 8'

    def test_unknown_level(self):
        reason = failure(cluster(), workload("w", count=1, required="example.com/zone"))
        assert reason == "no requested topology level: example.com/zone"

    def test_same_rack_value_in_two_blocks_is_two_racks(self):
        # merging the two "r1" racks would hold 16 pods
        reason = failure(cluster(), workload("w", count=9, required=RACK))
        assert "only 8 out of 9" in reason


class TestBestFit:
    def objects(self) -> list[dict]:
        # rack b2/r1 has half the CPUs of the others
        objects = cluster()
        for obj in objects:
            if obj["kind"] == "Node" and obj["metadata"]["name"].startswith("b2-r1-"):
                obj["status"]["allocatable"]["cpu"] = "2"
        return objects

    def test_tightest_rack_that_fits(self):
        assert placed(self.objects(), workload("w", count=4, required=RACK)) == [("b2-r1-n1", 2), ("b2-r1-n2", 2)]

    def test_first_of_the_larger_racks_when_the_small_one_is_too_small(self):
        assert placed(self.objects(), workload("w", count=5, required=RACK)) == [("b1-r1-n1", 4), ("b1-r1-n2", 1)]

    def test_tightest_node(self):
        objects = [*cluster(), pod("web", node="b2-r2-n2", cpu="2")]
        assert placed(objects, workload("w", count=2, required=HOSTNAME)) == [("b2-r2-n2", 2)]

    def test_tightest_node_for_the_remainder(self):
        # rack b1/r1 is left with 4 + 1 free: the tightest rack for up to 5 pods, and
        # within it the last pods go to the node with the least room that still holds them
        objects = [*cluster(), pod("web", node="b1-r1-n2", cpu="3")]
        assert placed(objects, workload("w", count=1, required=RACK)) == [("b1-r1-n2", 1)]
        assert placed(objects, workload("w", count=2, required=RACK)) == [("b1-r1-n1", 2)]
        assert placed(objects, workload("w", count=5, required=RACK)) == [("b1-r1-n1", 4), ("b1-r1-n2", 1)]
        assert placed(objects, workload("w", count=6, required=RACK)) == [("b1-r2-n1", 4), ("b1-r2-n2", 2)]


# ---------------------------------------------------------------- preferred


class TestPreferred:
    def test_stays_in_one_rack_when_it_fits(self):
        assert placed(cluster(), workload("w", count=6, preferred=RACK)) == [("b1-r1-n1", 4), ("b1-r1-n2", 2)]

    def test_climbs_to_the_block(self):
        result = placed(cluster(), workload("w", count=10, preferred=RACK))
        assert result == [("b1-r1-n1", 4), ("b1-r1-n2", 4), ("b1-r2-n1", 2)]

    def test_climbs_to_the_top_and_spreads_over_blocks(self):
        result = placed(cluster(), workload("w", count=20, preferred=RACK))
        assert result == [("b1-r1-n1", 4), ("b1-r1-n2", 4), ("b1-r2-n1", 4), ("b1-r2-n2", 4), ("b2-r1-n1", 4)]

    def test_more_than_the_cluster_holds(self):
        reason = failure(cluster(), workload("w", count=33, preferred=RACK))
        assert reason == 'topology "default" allows to fit only 32 out of 33 pod(s)'

    def test_preferred_block_that_fits_a_block(self):
        result = placed(cluster(), workload("w", count=16, preferred=BLOCK))
        assert {host.split("-")[0] for host, _ in result} == {"b1"}


# ---------------------------------------------------------------- unconstrained


class TestUnconstrained:
    def objects(self) -> list[dict]:
        """One rack of four 4-CPU nodes with 1, 2, 4 and 4 CPUs free."""
        nodes = [node(f"x{i}", block="b1", rack="r1", cpu="4") for i in range(1, 5)]
        return tas_setup() + nodes + [pod("a", node="x1", cpu="3"), pod("b", node="x2", cpu="2")]

    def test_least_free_capacity_fills_the_fullest_nodes_first(self):
        assert placed(self.objects(), workload("w", count=5, unconstrained=True)) == [("x1", 1), ("x2", 2), ("x3", 2)]

    def test_without_profile_mixed_best_fit_uses_fewer_nodes(self):
        result = placed(self.objects(), workload("w", count=5, unconstrained=True),
                        feature_gates=gates(TASProfileMixed=False))
        assert result == [("x1", 1), ("x3", 4)]

    def test_fullest_single_node_that_fits(self):
        assert placed(self.objects(), workload("w", count=2, unconstrained=True)) == [("x2", 2)]
        assert placed(self.objects(), workload("w", count=3, unconstrained=True)) == [("x3", 3)]

    def test_spreads_across_racks_and_blocks(self):
        result = placed(cluster(), workload("w", count=30, unconstrained=True))
        assert sum(n for _, n in result) == 30
        assert len(result) == 8

    def test_too_many(self):
        reason = failure(self.objects(), workload("w", count=12, unconstrained=True))
        assert reason == 'topology "default" allows to fit only 11 out of 12 pod(s)'

    def test_implied_request_is_unconstrained(self):
        wl = workload("w", count=5)
        assert placed(self.objects(), wl, implied=True) == [("x1", 1), ("x2", 2), ("x3", 2)]

    def test_no_request_and_not_implied(self):
        assert failure(self.objects(), workload("w", count=1)) == "topology level not specified"

    def test_placer_algorithm_choice(self):
        snap = flavor_snapshot(self.objects())
        default = Placer(snap, gates())
        assert default.least_free(True) and not default.least_free(False)
        assert default.best_fit(False)
        mixed_off = Placer(snap, gates(TASProfileMixed=False))
        assert not mixed_off.least_free(True) and mixed_off.best_fit(True)


# ---------------------------------------------------------------- node constraints


class TestExclusions:
    def objects(self) -> list[dict]:
        pool = {"pool": "a"}
        nodes = [
            node("t1", block="b1", rack="r1", labels=pool, taints=[taint("gpu", "true")]),
            node("t2", block="b1", rack="r1", labels=pool, taints=[taint("gpu", "true")]),
            node("t3", block="b1", rack="r1", labels=pool, taints=[taint("maintenance", effect="NoExecute")]),
            node("s1", block="b1", rack="r1", labels={"pool": "b"}),
            node("c1", block="b1", rack="r1", labels=pool, cpu="1"),
            node("p1", block="b1", rack="r1", labels=pool, pods="1"),
            node("ok", block="b1", rack="r1", labels=pool, cpu="4",
                 taints=[taint("noisy", "yes", effect="PreferNoSchedule")]),
        ]
        return tas_setup() + nodes + [pod("daemon", node="p1", cpu="100m")]

    def test_statistics_suffix(self):
        wl = workload("w", count=3, cpu="2", required=RACK, node_selector={"pool": "a"})
        assert failure(self.objects(), wl) == (
            'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 7; excluded: '
            'nodeSelector: 1, resource "cpu": 1, resource "pods": 1, '
            'taint "gpu=true:NoSchedule": 2, taint "maintenance:NoExecute": 1'
        )

    def test_what_is_left_is_used(self):
        wl = workload("w", count=2, cpu="2", required=RACK, node_selector={"pool": "a"})
        assert placed(self.objects(), wl) == [("ok", 2)]

    def test_no_exclusions_no_suffix(self):
        reason = failure(cluster(), workload("w", count=9, required=RACK))
        assert "Total nodes" not in reason

    def test_required_node_affinity(self):
        objects = [
            *tas_setup(),
            node("z1-a", block="b1", rack="r1", cpu="1", labels={"zone": "z1"}),
            node("z1-b", block="b1", rack="r1", cpu="1", labels={"zone": "z1"}),
            node("z2-a", block="b1", rack="r1", cpu="4", labels={"zone": "z2"}),
            node("z2-b", block="b1", rack="r1", cpu="4", labels={"zone": "z2"}),
        ]
        affinity = required_affinity("zone", "In", ["z1"])
        assert placed(objects, workload("w", count=2, required=RACK, affinity=affinity)) == [("z1-a", 1), ("z1-b", 1)]
        reason = failure(objects, workload("w", count=3, required=RACK, affinity=affinity))
        assert reason == ('topology "default" allows to fit only 2 out of 3 pod(s). '
                          "Total nodes: 4; excluded: affinity: 2")

    def test_node_selector_steers_the_placement(self):
        objects = cluster()
        for name in ("b2-r2-n1", "b2-r2-n2"):
            with_labels(objects, name, {"accelerator": "tpu"})
        wl = workload("w", count=6, required=RACK, node_selector={"accelerator": "tpu"})
        assert placed(objects, wl) == [("b2-r2-n1", 4), ("b2-r2-n2", 2)]

    def test_node_selector_on_a_label_no_node_has(self):
        reason = failure(cluster(), workload("w", count=1, required=RACK, node_selector={"pool": "x"}))
        assert reason.endswith("excluded: nodeSelector: 8")


class TestTolerations:
    def objects(self, **flavor_kwargs) -> list[dict]:
        return tas_setup(flavor_kwargs=flavor_kwargs) + grid(cpu="4", taints=[taint("dedicated", "ml")])

    def test_untolerated_taint(self):
        reason = failure(self.objects(), workload("w", count=2, required=RACK))
        assert reason == "topology \"default\" doesn't allow to fit any of 2 pod(s). " \
                         'Total nodes: 8; excluded: taint "dedicated=ml:NoSchedule": 8'

    @pytest.mark.parametrize(
        "tol",
        [
            toleration("dedicated", "ml"),
            toleration("dedicated", "ml", effect="NoSchedule"),
            toleration("dedicated", operator="Exists"),
            toleration(operator="Exists"),
        ],
    )
    def test_pod_set_toleration(self, tol):
        assert placed(self.objects(), workload("w", count=2, required=RACK, tolerations=[tol])) == [("b1-r1-n1", 2)]

    @pytest.mark.parametrize(
        "tol",
        [toleration("dedicated", "db"), toleration("dedicated", "ml", effect="NoExecute"), toleration("other", "ml")],
    )
    def test_toleration_that_does_not_match(self, tol):
        reason = failure(self.objects(), workload("w", count=2, required=RACK, tolerations=[tol]))
        assert reason.endswith('taint "dedicated=ml:NoSchedule": 8')

    def test_flavor_toleration(self):
        objects = self.objects(tolerations=[toleration("dedicated", "ml", effect="NoSchedule")])
        assert placed(objects, workload("w", count=2, required=RACK)) == [("b1-r1-n1", 2)]


class TestPreferredNodeAffinity:
    def objects(self) -> list[dict]:
        return with_labels(cluster(), "b1-r2-n2", {"fast": "true"})

    def workload(self) -> dict:
        return workload("w", count=2, required=RACK, affinity=preferred_affinity("fast", ["true"]))

    def test_ignored_by_default(self):
        assert placed(self.objects(), self.workload()) == [("b1-r1-n1", 2)]

    def test_respected_with_the_gate(self):
        result = placed(self.objects(), self.workload(), feature_gates=gates(TASRespectNodeAffinityPreferred=True))
        assert result == [("b1-r2-n2", 2)]

    def test_capacity_still_comes_first_for_required_fit(self):
        # the preferred node's rack cannot hold 9 pods; the preference does not make it fit
        wl = workload("w", count=9, required=RACK, affinity=preferred_affinity("fast", ["true"]))
        reason = failure(self.objects(), wl, feature_gates=gates(TASRespectNodeAffinityPreferred=True))
        assert "only 8 out of 9" in reason


# ---------------------------------------------------------------- several PodSets


def place_all(objects, wl, **gate_values):
    snap = flavor_snapshot(objects)
    return find_topology_assignments_for_flavor(snap, tas_requests(wl), gates=gates(**gate_values))


class TestSeveralPodSets:
    def objects(self) -> list[dict]:
        return [*tas_setup(), node("x1", block="b1", rack="r1", cpu="4"), node("x2", block="b1", rack="r1", cpu="4")]

    def test_alone_the_second_would_take_the_first_node(self):
        wl = workload("w", pod_sets=[pod_set("b", count=3, required=HOSTNAME)])
        assert domains(place_all(self.objects(), wl)["b"].assignment) == [("x1", 3)]

    def test_second_pod_set_does_not_reuse_what_the_first_took(self):
        wl = workload("w", pod_sets=[pod_set("a", count=3, required=HOSTNAME),
                                     pod_set("b", count=3, required=HOSTNAME)])
        result = place_all(self.objects(), wl)
        assert domains(result["a"].assignment) == [("x1", 3)]
        assert domains(result["b"].assignment) == [("x2", 3)]

    def test_second_pod_set_fills_the_rest(self):
        wl = workload("w", pod_sets=[pod_set("a", count=3, required=HOSTNAME), pod_set("b", count=5, required=RACK)])
        result = place_all(self.objects(), wl)
        assert domains(result["b"].assignment) == [("x1", 1), ("x2", 4)]

    def test_stops_at_the_first_pod_set_that_does_not_fit(self):
        wl = workload("w", pod_sets=[
            pod_set("a", count=3, required=HOSTNAME),
            pod_set("b", count=6, required=RACK),
            pod_set("c", count=1, required=RACK),
        ])
        result = place_all(self.objects(), wl)
        assert domains(result["a"].assignment) == [("x1", 3)]
        assert result["b"].assignment is None
        assert result["b"].failure == 'topology "default" allows to fit only 5 out of 6 pod(s)'
        assert "c" not in result

    def test_different_requests_per_pod_set(self):
        wl = workload("w", pod_sets=[pod_set("a", count=1, cpu="3", required=HOSTNAME),
                                     pod_set("b", count=2, cpu="2", required=HOSTNAME)])
        result = place_all(self.objects(), wl)
        assert domains(result["a"].assignment) == [("x1", 1)]
        assert domains(result["b"].assignment) == [("x2", 2)]


class TestLeaderAndWorkers:
    def objects(self) -> list[dict]:
        # rack b1/r1 has 2-CPU nodes: room for the workers alone, not for leader and workers
        objects = cluster()
        for obj in objects:
            if obj["kind"] == "Node" and obj["metadata"]["name"].startswith("b1-r1-"):
                obj["status"]["allocatable"]["cpu"] = "2"
        return objects

    def test_workers_alone_take_the_tight_rack(self):
        wl = workload("w", count=3, cpu="1", required=RACK)
        assert placed(self.objects(), wl) == [("b1-r1-n1", 2), ("b1-r1-n2", 1)]

    def test_group_lands_together(self):
        wl = workload("w", pod_sets=[
            pod_set("leader", count=1, cpu="2", required=RACK, group="g"),
            pod_set("workers", count=3, cpu="1", required=RACK, group="g"),
        ])
        result = place_all(self.objects(), wl)
        leader, workers = result["leader"].assignment, result["workers"].assignment
        assert domains(leader) == [("b1-r2-n1", 1)]
        assert domains(workers) == [("b1-r2-n1", 2), ("b1-r2-n2", 1)]
        assert racks_of(leader) == racks_of(workers) == {"b1-r2"}

    def test_order_of_the_pod_sets_does_not_matter(self):
        wl = workload("w", pod_sets=[
            pod_set("workers", count=3, cpu="1", required=RACK, group="g"),
            pod_set("leader", count=1, cpu="2", required=RACK, group="g"),
        ])
        result = place_all(self.objects(), wl)
        assert domains(result["leader"].assignment) == [("b1-r2-n1", 1)]
        assert domains(result["workers"].assignment) == [("b1-r2-n1", 2), ("b1-r2-n2", 1)]

    def test_group_through_find_topology_assignment(self):
        snap = flavor_snapshot(self.objects())
        leader, workers = tas_requests(workload("w", pod_sets=[
            pod_set("leader", count=1, cpu="2", required=RACK, group="g"),
            pod_set("workers", count=3, cpu="1", required=RACK, group="g"),
        ]))
        assignments, reason = find_topology_assignment(snap, workers, leader, gates=gates())
        assert reason == ""
        assert domains(assignments["leader"]) == [("b1-r2-n1", 1)]


# ---------------------------------------------------------------- slices


class TestSlices:
    def objects(self, rack_cpus: dict[str, tuple[str, str]]) -> list[dict]:
        nodes = [node(f"b1-{rack}-n{i + 1}", block="b1", rack=rack, cpu=cpu)
                 for rack, cpus in rack_cpus.items() for i, cpu in enumerate(cpus)]
        return tas_setup() + nodes

    def test_no_slice_is_split_across_racks(self):
        objects = self.objects({"r1": ("3", "3"), "r2": ("3", "3"), "r3": ("2", "2")})
        wl = workload("w", count=8, required=BLOCK, slice_topology=RACK, slice_size=4)
        result = placed(objects, wl)
        assert result == [("b1-r1-n1", 3), ("b1-r1-n2", 1), ("b1-r3-n1", 2), ("b1-r3-n2", 2)]
        per_rack: dict[str, int] = {}
        for host, n in result:
            rack = host.split("-")[1]
            per_rack[rack] = per_rack.get(rack, 0) + n
        assert all(n % 4 == 0 for n in per_rack.values())

    def test_without_slices_the_pods_split_freely(self):
        objects = self.objects({"r1": ("3", "3"), "r2": ("3", "3"), "r3": ("2", "2")})
        result = placed(objects, workload("w", count=8, required=BLOCK))
        assert result == [("b1-r1-n1", 3), ("b1-r1-n2", 3), ("b1-r3-n1", 2)]

    def test_no_rack_holds_a_slice(self):
        objects = self.objects({"r1": ("2", "1"), "r2": ("2", "1")})
        reason = failure(objects, workload("w", count=8, required=BLOCK, slice_topology=RACK, slice_size=4))
        assert reason == "topology \"default\" doesn't allow to fit any of 2 slice(s)"

    def test_only_some_slices_fit(self):
        objects = self.objects({"r1": ("3", "3"), "r2": ("2", "1")})
        reason = failure(objects, workload("w", count=8, required=BLOCK, slice_topology=RACK, slice_size=4))
        assert reason == 'topology "default" allows to fit only 1 out of 2 slice(s)'

    def test_slice_size_missing(self):
        objects = self.objects({"r1": ("4", "4")})
        reason = failure(objects, workload("w", count=4, required=BLOCK, slice_topology=RACK))
        assert reason == "slice topology requested, but slice size not provided"

    def test_slice_level_above_the_requested_level(self):
        objects = self.objects({"r1": ("4", "4")})
        reason = failure(objects, workload("w", count=4, required=RACK, slice_topology=BLOCK, slice_size=2))
        assert reason == f"podset slice topology {BLOCK} is above the podset topology {RACK}"


# ---------------------------------------------------------------- the assignment's shape


class TestAssignmentShape:
    def test_hostname_only_when_it_is_the_lowest_level(self):
        assignment, _ = place(cluster(), workload("w", count=5, required=RACK))
        assert assignment.levels == (HOSTNAME,)
        assert all(len(d.values) == 1 for d in assignment.domains)

    def test_every_level_when_the_lowest_is_not_the_hostname(self):
        objects = tas_setup(levels=[BLOCK, RACK]) + grid(cpu="4")
        assignment, reason = place(objects, workload("w", count=10, preferred=RACK))
        assert reason == ""
        assert assignment.levels == (BLOCK, RACK)
        assert domains(assignment) == [("b1/r1", 8), ("b1/r2", 2)]

    def test_ordered_by_level_values_not_by_hostname(self):
        objects = [*tas_setup(), node("zeta", block="b1", rack="r1", cpu="1"),
                   node("alpha", block="b2", rack="r1", cpu="1")]
        assert placed(objects, workload("w", count=2, unconstrained=True)) == [("zeta", 1), ("alpha", 1)]

    def test_counts_add_up(self):
        assignment, _ = place(cluster(), workload("w", count=13, preferred=RACK))
        assert assignment.pod_count == 13


def test_balanced_placement_of_no_pods_places_nothing():
    # a PodSet scaled to zero: there is nothing to balance (it used to divide by zero)
    feature_gates = gates(TASBalancedPlacement=True)
    objects = [*tas_setup(), *grid(2, 2, 2)]
    assignment, reason = place(objects, workload("w", count=0, preferred=RACK), feature_gates=feature_gates)
    assert reason == ""
    assert assignment.pod_count == 0
