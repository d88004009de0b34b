"""A workload holding a quota reservation, not admitted yet: Kueue's workload controller admits it
once its admission checks are all Ready, and why-pending says what it waits for meanwhile."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.admission_wait import admission_wait, checks_satisfied
from scheduler.engine import Engine

from .factories import (
    NOW,
    RACK,
    admission_check,
    admitted,
    cluster_queue,
    domains_json,
    gates,
    grid,
    local_queue,
    parse,
    parse_one,
    resource_flavor,
    topology,
    workload,
)

KEY = "default/train"
HOSTNAME_LEVELS = ["kubernetes.io/hostname"]


def reserved(checks: dict[str, tuple[str, str]], *, delayed: bool = False, reserved_at: str = "2025-06-01T11:59:00Z"):
    """`train` holding a reservation in cq, its checks (name -> (state, message)) as given; its
    TopologyAssignment placed, or `delayed` for the second pass."""
    wl = admitted(workload("train", count=2, cpu="1", required=RACK),
                  assignments={"main": domains_json(HOSTNAME_LEVELS, [("b1-r1-n1", 2)])})
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    if delayed:
        del psa["topologyAssignment"]
        psa["delayedTopologyRequest"] = "Pending"
    wl["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                   "message": "reserved", "lastTransitionTime": reserved_at}]
    wl["status"]["admissionChecks"] = [{"name": name, "state": state, "message": message}
                                       for name, (state, message) in checks.items()]
    return wl


def engine_of(wl: dict, *, required: tuple[str, ...] = ("prov",), extra: list[dict] | None = None) -> Engine:
    objects = [topology(), resource_flavor(), *(admission_check(name) for name in ("prov", "other")),
               cluster_queue(admission_checks=required), local_queue(), *grid(1, 1, 2), *(extra or []), wl]
    return Engine.from_parsed(parse(objects), gates())


def events(outcome) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in outcome.result.events if e.key == KEY]


def test_a_reservation_whose_checks_are_ready_is_admitted_with_kueues_event():
    engine = engine_of(reserved({"prov": ("Ready", "provisioned")}))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert wl.is_admitted
    assert outcome.decided[KEY].status == "Admitted"
    assert events(outcome) == [("Admitted", "Admitted by ClusterQueue cq, wait time since reservation was 60s")]
    assert KEY not in engine.state.reserved_not_admitted
    assert events(engine.run_pass(NOW + timedelta(seconds=1))) == []  # once


@pytest.mark.parametrize(("checks", "required", "admits"), [
    ({"prov": ("Pending", "")}, ("prov",), False),
    ({"prov": ("Ready", ""), "other": ("Pending", "")}, ("prov", "other"), False),
    ({"prov": ("Ready", "")}, ("prov", "other"), False),  # `other` is not listed yet: Kueue adds it Pending
    ({"prov": ("Ready", ""), "other": ("Pending", "")}, ("prov",), True),  # `other` is no longer asked for
    ({"prov": ("Pending", "")}, (), True),  # the ClusterQueue asks for no check any more
])
def test_admitted_once_every_check_the_cluster_queue_asks_for_is_ready(checks, required, admits):
    engine = engine_of(reserved(checks), required=required)
    assert checks_satisfied(engine.state, engine.state.workload(KEY)) is admits
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).is_admitted is admits


def test_a_delayed_topology_is_left_to_the_second_pass():
    engine = engine_of(reserved({"prov": ("Ready", "")}, delayed=True))
    assert not checks_satisfied(engine.state, engine.state.workload(KEY))
    engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert wl.is_admitted and wl.admission.pod_set_assignments[0].topology_assignment is not None


def test_a_check_turning_ready_admits_at_the_next_pass():
    engine = engine_of(reserved({"prov": ("Pending", "")}))
    engine.run_pass(NOW)
    assert not engine.state.workload(KEY).is_admitted
    engine.upsert(parse_one(reserved({"prov": ("Ready", "")})))
    outcome = engine.run_pass(NOW + timedelta(seconds=5))
    assert engine.state.workload(KEY).is_admitted
    assert [reason for reason, _ in events(outcome)] == ["Admitted"]


# ---------------------------------------------------------------- what why-pending says


@pytest.mark.parametrize(("checks", "delayed", "step", "says"), [
    ({"prov": ("Pending", "Provisioning Request was created")}, False, "admission-checks",
     "quota reserved in ClusterQueue cq; admitted once every admission check is Ready: waiting for prov "
     "(Pending: Provisioning Request was created)"),
    ({"prov": ("Pending", "")}, True, "admission-checks",
     "quota reserved in ClusterQueue cq; admitted once every admission check is Ready: waiting for prov (Pending); "
     "then its TopologyAssignment is placed for PodSet(s) main"),
    ({"prov": ("Retry", "capacity not available")}, False, "evicted-by-check",
     "quota reserved in ClusterQueue cq, but admission check(s) prov (Retry: capacity not available) asked to "
     "retry: the next pass evicts it, as Kueue's workload controller does; its quota is given back once its pods "
     "are gone, and it is queued again"),
    ({"prov": ("Rejected", "")}, False, "evicted-by-check",
     "quota reserved in ClusterQueue cq, but admission check(s) prov (Rejected) rejected it: the next pass "
     "deactivates it, as Kueue's workload controller does, and it is not queued again until it is activated"),
])
def test_what_a_reservation_waits_for(checks, delayed, step, says):
    engine = engine_of(reserved(checks, delayed=delayed))
    wait = admission_wait(engine.state, engine.state.workload(KEY))
    assert (wait.step, wait.summary) == (step, says)
    assert wait.cluster_queue == "cq" and wait.reserved_since.isoformat() == "2025-06-01T11:59:00+00:00"
    assert [c.name for c in wait.checks] == ["prov"]
    assert wait.to_json()["admissionChecks"] == [{"name": "prov", "state": checks["prov"][0],
                                                  "message": checks["prov"][1], "retryCount": None,
                                                  "requeueAfterSeconds": None}]


def test_a_delayed_topology_in_an_inactive_cluster_queue_says_so():
    check = admission_check("prov")
    check["status"]["conditions"] = [{"type": "Active", "status": "False"}]
    objects = [topology(), resource_flavor(), check, cluster_queue(admission_checks=("prov",)), local_queue(),
               *grid(1, 1, 2), reserved({"prov": ("Ready", "")}, delayed=True)]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    wait = admission_wait(engine.state, engine.state.workload(KEY))
    assert wait.step == "second-pass"
    assert wait.summary.endswith(": not while ClusterQueue cq is inactive")
    assert wait.delayed_pod_sets == ["main"]


def test_nothing_to_say_of_a_workload_without_a_pending_reservation():
    engine = engine_of(reserved({"prov": ("Ready", "")}))
    engine.run_pass(NOW)
    assert admission_wait(engine.state, engine.state.workload(KEY)) is None  # admitted now
    engine = engine_of(workload("train", count=2, cpu="1", required=RACK))
    assert admission_wait(engine.state, engine.state.workload(KEY)) is None  # holds no reservation


def test_a_reservation_in_a_stopped_cluster_queue_is_said_to_be_taken_back():
    objects = [topology(), resource_flavor(), admission_check("prov"), cluster_queue(admission_checks=("prov",)),
               local_queue(), *grid(1, 1, 2), reserved({"prov": ("Pending", "")})]
    objects[3]["spec"]["stopPolicy"] = "Hold"
    engine = Engine.from_parsed(parse(objects), gates())
    wait = admission_wait(engine.state, engine.state.workload(KEY))
    assert wait.step == "reservation-taken-back"
    assert wait.summary == ("quota reserved in ClusterQueue cq, but ClusterQueue cq is stopped: the next pass takes "
                            "the reservation back, as Kueue's workload controller does, and it waits in its queue "
                            "again")
    engine.run_pass(NOW)  # and the pass does so
    assert engine.state.workload(KEY).admission is None


# ---------------------------------------------------------------- a check in Retry or Rejected


def test_a_check_asking_to_retry_evicts_the_reservation_and_resets_the_checks():
    engine = engine_of(reserved({"prov": ("Retry", "capacity not available")}))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    evicted = wl.condition("Evicted")
    assert (evicted.status, evicted.reason, evicted.message) == (
        "True", "AdmissionCheck", "At least one admission check is false")
    assert wl.active
    assert [(c.name, c.state, c.message, c.retry_count) for c in wl.admission_checks] == [
        ("prov", "Pending", "Reset to Pending after eviction. Previously: Retry", 1)]
    assert events(outcome) == [("EvictedDueToAdmissionCheck", "At least one admission check is false")]
    (decision,) = [d for d in outcome.result.decisions if d.key == KEY]
    assert (decision.kind, decision.trigger) == ("WorkloadEvicted", "admission check retry")
    assert KEY not in engine.state.with_failed_checks
    assert events(engine.run_pass(NOW + timedelta(seconds=1))) == []  # evicted once


def test_a_rejected_check_deactivates_the_workload():
    engine = engine_of(reserved({"prov": ("Rejected", "no such capacity"), "other": ("Ready", "")}),
                       required=("prov", "other"))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert not wl.active
    target = wl.condition("DeactivationTarget")
    assert (target.status, target.reason, target.message) == (
        "True", "AdmissionCheck", "Admission check(s): prov, were rejected")
    evicted = wl.condition("Evicted")
    assert (evicted.reason, evicted.message) == (
        "DeactivatedDueToAdmissionCheck", "The workload is deactivated due to Admission check(s): prov, were rejected")
    assert events(outcome) == [
        ("AdmissionCheckRejected",
         "Deactivating workload because AdmissionCheck for prov was Rejected: no such capacity"),
        ("EvictedDueToDeactivatedDueToAdmissionCheck",
         "The workload is deactivated due to Admission check(s): prov, were rejected")]
    assert {c.name: c.state for c in wl.admission_checks} == {"prov": "Pending", "other": "Pending"}


def test_an_admitted_workload_whose_check_asks_to_retry_is_evicted_too():
    wl = reserved({"prov": ("Retry", "revoked")})
    wl["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok"})
    engine = engine_of(wl)
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).condition_true("Evicted")


def test_the_evicted_workload_is_queued_again_once_its_quota_is_given_back():
    engine = engine_of(reserved({"prov": ("Retry", "")}))
    engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert wl.has_quota_reservation  # until its pods are gone
    # the eviction finished (its job stopped): Kueue clears the reservation
    released = parse_one(reserved({"prov": ("Pending", "")}))
    released.admission = None
    released.conditions = [c for c in released.conditions if c.type != "QuotaReserved"]
    engine.upsert(released)
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert outcome.decided[KEY].status == "QuotaReserved"  # reserved again, waiting for its check


def test_an_unknown_check_state_is_refused_with_where_it_is():
    from scheduler.errors import InputError

    wl = reserved({"prov": ("Waiting", "")})
    with pytest.raises(InputError, match=r"Workload/default/train: status\.admissionChecks\[0\]\.state: must be one of "
                                         r"Pending, Ready, Retry, Rejected, got 'Waiting'"):
        engine_of(wl)


@pytest.mark.parametrize(("state", "says"), [
    ("Retry", "evicted (AdmissionCheck: At least one admission check is false): it holds its quota until its pods "
              "are gone; then it waits in its queue again"),
    ("Rejected", "evicted (DeactivatedDueToAdmissionCheck: The workload is deactivated due to Admission check(s): "
                 "prov, were rejected): it holds its quota until its pods are gone; it is deactivated, and not "
                 "queued again until it is activated (spec.active)"),
])
def test_why_pending_of_an_evicted_workload_still_holding_its_quota(state, says):
    from scheduler.admission_wait import eviction_wait

    engine = engine_of(reserved({"prov": (state, "")}))
    assert eviction_wait(engine.state.workload(KEY)) is None  # not evicted yet
    engine.run_pass(NOW)
    assert eviction_wait(engine.state.workload(KEY)) == says


@pytest.mark.parametrize(("cpu", "outlook"), [
    ("8", "it fits on the nodes as they are, so its next second pass places it unless the room is taken first"),
    ("0.5", "it does not fit on the nodes as they are: couldn't assign flavors to pod set main: "),
])
def test_a_delayed_topology_is_said_to_fit_or_not_on_the_nodes_as_they_are(cpu, outlook):
    """Said before the second pass runs (its backoff not over, say); the pass then agrees."""
    objects = [topology(), resource_flavor(), admission_check("prov"), cluster_queue(admission_checks=("prov",)),
               local_queue(), *grid(1, 1, 2, cpu=cpu), reserved({"prov": ("Ready", "")}, delayed=True)]
    engine = Engine.from_parsed(parse(objects), gates())
    wait = admission_wait(engine.state, engine.state.workload(KEY))
    assert wait.step == "second-pass"
    assert outlook in wait.summary
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).is_admitted is outlook.startswith("it fits")


def test_a_reservation_gets_the_checks_its_cluster_queue_asks_for():
    """Kueue's workload controller syncs the list: a check missing is added Pending (its
    controller acts on it only once listed), one no longer asked for goes."""
    engine = engine_of(reserved({"old": ("Ready", "")}), required=("prov", "other"))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert [(c.name, c.state) for c in wl.admission_checks] == [("other", "Pending"), ("prov", "Pending")]
    assert KEY in outcome.decided and outcome.decided[KEY].status == "QuotaReserved"
    assert KEY not in engine.run_pass(NOW + timedelta(seconds=1)).decided  # in sync now: nothing to write


# ---------------------------------------------------------------- KEP-3258: a check asking for a delay


def with_delays(wl: dict, delays: dict[str, tuple[int, timedelta]]) -> dict:
    """The checks named in `delays` carry requeueAfterSeconds and a lastTransitionTime that long
    before NOW."""
    for check in wl["status"]["admissionChecks"]:
        if check["name"] in delays:
            seconds, ago = delays[check["name"]]
            check["requeueAfterSeconds"] = seconds
            check["lastTransitionTime"] = (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    return wl


def released_copy(engine: Engine) -> object:
    """The workload as Kueue writes it once its eviction finished (pods gone, quota given back):
    what the engine made of it, without its reservation."""
    from dataclasses import replace

    wl = engine.state.workload(KEY)
    return replace(wl, admission=None, conditions=[c for c in wl.conditions if c.type != "QuotaReserved"],
                   admission_checks=list(wl.admission_checks))


def test_a_retry_delay_keeps_the_evicted_workload_out_of_its_queue_until_then():
    engine = engine_of(with_delays(reserved({"prov": ("Retry", "capacity not available")}),
                                   {"prov": (120, timedelta(seconds=10))}))
    engine.run_pass(NOW)
    wl = engine.state.workload(KEY)
    assert wl.condition_true("Evicted")
    assert wl.requeue_at == NOW + timedelta(seconds=110)  # lastTransitionTime + requeueAfterSeconds
    (prov,) = wl.admission_checks
    # reset as Kueue resets it: the delay is kept, the transition is now
    assert (prov.state, prov.retry_count, prov.requeue_after_seconds, prov.last_transition_time) == (
        "Pending", 1, 120, NOW)
    engine.upsert(released_copy(engine))
    early = engine.run_pass(NOW + timedelta(seconds=60))
    assert not engine.state.workload(KEY).has_quota_reservation
    assert KEY not in early.decided or early.decided[KEY].status != "QuotaReserved"
    later = engine.run_pass(NOW + timedelta(seconds=111))
    assert later.decided[KEY].status == "QuotaReserved"


@pytest.mark.parametrize(("delays", "requeue_at", "expected"), [
    # the latest of the checks' times wins
    ({"prov": (120, timedelta(seconds=10)), "other": (300, timedelta(seconds=0))}, None, NOW + timedelta(seconds=300)),
    # a requeueAt already later is not shortened (another component set it)
    ({"prov": (120, timedelta(seconds=0))}, NOW + timedelta(hours=1), NOW + timedelta(hours=1)),
    # a delay already past changes nothing
    ({"prov": (60, timedelta(seconds=300))}, None, None),
])
def test_the_requeue_time_kueues_workload_controller_sets(delays, requeue_at, expected):
    wl = with_delays(reserved({"prov": ("Retry", ""), "other": ("Retry", "")}), delays)
    if requeue_at is not None:
        wl["status"]["requeueState"] = {"requeueAt": requeue_at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    engine = engine_of(wl, required=("prov", "other"))
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).requeue_at == expected


def test_a_reset_drops_the_retry_count_of_other_states_and_their_pod_set_updates():
    wl = reserved({"prov": ("Retry", ""), "other": ("Ready", "")})
    wl["status"]["admissionChecks"][1].update(
        retryCount=4, podSetUpdates=[{"name": "main", "nodeSelector": {"zone": "a"}}])
    engine = engine_of(wl, required=("prov", "other"))
    engine.run_pass(NOW)
    prov, other = engine.state.workload(KEY).admission_checks
    assert (prov.retry_count, other.retry_count, other.pod_set_updates) == (1, None, ())


# ---------------------------------------------------------------- nomination: failed checks


def pending_with_checks(checks: dict[str, tuple[str, str]], **kw) -> dict:
    wl = workload("train", count=2, cpu="1", required=RACK, **kw)
    wl.setdefault("status", {})["admissionChecks"] = [
        {"name": name, "state": state, "message": message, "lastTransitionTime": "2025-06-01T11:59:00Z"}
        for name, (state, message) in checks.items()]
    return wl


@pytest.mark.parametrize("state", ["Retry", "Rejected"])
def test_a_waiting_workload_with_a_failed_check_is_turned_away_at_nomination(state):
    """Kueue's nominate: a head with an admission check in Retry or Rejected is inadmissible
    before any flavor is tried, whatever room there is; once the check's controller sets it back,
    the workload is tried again."""
    engine = engine_of(pending_with_checks({"prov": (state, "not yet")}))
    outcome = engine.run_pass(NOW)
    result = outcome.decided[KEY]
    assert (result.status, result.message) == ("Inadmissible", "The workload has failed admission checks")
    reserved_cond = next(c for c in result.conditions if c.type == "QuotaReserved")
    assert (reserved_cond.status, reserved_cond.reason) == ("False", "PendingEvaluation")
    assert result.stop.step == "failed-admission-checks"
    assert f"prov is {state} (not yet)" in result.stop.message
    assert not engine.state.workload(KEY).has_quota_reservation

    engine.upsert(parse_one(pending_with_checks({"prov": ("Pending", "")})))
    assert engine.run_pass(NOW + timedelta(seconds=1)).decided[KEY].status == "QuotaReserved"


def test_why_pending_computed_now_says_the_check_failed_not_that_it_fits():
    from scheduler.explain import explain_workload

    engine = engine_of(pending_with_checks({"prov": ("Retry", "capacity not available")}))
    answer = explain_workload(engine.state, engine.state.workload(KEY))
    assert not answer.fits
    assert "The workload has failed admission checks: prov is Retry (capacity not available)" in answer.summary


def test_a_late_retry_delay_on_a_waiting_workload_sets_its_requeue_time():
    """KEP-3258: a check's controller may set Retry with a delay after the eviction; the workload
    controller still moves requeueAt to it."""
    wl = pending_with_checks({"prov": ("Retry", "")})
    wl["status"]["admissionChecks"][0].update(requeueAfterSeconds=600, lastTransitionTime="2025-06-01T12:00:00Z")
    engine = engine_of(wl)
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).requeue_at == NOW + timedelta(seconds=600)
    assert KEY in engine.state.with_retry_delay


def test_the_workloads_equivalent_to_one_with_a_failed_check_are_not_parked_with_it():
    """Kueue moves no equivalent workload with one turned away for its checks: they say nothing
    of the others."""
    train = pending_with_checks({"prov": ("Retry", "")})
    train["metadata"]["creationTimestamp"] = "2025-06-01T11:58:00Z"
    twin = workload("twin", count=2, cpu="1", required=RACK)
    twin["metadata"]["creationTimestamp"] = "2025-06-01T11:59:30Z"  # behind `train` in the queue
    engine = engine_of(train, extra=[twin])
    outcome = engine.run_pass(NOW)
    assert outcome.decided[KEY].status == "Inadmissible"
    assert outcome.decided["default/twin"].status == "QuotaReserved"


def test_why_pending_in_the_backoff_says_the_check_asked_for_it():
    from scheduler.model import Condition

    engine = engine_of(with_delays(reserved({"prov": ("Retry", "capacity not available")}),
                                   {"prov": (120, timedelta(seconds=0))}))
    engine.run_pass(NOW)
    released = released_copy(engine)
    # Kueue's job reconciler, once the pods are gone: Requeued=False until the backoff is over
    requeued = Condition("Requeued", "False", "AdmissionCheck", "At least one admission check is false", NOW)
    released.conditions = [*released.conditions, requeued]
    engine.upsert(released)
    engine.run_pass(NOW + timedelta(seconds=1))
    stop = engine.stop_record(KEY, NOW + timedelta(seconds=1))
    assert (stop.step, stop.message) == (
        "backoff", "in its requeue backoff until 2025-06-01T12:02:00Z, after its eviction by an admission check in "
                   "Retry; the delay its checks' controllers asked for: prov 120s")


# ---------------------------------------------------------------- every eviction resets the checks

READY_RESET = ("prov", "Pending", "Reset to Pending after eviction. Previously: Ready")


def checked_and_admitted(name: str, *, cpu: str = "2", priority: int | None = None, **status_extra) -> dict:
    """`name` admitted in cq after its check `prov` turned Ready."""
    wl = admitted(workload(name, count=1, cpu=cpu, priority=priority, unconstrained=True),
                  assignments={"main": domains_json(HOSTNAME_LEVELS, [("b1-r1-n1", 1)])})
    wl["status"]["admissionChecks"] = [{"name": "prov", "state": "Ready", "message": "provisioned"}]
    wl["status"].update(status_extra)
    return wl


def checks_of(engine: Engine, key: str) -> list[tuple[str, str, str]]:
    return [(c.name, c.state, c.message) for c in engine.state.workload(key).admission_checks]


def test_a_preempted_workload_must_pass_its_checks_again():
    """Kueue resets a preemption victim's checks to Pending: once its quota is given back and it
    is reserved again, it waits for its check instead of being admitted on the old Ready."""
    cq = cluster_queue(quota={"cpu": "2"}, admission_checks=("prov",))
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    objects = [topology(), resource_flavor(), admission_check("prov"), cq, local_queue(), *grid(1, 1, 2),
               checked_and_admitted("victim", priority=0), workload("urgent", count=1, cpu="2", priority=100,
                                                                     unconstrained=True)]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    victim = engine.state.workload("default/victim")
    assert victim.condition_true("Evicted") and victim.condition_true("Preempted")
    assert checks_of(engine, "default/victim") == [READY_RESET]
    # the victim's job stopped (Kueue clears its reservation), the preemptor is gone
    released = parse_one(checked_and_admitted("victim", priority=0))
    released.admission = None
    released.conditions = []
    released.admission_checks = engine.state.workload("default/victim").admission_checks
    engine.upsert(released)
    engine.delete("Workload", "default/urgent")
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert outcome.decided["default/victim"].status == "QuotaReserved"
    assert not engine.state.workload("default/victim").is_admitted


@pytest.mark.parametrize("evict", ["hold and drain", "deactivated", "PodsReady timeout"])
def test_every_eviction_resets_the_checks(evict):
    extra: list[dict] = []
    cq = cluster_queue(admission_checks=("prov",))
    wl = checked_and_admitted("train")
    config = None
    if evict == "hold and drain":
        cq["spec"]["stopPolicy"] = "HoldAndDrain"
    elif evict == "deactivated":
        wl["spec"]["active"] = False
    else:
        from scheduler.config import parse_configuration
        config = parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                      "waitForPodsReady": {"timeout": "1m"}})
        wl["status"]["conditions"][1]["lastTransitionTime"] = "2025-06-01T11:00:00Z"
    objects = [topology(), resource_flavor(), admission_check("prov"), cq, local_queue(), *grid(1, 1, 2), *extra, wl]
    engine = Engine.from_parsed(parse(objects), gates(), config=config)
    engine.run_pass(NOW)
    assert engine.state.workload(KEY).condition_true("Evicted")
    assert checks_of(engine, KEY) == [READY_RESET]


def test_checks_without_on_flavors_apply_to_a_reservation_of_no_flavor():
    """Kueue's AdmissionChecksForWorkload: a check on every flavor is required whatever the
    workload's flavors, even none; one with onFlavors only when a flavor matches."""
    cq = cluster_queue(flavors=("f1", "f2"))
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "all"}, {"name": "only-f2",
                                                                                   "onFlavors": ["f2"]}]}
    objects = [topology(), resource_flavor("f1"), resource_flavor("f2"), admission_check("all"),
               admission_check("only-f2"), cq]
    engine = Engine.from_parsed(parse(objects), gates())
    parsed_cq = engine.state.cluster_queues["cq"]
    assert engine.state.checks_for_flavors(parsed_cq, []) == {"all"}
    assert engine.state.checks_for_flavors(parsed_cq, ["f1"]) == {"all"}
    assert engine.state.checks_for_flavors(parsed_cq, ["f1", "f2"]) == {"all", "only-f2"}


