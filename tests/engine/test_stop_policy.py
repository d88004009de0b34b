"""A ClusterQueue's or LocalQueue's spec.stopPolicy, as Kueue applies it: Hold admits nothing
more (its waiting workloads are Inadmissible, "ClusterQueue X is inactive") and takes back the
reservations still waiting for admission checks; HoldAndDrain also evicts the admitted ones
(ClusterQueueStopped / LocalQueueStopped); back to None, the queue admits again."""

from __future__ import annotations

import copy
import dataclasses
from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.model import STOP_HOLD, STOP_HOLD_AND_DRAIN, STOP_NONE
from scheduler.queue_status import active_condition, local_queue_condition
from scheduler.stop_policy import withdrawn_reservation

from .factories import (
    NOW,
    RACK,
    admission_check,
    admitted,
    domains_json,
    gates,
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


def cluster(*, cq_policy: str | None = None, lq_policy: str | None = None, checks: bool = False) -> list[dict]:
    """`checks`: the ClusterQueue asks for the admission check `prov`, which the workloads it
    admits wait for."""
    cq = queue_with_policy("cq", cpu=8)
    if cq_policy is not None:
        cq["spec"]["stopPolicy"] = cq_policy
    if checks:
        cq["spec"]["admissionChecks"] = ["prov"]
    lq = local_queue("lq", cluster_queue_name="cq")
    if lq_policy is not None:
        lq["spec"]["stopPolicy"] = lq_policy
    running = admitted(workload("running", queue="lq", count=2, cpu="1", required=RACK),
                       assignments={"main": domains_json(HOST_LEVELS, [(("b1", "r1", "x1"), 2)])},
                       cluster_queue_name="cq")
    return [topology(), resource_flavor(), *([admission_check("prov")] if checks else []), cq, lq,
            node("x1", block="b1", rack="r1", cpu="4"),
            node("x2", block="b1", rack="r1", cpu="4"), running,
            workload("waiting", queue="lq", count=2, cpu="1", required=RACK, created=10)]


def engine_of(objects) -> Engine:
    return Engine.from_parsed(parse(objects), gates())


def decided(outcome) -> dict[str, tuple[str, str]]:
    return {k.split("/")[1]: (r.status, r.message) for k, r in outcome.decided.items()}


def test_running_queue_admits():
    outcome = engine_of(cluster()).run_pass(NOW)
    assert decided(outcome)["waiting"][0] == "Admitted"


@pytest.mark.parametrize("policy", [STOP_HOLD, STOP_HOLD_AND_DRAIN])
def test_a_stopped_cluster_queue_admits_nothing(policy):
    outcome = engine_of(cluster(cq_policy=policy)).run_pass(NOW)
    assert decided(outcome)["waiting"] == ("Inadmissible", "ClusterQueue cq is inactive")


@pytest.mark.parametrize("policy", [STOP_HOLD, STOP_HOLD_AND_DRAIN])
def test_a_stopped_local_queue_admits_nothing_and_is_named_first(policy):
    outcome = engine_of(cluster(cq_policy=STOP_HOLD, lq_policy=policy)).run_pass(NOW)
    assert decided(outcome)["waiting"] == ("Inadmissible", "LocalQueue lq is inactive")


def test_hold_keeps_the_admitted_running():
    engine = engine_of(cluster(cq_policy=STOP_HOLD))
    outcome = engine.run_pass(NOW)
    assert "running" not in decided(outcome)
    assert not engine.state.workload("default/running").condition_true("Evicted")


@pytest.mark.parametrize(("cq_policy", "lq_policy", "reason", "message"), [
    (STOP_HOLD_AND_DRAIN, None, "ClusterQueueStopped", "The ClusterQueue is stopped"),
    (None, STOP_HOLD_AND_DRAIN, "LocalQueueStopped", "The LocalQueue is stopped"),
    # the LocalQueue is reconciled first: Hold there does not drain, the ClusterQueue does
    (STOP_HOLD_AND_DRAIN, STOP_HOLD, "ClusterQueueStopped", "The ClusterQueue is stopped"),
])
def test_hold_and_drain_evicts_the_admitted(cq_policy, lq_policy, reason, message):
    engine = engine_of(cluster(cq_policy=cq_policy, lq_policy=lq_policy))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload("default/running")
    evicted = wl.condition("Evicted")
    assert (evicted.status, evicted.reason, evicted.message) == ("True", reason, message)
    assert [(e.key, e.reason, e.message) for e in outcome.result.events if e.key == "default/running"] == [
        ("default/running", f"EvictedDueTo{reason}", message)]
    assert [d.trigger for d in outcome.result.decisions if d.key == "default/running"] == [reason]
    # evicted once: the next pass leaves it as it is
    again = engine.run_pass(NOW + timedelta(seconds=1))
    assert not [e for e in again.result.events if e.key == "default/running"]


def test_resumed_queue_admits_again_and_changes_are_applied_one_at_a_time():
    engine = engine_of(cluster(cq_policy=STOP_HOLD))
    assert decided(engine.run_pass(NOW))["waiting"][0] == "Inadmissible"
    cq = engine.state.cluster_queues["cq"]
    engine.upsert(dataclasses.replace(cq, stop_policy=STOP_NONE))
    assert decided(engine.run_pass(NOW + timedelta(seconds=1)))["waiting"][0] == "Admitted"

    lq = engine.state.local_queues["default/lq"]
    engine.upsert(dataclasses.replace(lq, stop_policy=STOP_HOLD_AND_DRAIN))
    outcome = engine.run_pass(NOW + timedelta(seconds=2))
    evicted = {d.key for d in outcome.result.decisions if d.kind == "WorkloadEvicted"}
    assert evicted == {"default/running", "default/waiting"}


def test_a_stopped_queue_is_rebuilt_the_same():
    objects = cluster(cq_policy=STOP_HOLD_AND_DRAIN)
    warm = engine_of(copy.deepcopy(objects))
    warm.run_pass(NOW)
    cold = engine_of(copy.deepcopy(objects))
    cold.run_pass(NOW)
    assert warm.queues.orphans.keys() == cold.queues.orphans.keys() == {"default/waiting"}


def test_an_unknown_stop_policy_is_refused():
    lq = local_queue("lq", cluster_queue_name="cq")
    lq["spec"]["stopPolicy"] = "Pause"
    with pytest.raises(InputError, match=r"spec.stopPolicy"):
        parse_one(lq)
    assert parse_one({**lq, "spec": {"clusterQueue": "cq"}}).stop_policy == STOP_NONE


@pytest.mark.parametrize(("cq_policy", "lq_policy", "summary"), [
    (STOP_HOLD, None, "ClusterQueue cq is inactive: it is stopped (stopPolicy Hold)"),
    (None, STOP_HOLD_AND_DRAIN, "LocalQueue lq is inactive: it is stopped (stopPolicy HoldAndDrain)"),
])
def test_why_pending_says_the_queue_is_stopped_before_and_after_a_pass(cq_policy, lq_policy, summary):
    engine = engine_of(cluster(cq_policy=cq_policy, lq_policy=lq_policy))
    # before any cycle looked at it, computed afresh: there is room, but the queue admits nothing
    before = engine.explain("default/waiting", NOW)
    assert (before.fits, before.summary) == (False, summary)
    engine.run_pass(NOW)
    after = engine.explain("default/waiting", NOW)
    assert (after.fits, after.summary) == (False, summary)


def awaiting_checks(name: str) -> dict:
    """A workload holding a quota reservation in cq that is not an admission yet: its
    ProvisioningRequest check is still Pending."""
    wl = admitted(workload(name, queue="lq", count=2, cpu="1", required=RACK, created=5),
                  assignments={"main": domains_json(HOST_LEVELS, [(("b1", "r1", "x2"), 2)])},
                  cluster_queue_name="cq")
    wl["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved"},
        {"type": "Admitted", "status": "False", "reason": "UnsatisfiedChecks", "message": "not all checks ready"}]
    wl["status"]["admissionChecks"] = [{"name": "prov", "state": "Pending", "message": "",
                                        "lastTransitionTime": "2025-06-01T11:00:00Z"}]
    return wl


