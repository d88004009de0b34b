"""Kueue's queue manager unit tests (`pkg/cache/queue/manager_test.go`, API v1beta2),
transcribed onto the engine's queue manager (`scheduler/queues.py`).

Mapping of Kueue's calls:

* AddClusterQueue / AddLocalQueue / AddOrUpdateCohort / AddOrUpdateWorkload / UpdateWorkload
  and their deletions: the object upserted into (deleted from) the engine, then `Engine.sync`.
* `Dump` / `DumpInadmissible`: the workloads of each ClusterQueue's heap not parked / parked.
* `popNamesFromCQ`: `ClusterQueueQueue.pop` until empty.
* `Heads`: `QueueManager.heads()`.
* `RequeueWorkload(reason)`: a head popped by `heads()` handed back through
  `QueueManager.requeue` with the engine's reason (Generic -> REQUEUE_GENERIC,
  FailedAfterNomination -> REQUEUE_IMMEDIATE). Kueue's tests bump `popCycle` by hand so that a
  Generic requeue parks the workload; popping the head does the same in the engine.
* `QueueInadmissibleWorkloads`: `QueueManager.requeue_inadmissible`.
* A LocalQueue's items: the pending workloads the manager holds (in a heap, or as an orphan when
  its ClusterQueue is missing) under that LocalQueue.
* `PendingTotal`: the length of the ClusterQueue's queue; `PendingWorkloadsInfo`: the order
  `ClusterQueueQueue.position` gives.
* Errors of AddOrUpdateWorkload: the orphan message the engine keeps (LocalQueue missing,
  ClusterQueue missing), or nothing held at all (errWorkloadIsInadmissible).
* `QueueSecondPassIfNeeded` / `secondPassQueue.takeAllReady`: the second-pass queue the engine
  fills on `sync` and `QueueManager.second_pass_ready`.

Kueue's namespace "" is the engine's "default".
"""

from __future__ import annotations

from datetime import timedelta

from scheduler.engine import Engine
from scheduler.queues import REQUEUE_GENERIC, REQUEUE_IMMEDIATE

from .factories import (
    HOSTNAME,
    NOW,
    V1BETA2,
    admission_check,
    admitted,
    cluster_queue,
    gates,
    local_queue,
    node,
    parse,
    parse_one,
    queue_with_policy,
    resource_flavor,
    topology,
    workload,
)

NS = "default"
FLAVOR_NAME = "default-flavor"

# ---------------------------------------------------------------- builders


def flavor() -> dict:
    return resource_flavor(FLAVOR_NAME, topology_name=None)


def cq(name: str, *, cohort: str | None = None, strategy: str | None = None, stop: str | None = None) -> dict:
    obj = queue_with_policy(name, cpu=100, cohort=cohort, strategy=strategy, flavor=FLAVOR_NAME)
    if stop is not None:
        obj["spec"]["stopPolicy"] = stop
    return obj


def lq(name: str, cluster_queue_name: str, namespace: str = NS) -> dict:
    return local_queue(name, namespace=namespace, cluster_queue_name=cluster_queue_name)


def cohort(name: str, parent: str | None = None) -> dict:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def wl(name: str, queue: str, *, namespace: str = NS, created: float = 0, **kwargs) -> dict:
    return workload(name, queue=queue, namespace=namespace, created=created, cpu="1", **kwargs)


def reserved(obj: dict, cluster_queue_name: str) -> dict:
    """`obj` holding a quota reservation (Kueue's ReserveQuotaAt)."""
    out = admitted(obj, assignments={}, cluster_queue_name=cluster_queue_name, flavor=FLAVOR_NAME)
    out["status"]["conditions"] = [c for c in out["status"]["conditions"] if c["type"] == "QuotaReserved"]
    return out


def inactive(obj: dict) -> dict:
    return {**obj, "spec": {**obj["spec"], "active": False}}