@pytest.mark.parametrize(("flavors", "expected"), [
    pytest.param(["flavor1", "flavor2"], {"ac1", "ac2", "ac3", "ac4", "ac6"},
                 id="Only relevant checks returned for an admitted workload"),
    pytest.param([], {"ac3", "ac4", "ac6"},
                 id="Only correct checks covering all relevant flavors returned for Workload without Quota Reserved"),
])
def test_kueue_admission_checks_for_workload(flavors, expected):
    """Kueue's TestAdmissionChecksForWorkload (pkg/workload): a check whose onFlavors cover every
    flavor of the ClusterQueue applies even before flavors are assigned."""
    cq = cluster_queue(flavors=("flavor1", "flavor2"))
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [
        {"name": "ac1", "onFlavors": ["flavor1"]}, {"name": "ac2", "onFlavors": ["flavor2"]},
        {"name": "ac3", "onFlavors": ["flavor1", "flavor2"]},
        {"name": "ac4", "onFlavors": ["flavor1", "flavor2", "non-existent-flavor"]},
        {"name": "ac5", "onFlavors": ["non-existent-flavor"]}, {"name": "ac6"}]}
    engine = Engine.from_parsed(parse([topology(), resource_flavor("flavor1"), resource_flavor("flavor2"), cq]),
                                gates())
    assert engine.state.checks_for_flavors(engine.state.cluster_queues["cq"], flavors) == expected
