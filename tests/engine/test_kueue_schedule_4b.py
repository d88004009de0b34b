"""Kueue's pkg/scheduler scheduler_test.go (API v1beta2), part 4b: the unit tests that follow
TestSchedule and check one piece of a scheduling cycle directly, on the engine's counterparts.

TestEntryOrdering sorts a cycle's heads (Kueue's makeIterator without fair sharing): here the
engine's `SchedulingCycle.classical_order` sorts entries built as the Go test builds them (a
workload, and an assignment borrowing at the given level).

TestResourcesToReserve checks what a head that needs preemption holds for the rest of the cycle
(Kueue's resourcesToReserve): here the engine's `SchedulingCycle.reserve`, whose charge is read
back from the cycle's holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.config import CREATION, EVICTION, Configuration, RequeuingStrategy, WaitForPodsReady
from scheduler.cycle import Entry, SchedulingCycle
from scheduler.engine import Engine
from scheduler.features import DEFAULT_GATES
from scheduler.flavorassigner import PREEMPT, FlavorAssigner, FlavorAssignment, PodSetFlavors
from scheduler.quota import FlavorResource
from scheduler.results import PassResult

from .factories import NOW, parse, timestamp
from .kueue_schedule import (
    cluster_queue,
    flavor,
    flavor_quotas,
    namespace,
    pod_set,
    reserve_quota,
    resource_group,
    workload,
)

NS = "default"


def engine_with(objects: Sequence[dict], *, gates: Mapping[str, bool] | None = None,
                config: Configuration | None = None) -> Engine:
    return Engine.from_parsed(parse(objects), DEFAULT_GATES.with_overrides(**(gates or {})), config=config)


# ================================================================ TestEntryOrdering


def condition_at(cond_type: str, reason: str, at: float) -> dict:
    return {"type": cond_type, "status": "True", "reason": reason, "message": "", "lastTransitionTime": timestamp(at)}


def ordering_workload(name: str, created: float, *, priority: int | None = None,
                      conditions: Sequence[dict] = ()) -> dict:
    """One entry's workload of the Go test: its creation time (seconds after now), priority and
    status conditions. The Go names' underscores become dashes (a Workload's name is an RFC 1123
    subdomain; the Go test's bare objects are never validated); no two names change order."""
    wl = workload(name.replace("_", "-"), NS, created=created, priority=priority, requests={"cpu": "1"})
    if conditions:
        wl["status"] = {"conditions": list(conditions)}
    return wl


def evicted_by_pods_ready_timeout(at: float) -> dict:
    return condition_at("Evicted", "PodsReadyTimeout", at)


def preempted(reason: str, at: float) -> dict:
    return condition_at("Preempted", reason, at)


def names(*go_names: str) -> list[str]:
    return [n.replace("_", "-") for n in go_names]


def entry_input() -> list[tuple[dict, int]]:
    """The Go test's `input`: (workload, borrowing level of its assignment)."""
    return [
        (ordering_workload("old_borrowing", 0), 1),
        (ordering_workload("old", 1), 0),
        (ordering_workload("new", 3), 0),
        (ordering_workload("high_pri_borrowing", 3, priority=1), 1),
        (ordering_workload("new_high_pri", 4, priority=1), 0),
        (ordering_workload("new_borrowing", 3), 1),
        (ordering_workload("evicted_borrowing", 1, conditions=[evicted_by_pods_ready_timeout(2)]), 1),
        (ordering_workload("recently_evicted", 0, conditions=[evicted_by_pods_ready_timeout(2)]), 0),
        (ordering_workload("high_pri_borrowing_more", 3, priority=1), 2),
    ]


