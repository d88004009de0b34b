"""What every eviction writes on a workload (Kueue's workload.Evict), whichever path evicts."""

from __future__ import annotations

from datetime import timedelta

from scheduler.eviction import evict, evict_and_record, is_evicted
from scheduler.model import AdmissionCheckState, Condition
from scheduler.results import WORKLOAD_EVICTED, PassResult

from .factories import NOW, parse_one, workload


def a_workload(*checks: AdmissionCheckState):
    wl = parse_one(workload("w", count=1, cpu=1))
    wl.admission_checks = list(checks)
    wl.conditions = [Condition("QuotaReserved", "True", "QuotaReserved", "reserved", NOW)]
    return wl


def test_evict_sets_the_condition_and_resets_each_check_not_pending():
    pending = AdmissionCheckState("a", "Pending", "waiting")
    later = NOW + timedelta(seconds=5)
    wl = a_workload(pending, AdmissionCheckState("b", "Ready", "ok"),
                    AdmissionCheckState("c", "Retry", "again", retry_count=2, requeue_after_seconds=30))
    evict(wl, "Preempted", "by x", later)
    assert is_evicted(wl)
    evicted = wl.condition("Evicted")
    assert (evicted.reason, evicted.message, evicted.last_transition_time) == ("Preempted", "by x", later)
    assert wl.admission_checks[0] is pending
    b, c = wl.admission_checks[1:]
    assert (b.state, b.message, b.retry_count, b.last_transition_time) == (
        "Pending", "Reset to Pending after eviction. Previously: Ready", None, later)
    assert (c.state, c.retry_count, c.requeue_after_seconds) == ("Pending", 3, 30)
    assert wl.condition_true("QuotaReserved"), "the workload keeps its quota until its pods are gone"


def test_a_second_eviction_replaces_the_first_condition():
    wl = a_workload()
    evict(wl, "Preempted", "first", NOW)
    evict(wl, "NodeFailures", "second", NOW)
    assert [c.reason for c in wl.conditions if c.type == "Evicted"] == ["NodeFailures"]


def test_evict_and_record_writes_kueues_event_and_the_decision():
    result = PassResult()
    wl = a_workload()
    evict_and_record(wl, "PodsReadyTimeout", "too slow", NOW, result)
    evict_and_record(wl, "NodeFailures", "node gone", NOW, result, trigger="node n1 failed", node="n1")
    assert [(e.reason, e.message) for e in result.events] == [
        ("EvictedDueToPodsReadyTimeout", "too slow"), ("EvictedDueToNodeFailures", "node gone")]
    first, second = result.decisions
    assert (first.kind, first.trigger, first.node) == (WORKLOAD_EVICTED, "PodsReadyTimeout", "")
    assert (second.trigger, second.node) == ("node n1 failed", "n1")
