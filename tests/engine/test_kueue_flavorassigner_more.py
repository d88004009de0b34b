"""TAS cases of Kueue's flavor assigner and TAS flavor snapshot unit tests that the engine was
not yet checked against:

* pkg/scheduler/flavorassigner/flavorassigner_test.go: TestIsNoFitDueToCapacityAndLimits (its
  TAS cases), TestAssignFlavors_LeaderWorkerSetTASFlavor,
  TestWorkloadsTopologyRequests_ErrorBranches, TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped,
  TestWorkloadsTopologyRequests_ElasticJobsValidation and
  TestWorkloadsTopologyRequests_RequiredTopologyRejectedForElasticWorkloadSlices;
* pkg/scheduler/flavorassigner/tas_flavorassigner_residual_test.go:
  TestFindTopologyAssignmentsReplacesSliceUsage;
* pkg/cache/scheduler/tas_flavor_snapshot_test.go: TestMergeTopologyAssignments, TestHasLevel,
  TestCountPodsInAssignment, TestComputeAssumedUsageFromAssignment, TestAddAssumedUsage and
  TestTruncateAssignment.

The flavor assigner tests call Kueue's flavor assigner (or its TAS request builder) on a
hand-made ClusterQueue snapshot. The engine assigns flavors inside a scheduling cycle, so each
of those cases builds the same cluster as objects, runs one cycle and checks the outcome the Go
assertion stands for: the reason of the QuotaReserved condition for Kueue's NoFitReason (the
engine keeps no per-flavor reasons, so the Go test's per-flavor reasons are not checked), the
flavors of each PodSet, and, for an error Kueue records on a PodSet, the workload not admitted
with the message Kueue builds from that error ("failed to assign flavors to pod set <name>:
<error>"). The snapshot tests check the engine's functions of the same contract directly
(`merge_assignments`, `has_level`, `TopologyAssignment.pod_count`, `add_assumed_usage`,
`truncate_assignment`).

Cases whose objects Kueue's validation refuses (a PodSet group of three PodSets, a group member
without a required or preferred level) are not transcribed: the engine refuses them on input as
Kueue's job webhooks do. The checks of the Go tests that a snapshot's capacity and quota are
left as they were have no counterpart outside the functions and are not made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from scheduler.assignment import DomainAssignment, TopologyAssignment
from scheduler.model import WORKLOAD_SLICE_REPLACEMENT_FOR, TopologyRequest
from scheduler.results import WorkloadResult
from scheduler.topology_assignment import add_assumed_usage, has_level, merge_assignments, truncate_assignment

from .factories import (
    HOSTNAME,
    NAMESPACE,
    V1BETA2,
    admitted,
    domains,
    domains_json,
    flavor_snapshot,
    gates,
    local_queue,
    node,
    pod,
    pod_set,
    resource_flavor,
    result_of,
    run,
    taint,
    topology,
    workload,
)

ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
GPU_A = "example.com/gpu-a"
GPU_B = "example.com/gpu-b"


def flavor_queue(name: str, groups: Sequence[Sequence[tuple[str, Mapping[str, str]]]], *,
                 preemption: Mapping[str, str] | None = None) -> dict:
    """A ClusterQueue with one resource group per entry of `groups`, each a list of
    (flavor, {resource: nominal quota})."""
    resource_groups = []
    for group in groups:
        covered: list[str] = []
        flavors = []
        for flavor, quotas in group:
            resources = []
            for res, nominal in quotas.items():
                resources.append({"name": res, "nominalQuota": nominal})
                if res not in covered:
                    covered.append(res)
            flavors.append({"name": flavor, "resources": resources})
        resource_groups.append({"coveredResources": covered, "flavors": flavors})
    spec: dict = {"namespaceSelector": {}, "resourceGroups": resource_groups}
    if preemption is not None:
        spec["preemption"] = dict(preemption)
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def quota_reserved(w: WorkloadResult) -> tuple[str, str] | None:
    cond = next((c for c in w.conditions if c.type == "QuotaReserved"), None)
    return (cond.status, cond.reason) if cond is not None else None


def flavors_of(w: WorkloadResult) -> dict[str, dict[str, str]]:
    return {ps.name: dict(ps.flavors) for ps in w.pod_sets}


# ---------------------------------------------------------------- TestIsNoFitDueToCapacityAndLimits


def no_fit_flavors() -> list[dict]:
    """flavor-a (nodes type=a), flavor-b (tainted key=val:NoSchedule), flavor-tas (topology
    topology-tas, whose only level is `rack`), and that topology. There are no nodes."""
    return [
        resource_flavor("flavor-a", topology_name=None, node_labels={"type": "a"}),
        resource_flavor("flavor-b", topology_name=None, node_taints=[taint("key", "val")]),
        resource_flavor("flavor-tas", topology_name="topology-tas"),
        topology("topology-tas", ("rack",)),
    ]


def plain_cq() -> dict:
    """The Go test's `cq`: flavor-a and flavor-b, 2 CPUs each. The Go test also gives them a
    borrowing limit, which Kueue's API refuses on a ClusterQueue in no cohort and which borrows
    nothing there: it is left out."""
    return flavor_queue("cq", [[("flavor-a", {"cpu": "2"}), ("flavor-b", {"cpu": "2"})]])


def tas_cq(preemption: Mapping[str, str] | None = None) -> dict:
    """The Go test's `cq-tas`: flavor-a, flavor-b and flavor-tas, 2 CPUs each (its borrowing
    limits left out, as for `cq`)."""
    return flavor_queue("cq-tas", [[("flavor-a", {"cpu": "2"}), ("flavor-b", {"cpu": "2"}),
                                    ("flavor-tas", {"cpu": "2"})]], preemption=preemption)


def no_fit_reason(cq: dict, wl: dict, *extra: dict, **gate_values: bool) -> WorkloadResult:
    """`wl` (queue lq) after one cycle of ClusterQueue `cq` with the flavors above."""
    objects = [*no_fit_flavors(), cq, local_queue("lq", cluster_queue_name=cq["metadata"]["name"]), *extra, wl]
    return result_of(run(objects, cycles=1, feature_gates=gates(**gate_values)), wl["metadata"]["name"])


def test_is_no_fit_tas_not_supported():
    """TestIsNoFitDueToCapacityAndLimits "TAS not supported": a PodSet requiring a rack in a
    ClusterQueue with no TAS flavor matches no flavor (NoMatchingFlavor)."""
    got = no_fit_reason(plain_cq(), workload("wl", cpu="1", required="rack"))
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "NoMatchingFlavor")


def test_is_no_fit_tas_level_not_supported():
    """TestIsNoFitDueToCapacityAndLimits "TAS level not supported": the TAS flavor's topology
    has no `block` level, the other flavors no topology (NoMatchingFlavor)."""
    got = no_fit_reason(tas_cq(), workload("wl", cpu="1", required="block"))
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "NoMatchingFlavor")


def test_is_no_fit_tas_only_flavor_mismatch():
    """TestIsNoFitDueToCapacityAndLimits "TAS only flavor mismatch": a PodSet without topology
    request selecting type=wrong: flavor-a's label differs, flavor-b's taint is not tolerated and
    flavor-tas serves only TAS PodSets (NoMatchingFlavor)."""
    got = no_fit_reason(tas_cq(), workload("wl", cpu="1", node_selector={"type": "wrong"}))
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "NoMatchingFlavor")


def test_is_no_fit_tas_placement_fails():
    """TestIsNoFitDueToCapacityAndLimits "tas placement fails": quota has room on flavor-tas but
    its topology has no node to place the pod on (TopologyPlacementFailed)."""
    got = no_fit_reason(tas_cq(), workload("wl", cpu="1", required="rack"))
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "TopologyPlacementFailed")


def test_is_no_fit_tas_placement_fails_cohort_has_no_capacity():
    """TestIsNoFitDueToCapacityAndLimits "tas placement fails, cohort has no capacity": 3 CPUs
    exceed flavor-tas's maximum of 2 before the topology is looked at (ExceedsMaxQuota)."""
    got = no_fit_reason(tas_cq(), workload("wl", cpu="3", required="rack"))
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "ExceedsMaxQuota")


