"""The cluster Kueue's `pkg/scheduler` unit tests share (TestSchedule, TestScheduleForFairSharing,
...): its ResourceFlavors, ClusterQueues, LocalQueues and labelled Namespaces, builders for the
objects its cases add (written as Kueue's test wrappers build them), and one scheduling cycle
run as the Go runner runs it.

A Go case maps onto `schedule(...)`: its `workloads`, `additionalClusterQueues`,
`additionalLocalQueues`, `cohorts` and `objects` are passed as they are; `enableFairSharing`
is `fair_sharing=True`; feature gates the case or its runner sets go in `gates`. The result
gives what the Go test compares: `assignments(result)` (every admission held in the cache
after the cycle, `wantAssignments`), `left(result, "Pending")` (`wantLeft`) and
`left(result, "Inadmissible")` (`wantInadmissibleLeft`), conditions through `condition`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import V1BETA2, result_of, run, timestamp
from .test_fair_sharing import FAIR
from .test_kueue_cycle_extra import holds_admission as holds_admission  # shared with the TAS cases
from .test_kueue_cycle_extra import left as left

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# Go's Resource(name, nominal, borrowingLimit, lendingLimit): "" leaves a limit unset
Quota = tuple[str, ...]


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def flavor(name: str, *, node_labels: Mapping[str, str] | None = None) -> dict:
    """A ResourceFlavor without a topology (MakeResourceFlavor(name))."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    return {"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def flavor_quotas(name: str, **resources: Quota | str) -> dict:
    """MakeFlavorQuotas(name).Resource(resource, nominal[, borrowingLimit[, lendingLimit]]): a
    resource named with a dot or slash is passed as `**{"example.com/gpu": ("20", "0")}`."""
    out = []
    for resource, quota in resources.items():
        values = (quota,) if isinstance(quota, str) else tuple(quota)
        entry: dict[str, Any] = {"name": resource, "nominalQuota": values[0]}
        if len(values) > 1 and values[1] != "":
            entry["borrowingLimit"] = values[1]
        if len(values) > 2 and values[2] != "":
            entry["lendingLimit"] = values[2]
        out.append(entry)
    return {"name": name, "resources": out}


def resource_group(*flavors: dict) -> dict:
    """A resource group covering every resource its flavors name, in order of appearance."""
    covered: list[str] = []
    for fq in flavors:
        for r in fq["resources"]:
            if r["name"] not in covered:
                covered.append(r["name"])
    return {"coveredResources": covered, "flavors": list(flavors)}


def cluster_queue(name: str, *groups: dict, cohort: str | None = None, strategy: str | None = None,
                  preemption: Mapping[str, Any] | None = None, namespace_dep: str | None = None,
                  fungibility: Mapping[str, Any] | None = None, fair_weight: str | None = None,
                  admission_checks: Sequence[str] = (), stop_policy: str | None = None) -> dict:
    """MakeClusterQueue(name) with its resource groups (`resource_group(...)`), Cohort, queueing
    strategy (Kueue's default, BestEffortFIFO, when None), preemption policies, flavor
    fungibility, fair sharing weight, and the `dep In [namespace_dep]` namespace selector the
    shared ClusterQueues use (every namespace when None)."""
    if cohort is None:
        # Kueue's webhook refuses limits without a cohort (the Go unit tests skip it): they do
        # nothing there, so they are left out
        groups = tuple({**g, "flavors": [{**fq, "resources": [
            {k: v for k, v in r.items() if k not in ("borrowingLimit", "lendingLimit")}
            for r in fq["resources"]]} for fq in g["flavors"]]} for g in groups)
    selector: dict[str, Any] = {}
    if namespace_dep is not None:
        selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": [namespace_dep]}]}
    spec: dict[str, Any] = {"namespaceSelector": selector, "resourceGroups": list(groups)}
    if cohort is not None:
        spec["cohortName"] = cohort
    if strategy is not None:
        spec["queueingStrategy"] = strategy
    if preemption is not None:
        spec["preemption"] = dict(preemption)
    if fungibility is not None:
        spec["flavorFungibility"] = dict(fungibility)
    if fair_weight is not None:
        spec["fairSharing"] = {"weight": fair_weight}
    if admission_checks:
        spec["admissionChecks"] = list(admission_checks)
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, *groups: dict, parent: str | None = None, fair_weight: str | None = None) -> dict:
    """MakeCohort(name) with its parent and resource groups."""
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = list(groups)
    if fair_weight is not None:
        spec["fairSharing"] = {"weight": fair_weight}
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, ns: str, cq: str) -> dict:
    return {"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq}}


def pod_set(name: str = "main", count: int = 1, *, min_count: int | None = None,
            requests: Mapping[str, str] | None = None, node_selector: Mapping[str, str] | None = None) -> dict:
    """MakePodSet(name, count).Request(...) (one container with those requests)."""
    container: dict[str, Any] = {"name": "c", "resources": {"requests": dict(requests or {})}}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    out: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def workload(name: str, ns: str, *, queue: str | None = None, pod_sets: Sequence[dict] | None = None,
             requests: Mapping[str, str] | None = None, priority: int | None = None,
             created: float | None = None, uid: str | None = None, job_uid: str | None = None,
             annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None) -> dict:
    """MakeWorkload(name, ns): one PodSet `main` of one pod with `requests` (Request(...)) unless
    `pod_sets` are given. `created` is Creation(now + created seconds); without it the workload
    has Go's zero creation time, as in the Go test."""
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid or name}
    if created is not None:
        metadata["creationTimestamp"] = timestamp(created)
    merged_labels = dict(labels or {})
    if job_uid is not None:
        merged_labels[JOB_UID_LABEL] = job_uid
    if merged_labels:
        metadata["labels"] = merged_labels
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"podSets": list(pod_sets) if pod_sets is not None else [pod_set(requests=requests)]}
    if queue is not None:
        spec["queueName"] = queue
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": V1BETA2, "kind": "Workload", "metadata": metadata, "spec": spec}


