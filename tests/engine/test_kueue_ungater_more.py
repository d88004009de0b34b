"""Kueue's topology ungater tests that the conformance scenarios do not carry: the elastic
workload slice cases of `pkg/controller/tas/topology_ungater_test.go`
(TestTopologyUngaterElasticSlice and TestElasticTopologyRegrowth, kubernetes-sigs/kueue).

How the cases are checked. Kueue's tests reconcile one Workload with a fake client and
read the pods back; here the same objects go through the parser into a `ClusterState`,
and `ungate_pods` plays the reconcile. A pod counts as ungated when the ungater returns
it, with the node selector it returns; its gate is then removed with `apply_ungating`,
as Kueue's patch does. What Kueue's tests check about its expectations store (which
update or delete event clears which reconcile request) has no counterpart in the engine
and is not checked; each case keeps the assertions about the pods.

Every slice of one chain carries `kueue.x-k8s.io/workload-slice-name` naming the first
slice, and so does every pod of the chain, whichever slice its
`kueue.x-k8s.io/workload` annotation names: the ungater lists a slice's pods by that
chain name.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cluster import ClusterState
from scheduler.model import TOPOLOGY_GATE
from scheduler.ungater import apply_ungating, ungate_pods, workloads_with_gated_pods

from .factories import (
    HOSTNAME,
    admitted,
    cluster_state,
    domains_json,
    gates,
    pod_set,
    tas_setup,
    workload,
)

NS = "ns"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"


# ---------------------------------------------------------------- builders


def slice_workload(name: str, count: int, *, chain: str, pod_set_name: str, created: float = 0,
                   pod_index_label: str | None = None, finished: bool = False) -> dict:
    """An admitted slice of the chain `chain`: `count` pods, all on the node `node`."""
    request = {"podIndexLabel": pod_index_label} if pod_index_label else None
    wl = workload(name, namespace=NS, created=created,
                  annotations={ELASTIC_JOB: "true", SLICE_NAME: chain},
                  pod_sets=[pod_set(pod_set_name, count=count, raw_topology_request=request)])
    return admitted(wl, assignments={pod_set_name: domains_json([HOSTNAME], [("node", count)])},
                    finished=finished)


def chain_pod(name: str, *, owner: str, chain: str, pod_set_name: str, gated: bool,
              node_selector: dict[str, str] | None = None, labels: dict[str, str] | None = None,
              unconstrained: bool = True) -> dict:
    annotations = {"kueue.x-k8s.io/workload": owner, SLICE_NAME: chain}
    if unconstrained:
        annotations[UNCONSTRAINED] = "true"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if gated:
        spec["schedulingGates"] = [{"name": TOPOLOGY_GATE}]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "labels": {"kueue.x-k8s.io/podset": pod_set_name, **(labels or {})},
                         "annotations": annotations},
            "spec": spec, "status": {"phase": "Pending"}}


def ungated(state: ClusterState, workloads: list | None = None) -> dict[str, dict[str, str]]:
    """name -> complete node selector of every pod the ungater releases."""
    results = ungate_pods(state, workloads)
    assert all(r.ungated for r in results)
    assert len({r.name for r in results}) == len(results), "a pod was ungated twice"
    return {r.name: r.node_selector for r in results}


# ---------------------------------------------------------------- TestTopologyUngaterElasticSlice


def elastic_slice_case(*, pod_reference: str, delete_origin: bool = False, finished: bool = False,
                       evicted: bool = False, admitted_condition: bool = True) -> dict[str, dict[str, str]]:
    """The finished slice `origin` (1 pod, which runs on `node`) and its replacement
    `replacement` (2 pods on `node`); a late pod of the chain, still gated, names
    `pod_reference` in its workload annotation. Returns what the ungater releases."""
    origin = slice_workload("origin", 1, chain="origin", pod_set_name="workers", finished=True)
    replacement = slice_workload("replacement", 2, chain="origin", pod_set_name="workers", created=1,
                                 finished=finished)
    conditions = replacement["status"]["conditions"]
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "evicted"})
    if not admitted_condition:
        for c in conditions:
            if c["type"] == "Admitted":
                c["status"] = "False"
    running = chain_pod("running", owner="origin", chain="origin", pod_set_name="workers", gated=False,
                        node_selector={HOSTNAME: "node"}, unconstrained=False)
    late = chain_pod("late", owner=pod_reference, chain="origin", pod_set_name="workers", gated=True)
    objects = [*tas_setup(levels=(HOSTNAME,)), replacement, running, late]
    if not delete_origin:
        objects.append(origin)
    state = cluster_state(objects, feature_gates=gates(ElasticJobsViaWorkloadSlices=True))
    return ungated(state)


def test_elastic_slice_deleted_pod_clears_chain_expectations():
    """Only the ungating is checked: the pod deletion event and the expectations it clears
    are controller bookkeeping."""
    assert elastic_slice_case(pod_reference="replacement") == {"late": {HOSTNAME: "node"}}


def test_elastic_slice_late_pod_references_original_slice():
    assert elastic_slice_case(pod_reference="origin") == {"late": {HOSTNAME: "node"}}


def test_elastic_slice_original_slice_has_been_deleted():
    assert elastic_slice_case(pod_reference="origin", delete_origin=True) == {"late": {HOSTNAME: "node"}}


def test_elastic_slice_pod_references_replacement_but_keeps_chain_identity():
    assert elastic_slice_case(pod_reference="replacement") == {"late": {HOSTNAME: "node"}}


def test_elastic_slice_finished_replacement_cannot_ungate():
    assert elastic_slice_case(pod_reference="origin", finished=True) == {}


def test_elastic_slice_evicted_replacement_cannot_ungate():
    assert elastic_slice_case(pod_reference="origin", evicted=True) == {}


def test_elastic_slice_quota_reservation_without_admission_cannot_ungate():
    assert elastic_slice_case(pod_reference="origin", admitted_condition=False) == {}


# ---------------------------------------------------------------- TestElasticTopologyRegrowth


@pytest.mark.parametrize("request_names_origin", [False, True],
                         ids=["reconcile the latest slice", "reconcile the origin slice"])
def test_elastic_topology_regrowth(request_names_origin):
    """The job resizes 2 -> 4 -> 2 -> 6. Each step finishes the previous slice and admits a
    new one of the chain `slice-0`, with all its pods on `node` and ranks by completion
    index; pods `pod-<count>` and above are deleted, missing ones created gated (naming the
    new slice). After each reconcile every pod below the count is ungated, and a pod that
    survives a step keeps its identity and its node.

    The reconcile request names the new slice, or the first slice of the chain (a request
    queued before the chain grew): the engine resolves the chain by the slice name, as
    Kueue does."""
    feature_gates = gates(ElasticJobsViaWorkloadSlices=True, ElasticJobsViaWorkloadSlicesWithTAS=True)
    workloads: list[dict] = []
    pods: dict[str, dict] = {}
    survivors: dict[str, tuple[str, str]] = {}  # pod name -> (uid, hostname selector)
    for step, count in enumerate([2, 4, 2, 6]):
        name = f"slice-{step}"
        if workloads:
            workloads[-1]["status"]["conditions"].append(
                {"type": "Finished", "status": "True", "reason": "Scaled", "message": "scaled"})
        workloads.append(slice_workload(name, count, chain="slice-0", pod_set_name="main", created=step,
                                        pod_index_label=JOB_INDEX))
        for i in range(6):
            pod_name = f"pod-{i}"
            if i >= count:
                if pods.pop(pod_name, None) is not None:
                    survivors.pop(pod_name, None)
                continue
            if pod_name not in pods:
                p = chain_pod(pod_name, owner=name, chain="slice-0", pod_set_name="main", gated=True,
                              labels={JOB_INDEX: str(i)})
                p["metadata"]["uid"] = f"{step}-{i}"
                pods[pod_name] = p

        state = cluster_state([*tas_setup(levels=(HOSTNAME,)), *workloads, *pods.values()],
                              feature_gates=feature_gates)
        if request_names_origin:
            requested = state.in_order(state.slice_members[(NS, "slice-0")])
        else:
            requested = [state.workload(f"{NS}/{name}")]
        released = ungated(state, requested)

        for pod_name, selector in released.items():
            spec = pods[pod_name]["spec"]
            spec.pop("schedulingGates", None)
            spec["nodeSelector"] = dict(selector)
        for i in range(count):
            p = pods[f"pod-{i}"]
            assert "schedulingGates" not in p["spec"], f"resize to {count} left pod-{i} gated"
            identity = (p["metadata"]["uid"], p["spec"]["nodeSelector"].get(HOSTNAME, ""))
            if f"pod-{i}" in survivors:
                assert survivors[f"pod-{i}"] == identity, f"survivor changed: pod-{i}"
            survivors[f"pod-{i}"] = identity

        # the updates are observed: reconciling again has nothing left to do
        state.pods = apply_ungating(state.pods, ungate_pods(state, requested))
        assert ungate_pods(state, workloads_with_gated_pods(state)) == []
        assert ungate_pods(state) == []
