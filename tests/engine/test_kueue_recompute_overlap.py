"""Kueue's TestScheduleRecomputePreemptionTargets (pkg/scheduler): preemptors of one scheduling
cycle whose preemption targets overlap, with and without RecomputeAssignmentUponPreemptionTargetsOverlap
(the later preemptor recomputes its targets instead of being skipped).

Each test builds the case's cluster (the ResourceFlavors, ClusterQueues and LocalQueues every
case shares, plus the case's own), runs one scheduling cycle (the Go test's single
`scheduler.schedule`) with the case's feature gates and, where the case enables it, fair sharing
(the Go runner's empty `config.FairSharing`), and checks what the Go case checks: the conditions
of the workloads it lists, the admissions held after the cycle (`wantAssignments`: those already
admitted included), and the workloads left in the queues (`wantLeft`, status Pending) or parked
as inadmissible (`wantInadmissibleLeft`, status Inadmissible). The Go cases' metric expectations
(`wantPreemptionTargetRecomputations`, `wantSkippedPreemptions`) have no engine equivalent; their
comments are kept in the docstrings."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from scheduler.engine import Engine
from scheduler.features import DEFAULT_GATES
from scheduler.model import Condition
from scheduler.results import PassResult

from .factories import (
    HOSTNAME,
    NOW,
    V1BETA2,
    admitted,
    cluster_queue,
    domains_json,
    local_queue,
    node,
    parse,
    pod_set,
    queue_with_policy,
    resource_flavor,
    result_of,
    run,
    timestamp,
    topology,
    workload,
)
from .test_fair_sharing import FAIR
from .test_kueue_cycle_extra import admission, condition, holds_admission, left, want
from .test_kueue_scheduler_library import NO_RESERVATION

ENG = "eng-alpha"
DEFAULT_NS = "default"
DEFAULT_FLAVOR = "default"
ON_DEMAND = "on-demand"
ANY = "Any"
LOWER = "LowerPriority"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
WAITING_FOR_QUOTA = "WaitingForQuota"
OVERLAP = "Workload has overlapping preemption targets with another workload"
DEFERRED_FIT = f"{OVERLAP}, but will fit after these preemptions complete"
TAS_SINGLE_LEVEL = "tas-single-level"

# The gates the Go cases set (all known to the engine)
TAS_DISABLED = {"RecomputeAssignmentUponPreemptionTargetsOverlap": True, "TopologyAwareScheduling": False,
                "TASRecomputeAssignmentWithinSchedulingCycle": False}
TAS_RECOMPUTATION_DISABLED = {"RecomputeAssignmentUponPreemptionTargetsOverlap": True,
                              "TopologyAwareScheduling": True,
                              "TASRecomputeAssignmentWithinSchedulingCycle": False}
LEGACY = {"RecomputeAssignmentUponPreemptionTargetsOverlap": False, "TopologyAwareScheduling": False,
          "TASRecomputeAssignmentWithinSchedulingCycle": False}
SIBLING_TAS = {"TopologyAwareScheduling": True, "TASHandleOverlappingFlavors": True,
               "TASRecomputeAssignmentWithinSchedulingCycle": True,
               "RecomputeAssignmentUponPreemptionTargetsOverlap": True, "TASCachingRemainingResources": True}


# ---------------------------------------------------------------- cluster objects


def cohort(name: str, parent: str | None = None, *, cpu: object = None) -> dict:
    """A Cohort, with a resource group of `cpu` on the flavor `default` when given."""
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if cpu is not None:
        spec["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
            {"name": DEFAULT_FLAVOR, "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}]
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def default_cohorts() -> list[dict]:
    """The Go test's defaultCohorts():

                         root-cohort (nominal: 3005)
                       /              |              \\
             parent-cohort-a   parent-cohort-b   parent-cohort-c
               (nominal: 0)     (nominal: 0)      (nominal: 0)
                /        \\            |                 |
             cq-hero   cq-noisy    cq-tiny           cq-rest
           (nom: 3000) (nom: 0)   (nom: 50)         (nom: 0)
    """
    return [
        cohort("root-cohort", cpu=3005),
        cohort("parent-cohort-a", "root-cohort", cpu=0),
        cohort("parent-cohort-b", "root-cohort"),
        cohort("parent-cohort-c", "root-cohort"),
    ]


def shared_objects() -> list[dict]:
    """The ResourceFlavors, ClusterQueues and LocalQueues the Go test creates for every case."""
    cqs = [("cq-hero", 3000, "parent-cohort-a"), ("cq-noisy", 0, "parent-cohort-a"),
           ("cq-tiny", 50, "parent-cohort-b"), ("cq-rest", 0, "parent-cohort-c")]
    return [
        resource_flavor(DEFAULT_FLAVOR, topology_name=None),
        resource_flavor(ON_DEMAND, topology_name=None),
        *(queue_with_policy(name, cpu=cpu, cohort=co, reclaim=ANY, within=LOWER, flavor=DEFAULT_FLAVOR)
          for name, cpu, co in cqs),
        *(local_queue(f"lq-{name.removeprefix('cq-')}", namespace=ENG, cluster_queue_name=name)
          for name, _, _ in cqs),
    ]


def kueue_workload(name: str, namespace: str, queue: str, *, uid: str, job_uid: str | None = None,
                   priority: int | None = None, created: float | None = None, cpu: str | None = None,
                   pod_sets: list[dict] | None = None) -> dict:
    """A Workload as Kueue's MakeWorkload builds it: its UID, the job UID label when given, and
    one PodSet `main` of one pod requesting `cpu` unless `pod_sets` are given. `created` is its
    creation time in seconds from NOW (none, as Go's zero time, unless given)."""
    wl = workload(name, namespace=namespace, queue=queue, priority=priority, created=created,
                  pod_sets=pod_sets if pod_sets is not None else [pod_set("main", cpu=cpu)])
    wl["metadata"]["uid"] = uid
    if job_uid is not None:
        wl["metadata"]["labels"] = {JOB_UID_LABEL: job_uid}
    return wl


def reserved_in(wl: dict, cq: str, flavor: str, *, host: str | None = None) -> dict:
    """`wl` as Go's ReserveQuotaAt(admission, now).AdmittedAt(true, now) leaves it: holding quota
    in `cq` on `flavor` (on `host`, at the hostname level, for a TAS PodSet)."""
    assignments = {"main": domains_json([HOSTNAME], [(host, 1)])} if host is not None else {}
    out = admitted(wl, assignments=assignments, cluster_queue_name=cq, flavor=flavor)
    out["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": timestamp(0)},
        {"type": "Admitted", "status": "True", "reason": "ByTest",
         "message": f"Admitted by ClusterQueue {cq}", "lastTransitionTime": timestamp(0)},
    ]
    return out


