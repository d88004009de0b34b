"""Kueue's workload controller unit tests (pkg/controller/core/workload_controller_test.go, the
newest stored v1beta2 version that still holds every case in one file: TestReconcile with its
utiltestingapi wrappers; later versions move the eviction, requeue and inadmissible cases to
other files and change their messages), played through the engine's pass.

Not transcribed: the DRA cases, the finalizer and retention cases, maximumExecutionTimeSeconds
(not modelled by the engine), and TestWorkloadDeletion (the caches' bookkeeping). Left out too,
because one Go reconcile does one step where the engine's pass does them all, or because the
engine leaves the step to what plays Kueue's job reconciler:
- "admit": a reservation without LocalQueue or ClusterQueue is admitted by Go's first step; the
  pass takes a reservation of a missing queue back before it admits checked reservations (the
  ungater's conformance case "…reserved quota, but not admitted - pod remains gated" depends on
  that order);
- "unadmitted / admitted workload with rejected checks gets deactivated", "trigger deactivation
  of workload when reaching backoffLimitCount": Go's reconcile only sets the DeactivationTarget;
  the pass also deactivates and evicts (the next reconcile's work);
- "workload with retry checks should be evicted and checks should be pending": the workload names
  no LocalQueue, so after the eviction the same pass takes its reservation back;
- "increment re-queue count", "wait time should be limited to backoffMaxSeconds", "recovery time
  should be limited to recoveryTimeout": the engine also writes Requeued=False at the PodsReady
  eviction (Kueue's job reconciler writes it when it clears the admission);
- the five cases that set Requeued=True (reactivated, backoff finished, queue restarted): the
  service's simulator writes that condition (`reconcile_requeued`), not the engine.

A Go case reconciles one Workload once against a fake API server; here its objects are parsed
into an `Engine` and one pass runs at the case's clock (Go's `now` is NOW). A pass runs the
controller steps (PodsReady timeouts, admission-check sync, retry delays, check-based eviction,
stopped queues, admission of checked reservations) and then scheduling cycles. Kueue's reconcile
is the workload controller alone, so a case is run with `cycles=0` unless what it asserts is
written, in the engine, by a cycle (a pending workload whose LocalQueue or ClusterQueue is
missing or stopped: `cycles=None`).

What is compared is what Go's `workloadCmpOpts` compares and the engine has: the conditions
(type, status, reason, message; lastTransitionTime ignored), `status.admission` (its
ClusterQueue), `status.admissionChecks` (name, state, message, retryCount), `requeueState`
(present or not, and its count: Go ignores `requeueAt`), `spec.active`, and the events recorded.
Go's `SchedulingStatsEviction` and `ObservedGeneration` have no counterpart and are left out.
Where Go gives a `wantWorkloadUseMergePatch` (the fake client cannot remove a condition or a
field with server-side apply; the merge patch shows what a real API server keeps), that is the
expectation. The cases whose workload waits in a queue come from a version of Kueue without the
UnadmittedWorkloadsObservability gate: they run with it off (Kueue's behaviour before it).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler.config import Configuration, parse_configuration
from scheduler.engine import Engine, PassOutcome
from scheduler.features import FeatureGates

from .factories import NOW, gates, parse
from .test_config import configuration

V1BETA2 = "kueue.x-k8s.io/v1beta2"
KEY = "ns/wl"
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


# ---------------------------------------------------------------- Kueue's test wrappers (utiltestingapi)


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_workload(name: str = "wl", ns: str = "ns", *, queue: str | None = None,
                  active: bool | None = None) -> dict:
    """MakeWorkload(name, ns): one PodSet `main` of one pod without requests; Queue(queue),
    Active(active)."""
    spec: dict[str, Any] = {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "resources": {"requests": {}}}]}}}]}
    if queue is not None:
        spec["queueName"] = queue
    if active is not None:
        spec["active"] = active
    return {"apiVersion": V1BETA2, "kind": "Workload", "metadata": {"name": name, "namespace": ns, "uid": name},
            "spec": spec, "status": {}}


def condition(wl: dict, type_: str, status: str, reason: str = "", message: str = "", *,
              at: datetime = NOW) -> dict:
    """Condition(...) / apimeta.SetStatusCondition: an existing condition of the type keeps its
    lastTransitionTime unless its status changes."""
    conditions = wl["status"].setdefault("conditions", [])
    for c in conditions:
        if c["type"] == type_:
            if c["status"] != status:
                c["lastTransitionTime"] = _ts(at)
            c.update(status=status, reason=reason, message=message)
            return wl
    conditions.append({"type": type_, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": _ts(at)})
    return wl


def reserve_quota_at(wl: dict, cq: str, at: datetime = NOW, *, flavors: dict[str, str] | None = None) -> dict:
    """ReserveQuotaAt(MakeAdmission(cq)[.PodSets(...Assignment(...))], at)."""
    wl["status"]["admission"] = {"clusterQueue": cq, "podSetAssignments": [
        {"name": "main", "flavors": dict(flavors or {}), "count": 1}]}
    return condition(wl, "QuotaReserved", "True", "AdmittedByTest", f"Admitted by ClusterQueue {cq}", at=at)


def admitted_at(wl: dict, at: datetime = NOW) -> dict:
    """AdmittedAt(true, at)."""
    cq = wl["status"]["admission"]["clusterQueue"]
    return condition(wl, "Admitted", "True", "ByTest", f"Admitted by ClusterQueue {cq}", at=at)


def admission_check(wl: dict, name: str, state: str, message: str = "", *, requeue_after: int | None = None,
                    at: datetime | None = None, retry_count: int | None = None) -> dict:
    """AdmissionCheck(kueue.AdmissionCheckState{...})."""
    check: dict[str, Any] = {"name": name, "state": state, "message": message, "lastTransitionTime": _ts(at or NOW)}
    if requeue_after is not None:
        check["requeueAfterSeconds"] = requeue_after
    if retry_count is not None:
        check["retryCount"] = retry_count
    wl["status"].setdefault("admissionChecks", []).append(check)
    return wl


def requeue_state(wl: dict, count: int | None, at: datetime | None) -> dict:
    """RequeueState(count, requeueAt)."""
    state: dict[str, Any] = {}
    if count is not None:
        state["count"] = count
    if at is not None:
        state["requeueAt"] = _ts(at)
    wl["status"]["requeueState"] = state
    return wl


def make_cluster_queue(name: str = "cq", *, flavors: tuple[str, ...] = (), checks: tuple[str, ...] = (),
                       strategy: tuple[tuple[str, tuple[str, ...]], ...] = (),
                       stop_policy: str | None = None) -> dict:
    """MakeClusterQueue(name)[.ResourceGroup(MakeFlavorQuotas(f)...)][.AdmissionChecks(...)]
    [.AdmissionCheckStrategy(rule(name, onFlavors...)...)][.StopPolicy(...)]."""
    spec: dict[str, Any] = {"namespaceSelector": {}}
    if flavors:
        spec["resourceGroups"] = [{"coveredResources": [], "flavors": [{"name": f, "resources": []}
                                                                        for f in flavors]}]
    if checks:
        spec["admissionChecks"] = list(checks)
    if strategy:
        spec["admissionChecksStrategy"] = {"admissionChecks": [
            {"name": check, **({"onFlavors": list(on)} if on else {})} for check, on in strategy]}
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def make_local_queue(name: str = "lq", ns: str = "ns", cq: str | None = "cq", *,
                     stop_policy: str | None = None) -> dict:
    """MakeLocalQueue(name, ns)[.ClusterQueue(cq)][.StopPolicy(...)]."""
    spec: dict[str, Any] = {}
    if cq is not None:
        spec["clusterQueue"] = cq
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def make_admission_check(name: str) -> dict:
    return {"apiVersion": V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": "example.com/check"},
            "status": {"conditions": [{"type": "Active", "status": "True"}]}}


def make_flavor(name: str) -> dict:
    return {"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def pods_ready(timeout: str = "0s", *, recovery: str | None = None, limit: int | None = None,
               base: int | None = None, maximum: int | None = None) -> Configuration:
    """WithWaitForPodsReady(&waitForPodsReadyConfig{timeout, recoveryTimeout,
    requeuingBackoffLimitCount, requeuingBackoffBaseSeconds, requeuingBackoffMaxDuration}) as
    Kueue's configuration (jitter is 0 in every case)."""
    strategy = {name: value for name, value in (("backoffLimitCount", limit), ("backoffBaseSeconds", base),
                                                 ("backoffMaxSeconds", maximum)) if value is not None}
    section: dict[str, Any] = {"timeout": timeout}
    if recovery is not None:
        section["recoveryTimeout"] = recovery
    if strategy:
        section["requeuingStrategy"] = strategy
    return parse_configuration(configuration(waitForPodsReady=section))


