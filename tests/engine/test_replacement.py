"""Hot swap, step 1 of the pass: replacing a failed node of a running workload, or evicting it.

Unless a test says otherwise the cluster is rack b1/r1 with x1, x2, x3 and rack b1/r2
with y1, every node 4 CPU, and the workload `train` runs 4 pods of 2 CPU, two on x1 and
two on x2. x1 fails; x3 is the only node of r1 with room (`r1_full=True` takes it).

A node found failed in a pass is replaced in a later one, once the second-pass backoff
(1 s) has run out: `run` here is two passes of one engine, 1 s apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from scheduler.codec import decode_assignment
from scheduler.engine import Engine
from scheduler.output import result_json
from scheduler.replacement import NO_REPLACEMENT
from scheduler.results import (
    ASSIGNMENT_KEPT,
    NODE_REPLACED,
    NODE_UNHEALTHY,
    REPLACEMENT_FAILED,
    WORKLOAD_EVICTED,
    PassResult,
)
from scheduler.topology_assignment import leaves_in_domain

from .factories import (
    BLOCK,
    HOSTNAME,
    NAMESPACE,
    NOW,
    RACK,
    admitted,
    domains,
    domains_json,
    flavor_snapshot,
    gates,
    grid,
    node,
    owner_reference,
    parse,
    pod,
    pod_set,
    result_of,
    run_passes,
    taint,
    tas_setup,
    toleration,
    workload,
    workload_pod,
)

KEY = f"{NAMESPACE}/train"


def run(objects, **kwargs) -> PassResult:
    return run_passes(objects, **kwargs)
ASSIGNMENT = [("x1", 2), ("x2", 2)]
MULTIPLE_FAILURES = "Workload eviction triggered due to multiple TAS assigned node failures, including: {}"


def rack_nodes(*, r1_full: bool = False, failed: dict | None = None) -> list[dict]:
    """x1 (absent: deleted, unless `failed` gives its object), x2, x3 in r1, y1 in r2."""
    objects = [node("x2", block="b1", rack="r1", cpu="4"), node("x3", block="b1", rack="r1", cpu="4"),
               node("y1", block="b1", rack="r2", cpu="4")]
    if failed is not None:
        objects.append(failed)
    if r1_full:
        objects.append(pod("busy", node="x3", cpu="4"))
    return objects


def train(assignment: Sequence[tuple[str, int]] = tuple(ASSIGNMENT), *, unhealthy_nodes: Sequence[str] = (),
          **workload_kwargs: Any) -> dict:
    workload_kwargs.setdefault("required", RACK)
    wl = workload("train", count=sum(c for _, c in assignment), cpu="2", **workload_kwargs)
    return admitted(wl, assignments={"main": domains_json([HOSTNAME], assignment)}, unhealthy_nodes=unhealthy_nodes)


def decisions_of(result: PassResult, kind: str | None = None) -> list:
    return [d for d in result.decisions if d.key == KEY and (kind is None or d.kind == kind)]


def events_of(result: PassResult, reason: str) -> list:
    return [e for e in result.events if e.key == KEY and e.reason == reason]


def main_domains(result: PassResult, name: str = "train", pod_set_name: str = "main") -> list[tuple[str, int]]:
    (ps,) = [p for p in result_of(result, name).pod_sets if p.name == pod_set_name]
    return domains(ps.assignment)


def assert_replaced(result: PassResult, expected: list[tuple[str, int]], new_nodes: list[str],
                    failed: str = "x1", pod_set_name: str = "main") -> None:
    wl = result_of(result, "train")
    assert wl.status == "Admitted"
    assert wl.unhealthy_nodes == []
    assert main_domains(result, pod_set_name=pod_set_name) == expected
    (replaced,) = decisions_of(result, NODE_REPLACED)
    assert replaced.node == failed
    assert replaced.replacement == new_nodes
    assert replaced.pod_set == pod_set_name
    assert replaced.message == f"pod set {pod_set_name}: pods on {failed} moved to {', '.join(new_nodes)}"
    assert events_of(result, "EvictedDueToNodeFailures") == []
    assert events_of(result, "SecondPassFailed") == []


# ---------------------------------------------------------------- where the pods go


class TestWhereThePodsGo:
    def test_required_rack_stays_in_its_rack(self):
        result = run([*tas_setup(), *rack_nodes(), train()])
        assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"])
        (marked,) = decisions_of(result, NODE_UNHEALTHY)
        assert (marked.node, marked.trigger) == ("x1", "node deleted")

    def test_required_rack_does_not_leave_its_rack(self):
        # y1 in r2 has room, r1 has none: no replacement (FailFast evicts)
        result = run([*tas_setup(), *rack_nodes(r1_full=True), train()])
        wl = result_of(result, "train")
        assert wl.status == "Evicted"
        assert wl.eviction_reason == NO_REPLACEMENT.format("x1")
        assert decisions_of(result, NODE_REPLACED) == []

    def test_preferred_rack_may_move_elsewhere(self):
        result = run([*tas_setup(), *rack_nodes(r1_full=True), train(required=None, preferred=RACK)])
        assert_replaced(result, [("x2", 2), ("y1", 2)], ["y1"])

    def test_pods_split_over_several_nodes(self):
        # one pod fits on x3 and one on x4: the two pods of x1 are split
        objects = [*tas_setup(), node("x2", block="b1", rack="r1", cpu="4"),
                   node("x3", block="b1", rack="r1", cpu="4"), node("x4", block="b1", rack="r1", cpu="4"),
                   pod("half-3", node="x3", cpu="2"), pod("half-4", node="x4", cpu="2"), train()]
        result = run(objects)
        assert_replaced(result, [("x2", 2), ("x3", 1), ("x4", 1)], ["x3", "x4"])

    def test_the_failed_node_is_not_given_to_another_workload_in_the_same_pass(self):
        # x1 is Ready again but still listed as unhealthy: its pods are moved to x3, and until
        # they are gone x1 stays theirs, so the pending workload that would fit x1 takes y1
        x1 = node("x1", block="b1", rack="r1", cpu="4")
        pending = workload("next", count=2, cpu="2", required=HOSTNAME)
        result = run([*tas_setup(), *rack_nodes(failed=x1), train(unhealthy_nodes=["x1"]), pending])
        assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"])
        assert result_of(result, "next").status == "Admitted"
        assert main_domains(result, "next") == [("y1", 2)]

    def test_a_failure_found_in_a_pass_is_replaced_in_a_later_one(self):
        """x1 is found deleted in the first pass: `train` only lists it then, and the workload
        already waiting takes x3, the one node of r1 with room. The replacement, a pass later,
        finds r1 full and the workload is evicted (fail-fast off: replacement failed)."""
        pending = workload("next", count=2, cpu="2", required=HOSTNAME)
        first = run([*tas_setup(), *rack_nodes(), train(), pending], passes=1)
        assert result_of(first, "train").unhealthy_nodes == ["x1"]
        assert decisions_of(first, NODE_REPLACED) == []
        assert main_domains(first, "next") == [("x3", 2)]
        later = run([*tas_setup(), *rack_nodes(), train(), pending], passes=2)
        assert main_domains(later, "next") == [("x3", 2)]
        assert decisions_of(later, NODE_REPLACED) == []
        assert decisions_of(later, REPLACEMENT_FAILED) or decisions_of(later, WORKLOAD_EVICTED)

    def test_the_rest_of_the_assignment_is_kept(self):
        # n3 is gone; its two pods go wherever there is room, every other pod stays put
        nodes = [node(f"n{i}", block="b1", rack="r1", cpu="4") for i in (1, 2, 4, 5, 6)]
        survivors = {"n2": 1, "n4": 2, "n6": 1}
        result = run([*tas_setup(), *nodes, train([("n2", 1), ("n3", 2), ("n4", 2), ("n6", 1)])])
        wl = result_of(result, "train")
        assert (wl.status, wl.unhealthy_nodes) == ("Admitted", [])
        after = dict(main_domains(result))
        (replaced,) = decisions_of(result, NODE_REPLACED)
        moved = {host: after.get(host, 0) - survivors.get(host, 0) for host in after}
        assert all(count >= 0 for count in moved.values())  # no survivor lost a pod
        assert {host for host, count in moved.items() if count} == set(replaced.replacement)
        assert sum(moved.values()) == 2
        assert "n3" not in after
        # level-value order of the hostnames of one rack
        assert [host for host, _ in main_domains(result)] == sorted(after)

    def test_incomplete_slice_is_repaired_inside_its_slice_domain(self):
        # two rack slices of 3 pods; b1-r2-n2 held one pod of r2's slice. b1-r1-n2 has the
        # tightest room in the block, but the pod must go back to r2: b1-r2-n3.
        nodes = [node(f"b1-r{r}-n{n}", block="b1", rack=f"r{r}", cpu="2") for r in (1, 2) for n in (1, 2, 3)
                 if (r, n) != (2, 2)]
        wl = workload("train", count=6, cpu="1", required=BLOCK, slice_topology=RACK, slice_size=3)
        wl = admitted(wl, assignments={"main": domains_json([HOSTNAME], [
            ("b1-r1-n1", 2), ("b1-r1-n2", 1), ("b1-r2-n1", 2), ("b1-r2-n2", 1)])})
        result = run([*tas_setup(), *nodes, wl])
        assert_replaced(result, [("b1-r1-n1", 2), ("b1-r1-n2", 1), ("b1-r2-n1", 2), ("b1-r2-n3", 1)],
                        ["b1-r2-n3"], failed="b1-r2-n2")

    def test_incomplete_slice_without_room_in_its_domain(self):
        nodes = [node(f"b1-r{r}-n{n}", block="b1", rack=f"r{r}", cpu="2") for r in (1, 2) for n in (1, 2, 3)
                 if (r, n) != (2, 2)]
        wl = workload("train", count=6, cpu="1", required=BLOCK, slice_topology=RACK, slice_size=3)
        wl = admitted(wl, assignments={"main": domains_json([HOSTNAME], [
            ("b1-r1-n1", 2), ("b1-r1-n2", 1), ("b1-r2-n1", 2), ("b1-r2-n2", 1)])})
        result = run([*tas_setup(), *nodes, pod("busy", node="b1-r2-n3", cpu="2"), wl],
                     feature_gates=gates(TASFailedNodeReplacementFailFast=False))
        wl_result = result_of(result, "train")
        assert wl_result.status == "Admitted"
        assert wl_result.unhealthy_nodes == ["b1-r2-n2"]
        assert decisions_of(result, NODE_REPLACED) == []
        assert len(events_of(result, "SecondPassFailed")) == 1

    def test_multi_layer_slices_stay_in_the_broken_outer_slice(self):
        # rack slices of 4 made of host slices of 2: the lost host slice goes back to r2
        nodes = [node(f"b1-r{r}-n{n}", block="b1", rack=f"r{r}", cpu="2") for r in (1, 2) for n in (1, 2, 3)
                 if (r, n) != (2, 2)]
        ps = pod_set(count=8, cpu="1", raw_topology_request={
            "required": BLOCK,
            "podsetSliceRequiredTopologyConstraints": [
                {"topology": RACK, "size": 4}, {"topology": HOSTNAME, "size": 2}],
        })
        wl = admitted(workload("train", pod_sets=[ps]), assignments={"main": domains_json([HOSTNAME], [
            ("b1-r1-n1", 2), ("b1-r1-n2", 2), ("b1-r2-n1", 2), ("b1-r2-n2", 2)])})
        result = run([*tas_setup(), *nodes, wl])
        assert_replaced(result, [("b1-r1-n1", 2), ("b1-r1-n2", 2), ("b1-r2-n1", 2), ("b1-r2-n3", 2)],
                        ["b1-r2-n3"], failed="b1-r2-n2")

    @pytest.mark.parametrize("failed", [
        pytest.param(dict(ready="False", ready_since=-60), id="not-ready"),
        pytest.param(dict(ready=None), id="no-ready-condition"),
        pytest.param(dict(taints=[taint("broken", effect="NoExecute")]), id="no-execute"),
        pytest.param(dict(taints=[taint("broken")]), id="no-schedule"),
        pytest.param(dict(unschedulable=True), id="cordoned"),
    ])
    def test_the_failed_node_is_never_its_own_replacement(self, failed):
        # x1 has room for two more pods, but it is the node that failed; r1 has no other room
        objects = [*tas_setup(), *rack_nodes(r1_full=True, failed=node("x1", block="b1", rack="r1", cpu="8", **failed)),
                   train()]
        objects += [workload_pod(f"train-{i}", "train", node="x1", cpu="2", phase="Failed") for i in (0, 1)]
        result = run(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))
        wl = result_of(result, "train")
        assert (wl.status, wl.unhealthy_nodes) == ("Admitted", ["x1"])
        assert main_domains(result) == ASSIGNMENT
        assert decisions_of(result, NODE_REPLACED) == []
        assert [d.kind for d in decisions_of(result)] == [NODE_UNHEALTHY, REPLACEMENT_FAILED]

    def test_replacement_uses_only_free_capacity(self):
        # another admitted workload holds x3: the replacement cannot take it
        other = admitted(workload("other", count=2, cpu="2", required=RACK),
                         assignments={"main": domains_json([HOSTNAME], [("x3", 2)])})
        result = run([*tas_setup(), *rack_nodes(), other, train()],
                     feature_gates=gates(TASFailedNodeReplacementFailFast=False))
        assert result_of(result, "train").unhealthy_nodes == ["x1"]
        assert result_of(result, "other").status == "Admitted"
        assert main_domains(result, "other") == [("x3", 2)]


class TestReencoding:
    def test_assignment_is_reencoded_in_level_value_order(self):
        # racks r1 < r2 order the domains, not the hostnames nor the replacement's arrival:
        # zeta (r1, kept) comes before alpha (r2, the replacement of yota)
        objects = [*tas_setup(), node("zeta", block="b1", rack="r1", cpu="4"),
                   node("alpha", block="b1", rack="r2", cpu="4"),
                   train([("zeta", 2), ("yota", 2)], required=None, preferred=RACK)]
        result = run(objects)
        assert_replaced(result, [("zeta", 2), ("alpha", 2)], ["alpha"], failed="yota")
        (ps,) = result_json(result)["workloads"][0]["podSets"]
        decoded = decode_assignment(ps["topologyAssignment"])
        assert decoded.levels == (HOSTNAME,)
        assert [(d.values, d.count) for d in decoded.domains] == [(("zeta",), 2), (("alpha",), 2)]
        assert ps["domains"] == [{"values": ["zeta"], "count": 2}, {"values": ["alpha"], "count": 2}]
        assert "slices" in ps["topologyAssignment"]

    def test_a_replacement_node_already_in_the_assignment_is_merged(self):
        # x2 has room for one more pod: the merged assignment holds x2 once, with 3 pods
        objects = [*tas_setup(), node("x2", block="b1", rack="r1", cpu="8"),
                   pod("busy", node="x2", cpu="2"), train([("x1", 1), ("x2", 2)])]
        result = run(objects)
        assert_replaced(result, [("x2", 3)], ["x2"])
        (ps,) = result_json(result)["workloads"][0]["podSets"]
        assert [(d.values, d.count) for d in decode_assignment(ps["topologyAssignment"]).domains] == [(("x2",), 3)]


class TestPodSets:
    def two_pod_sets(self) -> dict:
        wl = workload("train", pod_sets=[pod_set("driver", count=1, cpu="2", required=RACK),
                                         pod_set("workers", count=4, cpu="2", required=RACK)])
        return admitted(wl, assignments={
            "driver": domains_json([HOSTNAME], [("y1", 1)]),
            "workers": domains_json([HOSTNAME], ASSIGNMENT),
        })

    def test_only_the_pod_set_on_the_failed_node_changes(self):
        result = run([*tas_setup(), *rack_nodes(), self.two_pod_sets()])
        assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"], pod_set_name="workers")
        assert main_domains(result, pod_set_name="driver") == [("y1", 1)]
        out = {p["name"]: p for p in result_json(result)["workloads"][0]["podSets"]}
        assert out["driver"]["domains"] == [{"values": ["y1"], "count": 1}]

    def test_the_other_pod_set_is_untouched_when_the_failure_is_in_the_first(self):
        wl = self.two_pod_sets()
        wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = domains_json(
            [HOSTNAME], [("x1", 1)])
        wl["status"]["admission"]["podSetAssignments"][1]["topologyAssignment"] = domains_json(
            [HOSTNAME], [("x2", 2), ("y1", 2)])
        wl["spec"]["podSets"][1]["topologyRequest"] = {"preferred": RACK}
        result = run([*tas_setup(), *rack_nodes(), wl])
        # x2 and y1 are full of workers: x3 is the only node with room
        assert_replaced(result, [("x3", 1)], ["x3"], pod_set_name="driver")
        assert main_domains(result, pod_set_name="workers") == [("x2", 2), ("y1", 2)]


# ---------------------------------------------------------------- several failures


class TestSeveralFailures:
    def test_second_node_fails_while_one_is_listed(self):
        # x1 is listed (its replacement still pending), then x2 goes away too
        objects = [*tas_setup(), node("x3", block="b1", rack="r1", cpu="4"),
                   train(unhealthy_nodes=["x1"])]
        result = run(objects)
        wl = result_of(result, "train")
        message = MULTIPLE_FAILURES.format("x1, x2")
        assert wl.status == "Evicted"
        assert wl.message == wl.eviction_reason == message
        evicted = [c for c in wl.conditions if c.type == "Evicted"]
        assert [(c.status, c.reason, c.message) for c in evicted] == [("True", "NodeFailures", message)]
        assert [(e.type, e.message) for e in events_of(result, "EvictedDueToNodeFailures")] == [("Normal", message)]
        (decision,) = decisions_of(result, WORKLOAD_EVICTED)
        assert decision.node == "x2"
        assert decision.trigger == "node deleted"
        assert decision.message == message
        assert decisions_of(result, NODE_REPLACED) == []

    def test_two_nodes_fail_in_the_same_pass(self):
        objects = [*tas_setup(), node("x3", block="b1", rack="r1", cpu="4"), train()]
        result = run(objects)
        wl = result_of(result, "train")
        assert wl.status == "Evicted"
        assert wl.eviction_reason == MULTIPLE_FAILURES.format("x1, x2")
        assert [d.kind for d in decisions_of(result)] == [NODE_UNHEALTHY, WORKLOAD_EVICTED]

    def test_a_listed_node_alone_is_replaced(self):
        result = run([*tas_setup(), *rack_nodes(), train(unhealthy_nodes=["x1"])])
        assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"])
        assert decisions_of(result, NODE_UNHEALTHY) == []

    def test_evicted_workload_is_left_alone(self):
        wl = train()
        wl["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted",
                                           "message": "preempted"})
        result = run([*tas_setup(), *rack_nodes(), wl])
        assert decisions_of(result) == []
        assert result_of(result, "train").unhealthy_nodes == []


# ---------------------------------------------------------------- workloads owned by a pod


class TestPodOwnedWorkloads:
    def single(self, *owners: dict, annotations: dict | None = None) -> dict:
        wl = workload("train", count=1, cpu="2", required=RACK, owners=owners, annotations=annotations)
        return admitted(wl, assignments={"main": domains_json([HOSTNAME], [("x1", 1)])})

    def test_single_pod_owner_keeps_its_assignment(self):
        result = run([*tas_setup(), *rack_nodes(), self.single(owner_reference("Pod", "p0"))])
        wl = result_of(result, "train")
        assert wl.status == "Admitted"
        assert wl.unhealthy_nodes == []
        assert main_domains(result) == [("x1", 1)]
        assert decisions_of(result, NODE_REPLACED) == []
        (kept,) = decisions_of(result, ASSIGNMENT_KEPT)
        assert kept.node == "x1"
        assert kept.replacement == []
        assert kept.trigger and kept.message

    @staticmethod
    def assert_moved(result: PassResult) -> None:
        # the only pod was on x1: with nothing left to stay close to, any node with room will do
        (replaced,) = decisions_of(result, NODE_REPLACED)
        (new_node,) = replaced.replacement
        assert new_node in ("x2", "x3", "y1")
        assert_replaced(result, [(new_node, 1)], [new_node])

    def test_single_pod_owner_is_replaced_without_the_gate(self):
        result = run([*tas_setup(), *rack_nodes(), self.single(owner_reference("Pod", "p0"))],
                     feature_gates=gates(SkipReassignmentForPodOwnedWorkloads=False))
        self.assert_moved(result)

    @pytest.mark.parametrize("owners", [
        pytest.param((owner_reference("Pod", "p0"), owner_reference("Pod", "p1")), id="two-pod-owners"),
        pytest.param((owner_reference("Job", "train", api_version="batch/v1"),), id="job"),
        pytest.param((owner_reference("Pod", "p0", api_version="example.com/v1"),), id="pod-of-another-group"),
    ])
    def test_other_owners_are_replaced(self, owners):
        result = run([*tas_setup(), *rack_nodes(), self.single(*owners)])
        self.assert_moved(result)

    def test_pod_group_is_replaced(self):
        wl = self.single(owner_reference("Pod", "p0"), annotations={"kueue.x-k8s.io/is-group-workload": "true"})
        result = run([*tas_setup(), *rack_nodes(), wl])
        self.assert_moved(result)


# ---------------------------------------------------------------- the feature gate interaction matrix

UNCHANGED = "unchanged"  # nothing marked, nothing replaced: the assignment still names the failed node
REPLACED = "replaced"  # the failed node's pods moved to x3, unhealthyNodes cleared
RETRIED = "retried"  # still admitted, the node stays in unhealthyNodes, SecondPassFailed; next pass retries
EVICTED = "evicted"  # evicted at once: "no replacement for unhealthy node(s)"

# Kueue's "Feature Gate Interaction Matrix" (TASFailedNodeReplacement, TASReplaceNodeOnPodTermination,
# TASFailedNodeReplacementFailFast), as one pass plays it out for a node that failed:
#   FNR    RNO    FNFF    replacement found  no replacement  NotReady 10 s, pods stopped: marked?
MATRIX = [
    (False, False, False, UNCHANGED, UNCHANGED, False),
    (False, False, True, UNCHANGED, UNCHANGED, False),
    (False, True, False, UNCHANGED, UNCHANGED, False),
    (False, True, True, UNCHANGED, UNCHANGED, False),
    (True, False, False, REPLACED, RETRIED, False),  # without RNO only 30 s of NotReady mark it
    (True, False, True, REPLACED, EVICTED, False),
    (True, True, False, REPLACED, RETRIED, True),
    (True, True, True, REPLACED, EVICTED, True),
]

# How x1 fails: deleted (immediate in every configuration), NotReady for a minute with the
# workload's pods stopped (marked with or without RNO), NotReady for 10 s with the pods stopped
# (marked only with RNO).
FAILURES = {
    "deleted": None,
    "not-ready-60s": dict(ready="False", ready_since=-60),
    "not-ready-10s": dict(ready="False", ready_since=-10),
}


def matrix_cluster(failure: str, *, replacement: bool) -> list[dict]:
    spec = FAILURES[failure]
    failed = None if spec is None else node("x1", block="b1", rack="r1", cpu="4", **spec)
    objects = [*tas_setup(), *rack_nodes(r1_full=not replacement, failed=failed), train()]
    objects += [workload_pod(f"train-{i}", "train", node="x1", cpu="2", phase="Failed") for i in (0, 1)]
    objects += [workload_pod(f"train-{i}", "train", node="x2", cpu="2") for i in (2, 3)]
    return objects


def expected_outcome(row: tuple, failure: str, *, replacement: bool) -> str:
    fnr, _, _, found, not_found, marks_fresh_not_ready = row
    if not fnr or (failure == "not-ready-10s" and not marks_fresh_not_ready):
        return UNCHANGED
    return found if replacement else not_found


def assert_outcome(result: PassResult, outcome: str) -> None:
    wl = result_of(result, "train")
    ps = wl.pod_sets[0]
    if outcome == UNCHANGED:
        assert wl.status == "Admitted"
        assert wl.unhealthy_nodes == []
        assert domains(ps.assignment) == ASSIGNMENT
        assert decisions_of(result) == []
        assert events_of(result, "EvictedDueToNodeFailures") == events_of(result, "SecondPassFailed") == []
    elif outcome == REPLACED:
        assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"])
        assert [d.kind for d in decisions_of(result)] == [NODE_UNHEALTHY, NODE_REPLACED]
    elif outcome == RETRIED:
        assert wl.status == "Admitted"
        assert wl.unhealthy_nodes == ["x1"]
        assert domains(ps.assignment) == ASSIGNMENT
        assert ps.failure_reason.startswith('topology "default" doesn\'t allow to fit any of 2 pod(s).')
        message = f"couldn't assign flavors to pod set main: {ps.failure_reason}"
        assert [(e.type, e.message) for e in events_of(result, "SecondPassFailed")] == [("Warning", message)]
        assert events_of(result, "EvictedDueToNodeFailures") == []
        assert [d.kind for d in decisions_of(result)] == [NODE_UNHEALTHY, REPLACEMENT_FAILED]
        assert decisions_of(result, REPLACEMENT_FAILED)[0].message == message
    else:
        message = NO_REPLACEMENT.format("x1")
        assert message == "Workload was evicted as there was no replacement for unhealthy node(s): x1"
        assert wl.status == "Evicted"
        assert wl.message == wl.eviction_reason == message
        assert ("Evicted", "True", "NodeFailures", message) in [(c.type, c.status, c.reason, c.message)
                                                               for c in wl.conditions]
        assert [(e.type, e.message) for e in events_of(result, "EvictedDueToNodeFailures")] == [("Normal", message)]
        assert events_of(result, "SecondPassFailed") == []
        assert [d.kind for d in decisions_of(result)] == [NODE_UNHEALTHY, REPLACEMENT_FAILED, WORKLOAD_EVICTED]
        out = result_json(result)["workloads"][0]
        assert out["status"] == "Evicted"
        assert out["evictionReason"] == message


@pytest.mark.parametrize("row", MATRIX, ids=lambda r: "FNR={}-RNO={}-FNFF={}".format(*r[:3]))
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("replacement", [True, False], ids=["replacement", "no-replacement"])
def test_feature_gate_interaction_matrix(row, failure, replacement):
    fnr, rno, fnff = row[:3]
    feature_gates = gates(TASFailedNodeReplacement=fnr, TASReplaceNodeOnPodTermination=rno,
                          TASFailedNodeReplacementFailFast=fnff)
    result = run(matrix_cluster(failure, replacement=replacement), feature_gates=feature_gates)
    assert_outcome(result, expected_outcome(row, failure, replacement=replacement))


def test_matrix_covers_every_combination():
    assert sorted(r[:3] for r in MATRIX) == sorted(
        (fnr, rno, fnff) for fnr in (False, True) for rno in (False, True) for fnff in (False, True))


def test_a_retried_replacement_succeeds_once_room_appears():
    # the next pass sees the node still listed and x3 free again
    objects = [*tas_setup(), *rack_nodes(), train(unhealthy_nodes=["x1"])]
    result = run(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))
    assert_replaced(result, [("x2", 2), ("x3", 2)], ["x3"])


# ---------------------------------------------------------------- the domain a replacement stays in


@pytest.mark.parametrize("levels", [[BLOCK, RACK, HOSTNAME], [BLOCK, RACK]])
def test_the_leaves_of_a_domain_are_those_whose_path_starts_with_it(levels):
    """Every domain of every level, and names that are no domain (a prefix of a value, one
    level too deep, unknown), against the definition: a leaf whose path of values is the
    domain's or continues it."""
    nodes = [*grid(blocks=3, racks=3, nodes=2, hostname=HOSTNAME in levels),
             node("b10-r1-n1", block="b10", rack="r1", hostname=HOSTNAME in levels)]
    snap = flavor_snapshot([*tas_setup(levels=levels), *nodes])
    paths = [",".join(values) for values in snap.tree.leaves.values]
    domains = {",".join(values[:depth]) for values in snap.tree.leaves.values for depth in range(1, len(levels) + 1)}
    for domain in [*sorted(domains), "b1,r1,b1-r1-n1,extra", "b", "b1,r", "nowhere"]:
        expected = [p == domain or p.startswith(domain + ",") for p in paths]
        assert leaves_in_domain(snap, domain).tolist() == expected, domain
    assert leaves_in_domain(snap, "b1").sum() == (6 if HOSTNAME in levels else 3)