# ---------------------------------------------------------------- one cycle and what it gives


def schedule(objects: list[dict], *, fair_sharing: bool, gate_values: dict[str, bool] | None = None) -> PassResult:
    """One scheduling cycle with the case's feature gates, fair sharing on when the case enables it."""
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gate_values or {})),
               config=FAIR if fair_sharing else None)


def assignments(result: PassResult) -> dict:
    """Every admission held after the cycle, those admitted before it included (as the Go test's
    wantAssignments lists them)."""
    return {w.key: admission(w) for w in result.workloads if holds_admission(w)}


def held(cq: str, flavor: str, hosts: list[tuple[str, int]] | None = None) -> dict:
    """A one-PodSet (`main`, one pod) admission on `flavor` for cpu."""
    return want({"main": ({"cpu": flavor}, 1, hosts, None)}, cq)


def assert_untouched(result: PassResult, name: str, namespace: str, cq: str) -> None:
    """Admitted before the cycle and neither evicted nor preempted by it."""
    got = result_of(result, name, namespace)
    assert condition(got, "QuotaReserved") == ("True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
    assert condition(got, "Admitted") == ("True", "ByTest", f"Admitted by ClusterQueue {cq}")
    assert condition(got, "Evicted") is None
    assert condition(got, "Preempted") is None


def assert_preempted(result: PassResult, name: str, namespace: str, cq: str, reason: str, message: str) -> None:
    """Admitted before the cycle and preempted by it (quota still reserved until its pods stop)."""
    got = result_of(result, name, namespace)
    assert condition(got, "QuotaReserved") == ("True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
    assert condition(got, "Admitted") == ("True", "ByTest", f"Admitted by ClusterQueue {cq}")
    assert condition(got, "Evicted") == ("True", "Preempted", message)
    assert condition(got, "Preempted") == ("True", reason, message)


def assert_pending(result: PassResult, name: str, namespace: str, reason: str, message: str) -> None:
    """Not admitted by the cycle: its QuotaReserved condition, and no reservation."""
    got = result_of(result, name, namespace)
    assert condition(got, "QuotaReserved") == ("False", reason, message)
    assert condition(got, "Admitted") == NO_RESERVATION


def preemption_message(uid: str, job_uid: str, why: str, preemptor: str, preemptee: str) -> str:
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


# ---------------------------------------------------------------- two workloads reclaiming nominal quota


def admitted_eng(name: str, cq: str, cpu: str, *, priority: int | None = None) -> dict:
    return reserved_in(kueue_workload(name, ENG, f"lq-{cq.removeprefix('cq-')}", uid=name, priority=priority,
                                      cpu=cpu), cq, DEFAULT_FLAVOR)


def wl_hero(cpu: str) -> dict:
    return kueue_workload("wl-hero", ENG, "lq-hero", uid="wl-hero", job_uid="job-h-uid", cpu=cpu, created=1)


def wl_tiny_pending(cpu: str) -> dict:
    return kueue_workload("wl-tiny-pending", ENG, "lq-tiny", uid="wl-tiny-pending", job_uid="job-t-uid",
                          cpu=cpu, created=0)


REST_BY_TINY_RECLAIM = preemption_message(
    "wl-tiny-pending", "job-t-uid", "reclamation within the cohort",
    "/root-cohort/parent-cohort-b/cq-tiny", "/root-cohort/parent-cohort-c/cq-rest")


def test_with_fair_sharing_hierarchical_nominal_first_prefers_non_borrowing_leaf_cq():
    """"with fair sharing: hierarchical nominal-first prefers non-borrowing leaf CQ".

    Admitted state:
    - wl-noisy-admitted (cq-noisy): uses 3000 CPU (borrowed from cq-hero)
    - wl-tiny-admitted (cq-tiny): uses 60 CPU (borrows 10 from root-cohort)
    - wl-rest-admitted (cq-rest): uses 2995 CPU (borrowed from root-cohort)

    Pending:
    - wl-hero (cq-hero): requests 2990 CPU (fits within its nominal 3000 CPU, so cq-hero is not
      borrowing)
    - wl-tiny-pending (cq-tiny): requests 10 CPU (already borrowing, needs to borrow even more)

    Since cq-rest is borrowing a lot of quota, both cq-hero and cq-tiny initially choose the same
    candidate for preemption (wl-rest-admitted from cq-rest). Within the scheduling cycle,
    wl-tiny-pending is considered before wl-hero (due to Fair Sharing prioritization). So, wl-hero
    would normally be requeued due to overlapping preemption targets. But with
    RecomputePreemptionTargetsUponOverlap featuregate, it refreshes its targets, finds
    wl-noisy-admitted from cq-noisy and preempts it in the same scheduling cycle.

    (Metric: wl-hero initially targeted wl-rest-admitted (same as wl-tiny-pending), then
    recomputed and found wl-noisy-admitted as a non-overlapping alternative: cq-hero new_targets 1.)"""
    objects = [
        *shared_objects(), *default_cohorts(),
        admitted_eng("wl-noisy-admitted", "cq-noisy", "3000"),
        admitted_eng("wl-tiny-admitted", "cq-tiny", "60"),
        admitted_eng("wl-rest-admitted", "cq-rest", "2995"),
        wl_hero("2990"),
        wl_tiny_pending("10"),
    ]
    result = schedule(objects, fair_sharing=True)

    assert_pending(result, "wl-hero", ENG, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "5 more needed. Pending the preemption of 1 workload(s)")
    assert_preempted(result, "wl-noisy-admitted", ENG, "cq-noisy", "InCohortReclamation", preemption_message(
        "wl-hero", "job-h-uid", "reclamation within the cohort",
        "/root-cohort/parent-cohort-a/cq-hero", "/root-cohort/parent-cohort-a/cq-noisy"))
    assert_preempted(result, "wl-rest-admitted", ENG, "cq-rest", "InCohortFairSharing", preemption_message(
        "wl-tiny-pending", "job-t-uid", "Fair Sharing within the cohort",
        "/root-cohort/parent-cohort-b/cq-tiny", "/root-cohort/parent-cohort-c/cq-rest"))
    assert_untouched(result, "wl-tiny-admitted", ENG, "cq-tiny")
    assert_pending(result, "wl-tiny-pending", ENG, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "10 more needed. Pending the preemption of 1 workload(s)")

    assert assignments(result) == {
        "eng-alpha/wl-noisy-admitted": held("cq-noisy", DEFAULT_FLAVOR),
        "eng-alpha/wl-tiny-admitted": held("cq-tiny", DEFAULT_FLAVOR),
        "eng-alpha/wl-rest-admitted": held("cq-rest", DEFAULT_FLAVOR),
    }
    assert left(result, "Pending") == {"cq-hero": ["eng-alpha/wl-hero"], "cq-tiny": ["eng-alpha/wl-tiny-pending"]}
    assert left(result, "Inadmissible") == {}


def test_with_fair_sharing_two_workloads_reclaim_nominal_quota_recompute_preemption_targets_upon_overlap_enabled():
    """"with fair sharing: two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap
    enabled".

    wl-rest-admitted (cq-rest, priority 0) borrows 6055 CPU; wl-hero (cq-hero, 2950 CPU) and
    wl-tiny-pending (cq-tiny, 50 CPU) both reclaim nominal quota from it; wl-rest-pending (cq-rest,
    priority 10, 4000 CPU) also waits.

    (Metric: wl-hero overlapped with wl-tiny-pending on wl-rest-admitted, recomputed, but can only
    fit after the earlier preemptions (from wl-tiny-pending) complete: cq-hero deferred_fit 1.)"""
    objects = [
        *shared_objects(), *default_cohorts(),
        admitted_eng("wl-rest-admitted", "cq-rest", "6055", priority=0),
        wl_hero("2950"),
        wl_tiny_pending("50"),
        kueue_workload("wl-rest-pending", ENG, "lq-rest", uid="wl-rest-pending", cpu="4000", priority=10,
                       created=2),
    ]
    result = schedule(objects, fair_sharing=True)

    assert_pending(result, "wl-hero", ENG, WAITING_FOR_PREEMPTED, DEFERRED_FIT)
    assert_preempted(result, "wl-rest-admitted", ENG, "cq-rest", "InCohortReclamation", REST_BY_TINY_RECLAIM)
    assert_pending(result, "wl-rest-pending", ENG, WAITING_FOR_QUOTA,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "945 more needed")
    assert_pending(result, "wl-tiny-pending", ENG, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "50 more needed. Pending the preemption of 1 workload(s)")

    assert assignments(result) == {"eng-alpha/wl-rest-admitted": held("cq-rest", DEFAULT_FLAVOR)}
    assert left(result, "Pending") == {"cq-hero": ["eng-alpha/wl-hero"], "cq-tiny": ["eng-alpha/wl-tiny-pending"]}
    assert left(result, "Inadmissible") == {"cq-rest": ["eng-alpha/wl-rest-pending"]}


def test_two_workloads_reclaim_nominal_quota_recompute_preemption_targets_upon_overlap_enabled():
    """"two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap enabled"
    (without fair sharing).

    (Metric: wl-hero overlapped with wl-tiny-pending on wl-rest-admitted, recomputed, but can only
    fit after the earlier preemptions (from wl-tiny-pending) complete: cq-hero deferred_fit 1.)"""
    objects = [
        *shared_objects(), *default_cohorts(),
        admitted_eng("wl-rest-admitted", "cq-rest", "6055"),
        wl_hero("2950"),
        wl_tiny_pending("50"),
    ]
    result = schedule(objects, fair_sharing=False)

    assert_pending(result, "wl-hero", ENG, WAITING_FOR_PREEMPTED, DEFERRED_FIT)
    assert_preempted(result, "wl-rest-admitted", ENG, "cq-rest", "InCohortReclamation", REST_BY_TINY_RECLAIM)
    assert_pending(result, "wl-tiny-pending", ENG, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "50 more needed. Pending the preemption of 1 workload(s)")

    assert assignments(result) == {"eng-alpha/wl-rest-admitted": held("cq-rest", DEFAULT_FLAVOR)}
    assert left(result, "Pending") == {"cq-hero": ["eng-alpha/wl-hero"], "cq-tiny": ["eng-alpha/wl-tiny-pending"]}
    assert left(result, "Inadmissible") == {}


# ---------------------------------------------------------------- flavor stickiness


def two_flavor_queue(name: str) -> dict:
    """cq-1 / cq-2 of cohort root: 5 CPU on each of default and on-demand, preempting lower
    priorities within the ClusterQueue and anything when reclaiming within the cohort."""
    cq = cluster_queue(name, flavors=(DEFAULT_FLAVOR, ON_DEMAND), quota={"cpu": "5"}, cohort="root")
    cq["spec"]["preemption"] = {"withinClusterQueue": LOWER, "reclaimWithinCohort": ANY}
    return cq


def stickiness_cluster() -> list[dict]:
    """Admitted state:
    - wl-admitted-default (cq-1): uses 10 CPU on default flavor (borrowing 5)
    - wl-admitted-on-demand (cq-1): uses 10 CPU on on-demand flavor (borrowing 5)

    Pending:
    - wl-pending-high-prio-1 (cq-1): priority 11, requests 10 CPU (can fit by preempting its own
      admitted workloads)
    - wl-pending-high-prio-2 (cq-2): priority 10, requests 10 CPU (needs to borrow, can fit by
      reclaiming from cq-1)"""
    return [
        *shared_objects(), cohort("root"), two_flavor_queue("cq-1"), two_flavor_queue("cq-2"),
        local_queue("lq-1", namespace=DEFAULT_NS, cluster_queue_name="cq-1"),
        local_queue("lq-2", namespace=DEFAULT_NS, cluster_queue_name="cq-2"),
        reserved_in(kueue_workload("wl-admitted-default", DEFAULT_NS, "lq-1", uid="wl-admitted-default-uid",
                                   cpu="10"), "cq-1", DEFAULT_FLAVOR),
        reserved_in(kueue_workload("wl-admitted-on-demand", DEFAULT_NS, "lq-1", uid="wl-admitted-on-demand-uid",
                                   cpu="10"), "cq-1", ON_DEMAND),
        kueue_workload("wl-pending-high-prio-1", DEFAULT_NS, "lq-1", uid="wl-pending-high-prio-1-uid",
                       job_uid="job-high-prio-1-uid", priority=11, cpu="10", created=0),
        kueue_workload("wl-pending-high-prio-2", DEFAULT_NS, "lq-2", uid="wl-pending-high-prio-2-uid",
                       job_uid="job-high-prio-2-uid", priority=10, cpu="10", created=1),
    ]


DEFAULT_BY_PRIO_2 = preemption_message("wl-pending-high-prio-2-uid", "job-high-prio-2-uid",
                                       "Fair Sharing within the cohort", "/root/cq-2", "/root/cq-1")
PRIO_1_NO_FIT = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                 "10 more needed, skipping flavor on-demand as it is not found in the nomination mapping for "
                 "resource cpu")
PRIO_2_WAITS = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                "10 more needed, insufficient unused quota for cpu in flavor on-demand, 10 more needed. "
                "Pending the preemption of 1 workload(s)")


