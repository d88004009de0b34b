"""The simulator and the scheduling pass together, tick after tick, as the worker runs them."""

from __future__ import annotations

import random

import pytest

from scheduler.assignment import HOSTNAME_LABEL
from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.scheduling.models import AssignmentDomain, EventKind, SchedulingPass, WorkloadEvent
from tasweb.simulator import objects as k8s
from tasweb.simulator.objects import JobShape, PodSetShape
from tasweb.simulator.services import simulator_seed, simulator_submit

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]

WAITING = (WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE)


def whole_nodes(count: int, level: str = k8s.RACK_LABEL, base: str = "bert-finetune") -> JobShape:
    return JobShape(base, "Job", (PodSetShape("main", count, 8, "required", level),))


def assignment_nodes(wl: cluster.Workload) -> set[str]:
    return set(AssignmentDomain.objects.filter(workload=wl).values_list("node", flat=True))


def running_nodes(wl: cluster.Workload) -> set[str]:
    return set(cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name, phase="Running")
               .values_list("node_name", flat=True))


def events(wl: cluster.Workload, kind: str):
    return WorkloadEvent.objects.filter(workload_key=wl.key, kind=kind)


def check_running_pods_sit_in_their_assignment() -> None:
    for wl in cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED):
        assert running_nodes(wl) <= assignment_nodes(wl), wl.key


def check_pass_counts_match_the_history() -> None:
    """Each pass counts what it wrote: its admissions, evictions, replacements and ungated
    pods are those its history rows record."""
    for record in SchedulingPass.objects.filter(mode="control"):
        history = WorkloadEvent.objects.filter(scheduling_pass=record)
        ungated = sum(int(e.message.split()[0]) for e in history.filter(kind=EventKind.PODS_UNGATED))
        replaced = sum(1 for e in history.filter(kind=EventKind.NODE_REPLACED) if e.details.get("replacement"))
        assert (record.admitted, record.evicted, record.nodes_replaced, record.pods_ungated) == (
            history.filter(kind=EventKind.ADMITTED).count(), history.filter(kind=EventKind.EVICTED).count(),
            replaced, ungated), record.id


def test_a_busy_cluster_admits_places_runs_finishes_and_survives_failures(run_ticks):
    """Defaults, with more faults: within a few simulated minutes every part of the loop shows."""
    config = quiet(initial_workloads=12, arrivals_per_minute=10, node_failures_per_minute=6, drains_per_minute=2,
                   runtime_min_seconds=30, runtime_max_seconds=90)
    simulator_seed(config=config, now=START)

    def everything_seen() -> bool:
        check_running_pods_sit_in_their_assignment()
        kinds = set(WorkloadEvent.objects.values_list("kind", flat=True))
        return {EventKind.ADMITTED, EventKind.PODS_UNGATED, EventKind.FINISHED} <= kinds and bool(
            kinds & {EventKind.NODE_REPLACED, EventKind.EVICTED})

    reports = run_ticks(150, config=config, until=everything_seen)
    assert everything_seen(), f"after {len(reports)} ticks: {set(WorkloadEvent.objects.values_list('kind', flat=True))}"

    admitted = cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED)
    assert admitted.exists()
    wl = admitted.first()
    assert AssignmentDomain.objects.filter(workload=wl).exists()
    assert sum(r.pods_bound for r in reports) > 0
    assert cluster.Pod.objects.filter(tas=True, phase="Running").exists()
    finished = cluster.Workload.objects.filter(status=WorkloadStatus.FINISHED).first()
    assert finished is not None
    assert set(cluster.Pod.objects.filter(namespace=finished.namespace, workload_name=finished.name)
               .values_list("phase", flat=True)) <= {"Succeeded"}
    # something is waiting, with the engine's reason
    assert cluster.Workload.objects.filter(status__in=WAITING).exclude(message="").exists()
    check_pass_counts_match_the_history()


