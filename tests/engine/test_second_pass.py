"""The second pass of a workload whose topology waited for its admission checks (a
ProvisioningRequest): placed once the checks are Ready, and admitted with Kueue's event."""

from __future__ import annotations

import pytest

from scheduler.errors import InputError
from scheduler.explain import explain_workload

from .factories import (
    HOSTNAME,
    admission_check,
    admitted,
    cluster_queue,
    cluster_state,
    domains_json,
    local_queue,
    node,
    parse,
    queue_with_policy,
    resource_flavor,
    result_of,
    run,
    taint,
    timestamp,
    topology,
    workload,
)


def reserved(wl: dict, *, reserved_at: str | None, check_state: str = "Ready") -> dict:
    """`wl` with its quota reserved, its TAS PodSet's topology delayed, and one check."""
    ps = wl["spec"]["podSets"][0]
    condition = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved"}
    if reserved_at is not None:
        condition["lastTransitionTime"] = reserved_at
    status = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{
            "name": ps["name"], "flavors": {"cpu": "tas-flavor"}, "count": ps["count"],
            "resourceUsage": {"cpu": str(ps["count"])}, "delayedTopologyRequest": "Pending"}]},
        "conditions": [condition],
        "admissionChecks": [{"name": "prov", "state": check_state, "message": ""}],
    }
    return {**wl, "status": status}


def cluster(wl: dict) -> list[dict]:
    return [topology(levels=(HOSTNAME,)), resource_flavor(), admission_check("prov"),
            cluster_queue(admission_checks=("prov",)), local_queue(), node("x1", cpu="4"), wl]


@pytest.mark.parametrize(("reserved_at", "shown"), [
    (timestamp(-31), "31s"),
    (timestamp(0), "0s"),
    (timestamp(-3600), "3600s"),
])
def test_the_admitted_event_gives_the_wait_since_the_reservation(reserved_at, shown):
    wl = reserved(workload("foo", count=2, cpu="1", required=HOSTNAME), reserved_at=reserved_at)
    result = run(cluster(wl))
    assert result_of(result, "foo").status == "Admitted"
    admitted = [e.message for e in result.events if e.key == "default/foo" and e.reason == "Admitted"]
    assert admitted == [f"Admitted by ClusterQueue cq, wait time since reservation was {shown}"]


def test_a_workload_whose_checks_are_not_ready_keeps_waiting():
    wl = reserved(workload("foo", count=2, cpu="1", required=HOSTNAME), reserved_at=timestamp(-5),
                  check_state="Pending")
    result = run(cluster(wl))
    assert result_of(result, "foo").status != "Admitted"
    assert not [e for e in result.events if e.key == "default/foo" and e.reason == "Admitted"]


def with_updates(wl: dict, *updates: dict) -> dict:
    """`wl` whose (only) admission check carries `updates` as its podSetUpdates."""
    status = dict(wl["status"])
    status["admissionChecks"] = [{**status["admissionChecks"][0], "podSetUpdates": list(updates)}]
    return {**wl, "status": status}


def labelled_nodes() -> list[dict]:
    return [node("x1", cpu="4", labels={"pool": "a"}), node("x2", cpu="4", labels={"pool": "b"}),
            node("x3", cpu="4", labels={"pool": "b"}, taints=[taint("provisioned", "yes", "NoSchedule")])]


def cluster_of(wl: dict, nodes: list[dict]) -> list[dict]:
    return [topology(levels=(HOSTNAME,)), resource_flavor(), admission_check("prov"),
            cluster_queue(admission_checks=("prov",)), local_queue(), *nodes, wl]


def placed_on(result, name: str) -> list[str]:
    ps = result_of(result, name).pod_sets[0]
    return [d.values[-1] for d in ps.assignment.domains] if ps.assignment else []


def test_the_checks_node_selector_steers_the_placement():
    wl = with_updates(reserved(workload("foo", count=1, cpu="1", required=HOSTNAME), reserved_at=timestamp(-1)),
                      {"name": "main", "nodeSelector": {"pool": "b"}})
    assert placed_on(run(cluster_of(wl, labelled_nodes())), "foo") == ["x2"]


def test_the_checks_tolerations_open_tainted_nodes():
    wl = with_updates(reserved(workload("foo", count=1, cpu="1", required=HOSTNAME, node_selector={"pool": "b"},
                                        ), reserved_at=timestamp(-1)),
                      {"name": "main", "nodeSelector": {"provisioned": "yes"}},
                      {"name": "main", "tolerations": [{"key": "provisioned", "operator": "Equal", "value": "yes",
                                                        "effect": "NoSchedule"}]})
    nodes = labelled_nodes()
    nodes[2]["metadata"]["labels"]["provisioned"] = "yes"
    assert placed_on(run(cluster_of(wl, nodes)), "foo") == ["x3"]