def assert_stickiness_outcome(result: PassResult, *, prio_1: tuple[str, str], prio_1_left: str) -> None:
    """wl-pending-high-prio-2 preempts wl-admitted-default and waits; wl-pending-high-prio-1 gets
    `prio_1` (reason, message) and is left with status `prio_1_left`."""
    assert_preempted(result, "wl-admitted-default", DEFAULT_NS, "cq-1", "InCohortFairSharing", DEFAULT_BY_PRIO_2)
    assert_untouched(result, "wl-admitted-on-demand", DEFAULT_NS, "cq-1")
    assert_pending(result, "wl-pending-high-prio-1", DEFAULT_NS, *prio_1)
    assert_pending(result, "wl-pending-high-prio-2", DEFAULT_NS, WAITING_FOR_PREEMPTED, PRIO_2_WAITS)

    assert assignments(result) == {
        "default/wl-admitted-default": held("cq-1", DEFAULT_FLAVOR),
        "default/wl-admitted-on-demand": held("cq-1", ON_DEMAND),
    }
    if prio_1_left == "Pending":
        assert left(result, "Pending") == {"cq-1": ["default/wl-pending-high-prio-1"],
                                           "cq-2": ["default/wl-pending-high-prio-2"]}
        assert left(result, "Inadmissible") == {}
    else:
        assert left(result, "Pending") == {"cq-2": ["default/wl-pending-high-prio-2"]}
        assert left(result, "Inadmissible") == {"cq-1": ["default/wl-pending-high-prio-1"]}


