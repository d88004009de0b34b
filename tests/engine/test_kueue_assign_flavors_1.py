"""Kueue's TestAssignFlavors (pkg/scheduler/flavorassigner/flavorassigner_test.go, API v1beta2),
its first cases (up to "with reclaimable pods; reclaimablePods off"), run as scheduling cycles.

The Go test calls the flavor assigner on a ClusterQueue snapshot to which it adds usage by hand,
with a fake preemption oracle (which says "Preempt" for any flavor/resource it is not told about).
Here each case builds the same cluster as objects: the Go test's ResourceFlavors, the
ClusterQueue `test-clusterqueue` (and `test-secondary-clusterqueue` in the same Cohort), ADMITTED
workloads holding exactly the case's usage, and the case's workload `wl` pending; one cycle runs,
and what it shows is compared with the Go expectation:

* Fit: `wl` is admitted with the flavor the Go assignment gives each resource of each PodSet;
* Preempt (the oracle says preemption is possible): the usage is made preemptible (priority 0
  against the workload's 100, and ClusterQueue preemption policies under which Kueue would
  preempt it; the Go ClusterQueues carry none, since the oracle stands for them): `wl` waits with
  the QuotaReserved message Kueue builds from the PodSets' Status reasons, followed by
  ". Pending the preemption of N workload(s)";
* NoFit: `wl` is inadmissible with that message, and (UnadmittedWorkloadsObservability being on)
  the Go Assignment's NoFitReason as the condition's reason.

The Go flavors b_one, b_two and taint_and_toleration are named b-one, b-two and
taint-and-toleration here (the API server refuses underscores in names); the reasons quoting them
change with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import result_of, run
from .kueue_schedule import (
    admission,
    assert_admitted_now,
    assignments,
    cluster_queue,
    cohort,
    condition,
    flavor_quotas,
    local_queue,
    namespace,
    reserve_quota,
    resource_group,
    workload,
)

CQ = "test-clusterqueue"
SECONDARY = "test-secondary-clusterqueue"
COHORT = "test-cohort"
NS = "default"
GPU = "example.com/gpu"
WL = "wl"

SPOT_TAINT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
TAINTED_REASON = "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"

# preemption policies under which Kueue preempts the cases' usage (see the module docstring)
WITHIN_CQ = {"withinClusterQueue": "LowerPriority"}
WITHIN_CQ_AND_RECLAIM = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


# ---------------------------------------------------------------- objects


def _flavor(name: str, *, labels: Mapping[str, str] | None = None, taints: Sequence[dict] = (),
            tolerations: Sequence[dict] = ()) -> dict:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = dict(labels)
    if taints:
        spec["nodeTaints"] = list(taints)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": spec}


def go_flavors() -> list[dict]:
    """The ResourceFlavors TestAssignFlavors defines (its TAS flavors, unused by these cases, left out)."""
    return [
        _flavor("default"),
        _flavor("one", labels={"type": "one"}),
        _flavor("two", labels={"type": "two"}),
        _flavor("b-one", labels={"b_type": "one"}),
        _flavor("b-two", labels={"b_type": "two"}),
        _flavor("tainted", taints=[SPOT_TAINT]),
        _flavor("taint-and-toleration", taints=[SPOT_TAINT], tolerations=[SPOT_TOLERATION]),
        _flavor("label-x-a", labels={"x": "a"}),
        _flavor("label-xy-b", labels={"x": "b", "y": "k"}),
    ]


def ps(name: str = "main", count: int = 1, *, requests: Mapping[str, str] | None = None,
       node_selector: Mapping[str, str] | None = None, tolerations: Sequence[dict] = (),
       required_terms: Sequence[Sequence[tuple[str, str, Sequence[str]]]] = ()) -> dict:
    """MakePodSet(name, count) with one container requesting `requests`, its nodeSelector,
    tolerations and required node affinity (terms of (key, operator, values) expressions)."""
    spec: dict[str, Any] = {"restartPolicy": "Never",
                            "containers": [{"name": "c", "resources": {"requests": dict(requests or {})}}]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if required_terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": k, "operator": op, "values": list(v)}
                                                        for k, op, v in term]} for term in required_terms]}}}
    return {"name": name, "count": count, "template": {"spec": spec}}


def pending(*pod_sets: dict, priority: int | None = None, reclaimable: Mapping[str, int] | None = None) -> dict:
    """The case's workload `wl`, pending in the test ClusterQueue's LocalQueue."""
    wl = workload(WL, NS, queue="lq", pod_sets=list(pod_sets), priority=priority)
    if reclaimable:
        wl["status"] = {"reclaimablePods": [{"name": n, "count": c} for n, c in reclaimable.items()]}
    return wl


def used(name: str, cq: str, flavor: str, requests: Mapping[str, str], *, priority: int = 0) -> dict:
    """An admitted workload holding `requests` of `flavor` in ClusterQueue `cq` (the Go case's
    clusterQueueUsage or secondaryClusterQueueUsage for that flavor)."""
    queue = "lq" if cq == CQ else "lq-secondary"
    wl = workload(name, NS, queue=queue, requests=requests, priority=priority)
    return reserve_quota(wl, cq, {"main": ({r: flavor for r in requests}, None)}, admitted=True)


def cycle(cq: dict, wl: dict, *, secondary: dict | None = None, usage: Sequence[dict] = (),
          gates: Mapping[str, bool] | None = None) -> PassResult:
    """One scheduling cycle of the case's cluster."""
    objects = [namespace(NS), *go_flavors(), cq, local_queue("lq", NS, CQ)]
    if cq["spec"].get("cohortName"):
        objects.append(cohort(cq["spec"]["cohortName"]))
    if secondary is not None:
        objects += [secondary, local_queue("lq-secondary", NS, SECONDARY)]
    objects += [*usage, wl]
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})))


