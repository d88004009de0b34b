"""Kueue's TestBelongsToNonTASCache (pkg/controller/tas) and TestSearch
(pkg/scheduler/flavorassigner/podset_reducer_test.go, the proportional PodSetReducer of v0.19).

TestBelongsToNonTASCache: which pods count against a TAS node's capacity as non-TAS usage. The
engine's counterpart is `scheduler.cluster.counts_as_non_tas_usage`, applied to the pod as the
engine reads it, and its effect: the pod's requests indexed under its node in
`ClusterState.non_tas_by_node` (what the TAS snapshots take off the node's free capacity).

TestSearch: the search for the largest counts, each PodSet reduced in proportion to
count - minCount, that fit; the Go fake `fits` admits counts whose total is at most
`countLimit`, and the case checks the total found and whether one was found. Two mappings:

- the engine's reducer itself, `SchedulingCycle.reduce`, driven by Go's `fits` (its
  `try_counts`/`admissible` replaced by the total-within-limit test, each PodSet needing its
  full count), for every case;
- where the engine accepts the workload (at most one PodSet with minCount, as Kueue's webhook),
  one scheduling cycle: a ClusterQueue whose only flavor has `countLimit` cpu and a workload
  whose pods request 1 cpu each, so that exactly the counts whose total is at most
  `countLimit` fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from scheduler.cluster import counts_as_non_tas_usage
from scheduler.cycle import SchedulingCycle
from scheduler.model import Pod, PodSet, PodSpecInfo
from scheduler.parse import ANNOTATION_REQUIRED

from .factories import V1, cluster_state, node, parse_one, pod_spec
from .kueue_schedule import (
    assignments,
    cluster_queue,
    flavor,
    flavor_quotas,
    left,
    local_queue,
    pod_set,
    resource_group,
    schedule,
    workload,
)

# ---------------------------------------------------------------- TestBelongsToNonTASCache


def make_pod(*, node_name: str | None = None, phase: str | None = None,
             annotations: Mapping[str, str] | None = None) -> dict:
    """testingpod.MakePod("pod", "ns"), with NodeName, StatusPhase and Annotation as given
    (no status phase unless StatusPhase is called)."""
    metadata: dict[str, Any] = {"name": "pod", "namespace": "ns"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec = pod_spec(cpu="1")
    if node_name is not None:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    return {"apiVersion": V1, "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def assert_belongs_to_non_tas_cache(obj: dict, want: bool) -> None:
    """belongsToNonTASCache(pod) == want: the engine's predicate on the pod it reads, and the
    pod indexed (or not) as non-TAS usage of node-a."""
    parsed = parse_one(obj)
    assert isinstance(parsed, Pod)
    assert counts_as_non_tas_usage(parsed) is want
    state = cluster_state([node("node-a"), obj])
    on_node = state.non_tas_by_node.get("node-a", {})
    assert ("ns/pod" in on_node) is want


def test_belongs_to_non_tas_cache_scheduled_non_tas_pod():
    """Go: TestBelongsToNonTASCache, "scheduled non-TAS pod"."""
    assert_belongs_to_non_tas_cache(make_pod(node_name="node-a"), True)


def test_belongs_to_non_tas_cache_unscheduled_pod():
    """Go: TestBelongsToNonTASCache, "unscheduled pod"."""
    assert_belongs_to_non_tas_cache(make_pod(), False)


def test_belongs_to_non_tas_cache_scheduled_tas_pod():
    """Go: TestBelongsToNonTASCache, "scheduled TAS pod"."""
    assert_belongs_to_non_tas_cache(make_pod(node_name="node-a", annotations={ANNOTATION_REQUIRED: "rack"}), False)


def test_belongs_to_non_tas_cache_scheduled_succeeded_non_tas_pod():
    """Go: TestBelongsToNonTASCache, "scheduled succeeded non-TAS pod"."""
    assert_belongs_to_non_tas_cache(make_pod(node_name="node-a", phase="Succeeded"), False)


def test_belongs_to_non_tas_cache_scheduled_failed_non_tas_pod():
    """Go: TestBelongsToNonTASCache, "scheduled failed non-TAS pod"."""
    assert_belongs_to_non_tas_cache(make_pod(node_name="node-a", phase="Failed"), False)


# ---------------------------------------------------------------- TestSearch: the reducer


class _GoFitsReducer(SchedulingCycle):
    """SchedulingCycle.reduce with Go's fake fits: counts fit when their total is at most the
    limit; every PodSet needs its full count (nothing reclaimed)."""

    def __init__(self, count_limit: int) -> None:  # no cluster: only reduce is used
        self.limit = count_limit
        self.state = SimpleNamespace(pods_after_reclaim=lambda wl, ps: ps.count)

    def try_counts(self, e: Any, counts: dict[str, int] | None) -> Any:
        return dict(counts or {}), self.limit

    @staticmethod
    def admissible(counts: Any, limit: Any) -> bool:
        return sum(counts.values()) <= limit


def make_pod_set(name: str, count: int, min_count: int | None = None) -> PodSet:
    """utiltestingapi.MakePodSet(name, count)[.SetMinimumCount(min_count)]."""
    return PodSet(name=name, count=count, spec=PodSpecInfo(requests={"cpu": 1000}), min_count=min_count)


def search(pod_sets: Sequence[PodSet], count_limit: int) -> tuple[int, bool]:
    """(count, found) as Go's red.Search() gives them with its fits: the total of the counts
    found, 0 when none is."""
    entry = SimpleNamespace(wl=SimpleNamespace(pod_sets=list(pod_sets)))
    best = _GoFitsReducer(count_limit).reduce(entry)  # type: ignore[arg-type]
    if best is None:
        return 0, False
    counts, _ = best
    return sum(counts.values()), True


FOUR_VARIABLE = (("ps1", 5, 3), ("ps2", 5, 4), ("ps3", 5, 1), ("ps4", 5, 2))


def test_search_empty():
    """Go: TestSearch, "empty"."""
    assert search([], 10) == (0, False)


def test_search_partial_not_available():
    """Go: TestSearch, "partial not available"."""
    assert search([make_pod_set("ps1", 1), make_pod_set("ps2", 2, 2)], 2) == (0, False)


def test_search_partial_available():
    """Go: TestSearch, "partial available"."""
    assert search([make_pod_set(*ps) for ps in FOUR_VARIABLE], 15) == (15, True)


def test_search_one_partial_available():
    """Go: TestSearch, "one partial available"."""
    pod_sets = [make_pod_set("ps1", 5, 3), make_pod_set("ps2", 5), make_pod_set("ps3", 5), make_pod_set("ps4", 5)]
    assert search(pod_sets, 19) == (19, True)


def test_search_to_min():
    """Go: TestSearch, "to min"."""
    assert search([make_pod_set(*ps) for ps in FOUR_VARIABLE], 10) == (10, True)


def test_search_to_max():
    """Go: TestSearch, "to max"."""
    assert search([make_pod_set(*ps) for ps in FOUR_VARIABLE], 20) == (20, True)


def test_search_no_overflow():
    """Go: TestSearch, "no overflow"."""
    assert search([make_pod_set(f"ps{i}", 150_000, 1) for i in range(1, 9)], 150_000) == (150_000, True)


def test_search_max_pods_on_1_27():
    """Go: TestSearch, "max pods on 1.27"."""
    pod_sets = [make_pod_set("ps1", 150_000, 1), *(make_pod_set(f"ps{i}", 1) for i in range(2, 9))]
    assert search(pod_sets, 150_000) == (150_000, True)


def test_search_podset_with_replica_count_0():
    """Go: TestSearch, "podset with replica count 0"."""
    assert search([make_pod_set("ps1", 0, 0)], 0) == (0, False)


# ---------------------------------------------------------------- TestSearch: in a cycle


CPU = "cpu"


def cycle_with_limit(pod_sets: Sequence[dict], count_limit: int) -> Any:
    """One cycle: ClusterQueue `cq` with `count_limit` cpu of flavor `default`, a workload of
    the given PodSets (1 cpu a pod) in LocalQueue `main` of namespace `sales`."""
    cq = cluster_queue("cq", resource_group(flavor_quotas("default", cpu=str(count_limit))))
    wl = workload("wl", "sales", queue="main", pod_sets=pod_sets)
    return schedule([wl], flavors=[flavor("default")], cluster_queues=[cq],
                    local_queues=[local_queue("main", "sales", "cq")])


def one_cpu(name: str, count: int, min_count: int | None = None) -> dict:
    return pod_set(name, count, min_count=min_count, requests={CPU: "1"})


def admitted_total(result: Any) -> int | None:
    """The total count admitted to the workload, None when it holds no admission."""
    held = assignments(result).get("sales/wl")
    if held is None:
        return None
    assert held["clusterQueue"] == "cq"
    return sum(count for _, count in held["podSets"].values())


def test_search_partial_not_available_in_cycle():
    """Go: TestSearch, "partial not available" (a cycle: 3 pods, ps2 at its minimum, 2 cpu)."""
    result = cycle_with_limit([one_cpu("ps1", 1), one_cpu("ps2", 2, 2)], 2)
    assert admitted_total(result) is None
    assert left(result, "Inadmissible") == {"cq": ["sales/wl"]}


def test_search_one_partial_available_in_cycle():
    """Go: TestSearch, "one partial available" (a cycle: 20 pods, ps1 down to 3, 19 cpu)."""
    result = cycle_with_limit([one_cpu("ps1", 5, 3), one_cpu("ps2", 5), one_cpu("ps3", 5), one_cpu("ps4", 5)], 19)
    assert admitted_total(result) == 19
    assert assignments(result)["sales/wl"]["podSets"] == {
        "ps1": ({CPU: "default"}, 4), "ps2": ({CPU: "default"}, 5),
        "ps3": ({CPU: "default"}, 5), "ps4": ({CPU: "default"}, 5)}


def test_search_max_pods_on_1_27_in_cycle():
    """Go: TestSearch, "max pods on 1.27" (a cycle: 150007 pods, ps1 down to 1, 150000 cpu)."""
    pod_sets = [one_cpu("ps1", 150_000, 1), *(one_cpu(f"ps{i}", 1) for i in range(2, 9))]
    result = cycle_with_limit(pod_sets, 150_000)
    assert admitted_total(result) == 150_000
    assert assignments(result)["sales/wl"]["podSets"]["ps1"] == ({CPU: "default"}, 149_993)