def test_passes_that_save_workloads_one_row_a_batch_ungate_pods_all_the_same(run_ticks, monkeypatch):
    """A pass's last batch of workload rows may still run while it updates the pods it ungates."""
    from tasweb.scheduling import services

    monkeypatch.setattr(services, "UPDATE_BATCH", 1)
    config = quiet(initial_workloads=20, arrivals_per_minute=30, runtime_min_seconds=30, runtime_max_seconds=90)
    simulator_seed(config=config, now=START)

    def both_in_one_pass() -> bool:  # a pass that wrote workload rows and ungated pods
        passes = SchedulingPass.objects.filter(pods_ungated__gt=0)
        return WorkloadEvent.objects.filter(kind=EventKind.ADMITTED, scheduling_pass__in=passes).exists()

    reports = run_ticks(100, config=config, until=both_in_one_pass)
    assert both_in_one_pass(), f"after {len(reports)} ticks"
    check_running_pods_sit_in_their_assignment()
    assert not cluster.Pod.objects.filter(tas=True, phase="Running", gated=True).exists()


def test_a_failed_node_is_replaced_and_the_pod_moves_to_the_new_node(run_ticks):
    config = quiet(nodes_per_rack=4, blocks=1, racks_per_block=1, runtime_min_seconds=600, runtime_max_seconds=600)
    simulator_seed(config=config, now=START)
    wl = simulator_submit(shape=whole_nodes(2), now=START, rng=random.Random(1), config=config)
    run_ticks(3, config=config)  # admitted, pods created and ungated, pods bound
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED
    before = assignment_nodes(wl)
    assert running_nodes(wl) == before and len(before) == 2

    (report,) = run_ticks(1, config=config.with_overrides(node_failures_per_minute=30))

    (failed,) = report.failures  # one node fails; it is one of the workload's
    assert failed in before
    # the pass marks it unhealthy; Kueue's second-pass queue replaces it a second later at
    # the earliest, so the next pass does
    assert events(wl, EventKind.NODE_UNHEALTHY).get().node == failed
    assert not events(wl, EventKind.NODE_REPLACED).exists()
    run_ticks(1, config=config)
    replaced = events(wl, EventKind.NODE_REPLACED).get()
    assert replaced.node == failed
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED and not wl.unhealthy_nodes
    after = assignment_nodes(wl)
    assert failed not in after and len(after) == 2 and before - {failed} <= after
    # the replacement pod was created gated, ungated to the new node by the same pass, and starts there
    run_ticks(1, config=config)
    assert running_nodes(wl) == after
    assert replaced.scheduling_pass.nodes_replaced == 1
    ungated = events(wl, EventKind.PODS_UNGATED).first()  # the newest
    assert ungated.scheduling_pass.pods_ungated == 1
    assert ungated.details["nodes"] == sorted(after - before)  # the node the pod went to, nothing else
    check_pass_counts_match_the_history()


def test_a_workload_without_a_replacement_is_evicted_requeued_and_admitted_again(run_ticks):
    config = quiet(nodes_per_rack=2, blocks=1, racks_per_block=1, runtime_min_seconds=600, runtime_max_seconds=600,
                   failure_min_seconds=20, failure_max_seconds=20)
    simulator_seed(config=config, now=START)
    wl = simulator_submit(shape=whole_nodes(2), now=START, rng=random.Random(2), config=config)
    run_ticks(3, config=config)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED and len(running_nodes(wl)) == 2

    # no spare node in the rack: Kueue's fail-fast replacement evicts it (the pass after the
    # one that found the node failed)
    run_ticks(1, config=config.with_overrides(node_failures_per_minute=30))
    run_ticks(1, config=config)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.EVICTED
    assert events(wl, EventKind.EVICTED).get().scheduling_pass.evicted == 1

    # the job stops and Kueue requeues it: no admission, no pods, waiting again
    (report,) = run_ticks(1, config=config, scheduler=False)
    assert report.requeued == 1
    wl.refresh_from_db()
    assert wl.status in WAITING
    assert "admission" not in wl.raw["status"]
    assert not AssignmentDomain.objects.filter(workload=wl).exists()
    assert not cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name).exists()
    requeued = events(wl, EventKind.REQUEUED).get()
    assert "no replacement" in requeued.message
    # Kueue requeues at once after node failures: Requeued=True with the eviction's reason
    condition = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "Requeued")
    assert (condition["status"], condition["reason"]) == ("True", "NodeFailures")

    # once the node is back, it is admitted again and runs
    run_ticks(14, config=config, until=lambda: len(running_nodes(wl)) == 2)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED
    assert events(wl, EventKind.ADMITTED).count() == 2
    assert len(running_nodes(wl)) == 2