# ---------------------------------------------------------------- one reconcile: one pass


@dataclass
class Reconciled:
    engine: Engine
    outcome: PassOutcome

    @property
    def workload(self):
        return self.engine.state.workload(KEY)

    def status(self) -> dict[str, Any]:
        """The workload as the pass left it, in the fields Go's comparison looks at."""
        wl = self.workload
        conditions = {c.type: c for c in wl.conditions}
        result = self.outcome.decided.get(KEY)
        if result is not None and result.decided:  # what a cycle wrote
            conditions.update({c.type: c for c in result.conditions})
        requeue = None  # no requeueState
        if wl.requeue_count or wl.requeue_at is not None:
            requeue = requeue_count(wl.requeue_count or None)
        return {
            "conditions": {t: (c.status, c.reason, c.message) for t, c in sorted(conditions.items())},
            "admission": wl.admission.cluster_queue if wl.admission is not None else None,
            "admissionChecks": [(c.name, c.state, c.message, c.retry_count) for c in wl.admission_checks],
            "requeueState": requeue,
            "active": wl.active,
            "events": self.events(),
        }

    def events(self) -> list[tuple[str, str, str]]:
        return [(e.type, e.reason, e.message) for e in self.outcome.result.events]


def reconcile(*objects: dict, now: datetime = NOW, config: Configuration | None = None, cycles: int | None = 0,
              feature_gates: FeatureGates | None = None) -> Reconciled:
    engine = Engine.from_parsed(parse(copy.deepcopy(list(objects))), feature_gates or gates(), config=config)
    return Reconciled(engine, engine.run_pass(now, cycles=cycles))


