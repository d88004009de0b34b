"""Side by side with Kueue: what this engine would have decided for a workload Kueue admitted,
on the same cluster, and how the two decisions compare.

The snapshot (leave-one-out). A workload Kueue admitted is compared on the engine's state as
it is when the comparison runs (in the service: the observe pass that first sees the
admission), with that workload's own admission taken back, so that it waits in its queue
again, and every other admission kept, the other workloads Kueue admitted since the previous
pass included. Each workload of a batch is compared on its own: its admission is taken back,
the engine decides, the admission is put back, and the next one is compared. The state is
left as it was found.

The engine's decision is its own nomination (`SchedulingCycle.nominate`: flavors, quota,
TopologyAssignments, preemption targets), the step a scheduling cycle takes for the head of a
ClusterQueue, made for this workload whatever its position in the queue.

Kueue's assignment is also checked against the engine's view of usage: how many pods of the
PodSet each of Kueue's domains has room for once everything else is counted (the check a
scheduling cycle makes before it admits a nominated workload, `SchedulingCycle.assignment_fits`).

Categories, per PodSet first, the workload taking the worst of its PodSets' (in the order
of `CATEGORIES`, the last being the worst):

* `SameDomains`: the same flavor, the same domains (full path of level values) with the same
  number of pods in each. Counts must match: the same nodes with pods spread differently
  over them is another placement (`SameLevelOtherDomains`).
* `SameLevelOtherDomains`: both placements are held by one domain of the same topology level
  (e.g. each in one rack), but not the same domains or counts.
* `DifferentLevel`: the lowest level one domain of which holds every pod differs (one rack
  for Kueue, two racks of a block for the engine), or the flavor differs.
* `EngineWouldNotAdmit`: the engine would not admit it now: no quota, no topology domain
  with room, or only by preempting (its stop record says which, with numbers).
* `NoCapacityForKueue`: some of Kueue's domains have room for fewer pods than Kueue put
  there, as the engine counts usage (a node the engine finds NotReady, tainted or gone has
  no room at all): the two see the cluster differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from scheduler import stops
from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.cluster import ClusterState, holds_quota
from scheduler.cycle import SchedulingCycle
from scheduler.engine import Engine
from scheduler.flavorassigner import FIT, PREEMPT
from scheduler.model import PodSetAssignment, Workload
from scheduler.results import PassResult
from scheduler.snapshot import TASFlavorSnapshot, assignment_room
from scheduler.stops import StopRecord

SAME_DOMAINS = "SameDomains"
SAME_LEVEL_OTHER_DOMAINS = "SameLevelOtherDomains"
DIFFERENT_LEVEL = "DifferentLevel"
ENGINE_WOULD_NOT_ADMIT = "EngineWouldNotAdmit"
NO_CAPACITY_FOR_KUEUE = "NoCapacityForKueue"
# from agreement to the deepest disagreement: a workload takes the last of its PodSets'
CATEGORIES = (SAME_DOMAINS, SAME_LEVEL_OTHER_DOMAINS, DIFFERENT_LEVEL, ENGINE_WOULD_NOT_ADMIT,
              NO_CAPACITY_FOR_KUEUE)
AGREEING = frozenset({SAME_DOMAINS})
# the conditions of a reservation: taken off with the admission, so the workload waits again
_RESERVATION_CONDITIONS = frozenset({"QuotaReserved", "Admitted", "PodsReady", "Evicted", "Preempted", "Requeued"})


@dataclass(frozen=True, slots=True)
class Domain:
    """`count` pods in the domain named by its full path (one value per topology level);
    for Kueue's domains, `room`: how many pods of the PodSet the engine sees room for there."""

    values: tuple[str, ...]
    count: int
    room: int | None = None

    @property
    def short(self) -> bool:
        return self.room is not None and self.room < self.count

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"values": list(self.values), "count": self.count}
        if self.room is not None:
            out["room"] = self.room
        return out


@dataclass(frozen=True, slots=True)
class Placement:
    """One PodSet's TopologyAssignment with full paths, and the lowest topology level one
    domain of which holds every pod (`level`, that domain's path `domain`; "" and () when the
    pods span several domains of the top level)."""

    pod_set: str
    flavor: str
    levels: tuple[str, ...]
    domains: tuple[Domain, ...]
    level: str
    domain: tuple[str, ...]

    @property
    def pods(self) -> int:
        return sum(d.count for d in self.domains)

    def key(self) -> tuple:
        return self.flavor, tuple(sorted((d.values, d.count) for d in self.domains))

    def to_json(self) -> dict[str, Any]:
        return {"podSet": self.pod_set, "flavor": self.flavor, "levels": list(self.levels), "level": self.level,
                "domain": list(self.domain), "pods": self.pods, "domains": [d.to_json() for d in self.domains]}