def test_the_room_a_replacement_held_for_its_pass_requeues_what_waits_for_it():
    """The pods leaving a replaced node hold it for the pass (as the old assignment does in
    Kueue's cycle), so a workload evaluated in that pass may not fit and be parked. When the
    pass ends the room is free again: what waits for TAS capacity on the flavor is requeued
    and admitted, rather than left parked while it fits."""
    objects = [*tas_setup(levels=(HOSTNAME,), quota={"cpu": "100"}),
               node("x1", cpu="4", taints=[taint("maintenance")]), node("x2", cpu="2"),
               admitted(workload("moved", cpu="2", required=HOSTNAME),
                        assignments={"main": domains_json([HOSTNAME], [("x1", 1)])}, unhealthy_nodes=["x1"]),
               workload("waiting", cpu="4", required=HOSTNAME,
                        tolerations=[toleration("maintenance", operator="Exists")])]
    result = run_passes(objects, passes=2)
    assert domains(result_of(result, "moved").pod_sets[0].assignment) == [("x2", 1)]
    assert result_of(result, "waiting").status == "Admitted"
    assert domains(result_of(result, "waiting").pod_sets[0].assignment) == [("x1", 1)]


# ---------------------------------------------------------------- evictions in progress


def leaving(host: str = "x3", cpu: str = "4") -> dict:
    """`leaving`, admitted on `host` and marked Evicted (preempted by an earlier pass): it holds
    the node until its pods are gone."""
    wl = admitted(workload("leaving", cpu=cpu, required=HOSTNAME),
                  assignments={"main": domains_json([HOSTNAME], [(host, 1)])})
    wl["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted",
                                       "message": "Preempted to accommodate a workload"})
    return wl


