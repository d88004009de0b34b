"""What a pass records: a workload that a source (the simulator, the Kubernetes mirror)
writes while the pass computes is not overwritten with the pass's older view (the change
asked for the next pass, which decides on what the workload now is); preemptions enter the
history; a waiting workload the cycle did not get to keeps its reason."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from scheduler.cycle import unchanged_result
from scheduler.stops import StopRecord
from tasweb.cluster.models import ClusterQueue, Workload, WorkloadStatus
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import services
from tasweb.scheduling.models import SchedulingPass, WorkloadEvent

from .support import EXAMPLE_ADMISSIBLE, admitted_count, import_example_cluster, small_workload

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def touch(row: Workload, **labels: str) -> dict:
    """A newer version of the row's object, as a source would write it."""
    obj = copy.deepcopy(row.raw)
    obj["metadata"].setdefault("labels", {}).update(labels)
    obj["metadata"]["resourceVersion"] = str(row.rv_number + 1000)
    object_upsert(kind="Workload", obj=obj)
    return obj


def test_a_workload_written_during_the_pass_is_left_to_the_next_pass(monkeypatch):
    import_example_cluster()
    object_upsert(kind="Workload", obj=small_workload("raced"))
    real = services.engine_pass_run

    def simulate_then_a_source_writes(*args, **kwargs):
        result = real(*args, **kwargs)
        touch(Workload.objects.get(namespace="ml", name="raced"), touched="yes")
        return result

    monkeypatch.setattr(services, "engine_pass_run", simulate_then_a_source_writes)
    first = services.scheduling_pass_run()

    raced = Workload.objects.get(namespace="ml", name="raced")
    assert raced.raw["metadata"]["labels"]["touched"] == "yes"  # the source's version stays
    assert raced.status == WorkloadStatus.PENDING and "admission" not in (raced.raw.get("status") or {})
    assert not WorkloadEvent.objects.filter(workload_key="ml/raced", scheduling_pass=first).exists()
    # everything else of the pass is stored, and the pass counts what it stored
    assert admitted_count() == EXAMPLE_ADMISSIBLE
    first.refresh_from_db()
    assert first.admitted == EXAMPLE_ADMISSIBLE

    monkeypatch.setattr(services, "engine_pass_run", real)
    second = services.scheduling_pass_run()
    raced.refresh_from_db()
    assert raced.status == WorkloadStatus.ADMITTED
    assert raced.raw["metadata"]["labels"]["touched"] == "yes"
    assert WorkloadEvent.objects.filter(workload_key="ml/raced", scheduling_pass=second, kind="Admitted").count() == 1
    assert SchedulingPass.objects.count() == 2
    assert second.admitted == 1


def test_a_preemption_is_kept_in_the_history():
    from tests.engine.factories import HOSTNAME, workload
    from tests.engine.test_preemption import on, single_queue

    low = on(workload("low", queue="lq", count=4, required=HOSTNAME, priority=1), [("x1", 4)])
    other = on(workload("other", queue="lq", count=4, required=HOSTNAME, priority=5), [("x2", 4)])
    high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
    for obj in [*single_queue(), low, other, high]:
        object_upsert(kind=obj["kind"], obj=obj)

    record = services.scheduling_pass_run()

    [event] = WorkloadEvent.objects.filter(workload_key="default/low", kind="Preempted")
    assert event.scheduling_pass == record
    assert event.trigger == "preempted by default/high"
    assert event.message.startswith("Preempted to accommodate a workload (UID: uid-high")
    assert Workload.objects.get(name="low").status == WorkloadStatus.PREEMPTED
    assert Workload.objects.get(name="high").status == WorkloadStatus.PENDING