# ---------------------------------------------------------------- what is compared


def couldnt(pod_set: str, *reasons: str) -> str:
    """Kueue's message for a PodSet that does not simply fit: its Status reasons, sorted."""
    return f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"


def assert_fit(result: PassResult, **pod_sets: tuple[Mapping[str, str], int]) -> None:
    """wantRepMode Fit: admitted by the cycle with these flavors (and counts) per PodSet."""
    assert result_of(result, WL, NS).status == "Admitted"
    assert_admitted_now(result, WL, NS, CQ)
    assert assignments(result)[f"{NS}/{WL}"] == admission(CQ, **pod_sets)


def assert_no_fit(result: PassResult, reason: str, message: str) -> None:
    """wantRepMode NoFit: inadmissible, the Go NoFitReason as the reason, Kueue's message."""
    got = result_of(result, WL, NS)
    assert got.status == "Inadmissible"
    assert condition(result, WL, NS, "QuotaReserved") == ("False", reason, message)
    assert f"{NS}/{WL}" not in assignments(result)


def assert_preempting(result: PassResult, message: str, preempted: Sequence[str]) -> None:
    """wantRepMode Preempt with the oracle saying preemption is possible: waiting for the
    preemption of the workloads named (those holding the usage of the flavors chosen)."""
    got = result_of(result, WL, NS)
    assert got.status == "Pending"
    status, _, text = condition(result, WL, NS, "QuotaReserved")
    assert (status, text) == ("False", f"{message}. Pending the preemption of {len(preempted)} workload(s)")
    evicted = sorted(w.workload.name for w in result.workloads
                     if w.workload.name != WL and condition(result, w.workload.name, NS, "Evicted") is not None
                     and condition(result, w.workload.name, NS, "Evicted")[0] == "True")
    assert evicted == sorted(preempted)


# ---------------------------------------------------------------- single flavor


def test_single_flavor_fits():
    """"single flavor, fits"."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", cpu="1", memory="2Mi")))
    result = cycle(cq, pending(ps(requests={"cpu": "1", "memory": "1Mi"})))
    assert_fit(result, main=({"cpu": "default", "memory": "default"}, 1))


def test_single_flavor_fits_tainted_flavor():
    """"single flavor, fits tainted flavor": the PodSet tolerates the flavor's taint."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("tainted", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1"}, tolerations=[SPOT_TOLERATION])))
    assert_fit(result, main=({"cpu": "tainted"}, 1))


