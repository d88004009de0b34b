"""Cases of Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/tas_cache_test.go) that
the newest stored version of that test has and that neither the conformance placement suite nor
the other tests of this directory check.

They cover the leader's own node selector, required affinity and tolerations with
TASLeaderPodSetFeasibility on (and its node selector ignored with the gate off), a
podSetUpdate whose node selector conflicts with the PodSet's own, two cases Kueue runs with
TASNodeFeasibilityForAllLevels off (a gate the engine does not have: it always behaves as with
the gate off), and the TASPartialSlices cases: a PodSet whose count is not a multiple of its
slice size, with and without a leader. (With TASPartialSlices off, Kueue's newest cases drop
the trailing pods of such a PodSet, the behaviour reported as kueue#15277; the engine instead
keeps the PodSet waiting with a reason, and those cases are not carried.) Three node
replacements follow (a damaged slice repaired beside a partial one, the stale check a second
failed node trips with TASReplaceMultipleFailedNodes off, a whole assignment moved), and the
one case of Kueue's topology-spreading group that sets no rule (TASTopologySpreading is newer
than the engine).

Fresh placements are checked on the flavor snapshot with `find_topology_assignments_for_flavor`,
as Kueue's test calls `FindTopologyAssignmentsForFlavor`; the node replacement calls
`find_replacement_assignment` on a snapshot of the nodes alone, as Kueue's test builds its
snapshot from the nodes without the workload's own usage. Node names, hostname labels and
allocatable resources are those of the Go cases; the block and rack label keys are this
directory's. Every assertion is the assignment (levels and domains, in order) or the failure
reason the Go case expects, for every PodSet the Go case lists.
"""

from __future__ import annotations

import dataclasses

from scheduler.placement import PodSetPlacement, TASPodSetRequest, pod_set_updates_for
from scheduler.topology_assignment import find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    FLAVOR,
    HOSTNAME,
    LEVELS,
    RACK,
    flavor_snapshot,
    gates,
    node,
    parse,
    pod_set,
    taint,
    tas_requests,
    tas_setup,
    workload,
)
from .test_kueue_placement_extra import expected, shape
from .test_kueue_placement_more import host as b1_host
from .test_kueue_placement_more import place_all, replace_on_nodes

GPU = "example.com/gpu"
GROUP = "sameGroup"
TWO_LEVELS = (BLOCK, RACK)


def host(block: str, rack: str, name: str, *, cpu: str | None = None, gpu: str | None = None,
         memory: str | None = None, pods: str = "10", ready: str = "True", labels: dict | None = None,
         taints: list[dict] | None = None) -> dict:
    """Node `{block}-{rack}-{name}` with hostname label `name`, as the Go cases name them."""
    return node(f"{block}-{rack}-{name}", block=block, rack=rack, hostname=False,
                labels={HOSTNAME: name, **(labels or {})}, cpu=cpu, memory=memory, pods=pods,
                extra={GPU: gpu} if gpu is not None else None, ready=ready, taints=taints or ())


def cache_default_nodes() -> list[dict]:
    """`defaultNodes` of the Go test: b1/r1 x3; b1/r2 x5, x1, x6; b2/r1 x2 (node b2-r2-x2);
    b2/r2 x4 (2 CPU, 4Gi, 40 pods); the others 1 CPU, 1Gi, 10 pods."""
    return [
        host("b1", "r1", "x3", cpu="1", memory="1Gi"),
        host("b1", "r2", "x5", cpu="1", memory="1Gi"),
        host("b1", "r2", "x1", cpu="1", memory="1Gi"),
        host("b1", "r2", "x6", cpu="1", memory="1Gi"),
        node("b2-r2-x2", block="b2", rack="r1", hostname=False, labels={HOSTNAME: "x2"}, cpu="1", memory="1Gi",
             pods="10"),
        host("b2", "r2", "x4", cpu="2", memory="4Gi", pods="40"),
    ]


def gpu_pod_set(name: str, count: int, **topology) -> dict:
    """A PodSet whose pods request one `example.com/gpu` and no CPU."""
    return pod_set(name, count=count, cpu=None, extra={GPU: "1"}, **topology)


