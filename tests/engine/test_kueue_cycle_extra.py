"""Whole scheduling cycles from Kueue's pkg/scheduler/scheduler_tas_test.go that the conformance
suite does not carry: each test builds the case's cluster, runs one scheduling cycle, and checks
what the Go test checks (the new admissions, the queues the pending workloads are left in, the
conditions it compares, and the events)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.results import PassResult, WorkloadResult

from .factories import (
    HOSTNAME,
    admission_check,
    cluster_queue,
    domains_json,
    gates,
    local_queue,
    node,
    pod_set,
    resource_flavor,
    result_of,
    run,
    timestamp,
    topology,
    workload,
)

BLOCK_LABEL = "cloud.com/topology-block"
RACK_LABEL = "cloud.provider.com/rack"
PROVISIONING = "kueue.x-k8s.io/provisioning-request"
TAS_FLAVOR = "tas-default"
MAIN = "tas-main"
SINGLE_LEVEL = "tas-single-level"
THREE_LEVEL = "tas-three-level"
CPU = {"cpu": TAS_FLAVOR}
EVICTED_NO_REPLACEMENT = "Workload was evicted as there was no replacement for unhealthy node(s): x0"


# ---------------------------------------------------------------- cluster objects


def tas_node(name: str, *, hostname: str | None = None, block: str | None = None, rack: str | None = None,
             cpu: str = "1", memory: str | None = "1Gi", pods: str = "10") -> dict:
    """A Ready node labelled `tas-node=true`, with its hostname and optional block and rack labels."""
    labels = {"tas-node": "true", HOSTNAME: hostname or name}
    if block is not None:
        labels[BLOCK_LABEL] = block
    if rack is not None:
        labels[RACK_LABEL] = rack
    return node(name, hostname=False, labels=labels, cpu=cpu, memory=memory, pods=pods)


def default_single_node() -> list[dict]:
    return [tas_node("x1")]


def default_nodes() -> list[dict]:
    """b1 holds r1 (x1) and r2 (x2, x3, x4); b2 holds r1 (x5) and r2 (x6, the larger node)."""
    return [
        tas_node("b1-r1-x1", hostname="x1", block="b1", rack="r1"),
        tas_node("b1-r2-x2", hostname="x2", block="b1", rack="r2"),
        tas_node("b1-r2-x3", hostname="x3", block="b1", rack="r2"),
        tas_node("b1-r2-x4", hostname="x4", block="b1", rack="r2"),
        tas_node("b2-r2-x5", hostname="x5", block="b2", rack="r1"),
        tas_node("b2-r2-x6", hostname="x6", block="b2", rack="r2", cpu="2", memory="4Gi", pods="40"),
    ]


def single_level_setup() -> list[dict]:
    return [topology(SINGLE_LEVEL, (HOSTNAME,)),
            resource_flavor(TAS_FLAVOR, topology_name=SINGLE_LEVEL, node_labels={"tas-node": "true"})]


def three_level_setup() -> list[dict]:
    return [topology(THREE_LEVEL, (BLOCK_LABEL, RACK_LABEL, HOSTNAME)),
            resource_flavor(TAS_FLAVOR, topology_name=THREE_LEVEL, node_labels={"tas-node": "true"})]


def main_queue(quota: Mapping[str, str] | None = None, *, within: str | None = None,
               admission_checks: Sequence[str] = ()) -> list[dict]:
    """ClusterQueue tas-main on the TAS flavor and its LocalQueue tas-main."""
    cq = cluster_queue(MAIN, flavors=(TAS_FLAVOR,), quota=quota or {"cpu": "50", "memory": "50Gi"},
                       admission_checks=admission_checks)
    if within is not None:
        cq["spec"]["preemption"] = {"withinClusterQueue": within}
    return [cq, local_queue(MAIN, cluster_queue_name=MAIN)]


def prov_check() -> dict:
    return admission_check("prov-check", PROVISIONING)


def tas_workload(name: str, *pod_sets: dict, priority: int | None = None, uid: str | None = None,
                 job_uid: str | None = None) -> dict:
    wl = workload(name, pod_sets=list(pod_sets), queue=MAIN, priority=priority)
    if uid is not None:
        wl["metadata"]["uid"] = uid
    if job_uid is not None:
        wl["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": job_uid}
    return wl


def assignment(name: str, usage: Mapping[str, str], *, count: int = 1,
               hosts: Sequence[tuple[str, int]] | None = None, delayed: str | None = None) -> dict:
    """A PodSetAssignment on the TAS flavor: `usage` is its resourceUsage, `hosts` its
    TopologyAssignment at the hostname level."""
    out: dict = {"name": name, "flavors": {r: TAS_FLAVOR for r in usage}, "resourceUsage": dict(usage),
                 "count": count}
    if hosts is not None:
        out["topologyAssignment"] = domains_json([HOSTNAME], hosts)
    if delayed is not None:
        out["delayedTopologyRequest"] = delayed
    return out


def reserved(wl: dict, *assignments: dict, at: float = 0, admitted: bool = True,
             checks: Mapping[str, str] | None = None, unhealthy: Sequence[str] = (),
             conditions: Sequence[dict] = (), reclaimable: Mapping[str, int] | None = None,
             evictions: Sequence[dict] = ()) -> dict:
    """`wl` holding a quota reservation in tas-main since `at` seconds from NOW, admitted unless
    told otherwise; `checks` are its admission checks' states."""
    conds = [{"type": "QuotaReserved", "status": "True", "reason": "AdmittedByTest",
              "message": "Admitted by ClusterQueue tas-main", "lastTransitionTime": timestamp(at)}]
    if admitted:
        conds.append({"type": "Admitted", "status": "True", "reason": "ByTest",
                      "message": "Admitted by ClusterQueue tas-main", "lastTransitionTime": timestamp(0)})
    conds += conditions
    status: dict = {"admission": {"clusterQueue": MAIN, "podSetAssignments": list(assignments)},
                    "conditions": conds}
    if checks:
        status["admissionChecks"] = [{"name": n, "state": s} for n, s in checks.items()]
    if unhealthy:
        status["unhealthyNodes"] = [{"name": n} for n in unhealthy]
    if reclaimable:
        status["reclaimablePods"] = [{"name": n, "count": c} for n, c in reclaimable.items()]
    if evictions:
        status["schedulingStats"] = {"evictions": list(evictions)}
    return {**wl, "status": status}


