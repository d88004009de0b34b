"""A ClusterQueue Kueue holds inactive: stopped, naming a missing ResourceFlavor or AdmissionCheck,
an inactive AdmissionCheck, misused MultiKueue checks, or a TAS flavor without its Topology.
It admits nothing (its waiting workloads: "ClusterQueue X is inactive"), and preemption takes
no candidate from it; it becomes active again as soon as what it lacked arrives."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.cycle import NAMESPACE_MISMATCH
from scheduler.engine import Engine
from scheduler.queue_status import active_condition, local_queue_condition

from .factories import (
    HOSTNAME,
    NOW,
    RACK,
    admission_check,
    admitted,
    cluster_queue,
    domains_json,
    gates,
    grid,
    local_queue,
    node,
    parse,
    parse_one,
    queue_with_policy,
    resource_flavor,
    topology,
    workload,
)

HOST_LEVELS = ["cloud.provider.com/topology-block", RACK, "kubernetes.io/hostname"]
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PROVISIONING = "kueue.x-k8s.io/provisioning-request"


def engine_of(objects) -> Engine:
    return Engine.from_parsed(parse(objects), gates())


def condition(objects, name: str = "cq") -> tuple[str, str, str]:
    engine = engine_of(objects)
    return active_condition(engine.state.inactive_cluster_queues.get(name, ()))


def inactive_check(name: str) -> dict:
    check = admission_check(name)
    check["status"]["conditions"] = [{"type": "Active", "status": "False"}]
    return check


def with_checks(cq: dict, *rules: tuple[str, tuple[str, ...]]) -> dict:
    """`cq` with an admissionChecksStrategy: (check, onFlavors) per rule."""
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [
        {"name": name, **({"onFlavors": list(flavors)} if flavors else {})} for name, flavors in rules]}
    return cq


def base() -> list[dict]:
    return [topology(), resource_flavor(), resource_flavor("plain", topology_name=None), local_queue()]


@pytest.mark.parametrize(("extra", "cq", "want"), [
    ([], cluster_queue(), ("True", "Ready", "Can admit new workloads")),
    ([], cluster_queue(flavors=("tas-flavor", "gpu", "fast")),
     ("False", "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): gpu,fast.")),
    ([admission_check("check1")], cluster_queue(admission_checks=("check2", "check1")),
     ("False", "AdmissionCheckNotFound", "Can't admit new workloads: references missing AdmissionCheck(s): check2.")),
    ([admission_check("check1"), inactive_check("check3")], cluster_queue(admission_checks=("check1", "check3")),
     ("False", "AdmissionCheckInactive", "Can't admit new workloads: references inactive AdmissionCheck(s): check3.")),
    ([admission_check("check1", MULTIKUEUE), admission_check("check3", MULTIKUEUE)],
     cluster_queue(admission_checks=("check1", "check3")),
     ("False", "MultipleMultiKueueAdmissionChecks", "Can't admit new workloads: Cannot use multiple MultiKueue "
      "AdmissionChecks on the same ClusterQueue, found: check1,check3.")),
    ([admission_check("mk", MULTIKUEUE)],
     with_checks(cluster_queue(flavors=("tas-flavor", "plain")), ("mk", ("plain",))),
     ("False", "MultiKueueAdmissionCheckAppliedPerFlavor",
      "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, found: mk.")),
    ([admission_check("mk", MULTIKUEUE), admission_check("prov", PROVISIONING)],
     cluster_queue(admission_checks=("mk", "prov")),
     ("False", "MultiKueueWithProvisioningRequest", "Can't admit new workloads: Cannot use both MultiKueue and "
      "ProvisioningRequest AdmissionChecks together, found: mk, prov.")),
    # several causes: the first names the reason, the message lists them all
    ([], {**cluster_queue(flavors=("tas-flavor", "gpu")), "spec": {
        **cluster_queue(flavors=("tas-flavor", "gpu"))["spec"], "stopPolicy": "Hold"}},
     ("False", "Stopped", "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gpu.")),
])
def test_kueue_active_condition(extra, cq, want):
    assert condition([*base(), *extra, cq]) == want


def test_a_tas_flavor_without_its_topology():
    objects = [resource_flavor(topology_name="example-topology"), cluster_queue()]
    assert condition(objects) == ("False", "TopologyNotFound", "Can't admit new workloads: there is no Topology "
                                  "\"example-topology\" for TAS flavor \"tas-flavor\".")
    # without TAS the flavor's Topology is not looked at
    engine = Engine.from_parsed(parse(objects), gates(TopologyAwareScheduling=False))
    assert engine.state.inactive_cluster_queues == {}


def cluster_with_a_missing_flavor() -> list[dict]:
    """The ClusterQueue's second flavor does not exist; its first has room for the workload."""
    return [*base(), cluster_queue(flavors=("tas-flavor", "gpu"), quota={"cpu": "8"}), *grid(cpu="4"),
            workload("train", count=2, cpu="1", required=RACK)]