def test_is_no_fit_tas_placement_fails_but_queue_has_available_capacity_waiting_for_preemption():
    """TestIsNoFitDueToCapacityAndLimits "tas placement fails, but queue has available capacity
    (waiting for preemption)", with ConcurrentAdmission on as in the Go case.

    flavor-tas's 2 CPUs are used (the Go case adds the usage to the snapshot; here a running
    workload without topology request holds them), so the PodSet could only get them by
    preemption; the Go test's oracle says preemption is possible, so the ClusterQueue here lets
    a higher priority preempt the lower one in it. No placement exists on the topology even with
    every workload gone (it has no node): TopologyPlacementFailed."""
    user = admitted(workload("user", cpu="2", priority=0), assignments={}, cluster_queue_name="cq-tas",
                    flavor="flavor-tas")
    got = no_fit_reason(tas_cq({"withinClusterQueue": "LowerPriority"}),
                        workload("wl", cpu="1", required="rack", priority=10), user, ConcurrentAdmission=True)
    assert got.status == "Inadmissible"
    assert quota_reserved(got) == ("False", "TopologyPlacementFailed")


# ---------------------------------------------------------------- TestAssignFlavors_LeaderWorkerSetTASFlavor


def lws_cluster(cq: dict) -> list[dict]:
    """Flavors tas-a and tas-b (hostname topologies tas-topo-a and tas-topo-b) and non-tas; nodes
    tas-node-a and tas-node-b with 4 of each GPU and room for 32 pods; ClusterQueue `cq`."""
    return [
        topology("tas-topo-a", (HOSTNAME,)), topology("tas-topo-b", (HOSTNAME,)),
        resource_flavor("tas-a", topology_name="tas-topo-a"), resource_flavor("tas-b", topology_name="tas-topo-b"),
        resource_flavor("non-tas", topology_name=None),
        *(node(name, cpu=None, pods="32", extra={GPU_A: "4", GPU_B: "4"}) for name in ("tas-node-a", "tas-node-b")),
        cq, local_queue("lq", cluster_queue_name="test-clusterqueue"),
    ]


