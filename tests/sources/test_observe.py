"""Observe mode: Kueue decides; the mirror decodes its admissions and records the history."""

from __future__ import annotations

import pytest

from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.scheduling.models import AssignmentDomain, EventKind, PodSetAssignment, WorkloadEvent
from tasweb.scheduling.selectors import workloads_on_domain

from . import objects
from .conftest import in_sync, mirror_differences, running_mirror, wait_until
from .fakekube import FakeKube

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def history(key: str) -> list[str]:
    return list(WorkloadEvent.objects.filter(workload_key=key).order_by("at", "id").values_list("kind", flat=True))


def status_of(name: str) -> str | None:
    return cluster.Workload.objects.filter(name=name).values_list("status", flat=True).first()


def test_kueue_admissions_are_decoded_and_kept_in_history(kube: FakeKube, kubeconfig):
    for obj in objects.small_cluster():
        kube.create(obj)
    with running_mirror(observe=True):
        wait_until(lambda: in_sync(kube), what="the first sync")
        assert history("ml/train") == [EventKind.QUEUED]

        # Kueue admits the workload on two nodes of rack b1/r2 (it stores hostnames only)
        kube.update("Workload", "train", lambda w: objects.kueue_admission(w, [("b1-r2-n1", 1), ("b1-r2-n2", 1)]),
                    namespace="ml")
        wait_until(lambda: status_of("train") == WorkloadStatus.ADMITTED, what="Kueue's admission")

        workload = cluster.Workload.objects.get(name="train")
        assignment = PodSetAssignment.objects.get(workload=workload)
        assert assignment.pod_set == "workers" and assignment.flavor == "tas-gpu"
        assert assignment.encoded == kube.get("Workload", "train", namespace="ml")["status"]["admission"][
            "podSetAssignments"][0]["topologyAssignment"]
        rows = list(AssignmentDomain.objects.filter(workload=workload).order_by("position")
                    .values_list("values", "node", "count"))
        assert rows == [(["b1", "r2", "b1-r2-n1"], "b1-r2-n1", 1), (["b1", "r2", "b1-r2-n2"], "b1-r2-n2", 1)]
        assert list(workloads_on_domain(flavor="tas-gpu", values=["b1", "r2"])) == [workload]
        assert not workloads_on_domain(flavor="tas-gpu", values=["b2"]).exists()

        # a re-list (410) that finds the workload unchanged records nothing new
        kube.expire("Workload")
        kube.create(objects.workload("evaluate", count=1))
        wait_until(lambda: status_of("evaluate") is not None and not mirror_differences(kube), what="the re-list")
        assert history("ml/train") == [EventKind.QUEUED, EventKind.ADMITTED]

        # Kueue evicts it; once its pods are gone the admission goes, and so do the decoded rows
        kube.update("Workload", "train", objects.kueue_eviction, namespace="ml")
        wait_until(lambda: status_of("train") == WorkloadStatus.EVICTED, what="the eviction")
        assert AssignmentDomain.objects.filter(workload__name="train").count() == 2
        kube.update("Workload", "train", objects.kueue_requeue, namespace="ml")
        wait_until(lambda: status_of("train") == WorkloadStatus.PENDING, what="the requeue")
        assert not AssignmentDomain.objects.filter(workload__name="train").exists()

    assert history("ml/train") == [EventKind.QUEUED, EventKind.ADMITTED, EventKind.EVICTED, EventKind.REQUEUED]
    assert history("ml/evaluate") == [EventKind.QUEUED]
    admitted = WorkloadEvent.objects.get(workload_key="ml/train", kind=EventKind.ADMITTED)
    assert admitted.details == {"observed": True}
    assert admitted.cluster_queue == "cluster-queue"


def test_control_mode_mirror_leaves_history_to_the_engine(kube: FakeKube, kubeconfig):
    for obj in objects.small_cluster():
        kube.create(obj)
    with running_mirror(observe=False):
        wait_until(lambda: in_sync(kube), what="the first sync")
        kube.update("Workload", "train", lambda w: objects.kueue_admission(w, [("b1-r2-n1", 2)]), namespace="ml")
        wait_until(lambda: status_of("train") == WorkloadStatus.ADMITTED, what="the update")
    assert not WorkloadEvent.objects.exists()
