"""The scheduling cycle: Kueue's admission of pending workloads.

One cycle takes the head of every ClusterQueue (the first pending workload in priority
then creation order), computes an assignment for each against the cluster as it was when
the cycle began (nomination), then admits them in order: workloads that do not borrow
first, then higher priority, then older. An entry that no longer fits after the ones
before it took capacity is left pending ("no longer fits after processing another
workload") unless its TopologyAssignment can be recomputed within the cycle.

`Scheduler` repeats cycles until nothing more can be admitted; `simulate` runs one, as a
Kueue scheduling cycle does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from scheduler.cluster import ClusterState
from scheduler.flavorassigner import (
    TOPOLOGY_PLACEMENT_FAILED,
    WAITING_FOR_QUOTA,
    FlavorAssigner,
    FlavorAssignment,
)
from scheduler.model import Admission, ClusterQueue, Condition, PodSetAssignment, Workload
from scheduler.placement import PodSetPlacement
from scheduler.quota import FlavorResource
from scheduler.results import (
    ADMITTED,
    EVICTED,
    FINISHED,
    INADMISSIBLE,
    PENDING,
    QUOTA_RESERVED,
    Event,
    PassResult,
    PodSetResult,
    WorkloadResult,
)

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_MAX_GO_DURATION_SECONDS = 9223372036.854775807
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


def wait_seconds(since: datetime | None, now: datetime) -> str:
    """Go's time.Since(t).Round(time.Second) as Kueue prints it (a zero time saturates)."""
    since = since or _GO_ZERO_TIME
    seconds = min((now - since).total_seconds(), _MAX_GO_DURATION_SECONDS)
    return f"{round(seconds)}s"


def queue_order_key(state: ClusterState, wl: Workload) -> tuple:
    return (-state.priority_of(wl), wl.creation_timestamp or _GO_ZERO_TIME, wl.namespace, wl.name)


@dataclass
class Entry:
    """A ClusterQueue head and what nomination found for it."""

    wl: Workload
    cq: ClusterQueue
    assigner: FlavorAssigner
    assignment: FlavorAssignment
    placements: dict[str, PodSetPlacement] = field(default_factory=dict)
    mode: str = "Fit"  # Fit | Preempt | NoFit
    message: str = ""
    reason: str = ""
    failed_pod_set: str = ""

    @property
    def borrows(self) -> bool:
        return any(psf.borrow > 0 for psf in self.assignment.pod_sets)