def test_flavor_stickiness_with_recompute_preemption_targets_upon_overlap():
    """"flavor stickiness with RecomputePreemptionTargetsUponOverlap".

    Since cq-1 has much higher usage (20 CPU) than cq-2 (0 CPU), under Fair Sharing, cq-2's
    pending workload (wl-pending-high-prio-2) is prioritized and processed first despite having a
    lower priority than wl-pending-high-prio-1.

    wl-pending-high-prio-2 chooses to preempt wl-admitted-default on the default flavor. When
    wl-pending-high-prio-1 is processed next, it is skipped due to overlapping targets on the
    default flavor rather than violating flavor stickiness to switch to the on-demand flavor.

    (Metric: wl-pending-high-prio-1 overlapped on the default flavor with wl-pending-high-prio-2's
    preemption target, recomputed with flavor stickiness enabled, but still couldn't resolve the
    overlap — skipped: cq-1 skipped 1.)"""
    result = schedule(stickiness_cluster(), fair_sharing=True)
    assert_stickiness_outcome(result, prio_1=(WAITING_FOR_QUOTA, PRIO_1_NO_FIT), prio_1_left="Inadmissible")


def test_flavor_stickiness_with_recompute_preemption_targets_upon_overlap_and_tas_disabled():
    """"flavor stickiness with RecomputePreemptionTargetsUponOverlap and TAS disabled"
    (RecomputeAssignmentUponPreemptionTargetsOverlap on, TopologyAwareScheduling and
    TASRecomputeAssignmentWithinSchedulingCycle off).

    The same cluster and the same comment as the case above: wl-pending-high-prio-2 (cq-2, fair
    sharing puts it first) preempts wl-admitted-default on the default flavor, and
    wl-pending-high-prio-1 is skipped due to overlapping targets on the default flavor rather than
    violating flavor stickiness to switch to the on-demand flavor."""
    result = schedule(stickiness_cluster(), fair_sharing=True, gate_values=TAS_DISABLED)
    assert_stickiness_outcome(result, prio_1=(WAITING_FOR_QUOTA, PRIO_1_NO_FIT), prio_1_left="Inadmissible")