def input_for_ordering_preempted_workloads() -> list[tuple[dict, int]]:
    return [
        (ordering_workload("old-mid-recently-preempted-in-queue", 0, priority=1,
                           conditions=[preempted("InClusterQueue", 5)]), 0),
        (ordering_workload("old-mid-recently-reclaimed-while-borrowing", 0, priority=1,
                           conditions=[preempted("InCohortReclaimWhileBorrowing", 6)]), 0),
        (ordering_workload("old-mid-more-recently-reclaimed-while-borrowing", 0, priority=1,
                           conditions=[preempted("InCohortReclaimWhileBorrowing", 7)]), 0),
        (ordering_workload("old-mid-not-preempted-yet", 1, priority=1), 0),
        (ordering_workload("preemptor", 7, priority=2), 0),
    ]


def entry_order(entries: list[tuple[dict, int]], *, priority_sorting: bool,
                requeuing_timestamp: str | None) -> list[str]:
    """The names of the entries in the order a cycle takes them. `requeuing_timestamp` is
    the Go case's workload.Ordering{PodsReadyRequeuingTimestamp} (None: its zero value)."""
    config = None
    if requeuing_timestamp is not None:
        config = Configuration(wait_for_pods_ready=WaitForPodsReady(
            requeuing_strategy=RequeuingStrategy(timestamp=requeuing_timestamp)))
    cq = cluster_queue("cq", resource_group(flavor_quotas("default", cpu="10")))
    engine = engine_with([namespace(NS), flavor("default"), cq, *(wl for wl, _ in entries)],
                         gates={"PrioritySortingWithinCohort": priority_sorting}, config=config)
    state = engine.state
    cycle = SchedulingCycle(state, engine.queues, NOW, PassResult())
    cq_model = state.cluster_queues["cq"]
    built = []
    for raw, borrowing in entries:
        wl = state.workload(f"{NS}/{raw['metadata']['name']}")
        assert wl is not None
        assignment = FlavorAssignment([PodSetFlavors(wl.pod_sets[0], 1, borrow=borrowing)])
        built.append(Entry(wl, cq_model, None, assignment))  # type: ignore[arg-type]
    built.sort(key=cycle.classical_order())
    return [e.wl.name for e in built]


def test_entry_ordering_priority_sorting_enabled_eviction_timestamp() -> None:
    """Go (TestEntryOrdering): "Priority sorting is enabled (default) using pods-ready Eviction
    timestamp (default)"."""
    assert entry_order(entry_input(), priority_sorting=True, requeuing_timestamp=EVICTION) == names(
        "new_high_pri", "old", "recently_evicted", "new", "high_pri_borrowing", "old_borrowing",
        "evicted_borrowing", "new_borrowing", "high_pri_borrowing_more")


def test_entry_ordering_priority_sorting_enabled_creation_timestamp() -> None:
    """Go (TestEntryOrdering): "Priority sorting is enabled (default) using pods-ready Creation
    timestamp"."""
    assert entry_order(entry_input(), priority_sorting=True, requeuing_timestamp=CREATION) == names(
        "new_high_pri", "recently_evicted", "old", "new", "high_pri_borrowing", "old_borrowing",
        "evicted_borrowing", "new_borrowing", "high_pri_borrowing_more")


def test_entry_ordering_priority_sorting_disabled_eviction_timestamp() -> None:
    """Go (TestEntryOrdering): "Priority sorting is disabled using pods-ready Eviction timestamp"."""
    assert entry_order(entry_input(), priority_sorting=False, requeuing_timestamp=EVICTION) == names(
        "old", "recently_evicted", "new", "new_high_pri", "old_borrowing", "evicted_borrowing",
        "high_pri_borrowing", "new_borrowing", "high_pri_borrowing_more")


def test_entry_ordering_priority_sorting_disabled_creation_timestamp() -> None:
    """Go (TestEntryOrdering): "Priority sorting is disabled using pods-ready Creation timestamp"."""
    assert entry_order(entry_input(), priority_sorting=False, requeuing_timestamp=CREATION) == names(
        "recently_evicted", "old", "new", "new_high_pri", "old_borrowing", "evicted_borrowing",
        "high_pri_borrowing", "new_borrowing", "high_pri_borrowing_more")