def test_a_missing_flavor_holds_every_workload_even_one_the_other_flavor_fits():
    engine = engine_of(cluster_with_a_missing_flavor())
    outcome = engine.run_pass(NOW)
    result = outcome.decided["default/train"]
    assert (result.status, result.message) == ("Inadmissible", "ClusterQueue cq is inactive")
    reserved = next(c for c in result.conditions if c.type == "QuotaReserved")
    assert (reserved.status, reserved.reason) == ("False", "Inadmissible")
    assert not [e for e in outcome.result.events if e.key == "default/train"]
    why = engine.explain("default/train", NOW)
    assert why.fits is False
    assert why.summary == "ClusterQueue cq is inactive: it references missing ResourceFlavor(s): gpu"


def test_the_queue_admits_once_the_flavor_arrives_and_stops_when_it_goes():
    engine = engine_of(cluster_with_a_missing_flavor())
    engine.run_pass(NOW)
    engine.upsert(parse_one(resource_flavor("gpu", topology_name=None)))
    assert engine.state.inactive_cluster_queues == {}
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert outcome.decided["default/train"].status == "Admitted"

    engine.upsert(parse_one(workload("later", count=1, cpu="1", required=RACK, created=5)))
    engine.delete("ResourceFlavor", "gpu")
    outcome = engine.run_pass(NOW + timedelta(seconds=2))
    assert (outcome.decided["default/later"].status, outcome.decided["default/later"].message) == (
        "Inadmissible", "ClusterQueue cq is inactive")
    # what it admitted goes on running
    assert engine.state.workload("default/train").is_admitted


def test_an_admission_check_that_becomes_active_activates_the_queue():
    objects = [*base(), inactive_check("prov"), cluster_queue(admission_checks=("prov",), quota={"cpu": "8"}),
               *grid(cpu="4"), workload("train", count=1, cpu="1", required=RACK)]
    engine = engine_of(objects)
    assert engine.run_pass(NOW).decided["default/train"].message == "ClusterQueue cq is inactive"
    engine.upsert(parse_one(admission_check("prov")))
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert outcome.decided["default/train"].status == "QuotaReserved"  # waiting for its check


def test_a_stopped_local_queue_is_named_before_a_missing_cluster_queue():
    lq = local_queue(cluster_queue_name="nowhere")
    lq["spec"]["stopPolicy"] = "Hold"
    engine = engine_of([topology(), resource_flavor(), lq, *grid(), workload("train", required=RACK)])
    assert engine.run_pass(NOW).decided["default/train"].message == "LocalQueue lq is inactive"


def reclaim_setup(lender_policy: str | None) -> list[dict]:
    """cq-a lends its 4 CPUs to cq-b, which runs a 4-CPU workload on them; cq-a may reclaim."""
    lender = queue_with_policy("cq-a", cpu=4, cohort="co", reclaim="Any")
    borrower = queue_with_policy("cq-b", cpu=0, cohort="co")
    if lender_policy:
        borrower["spec"]["stopPolicy"] = lender_policy
    running = admitted(workload("borrowing", queue="lq-b", count=4, cpu="1", required=RACK),
                       assignments={"main": domains_json(HOST_LEVELS, [(("b1", "r1", "x1"), 4)])},
                       cluster_queue_name="cq-b")
    return [topology(), resource_flavor(), lender, borrower, local_queue("lq-a", cluster_queue_name="cq-a"),
            local_queue("lq-b", cluster_queue_name="cq-b"),
            node("x1", block="b1", rack="r1", cpu="4"), node("x2", block="b1", rack="r1", cpu="4"),
            running, workload("reclaiming", queue="lq-a", count=4, cpu="1", required=RACK, created=10)]


def test_preemption_takes_no_candidate_from_an_inactive_cluster_queue():
    active = engine_of(reclaim_setup(None))
    active.run_pass(NOW)
    assert active.state.workload("default/borrowing").condition_true("Preempted")
    inactive = engine_of(reclaim_setup("Hold"))
    outcome = inactive.run_pass(NOW)
    assert "default/borrowing" not in outcome.decided
    assert not inactive.state.workload("default/borrowing").condition_true("Evicted")
    assert outcome.decided["default/reclaiming"].status in ("Pending", "Inadmissible")