def test_flavor_stickiness_with_recompute_preemption_targets_upon_overlap_and_tas_recomputation_disabled():
    """"flavor stickiness with RecomputePreemptionTargetsUponOverlap and TAS recomputation disabled"
    (RecomputeAssignmentUponPreemptionTargetsOverlap and TopologyAwareScheduling on,
    TASRecomputeAssignmentWithinSchedulingCycle off): the same outcome as the two cases above."""
    result = schedule(stickiness_cluster(), fair_sharing=True, gate_values=TAS_RECOMPUTATION_DISABLED)
    assert_stickiness_outcome(result, prio_1=(WAITING_FOR_QUOTA, PRIO_1_NO_FIT), prio_1_left="Inadmissible")


def test_legacy_overlap_skip_with_recompute_preemption_targets_upon_overlap_disabled():
    """"legacy overlap skip with RecomputePreemptionTargetsUponOverlap disabled"
    (RecomputeAssignmentUponPreemptionTargetsOverlap, TopologyAwareScheduling and
    TASRecomputeAssignmentWithinSchedulingCycle off).

    Without recomputation, wl-pending-high-prio-1 is skipped for overlapping targets and left in
    its queue (not parked), with the legacy overlap message.

    (Metric: skipped preemptions cq-1 1, cq-2 0.)"""
    result = schedule(stickiness_cluster(), fair_sharing=True, gate_values=LEGACY)
    assert_stickiness_outcome(result, prio_1=(WAITING_FOR_QUOTA, OVERLAP), prio_1_left="Pending")