def test_single_flavor_fits_tainted_flavor_with_toleration():
    """"single flavor, fits tainted flavor with toleration": the flavor's own toleration covers
    its taint."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("taint-and-toleration", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1"})))
    assert_fit(result, main=({"cpu": "taint-and-toleration"}, 1))


def test_single_flavor_used_resources_doesnt_fit():
    """"single flavor, used resources, doesn't fit": 3 of 4 CPUs used; 2 more need preemption
    (Preempt)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", cpu="4")), preemption=WITHIN_CQ)
    result = cycle(cq, pending(ps(requests={"cpu": "2"}), priority=100),
                   usage=[used("usage-default", CQ, "default", {"cpu": "3"})])
    assert_preempting(result, couldnt("main", "insufficient unused quota for cpu in flavor default, 1 more needed"),
                      ["usage-default"])


# ---------------------------------------------------------------- resource groups


def test_multiple_resource_groups_fits():
    """"multiple resource groups, fits"."""
    cq = cluster_queue(CQ,
                       resource_group(flavor_quotas("one", cpu="2"), flavor_quotas("two", cpu="4")),
                       resource_group(flavor_quotas("b-one", memory="1Gi"), flavor_quotas("b-two", memory="5Gi")))
    result = cycle(cq, pending(ps(requests={"cpu": "3", "memory": "10Mi"})))
    assert_fit(result, main=({"cpu": "two", "memory": "b-one"}, 1))


def test_multiple_resource_groups_one_could_fit_with_preemption_other_doesnt_fit():
    """"multiple resource groups, one could fit with preemption, other doesn't fit" (NoFit): the
    failing memory group's reason is the PodSet's only one."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="3")),
                       resource_group(flavor_quotas("b-one", memory="1Mi")))
    result = cycle(cq, pending(ps(requests={"cpu": "3", "memory": "10Mi"})),
                   usage=[used("usage-one", CQ, "one", {"cpu": "1"})])
    assert_no_fit(result, "ExceedsMaxQuota", couldnt(
        "main", "insufficient quota for memory in flavor b-one, previously considered podsets requests (0) + "
                "current podset request (10Mi) > maximum capacity (1Mi)"))


def test_multiple_resource_groups_with_multiple_resources_fits():
    """"multiple resource groups with multiple resources, fits"."""
    cq = cluster_queue(CQ,
                       resource_group(flavor_quotas("one", cpu="2", memory="1Gi"),
                                      flavor_quotas("two", cpu="4", memory="15Mi")),
                       resource_group(flavor_quotas("b-one", **{GPU: "4"}), flavor_quotas("b-two", **{GPU: "2"})))
    result = cycle(cq, pending(ps(requests={"cpu": "3", "memory": "10Mi", GPU: "3"})))
    assert_fit(result, main=({"cpu": "two", "memory": "two", GPU: "b-one"}, 1))


def test_multiple_resource_groups_with_multiple_resources_fits_with_different_modes():
    """"multiple resource groups with multiple resources, fits with different modes" (Preempt):
    cpu fits flavor two, memory of two needs the preemption of the ClusterQueue's own 10Mi, and
    GPU of b-one the reclaim of the 2 GPUs the secondary ClusterQueue borrows. The Go oracle
    says Preempt for both (borrowing 1 after it for memory, which the message does not show)."""
    cq = cluster_queue(CQ,
                       resource_group(flavor_quotas("one", cpu="2", memory="1Gi"),
                                      flavor_quotas("two", cpu="4", memory="15Mi")),
                       resource_group(flavor_quotas("b-one", **{GPU: "4"})),
                       cohort=COHORT, preemption=WITHIN_CQ_AND_RECLAIM)
    secondary = cluster_queue(SECONDARY, resource_group(flavor_quotas("b-one", **{GPU: "0"})), cohort=COHORT)
    result = cycle(cq, pending(ps(requests={"cpu": "3", "memory": "10Mi", GPU: "3"}), priority=100),
                   secondary=secondary,
                   usage=[used("usage-two", CQ, "two", {"memory": "10Mi"}),
                          used("usage-secondary-b-one", SECONDARY, "b-one", {GPU: "2"})])
    assert_preempting(result, couldnt(
        "main",
        "insufficient quota for cpu in flavor one, previously considered podsets requests (0) + current podset "
        "request (3) > maximum capacity (2)",
        "insufficient unused quota for memory in flavor two, 5Mi more needed",
        "insufficient unused quota for example.com/gpu in flavor b-one, 1 more needed"),
        ["usage-secondary-b-one", "usage-two"])


def test_multiple_resources_in_a_group_doesnt_fit():
    """"multiple resources in a group, doesn't fit" (NoFit)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="2", memory="1Gi"),
                                          flavor_quotas("two", cpu="4", memory="5Mi")))
    result = cycle(cq, pending(ps(requests={"cpu": "3", "memory": "10Mi"})))
    assert_no_fit(result, "ExceedsMaxQuota", couldnt(
        "main",
        "insufficient quota for cpu in flavor one, previously considered podsets requests (0) + current podset "
        "request (3) > maximum capacity (2)",
        "insufficient quota for memory in flavor two, previously considered podsets requests (0) + current podset "
        "request (10Mi) > maximum capacity (5Mi)"))