def reserve_quota(wl: dict, cq: str, pod_sets: Mapping[str, tuple[Mapping[str, str], int | None]], *,
                  admitted: bool = True, extra_conditions: Iterable[dict] = ()) -> dict:
    """ReserveQuotaAt(MakeAdmission(cq).PodSets(...)).AdmittedAt(admitted): `pod_sets` maps each
    PodSet to (resource -> flavor, count); a count of None is the PodSet's own count."""
    counts = {ps["name"]: ps.get("count", 1) for ps in wl["spec"]["podSets"]}
    psas = [{"name": name, "flavors": dict(flavors), "count": counts[name] if count is None else count}
            for name, (flavors, count) in pod_sets.items()]
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                   "message": f"Quota reserved in ClusterQueue {cq}"}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted",
                           "message": "The workload is admitted"})
    conditions.extend(extra_conditions)
    return {**wl, "status": {"admission": {"clusterQueue": cq, "podSetAssignments": psas},
                             "conditions": conditions}}


# ---------------------------------------------------------------- the shared cluster


FLAVORS = ("default", "on-demand", "spot", "model-a")
NAMESPACES = {"default": {}, "eng-alpha": {"dep": "eng"}, "eng-beta": {"dep": "eng"},
              "eng-gamma": {"dep": "eng"}, "sales": {"dep": "sales"}, "lend": {"dep": "lend"}}