# ---------------------------------------------------------------- sibling TAS flavors


def tas_cluster() -> list[dict]:
    """flavor-a selects x1/z1, flavor-b selects x1/y1, and x1 is shared. The first two pending
    workloads preempt one victim in each flavor and reserve z1 and y1. The third initially
    nominates y1 by targeting victim-b. Once y1 is reserved, overlap recomputation temporarily
    removes both victims and must observe victim-a's x1 removal through flavor-b."""
    cqs = [
        queue_with_policy("preemptor-a", cpu=3, cohort="tas-cohort", reclaim=ANY, flavor="flavor-a"),
        queue_with_policy("preemptor-b", cpu=3, cohort="tas-cohort", reclaim=ANY, flavor="flavor-b"),
        queue_with_policy("overlapping", cpu=3, cohort="tas-cohort", reclaim=ANY, flavor="flavor-b"),
        queue_with_policy("victim-a", cpu=0, cohort="tas-cohort", borrowing_limit=3, flavor="flavor-a"),
        queue_with_policy("victim-b", cpu=0, cohort="tas-cohort", borrowing_limit=5, flavor="flavor-b"),
    ]

    def tas_node(name: str, *flavors: str) -> dict:
        return node(name, labels={f: "true" for f in flavors}, cpu="5", pods="10")

    def tas_pod_set(cpu: str, host: str | None) -> dict:
        return pod_set("main", cpu=cpu, required=HOSTNAME,
                       node_selector={HOSTNAME: host} if host is not None else None)

    victim_a = kueue_workload("victim-a", DEFAULT_NS, "victim-a", uid="victim-a-uid", priority=1,
                              pod_sets=[tas_pod_set("3", "x1")])
    # Fills y1, leaving x1 as the only candidate for the overlapping Workload.
    victim_b = kueue_workload("victim-b", DEFAULT_NS, "victim-b", uid="victim-b-uid", priority=1,
                              pod_sets=[tas_pod_set("5", "y1")])
    return [
        *shared_objects(), cohort("tas-cohort"), *cqs,
        *(local_queue(cq["metadata"]["name"], namespace=DEFAULT_NS, cluster_queue_name=cq["metadata"]["name"])
          for cq in cqs),
        resource_flavor("flavor-a", topology_name=TAS_SINGLE_LEVEL, node_labels={"flavor-a": "true"}),
        resource_flavor("flavor-b", topology_name=TAS_SINGLE_LEVEL, node_labels={"flavor-b": "true"}),
        topology(TAS_SINGLE_LEVEL, (HOSTNAME,)),
        tas_node("x1", "flavor-a", "flavor-b"), tas_node("y1", "flavor-b"), tas_node("z1", "flavor-a"),
        reserved_in(victim_a, "victim-a", "flavor-a", host="x1"),
        reserved_in(victim_b, "victim-b", "flavor-b", host="y1"),
        # Keeps preemptor-a off x1 so nothing but the overlapping Workload can take the capacity
        # victim-a frees there.
        kueue_workload("preemptor-a", DEFAULT_NS, "preemptor-a", uid="preemptor-a-uid",
                       job_uid="preemptor-a-job-uid", priority=30, created=0, pod_sets=[tas_pod_set("3", "z1")]),
        kueue_workload("preemptor-b", DEFAULT_NS, "preemptor-b", uid="preemptor-b-uid",
                       job_uid="preemptor-b-job-uid", priority=20, created=1, pod_sets=[tas_pod_set("3", "y1")]),
        kueue_workload("overlapping", DEFAULT_NS, "overlapping", uid="overlapping-uid",
                       job_uid="overlapping-job-uid", priority=10, created=2, pod_sets=[tas_pod_set("3", None)]),
    ]