def requeue_count(count: int | None) -> dict[str, int | None]:
    """A requeueState, its count (None: nil); its requeueAt is not compared, as in Go."""
    return {"count": count}


def want(conditions: dict[str, tuple[str, str, str]], *, admission: str | None = None,
         checks: list[tuple[str, str, str, int | None]] | None = None, requeue: dict | None = None,
         active: bool = True, events: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    """Go's wantWorkload (in the fields compared) and wantEvents."""
    return {"conditions": dict(sorted(conditions.items())), "admission": admission,
            "admissionChecks": checks or [], "requeueState": requeue, "active": active, "events": events or []}


RESERVED_Q1 = ("True", "AdmittedByTest", "Admitted by ClusterQueue q1")
ADMITTED_Q1 = ("True", "ByTest", "Admitted by ClusterQueue q1")
RESERVED_CQ = ("True", "AdmittedByTest", "Admitted by ClusterQueue cq")
ADMITTED_CQ = ("True", "ByTest", "Admitted by ClusterQueue cq")
LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
DEACTIVATED_BY_LIMIT = ("True", "DeactivatedDueToRequeuingLimitExceeded",
                        "The workload is deactivated due to exceeding the maximum number of re-queuing retries")


# ---------------------------------------------------------------- TestAdmittedNotReadyWorkload


def admitted_not_ready(*conditions: tuple[str, str, str, datetime]) -> dict:
    """A workload with an admission and the given (type, status, reason, lastTransitionTime)."""
    wl = make_workload()
    wl["status"]["admission"] = {"clusterQueue": "q1", "podSetAssignments": [
        {"name": "main", "flavors": {}, "count": 1}]}
    for type_, status, reason, at in conditions:
        condition(wl, type_, status, reason, at=at)
    return wl


def timed_out(wl: dict, config: Configuration | None, at: datetime) -> bool:
    evicted = reconcile(wl, now=at, config=config).workload.condition("Evicted")
    return evicted is not None and evicted.status == "True" and evicted.reason == "PodsReadyTimeout"


ADMITTED_MINUTE_AGO = ("Admitted", "True", "", NOW - MINUTE)


@pytest.mark.parametrize(("wl", "config", "recheck_after"), [
    pytest.param(make_workload(), None, None, id="workload without Admitted condition; not counting"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO), pods_ready("5m"), 4 * MINUTE,
                 id="workload with Admitted=True, no PodsReady; counting"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO), None, None,
                 id="workload with Admitted=True, no PodsReady, but no timeout configured; not counting"),
    pytest.param(admitted_not_ready(("Admitted", "True", "", NOW - 7 * MINUTE)), pods_ready("5m"), timedelta(0),
                 id="workload with Admitted=True, no PodsReady; timeout exceeded"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO, ("PodsReady", "False", "WaitForStart", NOW)),
                 pods_ready("5m"), 4 * MINUTE,
                 id="with reason WorkloadWaitForPodsReadyStart; workload with Admitted=True, PodsReady=False; "
                    "counting since admitted.LastTransitionTime"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO, ("PodsReady", "False", "PodsReady", NOW)),
                 pods_ready("5m"), 4 * MINUTE,
                 id="with reason PodsReady; workload with Admitted=True, PodsReady=False; counting since "
                    "admitted.LastTransitionTime"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO, ("PodsReady", "False", "WaitForRecovery", NOW)),
                 pods_ready(recovery="3m"), 3 * MINUTE,
                 id="workload with Admitted=True, PodsReady=False, Reason=WorkloadWaitForPodsReadyRecovery"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO, ("PodsReady", "False", "WaitForRecovery", NOW)),
                 pods_ready(), None,
                 id="workload with Admitted=True, PodsReady=False, Reason=WorkloadWaitForPodsReadyRecovery, "
                    "recoveryTimeout not configured"),
    pytest.param(admitted_not_ready(("Admitted", "Unknown", "", NOW - MINUTE)), pods_ready("5m"), None,
                 id="workload with Admitted=Unknown; not counting"),
    pytest.param(admitted_not_ready(("Admitted", "Unknown", "", NOW - MINUTE)), pods_ready("5m"), None,
                 id="workload with Admitted=False, not counting"),
    pytest.param(admitted_not_ready(ADMITTED_MINUTE_AGO, ("PodsReady", "True", "PodsReady", NOW)),
                 pods_ready("5m"), None, id="workload with Admitted=True, PodsReady=True; not counting"),
])
def test_admitted_not_ready_workload(wl, config, recheck_after):
    """TestAdmittedNotReadyWorkload: admittedNotReadyWorkload's recheckAfter is when a pass
    evicts the workload for its PodsReady timeout (0: now); a workload not counting is never
    evicted for it."""
    if recheck_after is None:
        assert not timed_out(wl, config, NOW)
        assert not timed_out(wl, config, NOW + timedelta(days=1))
        return
    if recheck_after:
        assert not timed_out(wl, config, NOW + recheck_after - SECOND)
    assert timed_out(wl, config, NOW + recheck_after)