# ---------------------------------------------------------------- leader, podSetUpdates, feasibility


def test_grouped_leader_and_workers_the_leaders_own_node_selector_is_ignored_with_the_gate_off():
    """Go case: "grouped leader and workers; the leader's own nodeSelector is ignored with the
    gate off" (TASLeaderPodSetFeasibility off). No node carries `accelerator=true`, but the
    leader is placed with its workers on x1."""
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", cpu="5"), host("b1", "r1", "x2", cpu="5")]
    result = place_all(objects, [
        pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP, node_selector={"accelerator": "true"}),
        pod_set("workers", count=2, cpu="1", required=BLOCK, group=GROUP),
    ], TASLeaderPodSetFeasibility=False)
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x1", 2))


# Kueue's newest cases of the leader's own constraints run with the gate's default there (on);
# Kueue v0.19.5, which the engine follows, has it off by default, so they set it here.
NO_LEADER_NODE = 'topology "default" allows to fit only 10 out of 2 pod(s)'


def assert_group_not_placed(result: dict, reason: str) -> None:
    assert {name: (p.failure, p.assignment) for name, p in result.items()} == {
        "leader": (reason, None), "workers": (reason, None)}


def test_grouped_leader_and_workers_the_leaders_own_node_selector_matches_no_node():
    """Go case: "grouped leader and workers; the leader's own nodeSelector matches no node".
    The workers fit on either node; no domain has a node for the leader."""
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", cpu="5"), host("b1", "r1", "x2", cpu="5")]
    result = place_all(objects, [
        pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP, node_selector={"accelerator": "true"}),
        pod_set("workers", count=2, cpu="1", required=BLOCK, group=GROUP),
    ], TASLeaderPodSetFeasibility=True)
    assert_group_not_placed(result, NO_LEADER_NODE)