def lws_queue(*groups: tuple[str, str, str]) -> dict:
    """test-clusterqueue with one resource group per (flavor, resource, nominal quota)."""
    return flavor_queue("test-clusterqueue", [[(flavor, {res: quota})] for flavor, res, quota in groups])


def gpu_pod_set(name: str, gpu: str | None, *, group: str | None, required: str | None = HOSTNAME) -> dict:
    """One pod requesting one `gpu` (nothing when None)."""
    return pod_set(name, count=1, cpu=None, extra={gpu: "1"} if gpu else None, required=required, group=group)


def lws_result(cq: dict, *pod_sets: dict) -> WorkloadResult:
    objects = [*lws_cluster(cq), workload("wl", pod_sets=list(pod_sets))]
    return result_of(run(objects, cycles=1), "wl")


def test_lws_leader_without_a_managed_request_infers_the_groups_tas_flavor():
    """TestAssignFlavors_LeaderWorkerSetTASFlavor "leader without a managed request infers the
    group's TAS flavor": the leader requests nothing; it takes its group's flavor tas-a."""
    got = lws_result(lws_queue(("tas-a", GPU_A, "4"), ("tas-b", "memory", "8Gi")),
                     gpu_pod_set("leader", None, group="group1"), gpu_pod_set("worker", GPU_A, group="group1"))
    assert got.status == "Admitted"
    assert flavors_of(got) == {"leader": {GPU_A: "tas-a"}, "worker": {GPU_A: "tas-a"}}


def test_lws_leader_without_a_group_is_rejected():
    """TestAssignFlavors_LeaderWorkerSetTASFlavor "leader without a group is rejected
    (ClusterQueue-wide fallback is not supported)": the leader, requesting nothing and in no
    group, gets no flavor, so no TAS flavor (ErrNoTASFlavorAssigned)."""
    got = lws_result(lws_queue(("tas-a", GPU_A, "4")),
                     gpu_pod_set("leader", None, group=None), gpu_pod_set("worker", GPU_A, group=None))
    assert got.status == "Inadmissible"
    assert got.message == "failed to assign flavors to pod set leader: no TAS flavor assigned"
    assert flavors_of(got) == {"leader": {}, "worker": {GPU_A: "tas-a"}}


def test_lws_multiple_groups_leaders_infer_flavors_from_their_own_groups():
    """TestAssignFlavors_LeaderWorkerSetTASFlavor "multiple groups: leaders infer flavors from
    their own groups"."""
    got = lws_result(lws_queue(("tas-a", GPU_A, "4"), ("tas-b", GPU_B, "4")),
                     gpu_pod_set("leader1", None, group="group1"), gpu_pod_set("worker1", GPU_A, group="group1"),
                     gpu_pod_set("leader2", None, group="group2"), gpu_pod_set("worker2", GPU_B, group="group2"))
    assert got.status == "Admitted"
    assert flavors_of(got) == {"leader1": {GPU_A: "tas-a"}, "worker1": {GPU_A: "tas-a"},
                               "leader2": {GPU_B: "tas-b"}, "worker2": {GPU_B: "tas-b"}}


# ---------------------------------------------------------------- TestWorkloadsTopologyRequests_ErrorBranches