def finished(obj: dict) -> dict:
    return {**obj, "status": {"conditions": [
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"}]}}


def with_admission_only(obj: dict, cluster_queue_name: str = "cq") -> dict:
    """Kueue's `.Admission(&kueue.Admission{})`: status.admission written, no condition."""
    return {**obj, "status": {"admission": {"clusterQueue": cluster_queue_name, "podSetAssignments": []}}}


# ---------------------------------------------------------------- the engine


def engine_of(objects: list[dict], **gate_values) -> Engine:
    return Engine.from_parsed(parse([flavor(), *objects]), gates(**gate_values))


def apply(engine: Engine, *objects: dict) -> None:
    for obj in objects:
        engine.upsert(parse_one(obj))
    engine.sync(NOW)


def key(name: str, namespace: str = NS) -> str:
    return f"{namespace}/{name}"


def dump(engine: Engine) -> dict[str, list[str]] | None:
    """Kueue's Dump: ClusterQueue -> its active (heap) workloads; None when there are none."""
    out = {name: sorted(q.active) for name, q in engine.queues.queues.items() if q.active}
    return out or None


def dump_inadmissible(engine: Engine) -> dict[str, list[str]] | None:
    out = {name: sorted(q.parked) for name, q in engine.queues.queues.items() if q.parked}
    return out or None


def pop_names(engine: Engine, cq_name: str) -> list[str]:
    q = engine.queues.queues[cq_name]
    names = []
    while (k := q.pop()) is not None:
        names.append(k)
    return names


def pop_all(engine: Engine) -> dict[str, list[str]]:
    return {name: pop_names(engine, name) for name in list(engine.queues.queues)}


def lq_members(engine: Engine, lq_key: str) -> set[str]:
    """The pending workloads the manager holds under the LocalQueue (Kueue's LocalQueue items);
    empty when the LocalQueue does not exist."""
    if lq_key not in engine.state.local_queues:
        return set()
    qm = engine.queues
    held = {*qm.assigned, *qm.orphans, *qm.backoff, *qm.kept_off}
    return {k for k in held if (w := engine.state.workload(k)) is not None and w.local_queue_key == lq_key}


def head_names(engine: Engine) -> set[str]:
    return {w.name for w, _cq in engine.queues.heads()}


def requeue(engine: Engine, name: str, cq_name: str, reason: str, namespace: str = NS) -> None:
    """A popped head handed back to its ClusterQueue."""
    w = engine.state.workload(key(name, namespace))
    engine.queues.requeue(w, cq_name, reason)


# ---------------------------------------------------------------- TestAddLocalQueueOrphans


def test_add_local_queue_orphans():
    """TestAddLocalQueueOrphans: workloads created before their LocalQueue are in it once it is
    added (only the pending ones of its namespace)."""
    engine = engine_of([
        wl("a", "foo", namespace="earth"),
        wl("b", "bar", namespace="earth"),
        wl("c", "foo", namespace="earth"),
        reserved(wl("d", "foo", namespace="earth"), "cq"),
        inactive(wl("e", "foo", namespace="earth")),
        finished(wl("f", "foo", namespace="earth")),
        wl("a", "foo", namespace="moon"),
    ])
    apply(engine, lq("foo", "cq", namespace="earth"))
    assert lq_members(engine, "earth/foo") == {"earth/a", "earth/c"}


# ---------------------------------------------------------------- TestAddClusterQueueOrphans


def test_add_cluster_queue_orphans():
    """TestAddClusterQueueOrphans: a ClusterQueue recreated adopts the existing workloads."""
    engine = engine_of([
        wl("a", "foo", created=1),
        wl("b", "bar", created=0),
        reserved(wl("c", "foo"), "cq"),
        wl("d", "baz"),
        lq("foo", "cq"),
        lq("bar", "cq"),
    ])
    apply(engine, cq("cq"))
    assert dump(engine) == {"cq": [key("a"), key("b")]}

    engine.delete("ClusterQueue", "cq")
    engine.sync(NOW)
    assert dump(engine) is None

    apply(engine, cq("cq"))
    assert pop_names(engine, "cq") == [key("b"), key("a")]


# ---------------------------------------------------------------- TestUpdateClusterQueue


def test_update_cluster_queue():
    """TestUpdateClusterQueue: a ClusterQueue moved to another cohort makes the parked workloads
    active again."""
    engine = engine_of([
        cq("cq1", cohort="alpha"), cq("cq2", cohort="beta"),
        lq("foo", "cq1"), lq("bar", "cq2"),
        wl("a", "foo", created=1), wl("b", "bar", created=0),
    ])
    assert head_names(engine) == {"a", "b"}
    requeue(engine, "a", "cq1", REQUEUE_GENERIC)
    requeue(engine, "b", "cq2", REQUEUE_GENERIC)
    assert dump_inadmissible(engine) == {"cq1": [key("a")], "cq2": [key("b")]}
    assert dump(engine) is None

    apply(engine, cq("cq2", cohort="alpha"))
    alpha = engine.state.quota.cohorts["alpha"]
    assert {child.name for child in alpha.children} == {"cq1", "cq2"}
    assert engine.queues.cohort_tree_queues("cq1") == {"cq1", "cq2"}

    assert dump_inadmissible(engine) is None
    assert dump(engine) == {"cq1": [key("a")], "cq2": [key("b")]}


def cycle_setup() -> Engine:
    """cohort-a -> cohort-b -> cohort-c -> cohort-a, and cq1 in cohort-a with workload a parked."""
    engine = engine_of([
        cohort("cohort-a", "cohort-b"), cohort("cohort-b", "cohort-c"), cohort("cohort-c", "cohort-a"),
        cq("cq1", cohort="cohort-a"), lq("foo", "cq1"), wl("a", "foo", created=0),
    ])
    assert head_names(engine) == {"a"}
    requeue(engine, "a", "cq1", REQUEUE_GENERIC)
    return engine


def test_requeue_workloads_cohort_cycle():
    """TestRequeueWorkloadsCohortCycle: requeueing the workloads of a cohort with a cycle moves
    nothing, and the workload stays assigned to its LocalQueue."""
    engine = cycle_setup()
    engine.queues.requeue_inadmissible(["cq1"])
    assert dump(engine) is None
    assert dump_inadmissible(engine) == {"cq1": [key("a")]}


def test_queue_inadmissible_workloads_cohort_cycle():
    """TestQueueInadmissibleWorkloads / "cohort cycle": the parked workload stays parked, whether
    its ClusterQueue or every one is named; breaking the cycle (a Cohort update) requeues it."""
    engine = cycle_setup()
    engine.queues.requeue_inadmissible()
    assert dump(engine) is None
    assert dump_inadmissible(engine) == {"cq1": [key("a")]}

    apply(engine, cohort("cohort-c"))
    assert dump_inadmissible(engine) is None
    assert dump(engine) == {"cq1": [key("a")]}


# ---------------------------------------------------------------- TestQueueInadmissibleWorkloads


def test_queue_inadmissible_workloads_deduplication_with_shared_root():
    """TestQueueInadmissibleWorkloads / "deduplication with shared root": the parked workloads
    of both ClusterQueues of one cohort tree become active."""
    engine = engine_of([
        cohort("root"), cohort("child1", "root"), cohort("child2", "root"),
        cq("cq1", cohort="child1"), cq("cq2", cohort="child2"),
        lq("foo", "cq1"), lq("bar", "cq2"),
        wl("a", "foo", created=0), wl("b", "bar", created=1),
    ])
    assert head_names(engine) == {"a", "b"}
    requeue(engine, "a", "cq1", REQUEUE_GENERIC)
    requeue(engine, "b", "cq2", REQUEUE_GENERIC)
    assert dump_inadmissible(engine) == {"cq1": [key("a")], "cq2": [key("b")]}
    engine.queues.requeue_inadmissible(["cq1", "cq2"])
    assert dump_inadmissible(engine) is None
    assert dump(engine) == {"cq1": [key("a")], "cq2": [key("b")]}


# ---------------------------------------------------------------- TestUpdateLocalQueue


def test_update_local_queue():
    """TestUpdateLocalQueue: a LocalQueue pointed at another ClusterQueue takes its workloads there."""
    engine = engine_of([cq("cq1"), cq("cq2"), lq("foo", "cq1"), lq("bar", "cq2"),
                        wl("a", "foo", created=1), wl("b", "bar", created=0)])
    apply(engine, lq("foo", "cq2"))
    assert pop_all(engine) == {"cq1": [], "cq2": [key("b"), key("a")]}


# ---------------------------------------------------------------- TestDeleteLocalQueue


def test_delete_local_queue():
    """TestDeleteLocalQueue: a deleted LocalQueue's workloads leave the ClusterQueue."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "foo")])
    assert dump(engine) == {"cq": [key("a")]}
    engine.delete("LocalQueue", key("foo"))
    engine.sync(NOW)
    assert dump(engine) is None


# ---------------------------------------------------------------- TestAddWorkload


def add_workload_engine() -> Engine:
    # LocalQueue mars/bar names no existing ClusterQueue (Kueue's has none at all)
    return engine_of([cq("cq"), lq("foo", "cq", namespace="earth"), lq("bar", "missing-cq", namespace="mars")])


def assert_not_held(engine: Engine, k: str) -> None:
    qm = engine.queues
    assert k not in qm.assigned and k not in qm.orphans and k not in qm.backoff
    assert all(k not in q.class_of for q in qm.queues.values())


def test_add_workload_finished():
    """TestAddWorkload / "finished": errWorkloadIsInadmissible, not assigned."""
    engine = add_workload_engine()
    apply(engine, finished(wl("finished", "foo", namespace="earth")))
    assert_not_held(engine, "earth/finished")
    assert lq_members(engine, "earth/foo") == set()


def test_add_workload_inactive():
    """TestAddWorkload / "inactive": errWorkloadIsInadmissible, not assigned."""
    engine = add_workload_engine()
    apply(engine, inactive(wl("inactive", "foo", namespace="earth")))
    assert_not_held(engine, "earth/inactive")
    assert lq_members(engine, "earth/foo") == set()


def test_add_workload_quota_already_reserved():
    """TestAddWorkload / "quota-already-reserved": errWorkloadIsInadmissible, not assigned."""
    engine = add_workload_engine()
    apply(engine, reserved(wl("quota-already-reserved", "foo", namespace="earth"), "cq"))
    assert_not_held(engine, "earth/quota-already-reserved")
    assert lq_members(engine, "earth/foo") == set()


def test_add_workload_existing_queue():
    """TestAddWorkload / "existing-queue": no error, assigned to earth/foo."""
    engine = add_workload_engine()
    apply(engine, wl("existing-queue", "foo", namespace="earth"))
    assert engine.queues.assigned.get("earth/existing-queue") == "cq"
    assert dump(engine) == {"cq": ["earth/existing-queue"]}
    assert lq_members(engine, "earth/foo") == {"earth/existing-queue"}


def assert_local_queue_missing(engine: Engine, k: str, queue_name: str) -> None:
    """Kueue's ErrLocalQueueDoesNotExistOrInactive, not assigned: in no heap, no LocalQueue holds it."""
    orphan = engine.queues.orphans.get(k)
    assert orphan is not None and orphan.message == f"LocalQueue {queue_name} doesn't exist"
    assert k not in engine.queues.assigned
    assert dump(engine) is None


def test_add_workload_non_existing_queue():
    """TestAddWorkload / "non-existing-queue": ErrLocalQueueDoesNotExistOrInactive, not assigned."""
    engine = add_workload_engine()
    apply(engine, wl("non-existing-queue", "baz", namespace="earth"))
    assert_local_queue_missing(engine, "earth/non-existing-queue", "baz")


def test_add_workload_non_existing_cluster_queue():
    """TestAddWorkload / "non-existing-cluster-queue": ErrClusterQueueDoesNotExist, assigned to
    mars/bar (the LocalQueue holds it)."""
    engine = add_workload_engine()
    apply(engine, wl("non-existing-cluster-queue", "bar", namespace="mars"))
    orphan = engine.queues.orphans.get("mars/non-existing-cluster-queue")
    assert orphan is not None and orphan.message == "ClusterQueue missing-cq doesn't exist"
    assert dump(engine) is None
    assert lq_members(engine, "mars/bar") == {"mars/non-existing-cluster-queue"}


def test_add_workload_wrong_namespace():
    """TestAddWorkload / "wrong-namespace": ErrLocalQueueDoesNotExistOrInactive, not assigned."""
    engine = add_workload_engine()
    apply(engine, wl("wrong-namespace", "foo", namespace="mars"))
    assert_local_queue_missing(engine, "mars/wrong-namespace", "foo")
    assert lq_members(engine, "earth/foo") == set()


def test_add_workload_non_existing_local_queue():
    """TestAddWorkload / "non-existing-local-queue": ErrLocalQueueDoesNotExistOrInactive."""
    engine = add_workload_engine()
    apply(engine, wl("non-existing-local-queue", "baz", namespace="earth"))
    assert_local_queue_missing(engine, "earth/non-existing-local-queue", "baz")


# ---------------------------------------------------------------- TestDeleteWorkload / TestDeleteAndForgetWorkload


def two_workloads_engine() -> Engine:
    engine = engine_of([cq("cq"), lq("foo", "cq", namespace="earth"), lq("bar", "missing-cq", namespace="mars")])
    apply(engine, wl("wl1", "foo", namespace="earth"), wl("wl2", "foo", namespace="earth"))
    return engine


def test_delete_workload_workload_deleted_but_not_forgotten():
    """TestDeleteWorkload / "workload deleted but not forgotten": Kueue's DeleteWorkload (the
    workload leaves the queues without being deleted: here it finishes). The LocalQueue holds
    wl2 only, the ClusterQueue one pending workload."""
    engine = two_workloads_engine()
    apply(engine, finished(wl("wl1", "foo", namespace="earth")))
    assert lq_members(engine, "earth/foo") == {"earth/wl2"}
    assert len(engine.queues.queues["cq"]) == 1


def test_delete_and_forget_workload_workload_fully_deleted_and_forgotten():
    """TestDeleteAndForgetWorkload / "workload fully deleted and forgotten": the workload
    deleted; the LocalQueue holds wl2 only, the ClusterQueue one pending workload."""
    engine = two_workloads_engine()
    engine.delete("Workload", "earth/wl1")
    engine.sync(NOW)
    assert lq_members(engine, "earth/foo") == {"earth/wl2"}
    assert len(engine.queues.queues["cq"]) == 1


# ---------------------------------------------------------------- TestStatus


def status_engine() -> Engine:
    # no ClusterQueue: foo-cq and bar-cq do not exist
    return engine_of([lq("foo", "foo-cq"), lq("bar", "bar-cq"),
                      wl("a", "foo", created=3600), wl("b", "bar"), wl("c", "foo"), wl("d", "foo")])


def test_status_foo():
    """TestStatus / "foo": PendingWorkloads = 3 (its ClusterQueue does not exist)."""
    assert len(lq_members(status_engine(), key("foo"))) == 3


def test_status_bar():
    """TestStatus / "bar": PendingWorkloads = 1."""
    assert len(lq_members(status_engine(), key("bar"))) == 1


def test_status_fake():
    """TestStatus / "fake": a LocalQueue that does not exist: 0 (and an error)."""
    engine = status_engine()
    assert key("fake") not in engine.state.local_queues
    assert len(lq_members(engine, key("fake"))) == 0


# ---------------------------------------------------------------- TestRequeueWorkloadStrictFIFO


def requeue_engine() -> Engine:
    # LocalQueue bar names no existing ClusterQueue
    return engine_of([cq("cq"), lq("foo", "cq"), lq("bar", "missing-cq")])


def held_count(engine: Engine, k: str) -> int:
    """How many times the ClusterQueues hold the workload (heap or parked)."""
    return sum(1 for q in engine.queues.queues.values() if k in q.class_of)


def test_requeue_workload_strict_fifo_existing_queue_and_obj():
    """TestRequeueWorkloadStrictFIFO / "existing-queue-and-obj": requeued."""
    engine = requeue_engine()
    apply(engine, wl("existing-queue-and-obj", "foo"))
    assert head_names(engine) == {"existing-queue-and-obj"}
    assert held_count(engine, key("existing-queue-and-obj")) == 0
    requeue(engine, "existing-queue-and-obj", "cq", REQUEUE_GENERIC)
    assert held_count(engine, key("existing-queue-and-obj")) == 1


def test_requeue_workload_strict_fifo_non_existing_queue():
    """TestRequeueWorkloadStrictFIFO / "non-existing-queue": not requeued."""
    engine = requeue_engine()
    apply(engine, wl("non-existing-queue", "baz"))
    assert head_names(engine) == set()
    requeue(engine, "non-existing-queue", "cq", REQUEUE_GENERIC)
    assert held_count(engine, key("non-existing-queue")) == 0


def test_requeue_workload_strict_fifo_non_existing_cluster_queue():
    """TestRequeueWorkloadStrictFIFO / "non-existing-cluster-queue": not requeued."""
    engine = requeue_engine()
    apply(engine, wl("non-existing-cluster-queue", "bar"))
    assert head_names(engine) == set()
    requeue(engine, "non-existing-cluster-queue", "cq", REQUEUE_GENERIC)
    requeue(engine, "non-existing-cluster-queue", "missing-cq", REQUEUE_GENERIC)
    assert held_count(engine, key("non-existing-cluster-queue")) == 0


def test_requeue_workload_strict_fifo_not_in_client():
    """TestRequeueWorkloadStrictFIFO / "not-in-client": a workload gone from the cache (deleted
    after it was popped) is not requeued."""
    engine = requeue_engine()
    apply(engine, wl("not-in-client", "foo"))
    (head,) = [w for w, _cq in engine.queues.heads()]
    engine.delete("Workload", head.key)
    engine.sync(NOW)
    engine.queues.requeue(head, "cq", REQUEUE_GENERIC)
    assert held_count(engine, head.key) == 0
    assert head_names(engine) == set()


def test_requeue_workload_strict_fifo_already_in_queue():
    """TestRequeueWorkloadStrictFIFO / "already-in-queue": not requeued (held once)."""
    engine = requeue_engine()
    apply(engine, wl("already-in-queue", "foo"))
    assert held_count(engine, key("already-in-queue")) == 1
    requeue(engine, "already-in-queue", "cq", REQUEUE_GENERIC)
    assert held_count(engine, key("already-in-queue")) == 1
    assert len(engine.queues.queues["cq"]) == 1


def test_requeue_workload_strict_fifo_already_admitted():
    """TestRequeueWorkloadStrictFIFO / "already-admitted": not requeued (what the queue held
    before is what it holds after)."""
    engine = requeue_engine()
    apply(engine, with_admission_only(wl("already-admitted", "foo")))
    before = held_count(engine, key("already-admitted"))
    assert before <= 1
    requeue(engine, "already-admitted", "cq", REQUEUE_GENERIC)
    assert held_count(engine, key("already-admitted")) == before
    assert len(engine.queues.queues["cq"]) == before


# ---------------------------------------------------------------- TestUpdateWorkload


def test_update_workload_in_queue():
    """TestUpdateWorkload / "in queue": a newer creation time moves the workload back."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "foo", created=0), wl("b", "foo", created=1)])
    apply(engine, wl("a", "foo", created=60))
    assert lq_members(engine, key("foo")) == {key("a"), key("b")}
    assert pop_all(engine) == {"cq": [key("b"), key("a")]}


def test_update_workload_between_queues():
    """TestUpdateWorkload / "between queues": to another LocalQueue of the same ClusterQueue."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), lq("bar", "cq"), wl("a", "foo")])
    apply(engine, wl("a", "bar"))
    assert lq_members(engine, key("foo")) == set()
    assert lq_members(engine, key("bar")) == {key("a")}
    assert pop_all(engine) == {"cq": [key("a")]}


def test_update_workload_between_cluster_queues():
    """TestUpdateWorkload / "between cluster queues"."""
    engine = engine_of([cq("cq1"), cq("cq2"), lq("foo", "cq1"), lq("bar", "cq2"), wl("a", "foo")])
    apply(engine, wl("a", "bar"))
    assert lq_members(engine, key("foo")) == set()
    assert lq_members(engine, key("bar")) == {key("a")}
    assert engine.queues.assigned.get(key("a")) == "cq2"
    assert pop_all(engine) == {"cq1": [], "cq2": [key("a")]}


def test_update_workload_to_non_existent_queue():
    """TestUpdateWorkload / "to non existent queue": ErrLocalQueueDoesNotExistOrInactive; no
    queue holds it."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "foo")])
    apply(engine, wl("a", "bar"))
    orphan = engine.queues.orphans.get(key("a"))
    assert orphan is not None and orphan.message == "LocalQueue bar doesn't exist"
    assert key("a") not in engine.queues.assigned
    assert lq_members(engine, key("foo")) == set()
    assert pop_all(engine) == {"cq": []}


def test_update_workload_from_non_existing_queue():
    """TestUpdateWorkload / "from non existing queue"."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "bar")])
    assert key("a") not in engine.queues.assigned
    apply(engine, wl("a", "foo"))
    assert lq_members(engine, key("foo")) == {key("a")}
    assert engine.queues.assigned.get(key("a")) == "cq"
    assert pop_all(engine) == {"cq": [key("a")]}


# ---------------------------------------------------------------- TestHeads


def heads_engine() -> Engine:
    # pending-baz-cq is inactive (Kueue's fakeStatusChecker): stopped here
    return engine_of([cq("active-foo-cq"), cq("active-bar-cq"), cq("pending-baz-cq", stop="Hold"),
                      lq("foo", "active-foo-cq"), lq("bar", "active-bar-cq"), lq("baz", "pending-baz-cq")])


def test_heads_empty_cluster_queues():
    """TestHeads / "empty clusterQueues"."""
    assert head_names(heads_engine()) == set()


def test_heads_active_cluster_queues():
    """TestHeads / "active clusterQueues"."""
    engine = heads_engine()
    apply(engine, wl("a", "foo"), wl("b", "bar"))
    assert head_names(engine) == {"a", "b"}


def test_heads_active_cluster_queues_with_multiple_workloads():
    """TestHeads / "active clusterQueues with multiple workloads"."""
    engine = heads_engine()
    apply(engine, wl("a1", "foo", created=0), wl("a2", "foo", created=3600), wl("b", "bar"))
    assert head_names(engine) == {"a1", "b"}


def test_heads_inactive_cluster_queues():
    """TestHeads / "inactive clusterQueues": no head from an inactive ClusterQueue."""
    engine = heads_engine()
    apply(engine, wl("a", "foo"), wl("b", "bar"), wl("c", "baz", created=3600))
    assert head_names(engine) == {"a", "b"}
    assert lq_members(engine, key("baz")) == {key("c")}


# ---------------------------------------------------------------- TestHeadsAsync (without the waiting)


def heads_of(engine: Engine) -> list[tuple[str, str, dict]]:
    return [(w.key, cq_.name, dict(w.annotations)) for w, cq_ in engine.queues.heads()]


def test_heads_async_add_cluster_queue():
    """TestHeadsAsync / "AddClusterQueue": the workload added after its queues is the head."""
    engine = engine_of([])
    apply(engine, cq("foo-cq"), lq("foo", "foo-cq"))
    apply(engine, wl("a", "foo"))
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]


def test_heads_async_add_local_queue():
    """TestHeadsAsync / "AddLocalQueue": a workload that came before its LocalQueue is the head
    once the LocalQueue is added."""
    engine = engine_of([wl("a", "foo")])
    apply(engine, cq("foo-cq"))
    apply(engine, lq("foo", "foo-cq"))
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]


def test_heads_async_add_workload():
    """TestHeadsAsync / "AddWorkload"."""
    engine = engine_of([cq("foo-cq"), lq("foo", "foo-cq")])
    apply(engine, wl("a", "foo"))
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]