@pytest.mark.parametrize(("lq_policy", "cq", "want"), [
    (None, cluster_queue(), ("True", "Ready", "Can submit new workloads to localQueue")),
    ("Hold", cluster_queue(), ("False", "Stopped", "LocalQueue is stopped")),
    (None, cluster_queue("elsewhere"), ("False", "ClusterQueueDoesNotExist",
                                        "Can't submit new workloads to clusterQueue")),
    (None, cluster_queue(flavors=("tas-flavor", "gpu")), ("False", "ClusterQueueIsInactive",
                                                          "Can't submit new workloads to clusterQueue")),
])
def test_kueue_local_queue_condition(lq_policy, cq, want):
    lq = local_queue()
    if lq_policy:
        lq["spec"]["stopPolicy"] = lq_policy
    engine = engine_of([topology(), resource_flavor(), cq, lq])
    assert local_queue_condition(engine.state, engine.state.local_queues["default/lq"]) == want


def test_the_start_estimate_names_the_inactive_queue_instead_of_a_start():
    from scheduler.eta import estimate

    engine = engine_of(cluster_with_a_missing_flavor())
    engine.run_pass(NOW)
    prediction = estimate(engine, NOW).predictions["default/train"]
    assert prediction.start is None
    assert prediction.reason == "not while ClusterQueue cq is inactive: it references missing ResourceFlavor(s): gpu"
    # once the flavor exists, the estimate predicts a start again
    engine.upsert(parse_one(resource_flavor("gpu", topology_name=None)))
    engine.sync(NOW)
    assert estimate(engine, NOW).predictions["default/train"].start is not None


def test_simulate_warns_of_an_inactive_cluster_queue_but_not_of_a_stopped_one():
    from scheduler.simulate import simulate_parsed

    warnings: list[str] = []
    simulate_parsed(parse(cluster_with_a_missing_flavor()), gates=gates(), now=NOW, warn=warnings.append)
    assert warnings == ["ClusterQueue/cq: inactive (FlavorNotFound): Can't admit new workloads: references "
                        "missing ResourceFlavor(s): gpu. None of its workloads is admitted"]
    stopped = cluster_queue(quota={"cpu": "8"})
    stopped["spec"]["stopPolicy"] = "Hold"
    warnings.clear()
    simulate_parsed(parse([*base(), stopped, *grid(cpu="4")]), gates=gates(), now=NOW, warn=warnings.append)
    assert warnings == []


# ---------------------------------------------------------------- the second pass of an inactive queue


def waiting_for_topology(cq_name: str = "cq") -> dict:
    """`train` holds a reservation in `cq_name` with its topology delayed and its check Ready."""
    wl = workload("train", count=2, cpu="1", required=RACK)
    wl["status"] = {
        "admission": {"clusterQueue": cq_name, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "tas-flavor"}, "count": 2, "resourceUsage": {"cpu": "2"},
            "delayedTopologyRequest": "Pending"}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved",
                        "lastTransitionTime": "2024-01-01T00:00:00Z"}],
        "admissionChecks": [{"name": "prov", "state": "Ready", "message": ""}],
    }
    return wl


def delayed_topology_cluster(check: dict) -> list[dict]:
    return [topology(), resource_flavor(), check,
            cluster_queue(admission_checks=("prov",)), local_queue(), *grid(blocks=1, racks=1, nodes=2)]


def second_pass_events(outcome) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in outcome.result.events if e.key == "default/train"]


def test_a_delayed_topology_waits_while_its_cluster_queue_is_inactive():
    """Kueue's nomination turns a second-pass workload of an inactive ClusterQueue away before
    placing it: it keeps its reservation (Kueue's workload controller takes one back only from a
    stopped or missing queue) and is tried again after the second-pass backoff."""
    engine = engine_of([*delayed_topology_cluster(inactive_check("prov")), waiting_for_topology()])
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload("default/train")
    assert wl.has_quota_reservation and not wl.is_admitted
    assert wl.admission.pod_set_assignments[0].topology_assignment is None
    assert second_pass_events(outcome) == [("SecondPassFailed", "ClusterQueue cq is inactive")]
    assert engine.queues.second_pass_iteration("default/train") == 2  # the backoff doubled: 2 s

    engine.upsert(parse_one(admission_check("prov")))  # active again: placed at the next try
    assert second_pass_events(engine.run_pass(NOW + timedelta(seconds=1))) == []  # not due yet
    outcome = engine.run_pass(NOW + timedelta(seconds=2))
    wl = engine.state.workload("default/train")
    assert wl.is_admitted
    assert wl.admission.pod_set_assignments[0].delayed_topology_request == "Ready"
    assert [reason for reason, _ in second_pass_events(outcome)] == ["Admitted"]