@dataclass(slots=True)
class Comparison:
    """Kueue's admission of one workload against this engine's decision on the same snapshot."""

    key: str
    uid: str
    cluster_queue: str
    flavor: str
    category: str
    kueue: list[Placement]
    engine: list[Placement]
    pod_sets: dict[str, str] = field(default_factory=dict)  # PodSet -> its category
    reason: str = ""  # why the engine would not admit it, or where Kueue's domains lack room
    stop: StopRecord | None = None  # the engine's stop record when it would not admit it
    reserved_at: datetime | None = None  # Kueue's QuotaReserved transition, when it says

    @property
    def agrees(self) -> bool:
        return self.category in AGREEING

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.key, "uid": self.uid, "clusterQueue": self.cluster_queue, "flavor": self.flavor,
                "category": self.category, "kueue": [p.to_json() for p in self.kueue],
                "engine": [p.to_json() for p in self.engine], "podSets": dict(self.pod_sets),
                "reason": self.reason, "stop": self.stop.to_json() if self.stop is not None else None}


# ---------------------------------------------------------------- placements with full paths


def _full_path(state: ClusterState, snap: TASFlavorSnapshot, values: Sequence[str]) -> tuple[str, ...]:
    levels = snap.level_keys
    leaf = snap.tree.leaf_for_values(values)
    if leaf is not None:
        return tuple(snap.tree.leaves.values[leaf])
    if len(values) == len(levels):
        return tuple(values)
    if levels and levels[-1] == HOSTNAME_LABEL and values:
        # a node outside the flavor's tree (NotReady, cordoned, gone): its labels, if known
        node = state.node_for_hostname(values[-1])
        if node is not None:
            return (*(node.labels.get(level, "") for level in levels[:-1]), values[-1])
    return ("",) * (len(levels) - len(values)) + tuple(values)


def common_domain(levels: Sequence[str], paths: Iterable[Sequence[str]]) -> tuple[str, tuple[str, ...]]:
    """The lowest level one domain of which holds every path, and that domain's path."""
    paths = [tuple(p) for p in paths]
    if not paths:
        return "", ()
    shared = 0
    for i in range(len(levels)):
        if len({p[i] if i < len(p) else "" for p in paths}) != 1:
            break
        shared = i + 1
    return (levels[shared - 1] if shared else ""), paths[0][:shared]


def placement_of(state: ClusterState, pod_set: str, flavor: str, assignment: TopologyAssignment,
                 rooms: Sequence[int] | None = None) -> Placement:
    snap = state.tas_snapshots[flavor]
    levels = tuple(snap.level_keys)
    domains = tuple(Domain(_full_path(state, snap, d.values), d.count, None if rooms is None else max(0, int(rooms[i])))
                    for i, d in enumerate(assignment.domains))
    level, domain = common_domain(levels, (d.values for d in domains))
    return Placement(pod_set, flavor, levels, domains, level, domain)


def _tas_assignments(state: ClusterState, wl: Workload) -> list[tuple[PodSetAssignment, str]]:
    assert wl.admission is not None
    out = []
    for psa in wl.admission.pod_set_assignments:
        flavor = state.tas_flavor_of(psa)
        if psa.topology_assignment is not None and flavor is not None and flavor in state.tas_snapshots:
            out.append((psa, flavor))
    return out


def kueue_placements(state: ClusterState, wl: Workload) -> list[Placement]:
    """Kueue's TopologyAssignments of the admitted `wl`, each domain with the room the engine
    sees for it on the state as it is (the workload's own admission must not be counted)."""
    out = []
    for psa, flavor in _tas_assignments(state, wl):
        ps = wl.pod_set(psa.name)
        requests = ps.spec.requests if ps is not None else {}
        ta = psa.topology_assignment
        assert ta is not None
        rooms = assignment_room(state.tas_snapshots[flavor], requests, ta)
        out.append(placement_of(state, psa.name, flavor, ta, rooms))
    return out


# ---------------------------------------------------------------- the comparison


def pending_copy(wl: Workload) -> Workload:
    """The workload as it was before its admission: no admission, no reservation conditions."""
    return replace(wl, admission=None, unhealthy_nodes=[],
                   conditions=[c for c in wl.conditions if c.type not in _RESERVATION_CONDITIONS])