def test_sibling_tas_flavor_usage_is_updated_for_overlapping_preemption_targets():
    """"sibling TAS flavor usage is updated for overlapping preemption targets" (TopologyAwareScheduling,
    TASHandleOverlappingFlavors, TASRecomputeAssignmentWithinSchedulingCycle,
    RecomputeAssignmentUponPreemptionTargetsOverlap and TASCachingRemainingResources on).

    (Metric: the recomputation only fits because preemptor-b's preemption of victim-b frees y1,
    so the overlapping workload defers instead of picking new targets: overlapping deferred_fit 1.)"""
    result = schedule(tas_cluster(), fair_sharing=False, gate_values=SIBLING_TAS)

    assert_pending(result, "overlapping", DEFAULT_NS, WAITING_FOR_PREEMPTED, DEFERRED_FIT)
    assert_pending(result, "preemptor-a", DEFAULT_NS, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor flavor-a, "
                   "3 more needed. Pending the preemption of 1 workload(s)")
    assert_pending(result, "preemptor-b", DEFAULT_NS, WAITING_FOR_PREEMPTED,
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor flavor-b, "
                   "2 more needed. Pending the preemption of 1 workload(s)")
    assert_preempted(result, "victim-a", DEFAULT_NS, "victim-a", "InCohortReclamation", preemption_message(
        "preemptor-a-uid", "preemptor-a-job-uid", "reclamation within the cohort",
        "/tas-cohort/preemptor-a", "/tas-cohort/victim-a"))
    assert_preempted(result, "victim-b", DEFAULT_NS, "victim-b", "InCohortReclamation", preemption_message(
        "preemptor-b-uid", "preemptor-b-job-uid", "reclamation within the cohort",
        "/tas-cohort/preemptor-b", "/tas-cohort/victim-b"))

    assert assignments(result) == {
        "default/victim-a": held("victim-a", "flavor-a", [("x1", 1)]),
        "default/victim-b": held("victim-b", "flavor-b", [("y1", 1)]),
    }
    assert left(result, "Pending") == {"overlapping": ["default/overlapping"],
                                       "preemptor-a": ["default/preemptor-a"],
                                       "preemptor-b": ["default/preemptor-b"]}
    assert left(result, "Inadmissible") == {}


# ---------------------------------------------------------------- Kueue's integration test, over passes