class TestEvictionsInProgress:
    """With TASFailedNodeReplacementFailFast a workload with no replacement is evicted, unless a
    replacement fits once the workloads being evicted are gone: then it keeps its nodes and
    waits for them, as Kueue's scheduler does (kueue#14187)."""

    def objects(self, *others: dict) -> list[dict]:
        return [*tas_setup(), *rack_nodes(r1_full=False), *others, train(unhealthy_nodes=["x1"])]

    def test_a_replacement_that_fits_once_they_are_gone_waits(self):
        result = run(self.objects(leaving("x3")), passes=1)
        wl = result_of(result, "train")
        assert (wl.status, wl.unhealthy_nodes) == ("Admitted", ["x1"])
        assert main_domains(result) == ASSIGNMENT
        assert events_of(result, "EvictedDueToNodeFailures") == []
        (event,) = events_of(result, "SecondPassFailed")
        assert event.type == "Warning"
        assert event.message.startswith("couldn't assign flavors to pod set main: ")
        (failed,) = decisions_of(result, REPLACEMENT_FAILED)
        assert failed.message == (f"{event.message}; not evicted: a replacement fits once the evictions in "
                                  f"progress ({NAMESPACE}/leaving) free their nodes")
        assert decisions_of(result, WORKLOAD_EVICTED) == []

    def test_the_replacement_is_made_when_they_are_gone(self):
        engine = Engine.from_parsed(parse(self.objects(leaving("x3"))), gates())
        first = engine.run_pass(NOW)
        assert KEY not in {d.key for d in first.result.decisions if d.kind == WORKLOAD_EVICTED}
        engine.delete("Workload", f"{NAMESPACE}/leaving")
        # tried again when its second-pass backoff (1 s, then 2 s) runs out
        later = [engine.run_pass(NOW + timedelta(seconds=s)).result for s in (1, 2)]
        (replaced,) = [d for r in later for d in r.decisions if d.key == KEY and d.kind == NODE_REPLACED]
        assert replaced.replacement == ["x3"]
        wl = engine.state.workload(KEY)
        assert wl.unhealthy_nodes == [] and not wl.condition_true("Evicted")

    def test_an_eviction_elsewhere_does_not_save_it(self):
        # leaving frees y1, in another rack: train requires its rack, so it is evicted at once
        result = run(self.objects(pod("busy", node="x3", cpu="4"), leaving("y1")), passes=1)
        wl = result_of(result, "train")
        assert wl.status == "Evicted"
        assert wl.eviction_reason == NO_REPLACEMENT.format("x1")
        assert events_of(result, "SecondPassFailed") == []

    def test_their_usage_is_back_after_the_search(self):
        # x3, held by leaving, is the only node with room for `next` (y1 is busy): it must not
        # be given to `next` in the pass that looked for train's replacement without leaving
        objects = [*self.objects(leaving("x3"), pod("busy", node="y1", cpu="4")),
                   workload("next", cpu="4", required=HOSTNAME)]
        result = run(objects, passes=1)
        assert result_of(result, "train").status == "Admitted"
        assert result_of(result, "next").status != "Admitted"

    def test_only_the_evictions_that_make_room_are_named(self):
        # elsewhere is being evicted too, from y1 in another rack: only leaving frees what train needs
        elsewhere = leaving("y1")
        elsewhere["metadata"]["name"] = "elsewhere"
        result = run(self.objects(leaving("x3"), elsewhere), passes=1)
        (failed,) = decisions_of(result, REPLACEMENT_FAILED)
        assert failed.message.endswith(f"evictions in progress ({NAMESPACE}/leaving) free their nodes")
