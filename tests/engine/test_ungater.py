"""The topology ungater: which gated pod is released to which domain."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.model import TOPOLOGY_GATE
from scheduler.results import PodResult
from scheduler.ungater import apply_ungating, ungate_pods
from tests.engine.factories import (
    BLOCK,
    HOSTNAME,
    NAMESPACE,
    RACK,
    admitted,
    cluster_state,
    domains_json,
    node,
    pod_set,
    run,
    tas_setup,
    workload,
)

JOB_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
OTHER_GATE = "example.com/quota-check"


# ---------------------------------------------------------------- builders


def tas_pod(
    name: str,
    *,
    owner: str = "train",
    pod_set_name: str | None = "main",
    gated: bool = True,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    phase: str = "Pending",
    namespace: str = NAMESPACE,
    deleting: bool = False,
    extra_gates: Sequence[str] = (),
) -> dict:
    """A pod created by a job of workload `owner`, still gated by TAS unless `gated=False`."""
    meta_labels = dict(labels or {})
    if pod_set_name is not None:
        meta_labels["kueue.x-k8s.io/podset"] = pod_set_name
    meta_annotations = dict(annotations or {})
    if owner:
        meta_annotations["kueue.x-k8s.io/workload"] = owner
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                "labels": meta_labels, "annotations": meta_annotations}
    if deleting:
        metadata["deletionTimestamp"] = "2025-06-01T11:59:00Z"
    gates = ([TOPOLOGY_GATE] if gated else []) + list(extra_gates)
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}}}],
                            "schedulingGates": [{"name": g} for g in gates]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def admitted_workload(
    name: str = "train",
    *,
    levels: Sequence[str] = (HOSTNAME,),
    domains: Sequence[tuple[Sequence[str] | str, int]],
    topology_request: dict | None = None,
    pod_set_name: str = "main",
    namespace: str = NAMESPACE,
) -> dict:
    """A one-PodSet workload admitted with the given assignment (domains in this order)."""
    count = sum(c for _, c in domains)
    wl = workload(name, namespace=namespace, pod_sets=[
        pod_set(pod_set_name, count=count, raw_topology_request=topology_request or {"required": levels[0]})])
    return admitted(wl, assignments={pod_set_name: domains_json(levels, domains)})


def hosts(*names: str) -> list[dict]:
    return [node(n, block="b1", rack="r1") for n in names]


def ungate(objects: list[dict]) -> dict[str, dict[str, str]]:
    """name -> complete node selector of every pod the ungater releases."""
    results = ungate_pods(cluster_state(objects))
    assert all(r.ungated for r in results)
    assert len({r.name for r in results}) == len(results), "a pod was ungated twice"
    return {r.name: r.node_selector for r in results}


def on_host(host: str) -> dict[str, str]:
    return {HOSTNAME: host}


# ---------------------------------------------------------------- rank-based


def test_ranks_take_the_slots_of_the_assignment_in_its_domain_order():
    wl = admitted_workload(domains=[("x3", 1), ("x1", 2), ("x2", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX})
    # names deliberately out of rank order: ranks, not names, decide
    pods = [tas_pod(name, labels={JOB_INDEX: str(rank)})
            for name, rank in (("a", 3), ("b", 0), ("c", 2), ("d", 1))]
    got = ungate([*tas_setup(), *hosts("x1", "x2", "x3"), wl, *pods])
    assert got == {"b": on_host("x3"), "d": on_host("x1"), "c": on_host("x1"), "a": on_host("x2")}


def test_sub_group_ranks_count_whole_jobs_before_the_index_within_a_job():
    # JobSet: 2 replicated Jobs of 2 pods; rank = completion index + job index * 2
    wl = admitted_workload(levels=(BLOCK, RACK), domains=[(("b1", "r1"), 1), (("b1", "r2"), 2), (("b2", "r1"), 1)],
                           topology_request={"required": BLOCK, "podIndexLabel": JOB_INDEX,
                                             "subGroupIndexLabel": JOBSET_JOB_INDEX, "subGroupCount": 2})
    pods = [tas_pod(f"job{job}-{index}", labels={JOB_INDEX: str(index), JOBSET_JOB_INDEX: str(job)})
            for job in (0, 1) for index in (0, 1)]
    got = ungate([*tas_setup(levels=(BLOCK, RACK)), wl, *pods])
    assert got == {
        "job0-0": {BLOCK: "b1", RACK: "r1"},
        "job0-1": {BLOCK: "b1", RACK: "r2"},
        "job1-0": {BLOCK: "b1", RACK: "r2"},
        "job1-1": {BLOCK: "b2", RACK: "r1"},
    }


def test_leader_worker_set_workers_continue_after_the_leader_ranks():
    group = {"podIndexLabel": LWS_WORKER_INDEX, "podSetGroupName": "lws"}
    wl = workload("train", pod_sets=[
        pod_set("leader", count=1, raw_topology_request={"required": HOSTNAME, **group}),
        pod_set("workers", count=2, raw_topology_request={"required": HOSTNAME, **group}),
    ])
    wl = admitted(wl, assignments={"leader": domains_json([HOSTNAME], [("x1", 1)]),
                                   "workers": domains_json([HOSTNAME], [("x2", 1), ("x3", 1)])})
    pods = [
        tas_pod("lead", pod_set_name="leader", labels={LWS_WORKER_INDEX: "0"}),
        tas_pod("w-a", pod_set_name="workers", labels={LWS_WORKER_INDEX: "2"}),
        tas_pod("w-b", pod_set_name="workers", labels={LWS_WORKER_INDEX: "1"}),
    ]
    got = ungate([*tas_setup(), *hosts("x1", "x2", "x3"), wl, *pods])
    assert got == {"lead": on_host("x1"), "w-b": on_host("x2"), "w-a": on_host("x3")}


def test_a_running_pod_on_its_own_rank_slot_keeps_the_rank_order():
    wl = admitted_workload(domains=[("x1", 1), ("x2", 1), ("x3", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX})
    pods = [
        tas_pod("p0", labels={JOB_INDEX: "0"}),
        tas_pod("p1", labels={JOB_INDEX: "1"}, gated=False, node_selector=on_host("x2"),
                node_name="x2", phase="Running"),
        tas_pod("p2", labels={JOB_INDEX: "2"}),
    ]
    assert ungate([*tas_setup(), *hosts("x1", "x2", "x3"), wl, *pods]) == {
        "p0": on_host("x1"), "p2": on_host("x3")}


def test_greedy_fallback_never_puts_a_replacement_on_a_slot_a_running_pod_holds():
    # the plan: rank 0 -> x3, rank 1 -> x1
    wl = admitted_workload(domains=[("x3", 1), ("x1", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX})
    # live state: rank 1 runs on x3, x1 is empty; rank 0 was replaced and waits at the gate
    running = tas_pod("rank-1", labels={JOB_INDEX: "1"}, gated=False, node_name="x3", phase="Running")
    replacement = tas_pod("rank-0-replacement", labels={JOB_INDEX: "0"})
    got = ungate([*tas_setup(), *hosts("x1", "x3"), wl, running, replacement])
    assert got == {"rank-0-replacement": on_host("x1")}


def test_ranks_out_of_the_pod_set_fall_back_to_greedy():
    wl = admitted_workload(domains=[("x1", 1), ("x2", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX})
    pods = [tas_pod("a", labels={JOB_INDEX: "7"}), tas_pod("b", labels={JOB_INDEX: "0"})]
    assert ungate([*tas_setup(), *hosts("x1", "x2"), wl, *pods]) == {"a": on_host("x1"), "b": on_host("x2")}


def test_a_sub_group_label_without_a_sub_group_count_falls_back_to_greedy():
    wl = admitted_workload(domains=[("x1", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX,
                                             "subGroupIndexLabel": JOBSET_JOB_INDEX})
    pod = tas_pod("p", labels={JOB_INDEX: "0", JOBSET_JOB_INDEX: "0"})
    state = cluster_state([*tas_setup(), *hosts("x1"), wl, pod])
    assert [r.node_selector for r in ungate_pods(state)] == [on_host("x1")]
    # a count of 0 (only reachable from unvalidated input) must not divide by zero
    ps = state.workloads[0].pod_sets[0]
    assert ps.topology_request is not None
    ps.topology_request = dataclasses.replace(ps.topology_request, sub_group_count=0)
    assert [r.node_selector for r in ungate_pods(state)] == [on_host("x1")]


# ---------------------------------------------------------------- slots held by live pods


def test_running_pods_keep_their_domain_and_consume_its_slots():
    wl = admitted_workload(domains=[("x1", 2), ("x2", 1)])
    pods = [
        # bound to x1 without a selector: its node says where it runs
        tas_pod("running", gated=False, node_name="x1", phase="Running"),
        # ungated earlier, not yet bound: its selector says where it goes
        tas_pod("ungated", gated=False, node_selector=on_host("x1")),
        tas_pod("waiting"),
    ]
    assert ungate([*tas_setup(), *hosts("x1", "x2"), wl, *pods]) == {"waiting": on_host("x2")}


def test_terminal_pods_free_their_slot():
    wl = admitted_workload(domains=[("x1", 1), ("x2", 1)])
    pods = [
        tas_pod("failed", gated=False, node_selector=on_host("x1"), node_name="x1", phase="Failed"),
        tas_pod("succeeded", gated=False, node_selector=on_host("x2"), node_name="x2", phase="Succeeded"),
        tas_pod("new-1"),
        tas_pod("new-2"),
    ]
    assert ungate([*tas_setup(), *hosts("x1", "x2"), wl, *pods]) == {"new-1": on_host("x1"), "new-2": on_host("x2")}


def test_a_pod_being_deleted_still_holds_its_slot():
    wl = admitted_workload(domains=[("x1", 1)])
    pods = [
        tas_pod("leaving", gated=False, node_selector=on_host("x1"), node_name="x1", phase="Running",
                deleting=True),
        tas_pod("replacement"),
    ]
    assert ungate([*tas_setup(), *hosts("x1"), wl, *pods]) == {}


def test_never_more_pods_than_a_domain_counts():
    wl = admitted_workload(domains=[("x1", 1), ("x2", 2)])
    pods = [tas_pod("held", gated=False, node_selector=on_host("x2")), *(tas_pod(f"p{i}") for i in range(5))]
    got = ungate([*tas_setup(), *hosts("x1", "x2"), wl, *pods])
    assert Counter(s[HOSTNAME] for s in got.values()) == {"x1": 1, "x2": 1}
    assert len(got) == 2


def test_a_slot_on_an_unhealthy_node_stays_gated():
    wl = admitted_workload(domains=[("x1", 1), ("x2", 1)])
    wl["status"]["unhealthyNodes"] = [{"name": "x1"}]
    pods = [tas_pod("a"), tas_pod("b")]
    # greedy hands x1 to "a" first; that ungate is dropped, so "a" waits for x1's replacement
    assert ungate([*tas_setup(), *hosts("x1", "x2"), wl, *pods]) == {"b": on_host("x2")}


# ---------------------------------------------------------------- node selectors


def test_non_hostname_lowest_level_selects_the_assignment_levels_and_keeps_existing_selectors():
    wl = admitted_workload(levels=(BLOCK, RACK), domains=[(("b1", "r2"), 1)])
    pod = tas_pod("p", node_selector={"pool": "gpu"}, extra_gates=[OTHER_GATE])
    got = ungate([*tas_setup(levels=(BLOCK, RACK)), wl, pod])
    assert got == {"p": {"pool": "gpu", BLOCK: "b1", RACK: "r2"}}


def test_apply_ungating_removes_only_the_topology_gate():
    wl = admitted_workload(domains=[("x1", 1)])
    state = cluster_state([*tas_setup(), *hosts("x1"), wl, tas_pod("p", extra_gates=[OTHER_GATE])])
    (after,) = apply_ungating(state.pods, ungate_pods(state))
    assert after.scheduling_gates == (OTHER_GATE,)
    assert after.spec.node_selector == on_host("x1")


# ---------------------------------------------------------------- which pods, which workloads


def test_pods_of_another_workload_are_untouched():
    wl = admitted_workload(domains=[("x1", 4)])
    other = workload("other", pod_sets=[pod_set("main", count=1)])  # pending, not admitted
    pods = [
        tas_pod("mine"),
        tas_pod("others", owner="other"),
        tas_pod("elsewhere", namespace="team-b"),  # same workload name, other namespace
        tas_pod("no-pod-set-label", pod_set_name=None),
        tas_pod("other-pod-set", pod_set_name="launcher"),
        tas_pod("no-workload-annotation", owner=""),
    ]
    assert ungate([*tas_setup(), *hosts("x1"), wl, other, *pods]) == {"mine": on_host("x1")}


def test_workloads_not_admitted_by_tas_leave_their_pods_gated():
    quota_only = admitted_workload("quota-only", domains=[("x1", 1)])
    quota_only["status"]["conditions"] = [c for c in quota_only["status"]["conditions"] if c["type"] != "Admitted"]
    delayed = admitted(workload("delayed", pod_sets=[pod_set("main", count=1, required=HOSTNAME)]),
                       assignments={"main": None})
    delayed["status"]["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] = "Pending"
    pending = workload("pending", pod_sets=[pod_set("main", count=1, required=HOSTNAME)])
    finished = admitted_workload("finished", domains=[("x1", 1)])
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    pods = [tas_pod(f"{name}-pod", owner=name) for name in ("quota-only", "delayed", "pending", "finished")]
    assert ungate([*tas_setup(), *hosts("x1"), quota_only, delayed, pending, finished, *pods]) == {}


def test_an_unparsable_index_offset_leaves_the_whole_workload_gated():
    broken = admitted_workload("broken", domains=[("x1", 1)])
    healthy = admitted_workload("healthy", domains=[("x2", 1)])
    pods = [
        tas_pod("b", owner="broken", annotations={"kueue.x-k8s.io/pod-index-offset": "one"}),
        tas_pod("h", owner="healthy"),
    ]
    warnings: list[str] = []
    state = cluster_state([*tas_setup(), *hosts("x1", "x2"), broken, healthy, *pods])
    state.warn = warnings.append
    assert [r.name for r in ungate_pods(state)] == ["h"]
    assert len(warnings) == 1
    assert "pod-index-offset" in warnings[0]


# ---------------------------------------------------------------- the pass


def test_ungating_is_idempotent():
    wl = admitted_workload(domains=[("x1", 2), ("x2", 1)],
                           topology_request={"required": HOSTNAME, "podIndexLabel": JOB_INDEX})
    pods = [tas_pod(f"p{i}", labels={JOB_INDEX: str(i)}) for i in range(3)]
    state = cluster_state([*tas_setup(), *hosts("x1", "x2"), wl, *pods])
    first = ungate_pods(state)
    assert len(first) == 3
    state.pods = apply_ungating(state.pods, first)
    assert ungate_pods(state) == []


def test_the_parsed_pods_are_not_modified():
    wl = admitted_workload(domains=[("x1", 1)])
    state = cluster_state([*tas_setup(), *hosts("x1"), wl, tas_pod("p", node_selector={"pool": "gpu"})])
    (pod,) = state.pods
    ungate_pods(state)
    assert pod.scheduling_gates == (TOPOLOGY_GATE,)
    assert dict(pod.spec.node_selector) == {"pool": "gpu"}


def test_simulate_reports_every_ungated_pod_with_its_complete_selector():
    wl = admitted_workload(domains=[("x1", 1)])
    result = run([*tas_setup(), *hosts("x1"), wl, tas_pod("p", node_selector={"pool": "gpu"})])
    assert result.pods == [PodResult(NAMESPACE, "p", True, {"pool": "gpu", HOSTNAME: "x1"})]