def test_a_finished_workload_frees_its_capacity_for_the_next(run_ticks, clock):
    config = quiet(nodes_per_rack=2, blocks=1, racks_per_block=1, runtime_min_seconds=10, runtime_max_seconds=10,
                   finished_retention_seconds=30)
    simulator_seed(config=config, now=START)
    first = simulator_submit(shape=whole_nodes(2), now=START, rng=random.Random(3), config=config)
    second = simulator_submit(shape=whole_nodes(2, base="vision-train"), now=START, rng=random.Random(4),
                              config=config)
    run_ticks(3, config=config)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == WorkloadStatus.ADMITTED
    assert second.status in WAITING  # the rack is full

    run_ticks(10, config=config, until=lambda: cluster.Workload.objects.get(pk=second.pk).status ==
              WorkloadStatus.ADMITTED)

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == WorkloadStatus.FINISHED
    assert first.finished_at is not None
    assert events(first, EventKind.FINISHED).exists()
    assert set(cluster.Pod.objects.filter(namespace=first.namespace, workload_name=first.name)
               .values_list("phase", flat=True)) == {"Succeeded"}
    assert second.status == WorkloadStatus.ADMITTED
    assert assignment_nodes(second) == {"b1-r1-n1", "b1-r1-n2"}

    # finished workloads and their pods are deleted after the retention; the history stays
    run_ticks(20, config=config, until=lambda: not cluster.Workload.objects.filter(pk=first.pk).exists())
    assert not cluster.Workload.objects.filter(pk=first.pk).exists()
    assert not cluster.Pod.objects.filter(namespace=first.namespace, workload_name=first.name).exists()
    assert events(first, EventKind.FINISHED).exists()


def test_pods_of_an_admitted_workload_land_on_every_node_of_its_assignment(run_ticks):
    config = quiet(initial_workloads=10)
    simulator_seed(config=config, now=START)
    run_ticks(4, config=config)

    admitted = list(cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED))
    assert admitted
    for wl in admitted:
        pods = cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name)
        assert pods.count() == wl.pod_count
        assert all(p.phase == "Running" for p in pods)
        counts = {}
        for domain in AssignmentDomain.objects.filter(workload=wl):
            counts[(domain.assignment.pod_set, domain.node)] = counts.get((domain.assignment.pod_set, domain.node),
                                                                          0) + domain.count
        placed = {}
        for pod in pods:
            key = (pod.pod_set, pod.raw["spec"]["nodeSelector"][HOSTNAME_LABEL])
            placed[key] = placed.get(key, 0) + 1
            assert pod.node_name == key[1]
        assert placed == counts, wl.key


@pytest.fixture
def wait_for_pods_ready(tmp_path, settings):
    path = tmp_path / "kueue-config.yaml"
    path.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    "waitForPodsReady:\n  timeout: 5m\n  blockAdmission: true\n")
    settings.TAS_KUEUE_CONFIG = str(path)
    yield
    from tasweb.scheduling import services

    services._configurations.clear()