def test_grouped_leader_and_workers_the_leaders_own_required_affinity_matches_no_node():
    """Go case: "grouped leader and workers; the leader's own required affinity matches no node"."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["true"]}]}]}}}
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", cpu="5"), host("b1", "r1", "x2", cpu="5")]
    result = place_all(objects, [
        pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP, affinity=affinity),
        pod_set("workers", count=2, cpu="1", required=BLOCK, group=GROUP),
    ], TASLeaderPodSetFeasibility=True)
    assert_group_not_placed(result, NO_LEADER_NODE)


def test_grouped_leader_and_workers_the_leader_does_not_tolerate_a_taint_the_workers_tolerate():
    """Go case: "grouped leader and workers; the leader does not tolerate a taint the workers
    tolerate". Every node carries the taint."""
    gpu_taint = [taint("example.com/gpu", "present", "NoSchedule")]
    objects = [
        *tas_setup(levels=LEVELS),
        host("b1", "r1", "x1", cpu="5", taints=gpu_taint),
        host("b1", "r1", "x2", cpu="5", taints=gpu_taint),
    ]
    result = place_all(objects, [
        pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP),
        pod_set("workers", count=2, cpu="1", required=BLOCK, group=GROUP,
                tolerations=[{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    ], TASLeaderPodSetFeasibility=True)
    assert_group_not_placed(result, NO_LEADER_NODE)


def pool_nodes() -> list[dict]:
    """b1/r1: node gpu (pool=gpu) and node cpu (pool=cpu), 5 CPU and 10 pods each."""
    return [host("b1", "r1", pool, cpu="5", labels={"pool": pool}) for pool in ("gpu", "cpu")]


def pool_group(level: str) -> list[dict]:
    return [
        pod_set("leader", count=1, cpu="1", required=level, group=GROUP, node_selector={"pool": "cpu"}),
        pod_set("workers", count=2, cpu="1", required=level, group=GROUP, node_selector={"pool": "gpu"}),
    ]


def test_grouped_leader_and_workers_need_different_nodes_of_the_same_rack():
    """Go case: "grouped leader and workers; the leader and the workers need different nodes of
    the same rack". The topology stops at the rack, so the assignment names the rack and the
    kube-scheduler picks the nodes in it. (Kueue runs it with TASNodeFeasibilityForAllLevels,
    newer than the engine, which filters nodes only on a hostname level: both ways, no node
    filter keeps the group out of r1.)"""
    result = place_all([*tas_setup(levels=TWO_LEVELS), *pool_nodes()], pool_group(RACK),
                       TASLeaderPodSetFeasibility=True)
    assert result["leader"].failure == result["workers"].failure == ""
    assert shape(result["leader"].assignment) == expected((("b1", "r1"), 1), levels=TWO_LEVELS)
    assert shape(result["workers"].assignment) == expected((("b1", "r1"), 2), levels=TWO_LEVELS)


def test_grouped_leader_and_workers_with_the_hostname_level_each_gets_its_own_node():
    """Go case: "grouped leader and workers; with the hostname level each of them gets its own
    node": the leader the CPU node, the workers the GPU one."""
    result = place_all([*tas_setup(levels=LEVELS), *pool_nodes()], pool_group(BLOCK), TASLeaderPodSetFeasibility=True)
    assert result["leader"].failure == result["workers"].failure == ""
    assert shape(result["leader"].assignment) == expected(("cpu", 1))
    assert shape(result["workers"].assignment) == expected(("gpu", 2))


def test_the_resource_flavors_toleration_reaches_the_leader():
    """Case "ResourceFlavor toleration reaches the leader's simulated pod" of Kueue's
    TestScheduleForTASSchedulerLibrary (gate on): x1 is tainted, only the flavor tolerates the
    taint, and both PodSets of the group land on x1."""
    objects = [
        *tas_setup(levels=(HOSTNAME,), flavor_kwargs={"tolerations": [{"key": "example.com/gpu",
                                                                          "operator": "Exists"}]}),
        node("x1", cpu="3", pods="10", taints=[taint("example.com/gpu", "present", "NoSchedule")]),
    ]
    result = place_all(objects, [
        pod_set("leader", count=1, cpu="1", required=HOSTNAME, group="group"),
        pod_set("workers", count=2, cpu="1", required=HOSTNAME, group="group"),
    ], TASLeaderPodSetFeasibility=True)
    assert result["leader"].failure == result["workers"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert shape(result["workers"].assignment) == expected(("x1", 2))


def test_pod_set_update_conflicts_with_the_pod_sets_own_node_selector():
    """Go case: "podSetUpdate conflicts with the PodSet's own nodeSelector". The PodSet selects
    `example.com/pool=a`, a Ready admission check's podSetUpdate sets `example.com/pool=b`:
    merging them is a conflict, and the PodSet is not placed."""
    wl = workload("wl", pod_sets=[pod_set("worker", count=1, cpu="1", required=BLOCK,
                                          node_selector={"example.com/pool": "a"})])
    wl["status"] = {"admissionChecks": [{
        "name": "prov", "state": "Ready", "message": "",
        "podSetUpdates": [{"name": "worker", "nodeSelector": {"example.com/pool": "b"}}],
    }]}
    snap = flavor_snapshot([*tas_setup(levels=TWO_LEVELS), *cache_default_nodes()])
    (parsed,) = parse([wl]).workloads
    requests = [TASPodSetRequest(pod_set=ps, count=ps.count, single_pod_requests=ps.spec.requests, flavor=FLAVOR,
                                 **pod_set_updates_for(parsed, ps)) for ps in parsed.pod_sets]
    result = find_topology_assignments_for_flavor(snap, requests, gates=gates())
    assert result["worker"].assignment is None
    assert result["worker"].failure == (
        "invalid podSetUpdate for PodSet worker, error: invalid admission check PodSetUpdate: "
        "conflict for nodeSelector: conflict for key=example.com/pool, value1=a, value2=b"
    )


def test_rack_required_untolerated_taint_inside_the_rack_feature_gate_off():
    """Go case: "rack required; untolerated taint inside the rack; feature gate off"
    (TASNodeFeasibilityForAllLevels off). The rack is the lowest level, so the taint of
    n-tainted is not consulted and both pods are assigned to b1/r1."""
    objects = [
        *tas_setup(levels=TWO_LEVELS),
        node("n-ok", block="b1", rack="r1", cpu="1", pods="10"),
        node("n-tainted", block="b1", rack="r1", cpu="1", pods="10",
             taints=[taint("example.com/gpu", "present", "NoSchedule")]),
    ]
    result = place_all(objects, [pod_set("main", count=2, cpu="1", required=RACK)])
    assert result["main"].failure == ""
    assert shape(result["main"].assignment) == expected((("b1", "r1"), 2), levels=TWO_LEVELS)


def test_rack_required_pod_fits_in_the_racks_aggregated_capacity_but_on_no_single_node_feature_gate_off():
    """Go case: "rack required; Pod fits in the rack's aggregated capacity but on no single
    node; feature gate off" (TASNodeFeasibilityForAllLevels off). b1/r2 aggregates 3 CPU on
    nodes of 1 CPU; the pod of 2500m is assigned to it."""
    objects = [*tas_setup(levels=TWO_LEVELS), *cache_default_nodes()]
    result = place_all(objects, [pod_set("main", count=1, cpu="2500m", required=RACK)])
    assert result["main"].failure == ""
    assert shape(result["main"].assignment) == expected((("b1", "r2"), 1), levels=TWO_LEVELS)


# ---------------------------------------------------------------- partial slices with a leader


def leader_and_workers(workers: int, slice_size: int, *, level: str, slice_level: str) -> list[dict]:
    """A leader (slice level named, no slice size) and `workers` in slices of `slice_size`,
    both preferring `level`, one GPU per pod."""
    return [
        gpu_pod_set("leader", 1, preferred=level, slice_topology=slice_level, group=GROUP),
        gpu_pod_set("workers", workers, preferred=level, slice_topology=slice_level, slice_size=slice_size,
                    group=GROUP),
    ]


def test_partial_slice_with_a_leader_the_odd_worker_gets_a_second_domain():
    """Go case: "partial slice with a leader: the odd worker gets a second domain"
    (TASPartialSlices on). x1 and x2 hold 3 GPUs each; 3 workers in slices of 2 on hosts are
    one whole slice and one trailing pod."""
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", gpu="3"), host("b1", "r1", "x2", gpu="3")]
    result = place_all(objects, leader_and_workers(3, 2, level=RACK, slice_level=HOSTNAME), TASPartialSlices=True)
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x1", 2), ("x2", 1))


def test_partial_slice_with_a_leader_the_leader_gives_way_to_the_partial_slice():
    """Go case: "partial slice with a leader: the leader gives way to the partial slice"
    (TASPartialSlices on). r1 holds x1 (4 GPUs) and x2 (3), r2 holds x3 (2); 7 workers in slices
    of 4 on racks. Only r1 fits the whole slice and the 3 trailing pods, so the leader takes r2."""
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", gpu="4"), host("b1", "r1", "x2", gpu="3"),
               host("b1", "r2", "x3", gpu="2")]
    result = place_all(objects, leader_and_workers(7, 4, level=BLOCK, slice_level=RACK), TASPartialSlices=True)
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x3", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x1", 4), ("x2", 3))


