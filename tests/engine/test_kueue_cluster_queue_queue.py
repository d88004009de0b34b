"""Kueue's `pkg/cache/queue/cluster_queue_test.go` (API v1beta2) transcribed onto the engine's
queue manager (`scheduler.queues.QueueManager`).

Mapping of Kueue's calls:

* `PushOrUpdate` / `AddOrUpdateWorkload`: the Workload object upserted into the engine and synced;
* `Pop`: `QueueManager.heads()` (one ClusterQueue here: its head, or None);
* `RequeueIfNotPresent(reason)` / `requeueIfNotPresent(immediate, reason)`: `QueueManager.requeue`
  with the engine's reason (`REQUEUE_IMMEDIATE` for Kueue's immediate reasons,
  `REQUEUE_GENERIC` for a non-immediate generic requeue); a workload Kueue requeues without
  having pushed it is upserted and popped first (the engine requeues only workloads it routed);
* `QueueInadmissibleWorkloads`: `QueueManager.requeue_inadmissible([cq])`, its count the parked
  workloads it moved;
* `Dump`: the ClusterQueue's workloads in its heap (`ClusterQueueQueue.active`);
  `DumpInadmissible` / the inadmissible map: the parked ones and those in their requeue backoff
  (`QueueManager.backoff`), where Kueue keeps a workload whose backoff did not expire;
* `PendingTotal`: the ClusterQueue's workloads (heap and parked) and those in backoff;
* a recorded scheduling hash: a parked equivalence class (an equivalent workload pushed later
  is parked with it).
"""

# Cases of the Go file the engine deliberately does not follow, left out:
# * a Requeued=False condition with no requeueAt keeping a workload out of the heap ("should wait
#   for Requeued=true ...", TestBackoffWaitingTimeExpired's "workload still have Requeued=false"):
#   the engine waits out `requeueState.requeueAt` only, which Kueue's controller follows with
#   Requeued=True;
# * RequeueIfNotPresent called on a parked workload, or on one still in the heap ("re-queue
#   admissible workload that was inadmissible", "didn't fit but pending flavors" requeued twice):
#   a cycle requeues only the heads it popped.


from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import Configuration, parse_configuration
from scheduler.engine import Engine
from scheduler.model import Workload
from scheduler.queues import (
    REQUEUE_GENERIC,
    REQUEUE_IMMEDIATE,
    REQUEUE_NAMESPACE_MISMATCH,
    REQUEUE_NO_CANDIDATES,
    REQUEUE_NO_FIT,
    REQUEUE_PENDING_PREEMPTION,
    REQUEUE_PREEMPTION_GATED,
    ClusterQueueQueue,
)

from . import kueue_schedule as ks
from .factories import NOW, V1BETA2, gates, local_queue, parse, parse_one, resource_flavor, run, timestamp, workload

NS = "default"
CQ = "cq"
LQ = "lq"
RF = "default-flavor"
GPU = "example.com/gpu"
LOW_PRIORITY = 0
HIGH_PRIORITY = 1000


# ---------------------------------------------------------------- objects


def cluster_queue(*, strategy: str | None = None, namespace_selector: dict | None = None,
                  admission_mode: str | None = None) -> dict:
    spec: dict[str, Any] = {
        "namespaceSelector": namespace_selector if namespace_selector is not None else {},
        "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{"name": RF, "resources": [
            {"name": "cpu", "nominalQuota": "100"}, {"name": GPU, "nominalQuota": "100"}]}]}],
    }
    if strategy is not None:
        spec["queueingStrategy"] = strategy
    if admission_mode is not None:
        spec["admissionScope"] = {"admissionMode": admission_mode}
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": CQ}, "spec": spec}


def lq(name: str = LQ, namespace: str = NS, *, weight: str | None = None,
       consumed: dict[str, str] | None = None) -> dict:
    obj = local_queue(name, namespace=namespace, cluster_queue_name=CQ)
    if weight is not None:
        obj["spec"]["fairSharing"] = {"weight": weight}
    if consumed is not None:
        obj["status"] = {"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": consumed, "lastUpdate": timestamp(0)}}}
    return obj