def concurrent_preemptors() -> list[dict]:
    """Kueue's integration case "Should preempt all necessary workloads in concurrent scheduling
    with the same priority" (test/integration/singlecluster/scheduler/preemption_test.go): alpha-cq,
    beta-cq and gamma-cq hold 2 CPUs each in cohort `all` (beta-cq may not preempt); beta-cq's
    three workloads of 2 CPUs borrow 4; alpha and gamma, 2 CPUs each, are created to reclaim."""
    cqs = [("alpha-cq", ANY, LOWER), ("beta-cq", "Never", "Never"), ("gamma-cq", ANY, LOWER)]
    objects = [resource_flavor("alpha", topology_name=None),
               *(queue_with_policy(name, cpu=2, cohort="all", reclaim=reclaim, within=within, flavor="alpha")
                 for name, reclaim, within in cqs),
               *(local_queue(name.replace("-cq", "-q"), namespace=DEFAULT_NS, cluster_queue_name=name)
                 for name, _, _ in cqs),
               *(reserved_in(kueue_workload(f"beta-{i}", DEFAULT_NS, "beta-q", uid=f"beta-{i}", cpu="2",
                                            created=i), "beta-cq", "alpha") for i in range(3)),
               kueue_workload("alpha", DEFAULT_NS, "alpha-q", uid="alpha", cpu="2", created=10),
               kueue_workload("gamma", DEFAULT_NS, "gamma-q", uid="gamma", cpu="2", created=11)]
    return objects


def evicted_betas(engine: Engine) -> list[str]:
    return [key for key in (f"default/beta-{i}" for i in range(3)) if engine.state.workload(key) is not None
            and engine.state.workload(key).condition_true("Evicted")]


def finish_evictions(engine: Engine, keys: list[str]) -> None:
    """Kueue's FinishEvictionForWorkloads: the evicted workloads' pods are gone, their quota
    reservation is unset and they wait in their queue again."""
    for key in keys:
        wl = engine.state.workload(key)
        kept = [c for c in wl.conditions if c.type not in ("QuotaReserved", "Admitted")]
        engine.upsert(dataclasses.replace(wl, admission=None, conditions=[
            *kept, Condition("QuotaReserved", "False", "Pending", "Evicted by the test", NOW)]))


def admitted_keys(engine: Engine, *keys: str) -> list[str]:
    return [key for key in keys if engine.state.workload(key).has_quota_reservation]


def test_concurrent_preemptors_of_the_same_priority_each_preempt_their_own_victim():
    """RecomputeAssignmentUponPreemptionTargetsOverlap=true: alpha and gamma both aim at the same
    borrowing beta workload; the one behind recomputes and preempts another, so two are evicted
    at once, and once both evictions complete alpha and gamma are admitted, one beta left."""
    engine = Engine.from_parsed(parse(concurrent_preemptors()), DEFAULT_GATES)
    engine.run_pass(NOW)
    evicted = evicted_betas(engine)
    assert len(evicted) == 2
    finish_evictions(engine, evicted)
    engine.run_pass(NOW + timedelta(seconds=1))
    assert admitted_keys(engine, "default/alpha", "default/gamma") == ["default/alpha", "default/gamma"]
    assert len(admitted_keys(engine, "default/beta-0", "default/beta-1", "default/beta-2")) == 1


def test_concurrent_preemptors_without_the_recompute_take_turns():
    """RecomputeAssignmentUponPreemptionTargetsOverlap=false: only one beta workload is evicted at
    first; once it is gone one of alpha and gamma is admitted and the other preempts a second."""
    gates = DEFAULT_GATES.with_overrides(RecomputeAssignmentUponPreemptionTargetsOverlap=False)
    engine = Engine.from_parsed(parse(concurrent_preemptors()), gates)
    engine.run_pass(NOW)
    first = evicted_betas(engine)
    assert len(first) == 1
    finish_evictions(engine, first)
    engine.run_pass(NOW + timedelta(seconds=1))
    assert len(admitted_keys(engine, "default/alpha", "default/gamma")) == 1
    second = evicted_betas(engine)  # Evicted stays True on the first until it is admitted again
    assert len(second) == 2
    finish_evictions(engine, [key for key in second if key not in first])
    engine.run_pass(NOW + timedelta(seconds=2))
    assert admitted_keys(engine, "default/alpha", "default/gamma") == ["default/alpha", "default/gamma"]
    assert len(admitted_keys(engine, "default/beta-0", "default/beta-1", "default/beta-2")) == 1