def written(outcome, name: str) -> dict[str, tuple[str, str, str]]:
    """The conditions the pass writes for the workload."""
    return {c.type: (c.status, c.reason, c.message) for c in outcome.decided[f"default/{name}"].conditions}


def test_a_running_queue_keeps_a_reservation_waiting_for_checks():
    engine = engine_of([*cluster(checks=True), awaiting_checks("checking")])
    outcome = engine.run_pass(NOW)
    assert "checking" not in decided(outcome)
    assert engine.state.workload("default/checking").admission is not None
    assert "default/checking" in engine.state.reserved_not_admitted


@pytest.mark.parametrize(("cq_policy", "lq_policy", "message"), [
    (STOP_HOLD, None, "ClusterQueue cq is inactive"),
    (STOP_HOLD_AND_DRAIN, None, "ClusterQueue cq is inactive"),
    (None, STOP_HOLD, "LocalQueue lq is inactive"),
    (STOP_HOLD, STOP_HOLD_AND_DRAIN, "LocalQueue lq is inactive"),
])
def test_a_stopped_queue_takes_back_a_reservation_waiting_for_checks(cq_policy, lq_policy, message):
    engine = engine_of([*cluster(cq_policy=cq_policy, lq_policy=lq_policy, checks=True), awaiting_checks("checking")])
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload("default/checking")
    assert wl.admission is None
    assert "default/checking" not in engine.state.charges and not engine.state.reserved_not_admitted
    # Kueue unsets it ("... is stopped"), then finds it waiting in an inactive queue
    assert written(outcome, "checking")["QuotaReserved"] == ("False", "Inadmissible", message)
    assert decided(outcome)["checking"] == ("Inadmissible", message)
    assert written(outcome, "checking")["Admitted"][0] == "False"
    assert not [e for e in outcome.result.events if e.key == "default/checking"]
    # the admitted one is evicted only by a HoldAndDrain the LocalQueue does not override with Hold
    drained = STOP_HOLD_AND_DRAIN in (cq_policy, lq_policy) and lq_policy != STOP_HOLD
    assert engine.state.workload("default/running").condition_true("Evicted") is drained