def namespace(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def condition(type_: str, status: str, reason: str = "ByTest", at: float | None = None) -> dict:
    out = {"type": type_, "status": status, "reason": reason, "message": "by test"}
    if at is not None:
        out["lastTransitionTime"] = timestamp(at)
    return out


EVICTED_BY_PODS_READY_TIMEOUT = condition("Evicted", "True", "PodsReadyTimeout", at=-120)
REQUEUED_FALSE = condition("Requeued", "False", "PodsReadyTimeout", at=-120)
REQUEUED_TRUE = condition("Requeued", "True", "BackoffFinished", at=-60)


def wl(name: str, *, ns: str = NS, queue: str | None = LQ, priority: int | None = None, created: float = 0,
       cpu: str | None = "1", gpu: str | None = None, count: int = 1, generation: int | None = None,
       conditions: list[dict] | None = None, requeue_state: tuple[int, float | None] | None = None,
       reclaimable: int | None = None) -> dict:
    """A pending Workload; `requeue_state`: (count, requeueAt in seconds from NOW, or None)."""
    extra = {GPU: gpu} if gpu is not None else None
    obj = workload(name, namespace=ns, queue=queue, priority=priority, created=created, cpu=cpu, extra=extra,
                   count=count)
    if generation is not None:
        obj["metadata"]["generation"] = generation
    status: dict[str, Any] = {}
    if conditions:
        status["conditions"] = list(conditions)
    if requeue_state is not None:
        n, at = requeue_state
        status["requeueState"] = {"count": n, **({"requeueAt": timestamp(at)} if at is not None else {})}
    if reclaimable is not None:
        status["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    if status:
        obj["status"] = status
    return obj


def engine_of(objects: list[dict], *, config: Configuration | None = None, **gate_values: bool) -> Engine:
    engine = Engine.from_parsed(parse(objects), gates(**gate_values), config=config)
    engine.sync(NOW)
    return engine


def base(strategy: str | None = None, *extra: dict, **cq_kwargs: Any) -> list[dict]:
    return [resource_flavor(RF, topology_name=None), cluster_queue(strategy=strategy, **cq_kwargs), lq(), *extra]


# ---------------------------------------------------------------- Kueue's verbs


def queue(engine: Engine) -> ClusterQueueQueue:
    return engine.queues.queues[CQ]


def push(engine: Engine, obj: dict) -> None:
    """PushOrUpdate."""
    engine.upsert(parse_one(obj))
    engine.sync(NOW)


def delete(engine: Engine, key: str) -> None:
    engine.delete("Workload", key)
    engine.sync(NOW)


def pop(engine: Engine) -> Workload | None:
    heads = engine.queues.heads()
    assert len(heads) <= 1
    return heads[0][0] if heads else None


def requeue(engine: Engine, key: str, reason: str) -> bool:
    """RequeueIfNotPresent; True: in the heap."""
    wl_ = engine.state.workload(key)
    assert wl_ is not None
    in_heap, _, _ = engine.queues.requeue(wl_, CQ, reason)
    return in_heap


def make_inadmissible(engine: Engine, *keys: str, reason: str = REQUEUE_GENERIC) -> None:
    """Kueue's requeueIfNotPresent(immediate=false) of workloads it never pushed: here they were
    upserted, so they are popped (the others popped on the way going back at once) and requeued."""
    wanted = set(keys)
    popped: list[str] = []
    while wanted - set(popped):
        head = pop(engine)
        assert head is not None, f"{sorted(wanted - set(popped))} not in the heap"
        popped.append(head.key)
    for key in popped:
        requeue(engine, key, reason if key in wanted else REQUEUE_IMMEDIATE)


def flush(engine: Engine) -> int:
    """QueueInadmissibleWorkloads: how many parked workloads went back to the heap."""
    before = engine.queues.parked_count()
    engine.queues.requeue_inadmissible([CQ])
    return before - engine.queues.parked_count()


def active(engine: Engine) -> set[str]:
    return set(queue(engine).active)


def inadmissible(engine: Engine) -> set[str]:
    return set(queue(engine).parked) | set(engine.queues.backoff)


def pending_total(engine: Engine) -> int:
    return len(queue(engine)) + len(engine.queues.backoff)


def key(name: str, ns: str = NS) -> str:
    return f"{ns}/{name}"


# ---------------------------------------------------------------- Test_PushOrUpdate

PUSH_OR_UPDATE_CASES = {
    "workload doesn't have re-queue state": ({}, True),
    "workload is still under the backoff waiting time": (
        {"requeue_state": (10, 60), "conditions": [EVICTED_BY_PODS_READY_TIMEOUT, REQUEUED_FALSE]}, False),
    "should push workload to heap after Requeued=true": (
        {"conditions": [EVICTED_BY_PODS_READY_TIMEOUT, REQUEUED_TRUE]}, True),
}


@pytest.mark.parametrize("case", list(PUSH_OR_UPDATE_CASES), ids=[
    "workload_doesnt_have_requeue_state",
    "workload_is_still_under_the_backoff_waiting_time",
    "should_push_workload_to_heap_after_requeued_true",
])
def test_push_or_update(case: str):
    """Go: Test_PushOrUpdate / each case (the pending count after Pop, which counts Kueue's
    inflight head, is not asserted: the engine has no inflight state outside a cycle)."""
    status, want_in_heap = PUSH_OR_UPDATE_CASES[case]
    engine = engine_of(base())
    assert pending_total(engine) == 0
    push(engine, wl("workload-1", **status))
    assert pending_total(engine) == 1
    push(engine, wl("workload-1", **status))  # the update
    head = pop(engine)
    if want_in_heap:
        assert head is not None and head.key == key("workload-1")
        assert inadmissible(engine) == set()
    else:
        assert head is None
        assert inadmissible(engine) == {key("workload-1")}


def test_pop():
    """Go: Test_Pop."""
    engine = engine_of(base())
    assert pop(engine) is None
    push(engine, wl("workload-1", created=0))
    push(engine, wl("workload-2", created=1))
    assert pop(engine).name == "workload-1"
    assert pop(engine).name == "workload-2"
    assert pop(engine) is None


# ---------------------------------------------------------------- TestPushOrUpdateGenerationChanged


@pytest.mark.parametrize("case, updated, want_active, want_inadmissible", [
    ("moves to heap when generation changed",
     {"generation": 2, "priority": 300}, 1, 0),
    ("stays inadmissible when generation changed but backoff unexpired",
     {"generation": 2, "priority": 300, "requeue_state": (1, 3600), "conditions": [REQUEUED_FALSE]}, 0, 1),
], ids=["moves_to_heap_when_generation_changed", "stays_inadmissible_when_generation_changed_but_backoff_unexpired"])
def test_push_or_update_generation_changed(case, updated, want_active, want_inadmissible):
    """Go: TestPushOrUpdateGenerationChanged / each case."""
    engine = engine_of(base())
    push(engine, wl("workload-1", generation=1))
    head = pop(engine)
    assert head is not None
    requeue(engine, head.key, REQUEUE_GENERIC)
    push(engine, wl("workload-1", **updated))
    assert len(active(engine)) == want_active
    assert len(inadmissible(engine)) == want_inadmissible


def test_delete():
    """Go: Test_Delete."""
    engine = engine_of(base())
    push(engine, wl("workload-1"))
    push(engine, wl("workload-2"))
    assert pending_total(engine) == 2
    delete(engine, key("workload-1"))
    assert pending_total(engine) == 1
    delete(engine, key("workload-2"))
    assert pending_total(engine) == 0


def test_info():
    """Go: Test_Info (Info: the workload is known to the ClusterQueue)."""
    engine = engine_of(base())
    assert engine.queues.assigned.get(key("workload-1")) != CQ
    push(engine, wl("workload-1"))
    assert engine.queues.assigned.get(key("workload-1")) == CQ


# ---------------------------------------------------------------- TestPendingResourcesAfterLocalQueueResync


def resync(engine: Engine) -> None:
    """The LocalQueue's spec changes, its ClusterQueue the same: every pending workload is routed
    again (the engine's counterpart of AddFromLocalQueue for an already tracked LocalQueue)."""
    push(engine, lq(weight="2"))


def test_pending_resources_after_local_queue_resync_the_workload_stays_tracked_as_inadmissible():
    """Go: TestPendingResourcesAfterLocalQueueResync / "the workload stays tracked as inadmissible"
    (the pending resources are not asserted: metrics)."""
    engine = engine_of(base(None, wl("workload")))
    make_inadmissible(engine, key("workload"))
    resync(engine)
    assert active(engine) == set()
    assert inadmissible(engine) == {key("workload")}


def test_pending_resources_after_local_queue_resync_requeuing_all_inadmissible_workloads_moves_it_to_the_heap():
    """Go: TestPendingResourcesAfterLocalQueueResync / "requeuing all inadmissible workloads moves
    it to the heap"."""
    engine = engine_of(base(None, wl("workload")))
    make_inadmissible(engine, key("workload"))
    resync(engine)
    flush(engine)
    assert active(engine) == {key("workload")}
    assert inadmissible(engine) == set()


def test_pending_resources_after_local_queue_resync_deleting_the_workload_removes_it():
    """Go: TestPendingResourcesAfterLocalQueueResync / "deleting the workload removes it and its
    resources"."""
    engine = engine_of(base(None, wl("workload")))
    make_inadmissible(engine, key("workload"))
    resync(engine)
    delete(engine, key("workload"))
    assert active(engine) == set() and inadmissible(engine) == set()
    assert pending_total(engine) == 0


def test_delete_from_local_queue():
    """Go: Test_DeleteFromLocalQueue."""
    engine = engine_of([resource_flavor(RF, topology_name=None), cluster_queue(), lq("foo"),
                        *(wl(f"wl{i}", queue="foo") for i in (1, 2, 3, 4))])
    make_inadmissible(engine, key("wl3"), key("wl4"))
    assert pending_total(engine) == 4
    assert len(queue(engine).parked) == 2
    engine.delete("LocalQueue", f"{NS}/foo")
    engine.sync(NOW)
    assert pending_total(engine) == 0


# ---------------------------------------------------------------- TestClusterQueueImpl

W1 = ("w1", "ns1", "q1")
W2 = ("w2", "ns2", "q2")
W3 = ("w3", "ns3", "q3")
W4 = ("w4-requeue-state", "ns1", "q1")


def impl_workload(spec: tuple[str, str, str], *, queue_name: str | None = None) -> dict:
    name, ns, q = spec
    if spec is W4:
        return wl(name, ns=ns, queue=q, requeue_state=(1, 60), conditions=[EVICTED_BY_PODS_READY_TIMEOUT])
    return wl(name, ns=ns, queue=queue_name or q)


def impl_engine(*workloads: dict) -> Engine:
    selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng", "sales"]}]}
    objects = [resource_flavor(RF, topology_name=None), cluster_queue(namespace_selector=selector),
               namespace("ns1", {"dep": "eng"}), namespace("ns2", {"dep": "sales"}),
               namespace("ns3", {"dep": "marketing"}),
               *(lq(q, ns) for ns in ("ns1", "ns2", "ns3") for q in ("q1", "q2", "q3")), *workloads]
    return engine_of(objects)


def wkey(spec: tuple[str, str, str]) -> str:
    return key(spec[0], spec[1])


IMPL_CASES = {
    "add, update, delete workload": dict(
        add=[W1, W2, W4], update=[(W1, "q2")], delete=[W1], want_active={W2}, want_pending=2),
    "re-queue inadmissible workload; workloads with requeueState can't re-queue": dict(
        add=[W1], inadmissible=[W2, W4], want_active={W1}, want_pending=3),
    "re-queue inadmissible workload and flush": dict(
        add=[W1], inadmissible=[W2, W4], flush=True, want_active={W1, W2}, want_pending=3, want_requeued=1),
    "re-queue multiple inadmissible workloads and count": dict(
        inadmissible=[W1, W2], flush=True, want_active={W1, W2}, want_pending=2, want_requeued=2),
    # W2 (ns2, sales) is selected and goes back; W3 (ns3, marketing) is not and stays parked
    "count only workloads that actually moved": dict(
        add=[W1], inadmissible=[W2, W3], flush=True, want_active={W1, W2}, want_pending=3, want_requeued=1),
    "workload already on heap is not made inadmissible": dict(
        add=[W2], inadmissible=[W2], flush=True, want_active={W2}, want_pending=1, want_requeued=0),
    "avoid re-queueing inadmissible workloads not matching namespace selector": dict(
        add=[W1], inadmissible=[W3], flush=True, want_active={W1}, want_pending=2, want_requeued=0),
    "update inadmissible workload": dict(
        add=[W1], inadmissible=[W2], update=[(W2, "q1")], want_active={W1, W2}, want_pending=2),
    "delete inadmissible workload": dict(
        add=[W1], inadmissible=[W2], delete=[W2], flush=True, want_active={W1}, want_pending=1),
    "update inadmissible workload without changes": dict(
        inadmissible=[W2], update=[(W2, None)], want_active=set(), want_pending=1),
    "requeue inadmissible workload twice": dict(
        inadmissible=[W2, W2], want_active=set(), want_pending=1),
}


@pytest.mark.parametrize("case", list(IMPL_CASES), ids=[
    "add_update_delete_workload",
    "requeue_inadmissible_workload_workloads_with_requeue_state_cant_requeue",
    "requeue_inadmissible_workload_and_flush",
    "requeue_multiple_inadmissible_workloads_and_count",
    "count_only_workloads_that_actually_moved",
    "workload_already_on_heap_is_not_made_inadmissible",
    "avoid_requeueing_inadmissible_workloads_not_matching_namespace_selector",
    "update_inadmissible_workload",
    "delete_inadmissible_workload",
    "update_inadmissible_workload_without_changes",
    "requeue_inadmissible_workload_twice",
])
def test_cluster_queue_impl(case: str):
    """Go: TestClusterQueueImpl / each case. A workload Kueue requeues as inadmissible without
    having pushed it is upserted, popped and requeued (Generic); one it pushed first is requeued
    where it is; a workload with a requeue state in the future is in its backoff, never in the heap
    (Kueue keeps it inadmissible)."""
    tc = IMPL_CASES[case]
    add, to_park = tc.get("add", []), tc.get("inadmissible", [])
    new = [s for s in dict.fromkeys(to_park) if s not in add]
    engine = impl_engine(*(impl_workload(s) for s in [*add, *new]))
    routed = [s for s in new if s is not W4]  # W4 waits in its backoff
    make_inadmissible(engine, *(wkey(s) for s in routed))
    seen: set[tuple[str, str, str]] = set()
    for s in to_park:
        if (s in seen or s in add) and s is not W4:
            requeue(engine, wkey(s), REQUEUE_GENERIC)  # requeued again, or while in the heap
        seen.add(s)
    for s in tc.get("admissible", []):
        if s is not W4:
            requeue(engine, wkey(s), REQUEUE_IMMEDIATE)
        else:
            assert engine.queues.assigned.get(wkey(s)) is None  # in its backoff: nothing to requeue
    for s, queue_name in tc.get("update", []):
        push(engine, impl_workload(s, queue_name=queue_name))
    for s in tc.get("delete", []):
        delete(engine, wkey(s))
    if tc.get("flush"):
        assert flush(engine) == tc.get("want_requeued", 0)
    assert active(engine) == {wkey(s) for s in tc["want_active"]}
    assert pending_total(engine) == tc["want_pending"]


def test_cluster_queue_impl_update_reclaimable_pods_in_inadmissible():
    """Go: TestClusterQueueImpl / "update reclaimable pods in inadmissible": an inadmissible
    workload of 1 pod updated to 2 pods, 1 of them reclaimable, goes back to the heap."""
    engine = impl_engine(wl("w", ns="ns1", queue="q1", count=1))
    make_inadmissible(engine, key("w", "ns1"))
    push(engine, wl("w", ns="ns1", queue="q1", count=2, reclaimable=1))
    assert active(engine) == {key("w", "ns1")}
    assert pending_total(engine) == 1


def test_queue_inadmissible_workloads_during_scheduling():
    """Go: TestQueueInadmissibleWorkloadsDuringScheduling."""
    engine = engine_of(base(None, wl("workload-1")))
    assert active(engine) == {key("workload-1")}
    head = pop(engine)
    flush(engine)  # an event while the head is being scheduled
    requeue(engine, head.key, REQUEUE_GENERIC)
    assert active(engine) == {key("workload-1")}
    head = pop(engine)
    requeue(engine, head.key, REQUEUE_GENERIC)
    assert active(engine) == set()


# ---------------------------------------------------------------- TestBackoffWaitingTimeExpired


@pytest.mark.parametrize("status, want", [
    ({}, True),
    ({"requeue_state": (10, None)}, True),
    ({"requeue_state": (10, -60), "conditions": [EVICTED_BY_PODS_READY_TIMEOUT]}, True),
    ({"requeue_state": (10, 60), "conditions": [EVICTED_BY_PODS_READY_TIMEOUT]}, False),
], ids=[
    "workload_doesnt_have_requeue_state",
    "workload_doesnt_have_an_evicted_condition_with_reason_pods_ready_timeout",
    "now_already_has_exceeded_requeue_at",
    "now_hasnt_yet_exceeded_requeue_at",
])
def test_backoff_waiting_time_expired(status, want):
    """Go: TestBackoffWaitingTimeExpired / each case (expired: the pushed workload is in the heap;
    not expired: it waits out of it)."""
    engine = engine_of(base())
    push(engine, wl("wl", **status))
    assert (key("wl") in active(engine)) is want
    assert (key("wl") in inadmissible(engine)) is not want


# ---------------------------------------------------------------- TestBestEffortFIFORequeueIfNotPresent

# Kueue's reason -> (the engine's reason for the first requeue, for the second one (Kueue passes
# the same reason with a fresh Info, without LastAssignment), want inadmissible, want sticky).
# PreemptionFailed has no counterpart (the engine's preemptions do not fail): the engine's
# immediate reason stands for it.
BEST_EFFORT_CASES = {
    "failure after nomination": (REQUEUE_IMMEDIATE, REQUEUE_IMMEDIATE, False, False),
    "pending preemption": (REQUEUE_PENDING_PREEMPTION, REQUEUE_PENDING_PREEMPTION, False, True),
    "preemption failed": (REQUEUE_IMMEDIATE, REQUEUE_IMMEDIATE, False, False),
    "namespace doesn't match": (REQUEUE_NAMESPACE_MISMATCH, REQUEUE_NAMESPACE_MISMATCH, True, False),
    "didn't fit and no pending flavors": (REQUEUE_GENERIC, REQUEUE_GENERIC, True, False),
    "nofit": (REQUEUE_NO_FIT, REQUEUE_NO_FIT, True, False),
    "preempt no candidates": (REQUEUE_NO_CANDIDATES, REQUEUE_NO_CANDIDATES, True, False),
}


@pytest.mark.parametrize("case", list(BEST_EFFORT_CASES), ids=[
    "failure_after_nomination", "pending_preemption", "preemption_failed", "namespace_doesnt_match",
    "didnt_fit_and_no_pending_flavors", "nofit", "preempt_no_candidates",
])
def test_best_effort_fifo_requeue_if_not_present(case: str):
    """Go: TestBestEffortFIFORequeueIfNotPresent / each case. "didn't fit but pending flavors" is
    the engine's immediate requeue (flavors left to try). The second requeue of the workload,
    already present, leaves it where it is."""
    first, second, want_inadmissible, want_sticky = BEST_EFFORT_CASES[case]
    engine = engine_of(base("BestEffortFIFO", wl("workload-1")))
    head = pop(engine)
    requeue(engine, head.key, first)
    assert (key("workload-1") in queue(engine).parked) is want_inadmissible
    assert (queue(engine).sticky == key("workload-1")) is want_sticky
    requeue(engine, head.key, second)
    assert (key("workload-1") in queue(engine).parked) is want_inadmissible
    assert (key("workload-1") in active(engine)) is not want_inadmissible


def test_best_effort_fifo_failed_preemption_not_sticky():
    """Go: TestBestEffortFIFOFailedPreemptionNotSticky (PreemptionFailed and FailedAfterNomination:
    the engine's immediate requeue)."""
    engine = engine_of(base("BestEffortFIFO", wl("low-wl", priority=0)))
    popped = pop(engine)
    assert popped.name == "low-wl"
    requeue(engine, popped.key, REQUEUE_PENDING_PREEMPTION)
    push(engine, wl("high-wl", priority=10))
    popped_low = pop(engine)
    assert popped_low is not None and popped_low.name == "low-wl"
    popped_high = pop(engine)
    assert popped_high is not None and popped_high.name == "high-wl"
    requeue(engine, popped_low.key, REQUEUE_IMMEDIATE)  # PreemptionFailed
    requeue(engine, popped_high.key, REQUEUE_IMMEDIATE)  # FailedAfterNomination
    assert pop(engine).name == "high-wl"
    assert pop(engine).name == "low-wl"


def test_fifo_cluster_queue():
    """Go: TestFIFOClusterQueue."""
    engine = engine_of(base("StrictFIFO", wl("now", created=0), wl("before", created=-1), wl("after", created=1)))
    got = pop(engine)
    assert got is not None and got.name == "before"
    push(engine, wl("after", created=-60))
    got = pop(engine)
    assert got is not None and got.name == "after"
    delete(engine, key("now"))
    assert pop(engine) is None


# ---------------------------------------------------------------- TestStrictFIFO

EVICTED_AT_T3 = condition("Evicted", "True", "PodsReadyTimeout", at=2)
CREATION_ORDERING = parse_configuration({
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Creation"}}})


@pytest.mark.parametrize("w1, w2, config, expected", [
    ({"priority": HIGH_PRIORITY}, {"priority": LOW_PRIORITY}, None, "w1"),
    ({}, {}, None, "w1"),
    ({"conditions": [EVICTED_AT_T3]}, {}, None, "w2"),
    ({"conditions": [EVICTED_AT_T3]}, {}, CREATION_ORDERING, "w1"),
    ({"priority": LOW_PRIORITY}, {"priority": HIGH_PRIORITY}, None, "w2"),
], ids=[
    "w1_priority_is_higher_than_w2_priority",
    "w1_priority_equals_w2_priority_and_w1_create_time_is_earlier_than_w2_create_time",
    "w1_priority_equals_w2_priority_and_w1_create_time_is_earlier_but_w1_was_evicted",
    "w1_evicted_but_kueue_is_configured_to_always_use_the_creation_timestamp",
    "p1_priority_is_lower_than_p2_priority_and_w1_create_time_is_earlier_than_w2_create_time",
])
def test_strict_fifo(w1, w2, config, expected):
    """Go: TestStrictFIFO / each case (t1 = NOW, t2 = t1 + 1 s, t3 = t2 + 1 s)."""
    engine = engine_of(base("StrictFIFO"), config=config)
    push(engine, wl("w1", created=0, **w1))
    push(engine, wl("w2", created=1, **w2))
    got = pop(engine)
    assert got is not None and got.name == expected


@pytest.mark.parametrize("kueue_reason, reason, want_inadmissible", [
    ("FailedAfterNomination", REQUEUE_IMMEDIATE, False),
    ("NamespaceMismatch", REQUEUE_NAMESPACE_MISMATCH, True),
    ("Generic", REQUEUE_GENERIC, False),
], ids=["failed_after_nomination", "namespace_mismatch", "generic"])
def test_strict_fifo_requeue_if_not_present(kueue_reason, reason, want_inadmissible):
    """Go: TestStrictFIFORequeueIfNotPresent / each reason."""
    engine = engine_of(base("StrictFIFO", wl("workload-1")))
    head = pop(engine)
    requeue(engine, head.key, reason)
    assert (key("workload-1") in queue(engine).parked) is want_inadmissible
    requeue(engine, head.key, reason)  # already present: stays where it is
    assert (key("workload-1") in queue(engine).parked) is want_inadmissible
    assert (key("workload-1") in active(engine)) is not want_inadmissible


def test_cluster_queue_is_preemptor():
    """Go: TestClusterQueueIsPreemptor."""
    engine = engine_of(base(None, wl("wl", generation=1, created=0), wl("other", created=1)))
    wl_info = engine.state.workload(key("wl"))
    other = engine.state.workload(key("other"))
    assert not engine.queues.is_preemptor(wl_info, CQ)
    head = pop(engine)
    assert head.key == key("wl")
    requeue(engine, head.key, REQUEUE_PENDING_PREEMPTION)
    assert engine.queues.is_preemptor(wl_info, CQ)
    assert not engine.queues.is_preemptor(other, CQ)
    modified = parse_one(wl("wl", generation=2, created=0))
    assert not engine.queues.is_preemptor(modified, CQ)


# ---------------------------------------------------------------- TestFsAdmission


def afs_configuration(weights: dict[str, float] | None = None) -> Configuration:
    section: dict[str, Any] = {"usageHalfLifeTime": "5m", "usageSamplingInterval": "5m"}
    if weights is not None:
        section["resourceWeights"] = weights
    return parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                "admissionFairSharing": section})


FS_CASES = {
    "workloads are ordered by LQ usage, instead of priorities": dict(
        mode="UsageBasedAdmissionFairSharing",
        lqs=[lq("lq-a", weight="1", consumed={"cpu": "2"}), lq("lq-b", weight="1", consumed={"cpu": "1"})],
        config=afs_configuration(),
        wls=[("wla-high", "lq-a", 2), ("wlb-low", "lq-b", 1)], want="wlb-low"),
    "workloads are ordered by LQ usage with respect to resource weights": dict(
        mode="UsageBasedAdmissionFairSharing",
        lqs=[lq("lq-a", weight="1", consumed={"cpu": "1", GPU: "10"}),
             lq("lq-b", weight="1", consumed={"cpu": "1000", GPU: "1"})],
        config=afs_configuration({"cpu": 0, GPU: 1}),
        wls=[("wla-high", "lq-a", 2), ("wlb-low", "lq-b", 1)], want="wlb-low"),
    "workloads are ordered by LQ usage with respect to LQs' fair sharing weights": dict(
        mode="UsageBasedAdmissionFairSharing",
        lqs=[lq("lq-a", weight="1", consumed={"cpu": "10"}), lq("lq-b", weight="2", consumed={"cpu": "6"})],
        config=afs_configuration(),
        wls=[("wla-high", "lq-a", 2), ("wlb-low", "lq-b", 1)], want="wlb-low"),
    "workloads with the same LQ usage are ordered by priority": dict(
        mode="UsageBasedAdmissionFairSharing",
        lqs=[lq("lq-a", weight="1", consumed={"cpu": "10"})],
        config=afs_configuration(),
        wls=[("wla-low", "lq-a", 1), ("wla-high", "lq-a", 2)], want="wla-high"),
    "workloads with NoFairSharing CQ are ordered by priority": dict(
        mode="NoAdmissionFairSharing", lqs=[lq("lq-a")], config=afs_configuration(),
        wls=[("wla-low", "lq-a", 1), ("wla-high", "lq-a", 2)], want="wla-high"),
    "workloads with no FS config are ordered by priority": dict(
        mode="NoAdmissionFairSharing", lqs=[lq("lq-a")], config=None,
        wls=[("wla-low", "lq-a", 1), ("wla-high", "lq-a", 2)], want="wla-high"),
}


@pytest.mark.parametrize("case", list(FS_CASES), ids=[
    "workloads_are_ordered_by_lq_usage_instead_of_priorities",
    "workloads_are_ordered_by_lq_usage_with_respect_to_resource_weights",
    "workloads_are_ordered_by_lq_usage_with_respect_to_lqs_fair_sharing_weights",
    "workloads_with_the_same_lq_usage_are_ordered_by_priority",
    "workloads_with_no_fair_sharing_cq_are_ordered_by_priority",
    "workloads_with_no_fs_config_are_ordered_by_priority",
])
def test_fs_admission(case: str):
    """Go: TestFsAdmission / each case (LocalQueues' consumed resources in their status; names in
    lower case, as Kubernetes requires: lqA -> lq-a, wlA-high -> wla-high, ...)."""
    tc = FS_CASES[case]
    objects = [resource_flavor(RF, topology_name=None), cluster_queue(admission_mode=tc["mode"]), *tc["lqs"],
               *(wl(name, queue=q, priority=p) for name, q, p in tc["wls"])]
    engine = engine_of(objects, config=tc["config"])
    got = pop(engine)
    assert got is not None and got.name == tc["want"]


# ---------------------------------------------------------------- scheduling equivalence hashing


def test_record_inadmissible_hash_bulk_moves_matching_workloads():
    """Go: TestRecordInadmissibleHash / "bulk-moves matching workloads": a head of the gpu class
    requeued as NoFit parks its class (3 workloads), the cpu class stays in the heap."""
    objects = base("BestEffortFIFO", *(wl(f"gpu-{i}", cpu=None, gpu="1", created=i) for i in (1, 2, 3)),
                   *(wl(f"cpu-{i}", created=10 + i) for i in (1, 2)))
    engine = engine_of(objects, SchedulingEquivalenceHashing=True)
    head = pop(engine)
    assert head.name == "gpu-1"
    _, _, moved = engine.queues.requeue(head, CQ, REQUEUE_NO_FIT)
    assert 1 + moved == 3
    assert len(active(engine)) == 2
    assert len(inadmissible(engine)) == 3


@pytest.mark.parametrize("push_gpu, want_active, want_inadmissible", [
    (True, 0, 1),
    (False, 1, 0),
], ids=["workload_with_blocked_hash_goes_to_inadmissible", "workload_with_non_blocked_hash_goes_to_heap"])
def test_push_or_update_respects_inadmissible_hashes(push_gpu, want_active, want_inadmissible):
    """Go: TestPushOrUpdateRespectsInadmissibleHashes / each case. The blocked hash is that of a
    representative parked with NoFit (counted among the parked workloads besides the pushed one)."""
    engine = engine_of(base("BestEffortFIFO", wl("rep", cpu=None, gpu="1")), SchedulingEquivalenceHashing=True)
    make_inadmissible(engine, key("rep"), reason=REQUEUE_NO_FIT)
    push(engine, wl("wl", cpu=None, gpu="1") if push_gpu else wl("wl", cpu="1"))
    assert len(active(engine)) == want_active
    assert len(inadmissible(engine)) == want_inadmissible + 1
    assert (key("wl") in queue(engine).parked) is bool(want_inadmissible)


def parked_and_active_classes(engine: Engine) -> tuple[int, int]:
    classes = queue(engine).classes.values()
    return sum(1 for c in classes if c.parked is None), sum(1 for c in classes if c.parked is not None)


def test_queue_inadmissible_workloads_clears_hashes():
    """Go: TestQueueInadmissibleWorkloadsClearsHashes (PendingSchedulingHashes: the classes in the
    heap and parked; the hash cleared: an equivalent workload pushed afterwards goes to the heap)."""
    engine = engine_of(base("BestEffortFIFO", wl("wl")), SchedulingEquivalenceHashing=True)
    make_inadmissible(engine, key("wl"), reason=REQUEUE_NO_FIT)
    assert parked_and_active_classes(engine) == (0, 1)
    flush(engine)
    assert (len(active(engine)), len(inadmissible(engine))) == (1, 0)
    assert parked_and_active_classes(engine) == (1, 0)
    push(engine, wl("equivalent"))
    assert key("equivalent") in active(engine)


@pytest.mark.parametrize("reason, want_hash", [
    (REQUEUE_NO_FIT, True),
    (REQUEUE_NO_CANDIDATES, True),
    (REQUEUE_NAMESPACE_MISMATCH, False),
    (REQUEUE_PREEMPTION_GATED, False),
    (REQUEUE_GENERIC, False),
], ids=[
    "nofit_triggers_hash",
    "preempt_no_candidates_triggers_hash",
    "namespace_mismatch_does_not_trigger_hash",
    "preemption_gated_does_not_trigger_hash",
    "generic_does_not_trigger_hash",
])
def test_requeue_hash_trigger_by_reason(reason, want_hash):
    """Go: TestRequeueHashTriggerByReason / each case (the hash recorded: an equivalent workload
    pushed afterwards is parked with it)."""
    engine = engine_of(base("BestEffortFIFO", wl("workload-1")), SchedulingEquivalenceHashing=True)
    head = pop(engine)
    requeue(engine, head.key, reason)
    push(engine, wl("workload-2"))
    assert (key("workload-2") in queue(engine).parked) is want_hash


def test_a_namespace_mismatch_does_not_park_the_equivalent_workloads_of_other_namespaces():
    """What the per-reason parking means for a pass: `ns-a/first`, in a namespace the
    ClusterQueue's selector refuses, is parked alone; `ns-b/second`, the same shape in a
    namespace it accepts, is admitted in the same pass instead of being parked with it."""
    cq_obj = ks.cluster_queue("cq", ks.resource_group(ks.flavor_quotas("default", cpu="10")), namespace_dep="eng")
    objects = [ks.namespace("ns-a", {"dep": "sales"}), ks.namespace("ns-b", {"dep": "eng"}), ks.flavor("default"),
               cq_obj, ks.local_queue("lq", "ns-a", "cq"), ks.local_queue("lq", "ns-b", "cq"),
               ks.workload("first", "ns-a", queue="lq", requests={"cpu": "1"}, created=0),
               ks.workload("second", "ns-b", queue="lq", requests={"cpu": "1"}, created=1)]
    result = run(objects)
    status = {w.key: w.status for w in result.workloads}
    assert status == {"ns-a/first": "Inadmissible", "ns-b/second": "Admitted"}