def test_partial_slice_with_a_leader_the_group_fits_a_topology_with_no_spare_room():
    """Go case: "partial slice with a leader: the group fits a topology with no spare room"
    (TASPartialSlices on). x1 and x2 hold 2 GPUs each: the leader, one whole slice of 2 and the
    trailing worker fill them exactly; the whole slice (x2) comes first."""
    objects = [*tas_setup(levels=LEVELS), host("b1", "r1", "x1", gpu="2"), host("b1", "r1", "x2", gpu="2")]
    result = place_all(objects, leader_and_workers(3, 2, level=RACK, slice_level=HOSTNAME), TASPartialSlices=True)
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x2", 2), ("x1", 1))


# ---------------------------------------------------------------- partial slices of one PodSet


def place_worker(nodes: list[dict], count: int, slice_size: int, *, slice_level: str, **topology) -> PodSetPlacement:
    """One GPU PodSet `worker` of `count` pods in slices of `slice_size` at `slice_level`,
    placed with TASPartialSlices on."""
    objects = [*tas_setup(levels=LEVELS), *nodes]
    ps = gpu_pod_set("worker", count, slice_topology=slice_level, slice_size=slice_size, **topology)
    return place_all(objects, [ps], TASPartialSlices=True)["worker"]


def test_partial_slice_a_rack_with_no_room_for_the_partial_slice_is_skipped():
    """Go case: "partial slice: a rack with no room for the partial slice is skipped". r1 (x1,
    x2: 2 GPUs each) holds the two whole slices of 2 and nothing more; r2 (x3: 6) takes all 5."""
    nodes = [host("b1", "r1", "x1", gpu="2"), host("b1", "r1", "x2", gpu="2"), host("b1", "r2", "x3", gpu="6")]
    result = place_worker(nodes, 5, 2, slice_level=HOSTNAME, required=RACK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x3", 5))


def test_partial_slice_descent_from_block_to_rack_prefers_the_rack_that_also_holds_the_partial_slice():
    """Go case: "partial slice: descent from block to rack prefers the rack that also holds the
    partial slice". r1 (x1: 4) and r2 (x2: 4, x3: 2) each hold one whole slice of 4; only r2
    also holds the 2 trailing pods."""
    nodes = [host("b1", "r1", "x1", gpu="4"), host("b1", "r2", "x2", gpu="4"), host("b1", "r2", "x3", gpu="2")]
    result = place_worker(nodes, 6, 4, slice_level=HOSTNAME, required=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x2", 4), ("x3", 2))


def test_partial_slice_descent_uses_the_tighter_whole_slice_closing_rack_when_an_earlier_rack_hosts_the_partial_slice():
    """Go case: "partial slice: descent from block to rack uses the tighter whole-slice closing
    rack when an earlier rack already hosts the partial slice". 25 pods in slices of 8 on
    racks: r1 (x1: 8, x2: 9) takes 2 slices and the trailing pod, the third slice goes to r2
    (x3: 8) rather than r3 (x4: 15), and r1 is moved last. Nodes allow 20 pods."""
    nodes = [host("b1", "r1", "x1", gpu="8", pods="20"), host("b1", "r1", "x2", gpu="9", pods="20"),
             host("b1", "r2", "x3", gpu="8", pods="20"), host("b1", "r3", "x4", gpu="15", pods="20")]
    result = place_worker(nodes, 25, 8, slice_level=RACK, required=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x3", 8), ("x1", 8), ("x2", 9))


def test_partial_slice_best_fit_prefers_a_tighter_whole_slice_block_holding_as_many_slices_with_tail():
    """Go case: "partial slice: best fit prefers a tighter whole-slice block when both hold the
    same number of slices with tail". b1 has three racks of 4 GPUs, b2 two of 4 and one of 2;
    both hold 2 whole slices of 4 with the 2 trailing pods, and b2 is the tighter."""
    nodes = [host("b1", "r1", "x1", gpu="4"), host("b1", "r2", "x2", gpu="4"), host("b1", "r3", "x3", gpu="4"),
             host("b2", "r4", "x4", gpu="4"), host("b2", "r5", "x5", gpu="4"), host("b2", "r6", "x6", gpu="2")]
    result = place_worker(nodes, 10, 4, slice_level=RACK, required=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x4", 4), ("x5", 4), ("x6", 2))


def test_partial_slice_the_block_holding_the_partial_slice_is_preferred_over_an_equally_large_one():
    """Go case: "partial slice: the block holding the partial slice is preferred over an equally
    large one". b1 (racks of 4, 4, 1, 1 GPUs) and b2 (4, 4, 2) both hold 10 pods and 2 whole
    slices of 4; only b2 has a rack for the 2 trailing pods."""
    nodes = [host("b1", "r1", "x1", gpu="4"), host("b1", "r2", "x2", gpu="4"), host("b1", "r3", "x3", gpu="1"),
             host("b1", "r4", "x4", gpu="1"), host("b2", "r5", "x5", gpu="4"), host("b2", "r6", "x6", gpu="4"),
             host("b2", "r7", "x7", gpu="2")]
    result = place_worker(nodes, 10, 4, slice_level=RACK, required=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x5", 4), ("x6", 4), ("x7", 2))


def test_partial_slice_a_second_block_is_opened_for_the_partial_slice_alone():
    """Go case: "partial slice: a second block is opened for the partial slice alone". b1 (r1,
    r2: 4 GPUs each) holds the two whole slices of 4; the 2 trailing pods go to b2 (r3: 2)."""
    nodes = [host("b1", "r1", "x1", gpu="4"), host("b1", "r2", "x2", gpu="4"), host("b2", "r3", "x3", gpu="2")]
    result = place_worker(nodes, 10, 4, slice_level=RACK, preferred=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x1", 4), ("x2", 4), ("x3", 2))


def test_partial_slice_a_block_passed_over_by_best_fit_still_takes_the_partial_slice():
    """Go case: "partial slice: a block passed over by best fit still takes the partial slice".
    9 pods in slices of 2 on racks: b2 (x2: 4) and b3 (x3: 4, x4: 2) take the four whole slices,
    and the trailing pod goes to b1 (x1: 2)."""
    nodes = [host("b1", "r1", "x1", gpu="2"), host("b2", "r2", "x2", gpu="4"), host("b3", "r3", "x3", gpu="4"),
             host("b3", "r4", "x4", gpu="2")]
    result = place_worker(nodes, 9, 2, slice_level=RACK, preferred=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x2", 4), ("x3", 4), ("x1", 1))


def test_partial_slice_a_pod_set_shorter_than_a_slice_is_placed_as_one_partial_slice():
    """Go case: "partial slice: a PodSet shorter than a slice is placed as one partial slice".
    3 pods in slices of 4 on hosts, rack required; x1 holds 3 GPUs. The engine's parser refuses
    a slice size above the PodSet's count, as Kueue's job webhooks do; Kueue's test hands the
    request to the placement directly, so here the PodSet is read with a slice size of 3 and
    its request is then given the slice size 4."""
    feature_gates = gates(TASPartialSlices=True)
    snap = flavor_snapshot([*tas_setup(levels=LEVELS), host("b1", "r1", "x1", gpu="3")], feature_gates=feature_gates)
    (request,) = tas_requests(workload("wl", pod_sets=[
        gpu_pod_set("worker", 3, required=RACK, slice_topology=HOSTNAME, slice_size=3)]))
    pod_set_4 = dataclasses.replace(
        request.pod_set, topology_request=dataclasses.replace(request.pod_set.topology_request, slice_size=4))
    result = find_topology_assignments_for_flavor(
        snap, [dataclasses.replace(request, pod_set=pod_set_4)], gates=feature_gates)["worker"]
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x1", 3))


def test_partial_slice_the_partial_slice_is_moved_last_when_the_slice_level_is_above_the_hostname():
    """Go case: "partial slice: the partial slice is moved last when the slice level is above
    the hostname". 6 pods in slices of 4 on racks: the whole slice fills r2 (x2, x3: 2 GPUs
    each), the 2 trailing pods go to r1 (x1: 2), and r2's two entries come first."""
    nodes = [host("b1", "r1", "x1", gpu="2"), host("b1", "r2", "x2", gpu="2"), host("b1", "r2", "x3", gpu="2")]
    result = place_worker(nodes, 6, 4, slice_level=RACK, required=BLOCK)
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x2", 2), ("x3", 2), ("x1", 2))


def cpu_rack() -> list[dict]:
    """r1 of b1 with x1 (8 CPU), x2 (4) and x3 (4)."""
    return [host("b1", "r1", "x1", cpu="8"), host("b1", "r1", "x2", cpu="4"), host("b1", "r1", "x3", cpu="4")]


def test_partial_slice_the_trailing_pods_form_a_partial_last_slice():
    """Go case: "partial slice: the trailing pods form a partial last slice" (TASPartialSlices
    on). 10 pods of 1 CPU in slices of 4 on hosts, block preferred."""
    result = place_all([*tas_setup(levels=LEVELS), *cpu_rack()],
                       [pod_set("main", count=10, cpu="1", preferred=BLOCK, slice_topology=HOSTNAME, slice_size=4)],
                       TASPartialSlices=True)["main"]
    assert result.failure == ""
    assert shape(result.assignment) == expected(("x1", 8), ("x2", 2))




# ---------------------------------------------------------------- replacement, plain placement


def test_partial_slice_replacement_the_damaged_slice_is_repaired_not_the_partial_one():
    """Go case: "partial slice replacement: the damaged slice is repaired, not the partial one"
    (TASPartialSlices on). Ten pods in slices of four per rack: r1, r2 hold four each, r3 the
    partial slice of two. x1 (r1) is NotReady; the workload's own pods are counted on x1..x5
    (Kueue's aggregated domain usages). Only r1 lost pods, so its spare x6 takes them, not
    r3's x7; the partial slice (x5) stays last."""
    nodes = [
        b1_host("x1", rack="r1", cpu="2", ready="False"),
        b1_host("x2", rack="r1", cpu="2"),
        b1_host("x6", rack="r1", cpu="2"),
        b1_host("x3", rack="r2", cpu="2"),
        b1_host("x4", rack="r2", cpu="2"),
        b1_host("x5", rack="r3", cpu="2"),
        b1_host("x7", rack="r3", cpu="2"),
    ]
    main = pod_set("main", count=10, cpu="1", required=BLOCK, slice_topology=RACK, slice_size=4)
    own = {name: {"cpu": 2000, "pods": 2} for name in ("x1", "x2", "x3", "x4", "x5")}
    merged, reason = replace_on_nodes(nodes, main, [("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2), ("x5", 2)], "x1",
                                      assumed_usage=own, TASPartialSlices=True)
    assert reason == ""
    assert shape(merged) == expected(("x2", 2), ("x6", 2), ("x3", 2), ("x4", 2), ("x5", 2))


def test_multi_node_replacement_missing_tail_still_fails_the_stale_check_when_gate_is_disabled():
    """Go case: "multi-node replacement: missing tail still fails the stale check when gate is
    disabled" (TASReplaceMultipleFailedNodes off, the behaviour of Kueue v0.19): x1 and x2
    are unhealthy and gone; the first is replaced, and the second, still in the assignment,
    makes it stale."""
    nodes = [b1_host("x5", rack="r1", cpu="1"), b1_host("x4", rack="r2", cpu="1")]
    main = pod_set("main", count=3, cpu="1", required=RACK)
    merged, reason = replace_on_nodes(nodes, main, [("x1", 1), ("x2", 1), ("x5", 1)], "x1")
    assert merged is None
    assert reason == ("Cannot replace the node, because the existing topologyAssignment is invalid, as it "
                      "contains the stale domain x2")


def test_replacement_required_rack_allows_moving_the_entire_assignment():
    """Go case: "multi-node replacement: required rack allows moving the entire assignment"
    (its one unhealthy node is the whole assignment, so no other domain binds the rack, as in
    v0.19's single-node replacement): the pod goes to x4 in another rack."""
    main = pod_set("main", count=1, cpu="1", required=RACK)
    merged, reason = replace_on_nodes([b1_host("x4", rack="r2", cpu="1")], main, [("x1", 1)], "x1")
    assert reason == ""
    assert shape(merged) == expected(("x4", 1))


def test_topology_spreading_no_rules_plain_best_fit_placement():
    """Go case: "topology spreading: no rules, plain best-fit placement": three blocks of two
    racks of one node of 2 CPU; two pods of 1 CPU with the block required go to x1."""
    nodes = [host(b, r, h, cpu="2")
             for b, r, h in (("b1", "r1", "x1"), ("b1", "r2", "x2"), ("b2", "r1", "x3"), ("b2", "r2", "x4"),
                             ("b3", "r1", "x5"), ("b3", "r2", "x6"))]
    result = place_all([*tas_setup(levels=LEVELS), *nodes], [pod_set("main", count=2, cpu="1", required=BLOCK)])
    assert result["main"].failure == ""
    assert shape(result["main"].assignment) == expected(("x1", 2))