def test_a_conflicting_node_selector_fails_the_placement_with_kueues_reason():
    wl = with_updates(reserved(workload("foo", count=1, cpu="1", required=HOSTNAME, node_selector={"pool": "a"}),
                               reserved_at=timestamp(-1)),
                      {"name": "main", "nodeSelector": {"pool": "b"}})
    result = run(cluster_of(wl, labelled_nodes()))
    assert result_of(result, "foo").status != "Admitted"
    failed = [e.message for e in result.events if e.key == "default/foo" and e.reason == "SecondPassFailed"]
    assert failed == ["couldn't assign flavors to pod set main: invalid podSetUpdate for PodSet main, error: "
                      "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=pool, "
                      "value1=a, value2=b"]


@pytest.mark.parametrize(("update", "field", "reason"), [
    ("main", "podSetUpdates[0]", "must be a mapping"),
    ({"nodeSelector": {"a": "b"}}, "podSetUpdates[0].name", "is required"),
    ({"name": "main", "tolerations": [{"operator": "Sometimes"}]}, "podSetUpdates[0].tolerations[0].operator",
     "must be one of"),
    ({"name": "main", "nodeSelector": ["a"]}, "podSetUpdates[0].nodeSelector", "must be a mapping"),
    # Kueue's webhook: an update of no PodSet of the workload would be lost
    ({"name": "other", "nodeSelector": {"pool": "b"}}, "podSetUpdates[0].name",
     "names no PodSet of the workload: 'other' (PodSets: 'main')"),
])
def test_bad_pod_set_updates_are_a_clear_error(update, field, reason):
    wl = reserved(workload("foo", count=1, cpu="1", required=HOSTNAME), reserved_at=timestamp(-1))
    wl["status"]["admissionChecks"][0]["podSetUpdates"] = [update]
    with pytest.raises(InputError) as caught:
        parse([wl])
    assert caught.value.field == f"status.admissionChecks[0].{field}", caught.value.render()
    assert reason in caught.value.reason


def preempting_cluster(wl: dict, blocker_priority: int, *, within: str = "LowerPriority") -> list[dict]:
    """x1 has 3 CPUs, 2 of them held by `blocker`; `wl` (3 pods of 1 CPU on one host) waits
    for its topology in a ClusterQueue of 10 CPUs that preempts by `within`."""
    cq = queue_with_policy("cq", cpu=10, within=within)
    cq["spec"]["admissionChecks"] = ["prov"]
    blocker = admitted(workload("blocker", count=2, cpu="1", required=HOSTNAME, priority=blocker_priority),
                       assignments={"main": domains_json([HOSTNAME], [("x1", 2)])})
    return [topology(levels=(HOSTNAME,)), resource_flavor(), admission_check("prov"), cq, local_queue(),
            node("x1", cpu="3"), blocker, wl]


def waiting_for_topology() -> dict:
    return reserved(workload("foo", count=3, cpu="1", required=HOSTNAME, priority=0), reserved_at=timestamp(-1))


def test_a_delayed_topology_preempts_what_the_policy_allows():
    result = run(preempting_cluster(waiting_for_topology(), blocker_priority=-1))
    assert result_of(result, "blocker").status == "Preempted"
    foo = result_of(result, "foo")
    assert foo.status == "QuotaReserved"  # it keeps its reservation and waits for blocker to go
    assert [(e.key, e.reason) for e in result.events] == [
        ("default/blocker", "EvictedDueToPreempted"), ("default/blocker", "Preempted"),
        ("default/foo", "PreemptedWorkload"), ("default/foo", "SecondPassFailed")]


@pytest.mark.parametrize(("blocker_priority", "within"), [(5, "LowerPriority"), (-1, "Never")])
def test_a_delayed_topology_preempts_nothing_the_policy_forbids(blocker_priority, within):
    result = run(preempting_cluster(waiting_for_topology(), blocker_priority, within=within))
    assert result_of(result, "blocker").status == "Admitted"
    assert [(e.key, e.reason) for e in result.events] == [("default/foo", "SecondPassFailed")]


def test_why_pending_places_the_pod_set_with_its_checks_updates():
    """A pending workload whose Ready check steers its PodSet to pool b, on a cluster with
    pool a only: the flavor assigner places it with the update, and so does why-pending, which
    says the node selector leaves it no node (not that it would fit)."""
    wl = workload("foo", count=1, cpu="1", required=HOSTNAME)
    wl["status"] = {"admissionChecks": [{"name": "prov", "state": "Ready", "message": "",
                                         "podSetUpdates": [{"name": "main", "nodeSelector": {"pool": "b"}}]}]}
    objects = [topology(levels=(HOSTNAME,)), resource_flavor(), cluster_queue(), local_queue(),
               node("x1", cpu="4", labels={"pool": "a"}), wl]
    state = cluster_state(objects)
    explanation = explain_workload(state, state.workload("default/foo"))
    assert not explanation.fits
    (main,) = explanation.pod_sets
    assert not main.fits and main.exclusions is not None and main.exclusions.node_selector == 1
    assert [lvl.best_fits for lvl in main.levels] == [0]