def test_a_delayed_topology_in_a_namespace_the_cluster_queue_no_longer_selects_waits():
    cq = cluster_queue(admission_checks=("prov",))
    cq["spec"]["namespaceSelector"] = {"matchLabels": {"team": "a"}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "b"}}}
    objects = [topology(), resource_flavor(), admission_check("prov"), cq, local_queue(),
               namespace, *grid(blocks=1, racks=1, nodes=2), waiting_for_topology()]
    engine = engine_of(objects)
    outcome = engine.run_pass(NOW)
    assert not engine.state.workload("default/train").is_admitted
    assert second_pass_events(outcome) == [("SecondPassFailed",
                                            NAMESPACE_MISMATCH)]


def failed_node_cluster(stop_policy: str | None) -> list[dict]:
    cq = cluster_queue()
    if stop_policy is not None:
        cq["spec"]["stopPolicy"] = stop_policy
    nodes = grid(blocks=1, racks=1, nodes=3)  # b1-r1-n1 .. n3; n1 has failed and is gone
    train = admitted(workload("train", count=2, cpu="1", required=RACK),
                     assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1), ("b1-r1-n2", 1)])},
                     unhealthy_nodes=["b1-r1-n1"])
    return [topology(), resource_flavor(), cq, local_queue(), *nodes[1:], train]


@pytest.mark.parametrize("fail_fast", [False, True])
def test_no_node_is_replaced_while_the_cluster_queue_is_held(fail_fast):
    """stopPolicy Hold keeps the ClusterQueue's admitted workloads but makes it inactive: Kueue's
    nomination turns their node replacement away, fail-fast or not, until it runs again."""
    engine = Engine.from_parsed(parse(failed_node_cluster("Hold")),
                                gates(TASFailedNodeReplacementFailFast=fail_fast))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload("default/train")
    assert wl.is_admitted and not wl.condition_true("Evicted")
    assert wl.unhealthy_nodes == ["b1-r1-n1"]
    assert second_pass_events(outcome) == [("SecondPassFailed", "ClusterQueue cq is inactive")]
    (decision,) = [d for d in outcome.result.decisions if d.key == "default/train"]
    assert (decision.kind, decision.node) == ("ReplacementFailed", "b1-r1-n1")
    assert decision.message == "node b1-r1-n1 not replaced: ClusterQueue cq is inactive"

    cq = failed_node_cluster(None)[2]  # the ClusterQueue runs again
    engine.upsert(parse_one(cq))
    engine.run_pass(NOW + timedelta(seconds=2))  # after the second-pass backoff of its second try
    wl = engine.state.workload("default/train")
    assert wl.is_admitted and wl.unhealthy_nodes == []
    domains = wl.admission.pod_set_assignments[0].topology_assignment.domains
    assert "b1-r1-n1" not in [d.values[-1] for d in domains] and sum(d.count for d in domains) == 2


def test_simulate_warns_of_an_admission_check_without_an_active_condition():
    """Kueue holds such a check inactive until its controller marks it; the engine takes it as
    active, so that a hand-written file runs, and says so."""
    from scheduler.simulate import simulate

    from .factories import FILE

    unstated = admission_check("prov", PROVISIONING)
    del unstated["status"]
    objects = [*base(), unstated, admission_check("other"), cluster_queue(admission_checks=("prov", "other")),
               cluster_queue("cq-2", admission_checks=("prov",)), *grid()]
    warnings: list[str] = []
    simulate([(FILE, obj) for obj in objects], gates=gates(), now=NOW, warn=warnings.append)
    assert [w for w in warnings if w.startswith("AdmissionCheck/")] == [
        "AdmissionCheck/prov: no Active condition in its status: taken as active here, but Kueue holds it inactive "
        "until its controller (kueue.x-k8s.io/provisioning-request) marks it Active, and with it ClusterQueue(s) "
        "cq, cq-2"]
    assert engine_of(objects).state.inactive_cluster_queues == {}