# ---------------------------------------------------------------- node selectors and affinity


def test_multiple_flavors_fits_a_node_selector():
    """"multiple flavors, fits a node selector": the selector's ignored1:foo and the affinity
    term on ignored2 name no flavor's label and are ignored."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("two", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1"}, node_selector={"type": "two", "ignored1": "foo"},
                                  required_terms=[[("ignored2", "In", ["bar"])]])))
    assert_fit(result, main=({"cpu": "two"}, 1))


def test_multiple_flavors_fits_with_node_affinity():
    """"multiple flavors, fits with node affinity"."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4", memory="1Gi"),
                                          flavor_quotas("two", cpu="4", memory="1Gi")))
    result = cycle(cq, pending(ps(requests={"cpu": "1", "memory": "1Mi"}, node_selector={"ignored1": "foo"},
                                  required_terms=[[("type", "In", ["two"])]])))
    assert_fit(result, main=({"cpu": "two", "memory": "two"}, 1))


def test_multiple_flavors_node_affinity_fits_any_flavor():
    """"multiple flavors, node affinity fits any flavor": although the second term selects two,
    the first practically matches any flavor; and since the terms are ORed, any flavor can be
    selected."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("two", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1"}, required_terms=[[("ignored2", "In", ["bar"])],
                                                                        [("cpuType", "In", ["two"])]])))
    assert_fit(result, main=({"cpu": "one"}, 1))


def test_multiple_flavors_doesnt_fit_node_affinity():
    """"multiple flavors, doesn't fit node affinity" (NoFit)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("two", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1"}, required_terms=[[("type", "In", ["three"])]])))
    assert_no_fit(result, "NoMatchingFlavor", couldnt("main", "flavor one doesn't match node affinity",
                                                      "flavor two doesn't match node affinity"))


# ---------------------------------------------------------------- several PodSets, borrowing


def test_multiple_specs_fit_different_flavors():
    """"multiple specs, fit different flavors"."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("two", cpu="10")))
    result = cycle(cq, pending(ps("driver", requests={"cpu": "5"}), ps("worker", requests={"cpu": "3"})))
    assert_fit(result, driver=({"cpu": "two"}, 1), worker=({"cpu": "one"}, 1))


def test_multiple_specs_fits_borrowing():
    """"multiple specs, fits borrowing": 10 CPUs and 5Gi on a nominal quota of 2 and 2Gi, the rest
    borrowed from the secondary ClusterQueue (Fit, borrowing)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", cpu=("2", "98"), memory="2Gi")), cohort=COHORT)
    secondary = cluster_queue(SECONDARY, resource_group(flavor_quotas("default", cpu="198", memory="198Gi")),
                              cohort=COHORT)
    result = cycle(cq, pending(ps("driver", requests={"cpu": "4", "memory": "1Gi"}),
                               ps("worker", requests={"cpu": "6", "memory": "4Gi"})), secondary=secondary)
    assert_fit(result, driver=({"cpu": "default", "memory": "default"}, 1),
               worker=({"cpu": "default", "memory": "default"}, 1))


def test_not_enough_space_to_borrow():
    """"not enough space to borrow" (NoFit): the secondary ClusterQueue lends nothing."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="1")), cohort=COHORT)
    secondary = cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu=("10", "", "0"))), cohort=COHORT)
    result = cycle(cq, pending(ps(requests={"cpu": "2"})), secondary=secondary,
                   usage=[used("usage-secondary-one", SECONDARY, "one", {"cpu": "9"})])
    assert_no_fit(result, "ExceedsMaxQuota", couldnt(
        "main", "insufficient quota for cpu in flavor one, previously considered podsets requests (0) + current "
                "podset request (2) > maximum capacity (1)"))


# ---------------------------------------------------------------- preemption


def test_past_max_but_can_preempt_in_cluster_queue():
    """"past max, but can preempt in ClusterQueue" (Preempt): the ClusterQueue uses 9 CPUs of its
    nominal 2 plus borrowing limit 8; 2 more fit its nominal quota once its own usage goes."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu=("2", "8"))), cohort=COHORT, preemption=WITHIN_CQ)
    secondary = cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu="98")), cohort=COHORT)
    result = cycle(cq, pending(ps(requests={"cpu": "2"}), priority=100), secondary=secondary,
                   usage=[used("usage-one", CQ, "one", {"cpu": "9"}),
                          used("usage-secondary-one", SECONDARY, "one", {"cpu": "9"})])
    assert_preempting(result, couldnt("main", "insufficient unused quota for cpu in flavor one, 1 more needed"),
                      ["usage-one"])