def test_with_wait_for_pods_ready_one_workload_starts_at_a_time(run_ticks, wait_for_pods_ready):
    """The job controller marks PodsReady once every pod runs; until then, blocked admission
    keeps the next workload waiting with Kueue's reason, and then admits it."""
    config = quiet(nodes_per_rack=4, blocks=1, racks_per_block=2, runtime_min_seconds=600, runtime_max_seconds=600)
    simulator_seed(config=config, now=START)
    first = simulator_submit(shape=whole_nodes(2, base="first"), now=START, rng=random.Random(1), config=config)
    second = simulator_submit(shape=whole_nodes(2, base="second"), now=START, rng=random.Random(2), config=config)
    run_ticks(1, config=config)
    first.refresh_from_db()
    second.refresh_from_db()
    held, waiting = (first, second) if first.status == WorkloadStatus.ADMITTED else (second, first)
    assert held.status == WorkloadStatus.ADMITTED
    assert waiting.status in WAITING
    assert waiting.message == "waiting for all admitted workloads to be in PodsReady condition"

    def ready(wl: cluster.Workload) -> bool:
        wl.refresh_from_db()
        condition = next((c for c in wl.raw["status"].get("conditions", []) if c["type"] == "PodsReady"), {})
        return condition.get("status") == "True"

    run_ticks(6, config=config, until=lambda: ready(held))
    assert ready(held)
    assert len(running_nodes(held)) == 2
    run_ticks(2, config=config, until=lambda: cluster.Workload.objects.get(pk=waiting.pk).status ==
              WorkloadStatus.ADMITTED)
    waiting.refresh_from_db()
    assert waiting.status == WorkloadStatus.ADMITTED


def requeued_condition(wl: cluster.Workload) -> tuple[str, str, str]:
    wl.refresh_from_db()
    c = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "Requeued")
    return c["status"], c["reason"], c["message"]


def test_a_drained_queue_requeues_its_workloads_once_it_runs_again(run_ticks):
    """HoldAndDrain evicts; once the job stops Kueue leaves Requeued=False (ClusterQueueStopped)
    while the queue is stopped, sets it True (ClusterQueueRestarted) when it runs again, and
    the workload is admitted anew."""
    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import ClusterWriter

    config = quiet(nodes_per_rack=2, blocks=1, racks_per_block=1, runtime_min_seconds=600, runtime_max_seconds=600)
    simulator_seed(config=config, now=START)
    wl = simulator_submit(shape=whole_nodes(2), now=START, rng=random.Random(2), config=config)
    run_ticks(3, config=config, until=lambda: len(running_nodes(wl)) == 2)
    cq = cluster.ClusterQueue.objects.get()

    def stop_policy(policy: str) -> None:
        state = SimulatorState.objects.get()
        ClusterWriter(state).put("ClusterQueue", {**cq.raw, "spec": {**cq.raw["spec"], "stopPolicy": policy}})
        state.save()

    stop_policy("HoldAndDrain")
    run_ticks(1, config=config)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.EVICTED
    run_ticks(2, config=config)
    wl.refresh_from_db()
    assert wl.status in WAITING and "admission" not in wl.raw["status"]
    assert requeued_condition(wl) == ("False", "ClusterQueueStopped", "The ClusterQueue is stopped")

    stop_policy("None")
    run_ticks(1, config=config, scheduler=False)
    assert requeued_condition(wl) == ("True", "ClusterQueueRestarted",
                                      "The ClusterQueue was restarted after being stopped")
    run_ticks(4, config=config, until=lambda: len(running_nodes(wl)) == 2)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED


