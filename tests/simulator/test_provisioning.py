"""The simulated cluster autoscaler behind Kueue's ProvisioningRequest admission checks: a
reservation's check turns Ready once the request has taken its time, and the engine admits the
workload; a failed request asks for a retry with Kueue's backoff (the workload is evicted and
waits that long), and past the retry limit the check rejects it."""

from __future__ import annotations

import copy
import random
from datetime import timedelta

import pytest

from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.cluster.services import object_upsert
from tasweb.simulator import objects as k8s
from tasweb.simulator.objects import JobShape, PodSetShape
from tasweb.simulator.services import PROVISIONING_CONTROLLER, simulator_seed, simulator_submit

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def cluster_with_provisioning(config) -> cluster.Workload:
    """The seeded cluster, its ClusterQueue asking for a ProvisioningRequest check, and one job."""
    simulator_seed(config=config, now=START)
    object_upsert(kind="AdmissionCheck", obj={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"},
        "spec": {"controllerName": PROVISIONING_CONTROLLER},
        "status": {"conditions": [{"type": "Active", "status": "True"}]}})
    cq = copy.deepcopy(cluster.ClusterQueue.objects.get(name=k8s.CLUSTER_QUEUE).raw)
    cq["spec"]["admissionChecks"] = ["prov"]
    cq["metadata"]["resourceVersion"] = str(int(cq["metadata"]["resourceVersion"]) + 1000)
    object_upsert(kind="ClusterQueue", obj=cq)
    shape = JobShape("bert-finetune", "Job", (PodSetShape("main", 2, 8, "required", k8s.RACK_LABEL),))
    return simulator_submit(shape=shape, now=START, rng=random.Random(1), config=config)


def check_of(wl: cluster.Workload) -> dict:
    """The workload's one admission check as stored ({} before the pass lists it)."""
    wl.refresh_from_db()
    (check,) = (wl.raw.get("status") or {}).get("admissionChecks") or [{}]
    return check


def status_of(wl: cluster.Workload) -> str:
    wl.refresh_from_db()
    return wl.status


def deactivated(wl: cluster.Workload) -> bool:
    """Evicted for good: its check rejected it (Kueue's workload controller deactivates it)."""
    wl.refresh_from_db()
    return any(c["type"] == "Evicted" and c["status"] == "True" and c["reason"] == "DeactivatedDueToAdmissionCheck"
               for c in (wl.raw.get("status") or {}).get("conditions") or [])


def test_a_provisioned_check_turns_ready_and_the_workload_is_admitted(run_ticks, clock):
    config = quiet(provisioning_seconds=10, provisioning_failure_fraction=0)
    wl = cluster_with_provisioning(config)
    run_ticks(2, config=config)  # the reservation, then the check listed Pending
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.QUOTA_RESERVED
    assert check_of(wl)["state"] == "Pending"
    reports = run_ticks(10, config=config, until=lambda: check_of(wl)["state"] == "Ready")
    assert sum(r.checks_provisioned for r in reports) == 1
    assert "provisioned" in check_of(wl)["message"]
    run_ticks(1, config=config)
    wl.refresh_from_db()
    assert wl.status == WorkloadStatus.ADMITTED


def test_a_failed_request_asks_for_a_retry_with_kueues_backoff_then_rejects(run_ticks, clock):
    config = quiet(provisioning_seconds=4, provisioning_failure_fraction=1, provisioning_retry_limit=1,
                   provisioning_backoff_base_seconds=30)
    wl = cluster_with_provisioning(config)
    reports = run_ticks(10, config=config, until=lambda: status_of(wl) == WorkloadStatus.EVICTED)
    assert sum(r.checks_retried for r in reports) == 1
    retried_at = clock.now  # the tick's autoscaler failed the request; the pass after it evicted
    check = check_of(wl)  # reset to Pending by the eviction, its delay kept
    assert (check["state"], check["retryCount"], check["requeueAfterSeconds"]) == ("Pending", 1, 30)
    requeue_at = wl.raw["status"]["requeueState"]["requeueAt"]
    assert requeue_at == (retried_at + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # its pods gone it waits out the delay, is reserved again, and the next failure rejects it
    reports = run_ticks(60, config=config, until=lambda: deactivated(wl))
    assert sum(r.checks_rejected for r in reports) == 1
    target = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "DeactivationTarget")
    assert target["message"] == "Admission check(s): prov, were rejected"
    reserved_again = next(c for c in wl.raw["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved_again["lastTransitionTime"] >= requeue_at


def test_checks_of_other_controllers_are_left_alone(run_ticks):
    config = quiet(provisioning_seconds=0, provisioning_failure_fraction=0)
    wl = cluster_with_provisioning(config)
    cluster.AdmissionCheck.objects.filter(name="prov").update(controller_name="example.com/other")
    reports = run_ticks(5, config=config)
    assert sum(r.checks_provisioned for r in reports) == 0
    assert check_of(wl)["state"] == "Pending"