# ---------------------------------------------------------------- TestSyncCheckStates


def reservation_with_checks(states: list[tuple[str, str, str]], required: tuple[str, ...]) -> list[dict]:
    """A reservation in cq (flavor1) listing `states` (name, state, message), cq asking for
    `required`, every check existing and active, the workload's LocalQueue there."""
    wl = reserve_quota_at(make_workload(queue="lq"), "cq", flavors={"cpu": "flavor1"})
    for name, state, message in states:
        admission_check(wl, name, state, message)
    names = sorted({"ac0", "ac1", "ac2"} | set(required))
    return [make_flavor("flavor1"), *(make_admission_check(n) for n in names),
            make_cluster_queue(flavors=("flavor1",), checks=required), make_local_queue(), wl]


@pytest.mark.parametrize(("states", "required", "want_states"), [
    pytest.param([], (), [], id="nil conditions, nil list"),
    pytest.param([], ("ac1", "ac2"), [("ac1", "Pending", ""), ("ac2", "Pending", "")], id="add to nil conditions"),
    pytest.param([("ac0", "Pending", ""), ("ac1", "Pending", "")], ("ac1", "ac2"),
                 [("ac1", "Pending", ""), ("ac2", "Pending", "")], id="add and remove"),
    pytest.param([("ac0", "Pending", ""), ("ac1", "Pending", "")], (), [], id="cleanup"),
    pytest.param([("ac0", "Ready", "Message one"), ("ac1", "Pending", "")], ("ac0", "ac1"),
                 [("ac0", "Ready", "Message one"), ("ac1", "Pending", "")], id="preserve conditions data"),
])
def test_sync_check_states(states, required, want_states):
    """TestSyncCheckStates: syncAdmissionCheckConditions keeps a reservation's checks those its
    ClusterQueue lists, the missing ones added Pending, the listed ones kept as they are."""
    got = reconcile(*reservation_with_checks(states, required)).workload
    assert [(c.name, c.state, c.message) for c in got.admission_checks] == want_states


# ---------------------------------------------------------------- TestReconcile: admission checks