def test_entry_ordering_some_workloads_are_preempted_priority_sorting_disabled() -> None:
    """Go (TestEntryOrdering): "Some workloads are preempted; Priority sorting is disabled".

    Without priority sorting, Kueue orders a workload preempted with reason
    InCohortReclaimWhileBorrowing by its preemption time plus 1ms (strictly after its preemptor)."""
    assert entry_order(input_for_ordering_preempted_workloads(), priority_sorting=False,
                       requeuing_timestamp=None) == [
        "old-mid-recently-preempted-in-queue",
        "old-mid-not-preempted-yet",
        "old-mid-recently-reclaimed-while-borrowing",
        "preemptor",
        "old-mid-more-recently-reclaimed-while-borrowing",
    ]


def test_entry_ordering_some_workloads_are_preempted_priority_sorting_enabled() -> None:
    """Go (TestEntryOrdering): "Some workloads are preempted; Priority sorting is enabled".

    The three workloads of priority 1 created at the same time tie: the Go test expects its
    input order (its sort of so few entries happens to keep it), Kueue's cycle takes heads in
    no set order, and the engine breaks the tie by namespace and name. The order is compared
    with the tie as a set."""
    got = entry_order(input_for_ordering_preempted_workloads(), priority_sorting=True, requeuing_timestamp=None)
    assert got[0] == "preemptor" and got[4] == "old-mid-not-preempted-yet"
    assert set(got[1:4]) == {"old-mid-recently-preempted-in-queue", "old-mid-recently-reclaimed-while-borrowing",
                             "old-mid-more-recently-reclaimed-while-borrowing"}


# ================================================================ TestResourcesToReserve

ON_DEMAND_MEM = FlavorResource("on-demand", "memory")
SPOT_MEM = FlavorResource("spot", "memory")
MODEL_A_GPU = FlavorResource("model-a", "gpu")
MODEL_B_GPU = FlavorResource("model-b", "gpu")


def reserve_cluster_queue() -> dict:
    return cluster_queue(
        "cq",
        resource_group(flavor_quotas("on-demand", memory="100"), flavor_quotas("spot", memory=("0", "100"))),
        resource_group(flavor_quotas("model-a", gpu=("10", "0")), flavor_quotas("model-b", gpu=("10", "5"))),
        cohort="eng", strategy="StrictFIFO")


def reserved_for(*, borrowing: int, assignment_usage: Mapping[FlavorResource, int],
                 cq_usage: Mapping[FlavorResource, int]) -> dict[FlavorResource, int]:
    """What a head needing preemption (an assignment in Preempt mode with PodSets `memory` and
    `gpu`) holds: the ClusterQueue's usage comes from workloads holding quota in it."""
    holders = []
    for i, (fr, value) in enumerate(cq_usage.items()):
        wl = workload(f"workload-{i}", "default-namespace", requests={fr.resource: str(value)})
        holders.append(reserve_quota(wl, "cq", {"main": ({fr.resource: fr.flavor}, None)}, admitted=False))
    head = workload("head", "default-namespace",
                    pod_sets=[pod_set("memory", requests={"memory": "1"}), pod_set("gpu", requests={"gpu": "1"})])
    objects: list[dict[str, Any]] = [namespace("default-namespace"),
                                     *(flavor(f) for f in ("on-demand", "spot", "model-a", "model-b")),
                                     reserve_cluster_queue(), head, *holders]
    engine = engine_with(objects)
    state = engine.state
    cq = state.cluster_queues["cq"]
    wl = state.workload("default-namespace/head")
    assert wl is not None
    pod_sets = {ps.name: ps for ps in wl.pod_sets}
    psfs = []
    for fr, value in assignment_usage.items():
        ps = pod_sets["memory" if fr.resource == "memory" else "gpu"]
        psfs.append(PodSetFlavors(ps, 1, flavors={fr.resource: fr.flavor}, usage={fr.resource: value},
                                  borrow=borrowing, mode=PREEMPT))
    entry = Entry(wl, cq, FlavorAssigner(state, wl, cq), FlavorAssignment(psfs, mode=PREEMPT))
    cycle = SchedulingCycle(state, engine.queues, NOW, PassResult())
    cycle.reserve(entry)
    charge, sign = cycle.held[-1]
    assert sign == 1
    return dict(charge.quota)


