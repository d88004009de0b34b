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
    FIT,
    NO_FIT,
    PREEMPT,
    WAITING_FOR_QUOTA,
    FlavorAssigner,
    FlavorAssignment,
)
from scheduler.model import Admission, ClusterQueue, Condition, PodSetAssignment, Workload
from scheduler.placement import PodSetPlacement
from scheduler.preemption import Preemptor, Target, preemption_message
from scheduler.quota import FlavorResource
from scheduler.results import (
    ADMITTED,
    EVICTED,
    FINISHED,
    INADMISSIBLE,
    PENDING,
    PREEMPTED,
    QUOTA_RESERVED,
    WORKLOAD_PREEMPTED,
    Decision,
    Event,
    PassResult,
    PodSetResult,
    WorkloadResult,
)

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_MAX_GO_DURATION_SECONDS = 9223372036.854775807
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
OVERLAPPING_TARGETS = "Workload has overlapping preemption targets with another workload"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
_FITS, _NO_QUOTA, _NO_TOPOLOGY = "fits", "quota", "topology"


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
    targets: list[Target] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return self.assignment.mode

    @property
    def borrows(self) -> int:
        return self.assignment.borrowing


class SchedulingCycle:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult,
                 parked: set[str] | None = None, resume: dict[str, dict] | None = None) -> None:
        self.state = state
        self.now = now
        self.result = result
        # workloads found inadmissible earlier in this pass (Kueue parks them until something changes)
        self.parked = parked if parked is not None else set()
        # per workload, where the flavor search resumes next cycle (Kueue's LastAssignment)
        self.resume = resume if resume is not None else {}
        self.decided: dict[str, WorkloadResult] = {}
        self.admitted_now: set[str] = set()
        self.preemptor = Preemptor(state, now, excluded=self.admitted_now)
        self.preempted: dict[str, Workload] = {}  # targets of preemptions issued in this cycle

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
        assigner = FlavorAssigner(self.state, wl, cq, self.preemptor)
        assigner.resume = self.resume.get(wl.key, {})
        entry = Entry(wl, cq, assigner, FlavorAssignment([]))
        self.assign(entry)
        return entry

    def assign(self, e: Entry) -> None:
        """Flavors, TopologyAssignments and, when it takes preemption, the targets (Kueue's getAssignments):
        with every PodSet's full count, else (partial admission) the largest counts that fit."""
        assignment, targets = self.try_counts(e, None)
        if not self.admissible(assignment, targets):
            targets = []
            if self.state.gates.PartialAdmission and can_be_partially_admitted(e.wl):
                reduced = self.reduce(e)
                if reduced is not None:
                    assignment, targets = reduced
        e.assignment, e.targets = assignment, targets
        if assignment.mode == PREEMPT and any(psf.tas for psf in assignment.pod_sets) and not e.wl.unhealthy_nodes:
            # where the workload goes once its targets are gone; without targets, where it would go on
            # an empty topology, so that the capacity can be held for it
            if e.targets:
                with self.preemptor.without([t.workload for t in e.targets]):
                    assignment.placements = e.assigner.place(assignment)
            else:
                assignment.placements = e.assigner.place(assignment, simulate_empty=True)

    def try_counts(self, e: Entry, counts: dict[str, int] | None) -> tuple[FlavorAssignment, list[Target]]:
        assignment = e.assigner.assign(counts)
        if assignment.mode != NO_FIT:
            e.assigner.assign_topology(assignment)
        if assignment.mode != PREEMPT:
            return assignment, []
        return assignment, e.assigner.preemption_targets(assignment)

    @staticmethod
    def admissible(assignment: FlavorAssignment, targets: list[Target]) -> bool:
        return assignment.mode == FIT or (assignment.mode == PREEMPT and bool(targets))

    def reduce(self, e: Entry) -> tuple[FlavorAssignment, list[Target]] | None:
        """Partial admission: binary search for the smallest reduction, spread over the PodSets in
        proportion to what each may give up (count - minCount), that fits or can preempt to fit."""
        deltas = {ps.name: ps.count - (ps.min_count if ps.min_count is not None else ps.count)
                  for ps in e.wl.pod_sets}
        total = sum(deltas.values())
        counts_of = {ps.name: ps.count for ps in e.wl.pod_sets}
        best = None
        lo, hi = 0, total + 1
        while lo < hi:
            mid = (lo + hi) // 2
            counts = {name: counts_of[name] - (delta * mid + total - 1) // total for name, delta in deltas.items()}
            found = self.try_counts(e, counts)
            if self.admissible(*found):
                best, hi = found, mid
            else:
                lo = mid + 1
        return best

    def process(self, e: Entry) -> WorkloadResult:
        check = self.fits(e)
        if check == _NO_TOPOLOGY and self.state.gates.TASRecomputeAssignmentWithinSchedulingCycle:
            # the nominated TopologyAssignment was computed before this cycle's admissions: recompute it,
            # keeping the nominated flavors
            e.assigner.nominated = {psf.pod_set.name: dict(psf.flavors) for psf in e.assignment.pod_sets}
            self.assign(e)
            e.assigner.nominated = None
            check = self.fits(e)
        self.resume.pop(e.wl.key, None)
        if e.mode == NO_FIT or (e.mode == PREEMPT and not e.targets):
            # a workload with flavors left to try goes back to its queue at once, to try them next
            if e.assignment.pending_flavors:
                self.resume[e.wl.key] = {k: i + 1 for k, i in e.assignment.tried.items() if i != -1}
            status = PENDING if e.assignment.pending_flavors else INADMISSIBLE
            if e.mode == NO_FIT:
                return self.not_admitted(e.wl, e.cq.name, e.assignment.failure, status, e.assignment.kind,
                                         assignment=e.assignment)
            if e.cq.preemption.get("reclaimWithinCohort") != "Any":
                self.reserve(e)
            return self.not_admitted(e.wl, e.cq.name, e.assignment.failure, status, WAITING_FOR_QUOTA,
                                     assignment=e.assignment)
        if any(t.workload.key in self.preempted for t in e.targets):
            return self.not_admitted(e.wl, e.cq.name, OVERLAPPING_TARGETS, PENDING, WAITING_FOR_QUOTA,
                                     assignment=e.assignment)
        if check != _FITS:
            return self.not_admitted(e.wl, e.cq.name, NO_LONGER_FITS, PENDING, WAITING_FOR_QUOTA,
                                     assignment=e.assignment)
        for t in e.targets:
            self.preempted[t.workload.key] = t.workload
        self.add_usage(e.wl, e.assignment, e.assignment.usage())
        if e.mode == PREEMPT:
            return self.preempt(e)
        return self.admit(e.wl, e.cq.name, e.assignment, {n: p.assignment for n, p in e.assignment.placements.items()})

    def fits(self, e: Entry) -> str:
        """Whether the entry's quota and TopologyAssignments fit what is left, counting the capacity
        of every workload being preempted (this cycle's targets and its own) as free."""
        gone = {w.key: w for w in self.preempted.values()}
        gone.update({t.workload.key: t.workload for t in e.targets})
        with self.preemptor.without(list(gone.values())):
            if not e.wl.has_quota_reservation:
                for fr, value in e.assignment.usage().items():
                    if value > self.state.quota.available(e.cq.name, fr):
                        return _NO_QUOTA
            if not all(self.assignment_fits(e, name, p) for name, p in e.assignment.placements.items()):
                return _NO_TOPOLOGY
        return _FITS

    def assignment_fits(self, e: Entry, pod_set: str, placement: PodSetPlacement) -> bool:
        psf = e.assignment.pod_set(pod_set)
        flavor = next((f for f in psf.flavors.values() if f in self.state.tas_snapshots), None)
        if flavor is None or placement.assignment is None:
            return True
        snap = self.state.tas_snapshots[flavor]
        requests = snap.request_vector(psf.pod_set.spec.requests)
        remaining = snap.remaining()
        cols = requests.nonzero()[0]
        for dom in placement.assignment.domains:
            leaf = snap.tree.leaf_for_values(dom.values)
            if leaf is None:
                return False
            if len(cols) and int((remaining[leaf][cols] // requests[cols]).min()) < dom.count:
                return False
        return True

    # ------------------------------------------------------------ usage held by entries

    def add_usage(self, wl: Workload, assignment: FlavorAssignment, quota: dict[FlavorResource, int]) -> None:
        """Count an entry's quota and TopologyAssignments as used for the rest of the cycle."""
        cq_name = self.entry_queue(wl)
        if not wl.has_quota_reservation:
            for fr, value in quota.items():
                if value:
                    self.state.quota.add_usage(cq_name, fr, value)
        for name, placement in assignment.placements.items():
            psf = assignment.pod_set(name)
            if placement.assignment is not None and psf is not None:
                psa = PodSetAssignment(name, dict(psf.flavors), psf.count, dict(psf.usage), placement.assignment)
                self.state.add_tas_assignment_usage(psa, psf.pod_set.spec.requests, sign=1)

    def entry_queue(self, wl: Workload) -> str:
        cq = self.state.cluster_queue_for(wl)
        return cq.name if cq is not None else ""

    def reserve(self, e: Entry) -> None:
        """Hold what a workload that needs preemption but found no targets would use, so that workloads
        further back cannot take it first (the ClusterQueue cannot always reclaim it later)."""
        tree = self.state.quota
        node = tree.queues[e.cq.name]
        reserved: dict[FlavorResource, int] = {}
        for fr, value in e.assignment.usage().items():
            nominal = tree.nominal(e.cq.name, fr)
            if e.assignment.borrowing > 0:
                quota = node.quotas.get(fr)
                limit = quota.borrowing_limit if quota is not None else None
                reserved[fr] = value if limit is None else min(value, nominal + limit - node.usage[fr])
            else:
                reserved[fr] = max(0, min(value, nominal - node.usage[fr]))
        self.add_usage(e.wl, e.assignment, reserved)

    # ------------------------------------------------------------ outcomes

    def preempt(self, e: Entry) -> WorkloadResult:
        """Evict the entry's targets; the entry waits for them to go."""
        preemptor_path = self.preemptor.cluster_queue_path(e.cq.name)
        for t in e.targets:
            if not t.workload.condition_true("Evicted"):
                self.evict_target(e, t, preemptor_path)
        message = f"{e.assignment.failure}. Pending the preemption of {len(e.targets)} workload(s)"
        return self.not_admitted(e.wl, e.cq.name, message, PENDING, WAITING_FOR_PREEMPTED, assignment=e.assignment)

    def evict_target(self, e: Entry, t: Target, preemptor_path: str) -> None:
        wl = t.workload
        target_cq = wl.admission.cluster_queue if wl.admission else ""
        message = (f"{preemption_message(e.wl, t.reason)}; preemptor path: {preemptor_path}; "
                   f"preemptee path: {self.preemptor.cluster_queue_path(target_cq)}")
        priorities = (f"preemptor effective priority: {self.priority_text(e.wl)}; "
                      f"preemptee effective priority: {self.priority_text(wl)}")
        wl.conditions = [c for c in wl.conditions if c.type not in ("Evicted", "Preempted")]
        wl.conditions += [Condition("Evicted", "True", "Preempted", message, self.now),
                          Condition("Preempted", "True", t.reason, message, self.now)]
        self.result.events += [
            Event(wl.key, "Normal", "EvictedDueToPreempted", message),
            Event(wl.key, "Normal", "Preempted", f"{message}; {priorities}"),
            Event(e.wl.key, "Normal", "PreemptedWorkload",
                  f"Preempted workload {wl.key} (UID: {wl.uid}) in ClusterQueue {target_cq}; {priorities}"),
        ]
        self.result.decisions.append(Decision(wl.key, WORKLOAD_PREEMPTED, trigger=f"preempted by {e.wl.key}",
                                              message=message))
        result = unchanged_result(self.state, wl)
        result.status, result.message, result.eviction_reason = PREEMPTED, message, message
        result.decided = True
        self.decided[wl.key] = result

    def priority_text(self, wl: Workload) -> str:
        value = self.state.priority_of(wl)
        return f"{value} (base: {value}, boost: 0)"

    def not_admitted(self, wl: Workload, cq: str, message: str, status: str, reason: str, *,
                     assignment: FlavorAssignment | None = None) -> WorkloadResult:
        pod_sets = []
        for ps in wl.pod_sets:
            psf = assignment.pod_set(ps.name) if assignment is not None else None
            flavors = dict(psf.flavors) if psf else {}
            failure = ", ".join(sorted(psf.reasons)) if psf is not None and psf.reasons else ""
            pod_sets.append(PodSetResult(ps.name, ps.count, flavors, failure_reason=failure))
        observable = self.state.gates.UnadmittedWorkloadsObservability and reason
        cond_reason = reason if observable else "Pending"
        self.result.events.append(Event(wl.key, "Warning", cond_reason, message))
        conditions = [Condition("QuotaReserved", "False", cond_reason, message, self.now)]
        return WorkloadResult(wl, cq, status, message, pod_sets, list(wl.unhealthy_nodes), conditions=conditions)

    def admit(self, wl: Workload, cq_name: str, assignment: FlavorAssignment, tas: dict) -> WorkloadResult:
        """The entry's usage is already counted (add_usage): record its admission."""
        cq = self.state.cluster_queues[cq_name]
        psas = []
        pod_sets = []
        for psf in assignment.pod_sets:
            ta = tas.get(psf.pod_set.name)
            psas.append(PodSetAssignment(psf.pod_set.name, dict(psf.flavors), psf.count, dict(psf.usage), ta,
                                         psf.delayed))
            pod_sets.append(PodSetResult(psf.pod_set.name, psf.count, dict(psf.flavors), ta, psf.delayed))
        wl.admission = Admission(cq_name, psas)
        self.admitted_now.add(wl.key)
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
        # a workload admitted again is no longer evicted or preempted (Kueue keeps the old reason visible)
        for cond_type in ("Evicted", "Preempted"):
            old = wl.condition(cond_type)
            if old is not None and old.status == "True":
                conditions.append(Condition(cond_type, "False", "QuotaReserved", f"Previously: {old.message}",
                                            self.now))
        # the workload now holds its admission, as later steps of the pass (the ungater) see it
        replaced = {c.type for c in conditions} | {"QuotaReserved", "Admitted"}
        wl.conditions = [c for c in wl.conditions if c.type not in replaced] + conditions
        return WorkloadResult(wl, cq_name, status, reserved, pod_sets, list(wl.unhealthy_nodes),
                              conditions=list(wl.conditions))


def can_be_partially_admitted(wl: Workload) -> bool:
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.pod_sets)


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
    # what the workload is now: finished, admitted, or why its quota is (not) reserved; a
    # False Admitted ("The workload has no reservation") says nothing about the wait
    for cond_type in ("Finished", "Admitted", "QuotaReserved"):
        cond = wl.condition(cond_type)
        if cond is not None and cond.message and (cond_type == "QuotaReserved" or cond.status == "True"):
            message = cond.message
            break
    eviction = evicted.message if status == EVICTED and evicted is not None else ""
    return WorkloadResult(wl, cq.name if cq else "", status, eviction or message, pod_sets,
                          list(wl.unhealthy_nodes), eviction_reason=eviction, conditions=list(wl.conditions),
                          decided=False)


def run_cycles(state: ClusterState, now: datetime, result: PassResult,
               max_cycles: int | None = 1) -> dict[str, WorkloadResult]:
    """Scheduling cycles, one after another, until one admits and parks nothing (or `max_cycles`
    ran; None means no limit). Kueue runs them back to back; one cycle admits at most one
    workload per ClusterQueue."""
    decided: dict[str, WorkloadResult] = {}
    parked: set[str] = set()
    resume: dict[str, dict] = {}
    cycles = 0
    while max_cycles is None or cycles < max_cycles:
        before = len(parked)
        out = SchedulingCycle(state, now, result, parked, resume).run()
        cycles += 1
        decided.update(out)
        admitted = any(r.status in (ADMITTED, QUOTA_RESERVED) for r in out.values())
        if not out or (not admitted and len(parked) == before):
            break
    return decided