def test_error_branches_workload_requires_topology_but_there_is_no_tas_cache_information():
    """TestWorkloadsTopologyRequests_ErrorBranches "workload requires Topology, but there is no
    TAS cache information" (ErrNoTASCacheInformation; NoFit).

    The Go case gives the PodSet a CPU on a flavor without topology, which a cycle never does (a
    PodSet requiring a topology skips such a flavor for the resources it requests). The same
    error is reached by a PodSet that requests nothing covered by the ClusterQueue, whose only
    flavor has no topology: the flavor is not refused, and the ClusterQueue has no TAS flavor."""
    objects = [resource_flavor("default", topology_name=None), flavor_queue("cq", [[("default", {"cpu": "4"})]]),
               local_queue("lq", cluster_queue_name="cq"), node("n1"),
               workload("wl", pod_sets=[pod_set("main", count=1, cpu=None, required=HOSTNAME)])]
    got = result_of(run(objects, cycles=1), "wl")
    assert got.status == "Inadmissible"
    assert got.message == ("failed to assign flavors to pod set main: "
                           "workload requires Topology, but there is no TAS cache information")


def test_error_branches_workload_requires_topology_but_there_is_no_tas_flavor_assigned():
    """TestWorkloadsTopologyRequests_ErrorBranches "workload requires Topology, but there is no
    TAS flavor assigned" (ErrNoTASFlavorAssigned; NoFit).

    The Go case assigns a flavor missing from the TAS cache, which a cycle never does. The same
    error is reached by a PodSet that requests nothing in a ClusterQueue of TAS flavors: it gets
    no flavor at all, so no TAS flavor."""
    objects = [topology("hosts", (HOSTNAME,)), resource_flavor("tas", topology_name="hosts"),
               flavor_queue("cq", [[("tas", {"cpu": "4"})]]), local_queue("lq", cluster_queue_name="cq"), node("n1"),
               workload("wl", pod_sets=[pod_set("main", count=1, cpu=None, required=HOSTNAME)])]
    got = result_of(run(objects, cycles=1), "wl")
    assert got.status == "Inadmissible"
    assert got.message == "failed to assign flavors to pod set main: no TAS flavor assigned"


# ---------------------------------------------------------------- TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped


def zero_count_result(pod_sets: Sequence[tuple[str, int]], completed: Mapping[str, int]) -> WorkloadResult:
    """A pending workload of PodSets (name, count) of one CPU per pod requiring a host, with
    `completed` pods per PodSet in status.reclaimablePods (a PodSet all of whose pods completed
    is assigned a count of 0), after one cycle on a hostname topology of one 8-CPU node."""
    wl = workload("wl", pod_sets=[pod_set(name, count=count, cpu="1", required=HOSTNAME) for name, count in pod_sets])
    wl["status"] = {"reclaimablePods": [{"name": name, "count": c} for name, c in completed.items()]}
    objects = [topology("hosts", (HOSTNAME,)), resource_flavor("tas", topology_name="hosts"),
               flavor_queue("cq", [[("tas", {"cpu": "10"})]]), local_queue("lq", cluster_queue_name="cq"),
               node("x1", cpu="8"), wl]
    return result_of(run(objects, cycles=1), "wl")


def placed_pod_sets(w: WorkloadResult) -> list[str]:
    """The PodSets of an admitted workload that got a TopologyAssignment."""
    assert w.status == "Admitted"
    return sorted(ps.name for ps in w.pod_sets if ps.assignment is not None)


def test_zero_count_pod_set_skipped_mixed_one_completed_one_running():
    """TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped "mixed: 1 completed (count=0) + 1
    running (count=1)": only the running PodSet is placed."""
    got = zero_count_result([("completed-job", 1), ("running-job", 1)], {"completed-job": 1})
    assert placed_pod_sets(got) == ["running-job"]


def test_zero_count_pod_set_skipped_all_completed_no_tas_requests():
    """TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped "all completed (count=0): no TAS
    requests"."""
    got = zero_count_result([("sampler-0", 1), ("controller", 1)], {"sampler-0": 1, "controller": 1})
    assert placed_pod_sets(got) == []


def test_zero_count_pod_set_skipped_three_pod_sets_two_completed_one_running():
    """TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped "3 podSets: 2 completed + 1
    running"."""
    got = zero_count_result([("sampler-0", 1), ("sampler-1", 1), ("controller", 1)],
                            {"sampler-0": 1, "controller": 1})
    assert placed_pod_sets(got) == ["sampler-1"]