def test_past_min_but_can_preempt_in_cluster_queue():
    """"past min, but can preempt in ClusterQueue" (Preempt)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="2")), preemption=WITHIN_CQ)
    result = cycle(cq, pending(ps(requests={"cpu": "2"}), priority=100),
                   usage=[used("usage-one", CQ, "one", {"cpu": "1"})])
    assert_preempting(result, couldnt("main", "insufficient unused quota for cpu in flavor one, 1 more needed"),
                      ["usage-one"])


def test_past_min_but_can_preempt_in_cohort_and_cluster_queue():
    """"past min, but can preempt in cohort and ClusterQueue" (Preempt): the ClusterQueue uses 2
    of its 3 CPUs, the secondary 8 of its 7; the cohort's 10 are all used. Preempting the
    ClusterQueue's own 2 CPUs leaves room for the 2 requested without borrowing (Kueue's minimal
    set: reclaiming the secondary's workload as well is not needed)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="3")), cohort=COHORT,
                       preemption=WITHIN_CQ_AND_RECLAIM)
    secondary = cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu="7")), cohort=COHORT)
    result = cycle(cq, pending(ps(requests={"cpu": "2"}), priority=100), secondary=secondary,
                   usage=[used("usage-one", CQ, "one", {"cpu": "2"}),
                          used("usage-secondary-one", SECONDARY, "one", {"cpu": "8"})])
    assert_preempting(result, couldnt("main", "insufficient unused quota for cpu in flavor one, 2 more needed"),
                      ["usage-one"])