def strategy_cluster() -> list[dict]:
    wl = reserve_quota_at(make_workload(queue="queue"), "cq", flavors={"cpu": "flavor1"})
    return [make_local_queue("queue", "ns", "cq"), wl]


def test_reconcile_assign_admission_checks_from_cluster_queue_spec_admission_check_strategy():
    """TestReconcile "assign Admission Checks from ClusterQueue.spec.AdmissionCheckStrategy"."""
    cq = make_cluster_queue(flavors=("flavor1", "flavor2"), strategy=(("ac1", ("flavor1",)), ("ac2", ())))
    got = reconcile(cq, *strategy_cluster())
    assert got.status() == want({"QuotaReserved": RESERVED_CQ}, admission="cq",
                                checks=[("ac1", "Pending", "", None), ("ac2", "Pending", "", None)])


def test_reconcile_assign_admission_checks_from_cluster_queue_spec_admission_checks():
    """TestReconcile "assign Admission Checks from ClusterQueue.spec.AdmissionChecks"."""
    cq = make_cluster_queue(flavors=("flavor1", "flavor2"), checks=("ac1", "ac2"))
    got = reconcile(cq, *strategy_cluster())
    assert got.status() == want({"QuotaReserved": RESERVED_CQ}, admission="cq",
                                checks=[("ac1", "Pending", "", None), ("ac2", "Pending", "", None)])