def test_zero_count_pod_set_skipped_all_running_all_get_tas_requests():
    """TestWorkloadsTopologyRequests_ZeroCountPodSetSkipped "all running: all get TAS
    requests"."""
    got = zero_count_result([("worker-0", 2), ("worker-1", 3)], {})
    assert placed_pod_sets(got) == ["worker-0", "worker-1"]


# ---------------------------------------------------------------- elastic workloads (ElasticJobsViaWorkloadSlices)

ELASTIC = {"ElasticJobsViaWorkloadSlices": True, "ElasticJobsViaWorkloadSlicesWithTAS": True}


def elastic_cluster() -> list[dict]:
    """A hostname topology, TAS flavor tas with two 4-CPU nodes, ClusterQueue cq (100 CPUs)."""
    return [topology("tas-topology", (HOSTNAME,)), resource_flavor("tas", topology_name="tas-topology"),
            flavor_queue("cq", [[("tas", {"cpu": "100"})]]), local_queue("lq", cluster_queue_name="cq"),
            node("n1", cpu="4"), node("n2", cpu="4")]


def elastic_workload(name: str, *pod_sets: dict, replaces: str | None = None, elastic: bool = True,
                     created: float = 0) -> dict:
    annotations = {ELASTIC_JOB: "true"} if elastic else {}
    if replaces is not None:
        annotations[WORKLOAD_SLICE_REPLACEMENT_FOR] = f"{NAMESPACE}/{replaces}"
    return workload(name, pod_sets=list(pod_sets), annotations=annotations, created=created)


def previous_slice(*pod_sets: dict) -> dict:
    """The admitted slice old (elastic), each PodSet's pods on n1."""
    return admitted(elastic_workload("old", *pod_sets, created=-10),
                    assignments={ps["name"]: domains_json([HOSTNAME], [("n1", ps["count"])]) for ps in pod_sets},
                    flavor="tas")


def elastic_result(*objects: dict, name: str = "new") -> WorkloadResult:
    return result_of(run([*elastic_cluster(), *objects], cycles=1, feature_gates=gates(**ELASTIC)), name)


def test_elastic_validation_required_topology_is_rejected_with_elastic_jobs_via_workload_slices():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "required topology is rejected with
    ElasticJobsViaWorkloadSlices": the new slice of an elastic workload, replacing a slice with a
    TopologyAssignment, requires a host (ErrElasticRequiredTopologyNotSupported; NoFit)."""
    old = previous_slice(pod_set(count=1, required=HOSTNAME))
    got = elastic_result(old, elastic_workload("new", pod_set(count=2, required=HOSTNAME), replaces="old"))
    assert got.status == "Inadmissible"
    assert got.message == ("failed to assign flavors to pod set main: "
                           "required topology is not supported with ElasticJobsViaWorkloadSlices")


def test_elastic_validation_preferred_topology_is_rejected_with_elastic_jobs_via_workload_slices():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "preferred topology is rejected with
    ElasticJobsViaWorkloadSlices" (ErrElasticPreferredTopologyNotSupported; NoFit)."""
    old = previous_slice(pod_set(count=1, preferred=HOSTNAME))
    got = elastic_result(old, elastic_workload("new", pod_set(count=2, preferred=HOSTNAME), replaces="old"))
    assert got.status == "Inadmissible"
    assert got.message == ("failed to assign flavors to pod set main: "
                           "preferred topology is not supported with ElasticJobsViaWorkloadSlices")


def test_elastic_validation_preferred_topology_is_rejected_for_new_elastic_workload():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "preferred topology is rejected for new
    elastic workload": an elastic workload replacing no slice, preferring a host
    (ErrElasticPreferredTopologyNotSupported; NoFit)."""
    got = elastic_result(elastic_workload("new", pod_set(count=2, preferred=HOSTNAME)))
    assert got.status == "Inadmissible"
    assert got.message == ("failed to assign flavors to pod set main: "
                           "preferred topology is not supported with ElasticJobsViaWorkloadSlices")


def test_elastic_validation_required_topology_is_accepted_for_regular_jobs():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "required topology is accepted for
    regular jobs with ElasticJobsViaWorkloadSlicesWithTAS": a workload that is not elastic keeps
    its required topology (no error, Fit)."""
    got = elastic_result(elastic_workload("new", pod_set(count=2, required=HOSTNAME), elastic=False))
    assert got.status == "Admitted"
    assert domains(got.pod_sets[0].assignment) == [("n1", 2)]


