"""The status the mirror stores for a Workload, read from Kueue's conditions."""

from __future__ import annotations

import pytest

from tasweb.cluster.models import WorkloadStatus
from tasweb.cluster.services import workload_status


def wl(*conditions: tuple[str, str], admission: bool = True) -> dict:
    status: dict = {"conditions": [{"type": t, "status": s, "message": f"{t} {s}"} for t, s in conditions]}
    if admission:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": []}
    return {"status": status}


@pytest.mark.parametrize("obj,expected", [
    (wl(("QuotaReserved", "True"), ("Admitted", "True")), WorkloadStatus.ADMITTED),
    (wl(("QuotaReserved", "True")), WorkloadStatus.QUOTA_RESERVED),
    (wl(("QuotaReserved", "True"), ("Admitted", "True"), ("Evicted", "True")), WorkloadStatus.EVICTED),
    (wl(("QuotaReserved", "True"), ("Admitted", "True"), ("Evicted", "True"), ("Preempted", "True")),
     WorkloadStatus.PREEMPTED),
    # the eviction is over: no quota held, back in the queue
    (wl(("QuotaReserved", "False"), ("Evicted", "True"), ("Preempted", "True"), admission=False),
     WorkloadStatus.PENDING),
    # admitted again after a preemption: Kueue sets Evicted and Preempted to False
    (wl(("QuotaReserved", "True"), ("Admitted", "True"), ("Evicted", "False"), ("Preempted", "False")),
     WorkloadStatus.ADMITTED),
    (wl(("QuotaReserved", "True"), ("Finished", "True")), WorkloadStatus.FINISHED),
    (wl(admission=False), WorkloadStatus.PENDING),
    (wl(admission=True), WorkloadStatus.ADMITTED),
])
def test_status_from_conditions(obj, expected):
    assert workload_status(obj)[0] == expected


def test_a_requeued_workload_keeps_the_eviction_message_until_the_scheduler_writes_one():
    obj = wl(("Evicted", "True"), admission=False)
    assert workload_status(obj) == (WorkloadStatus.PENDING, "Evicted True")