def in_flight_preemption() -> dict:
    """What an earlier cycle left on a workload it preempted and whose pods are still going."""
    return {
        "conditions": [
            {"type": "Evicted", "status": "True", "reason": "Preempted",
             "message": "Preempted to accommodate a workload", "lastTransitionTime": timestamp(0)},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue",
             "message": "Preempted to accommodate a workload", "lastTransitionTime": timestamp(0)},
        ],
        "evictions": [{"reason": "Preempted", "count": 1}],
    }


# ---------------------------------------------------------------- one cycle and what it gives


def cycle(objects: Iterable[dict], **gate_values: bool) -> PassResult:
    """One scheduling cycle, as the Go test's single `scheduler.schedule(ctx)`."""
    return run(list(objects), cycles=1, feature_gates=gates(**gate_values))


def holds_admission(w: WorkloadResult) -> bool:
    """Admitted, or evicted in this cycle while its quota reservation stays in the cache."""
    if w.status in ("Admitted", "QuotaReserved"):
        return True
    reserved_now = any(c.type == "QuotaReserved" and c.status == "True" for c in w.conditions)
    return w.status in ("Evicted", "Preempted") and reserved_now


def admitted_keys(objects: Iterable[dict], *, compare_unhealthy: bool) -> set[str]:
    """Workloads admitted before the cycle, which the Go test leaves out of its comparison;
    with `compare_unhealthy` (TestScheduleForTAS), those with unhealthy nodes stay in it."""
    keys = set()
    for obj in objects:
        status = obj.get("status") or {}
        if obj.get("kind") != "Workload":
            continue
        if not any(c["type"] == "Admitted" and c["status"] == "True" for c in status.get("conditions", ())):
            continue
        if not (compare_unhealthy and status.get("unhealthyNodes")):
            keys.add(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
    return keys


def hosts(ps) -> list[tuple[str, int]] | None:
    if ps.assignment is None:
        return None
    assert ps.assignment.levels[-1] == HOSTNAME
    return [(d.values[-1], d.count) for d in ps.assignment.domains]


def admission(w: WorkloadResult) -> dict:
    """A workload's admission as the Go test compares it: per PodSet, flavors, count,
    TopologyAssignment (hostnames) and delayed topology request state."""
    return {"clusterQueue": w.cluster_queue,
            "podSets": {ps.name: {"flavors": dict(ps.flavors), "count": ps.count, "hosts": hosts(ps),
                                  "delayed": ps.delayed_topology_request} for ps in w.pod_sets}}


def want(pod_sets: Mapping[str, tuple], cluster_queue_name: str = MAIN) -> dict:
    """`pod_sets`: name -> (flavors, count, hosts or None, delayed state or None)."""
    return {"clusterQueue": cluster_queue_name,
            "podSets": {name: {"flavors": flavors, "count": count, "hosts": hosts_, "delayed": delayed}
                        for name, (flavors, count, hosts_, delayed) in pod_sets.items()}}


def new_assignments(result: PassResult, objects: Iterable[dict], *, compare_unhealthy: bool = True) -> dict:
    before = admitted_keys(objects, compare_unhealthy=compare_unhealthy)
    return {w.key: admission(w) for w in result.workloads if holds_admission(w) and w.key not in before}


def left(result: PassResult, status: str) -> dict[str, list[str]]:
    """Workloads left in the queues (`Pending`) or parked as inadmissible (`Inadmissible`)."""
    out: dict[str, list[str]] = {}
    for w in result.workloads:
        if w.status == status:
            out.setdefault(w.cluster_queue, []).append(w.key)
    return {cq: sorted(keys) for cq, keys in out.items()}


def events(result: PassResult) -> list[tuple[str, str, str]]:
    return [(e.key, e.type, e.reason) for e in result.events]


def event_messages(result: PassResult) -> list[tuple[str, str, str]]:
    return [(e.key, e.reason, e.message) for e in result.events]


def condition(w: WorkloadResult, cond_type: str) -> tuple[str, str, str] | None:
    for c in w.conditions:
        if c.type == cond_type:
            return c.status, c.reason, c.message
    return None



# ---------------------------------------------------------------- TestScheduleForTAS


def test_second_pass_reports_reservation_wait_time():
    """TestScheduleForTAS: "workload in CQ with ProvisioningRequest; second pass; reports
    reservation wait time" (the Go test's clock steps one second past `now` before the cycle)."""
    foo = reserved(tas_workload("foo", pod_set("one", cpu="1", required=HOSTNAME)),
                   assignment("one", {"cpu": "1000m"}, delayed="Pending"),
                   at=-31, admitted=False, checks={"prov-check": "Ready"})
    objects = [*default_single_node(), prov_check(), *single_level_setup(),
               *main_queue(admission_checks=("prov-check",)), foo]
    result = cycle(objects)
    assert new_assignments(result, objects) == {
        "default/foo": want({"one": (CPU, 1, [("x1", 1)], "Ready")})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert event_messages(result) == [
        ("default/foo", "Admitted", "Admitted by ClusterQueue tas-main, wait time since reservation was 31s")]
    assert events(result) == [("default/foo", "Normal", "Admitted")]


def test_second_pass_preempts_under_a_pods_quota():
    """TestScheduleForTAS: "workload in CQ with ProvisioningRequest; second pass; preempts under
    a pods quota"."""
    foo = reserved(tas_workload("foo", pod_set("one", count=3, cpu="1", required=HOSTNAME)),
                   assignment("one", {"cpu": "3", "pods": "3"}, count=3, delayed="Pending"),
                   admitted=False, checks={"prov-check": "Ready"})
    blocker = reserved(tas_workload("blocker", pod_set("one", count=2, cpu="1", required=HOSTNAME), priority=-1),
                       assignment("one", {"cpu": "2", "pods": "2"}, count=2, hosts=[("x1", 2)]))
    objects = [tas_node("x1", cpu="3", memory=None), prov_check(), *single_level_setup(),
               *main_queue({"cpu": "10", "pods": "8"}, within="LowerPriority", admission_checks=("prov-check",)),
               foo, blocker]
    result = cycle(objects)
    assert new_assignments(result, objects) == {
        "default/foo": want({"one": ({"cpu": TAS_FLAVOR, "pods": TAS_FLAVOR}, 3, None, "Pending")})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert result_of(result, "blocker").status in ("Evicted", "Preempted")
    assert events(result) == [
        ("default/blocker", "Normal", "EvictedDueToPreempted"),
        ("default/blocker", "Normal", "Preempted"),
        ("default/foo", "Normal", "PreemptedWorkload"),
        ("default/foo", "Warning", "SecondPassFailed"),
    ]


def unhealthy_foo(cpu: str = "2") -> dict:
    """foo, admitted on x0 (now unhealthy) with one pod preferring a rack."""
    return reserved(tas_workload("foo", pod_set("one", cpu=cpu, preferred=RACK_LABEL)),
                    assignment("one", {"cpu": f"{cpu}000m"}, hosts=[("x0", 1)]), unhealthy=("x0",))


def healthy_occupier() -> dict:
    return reserved(tas_workload("healthy-occupier", pod_set("one", cpu="2", required=HOSTNAME)),
                    assignment("one", {"cpu": "2000m"}, hosts=[("x6", 1)]))


def victim(cpu: str, host: str) -> dict:
    inflight = in_flight_preemption()
    return reserved(tas_workload("victim", pod_set("one", cpu=cpu, required=HOSTNAME)),
                    assignment("one", {"cpu": f"{cpu}000m"}, hosts=[(host, 1)]),
                    conditions=inflight["conditions"], evictions=inflight["evictions"])


def replacement_cluster(*workloads: dict) -> list[dict]:
    return [*default_nodes(), prov_check(), *three_level_setup(), *main_queue(), *workloads]


def test_fail_fast_without_in_flight_preemption():
    """TestScheduleForTAS: "workload with unhealthyNode annotation; second pass; preferred; no
    fit; FailFast; no in-flight preemption"."""
    objects = replacement_cluster(healthy_occupier(), unhealthy_foo())
    result = cycle(objects)
    assert new_assignments(result, objects) == {"default/foo": want({"one": (CPU, 1, [("x0", 1)], None)})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert event_messages(result) == [("default/foo", "EvictedDueToNodeFailures", EVICTED_NO_REPLACEMENT)]
    assert events(result) == [("default/foo", "Normal", "EvictedDueToNodeFailures")]


def test_fail_fast_with_in_flight_preemption_in_a_different_domain():
    """TestScheduleForTAS: "workload with unhealthyNode annotation; second pass; preferred; no
    fit; FailFast; in-flight preemption in a different domain"."""
    objects = replacement_cluster(healthy_occupier(), victim("1", "x1"), unhealthy_foo())
    result = cycle(objects)
    assert new_assignments(result, objects) == {"default/foo": want({"one": (CPU, 1, [("x0", 1)], None)})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert event_messages(result) == [("default/foo", "EvictedDueToNodeFailures", EVICTED_NO_REPLACEMENT)]
    assert events(result) == [("default/foo", "Normal", "EvictedDueToNodeFailures")]


def test_in_flight_preemption_frees_capacity_defers_the_replacement():
    """TestScheduleForTAS: "workload with unhealthyNode annotation; second pass; preferred; no
    fit; in-flight preemption frees capacity; deferred".

    foo (2 CPUs, preferring a rack) ran on x0, now unhealthy. Only x6 has room for 2 CPUs, and
    x6 is held by victim, whose eviction by an earlier preemption is still under way. Without
    victim the replacement fits, so foo is not evicted by TASFailedNodeReplacementFailFast: it
    keeps its assignment on x0 and waits, and the cycle records only the failed second pass."""
    objects = replacement_cluster(victim("2", "x6"), unhealthy_foo())
    result = cycle(objects)
    assert new_assignments(result, objects) == {"default/foo": want({"one": (CPU, 1, [("x0", 1)], None)})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert events(result) == [("default/foo", "Warning", "SecondPassFailed")]


def test_deferred_replacement_keeps_a_waiting_preemptor_on_its_in_flight_victim():
    """TestDeferredTASReplacementDoesNotTriggerExtraPreemption: "deferred replacement keeps a
    waiting preemptor on its in-flight victim".

    v (priority 1) is being preempted on x6 for p (priority 3, pending); x (priority 1) runs on
    y1; foo's replacement for x0 fits only on x6. foo waits for v (its deferral must not spoil
    p's plan): p keeps waiting for v, and x is not preempted."""
    inflight = in_flight_preemption()
    v = reserved(tas_workload("v", pod_set("one", cpu="2", required=HOSTNAME), priority=1, uid="wl-v"),
                 assignment("one", {"cpu": "2000m"}, hosts=[("x6", 1)]),
                 conditions=inflight["conditions"], evictions=inflight["evictions"])
    x = reserved(tas_workload("x", pod_set("one", cpu="2", required=HOSTNAME), priority=1, uid="wl-x"),
                 assignment("one", {"cpu": "2000m"}, hosts=[("y1", 1)]))
    p = tas_workload("p", pod_set("one", cpu="2", required=HOSTNAME), priority=3, uid="wl-p", job_uid="job-p")
    foo = reserved(tas_workload("foo", pod_set("one", cpu="2", preferred=HOSTNAME)),
                   assignment("one", {"cpu": "2000m"}, hosts=[("x0", 1)]), unhealthy=("x0",))
    objects = [tas_node("x6", cpu="2", memory="4Gi"), tas_node("y1", cpu="2", memory="4Gi"),
               *single_level_setup(), *main_queue(within="LowerPriority"), v, x, p, foo]
    result = cycle(objects)
    assert new_assignments(result, objects) == {"default/foo": want({"one": (CPU, 1, [("x0", 1)], None)})}
    assert left(result, "Pending") == {MAIN: ["default/p"]}
    assert left(result, "Inadmissible") == {}
    assert events(result) == [("default/foo", "Warning", "SecondPassFailed"),
                              ("default/p", "Warning", "WaitingForPreemptedWorkloads")]


def completed_podset_cluster() -> list[dict]:
    bar = reserved(
        tas_workload("bar-admitted", pod_set("driver", cpu="1", required=HOSTNAME),
                     pod_set("workers", cpu="1", required=HOSTNAME)),
        assignment("driver", {"cpu": "1000m"}, hosts=[("x1", 1)]),
        assignment("workers", {"cpu": "1000m"}, hosts=[("x2", 1)]),
        reclaimable={"workers": 1})
    return [tas_node("x1"), tas_node("x2"), *single_level_setup(), *main_queue(),
            tas_workload("foo", pod_set("one", cpu="1", required=HOSTNAME)), bar]


def test_completed_podset_releases_its_topology_domain():
    """TestScheduleForTAS: "workload gets scheduled when another admitted workload has a
    completed podset that released its topology domain"."""
    objects = completed_podset_cluster()
    result = cycle(objects)
    assert new_assignments(result, objects) == {
        "default/foo": want({"one": (CPU, 1, [("x2", 1)], None)})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert events(result) == [("default/foo", "Normal", "QuotaReserved"), ("default/foo", "Normal", "Admitted")]


def test_completed_podset_keeps_its_domain_without_reclaimable_pods():
    """TestScheduleForTAS: "workload does not get scheduled when ReclaimablePods is disabled even
    if another admitted workload has a completed podset"."""
    objects = completed_podset_cluster()
    result = cycle(objects, ReclaimablePods=False)
    assert new_assignments(result, objects, compare_unhealthy=False) == {}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {MAIN: ["default/foo"]}
    assert events(result) == [("default/foo", "Warning", "WaitingForQuota")]


# ---------------------------------------------------------------- TestScheduleForTASPreemption


def preempted_by_foo() -> tuple[str, str, str]:
    return ("True", "Preempted", "Preempted to accommodate a workload (UID: wl-foo, JobUID: job-foo) due to "
            "prioritization in the ClusterQueue; preemptor path: /tas-main; preemptee path: /tas-main")


def in_cluster_queue_by_foo() -> tuple[str, str, str]:
    return ("True", "InClusterQueue", preempted_by_foo()[2])


def foo_waits_for_preemption(result: PassResult, objects: Sequence[dict]) -> WorkloadResult:
    """Nothing admitted, foo left pending (not parked) while its targets stop: its result."""
    assert new_assignments(result, objects, compare_unhealthy=False) == {}
    assert left(result, "Pending") == {MAIN: ["default/foo"]}
    assert left(result, "Inadmissible") == {}
    return result_of(result, "foo")


def assert_preempted_by_foo(result: PassResult, *names: str) -> None:
    for name in names:
        got = result_of(result, name)
        assert condition(got, "Evicted") == preempted_by_foo()
        assert condition(got, "Preempted") == in_cluster_queue_by_foo()


def test_preemption_with_a_pod_set_group_whose_members_are_not_adjacent():
    """TestScheduleForTASPreemption: "preemption with a PodSet group whose members are not
    adjacent"."""
    foo = tas_workload(
        "foo",
        pod_set("leader", cpu="1", required=HOSTNAME, group="g"),
        pod_set("other", count=2, cpu="1", memory="1Gi", required=HOSTNAME),
        pod_set("worker", cpu="1", required=HOSTNAME, group="g"),
        priority=1, uid="wl-foo", job_uid="job-foo")
    low = reserved(tas_workload("low", pod_set("one", count=4, cpu="1", required=HOSTNAME)),
                   assignment("one", {"cpu": "4"}, count=4, hosts=[("x1", 4)]))
    objects = [tas_node("x1", cpu="50", memory="50Gi", pods="50"), *single_level_setup(),
               *main_queue({"cpu": "4", "memory": "10Gi"}, within="LowerPriority"), foo, low]
    result = cycle(objects)
    got_foo = foo_waits_for_preemption(result, objects)
    assert condition(got_foo, "QuotaReserved") == (
        "False", "WaitingForPreemptedWorkloads",
        "couldn't assign flavors to pod set leader: insufficient unused quota for cpu in flavor tas-default, "
        "2 more needed; couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor "
        "tas-default, 2 more needed; couldn't assign flavors to pod set other: insufficient unused quota for cpu "
        "in flavor tas-default, 4 more needed. Pending the preemption of 1 workload(s)")
    assert_preempted_by_foo(result, "low")
    assert sorted(events(result)) == sorted([
        ("default/low", "Normal", "EvictedDueToPreempted"),
        ("default/low", "Normal", "Preempted"),
        ("default/foo", "Normal", "PreemptedWorkload"),
        ("default/foo", "Warning", "WaitingForPreemptedWorkloads"),
    ])
    assert condition(got_foo, "Admitted") == ("False", "NoReservation", "The workload has no reservation")


def test_preemption_frees_enough_pods_under_a_pods_quota():
    """TestScheduleForTASPreemption: "preemption frees enough Pods when the ClusterQueue has pods
    quota"."""
    foo = tas_workload("foo", pod_set("one", count=7, cpu="1", required=HOSTNAME),
                       priority=1, uid="wl-foo", job_uid="job-foo")
    low4 = reserved(tas_workload("low-4", pod_set("one", count=4, cpu="1", required=HOSTNAME)),
                    assignment("one", {"cpu": "4", "pods": "4"}, count=4, hosts=[("x1", 4)]))
    low3 = reserved(tas_workload("low-3", pod_set("one", count=3, cpu="1", required=HOSTNAME)),
                    assignment("one", {"cpu": "3", "pods": "3"}, count=3, hosts=[("x1", 3)]))
    objects = [tas_node("x1", cpu="50", memory="50Gi", pods="10"), *single_level_setup(),
               *main_queue({"cpu": "50", "pods": "7"}, within="LowerPriority"), foo, low4, low3]
    result = cycle(objects)
    got_foo = foo_waits_for_preemption(result, objects)
    assert condition(got_foo, "QuotaReserved") == (
        "False", "WaitingForPreemptedWorkloads",
        "couldn't assign flavors to pod set one: insufficient unused quota for pods in flavor tas-default, "
        "7 more needed. Pending the preemption of 2 workload(s)")
    assert_preempted_by_foo(result, "low-3", "low-4")
    assert sorted(events(result)) == sorted([
        ("default/low-4", "Normal", "EvictedDueToPreempted"),
        ("default/low-4", "Normal", "Preempted"),
        ("default/foo", "Normal", "PreemptedWorkload"),
        ("default/low-3", "Normal", "EvictedDueToPreempted"),
        ("default/low-3", "Normal", "Preempted"),
        ("default/foo", "Normal", "PreemptedWorkload"),
        ("default/foo", "Warning", "WaitingForPreemptedWorkloads"),
    ])
    assert condition(got_foo, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