class SchedulingCycle:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult,
                 parked: set[str] | None = None) -> None:
        self.state = state
        self.now = now
        self.result = result
        # workloads found inadmissible earlier in this pass (Kueue parks them until something changes)
        self.parked = parked if parked is not None else set()
        self.decided: dict[str, WorkloadResult] = {}

    # ------------------------------------------------------------ queues

    def pending_workloads(self) -> list[Workload]:
        pending = [w for w in self.state.workloads
                   if w.active and not w.has_quota_reservation and not w.is_finished]
        return sorted(pending, key=lambda w: queue_order_key(self.state, w))

    def heads(self) -> list[tuple[Workload, ClusterQueue]]:
        """The first waiting workload of every ClusterQueue; unqueueable ones are settled here."""
        heads: dict[str, tuple[Workload, ClusterQueue]] = {}
        blocked: set[str] = set()
        for wl in self.pending_workloads():
            if wl.key in self.parked:
                cq_name = self.state.cluster_queue_for(wl)
                if cq_name is not None and cq_name.queueing_strategy == "StrictFIFO":
                    blocked.add(cq_name.name)  # a StrictFIFO head blocks the ones behind it
                continue
            cq = self.queue_of(wl)
            if cq is None or cq.name in heads or cq.name in blocked:
                continue
            heads[cq.name] = (wl, cq)
        return list(heads.values())

    def queue_of(self, wl: Workload) -> ClusterQueue | None:
        lq = self.state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        if lq is None:
            name = wl.queue_name or '""'
            self.settle(self.not_admitted(wl, "", f"LocalQueue {name} doesn't exist", INADMISSIBLE, "Pending"))
            return None
        cq = self.state.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            self.settle(self.not_admitted(wl, lq.cluster_queue, f"ClusterQueue {lq.cluster_queue} doesn't exist",
                                          INADMISSIBLE, "Pending"))
            return None
        return cq

    def settle(self, result: WorkloadResult) -> None:
        self.decided[result.key] = result
        if result.status == INADMISSIBLE:
            self.parked.add(result.key)

    # ------------------------------------------------------------ the cycle

    def run(self) -> dict[str, WorkloadResult]:
        entries = [self.nominate(wl, cq) for wl, cq in self.heads()]
        entries.sort(key=lambda e: (e.borrows, -self.state.priority_of(e.wl),
                                    e.wl.creation_timestamp or _GO_ZERO_TIME, e.wl.key))
        for entry in entries:
            self.settle(self.process(entry))
        return self.decided

    def nominate(self, wl: Workload, cq: ClusterQueue) -> Entry:
        assigner = FlavorAssigner(self.state, wl, cq)
        assignment = assigner.assign()
        entry = Entry(wl, cq, assigner, assignment)
        if not assignment.ok:
            entry.mode = "Preempt" if assignment.kind == WAITING_FOR_QUOTA else "NoFit"
            entry.message, entry.reason, entry.failed_pod_set = assignment.failure, assignment.kind, \
                assignment.failed_pod_set
            return entry
        entry.placements = assigner.place(assignment)
        failed = next((name for name, p in entry.placements.items() if p.failure), None)
        if failed is not None:
            entry.message = f"couldn't assign flavors to pod set {failed}: {entry.placements[failed].failure}"
            entry.failed_pod_set = failed
            fits_empty = not any(p.failure for p in assigner.place(assignment, simulate_empty=True).values())
            entry.mode = "Preempt" if fits_empty else "NoFit"
            entry.reason = WAITING_FOR_QUOTA if fits_empty else TOPOLOGY_PLACEMENT_FAILED
        return entry

    def process(self, e: Entry) -> WorkloadResult:
        if e.mode != "Fit":
            return self.not_admitted(e.wl, e.cq.name, e.message, INADMISSIBLE, e.reason,
                                     failed_pod_set=e.failed_pod_set, assignment=e.assignment)
        if not self.quota_still_fits(e) or not self.topology_still_fits(e):
            result = self.not_admitted(e.wl, e.cq.name, NO_LONGER_FITS, PENDING, WAITING_FOR_QUOTA,
                                       assignment=e.assignment)
            return result
        return self.admit(e.wl, e.cq.name, e.assignment, {n: p.assignment for n, p in e.placements.items()})

    def quota_still_fits(self, e: Entry) -> bool:
        usage: dict[FlavorResource, int] = {}
        for psf in e.assignment.pod_sets:
            for resource, value in psf.usage.items():
                fr = FlavorResource(psf.flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + value
        return all(value <= self.state.quota.available(e.cq.name, fr) for fr, value in usage.items())

    def topology_still_fits(self, e: Entry) -> bool:
        """The nominated assignments still fit the capacity left by this cycle's admissions; if not,
        recompute them (TASRecomputeAssignmentWithinSchedulingCycle)."""
        if all(self.assignment_fits(e, name, p) for name, p in e.placements.items()):
            return True
        if not self.state.gates.TASRecomputeAssignmentWithinSchedulingCycle:
            return False
        placements = e.assigner.place(e.assignment)
        if any(p.failure for p in placements.values()):
            return False
        e.placements = placements
        return True

    def assignment_fits(self, e: Entry, pod_set: str, placement: PodSetPlacement) -> bool:
        psf = next(p for p in e.assignment.pod_sets if p.pod_set.name == pod_set)
        flavor = next((f for f in psf.flavors.values() if f in self.state.tas_snapshots), None)
        if flavor is None or placement.assignment is None:
            return True
        snap = self.state.tas_snapshots[flavor]
        requests = snap.request_vector(psf.pod_set.spec.requests)
        remaining = snap.remaining()
        for dom in placement.assignment.domains:
            leaf = snap.tree.leaf_for_values(dom.values)
            if leaf is None:
                return False
            room = remaining[leaf]
            cols = requests.nonzero()[0]
            if len(cols) and int((room[cols] // requests[cols]).min()) < dom.count:
                return False
        return True

    # ------------------------------------------------------------ outcomes

    def not_admitted(self, wl: Workload, cq: str, message: str, status: str, reason: str, *,
                     failed_pod_set: str = "", assignment: FlavorAssignment | None = None) -> WorkloadResult:
        pod_sets = []
        for ps in wl.pod_sets:
            flavors = {}
            if assignment is not None:
                psf = next((p for p in assignment.pod_sets if p.pod_set.name == ps.name), None)
                flavors = dict(psf.flavors) if psf else {}
            failure = message.split(": ", 1)[-1] if ps.name == failed_pod_set else ""
            pod_sets.append(PodSetResult(ps.name, ps.count, flavors, failure_reason=failure))
        self.result.events.append(Event(wl.key, "Warning", reason or "Pending", message))
        conditions = [Condition("QuotaReserved", "False", "Pending", message, self.now)]
        return WorkloadResult(wl, cq, status, message, pod_sets, list(wl.unhealthy_nodes), conditions=conditions)

    def admit(self, wl: Workload, cq_name: str, assignment: FlavorAssignment, tas: dict) -> WorkloadResult:
        cq = self.state.cluster_queues[cq_name]
        psas = []
        pod_sets = []
        for psf in assignment.pod_sets:
            ta = tas.get(psf.pod_set.name)
            psas.append(PodSetAssignment(psf.pod_set.name, dict(psf.flavors), psf.count, dict(psf.usage), ta,
                                         psf.delayed))
            pod_sets.append(PodSetResult(psf.pod_set.name, psf.count, dict(psf.flavors), ta, psf.delayed))
        wl.admission = Admission(cq_name, psas)
        for psa in psas:
            for resource, value in psa.resource_usage.items():
                self.state.quota.add_usage(cq_name, FlavorResource(psa.flavors[resource], resource), value)
            ps = wl.pod_set(psa.name)
            if psa.topology_assignment is not None and ps is not None:
                self.state.add_tas_assignment_usage(psa, ps.spec.requests, sign=1)
        flavors = {f for psf in assignment.pod_sets for f in psf.flavors.values()}
        needs_checks = any(self.state.checks_on_flavor(cq, f) for f in flavors)
        status = QUOTA_RESERVED if needs_checks else ADMITTED
        queued = wait_seconds(wl.creation_timestamp, self.now)
        reserved = f"Quota reserved in ClusterQueue {cq_name}, wait time since queued was {queued}"
        considered = FlavorAssigner(self.state, wl, cq).considered_flavors(assignment)
        event = f"{reserved}; Flavors considered: {considered}" if considered else reserved
        conditions = [Condition("QuotaReserved", "True", "QuotaReserved", reserved, self.now)]
        self.result.events.append(Event(wl.key, "Normal", "QuotaReserved", event))
        if not needs_checks:
            admitted = f"Admitted by ClusterQueue {cq_name}, wait time since reservation was 0s"
            conditions.append(Condition("Admitted", "True", "Admitted", admitted, self.now))
            self.result.events.append(Event(wl.key, "Normal", "Admitted", admitted))
        # the workload now holds its admission, as later steps of the pass (the ungater) see it
        wl.conditions = [c for c in wl.conditions if c.type not in {"QuotaReserved", "Admitted"}] + conditions
        return WorkloadResult(wl, cq_name, status, reserved, pod_sets, list(wl.unhealthy_nodes),
                              conditions=list(wl.conditions))


def unchanged_result(state: ClusterState, wl: Workload) -> WorkloadResult:
    """A workload the pass left as it was: report its current state."""
    cq = state.cluster_queue_for(wl)
    evicted = wl.condition("Evicted")
    if wl.is_finished:
        status = FINISHED
    elif evicted is not None and evicted.status == "True":
        status = EVICTED
    elif wl.has_quota_reservation:
        status = ADMITTED if wl.is_admitted else QUOTA_RESERVED
    else:
        status = PENDING
    pod_sets = []
    for ps in wl.pod_sets:
        psa = wl.admission.assignment_for(ps.name) if wl.admission else None
        if psa is not None:
            pod_sets.append(PodSetResult(ps.name, psa.count if psa.count is not None else ps.count,
                                         dict(psa.flavors), psa.topology_assignment, psa.delayed_topology_request))
        else:
            pod_sets.append(PodSetResult(ps.name, ps.count))
    message = ""
    for cond_type in ("Finished", "Admitted", "QuotaReserved"):
        cond = wl.condition(cond_type)
        if cond is not None and cond.message:
            message = cond.message
            break
    eviction = evicted.message if status == EVICTED and evicted is not None else ""
    return WorkloadResult(wl, cq.name if cq else "", status, eviction or message, pod_sets,
                          list(wl.unhealthy_nodes), eviction_reason=eviction, conditions=list(wl.conditions))


def run_cycles(state: ClusterState, now: datetime, result: PassResult,
               max_cycles: int | None = 1) -> dict[str, WorkloadResult]:
    """Scheduling cycles, one after another, until one admits and parks nothing (or `max_cycles`
    ran; None means no limit). Kueue runs them back to back; one cycle admits at most one
    workload per ClusterQueue."""
    decided: dict[str, WorkloadResult] = {}
    parked: set[str] = set()
    cycles = 0
    while max_cycles is None or cycles < max_cycles:
        before = len(parked)
        out = SchedulingCycle(state, now, result, parked).run()
        cycles += 1
        decided.update(out)
        admitted = any(r.status in (ADMITTED, QUOTA_RESERVED) for r in out.values())
        if not out or (not admitted and len(parked) == before):
            break
    return decided
