"""Cases of Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/tas_cache_test.go) whose
exact assertion the conformance placement suite does not make.

Every case of that Go test is named in the conformance suite or in
`test_kueue_placement_extra.py`, but for six of them the suite checks less than, or something
other than, what the Go case asserts:

* Several PodSets, one of which does not fit: Kueue's test compares the result of every
  PodSet (the assignment of the PodSet placed first, the failure reason of each PodSet of
  the group that fails). The suite runs the workload through a pass, which reports one
  message for the workload, so a fitting PodSet of a workload that is not admitted is not
  compared, nor which PodSet carries the reason. Here each PodSet's result is compared.
* Node replacement in an incomplete slice: Kueue's test builds its snapshot from the nodes
  alone, so the admitted workload's own pods are not counted on their nodes, and asserts the
  replacement found on that snapshot. The suite asserts what a running cluster gets, with the
  workload's usage counted, which is a different result. Here the replacement is searched on
  a snapshot of the nodes alone, as in Kueue's test.

Fresh placements are checked on the flavor snapshot with `find_topology_assignments_for_flavor`,
as Kueue's test calls `FindTopologyAssignmentsForFlavor`; a node replacement calls
`find_replacement_assignment`, the step `FindTopologyAssignmentsForFlavor` takes for a workload
with an unhealthy node. Every assertion is the assignment (levels and domains, in order) or the
failure reason the Go case expects, for every PodSet the Go case lists.
"""

from __future__ import annotations

from scheduler.assignment import TopologyAssignment
from scheduler.placement import PodSetPlacement
from scheduler.topology_assignment import find_replacement_assignment, find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    HOSTNAME,
    LEVELS,
    RACK,
    flavor_snapshot,
    gates,
    node,
    pod_set,
    tas_requests,
    tas_setup,
    workload,
)
from .test_kueue_placement_extra import expected, shape

GPU = "example.com/gpu"
GROUP = "sameGroup"


def place_all(
    objects: list[dict], pod_sets: list[dict], *, implied: bool = False, **gate_values: bool
) -> dict[str, PodSetPlacement]:
    """Every PodSet of one workload placed on the flavor snapshot, in order."""
    snap = flavor_snapshot(objects, feature_gates=gates(**gate_values))
    requests = tas_requests(workload("wl", pod_sets=pod_sets), implied=implied)
    return find_topology_assignments_for_flavor(snap, requests, gates=gates(**gate_values))


def block_node(name: str, *, cpu: str, gpu: str) -> dict:
    """A node labelled with its block only (no hostname label), as in the Go cases."""
    return node(name, block=name, hostname=False, cpu=cpu, pods="10", extra={GPU: gpu})


# ---------------------------------------------------------------- several PodSets, one does not fit


def test_multiple_podsets_account_assumed_pod_usage_against_allocatable_pods():
    """Go case: "multiple PodSets account assumed pod usage against allocatable pods; BestFit".
    x1 allows one pod; the PodSet placed first takes it, so the second finds no room for pods."""
    objects = [*tas_setup(levels=(HOSTNAME,)), node("x1", cpu="2", pods="1")]
    result = place_all(
        objects,
        [pod_set("one", count=1, cpu="1", required=HOSTNAME), pod_set("two", count=1, cpu="1", required=HOSTNAME)],
    )
    assert set(result) == {"one", "two"}
    assert result["one"].failure == ""
    assert shape(result["one"].assignment) == expected(("x1", 1))
    assert result["two"].assignment is None
    assert result["two"].failure == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1'
    )


def test_temporary_state_cleanup_prevents_leakage_across_podsets():
    """Go case: "temporary state cleanup prevents leakage across PodSets". Nodes n1 and n2
    carry hostnames x1 and x2; neither PodSet has a topology request (implied). The second
    PodSet's node selector matches no node, so it must fail rather than reuse counts left
    over from the first."""
    objects = [
        *tas_setup(levels=(HOSTNAME,)),
        node("n1", hostname=False, labels={HOSTNAME: "x1"}, cpu="4", memory="4Gi", pods="10"),
        node("n2", hostname=False, labels={HOSTNAME: "x2"}, cpu="4", memory="4Gi", pods="10"),
    ]
    result = place_all(
        objects,
        [
            pod_set("ps1", count=1, cpu="1", memory="1000"),
            pod_set("ps2", count=1, cpu="1", memory="1000", node_selector={"never": "match"}),
        ],
        implied=True,
    )
    assert set(result) == {"ps1", "ps2"}
    assert result["ps1"].failure == ""
    assert shape(result["ps1"].assignment) == expected(("x1", 1))
    assert result["ps2"].assignment is None
    assert result["ps2"].failure == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: nodeSelector: 2'
    )


def test_two_podsets_with_the_same_group_no_fit():
    """Go case: "find topology assignment for two podsets with the same group - no fit".
    Block b1 has no GPU; b2 holds the four workers but not the leader beside them. Both
    PodSets of the group carry the same reason and no assignment."""
    objects = [*tas_setup(levels=(BLOCK,)), block_node("b1", cpu="1", gpu="0"), block_node("b2", cpu="4", gpu="4")]
    result = place_all(
        objects,
        [
            pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP),
            pod_set("workers", count=4, cpu="1", extra={GPU: "1"}, required=BLOCK, group=GROUP),
        ],
    )
    reason = (
        'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; '
        'excluded: resource "example.com/gpu": 1'
    )
    assert set(result) == {"leader", "workers"}
    for name in ("leader", "workers"):
        assert result[name].assignment is None, name
        assert result[name].failure == reason, name