def test_elastic_validation_preferred_topology_is_accepted_for_regular_jobs():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "preferred topology is accepted for
    regular jobs with ElasticJobsViaWorkloadSlicesWithTAS" (no error, Fit)."""
    got = elastic_result(elastic_workload("new", pod_set(count=2, preferred=HOSTNAME), elastic=False))
    assert got.status == "Admitted"
    assert domains(got.pod_sets[0].assignment) == [("n1", 2)]


def test_required_topology_rejected_for_elastic_workload_slices():
    """TestWorkloadsTopologyRequests_RequiredTopologyRejectedForElasticWorkloadSlices: an elastic
    workload whose leader (requesting nothing) and worker share a group and require a host: the
    leader, first, gets ErrElasticRequiredTopologyNotSupported."""
    got = elastic_result(elastic_workload("new", pod_set("leader", count=1, cpu=None, required=HOSTNAME, group="g"),
                                          pod_set("worker", count=1, cpu="1", required=HOSTNAME, group="g")))
    assert got.status == "Inadmissible"
    assert got.message == ("failed to assign flavors to pod set leader: "
                           "required topology is not supported with ElasticJobsViaWorkloadSlices")


# ---------------------------------------------------------------- TestFindTopologyAssignmentsReplacesSliceUsage


def replaced_slice_cluster(*extra: dict) -> list[dict]:
    """flavor-1 (nodes flavor=one, hostname topology-1) with node-1 (4 CPUs, 32 pods) and
    flavor-2 (flavor=two) with node-2. The Go case places the new slice on flavor-1 (its
    assignment names it); here ClusterQueue cq offers flavor-1 only (10 CPUs), so the cycle
    places it there too."""
    return [
        topology("topology-1", (HOSTNAME,)), topology("topology-2", (HOSTNAME,)),
        resource_flavor("flavor-1", topology_name="topology-1", node_labels={"flavor": "one"}),
        resource_flavor("flavor-2", topology_name="topology-2", node_labels={"flavor": "two"}),
        node("node-1", cpu="4", pods="32", labels={"flavor": "one"}),
        node("node-2", cpu="4", pods="32", labels={"flavor": "two"}),
        flavor_queue("cq", [[("flavor-1", {"cpu": "10"})]]), local_queue("lq", cluster_queue_name="cq"),
        *extra,
    ]


def slice_pod_sets(workers: int, leader: bool) -> list[dict]:
    """Unconstrained workers, with a leader in their group when `leader`. Without a leader the
    Go case puts the workers alone in a group, which Kueue's job validation refuses (a group is
    exactly two PodSets) and which places them as a PodSet of no group: no group is given."""
    group = "group" if leader else None
    out = [pod_set("workers", count=workers, cpu="1", unconstrained=True, group=group)]
    if leader:
        out.append(pod_set("leader", count=1, cpu="1", unconstrained=True, group=group))
    return out


def replaced_slice_result(*, leader: bool = False, other_cpu: str | None = None,
                          predecessor: bool = True) -> WorkloadResult:
    """old (2 workers, and a leader, on node-1) and its replacement new (4 pods in all)."""
    old = admitted(elastic_workload("old", *slice_pod_sets(2, leader), created=-10),
                   assignments={"workers": domains_json([HOSTNAME], [("node-1", 2)]),
                                "leader": domains_json([HOSTNAME], [("node-1", 1)])},
                   flavor="flavor-1")
    new = elastic_workload("new", *slice_pod_sets(3 if leader else 4, leader),
                           replaces="old" if predecessor else None)
    extra = [pod("other", node="node-1", cpu=other_cpu)] if other_cpu else []
    result = run(replaced_slice_cluster(*extra, old, new), cycles=1, feature_gates=gates(**ELASTIC))
    return result_of(result, "new")


def placed(w: WorkloadResult) -> bool:
    """Whether the new slice got a quota reservation with a TopologyAssignment for each PodSet."""
    return w.status == "Admitted" and all(ps.assignment is not None for ps in w.pod_sets)


def test_replaces_slice_usage_accounts_for_predecessor_workers_exactly_once():
    """TestFindTopologyAssignmentsReplacesSliceUsage "accounts for predecessor workers exactly
    once": the old slice's 2 CPUs on node-1 are the new slice's own: its 4 workers fit."""
    got = replaced_slice_result()
    assert placed(got)
    assert domains(got.pod_sets[0].assignment) == [("node-1", 4)]