def test_heads_async_update_workload():
    """TestHeadsAsync / "UpdateWorkload": an update of a workload the manager did not have adds it."""
    engine = engine_of([cq("foo-cq"), lq("foo", "foo-cq")])
    apply(engine, wl("a", "foo"))
    apply(engine, wl("a", "foo"))
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]


def test_heads_async_requeue_workload():
    """TestHeadsAsync / "RequeueWorkload": a head popped and requeued (FailedAfterNomination) is
    the head again."""
    engine = engine_of([wl("a", "foo"), cq("foo-cq"), lq("foo", "foo-cq")])
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]
    requeue(engine, "a", "foo-cq", REQUEUE_IMMEDIATE)
    assert heads_of(engine) == [(key("a"), "foo-cq", {})]


def test_heads_async_requeue_with_out_of_date_workload():
    """TestHeadsAsync / "RequeueWithOutOfDateWorkload": the head is the workload as it is now,
    not the out-of-date copy handed back."""
    engine = engine_of([wl("a", "foo"), cq("foo-cq"), lq("foo", "foo-cq")])
    (old, _), = engine.queues.heads()
    engine.upsert(parse_one(wl("a", "foo", annotations={"foo": "bar"})))
    engine.queues.requeue(old, "foo-cq", REQUEUE_IMMEDIATE)
    engine.sync(NOW)
    assert heads_of(engine) == [(key("a"), "foo-cq", {"foo": "bar"})]