def test_reconcile_already_admitted():
    """TestReconcile "already admitted": nothing changes."""
    wl = admission_check(admitted_at(reserve_quota_at(make_workload(), "q1")), "check", "Ready")
    got = reconcile(wl)
    assert got.status() == want({"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1}, admission="q1",
                                checks=[("check", "Ready", "", None)])




def test_reconcile_workload_with_deactivation_target_condition_should_be_deactivated_and_admission_checks_reset():
    """TestReconcile "workload with deactivation target condition should be deactivated and
    admission checks reset" (wantWorkloadUseMergePatch: the DeactivationTarget condition goes)."""
    wl = admitted_at(reserve_quota_at(make_workload(active=False), "q1"))
    admission_check(wl, "check-1", "Rejected")
    admission_check(wl, "check-2", "Retry")
    condition(wl, "DeactivationTarget", "True", "AdmissionCheck", "Admission check(s): check-1, were rejected")
    got = reconcile(wl)
    message = "The workload is deactivated due to Admission check(s): check-1, were rejected"
    assert got.status() == want(
        {"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1,
         "Evicted": ("True", "DeactivatedDueToAdmissionCheck", message)},
        admission="q1", active=False,
        checks=[("check-1", "Pending", "Reset to Pending after eviction. Previously: Rejected", None),
                ("check-2", "Pending", "Reset to Pending after eviction. Previously: Retry", 1)],
        events=[("Normal", "EvictedDueToDeactivatedDueToAdmissionCheck", message)])


# ---------------------------------------------------------------- TestReconcile: the Requeued condition


def requeued_false(reason: str, message: str, *, queue: str | None = None) -> dict:
    return condition(make_workload(queue=queue, active=True), "Requeued", "False", reason, message)


@pytest.mark.parametrize(("wl", "objects", "want_requeued", "want_requeue"), [
    pytest.param(requeue_state(requeued_false("PodsReadyTimeout", "Exceeded the PodsReady timeout ns"),
                               1, NOW + 60 * SECOND), [],
                 ("False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns"), requeue_count(1),
                 id="should keep the WorkloadRequeued condition until the WaitForPodsReady backoff expires"),
    pytest.param(requeue_state(requeued_false("AdmissionCheck", "Exceeded the AdmissionCheck timeout ns"),
                               1, NOW + 60 * SECOND), [],
                 ("False", "AdmissionCheck", "Exceeded the AdmissionCheck timeout ns"), requeue_count(1),
                 id="should keep the WorkloadRequeued condition until the AdmissionCheck backoff expires"),
])
def test_reconcile_requeued_condition(wl, objects, want_requeued, want_requeue):
    """TestReconcile, the Requeued=False condition of a pending workload: set True once what
    kept it from its queue is over (reactivated, backoff finished, queue restarted), kept while
    its requeueState.requeueAt is ahead."""
    got = reconcile(*objects, wl)
    assert got.status() == want({"Requeued": want_requeued}, requeue=want_requeue)


def test_reconcile_shouldnt_set_the_workload_requeued_condition_when_backoff_expires_and_workload_finished():
    """TestReconcile "shouldn't set the WorkloadRequeued condition when backoff expires and
    workload finished"."""
    wl = requeued_false("PodsReadyTimeout", "Exceeded the PodsReady timeout ns")
    condition(wl, "Finished", "True", "JobFinished", "Job finished successfully")
    requeue_state(wl, 1, NOW)
    got = reconcile(wl)
    assert got.status() == want({"Requeued": ("False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns"),
                                 "Finished": ("True", "JobFinished", "Job finished successfully")},
                                requeue=requeue_count(1))


# ---------------------------------------------------------------- TestReconcile: deactivated workloads


DEACTIVATED = ("True", "Deactivated", "The workload is deactivated")
DEACTIVATED_EVENT = ("Normal", "EvictedDueToDeactivated", "The workload is deactivated")


def test_reconcile_should_set_the_evicted_condition_with_deactivated_reason_when_the_spec_active_false():
    """TestReconcile "should set the Evicted condition with Deactivated reason when the
    .spec.active=False" (no reservation: no event)."""
    got = reconcile(make_workload(active=False))
    assert got.status() == want({"Evicted": DEACTIVATED}, active=False)


def test_reconcile_should_set_the_evicted_condition_with_deactivated_reason_when_the_spec_active_false_and_admitted():
    """TestReconcile "should set the Evicted condition with Deactivated reason when the
    .spec.active=False and Admitted"."""
    got = reconcile(admitted_at(reserve_quota_at(make_workload(active=False), "q1")))
    assert got.status() == want({"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1, "Evicted": DEACTIVATED},
                                admission="q1", active=False, events=[DEACTIVATED_EVENT])


def test_reconcile_should_set_the_evicted_condition_with_deactivated_reason_when_admitted_and_evicted_false():
    """TestReconcile "should set the Evicted condition with Deactivated reason when the
    .spec.active is False, Admitted, and the Workload has Evicted=False condition"."""
    wl = admitted_at(reserve_quota_at(make_workload(active=False), "q1"))
    condition(wl, "Evicted", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns")
    got = reconcile(wl)
    assert got.status() == want({"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1, "Evicted": DEACTIVATED},
                                admission="q1", active=False, events=[DEACTIVATED_EVENT])


@pytest.mark.parametrize(("pods_ready_reason", "limit", "count"), [
    pytest.param("PodsReady", 0, None,
                 id="with reason PodsReady; should set the Evicted condition with Deactivated reason, exceeded the "
                    "maximum number of requeue retrieswhen the .spec.active is False, Admitted, the Workload has "
                    "Evicted=False and DeactivationTarget=True condition"),
    pytest.param("WaitForStart", 0, None,
                 id="with reason WaitForPodsStart; should set the Evicted condition with Deactivated reason, exceeded "
                    "the maximum number of requeue retrieswhen the .spec.active is False, Admitted, the Workload has "
                    "Evicted=False and DeactivationTarget=True condition"),
    pytest.param("PodsReady", 100, 100,
                 id="with reason PodsReady; [backoffLimitCount: 100] should set the Evicted condition with "
                    "Deactivated reason, exceeded the maximum number of requeue retrieswhen the .spec.active is "
                    "False, Admitted, the Workload has Evicted=False and DeactivationTarget=True condition, and the "
                    "requeueState.count equals to backoffLimitCount"),
    pytest.param("WaitForStart", 100, 100,
                 id="with reason WaitForPodsStart; [backoffLimitCount: 100] should set the Evicted condition with "
                    "Deactivated reason, exceeded the maximum number of requeue retrieswhen the .spec.active is "
                    "False, Admitted, the Workload has Evicted=False and DeactivationTarget=True condition, and the "
                    "requeueState.count equals to backoffLimitCount"),
])
def test_reconcile_deactivated_after_exceeding_the_requeuing_limit(pods_ready_reason, limit, count):
    """TestReconcile, the four "... should set the Evicted condition with Deactivated reason,
    exceeded the maximum number of requeue retries ..." cases: a deactivated DeactivationTarget
    (RequeuingLimitExceeded) is evicted (wantWorkloadUseMergePatch: the DeactivationTarget
    condition and the requeueState are gone)."""
    config = pods_ready("3s", limit=limit, base=10)
    wl = admitted_at(reserve_quota_at(make_workload(active=False), "q1"))
    condition(wl, "PodsReady", "False", pods_ready_reason, "Not all pods are ready or succeeded")
    condition(wl, "DeactivationTarget", "True", "RequeuingLimitExceeded", LIMIT_MESSAGE)
    if count is not None:
        requeue_state(wl, count, None)
    got = reconcile(wl, config=config)
    assert got.status() == want(
        {"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1, "Evicted": DEACTIVATED_BY_LIMIT,
         "PodsReady": ("False", pods_ready_reason, "Not all pods are ready or succeeded")},
        admission="q1", active=False,
        events=[("Normal", "EvictedDueToDeactivatedDueToRequeuingLimitExceeded", DEACTIVATED_BY_LIMIT[2])])


def test_reconcile_should_keep_the_previous_eviction_reason_when_already_evicted_by_other_reason():
    """TestReconcile "should keep the previous eviction reason when the Workload is already
    evicted by other reason even though the Workload is deactivated."."""
    wl = admitted_at(reserve_quota_at(make_workload(active=False), "q1"))
    condition(wl, "Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns")
    got = reconcile(wl)
    assert got.status() == want({"QuotaReserved": RESERVED_Q1, "Admitted": ADMITTED_Q1,
                                 "Evicted": ("True", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns")},
                                admission="q1", active=False)


# ---------------------------------------------------------------- TestReconcile: stopped and missing queues


@pytest.mark.parametrize(("cq_policy", "lq_policy", "reason", "message"), [
    pytest.param("HoldAndDrain", None, "ClusterQueueStopped", "The ClusterQueue is stopped",
                 id="should set the Evicted condition with ClusterQueueStopped reason when the StopPolicy is "
                    "HoldAndDrain"),
    pytest.param(None, "HoldAndDrain", "LocalQueueStopped", "The LocalQueue is stopped",
                 id="should set the Evicted condition with LocalQueueStopped reason when the StopPolicy is "
                    "HoldAndDrain"),
])
def test_reconcile_hold_and_drain_evicts_the_admitted_workload(cq_policy, lq_policy, reason, message):
    """TestReconcile, an admitted workload of a ClusterQueue or LocalQueue with stopPolicy
    HoldAndDrain is evicted."""
    wl = admitted_at(reserve_quota_at(make_workload(queue="lq", active=True), "cq"))
    got = reconcile(make_cluster_queue(stop_policy=cq_policy), make_local_queue(stop_policy=lq_policy), wl)
    assert got.status() == want({"QuotaReserved": RESERVED_CQ, "Admitted": ADMITTED_CQ,
                                 "Evicted": ("True", reason, message)}, admission="cq",
                                events=[("Normal", f"EvictedDueTo{reason}", message)])


def pending_check_reservation() -> dict:
    return admission_check(reserve_quota_at(make_workload(queue="lq", active=True), "cq"), "check", "Pending")


@pytest.mark.parametrize(("objects", "message"), [
    pytest.param([make_cluster_queue(checks=("check",))], "LocalQueue lq is terminating or missing",
                 id="should set the Inadmissible reason on QuotaReservation condition when the LocalQueue was deleted"),
    pytest.param([make_cluster_queue(checks=("check",)), make_local_queue(stop_policy="Hold")],
                 "LocalQueue lq is stopped",
                 id="should set the Inadmissible reason on QuotaReservation condition when the LocalQueue was Hold"),
    pytest.param([make_local_queue()], "ClusterQueue cq is terminating or missing",
                 id="should set the Inadmissible reason on QuotaReservation condition when the ClusterQueue was "
                    "deleted"),
    pytest.param([make_cluster_queue(checks=("check",), stop_policy="Hold"), make_local_queue()],
                 "ClusterQueue cq is stopped",
                 id="should set the Inadmissible reason on QuotaReservation condition when the ClusterQueue was Hold"),
])
def test_reconcile_reservation_taken_back_from_a_missing_or_stopped_queue(objects, message):
    """TestReconcile, a reservation waiting for its admission check whose LocalQueue or
    ClusterQueue is missing or stopped loses it: QuotaReserved=False, Inadmissible
    (wantWorkloadUseMergePatch: the admission is gone), its check kept."""
    got = reconcile(*objects, pending_check_reservation())
    assert got.status() == want({"QuotaReserved": ("False", "Inadmissible", message)},
                                checks=[("check", "Pending", "", None)])


@pytest.mark.parametrize(("objects", "message"), [
    pytest.param([], "LocalQueue lq doesn't exist",
                 id="should set status QuotaReserved conditions to False with reason Inadmissible if quota not "
                    "reserved LocalQueue is not created"),
    pytest.param([make_local_queue(stop_policy="Hold")], "LocalQueue lq is inactive",
                 id="should set status QuotaReserved conditions to False with reason Inadmissible if quota not "
                    "reserved LocalQueue StopPolicy=Hold"),
    pytest.param([make_local_queue(stop_policy="HoldAndDrain")], "LocalQueue lq is inactive",
                 id="should set status QuotaReserved conditions to False with reason Inadmissible if quota not "
                    "reserved LocalQueue StopPolicy=HoldAndDrain"),
    pytest.param([make_local_queue(stop_policy="None")], "ClusterQueue cq doesn't exist",
                 id="should set status QuotaReserved conditions to False with reason Inadmissible if quota not "
                    "reserved ClusterQueue is not created"),
    pytest.param([make_local_queue(stop_policy="None"), make_cluster_queue(stop_policy="Hold")],
                 "ClusterQueue cq is inactive",
                 id="should set status QuotaReserved conditions to False with reason Inadmissible if quota not "
                    "reserved ClusterQueue StopPolicy=Hold"),
])
def test_reconcile_pending_workload_of_a_missing_or_stopped_queue_is_inadmissible(objects, message):
    """TestReconcile, a pending workload whose LocalQueue or ClusterQueue is missing or stopped:
    QuotaReserved=False, Inadmissible (a cycle writes it in the engine; the version of these
    cases predates UnadmittedWorkloadsObservability, so it is off). Go's stopped LocalQueues name
    no ClusterQueue, which the engine refuses: they name `cq`, which does not exist (the
    LocalQueue is looked at first)."""
    got = reconcile(*objects, make_workload(queue="lq", active=True), cycles=None,
                    feature_gates=gates(UnadmittedWorkloadsObservability=False))
    assert got.status() == want({"QuotaReserved": ("False", "Inadmissible", message)})


# ---------------------------------------------------------------- TestReconcile: KEP-3258 retry delays


def retry_checks(*checks: tuple[str, int, datetime]) -> dict:
    wl = make_workload()
    for name, seconds, at in checks:
        admission_check(wl, name, "Retry", requeue_after=seconds, at=at)
    return wl


def retry_states(*checks: tuple[str, int]) -> list[tuple[str, str, str, int | None]]:
    return [(name, "Retry", "", None) for name, _ in checks]


def test_reconcile_should_update_requeue_state_requeue_at_when_admission_check_sets_a_delay():
    """TestReconcile "should update requeueState.requeueAt when admission check sets a delay":
    requeueAt now+5s -> now+10s."""
    wl = requeue_state(retry_checks(("check", 10, NOW)), None, NOW + 5 * SECOND)
    got = reconcile(wl)
    assert got.status() == want({}, requeue=requeue_count(None), checks=retry_states(("check", 10)))
    assert got.workload.requeue_at == NOW + 10 * SECOND


def test_reconcile_should_not_update_requeue_state_requeue_at_when_admission_check_delay_is_smaller():
    """TestReconcile "should not update requeueState.requeueAt when admission check delay is smaller"."""
    wl = requeue_state(retry_checks(("check", 5, NOW)), None, NOW + 10 * SECOND)
    got = reconcile(wl)
    assert got.status() == want({}, requeue=requeue_count(None), checks=retry_states(("check", 5)))
    assert got.workload.requeue_at == NOW + 10 * SECOND


def test_reconcile_should_always_use_the_biggest_admission_check_delay():
    """TestReconcile "should always use the biggest admission check delay": a requeueState is
    written (Go's comparison ignores its requeueAt)."""
    got = reconcile(retry_checks(("check1", 5, NOW), ("check2", 7, NOW)))
    assert got.status() == want({}, requeue=requeue_count(None), checks=retry_states(("check1", 5), ("check2", 7)))
    assert got.workload.requeue_at is not None


def test_reconcile_should_use_the_biggest_total_time_not_the_biggest_requeue_after_seconds():
    """TestReconcile "should use the biggest total time not the biggest RequeueAfterSeconds":
    now+10s+5s beats now+10s."""
    got = reconcile(retry_checks(("check1", 5, NOW + 10 * SECOND), ("check2", 10, NOW)))
    assert got.status() == want({}, requeue=requeue_count(None), checks=retry_states(("check1", 5), ("check2", 10)))
    assert got.workload.requeue_at == NOW + 15 * SECOND