def test_a_waiting_workload_the_cycle_did_not_get_to_keeps_its_reason(monkeypatch):
    import_example_cluster()
    services.scheduling_pass_run()
    waiting = Workload.objects.filter(status__in=[WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE]).first()
    assert waiting is not None and waiting.message  # the example's workload that never fits
    status, message = waiting.status, waiting.message
    events = WorkloadEvent.objects.filter(workload_key=waiting.key).count()

    real = services.engine_pass_run

    def not_evaluated(engine, now, **kwargs):
        # as when the workload is not a head this time: the pass restates what it is
        result = real(engine, now, **kwargs)
        result.workloads = [wr for wr in result.workloads if wr.key != waiting.key]
        restated = unchanged_result(engine.state, engine.state.workload(waiting.key))
        restated.status, restated.message = "Pending", ""
        result.workloads.append(restated)
        return result

    monkeypatch.setattr(services, "engine_pass_run", not_evaluated)
    services.scheduling_pass_run()
    waiting.refresh_from_db()
    assert (waiting.status, waiting.message) == (status, message)
    assert WorkloadEvent.objects.filter(workload_key=waiting.key).count() == events


def test_a_waiting_workloads_reason_is_recorded_when_it_changes_not_when_its_counts_do(monkeypatch):
    import_example_cluster()
    services.scheduling_pass_run()
    waiting = Workload.objects.filter(status__in=[WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE]).first()
    real = services.engine_pass_run

    def with_reason(message: str):
        def run(engine, now, **kwargs):
            # as when the workload is evaluated again and the engine gives this reason
            result = real(engine, now, **kwargs)
            result.workloads = [wr for wr in result.workloads if wr.key != waiting.key]
            evaluated = unchanged_result(engine.state, engine.state.workload(waiting.key))
            evaluated.status, evaluated.message, evaluated.decided = waiting.status, message, True
            result.workloads.append(evaluated)
            return result
        return run

    def pending_events() -> list[str]:
        return list(WorkloadEvent.objects.filter(workload_key=waiting.key, kind="Pending")
                    .order_by("id").values_list("message", flat=True))

    before = len(pending_events())
    for message in ("insufficient unused quota for cpu, 4 more needed",
                    "insufficient unused quota for cpu, 6 more needed",  # the same reason
                    "topology allows to fit only 2 out of 4 pod(s)"):  # another reason
        monkeypatch.setattr(services, "engine_pass_run", with_reason(message))
        services.scheduling_pass_run()
    events = pending_events()[before:]
    assert events == ["insufficient unused quota for cpu, 4 more needed",
                      "topology allows to fit only 2 out of 4 pod(s)"]
    waiting.refresh_from_db()
    assert waiting.message == "topology allows to fit only 2 out of 4 pod(s)"  # the row is current


def test_stop_records_of_deleted_workloads_go(db):
    from tasweb.scheduling.models import WorkloadStop
    from tasweb.scheduling.services import stops_prune, workload_deleted

    import_example_cluster()
    services.scheduling_pass_run()
    stops = dict(WorkloadStop.objects.values_list("workload_key", "step"))
    assert stops, "the example cluster has a workload that never fits: the pass records why"
    key = next(iter(stops))
    namespace, name = key.split("/")
    row = Workload.objects.get(namespace=namespace, name=name)
    workload_deleted(workload=row, reason="withdrawn")
    assert not WorkloadStop.objects.filter(workload_key=key).exists()
    # a deletion that bypassed the service: the periodic prune finds the orphan
    WorkloadStop.objects.create(workload_key="gone/never", step="quota", record={}, at=row.updated_at)
    assert stops_prune() == 1
    assert set(WorkloadStop.objects.values_list("workload_key", flat=True)) == set(stops) - {key}