def nonzero(quantities: Mapping[FlavorResource, int]) -> dict[FlavorResource, int]:
    """A reservation of 0 holds nothing: the engine leaves such entries out of the charge."""
    return {fr: v for fr, v in quantities.items() if v}


def test_resources_to_reserve_less_than_assignment_usage_assignment_preempts() -> None:
    """Go (TestResourcesToReserve): "Reserved memory and gpu less than assignment usage, assignment
    preempts"."""
    got = reserved_for(borrowing=0, assignment_usage={ON_DEMAND_MEM: 50, MODEL_A_GPU: 6},
                       cq_usage={ON_DEMAND_MEM: 60, SPOT_MEM: 50, MODEL_A_GPU: 6, MODEL_B_GPU: 2})
    assert got == nonzero({ON_DEMAND_MEM: 40, MODEL_A_GPU: 4})


def test_resources_to_reserve_equal_assignment_usage_assignment_preempts() -> None:
    """Go (TestResourcesToReserve): "Reserved memory equal assignment usage, assignment preempts"."""
    got = reserved_for(borrowing=0, assignment_usage={ON_DEMAND_MEM: 30, MODEL_A_GPU: 2},
                       cq_usage={ON_DEMAND_MEM: 60, SPOT_MEM: 50, MODEL_A_GPU: 2, MODEL_B_GPU: 2})
    assert got == nonzero({ON_DEMAND_MEM: 30, MODEL_A_GPU: 2})


def test_resources_to_reserve_zero_cq_borrowing_assignment_preempts_without_borrowing() -> None:
    """Go (TestResourcesToReserve): "Reserved memory is 0, CQ is borrowing, assignment preempts
    without borrowing"."""
    got = reserved_for(borrowing=0, assignment_usage={SPOT_MEM: 50, MODEL_B_GPU: 2},
                       cq_usage={ON_DEMAND_MEM: 60, SPOT_MEM: 60, MODEL_A_GPU: 2, MODEL_B_GPU: 10})
    assert got == nonzero({SPOT_MEM: 0, MODEL_B_GPU: 0})


def test_resources_to_reserve_cut_by_nominal_plus_borrowing_quota_assignment_preempts_and_borrows() -> None:
    """Go (TestResourcesToReserve): "Reserved memory cut by nominal+borrowing quota, assignment
    preempts and borrows"."""
    got = reserved_for(borrowing=1, assignment_usage={SPOT_MEM: 50, MODEL_B_GPU: 2},
                       cq_usage={ON_DEMAND_MEM: 60, SPOT_MEM: 60, MODEL_A_GPU: 2, MODEL_B_GPU: 10})
    assert got == nonzero({SPOT_MEM: 40, MODEL_B_GPU: 2})


def test_resources_to_reserve_equal_assignment_usage_cq_borrowing_limit_is_nil() -> None:
    """Go (TestResourcesToReserve): "Reserved memory equal assignment usage, CQ borrowing limit is nil"."""
    got = reserved_for(borrowing=1, assignment_usage={ON_DEMAND_MEM: 50, MODEL_B_GPU: 2},
                       cq_usage={ON_DEMAND_MEM: 60, SPOT_MEM: 60, MODEL_A_GPU: 2, MODEL_B_GPU: 10})
    assert got == nonzero({ON_DEMAND_MEM: 50, MODEL_B_GPU: 2})