def test_replaces_slice_usage_accounts_for_predecessor_leader_and_workers_exactly_once():
    """TestFindTopologyAssignmentsReplacesSliceUsage "accounts for predecessor leader and
    workers exactly once"."""
    assert placed(replaced_slice_result(leader=True))


def test_replaces_slice_usage_does_not_remove_unrelated_usage():
    """TestFindTopologyAssignmentsReplacesSliceUsage "does not remove unrelated usage": 1 CPU of
    node-1 held by something else (here a running pod) leaves no room for the 4 workers."""
    assert not placed(replaced_slice_result(other_cpu="1"))


def test_replaces_slice_usage_does_not_subtract_usage_without_a_predecessor():
    """TestFindTopologyAssignmentsReplacesSliceUsage "does not subtract usage without a
    predecessor": a workload replacing no slice does not get old's room."""
    assert not placed(replaced_slice_result(predecessor=False))


# ---------------------------------------------------------------- pkg/cache/scheduler/tas_flavor_snapshot_test.go

LEVEL_1, LEVEL_2 = "level-1", "level-2"


def two_level_snapshot(*, with_nodes: bool = True):
    """Flavor dummy on topology (level-1, level-2) with nodes x (a/b), y (a/c), z (d/e), w (d/f)."""
    nodes = [node(name, hostname=False, labels={LEVEL_1: l1, LEVEL_2: l2})
             for name, l1, l2 in (("x", "a", "b"), ("y", "a", "c"), ("z", "d", "e"), ("w", "d", "f"))]
    objects = [topology("two-levels", (LEVEL_1, LEVEL_2)), resource_flavor("dummy", topology_name="two-levels")]
    return flavor_snapshot([*objects, *(nodes if with_nodes else [])], flavor="dummy")


def assignment(levels: Sequence[str], doms: Sequence[tuple[Sequence[str], int]]) -> TopologyAssignment:
    return TopologyAssignment(tuple(levels), tuple(DomainAssignment(tuple(v), c) for v, c in doms))


def pairs(ta: TopologyAssignment) -> list[tuple[tuple[str, ...], int]]:
    return [(tuple(d.values), d.count) for d in ta.domains]


AB, AC, DE, DF = ("a", "b"), ("a", "c"), ("d", "e"), ("d", "f")


@pytest.mark.parametrize(("a", "b", "want"), [
    pytest.param([(AB, 1), (AC, 1)], [(DE, 1), (DF, 1)], [(AB, 1), (AC, 1), (DE, 1), (DF, 1)],
                 id="topologies with different domains, all a before b"),
    pytest.param([(DE, 1), (DF, 1)], [(AB, 1), (AC, 1)], [(AB, 1), (AC, 1), (DE, 1), (DF, 1)],
                 id="topologies with different domains, all b before a"),
    pytest.param([(AC, 1), (DE, 1)], [(AB, 1), (DF, 1)], [(AB, 1), (AC, 1), (DE, 1), (DF, 1)],
                 id="topologies with different domains, mixed order"),
    pytest.param([(AC, 1), (DE, 1)], [(AB, 1), (DE, 1)], [(AB, 1), (AC, 1), (DE, 2)],
                 id="topologies with different and the same domains, mixed order"),
    pytest.param([], [(AB, 1), (DE, 1)], [(AB, 1), (DE, 1)], id="topology a with empty domains"),
    pytest.param([(AC, 1), (DE, 1)], [], [(AC, 1), (DE, 1)], id="topology b with empty domain"),
])
def test_merge_topology_assignments(a, b, want):
    """TestMergeTopologyAssignments: both assignments' domains in the order of their level
    values, a domain in both counted once with the counts summed."""
    snap = two_level_snapshot()
    levels = (LEVEL_1, LEVEL_2)
    got = merge_assignments(snap, assignment(levels, a), assignment(levels, b))
    assert tuple(got.levels) == levels
    assert pairs(got) == [(tuple(v), c) for v, c in want]


@pytest.mark.parametrize(("request_", "want"), [
    pytest.param(None, False, id="topology request nil"),
    pytest.param(TopologyRequest(), False, id="topology request empty"),
    pytest.param(TopologyRequest(required=LEVEL_1), True, id="required"),
    pytest.param(TopologyRequest(required="invalid-level"), False, id="required - invalid level"),
    pytest.param(TopologyRequest(preferred=LEVEL_1), True, id="preferred"),
    pytest.param(TopologyRequest(preferred="invalid-level"), False, id="preferred - invalid level"),
    pytest.param(TopologyRequest(unconstrained=True), True, id="unconstrained"),
    pytest.param(TopologyRequest(slice_required_topology=LEVEL_1), True, id="slice-only"),
    pytest.param(TopologyRequest(slice_required_topology="invalid-level"), False, id="slice-only - invalid level"),
])
def test_has_level(request_, want):
    """TestHasLevel: on a snapshot of levels (level-1, level-2) without nodes (the Go case names
    write an en dash where these ids write a hyphen)."""
    assert has_level(two_level_snapshot(with_nodes=False), request_, gates()) is want