def test_heads_async_requeue_with_queue_changed_workload():
    """TestHeadsAsync / "RequeueWithQueueChangedWorkload": the workload moved to LocalQueue bar
    meanwhile is the head of bar-cq."""
    engine = engine_of([wl("a", "foo"), cq("foo-cq"), cq("bar-cq"), lq("foo", "foo-cq"), lq("bar", "bar-cq")])
    (old, _), = engine.queues.heads()
    engine.upsert(parse_one(wl("a", "bar")))
    engine.queues.requeue(old, "foo-cq", REQUEUE_IMMEDIATE)
    engine.sync(NOW)
    heads = engine.queues.heads()
    assert [(w.key, c.name, w.queue_name) for w, c in heads] == [(key("a"), "bar-cq", "bar")]


# ---------------------------------------------------------------- TestGetPendingWorkloadsInfo


def test_get_pending_workloads_info_invalid_cluster_queue_name():
    """TestGetPendingWorkloadsInfo / "Invalid ClusterQueue name": nothing."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "foo", created=0), wl("b", "foo", created=1)])
    assert engine.queues.queues.get("invalid") is None


def test_get_pending_workloads_info_cluster_queue_with_2_pending_workloads():
    """TestGetPendingWorkloadsInfo / "ClusterQueue with 2 pending workloads": a then b."""
    engine = engine_of([cq("cq"), lq("foo", "cq"), wl("a", "foo", created=0), wl("b", "foo", created=1)])
    q = engine.queues.queues["cq"]
    assert len(q) == 2
    assert q.position(key("a")) == (0, key("a"))
    assert q.position(key("b")) == (1, key("a"))


# ---------------------------------------------------------------- TestQueueSecondPassIfNeeded

TAS_FLAVOR = "tas-default"


def second_pass_engine() -> Engine:
    engine = Engine(gates())
    apply(engine, topology(levels=(HOSTNAME,)), resource_flavor(TAS_FLAVOR), admission_check("prov-check"),
          cluster_queue("tas-main", flavors=(TAS_FLAVOR,), quota={"cpu": "10"}, admission_checks=("prov-check",)),
          local_queue("tas-main", cluster_queue_name="tas-main"), node("x1", cpu="4"))
    return engine


def base_workload(name: str = "foo") -> dict:
    return workload(name, queue="tas-main", pod_sets=[{
        "name": "one", "count": 1, "topologyRequest": {"required": HOSTNAME},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                                              "resources": {"requests": {"cpu": "1"}}}]}}}])


def needing_second_pass(name: str = "foo") -> dict:
    obj = base_workload(name)
    obj["status"] = {
        "admission": {"clusterQueue": "tas-main", "podSetAssignments": [{
            "name": "one", "flavors": {"cpu": TAS_FLAVOR}, "count": 1, "resourceUsage": {"cpu": "1000m"},
            "delayedTopologyRequest": "Pending"}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "reserved", "lastTransitionTime": "2025-06-01T12:00:00Z"}],
        "admissionChecks": [{"name": "prov-check", "state": "Ready", "message": ""}],
    }
    return obj


def without_admission(obj: dict) -> dict:
    """Kueue's update `wl.Status.Admission = nil` (the conditions stay as they were)."""
    status = {k: v for k, v in obj["status"].items() if k != "admission"}
    return {**obj, "status": status}


