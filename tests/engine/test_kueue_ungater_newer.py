"""Cases of Kueue's `pkg/controller/tas/topology_ungater_test.go` (kubernetes-sigs/kueue)
that neither the conformance scenarios nor the other ungater tests check: the elastic
workload slice cases of TestTopologyUngater_ElasticJobs_Reconciler and
TestPodHandler_ElasticJobs_Create / _Update.

How the cases are checked. Kueue's reconciler tests reconcile one request with a fake
client and read the pods back; here the same objects go through the parser into a
`ClusterState`, and `ungate_pods` plays the reconcile. A reconcile request keyed by the
slice chain name (`origin`, the name every slice and pod of the chain carries in
`kueue.x-k8s.io/workload-slice-name`) stands for every workload of the chain; a request
keyed by the name of one slice stands for that workload. A pod counts as ungated when the
ungater returns it, with the node selector it returns. What Kueue's tests check about its
expectations store (the UIDs still pending after the reconcile or the event) has no
counterpart in the engine and is not checked.

Kueue's pod handler tests check which reconcile request a pod event enqueues. The engine
has no events: its counterpart is `workloads_with_gated_pods`, the workloads the pass
reconciles because one of their pods still carries the topology gate. Only the handler
cases about a gated pod have that counterpart; each checks that the pod's slice chain,
whichever slice its `kueue.x-k8s.io/workload` annotation names, is what gets reconciled.
"""

from __future__ import annotations

from scheduler.cluster import ClusterState
from scheduler.model import Workload
from scheduler.ungater import workloads_with_gated_pods

from .factories import HOSTNAME, cluster_state, gates, tas_setup
from .test_kueue_ungater_more import NS, ungated
from .test_kueue_ungater_more import chain_pod as elastic_pod
from .test_kueue_ungater_more import slice_workload as elastic_slice

CHAIN = "origin"  # the slice chain name: the first slice's name
ELASTIC_GATES = gates(ElasticJobsViaWorkloadSlices=True)


# ---------------------------------------------------------------- builders


def slice_workload(name: str, count: int, *, created: float, finished: bool = False) -> dict:
    """An admitted slice of the chain `origin`: PodSet `workers` of `count` pods, all
    assigned to the node `node`."""
    return elastic_slice(name, count, chain=CHAIN, pod_set_name="workers", created=created, finished=finished)


def origin() -> dict:
    return slice_workload("origin", 1, created=0, finished=True)


def replacement(*, finished: bool = False) -> dict:
    return slice_workload("replacement", 2, created=1, finished=finished)


def scaled_down() -> dict:
    return slice_workload("scaled-down", 1, created=2, finished=True)


def regrown() -> dict:
    return slice_workload("regrown", 3, created=3)


def chain_pod(name: str, *, owner: str, gated: bool, node_selector: dict[str, str] | None = None,
              unconstrained: bool = True, labels: dict[str, str] | None = None) -> dict:
    """A pod of the chain `origin` in PodSet `workers`; `owner` is the slice its
    `kueue.x-k8s.io/workload` annotation names."""
    return elastic_pod(name, owner=owner, chain=CHAIN, pod_set_name="workers", gated=gated,
                       node_selector=node_selector, labels=labels, unconstrained=unconstrained)


def running_pod() -> dict:
    """The pod of the origin slice that runs on `node` (no topology annotation)."""
    return chain_pod("running", owner="origin", gated=False, node_selector={HOSTNAME: "node"},
                     unconstrained=False)


def late_pod(owner: str, *, gated: bool = True, name: str = "late") -> dict:
    """A pod created after the replacement slice was admitted, naming `owner`."""
    return chain_pod(name, owner=owner, gated=gated, node_selector=None if gated else {HOSTNAME: "node"})


def state_of(*objects: dict) -> ClusterState:
    return cluster_state([*tas_setup(levels=(HOSTNAME,)), *objects], feature_gates=ELASTIC_GATES)


def request(state: ClusterState, name: str = CHAIN) -> list[Workload]:
    """The workloads a reconcile request keyed by `name` stands for: the whole chain for the
    chain name, otherwise the one slice of that name."""
    if name == CHAIN:
        return state.in_order(state.slice_members[(NS, CHAIN)])
    wl = state.workload(f"{NS}/{name}")
    assert wl is not None, f"no workload {name}"
    return [wl]


def reconciled(state: ClusterState) -> set[str]:
    """Keys of the workloads the pass reconciles for their gated pods."""
    return {wl.key for wl in workloads_with_gated_pods(state)}


# ---------------------------------------------------------------- TestTopologyUngater_ElasticJobs_Reconciler


def test_late_pod_referencing_the_origin_slice_is_ungated_when_reconciling_by_the_replacement_slice_name():
    state = state_of(origin(), replacement(), late_pod("origin"), running_pod())
    assert ungated(state, request(state, "replacement")) == {"late": {HOSTNAME: "node"}}


def test_late_pods_are_ungated_after_the_slice_chain_shrinks_and_regrows():
    """The chain grows 1 -> 2, shrinks to 1 and regrows to 3; only `regrown` is active. The
    running pod of the first slice holds one of its 3 slots, the two late pods take the
    other two."""
    state = state_of(origin(), replacement(finished=True), scaled_down(), regrown(),
                     late_pod("regrown"), running_pod(), late_pod("regrown", name="second-late"))
    assert ungated(state, request(state)) == {"late": {HOSTNAME: "node"}, "second-late": {HOSTNAME: "node"}}


def test_late_pods_are_ungated_after_the_slice_chain_shrinks_and_regrows_when_reconciling_by_the_regrown_slice_name():
    state = state_of(origin(), replacement(finished=True), scaled_down(), regrown(),
                     late_pod("regrown"), running_pod(), late_pod("regrown", name="second-late"))
    assert ungated(state, request(state, "regrown")) == {"late": {HOSTNAME: "node"},
                                                         "second-late": {HOSTNAME: "node"}}


def test_late_pod_that_is_already_ungated_leaves_no_pending_expectations():
    """Only the pods are checked: nothing is ungated again, and the pass has nothing left
    to reconcile for the chain."""
    state = state_of(origin(), replacement(), late_pod("origin", gated=False), running_pod())
    assert ungated(state, request(state)) == {}
    assert reconciled(state) == set()


# ---------------------------------------------------------------- TestPodHandler_ElasticJobs_Create / _Update


def test_create_of_a_gated_pod_referencing_the_origin_slice_enqueues_the_slice_chain():
    state = state_of(origin(), replacement(), late_pod("origin"))
    assert reconciled(state) == {f"{NS}/origin", f"{NS}/replacement"}


def test_create_of_a_gated_pod_referencing_the_replacement_slice_enqueues_the_slice_chain():
    state = state_of(origin(), replacement(), late_pod("replacement"))
    assert reconciled(state) == {f"{NS}/origin", f"{NS}/replacement"}


def test_update_of_a_pod_which_is_still_gated_keeps_the_slice_chain_expectations_pending():
    """The updated pod (a new label, the gate kept) still makes its chain reconciled."""
    pod = late_pod("replacement")
    pod["metadata"]["labels"]["updated"] = "true"
    state = state_of(origin(), replacement(), pod)
    assert reconciled(state) == {f"{NS}/origin", f"{NS}/replacement"}