@pytest.mark.parametrize(("kind", "key", "message"), [
    ("LocalQueue", "default/lq", "LocalQueue lq doesn't exist"),
    ("ClusterQueue", "cq", "ClusterQueue cq doesn't exist"),
])
def test_a_missing_queue_takes_back_a_reservation_waiting_for_checks(kind, key, message):
    engine = engine_of([*cluster(checks=True), awaiting_checks("checking")])
    engine.run_pass(NOW)
    engine.delete(kind, key)
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert engine.state.workload("default/checking").admission is None
    assert written(outcome, "checking")["QuotaReserved"] == ("False", "Inadmissible", message)
    assert decided(outcome)["checking"] == ("Inadmissible", message)
    # the admitted workload keeps running: Kueue takes back only reservations not yet admitted
    assert engine.state.workload("default/running").admission is not None


def test_a_withdrawn_reservation_is_admitted_again_when_the_queue_resumes():
    engine = engine_of([*cluster(cq_policy=STOP_HOLD, checks=True), awaiting_checks("checking")])
    engine.run_pass(NOW)
    engine.upsert(dataclasses.replace(engine.state.cluster_queues["cq"], stop_policy=STOP_NONE))
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    # a new reservation, waiting for its check again (the check state is kept, as Kueue keeps it)
    assert decided(outcome)["checking"][0] == "QuotaReserved"
    assert engine.state.workload("default/checking").has_quota_reservation


# ---------------------------------------------------------------- a ClusterQueue being deleted


def terminating(objects: list[dict]) -> list[dict]:
    """`objects` with the ClusterQueue `cq` carrying a deletionTimestamp (Kueue's finalizer holds it)."""
    out = copy.deepcopy(objects)
    for obj in out:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == "cq":
            obj["metadata"]["deletionTimestamp"] = "2025-06-01T11:59:00Z"
    return out


def test_a_terminating_cluster_queue_admits_nothing_and_keeps_what_runs():
    engine = engine_of(terminating([*cluster(checks=True), awaiting_checks("checking")]))
    assert active_condition(engine.state.inactive_cluster_queues["cq"]) == (
        "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    outcome = engine.run_pass(NOW)
    assert decided(outcome)["waiting"] == ("Inadmissible", "ClusterQueue cq is inactive")
    # Kueue's workload controller takes back the reservation still waiting for its checks
    assert engine.state.workload("default/checking").admission is None
    assert written(outcome, "checking")["QuotaReserved"][:2] == ("False", "Inadmissible")
    running = engine.state.workload("default/running")
    assert running.is_admitted and not running.condition_true("Evicted")
    assert local_queue_condition(engine.state, engine.state.local_queues["default/lq"]) == (
        "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")


def test_a_reservation_in_a_terminating_cluster_queue_is_taken_back_with_kueues_words():
    engine = engine_of(terminating([*cluster(checks=True), awaiting_checks("checking")]))
    assert withdrawn_reservation(engine.state, engine.state.workload("default/checking")) == \
        "ClusterQueue cq is terminating or missing"


def test_a_deletion_undone_by_the_mirror_activates_the_queue_again():
    """A ClusterQueue update without the deletionTimestamp (a re-list after a missed event, say)
    makes it active: the engine follows the object, not a remembered deletion."""
    engine = engine_of(terminating(cluster()))
    engine.run_pass(NOW)
    engine.upsert(parse_one(cluster()[2]))
    assert engine.state.inactive_cluster_queues == {}
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert decided(outcome)["waiting"][0] == "Admitted"