def ready_after(engine: Engine, seconds: float) -> set[str]:
    return set(engine.queues.second_pass_ready(NOW + timedelta(seconds=seconds)))


def test_queue_second_pass_if_needed_single_queued_workload_checked_immediately():
    """TestQueueSecondPassIfNeeded / "single queued workload checked immediately": not ready yet."""
    engine = second_pass_engine()
    apply(engine, needing_second_pass())
    assert key("foo") in engine.queues.second_pass
    assert ready_after(engine, 0) == set()


def test_queue_second_pass_if_needed_single_queued_workload_checked_after_1s():
    """TestQueueSecondPassIfNeeded / "single queued workload checked after 1s": the one that
    needs a second pass is ready after 1 s, the other never queued."""
    engine = second_pass_engine()
    apply(engine, needing_second_pass("foo"), base_workload("bar"))
    assert ready_after(engine, 1) == {key("foo")}


def test_queue_second_pass_if_needed_workload_stops_needing_second_pass_after_being_queued():
    """TestQueueSecondPassIfNeeded / "workload stops needing second pass after being queued"."""
    engine = second_pass_engine()
    first = needing_second_pass()
    apply(engine, first)
    apply(engine, without_admission(first))
    assert ready_after(engine, 1) == set()


def test_queue_second_pass_if_needed_two_queued_workloads_one_updated_to_no_longer_need_second_pass():
    """TestQueueSecondPassIfNeeded / "two queued workloads, one updated to no longer need second pass"."""
    engine = second_pass_engine()
    first, second = needing_second_pass("first"), needing_second_pass("second")
    apply(engine, first, second)
    apply(engine, without_admission(first))
    assert ready_after(engine, 1) == {key("second")}
