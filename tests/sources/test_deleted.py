"""A Workload that leaves the cluster before it finishes ends its history with a Deleted
event (what it was doing, and why it went), however the mirror learns of it."""

from __future__ import annotations

import pytest

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling.models import EventKind, WorkloadEvent
from tasweb.sources.services import mirror_event_apply, mirror_list_apply

from . import objects

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def kinds(key: str) -> list[str]:
    return list(WorkloadEvent.objects.filter(workload_key=key).order_by("at", "id").values_list("kind", flat=True))


def finished(obj: dict) -> dict:
    obj["status"] = {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                     "message": "done", "lastTransitionTime": "2025-06-01T12:00:00Z"}]}
    return obj


def test_a_deleted_event_closes_the_history_of_a_waiting_workload():
    obj = objects.workload("train")
    object_upsert(kind="Workload", obj=obj)
    status = cluster.Workload.objects.get(name="train").status
    mirror_event_apply(kind="Workload", api_version="kueue.x-k8s.io/v1beta2", event_type="DELETED", obj=obj)
    assert not cluster.Workload.objects.exists()
    [event] = WorkloadEvent.objects.filter(workload_key="ml/train")
    assert event.kind == EventKind.DELETED and event.workload is None
    assert event.message.startswith(f"deleted from the cluster; it was {status}")


def test_a_relist_closes_the_history_of_workloads_gone_meanwhile():
    for name in ("stays", "gone"):
        object_upsert(kind="Workload", obj=objects.workload(name))
    object_upsert(kind="Workload", obj=finished(objects.workload("done")))
    mirror_list_apply(kind="Workload", api_version="kueue.x-k8s.io/v1beta2", objects=[objects.workload("stays")],
                      resource_version="9")
    assert kinds("ml/gone") == [EventKind.DELETED]
    # a finished workload's history ends with Finished; one still listed goes on
    assert kinds("ml/done") == kinds("ml/stays") == []