def test_two_podsets_with_the_same_group_leader_does_not_fit_anywhere():
    """Go case: "find topology assignment for two podsets with the same group - leader does
    not fit anywhere". The leader asks for 10 CPUs; each block has 4. Both PodSets of the
    group carry the same reason and no assignment."""
    objects = [*tas_setup(levels=(BLOCK,)), block_node("b1", cpu="4", gpu="4"), block_node("b2", cpu="4", gpu="4")]
    result = place_all(
        objects,
        [
            pod_set("leader", count=1, cpu="10", required=BLOCK, group=GROUP),
            pod_set("workers", count=4, cpu="1", extra={GPU: "1"}, required=BLOCK, group=GROUP),
        ],
    )
    reason = 'topology "default" allows to fit only 4 out of 4 pod(s)'
    assert set(result) == {"leader", "workers"}
    for name in ("leader", "workers"):
        assert result[name].assignment is None, name
        assert result[name].failure == reason, name


# ---------------------------------------------------------------- replacement on the nodes alone


REPLACEMENT_GATES = {"TASMultiLayerTopology": True, "TASCacheNodeMatchResults": True}


def replace_on_nodes(
    nodes: list[dict], pod_set_dict: dict, existing: list[tuple[str, int]], unhealthy: str,
    assumed_usage: dict[str, dict[str, int]] | None = None, **gate_values: bool,
) -> tuple[TopologyAssignment | None, str]:
    """The merged assignment (or failure reason) after replacing `unhealthy`, searched on a
    snapshot of the nodes alone: the workload's own pods are not counted, as in Kueue's test
    (which passes their usage as `assumed_usage` when it wants it counted)."""
    feature_gates = gates(**{**REPLACEMENT_GATES, **gate_values})
    snap = flavor_snapshot([*tas_setup(levels=LEVELS), *nodes], feature_gates=feature_gates)
    (request,) = tas_requests(workload("test-wl", pod_sets=[pod_set_dict]))
    current = TopologyAssignment.of((HOSTNAME,), [((n,), c) for n, c in existing])
    merged, _, reason = find_replacement_assignment(snap, request, current, unhealthy, gates=feature_gates,
                                                    assumed_usage=assumed_usage)
    return merged, reason


def host(name: str, *, rack: str, cpu: str, ready: str = "True") -> dict:
    return node(name, block="b1", rack=rack, cpu=cpu, pods="10", ready=ready)


def test_multi_layer_replacement_replace_unhealthy_node_in_incomplete_rack_slice():
    """Go case: "multi-layer replacement: replace unhealthy node in incomplete rack slice"
    (TASMultiLayerTopology and TASCacheNodeMatchResults on). Four pods, racks in slices of 2,
    one pod on each of x1..x4; x3 is NotReady. The replacement stays in r2, whose slice lost
    a pod, and BestFit takes x4 (1 CPU, free on a snapshot of the nodes alone) over x5."""
    nodes = [
        host("x1", rack="r1", cpu="1"),
        host("x2", rack="r1", cpu="1"),
        host("x3", rack="r2", cpu="1", ready="False"),
        host("x4", rack="r2", cpu="1"),
        host("x5", rack="r2", cpu="2"),
    ]
    main = pod_set(
        "main",
        count=4,
        cpu="1",
        raw_topology_request={
            "required": BLOCK,
            "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 2}],
        },
    )
    merged, reason = replace_on_nodes(nodes, main, [("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)], "x3")
    assert reason == ""
    assert shape(merged) == expected(("x1", 1), ("x2", 1), ("x4", 2))


def test_multi_layer_replacement_slice_size_2_prevents_scattered_single_pod_placement():
    """Go case: "multi-layer replacement: 2-layer: sliceSize=2 prevents scattered single-pod
    placement across hosts" (TASMultiLayerTopology and TASCacheNodeMatchResults on). Eight
    pods, racks in slices of 4, hosts in slices of 2, two pods on each of x1..x4; x3 is
    NotReady. Its two pods must go together to one host of r2; x4 and x5 have 1 CPU each, so
    the replacement fails. On a snapshot of the nodes alone only x1 and x2 (outside r2) are
    excluded."""
    nodes = [
        host("x1", rack="r1", cpu="2"),
        host("x2", rack="r1", cpu="2"),
        host("x3", rack="r2", cpu="2", ready="False"),
        host("x4", rack="r2", cpu="1"),
        host("x5", rack="r2", cpu="1"),
    ]
    main = pod_set(
        "main",
        count=8,
        cpu="1",
        raw_topology_request={
            "required": BLOCK,
            "podsetSliceRequiredTopologyConstraints": [
                {"topology": RACK, "size": 4},
                {"topology": HOSTNAME, "size": 2},
            ],
        },
    )
    merged, reason = replace_on_nodes(nodes, main, [("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2)], "x3")
    assert merged is None
    assert reason == (
        'topology "default" doesn\'t allow to fit any of 1 slice(s). Total nodes: 4; excluded: topologyDomain: 2'
    )