def test_a_limited_pass_whose_cycles_run_out_of_time_commits_them_and_asks_for_the_next(monkeypatch, settings):
    """A time-limited pass runs scheduling cycles for a share of the limit only (one pass
    after a large release admits thousands, a cycle each): it writes what they decided and
    marks the mirror changed, so that the leader queues the next pass, which goes on."""
    from types import SimpleNamespace

    settings.TAS_SCHEDULER_PASS_TIME_LIMIT = 30
    assert services.pass_cycle_seconds(SimpleNamespace(last_pass=None)) == 0  # a state's first pass: no limit
    assert services.pass_cycle_seconds(SimpleNamespace(last_pass=object())) == 30 * services.CYCLES_SHARE_OF_LIMIT

    import_example_cluster()
    services.scheduling_pass_run()
    for i in range(5):
        object_upsert(kind="Workload", obj=small_workload(f"burst-{i}"))
    services.cache.set(services.scheduler_key("changed"), "read", timeout=None)
    services.cache.set(services.scheduler_key("done"), "read", timeout=None)
    assert not services.changes_pending()
    monkeypatch.setattr(services, "CYCLES_SHARE_OF_LIMIT", 1e-9)  # out of time after the first cycle
    cut = services.scheduling_pass_run()
    assert cut.admitted == 1 and admitted_count() == EXAMPLE_ADMISSIBLE + 1
    assert services.changes_pending()  # the leader queues the next pass
    waiting = Workload.objects.filter(name__startswith="burst-").exclude(status=WorkloadStatus.ADMITTED)
    assert waiting.count() == 4 and all(w.message == "" for w in waiting)  # not reached: nothing said of them

    monkeypatch.setattr(services, "CYCLES_SHARE_OF_LIMIT", 1 / 3)
    rest = services.scheduling_pass_run()
    assert rest.admitted == 4 and admitted_count() == EXAMPLE_ADMISSIBLE + 5


def test_a_reservation_is_admitted_once_its_admission_check_is_ready():
    """The example ClusterQueue asks for a check: a workload first only reserves quota; when the
    check's controller marks it Ready (a source writes the Workload), the next pass admits it, as
    Kueue's workload controller does, and its history says so."""
    row = reservation_with_checks("prov")
    set_checks(row, [{"name": "prov", "state": "Ready", "message": "checked",
                      "lastTransitionTime": "2025-06-01T12:00:05Z"}])
    second = services.scheduling_pass_run()
    row.refresh_from_db()
    assert row.status == WorkloadStatus.ADMITTED
    admitted = next(c for c in row.raw["status"]["conditions"] if c["type"] == "Admitted")
    # Kueue's SyncAdmittedCondition message; the history names the ClusterQueue
    assert admitted["status"] == "True" and admitted["message"] == "The workload is admitted"
    assert row.raw["status"]["admissionChecks"][0]["state"] == "Ready"  # the controller's word is kept
    (event,) = WorkloadEvent.objects.filter(workload_key="ml/checked", scheduling_pass=second, kind="Admitted")
    assert event.message == f"Admitted by ClusterQueue {row.cluster_queue}"
    assert event.details["afterReservation"] is True
    second.refresh_from_db()
    assert second.admitted == 0  # the pass that reserved the quota counted it