def compare_admission(engine: Engine, key: str, now: datetime) -> Comparison | None:
    """Kueue's admission of `key` against the engine's decision on the engine's state with
    that admission taken back (see the module's docstring); None when `key` does not hold an
    admission with a TopologyAssignment on a TAS flavor the engine knows. The state is left
    as it was."""
    state = engine.state
    wl = state.workload(key)
    if wl is None or wl.admission is None or not holds_quota(wl) or not _tas_assignments(state, wl):
        return None
    cq_name = wl.admission.cluster_queue
    reserved = wl.condition("QuotaReserved")
    pending = pending_copy(wl)
    state.upsert_workload(pending)
    try:
        kueue = kueue_placements(state, wl)
        comparison = Comparison(key, wl.uid, cq_name, kueue[0].flavor if kueue else "", SAME_DOMAINS, kueue, [],
                                reserved_at=reserved.last_transition_time if reserved is not None else None)
        cq = state.cluster_queues.get(cq_name)
        if cq is None:
            comparison.stop = StopRecord(stops.ORPHAN, f"ClusterQueue {cq_name} is not known to the engine",
                                         cluster_queue=cq_name)
        else:
            _engine_decision(engine, pending, cq, now, comparison)
    finally:
        state.upsert_workload(wl)
    _categorize(comparison)
    return comparison


def compare_admissions(engine: Engine, keys: Iterable[str], now: datetime) -> list[Comparison]:
    """`compare_admission` for each of `keys`, in the engine's order (each on its own: the
    others keep their admissions)."""
    out = []
    for wl in engine.state.in_order(set(keys)):
        found = compare_admission(engine, wl.key, now)
        if found is not None:
            out.append(found)
    return out


def _engine_decision(engine: Engine, pending: Workload, cq: Any, now: datetime, comparison: Comparison) -> None:
    state = engine.state
    cycle = SchedulingCycle(state, engine.queues, now, PassResult())
    cycle.pass_number = engine.passes
    entry = cycle.nominate(pending, cq)
    a = entry.assignment
    if entry.mode == FIT:
        for psf in a.pod_sets:
            placement = a.placements.get(psf.pod_set.name)
            flavor = next((f for f in psf.flavors.values() if f in state.tas_snapshots), None)
            if placement is None or placement.assignment is None or flavor is None:
                continue
            comparison.engine.append(placement_of(state, psf.pod_set.name, flavor, placement.assignment))
        return
    if entry.mode == PREEMPT and entry.targets:
        stop = stops.preemption_stop("only by preempting", entry.targets, entry.checks, a.failure)
    else:
        stop = cycle.unfit_stop(entry)
    stop.cluster_queue, stop.reason, stop.at, stop.pass_number = cq.name, a.failure, now, engine.passes
    stop.representative = pending.key
    comparison.stop = stop


def _categorize(c: Comparison) -> None:
    engine = {p.pod_set: p for p in c.engine}
    reasons = []
    for k in c.kueue:
        short = [d for d in k.domains if d.short]
        if short:
            category = NO_CAPACITY_FOR_KUEUE
            reasons.append(f"PodSet {k.pod_set}: " + ", ".join(
                f"{'/'.join(d.values)} has room for {d.room} of its {d.count} pod(s)" for d in short[:5])
                + (f" and {len(short) - 5} more" if len(short) > 5 else ""))
        elif c.stop is not None:
            category = ENGINE_WOULD_NOT_ADMIT
        else:
            mine = engine.get(k.pod_set)
            if mine is not None and mine.key() == k.key():
                category = SAME_DOMAINS
            elif mine is not None and mine.flavor == k.flavor and mine.level == k.level:
                category = SAME_LEVEL_OTHER_DOMAINS
            else:
                category = DIFFERENT_LEVEL
        c.pod_sets[k.pod_set] = category
    c.category = max(c.pod_sets.values(), key=CATEGORIES.index, default=SAME_DOMAINS)
    if c.stop is not None:
        reasons.append(c.stop.message)
    c.reason = "; ".join(reasons)


def agreement_rate(categories: Mapping[str, int]) -> float | None:
    """The share of comparisons that agree (SameDomains), None when there are none."""
    total = sum(categories.values())
    if not total:
        return None
    return sum(n for category, n in categories.items() if category in AGREEING) / total


__all__ = [
    "AGREEING",
    "CATEGORIES",
    "DIFFERENT_LEVEL",
    "ENGINE_WOULD_NOT_ADMIT",
    "NO_CAPACITY_FOR_KUEUE",
    "SAME_DOMAINS",
    "SAME_LEVEL_OTHER_DOMAINS",
    "Comparison",
    "Domain",
    "Placement",
    "agreement_rate",
    "common_domain",
    "compare_admission",
    "compare_admissions",
    "kueue_placements",
    "pending_copy",
]