@pytest.mark.parametrize(("doms", "want"), [
    pytest.param([], 0, id="empty assignment"),
    pytest.param([("node-a", 3)], 3, id="single domain"),
    pytest.param([("node-a", 2), ("node-b", 3), ("node-c", 1)], 6, id="multiple domains"),
])
def test_count_pods_in_assignment(doms, want):
    """TestCountPodsInAssignment."""
    assert assignment(("hostname",), [((v,), c) for v, c in doms]).pod_count == want


def hostname_snapshot():
    """Flavor hosts on a hostname topology with nodes node-a and node-b."""
    objects = [topology("hosts", (HOSTNAME,)), resource_flavor("hosts", topology_name="hosts"),
               node("node-a"), node("node-b")]
    return flavor_snapshot(objects, flavor="hosts")


@pytest.mark.parametrize(("doms", "want"), [
    pytest.param([], {}, id="empty assignment"),
    pytest.param([("node-a", 1)], {"node-a": {"cpu": 1000, "memory": 1024, "pods": 1}},
                 id="single domain with one pod"),
    pytest.param([("node-a", 2), ("node-b", 3)], {"node-a": {"cpu": 2000, "memory": 2048, "pods": 2},
                                                  "node-b": {"cpu": 3000, "memory": 3072, "pods": 3}},
                 id="multiple domains"),
])
def test_compute_assumed_usage_from_assignment(doms, want):
    """TestComputeAssumedUsageFromAssignment (Kueue's ComputeUsagePerDomain): the usage of an
    assignment per domain, its pods counted; the engine's add_assumed_usage into an empty map."""
    usage: dict[str, dict[str, int]] = {}
    add_assumed_usage(usage, assignment((HOSTNAME,), [((v,), c) for v, c in doms]), {"cpu": 1000, "memory": 1024},
                      hostname_snapshot())
    assert usage == want


@pytest.mark.parametrize(("assumed", "doms", "requests", "want"), [
    pytest.param({"node-a": {"cpu": 1000, "pods": 1}}, [("node-a", 1), ("node-b", 2)], {"cpu": 500, "memory": 2048},
                 {"node-a": {"cpu": 1500, "memory": 2048, "pods": 2},
                  "node-b": {"cpu": 1000, "memory": 4096, "pods": 2}},
                 id="includes pod count for existing and new domains"),
    pytest.param({}, [("node-a", 3)], {"cpu": 250, "memory": 512},
                 {"node-a": {"cpu": 750, "memory": 1536, "pods": 3}},
                 id="includes pod count starting from empty assumed usage"),
])
def test_add_assumed_usage(assumed, doms, requests, want):
    """TestAddAssumedUsage."""
    usage = {k: dict(v) for k, v in assumed.items()}
    add_assumed_usage(usage, assignment((HOSTNAME,), [((v,), c) for v, c in doms]), requests, hostname_snapshot())
    assert usage == want


@pytest.mark.parametrize(("doms", "count", "want"), [
    pytest.param([("node-a", 2)], 0, [], id="truncate to zero"),
    pytest.param([("node-a", 2), ("node-b", 1)], 3, [("node-a", 2), ("node-b", 1)], id="no truncation needed"),
    pytest.param([("node-a", 3), ("node-b", 2)], 3, [("node-a", 3)], id="truncate to single domain"),
    pytest.param([("node-z", 3), ("node-a", 2)], 3, [("node-z", 3)],
                 id="truncation preserves assignment order not lex order"),
    pytest.param([("node-a", 3), ("node-b", 3)], 4, [("node-a", 3), ("node-b", 1)], id="partial domain truncation"),
    pytest.param([("node-a", 5), ("node-b", 3)], 2, [("node-a", 2)], id="truncate within first domain"),
])
def test_truncate_assignment(doms, count, want):
    """TestTruncateAssignment."""
    got = truncate_assignment(assignment(("hostname",), [((v,), c) for v, c in doms]), count)
    assert tuple(got.levels) == ("hostname",)
    assert [(d.values[-1], d.count) for d in got.domains] == want
