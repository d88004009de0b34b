"""Side by side with Kueue in the service: each admission Kueue makes is compared with this
engine's decision once, by the observe pass that first sees it, and stored."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling.models import AdmissionComparison, AdmissionToCompare, ComparisonCategory, SchedulingPass
from tasweb.scheduling.services import scheduling_pass_run, workload_observed
from tests.sources import objects

pytestmark = [pytest.mark.django_db, pytest.mark.services]

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
RV = {"n": 1000}


def put(obj: dict) -> None:
    RV["n"] += 1
    obj.setdefault("metadata", {})["resourceVersion"] = str(RV["n"])
    object_upsert(kind=obj["kind"], obj=obj)


def kueue_writes(name: str, change, at: datetime = NOW) -> None:
    """Kueue changes Workload `name`; the mirror stores it and observes the transition (as the
    sources do in observe mode)."""
    row = cluster.Workload.objects.get(name=name)
    old_status, old_admission = row.status, (row.raw.get("status") or {}).get("admission")
    put(change(copy.deepcopy(row.raw)))
    workload_observed(workload=cluster.Workload.objects.get(uid=row.uid), old_status=old_status,
                      old_admission=old_admission, at=at)


def admitted_on(hosts, *, at: str = "2025-06-01T11:31:00Z"):
    def change(obj: dict) -> dict:
        obj = objects.kueue_admission(obj, hosts)
        for condition in obj["status"]["conditions"]:
            condition["lastTransitionTime"] = at
        return obj
    return change


@pytest.fixture
def small_cluster(settings):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MODE = "observe"
    for obj in objects.small_cluster():
        put(obj)


def observe_pass(minutes: int = 0) -> SchedulingPass:
    return scheduling_pass_run(now=NOW + timedelta(minutes=minutes), send_to_cluster=False)


def test_an_admission_is_compared_once_by_the_pass_that_first_sees_it(small_cluster):
    kueue_writes("train", admitted_on([("b1-r2-n1", 1), ("b1-r2-n2", 1)]))
    assert AdmissionToCompare.objects.count() == 1

    first = observe_pass()
    assert first.mode == "observe"
    (row,) = AdmissionComparison.objects.all()
    assert row.category == ComparisonCategory.SAME_DOMAINS
    assert row.workload_key == "ml/train" and row.namespace == "ml" and row.cluster_queue == "cluster-queue"
    assert row.flavor == "tas-gpu" and row.scheduling_pass_id == first.id and row.admitted_at == NOW
    assert [d["values"] for d in row.kueue[0]["domains"]] == [["b1", "r2", "b1-r2-n1"], ["b1", "r2", "b1-r2-n2"]]
    assert row.kueue[0]["level"] == objects.RACK and row.engine[0]["domains"] == [
        {"values": d["values"], "count": d["count"]} for d in row.kueue[0]["domains"]]
    assert row.workload_id == cluster.Workload.objects.get(name="train").id
    assert not AdmissionToCompare.objects.exists()

    observe_pass(1)
    observe_pass(2)
    assert AdmissionComparison.objects.count() == 1  # nothing new to compare


def test_a_workload_admitted_again_after_an_eviction_is_compared_again(small_cluster):
    kueue_writes("train", admitted_on([("b1-r2-n1", 1), ("b1-r2-n2", 1)]))
    observe_pass()
    kueue_writes("train", objects.kueue_eviction)
    kueue_writes("train", objects.kueue_requeue)
    observe_pass(1)
    assert AdmissionComparison.objects.count() == 1
    # this time Kueue picks another rack than the engine would
    kueue_writes("train", admitted_on([("b2-r1-n1", 1), ("b2-r1-n2", 1)], at="2025-06-01T12:05:00Z"),
                 at=NOW + timedelta(minutes=5))
    observe_pass(6)
    rows = list(AdmissionComparison.objects.order_by("id").values_list("category", "admission"))
    assert [c for c, _ in rows] == [ComparisonCategory.SAME_DOMAINS, ComparisonCategory.SAME_LEVEL_OTHER_DOMAINS]
    assert rows[0][1] != rows[1][1]


def test_a_mark_written_twice_for_one_admission_stores_one_row(small_cluster):
    kueue_writes("train", admitted_on([("b1-r2-n1", 1), ("b1-r2-n2", 1)]))
    AdmissionToCompare.objects.create(workload_key="ml/train", uid="x", observed_at=NOW)
    observe_pass()
    assert AdmissionComparison.objects.count() == 1 and not AdmissionToCompare.objects.exists()


def test_no_capacity_for_kueue_on_the_node_of_the_running_non_tas_pod(small_cluster):
    # b1-r1-n1 runs a 2-GPU pod outside Kueue: an 8-GPU pod has no room there in the engine's view
    kueue_writes("train", admitted_on([("b1-r1-n1", 1), ("b1-r1-n2", 1)]))
    observe_pass()
    row = AdmissionComparison.objects.get()
    assert row.category == ComparisonCategory.NO_CAPACITY_FOR_KUEUE
    assert "b1/r1/b1-r1-n1 has room for 0 of its 1 pod(s)" in row.reason


def test_an_admission_gone_before_the_pass_is_dropped_uncompared(small_cluster):
    kueue_writes("train", admitted_on([("b1-r2-n1", 1), ("b1-r2-n2", 1)]))
    kueue_writes("train", objects.kueue_eviction)
    kueue_writes("train", objects.kueue_requeue)
    observe_pass()
    assert not AdmissionComparison.objects.exists() and not AdmissionToCompare.objects.exists()


def test_control_mode_admissions_are_the_engines_own_and_not_compared(small_cluster, settings):
    settings.TAS_MODE = "control"
    record = scheduling_pass_run(now=NOW, send_to_cluster=False)
    assert record.mode == "control" and record.admitted == 1
    assert not AdmissionToCompare.objects.exists() and not AdmissionComparison.objects.exists()


def test_comparisons_are_pruned_on_the_clock_of_the_passes(small_cluster, settings):
    from tasweb.scheduling.services import _prune_change_log

    kueue_writes("train", admitted_on([("b1-r2-n1", 1), ("b1-r2-n2", 1)]))
    record = observe_pass()
    settings.TAS_COMPARISON_RETENTION_SECONDS = 3600
    record.id = 50  # a pass that prunes
    _prune_change_log(record)
    assert AdmissionComparison.objects.count() == 1  # simulated time: an hour has not passed
    record.started_at = NOW + timedelta(hours=2)
    _prune_change_log(record)
    assert not AdmissionComparison.objects.exists()