def test_the_checks_a_pass_changes_are_written_and_their_other_fields_kept():
    """An eviction by a check in Retry resets the checks to Pending in the stored status (else the
    reservation made after it would be evicted again at once); the fields the engine does not
    read stay; a reservation missing a check its ClusterQueue asks for gets it, Pending."""
    row = reservation_with_checks("prov", "second")
    assert [(c["name"], c["state"]) for c in row.raw["status"]["admissionChecks"]] == [
        ("prov", "Pending"), ("second", "Pending")]

    set_checks(row, [
        {"name": "prov", "state": "Retry", "message": "capacity not available", "retryCount": 2,
         "requeueAfterSeconds": 60, "lastTransitionTime": "2025-06-01T12:00:05Z"},
        {"name": "second", "state": "Ready", "message": "ok", "lastTransitionTime": "2025-06-01T12:00:05Z",
         "retryCount": 1, "podSetUpdates": [{"name": "main", "labels": {"provisioned": "yes"}}]}])
    services.scheduling_pass_run()
    row.refresh_from_db()
    assert row.status == WorkloadStatus.EVICTED
    prov, second = row.raw["status"]["admissionChecks"]
    assert (prov["state"], prov["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Retry")
    assert (prov["retryCount"], prov["requeueAfterSeconds"]) == (3, 60)  # one more retry; kept
    assert prov["lastTransitionTime"] != "2025-06-01T12:00:05Z"
    assert (second["state"], second["message"]) == ("Pending", "Reset to Pending after eviction. Previously: Ready")
    # written anew, as Kueue's resetChecksOnEviction writes it: no retry count, no podSetUpdates
    assert "retryCount" not in second and "podSetUpdates" not in second
    assert "requeueAt" not in (row.raw["status"].get("requeueState") or {})  # the delay asked for is past


def test_a_check_asking_for_a_delay_writes_the_workloads_requeue_time():
    """KEP-3258: a check in Retry with requeueAfterSeconds keeps the evicted workload out of its
    queue until its lastTransitionTime plus that delay: the pass writes it as requeueState."""
    from django.utils import timezone

    row = reservation_with_checks("prov")
    now = timezone.now().replace(microsecond=0)
    set_checks(row, [{"name": "prov", "state": "Retry", "message": "no capacity", "requeueAfterSeconds": 600,
                      "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    services.scheduling_pass_run(now=now)
    row.refresh_from_db()
    assert row.status == WorkloadStatus.EVICTED
    assert row.raw["status"]["requeueState"]["requeueAt"] == (now + timedelta(seconds=600)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def reservation_with_checks(*names: str) -> Workload:
    """The example cluster with its ClusterQueue asking for the admission checks `names`, and a
    workload holding a reservation there, its checks listed Pending."""
    import_example_cluster()
    cq = copy.deepcopy(ClusterQueue.objects.get().raw)
    cq["spec"]["admissionChecks"] = list(names)
    cq["metadata"]["resourceVersion"] = "900"
    object_upsert(kind="ClusterQueue", obj=cq)
    for name in names:
        object_upsert(kind="AdmissionCheck", obj={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": "example.com/check"},
            "status": {"conditions": [{"type": "Active", "status": "True"}]}})
    object_upsert(kind="Workload", obj=small_workload("checked"))
    services.scheduling_pass_run()  # reserves the quota
    services.scheduling_pass_run()  # the workload controller's step: the checks listed
    row = Workload.objects.get(namespace="ml", name="checked")
    assert row.status == WorkloadStatus.QUOTA_RESERVED
    return row


def set_checks(row: Workload, checks: list[dict]) -> None:
    """The checks' controllers write their states, as a source stores the Workload."""
    obj = copy.deepcopy(row.raw)
    obj["status"]["admissionChecks"] = checks
    obj["metadata"]["resourceVersion"] = str(row.rv_number + 1000)
    object_upsert(kind="Workload", obj=obj)


def test_a_stop_record_whose_condition_message_changes_is_written_again(monkeypatch):
    """A workload that never fits keeps its stop's message (no room made would do) while
    Kueue's condition message moves from the placement to the quota it is short of: the stored
    record follows the condition, never showing a reason the workload no longer has; a record
    that says the same as the stored one keeps its pass (when it was first stopped so)."""
    import dataclasses

    from tasweb.scheduling.models import WorkloadStop

    import_example_cluster()
    first = services.scheduling_pass_run()
    never = WorkloadStop.objects.filter(step="topology", record__details__withNoWorkloads=True).first()
    assert never is not None, "the example cluster has a workload that never fits"
    key = never.workload_key
    assert never.scheduling_pass_id == first.pk
    real = services.engine_pass_run

    def with_reason(reason: str):
        def run(engine, now, **kwargs):
            result = real(engine, now, **kwargs)
            result.workloads = [wr for wr in result.workloads if wr.key != key]
            evaluated = unchanged_result(engine.state, engine.state.workload(key))
            stop = dataclasses.replace(StopRecord.from_json(never.record), reason=reason)
            evaluated.status, evaluated.message, evaluated.decided, evaluated.stop = "Inadmissible", reason, True, stop
            result.workloads.append(evaluated)
            return result
        return run

    short = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu, 8 more needed"
    monkeypatch.setattr(services, "engine_pass_run", with_reason(short))
    second = services.scheduling_pass_run()
    stored = WorkloadStop.objects.get(workload_key=key)
    assert stored.record["reason"] == short and stored.record["message"] == never.record["message"]
    assert stored.scheduling_pass_id == second.pk
    services.scheduling_pass_run()  # the same again: the stored record stays, with its pass
    assert WorkloadStop.objects.get(workload_key=key).scheduling_pass_id == second.pk