def test_can_only_preempt_flavors_that_match_affinity():
    """"can only preempt flavors that match affinity" (Preempt on two; one's usage is left)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("two", cpu="4")),
                       preemption=WITHIN_CQ)
    result = cycle(cq, pending(ps(requests={"cpu": "2"}, node_selector={"type": "two"}), priority=100),
                   usage=[used("usage-one", CQ, "one", {"cpu": "3"}), used("usage-two", CQ, "two", {"cpu": "3"})])
    assert_preempting(result, couldnt("main", "flavor one doesn't match node affinity",
                                      "insufficient unused quota for cpu in flavor two, 1 more needed"),
                      ["usage-two"])


def test_each_podset_requires_preemption_on_a_different_flavor():
    """"each podset requires preemption on a different flavor" (Preempt): the launcher on one,
    the workers (tolerating the taint) on tainted."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4"), flavor_quotas("tainted", cpu="10")),
                       preemption=WITHIN_CQ)
    result = cycle(cq, pending(ps("launcher", requests={"cpu": "2"}),
                               ps("workers", 10, requests={"cpu": "1"}, tolerations=[SPOT_TOLERATION]),
                               priority=100),
                   usage=[used("usage-one", CQ, "one", {"cpu": "3"}),
                          used("usage-tainted", CQ, "tainted", {"cpu": "3"})])
    launcher = couldnt("launcher", "insufficient unused quota for cpu in flavor one, 1 more needed", TAINTED_REASON)
    workers = couldnt("workers",
                      "insufficient quota for cpu in flavor one, previously considered podsets requests (2) + current "
                      "podset request (10) > maximum capacity (4)",
                      "insufficient unused quota for cpu in flavor tainted, 3 more needed")
    assert_preempting(result, f"{launcher}; {workers}", ["usage-one", "usage-tainted"])


# ---------------------------------------------------------------- resources the ClusterQueue lacks, zero requests


def test_resource_not_listed_in_cluster_queue():
    """"resource not listed in clusterQueue" (NoFit, QuotaCheckBlockUndeclared as in the runner)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="4")))
    result = cycle(cq, pending(ps(requests={GPU: "2"})))
    assert_no_fit(result, "NoMatchingFlavor", couldnt("main", "resource example.com/gpu unavailable in ClusterQueue"))


def test_zero_resource_request_not_in_cluster_queue_should_succeed():
    """"zero resource request not in clusterQueue should succeed": the GPU request of 0 needs no
    flavor."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", cpu="4")))
    result = cycle(cq, pending(ps(requests={"cpu": "1", GPU: "0"})))
    assert_fit(result, main=({"cpu": "default"}, 1))


def test_zero_resource_request_defined_in_cluster_queue_should_get_flavor_assigned():
    """"zero resource request defined in clusterQueue should get flavor assigned"."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", cpu="4", **{GPU: "4"})))
    result = cycle(cq, pending(ps(requests={"cpu": "1", GPU: "0"})))
    assert_fit(result, main=({"cpu": "default", GPU: "default"}, 1))


# ---------------------------------------------------------------- pods, reclaimable pods


def test_num_pods_fit():
    """"num pods fit"."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", pods="3", cpu="10")))
    result = cycle(cq, pending(ps(count=3, requests={"cpu": "1"})))
    assert_fit(result, main=({"cpu": "default", "pods": "default"}, 3))


def test_num_pods_dont_fit():
    """"num pods don't fit" (NoFit)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", pods="2", cpu="10")))
    result = cycle(cq, pending(ps(count=3, requests={"cpu": "1"})))
    assert_no_fit(result, "ExceedsMaxQuota", couldnt(
        "main", "insufficient quota for pods in flavor default, previously considered podsets requests (0) + "
                "current podset request (3) > maximum capacity (2)"))


def test_with_reclaimable_pods_reclaimable_pods_on():
    """"with reclaimable pods; reclaimablePods on": 2 of the 5 pods are reclaimable, 3 are
    assigned (3 pods of quota)."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", pods="3", cpu="10")))
    result = cycle(cq, pending(ps(count=5, requests={"cpu": "1"}), reclaimable={"main": 2}))
    assert_fit(result, main=({"cpu": "default", "pods": "default"}, 3))


def test_with_reclaimable_pods_reclaimable_pods_off():
    """"with reclaimable pods; reclaimablePods off": the gate off, all 5 pods are assigned."""
    cq = cluster_queue(CQ, resource_group(flavor_quotas("default", pods="5", cpu="10")))
    result = cycle(cq, pending(ps(count=5, requests={"cpu": "1"}), reclaimable={"main": 2}),
                   gates={"ReclaimablePods": False})
    assert_fit(result, main=({"cpu": "default", "pods": "default"}, 5))