def shared_cluster_queues() -> list[dict]:
    """The ClusterQueues every case of TestSchedule has."""
    return [
        cluster_queue("sales", resource_group(flavor_quotas("default", cpu=("50", "0"))),
                      strategy="StrictFIFO", namespace_dep="sales"),
        cluster_queue("eng-alpha",
                      resource_group(flavor_quotas("on-demand", cpu=("50", "50")),
                                     flavor_quotas("spot", cpu=("100", "0"))),
                      cohort="eng", strategy="StrictFIFO", namespace_dep="eng"),
        cluster_queue("eng-beta",
                      resource_group(flavor_quotas("on-demand", cpu=("50", "10")),
                                     flavor_quotas("spot", cpu=("0", "100"))),
                      resource_group(flavor_quotas("model-a", **{"example.com/gpu": ("20", "0")})),
                      cohort="eng", strategy="StrictFIFO", namespace_dep="eng",
                      preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
        cluster_queue("flavor-nonexistent-cq", resource_group(flavor_quotas("nonexistent-flavor", cpu="50")),
                      strategy="StrictFIFO"),
        cluster_queue("lend-a", resource_group(flavor_quotas("default", cpu=("3", "", "2"))),
                      cohort="lend", namespace_dep="lend"),
        cluster_queue("lend-b", resource_group(flavor_quotas("default", cpu=("2", "", "2"))),
                      cohort="lend", namespace_dep="lend"),
    ]


def shared_local_queues() -> list[dict]:
    return [
        local_queue("main", "sales", "sales"),
        local_queue("blocked", "sales", "eng-alpha"),
        local_queue("main", "eng-alpha", "eng-alpha"),
        local_queue("main", "eng-beta", "eng-beta"),
        local_queue("flavor-nonexistent-queue", "sales", "flavor-nonexistent-cq"),
        local_queue("cq-nonexistent-queue", "sales", "nonexistent-cq"),
        local_queue("lend-a-queue", "lend", "lend-a"),
        local_queue("lend-b-queue", "lend", "lend-b"),
    ]


def schedule(workloads: Sequence[dict], *, additional_cluster_queues: Sequence[dict] = (),
             additional_local_queues: Sequence[dict] = (), cohorts: Sequence[dict] = (),
             objects: Sequence[dict] = (), fair_sharing: bool = False,
             gates: Mapping[str, bool] | None = None, flavors: Sequence[dict] | None = None,
             cluster_queues: Sequence[dict] | None = None, local_queues: Sequence[dict] | None = None,
             ) -> PassResult:
    """One scheduling cycle over the shared cluster and the case's own objects."""
    cluster = [
        *(namespace(name, labels) for name, labels in NAMESPACES.items()),
        *(flavors if flavors is not None else [flavor(name) for name in FLAVORS]),
        *(cluster_queues if cluster_queues is not None else shared_cluster_queues()),
        *additional_cluster_queues,
        *(local_queues if local_queues is not None else shared_local_queues()),
        *additional_local_queues,
        *cohorts,
        *objects,
        *workloads,
    ]
    return run(cluster, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})),
               config=FAIR if fair_sharing else None)


# ---------------------------------------------------------------- what the Go test compares


def assignments(result: PassResult) -> dict[str, dict]:
    """Every admission in the cache after the cycle (wantAssignments): workload -> cluster
    queue and, per PodSet, flavors and count."""
    return {w.key: {"clusterQueue": w.cluster_queue,
                    "podSets": {ps.name: (dict(ps.flavors), ps.count) for ps in w.pod_sets}}
            for w in result.workloads if holds_admission(w)}


def admission(cq: str, **pod_sets: tuple[Mapping[str, str], int]) -> dict:
    """What `assignments` gives for one workload: PodSet -> (resource -> flavor, count)."""
    return {"clusterQueue": cq, "podSets": {name: (dict(f), c) for name, (f, c) in pod_sets.items()}}


def condition(result: PassResult, name: str, ns: str, cond_type: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of a workload's condition, None when it has none."""
    for c in result_of(result, name, ns).conditions:
        if c.type == cond_type:
            return c.status, c.reason, c.message
    return None


def event_reasons(result: PassResult) -> list[tuple[str, str, str]]:
    """(workload key, reason, type) of every event, for Go's events compared without messages."""
    return sorted((e.key, e.reason, e.type) for e in result.events)


def preemption_message(uid: str, job_uid: str, why: str, preemptor: str, preemptee: str) -> str:
    """The message of a preempted workload's Evicted and Preempted conditions."""
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


def assert_admitted_now(result: PassResult, name: str, ns: str, cq: str) -> None:
    """Quota reserved and admitted by the cycle (no admission checks), with Kueue's messages."""
    assert condition(result, name, ns, "QuotaReserved") == (
        "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
    assert condition(result, name, ns, "Admitted") == ("True", "Admitted", "The workload is admitted")


def assert_waiting(result: PassResult, name: str, ns: str, message: str) -> None:
    """Left waiting by the cycle as the Go runners show it: QuotaReserved=False, reason Pending
    (UnadmittedWorkloadsObservability off), no Admitted condition."""
    assert condition(result, name, ns, "QuotaReserved") == ("False", "Pending", message)
    assert condition(result, name, ns, "Admitted") is None


def assert_preempted(result: PassResult, name: str, ns: str, reason: str, message: str) -> None:
    """Preempted by the cycle: Evicted (Preempted) and Preempted (`reason`) with the message."""
    assert condition(result, name, ns, "Evicted") == ("True", "Preempted", message)
    assert condition(result, name, ns, "Preempted") == ("True", reason, message)