def test_a_backoff_over_requeues_and_one_still_running_waits(run_ticks):
    """A PodsReady timeout's Requeued=False turns True (BackoffFinished) once its requeueAt has
    passed, which Kueue clears; before that it stays as it is."""
    from datetime import timedelta

    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import ClusterWriter

    config = quiet(nodes_per_rack=2, blocks=1, racks_per_block=1)
    simulator_seed(config=config, now=START)
    rows = [simulator_submit(shape=whole_nodes(9), now=START, rng=random.Random(n), config=config) for n in (1, 2)]
    state = SimulatorState.objects.get()
    writer = ClusterWriter(state)  # as the cluster's API server: the next resourceVersions
    for wl, due in zip(rows, (START - timedelta(seconds=5), START + timedelta(hours=1)), strict=True):
        writer.put("Workload", {**wl.raw, "status": {
            "conditions": [{"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
                            "message": "Exceeded the PodsReady timeout", "lastTransitionTime": "2025-06-01T11:00:00Z"}],
            "requeueState": {"count": 1, "requeueAt": due.strftime("%Y-%m-%dT%H:%M:%SZ")}}})
    state.save()
    run_ticks(1, config=config, scheduler=False)
    over, waiting = rows
    assert requeued_condition(over)[:2] == ("True", "BackoffFinished")
    assert over.raw["status"]["requeueState"] == {"count": 1}
    assert requeued_condition(waiting)[:2] == ("False", "PodsReadyTimeout")
    assert "requeueAt" in waiting.raw["status"]["requeueState"]


@pytest.mark.parametrize(("target", "reason", "message"), [
    (None, "Deactivated", "The workload is deactivated"),
    ({"type": "DeactivationTarget", "status": "True", "reason": "AdmissionCheck",
      "message": "Admission check(s): prov, were rejected", "lastTransitionTime": "2025-06-01T12:00:00Z"},
     "DeactivatedDueToAdmissionCheck", "The workload is deactivated due to Admission check(s): prov, were rejected"),
])
def test_a_deactivated_workload_gives_its_nodes_back_and_runs_again_once_reactivated(run_ticks, target, reason,
                                                                                      message):
    """spec.active false on a running workload (with the DeactivationTarget Kueue sets first, or
    without): the pass evicts it, its pods stop, it waits without being admitted while inactive,
    and once active again Kueue's Requeued=True (Reactivated) lets the next pass admit it."""
    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import ClusterWriter

    config = quiet(nodes_per_rack=2, blocks=1, racks_per_block=1, runtime_min_seconds=600, runtime_max_seconds=600)
    simulator_seed(config=config, now=START)
    wl = simulator_submit(shape=whole_nodes(2), now=START, rng=random.Random(3), config=config)
    run_ticks(3, config=config, until=lambda: len(running_nodes(wl)) == 2)

    def set_active(active: bool) -> None:
        wl.refresh_from_db()
        raw = {**wl.raw, "spec": {**wl.raw["spec"], "active": active}}
        if not active and target is not None:
            raw["status"] = {**raw["status"], "conditions": [*raw["status"]["conditions"], target]}
        state = SimulatorState.objects.get()
        ClusterWriter(state).put("Workload", raw)
        state.save()

    set_active(False)
    run_ticks(1, config=config)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.EVICTED
    evicted = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["reason"], evicted["message"]) == (reason, message)
    assert not any(c["type"] == "DeactivationTarget" for c in wl.raw["status"]["conditions"])
    assert events(wl, EventKind.EVICTED).exists()
    run_ticks(2, config=config)
    wl.refresh_from_db()
    # deactivated for good: no admission, no pods, Evicted kept (as Kueue keeps it) and nothing
    # writing the workload again tick after tick
    assert "admission" not in wl.raw["status"] and not running_nodes(wl)
    assert requeued_condition(wl)[:2] == ("False", reason)
    settled = wl.resource_version
    run_ticks(3, config=config)
    wl.refresh_from_db()
    assert wl.resource_version == settled
    evicted = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", reason)

    set_active(True)
    run_ticks(1, config=config, scheduler=False)
    assert requeued_condition(wl) == ("True", "Reactivated", "The workload was reactivated")
    run_ticks(4, config=config, until=lambda: len(running_nodes(wl)) == 2)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED
