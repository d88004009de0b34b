"""The scheduling cycle: Kueue's admission of pending workloads.

One cycle pops the head of every ClusterQueue from the queue manager (the first pending
workload in priority then creation order), computes an assignment for each against the
cluster as it was when the cycle began (nomination), then admits them in order: workloads
that do not borrow first, then higher priority, then older (with fair sharing on, in Kueue's
fair-sharing order instead: `scheduler.fair_sharing`). An entry that no longer fits
after the ones before it took capacity is left pending ("no longer fits after processing
another workload") unless its TopologyAssignment can be recomputed within the cycle. Heads
that are not admitted go back to the queue manager, to their heap or parked.

`Engine.run_pass` repeats cycles until nothing more can be admitted; `simulate` runs one
by default, as a Kueue scheduling cycle does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler import stops
from scheduler.assignment import TopologyAssignment
from scheduler.cluster import FAILED_CHECK_STATES, FAILED_CHECKS, Charge, ClusterState, TASCharge, has_failed_checks
from scheduler.eviction import evict, set_condition
from scheduler.fair_sharing import FairSharingIterator, HeadInfo
from scheduler.flavorassigner import (
    EXCEEDS_MAX_QUOTA,
    FIT,
    NO_FIT,
    NO_MATCHING_FLAVOR,
    PREEMPT,
    TOPOLOGY_PLACEMENT_FAILED,
    WAITING_FOR_QUOTA,
    FlavorAssigner,
    FlavorAssignment,
    FlavorScanProgress,
)
from scheduler.model import (
    WORKLOAD_ADMITTED,
    Admission,
    ClusterQueue,
    Condition,
    PodSetAssignment,
    Workload,
)
from scheduler.pods_ready import WAITING_MESSAGE, WAITING_REASON, any_not_ready, not_ready
from scheduler.preemption import JOB_UID_LABEL, Preemptor, Target, Targets, preemption_message
from scheduler.queues import (
    REQUEUE_GENERIC,
    REQUEUE_IMMEDIATE,
    REQUEUE_NAMESPACE_MISMATCH,
    REQUEUE_NO_CANDIDATES,
    REQUEUE_NO_FIT,
    REQUEUE_PENDING_PREEMPTION,
    REQUEUE_PREEMPTION_GATED,
    QueueManager,
    queue_order_timestamp,
)
from scheduler.quota import FlavorResource, root_of
from scheduler.results import (
    ADMITTED,
    EVICTED,
    FINISHED,
    INADMISSIBLE,
    PENDING,
    PREEMPTED,
    QUOTA_RESERVED,
    WORKLOAD_PREEMPTED,
    Answers,
    Decision,
    Event,
    PassResult,
    PodSetResult,
    WorkloadResult,
    message_shape,
)
from scheduler.snapshot import assignments_fit
from scheduler.stops import StopRecord, never_fits_text, quota_checks, requeue_triggers, shortfall_text

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_MAX_GO_DURATION_SECONDS = 9223372036.854775807
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
OVERLAPPING_TARGETS = "Workload has overlapping preemption targets with another workload"
DEFERRED_FIT = f"{OVERLAPPING_TARGETS}, but will fit after these preemptions complete"
NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"
INVALID_RESOURCES = "resources validation failed"
REQUESTS_EXCEED_LIMITS = "requests must not exceed its limits"
PREEMPTION_GATED = "Workload requires preemption, but it's gated"
MISCONFIGURED = "Misconfigured"
PENDING_EVALUATION = "PendingEvaluation"
ADMISSION_GATED = "AdmissionGated"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
_FITS, _NO_QUOTA, _NO_TOPOLOGY = "fits", "quota", "topology"


def wait_seconds(since: datetime | None, now: datetime) -> str:
    """Go's time.Since(t).Round(time.Second) as Kueue prints it (a zero time saturates)."""
    since = since or _GO_ZERO_TIME
    seconds = min((now - since).total_seconds(), _MAX_GO_DURATION_SECONDS)
    return f"{round(seconds)}s"


def seconds_since(since: datetime | None, now: datetime) -> str:
    """Go's time.Since(t).Seconds() printed with %.0f, as Kueue's Admitted event gives the wait
    since the quota was reserved (a zero time saturates)."""
    since = since or _GO_ZERO_TIME
    return f"{min((now - since).total_seconds(), _MAX_GO_DURATION_SECONDS):.0f}s"


@dataclass
class Entry:
    """A ClusterQueue head and what nomination found for it."""

    wl: Workload
    cq: ClusterQueue
    assigner: FlavorAssigner
    assignment: FlavorAssignment
    targets: Targets = field(default_factory=Targets)
    generation: int = 0  # the ClusterQueue's AllocatableResourceGeneration at nomination
    # quota as nomination counted it, when the head did not simply fit (its failure's numbers)
    checks: list[stops.QuotaCheck] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return self.assignment.mode

    @property
    def borrows(self) -> int:
        return self.assignment.borrowing


class SchedulingCycle:
    """One Kueue scheduling cycle over the queue manager's heads.

    What a head that needs preemption holds (the capacity it reserves when it found no
    targets, its own usage while its targets are evicted) lasts for this cycle only, as
    Kueue's cycle snapshot does; admissions are charged to the cache for good.
    """

    def __init__(self, state: ClusterState, queues: QueueManager, now: datetime, result: PassResult) -> None:
        self.state = state
        self.queues = queues
        self.now = now
        self.result = result
        self.decided: dict[str, WorkloadResult] = {}
        self.admitted_now: set[str] = set()
        self.preemptor = Preemptor(state, now, excluded=self.admitted_now)
        self.preempted: dict[str, Workload] = {}  # targets of preemptions issued in this cycle
        self.held: list[tuple[Charge, int]] = []  # usage held (1) or given back (-1) for this cycle only
        # who took capacity in this cycle, in order: (workload, ClusterQueue, its charge), holds and admissions
        self.takers: list[tuple[str, str, Charge]] = []
        self.preempted_for: dict[str, str] = {}  # target -> the head it is preempted for
        self.pass_number = 0  # set by the engine: the pass this cycle belongs to
        self.admitted = 0
        self.parked = 0
        # waitForPodsReady blocked admission: a head that fits waits for every admitted
        # workload's pods to be ready, and nothing more is admitted until then
        self.blocked = False
        self.rescans = 0  # heads sent back to their queue to try the flavors they have left
        self.number = 0  # this cycle's number among the queue manager's cycles
        # (the result that stood for them, workloads parked with an equivalent one): their own
        # results are made only when asked for (`bulk_results`), as they can be many
        self.bulk: list[tuple[WorkloadResult, set[str]]] = []
        self.bulk_keys = True  # whether `bulk` is kept (a pass that makes no bulk results need not)
        # the answer each waiting workload was last given (the engine's, which the service reads
        # back after a restart): an orphan already told its queue is missing is not told again
        self.answered: Answers | None = None

    # ------------------------------------------------------------ the cycle

    def run(self) -> dict[str, WorkloadResult]:
        self.number = self.queues.next_scheduling_cycle()
        self.report_orphans()
        heads = self.queues.heads()
        entries = []
        rejected = []  # heads Kueue's nomination finds inadmissible before any flavor is assigned
        for wl, cq in heads:
            problem = nomination_problem(self.state, wl, cq)
            if problem is None:
                entries.append(self.nominate(wl, cq))
            else:
                rejected.append((wl, cq, problem))
        entries.sort(key=self.classical_order())
        ordered: Iterable[Entry] = entries
        if self.state.config.fair_sharing is not None:
            ordered = self.fair_sharing_order(entries)
        outcomes = []
        try:
            for entry in ordered:
                under_hold = bool(self.held)  # capacity held by an earlier entry may be what it lacks
                outcomes.append((entry, *self.process(entry), under_hold))
        finally:
            for charge, sign in reversed(self.held):
                self.state.apply_charge(charge, -sign)
            self.held.clear()
        for wl, cq, problem in rejected:
            result = self.not_admitted(wl, cq.name, problem.message, INADMISSIBLE, problem.reason)
            self.stopped(result, StopRecord(problem.step, problem.explained))
            outcomes.append((Entry(wl, cq, None, FlavorAssignment([])), result, problem.requeue, False))
        for entry, result, requeue, under_hold in outcomes:
            self.decided[result.key] = result
            if requeue is None:
                continue
            in_heap, moved, moved_count = self.queues.requeue(
                entry.wl, entry.cq.name, requeue, result, under_hold=under_hold,
                topology_blocked=entry.assignment.topology_failed, keys=self.bulk_keys)
            result.status = PENDING if in_heap else INADMISSIBLE
            if isinstance(result.stop, StopRecord) and not in_heap:
                result.stop.parked = True
                result.stop.requeue_on = requeue_triggers(self.state, entry.cq, wl=entry.wl,
                                                          topology_blocked=entry.assignment.topology_failed)
            if not in_heap:
                self.parked += 1
            elif self.queues.scan_progress.get(entry.wl.key) is not None:
                self.rescans += 1
            if moved:
                self.bulk.append((result, moved))
            self.parked += moved_count
        return self.decided

    def classical_order(self) -> Callable[[Entry], tuple]:
        """Kueue's order of the heads without fair sharing: waiting for its preemptions first
        (PrioritizePreemptorWorkloads), then within nominal quota before borrowing, higher
        priority (PrioritySortingWithinCohort), the older queue-order timestamp."""
        state, gates, queues = self.state, self.state.gates, self.queues
        by_priority = gates.PrioritySortingWithinCohort
        preemptors_first = gates.PrioritizePreemptorWorkloads

        def key(e: Entry) -> tuple:
            return (preemptors_first and not queues.is_preemptor(e.wl, e.cq.name), e.borrows,
                    -state.priority_of(e.wl) if by_priority else 0, queue_order_timestamp(state, e.wl), e.wl.key)

        return key

    def fair_sharing_order(self, entries: list[Entry]) -> FairSharingIterator[Entry]:
        """The entries in Kueue's fair-sharing order, shares computed as entries are processed."""
        gates = self.state.gates

        def info(e: Entry) -> HeadInfo:
            usage = {} if e.wl.has_quota_reservation else e.assignment.usage()
            priority = -self.state.priority_of(e.wl) if gates.PrioritySortingWithinCohort else 0
            return HeadInfo(e.cq.name, usage, (priority, queue_order_timestamp(self.state, e.wl)))

        return FairSharingIterator(self.state.quota, entries, info,
                                   prioritize_non_borrowing=gates.FairSharingPrioritizeNonBorrowing,
                                   shares=self.preemptor.fair_shares)

    def bulk_results(self, unanswered: Callable[[set[str], WorkloadResult], Iterable[str]] = lambda keys, _r: keys,
                     ) -> dict[str, WorkloadResult]:
        """The results of the workloads parked with an equivalent one in this cycle (only those
        `unanswered` says need one)."""
        out = {}
        for result, keys in self.bulk:
            for key in unanswered(keys, result):
                wl = self.state.workload(key)
                if wl is not None:
                    out[key] = equivalent_result(result, wl)
        return out

    def report_orphans(self) -> None:
        """Pending workloads whose LocalQueue or ClusterQueue is missing or stopped, once when found so
        (not again when the last answer they were given already says it)."""
        for key, orphan in self.queues.unreported_orphans():
            wl = self.state.workload(key)
            if self.answered is not None and self.answered.get(key) == (INADMISSIBLE, message_shape(orphan.message)):
                continue
            if wl is not None:
                self.decided[key] = self.orphaned(wl, orphan.cluster_queue, orphan.message)

    def orphaned(self, wl: Workload, cq: str, message: str) -> WorkloadResult:
        """Kueue's workload controller on a workload whose LocalQueue or ClusterQueue is missing or
        stopped: QuotaReserved=False with reason Inadmissible, and no event (no scheduling cycle
        looks at it)."""
        pod_sets = [PodSetResult(ps.name, ps.count) for ps in wl.pod_sets]
        return WorkloadResult(wl, cq, INADMISSIBLE, message, pod_sets, list(wl.unhealthy_nodes),
                              conditions=self.unreserved(wl, INADMISSIBLE, message))

    def nominate(self, wl: Workload, cq: ClusterQueue) -> Entry:
        assigner = FlavorAssigner(self.state, wl, cq, self.preemptor)
        generation = self.state.allocatable_resource_generation(cq.name)
        assigner.progress = self.current_scan_progress(wl, generation)
        entry = Entry(wl, cq, assigner, FlavorAssignment([]), generation=generation)
        self.assign(entry)
        if entry.mode != FIT and not wl.has_quota_reservation:
            usage = entry.assignment.usage() if entry.mode == PREEMPT else None
            entry.checks = quota_checks(self.state, cq, usage, wl)
        return entry

    @contextmanager
    def replacing(self, e: Entry) -> Iterator[None]:
        """The state as the entry's replacement sees it: the workload slice it replaces has given
        back its quota and TAS usage (its kept pods are counted by the placement) and is no
        preemption candidate (Kueue charges only the delta and filters the slice out of the targets)."""
        old = e.assigner.replaced
        if old is None:
            yield
            return
        excluded = self.preemptor.excluded
        added = old.key not in excluded
        excluded.add(old.key)
        try:
            with self.preemptor.without([old]):
                yield
        finally:
            if added:
                excluded.discard(old.key)

    def current_scan_progress(self, wl: Workload, generation: int) -> FlavorScanProgress | None:
        """Where the workload's last flavor scan stopped, unless that is outdated (then forgotten)."""
        progress = self.queues.scan_progress.get(wl.key)
        if progress is None:
            return None
        if progress.outdated(generation, self.number, self.queues.shape(wl),
                             preserve=self.state.gates.FlavorFungibilityPreserveScanProgress):
            del self.queues.scan_progress[wl.key]
            return None
        return progress

    def record_scan_progress(self, e: Entry, *, keep: bool) -> None:
        """Keep where the entry's flavor scan stopped for its next attempt (`keep`), or forget it
        so that the next attempt scans every flavor again."""
        if keep and e.assignment.pending_flavors:
            self.queues.scan_progress[e.wl.key] = FlavorScanProgress(
                dict(e.assignment.tried), e.generation, self.number, self.queues.shape(e.wl))
        else:
            self.queues.scan_progress.pop(e.wl.key, None)

    def assign(self, e: Entry) -> None:
        """Flavors, TopologyAssignments and, when it takes preemption, the targets (Kueue's getAssignments):
        with every PodSet's full count, else (partial admission) the largest counts that fit."""
        with self.replacing(e):
            self._assign(e)

    def _assign(self, e: Entry) -> None:
        assignment, targets = self.try_counts(e, None)
        # not admissible: no targets found (what the search had to choose from is kept)
        if not self.admissible(assignment, targets) and self.state.gates.PartialAdmission \
                and can_be_partially_admitted(e.wl):
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

    def try_counts(self, e: Entry, counts: dict[str, int] | None) -> tuple[FlavorAssignment, Targets]:
        assignment = e.assigner.assign(counts)
        if assignment.mode != NO_FIT:
            e.assigner.assign_topology(assignment)
        if assignment.mode != PREEMPT:
            return assignment, Targets()
        return assignment, e.assigner.preemption_targets(assignment)

    @staticmethod
    def admissible(assignment: FlavorAssignment, targets: list[Target]) -> bool:
        return assignment.mode == FIT or (assignment.mode == PREEMPT and bool(targets))

    def reduce(self, e: Entry) -> tuple[FlavorAssignment, Targets] | None:
        """Partial admission: binary search for the smallest reduction, spread over the PodSets in
        proportion to what each may give up (count - minCount), that fits or can preempt to fit."""
        counts_of = {ps.name: self.state.pods_after_reclaim(e.wl, ps) for ps in e.wl.pod_sets}
        deltas = {ps.name: max(counts_of[ps.name] - (ps.min_count if ps.min_count is not None else ps.count), 0)
                  for ps in e.wl.pod_sets}
        total = sum(deltas.values())
        if total == 0:
            return None  # its completed pods already took it down to its minimum
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

    def process(self, e: Entry) -> tuple[WorkloadResult, str | None]:
        """The entry's outcome, and how it goes back to its queue (None: it does not); a result
        that is not an admission carries where the cycle stopped it (`result.stop`)."""
        nominated_fit = e.mode == FIT
        # where nomination found no room on the nodes as they are (before this cycle's holds)
        nominated_failure = e.assignment.topology_failure if e.assignment.topology_failed else None
        overlap = self.recompute_overlap(e)
        check = self.fits(e)
        recomputed = bool(overlap)
        if check == _NO_TOPOLOGY and self.state.gates.TASRecomputeAssignmentWithinSchedulingCycle:
            recomputed = True
            # the nominated TopologyAssignment was computed before this cycle's admissions: recompute it,
            # keeping the nominated flavors
            self.recompute(e)
            check = self.fits(e)
        if e.mode == NO_FIT or (e.mode == PREEMPT and not e.targets):
            # a workload with flavors left to try goes back to its queue at once, to try them next
            self.record_scan_progress(e, keep=True)
            if e.assignment.pending_flavors:
                requeue = REQUEUE_IMMEDIATE
            else:
                requeue = REQUEUE_NO_FIT if e.mode == NO_FIT else REQUEUE_NO_CANDIDATES
            status = PENDING if e.assignment.pending_flavors else INADMISSIBLE
            # recomputed after earlier heads of the cycle took or held room: where nomination found
            # it all, what they took is what stops it (one that now needs preemption and finds no
            # target would fit once a hold is gone); where it lacked room, the nodes as they are do
            taken = recomputed and not e.assignment.pending_flavors and (e.mode == NO_FIT or nominated_fit)
            if overlap:
                lacks = shortfall_text(e.checks) or e.assignment.failure
                outcome = "still does not fit" if e.mode == NO_FIT else "needs preemption but finds no other target"
                stop = self.overlap_stop(e, overlap, f"{outcome}: {lacks}")
            elif taken:
                stop = self.taken_stop(e, self.lacking(e))
            else:
                stop = self.unfit_stop(e, nominated_failure if recomputed else None)
            if e.mode == NO_FIT:
                result = self.not_admitted(e.wl, e.cq.name, e.assignment.failure, status, e.assignment.kind,
                                           assignment=e.assignment)
                return self.stopped(result, stop), requeue
            if e.cq.preemption.get("reclaimWithinCohort") != "Any":
                self.reserve(e)  # Kueue's CanAlwaysReclaim is false: hold the capacity for this cycle
            result = self.not_admitted(e.wl, e.cq.name, e.assignment.failure, status, WAITING_FOR_QUOTA,
                                       assignment=e.assignment)
            return self.stopped(result, stop), requeue
        gates = self.state.gates
        if e.mode == PREEMPT and (gates.MultiKueueOrchestratedPreemption or gates.ConcurrentAdmission) \
                and e.wl.has_closed_preemption_gate:
            # Kueue's markPreemptionGated: no preemption is issued, every flavor is tried again next time
            self.record_scan_progress(e, keep=False)
            result = self.not_admitted(e.wl, e.cq.name, PREEMPTION_GATED, PENDING, ADMISSION_GATED,
                                       assignment=e.assignment)
            result.conditions.append(Condition("BlockedOnPreemptionGates", "True", "PreemptionGated",
                                               PREEMPTION_GATED, self.now))
            return self.stopped(result, StopRecord(stops.PREEMPTION_GATED, PREEMPTION_GATED)), \
                REQUEUE_PREEMPTION_GATED
        # skipped for what another entry of this cycle took: FlavorFungibilityPreserveScanProgress keeps
        # the scan's progress (contention within a cycle says nothing of the flavor); preemptions
        # issued or an admission end the scan
        overlapping = [t.workload.key for t in e.targets if t.workload.key in self.preempted]
        skipped = bool(overlapping) or check != _FITS
        self.record_scan_progress(e, keep=skipped and self.state.gates.FlavorFungibilityPreserveScanProgress)
        if overlapping:
            result = self.not_admitted(e.wl, e.cq.name, OVERLAPPING_TARGETS, PENDING, WAITING_FOR_QUOTA,
                                       assignment=e.assignment)
            others = sorted({self.preempted_for[k] for k in overlapping if k in self.preempted_for})
            return self.stopped(result, StopRecord(
                stops.OVERLAPPING_TARGETS, f"its preemption targets {', '.join(overlapping)} are being preempted "
                f"for {', '.join(others) or 'another workload'} in this cycle", blocking=others,
                details={"targets": overlapping})), REQUEUE_IMMEDIATE
        if check != _FITS:
            result = self.not_admitted(e.wl, e.cq.name, NO_LONGER_FITS, PENDING, WAITING_FOR_QUOTA,
                                       assignment=e.assignment)
            return self.stopped(result, self.taken_stop(e, check)), REQUEUE_IMMEDIATE
        if overlap and e.mode == FIT:
            # Kueue's DeferredFit: it fits once the preemptions issued in this cycle are done; it
            # holds what it would use for the rest of the cycle and waits for them
            self.record_scan_progress(e, keep=False)
            self.hold(e, e.assignment.usage())
            result = self.not_admitted(e.wl, e.cq.name, DEFERRED_FIT, PENDING, WAITING_FOR_PREEMPTED,
                                       assignment=e.assignment)
            stop = self.overlap_stop(e, overlap, "fits once they are gone", verdict=stops.PREEMPTING)
            # skipped, as Kueue marks it: back to its heap, not its ClusterQueue's preemptor
            return self.stopped(result, stop), REQUEUE_IMMEDIATE
        for t in e.targets:
            self.preempted[t.workload.key] = t.workload
            self.preempted_for[t.workload.key] = e.wl.key
        if e.mode == PREEMPT:
            self.hold(e, e.assignment.usage())
            stop = stops.preemption_stop("waiting for the preemption of", e.targets, e.checks, e.assignment.failure)
            return self.stopped(self.preempt(e), stop), REQUEUE_PENDING_PREEMPTION
        if self.admission_blocked():
            self.blocked = True
            holders = sorted(w.key for w in self.state.holders() if not_ready(w))[:10]
            stop = StopRecord(stops.PODS_READY, "fits, but waitForPodsReady blocks admission until the pods of "
                              f"{', '.join(holders) or 'the admitted workloads'} are ready", blocking=holders)
            return self.stopped(self.waiting_for_pods_ready(e), stop), REQUEUE_IMMEDIATE
        self.admitted += 1
        if e.assigner.replaced is not None:
            self.replace_slice(e.wl, e.assigner.replaced)
        return self.admit(e.wl, e.cq.name, e.assignment,
                          {n: p.assignment for n, p in e.assignment.placements.items()}), None

    def recompute(self, e: Entry) -> None:
        """Compute the entry's assignment again on the state as it is now, keeping the flavors
        nomination chose (Kueue's NominationMapping) and scanning them from the first."""
        e.assigner.nominated = {psf.pod_set.name: dict(psf.flavors) for psf in e.assignment.pod_sets}
        e.assigner.progress = None
        try:
            self.assign(e)
        finally:
            e.assigner.nominated = None

    def recompute_overlap(self, e: Entry) -> list[str]:
        """RecomputeAssignmentUponPreemptionTargetsOverlap: a head whose preemption targets are
        already preempted for another head of this cycle is assigned again as if every preemption
        issued in this cycle were done (their workloads gone, no longer candidates), the usage
        held by the heads before it still counted. It then preempts the new targets it finds,
        waits for those preemptions if it fits (DeferredFit), or stays pending. Returns the
        targets it overlapped on (none: not recomputed)."""
        overlapping = [t.workload.key for t in e.targets if t.workload.key in self.preempted]
        if not overlapping or not self.state.gates.RecomputeAssignmentUponPreemptionTargetsOverlap:
            return []
        gone = list(self.preempted.values())
        excluded = self.preemptor.excluded
        added = [w.key for w in gone if w.key not in excluded]
        excluded.update(added)
        try:
            with self.preemptor.without(gone):
                self.recompute(e)
                if e.mode != FIT and not e.wl.has_quota_reservation:
                    usage = e.assignment.usage() if e.mode == PREEMPT else None
                    e.checks = quota_checks(self.state, e.cq, usage, e.wl)
                else:
                    e.checks = []
        finally:
            excluded.difference_update(added)
        return overlapping

    def overlap_stop(self, e: Entry, overlapping: list[str], outcome: str, *, verdict: str = stops.WAITS
                     ) -> StopRecord:
        """A head recomputed because its targets were preempted for another head of this cycle:
        `outcome` is what it found on the state as if those preemptions were done."""
        others = sorted({self.preempted_for[k] for k in overlapping if k in self.preempted_for})
        preempted = sorted(self.preempted)
        return StopRecord(stops.OVERLAPPING_TARGETS,
                          f"its preemption targets {', '.join(overlapping)} are being preempted for "
                          f"{', '.join(others) or 'another workload'} in this cycle; assigned again as if the "
                          f"preemptions of this cycle ({', '.join(preempted)}) were done, it {outcome}",
                          verdict=verdict, blocking=preempted if verdict == stops.PREEMPTING else others,
                          quota=e.checks, details={"targets": overlapping, "recomputed": True})

    # ------------------------------------------------------------ where a head stopped

    def stopped(self, result: WorkloadResult, stop: StopRecord) -> WorkloadResult:
        stop.cluster_queue = result.cluster_queue
        stop.reason = result.message
        stop.at = self.now
        stop.cycle = self.number
        stop.pass_number = self.pass_number
        stop.representative = result.key
        result.stop = stop
        return result

    def unfit_stop(self, e: Entry, nominated: tuple[str, str] | None = None) -> StopRecord:
        """A head that neither fits nor can preempt: the step that stopped it, with nomination's
        numbers; `nominated` is the PodSet and reason of a TAS placement that failed at
        nomination, for a head recomputed since (under what other heads held: the nodes as
        they are are what nomination saw)."""
        a = e.assignment
        psf = a.pod_set(a.failed_pod_set) if a.failed_pod_set else None
        reason = psf.failure_reason if psf is not None else a.failure
        if a.pending_flavors:
            return StopRecord(stops.FLAVORS_LEFT, f"{reason}; sent back to try its remaining flavors next cycle",
                              verdict=stops.UNDECIDED, quota=e.checks)
        if e.mode == PREEMPT:
            details: dict[str, Any] = {"candidates": e.targets.candidates}
            failure = nominated or (a.topology_failure if a.topology_failed else None)
            if failure is not None:  # the nodes as they are had no room: which PodSet, and why
                details["podSet"], details["reason"] = failure
                reason = failure[1]
            return StopRecord(stops.NO_CANDIDATES, f"{shortfall_text(e.checks) or reason}; "
                              f"{stops.no_targets_text(e.targets.candidates, f'ClusterQueue {e.cq.name}')}",
                              quota=e.checks, details=details)
        if a.kind == TOPOLOGY_PLACEMENT_FAILED or (psf is not None and psf.kind == TOPOLOGY_PLACEMENT_FAILED):
            flavor = next((f for f in psf.flavors.values()), "") if psf is not None else ""
            tr = psf.pod_set.topology_request if psf is not None else None
            level = (tr.required or tr.preferred or "") if tr is not None else ""
            if psf is not None and psf.empty_failure:
                # Kueue's condition keeps the first reason (quota short, or the placement on the
                # nodes as they are); what stops it for good is that no room made would do
                return StopRecord(stops.TOPOLOGY, f"topology: {never_fits_text(flavor, psf.empty_failure)}",
                                  details={"podSet": a.failed_pod_set, "flavor": flavor, "level": level,
                                           "reason": psf.empty_failure, "withNoWorkloads": True})
            return StopRecord(stops.TOPOLOGY, f"topology: {reason}", details={
                "podSet": a.failed_pod_set, "flavor": flavor, "level": level, "reason": reason})
        if a.kind == EXCEEDS_MAX_QUOTA:
            return StopRecord(stops.EXCEEDS_QUOTA, f"quota: {reason}", quota=e.checks)
        if a.kind == NO_MATCHING_FLAVOR or not e.checks:
            return StopRecord(stops.NO_FLAVOR, reason)
        limits = sorted({c.limit for c in e.checks if not c.fits and c.limit})
        if limits:
            return StopRecord(stops.QUOTA_LIMIT, f"quota: {shortfall_text(e.checks)}, held back by the "
                              f"{' and '.join(limits)}", quota=e.checks, details={"limits": limits})
        return StopRecord(stops.QUOTA, f"quota: {shortfall_text(e.checks) or reason}", quota=e.checks)

    def lacking(self, e: Entry) -> str:
        """What an entry recomputed in this cycle lacks now: quota (some of it held or taken by
        earlier heads), else room on the nodes."""
        if not e.wl.has_quota_reservation and any(
                not c.fits for c in quota_checks(self.state, e.cq, e.assignment.usage())):
            return _NO_QUOTA
        return _NO_TOPOLOGY

    def taken_stop(self, e: Entry, check: str) -> StopRecord:
        """A head that fitted at nomination but not after what earlier heads of this cycle took or
        held: the numbers now, and who took it."""
        if check == _NO_QUOTA:
            checks = quota_checks(self.state, e.cq, e.assignment.usage())
            short = {FlavorResource(c.flavor, c.resource) for c in checks if not c.fits}
            root = self.cohort_root(e.cq.name)
            takers = [key for key, cq, charge in self.takers
                      if short & set(charge.quota) and self.cohort_root(cq) == root]
            return StopRecord(stops.QUOTA_HELD, f"quota: {shortfall_text(checks)}: held by "
                              f"{self.taken_by(takers)} in this cycle", quota=checks, blocking=takers)
        flavors = {f for psf in e.assignment.pod_sets for f in psf.flavors.values()}
        takers = [key for key, _cq, charge in self.takers if any(t.flavor in flavors for t in charge.tas)]
        return StopRecord(stops.TOPOLOGY_HELD, f"topology: no room left on flavor(s) {', '.join(sorted(flavors))} "
                          f"after {self.taken_by(takers)} in this cycle", blocking=takers,
                          details={"flavors": sorted(flavors)})

    def taken_by(self, takers: list[str]) -> str:
        if not takers:
            return "another workload"
        names = []
        preempting = set(self.preempted_for.values())
        for key in takers:
            what = "admission" if key in self.admitted_now else "preemption" if key in preempting else "reservation"
            names.append(f"{key}'s {what}")
        return ", ".join(names)

    def cohort_root(self, cq: str) -> str:
        node = self.state.quota.queues.get(cq)
        return root_of(node).name if node is not None else cq

    def admission_blocked(self) -> bool:
        """waitForPodsReady with blockAdmission, and some workload holding quota is not ready."""
        config = self.state.config.wait_for_pods_ready
        if config is None or not config.block_admission:
            return False
        return self.blocked or any_not_ready(self.state.holders())

    def fits(self, e: Entry) -> str:
        """Whether the entry's quota and TopologyAssignments fit what is left, counting the capacity
        of every workload being preempted (this cycle's targets and its own) as free."""
        gone = {w.key: w for w in self.preempted.values()}
        gone.update({t.workload.key: t.workload for t in e.targets})
        if e.assigner.replaced is not None:
            gone[e.assigner.replaced.key] = e.assigner.replaced
        with self.preemptor.without(list(gone.values())):
            if not e.wl.has_quota_reservation:
                for fr, value in e.assignment.usage().items():
                    if value > self.state.quota.available(e.cq.name, fr):
                        return _NO_QUOTA
            if not self.assignments_fit(e):
                return _NO_TOPOLOGY
        return _FITS

    def assignments_fit(self, e: Entry) -> bool:
        """The entry's TopologyAssignments fit what the nodes have left, its PodSets' pods on one
        node counted together."""
        by_flavor: dict[str, list[tuple[Mapping[str, int], TopologyAssignment]]] = {}
        snapshots = self.state.tas_snapshots
        for name, placement in e.assignment.placements.items():
            psf = e.assignment.pod_set(name)
            flavor = next((f for f in psf.flavors.values() if f in snapshots), None)
            if flavor is not None and placement.assignment is not None:
                by_flavor.setdefault(flavor, []).append((psf.pod_set.spec.requests, placement.assignment))
        return all(assignments_fit(snapshots[flavor], placed) for flavor, placed in by_flavor.items())

    # ------------------------------------------------------------ usage held for this cycle

    def hold(self, e: Entry, quota: dict[FlavorResource, int]) -> None:
        """Count `quota` and the entry's TopologyAssignments as used until the cycle ends."""
        charge = Charge(e.cq.name)
        if not e.wl.has_quota_reservation:
            charge.quota = {fr: value for fr, value in quota.items() if value}
        snapshots = self.state.tas_snapshots
        for name, placement in e.assignment.placements.items():
            psf = e.assignment.pod_set(name)
            if placement.assignment is None or psf is None:
                continue
            tas = {f for f in psf.flavors.values() if f in snapshots}
            if len(tas) == 1:
                charge.tas.append(TASCharge(tas.pop(), placement.assignment, psf.pod_set.spec.requests))
        self.state.apply_charge(charge, 1)
        self.held.append((charge, 1))
        self.takers.append((e.wl.key, e.cq.name, charge))
        old = e.assigner.replaced
        if old is not None and old.key in self.state.charges:
            # the slice it replaces gives its usage back as long as the replacement's is held
            released = self.state.charges[old.key]
            self.state.apply_charge(released, -1)
            self.held.append((released, -1))

    def reserve(self, e: Entry) -> None:
        """Hold what a workload that needs preemption but found no targets would use, so that workloads
        further back cannot take it first in this cycle (the ClusterQueue cannot always reclaim it later)."""
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
        self.hold(e, reserved)

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
        self.decided[t.workload.key] = preempt_target(self.state, self.result, self.preemptor, self.now, e.wl, t,
                                                      preemptor_path)

    def replace_slice(self, new: Workload, old: Workload) -> None:
        """The replacement is admitted: the old slice is finished as replaced and gives back its
        quota and TAS usage (Kueue's Scheduler.replaceWorkloadSlice)."""
        if old.is_finished:
            return
        message = (f"Replaced to accommodate a workload (UID: {new.uid}, JobUID: {new.labels.get(JOB_UID_LABEL, '')}) "
                   "due to workload slice aggregation")
        old.conditions = [c for c in old.conditions if c.type != "Finished"] + [
            Condition("Finished", "True", WORKLOAD_SLICE_REPLACED, message, self.now)]
        self.state.workload_changed(old)
        self.result.events.append(Event(old.key, "Normal", WORKLOAD_SLICE_REPLACED, message))
        result = unchanged_result(self.state, old)
        result.decided = True
        self.decided[old.key] = result

    def priority_text(self, wl: Workload) -> str:
        return priority_text(self.state, wl)

    def not_admitted(self, wl: Workload, cq: str, message: str, status: str, reason: str, *,
                     assignment: FlavorAssignment | None = None) -> WorkloadResult:
        pod_sets = []
        for ps in wl.pod_sets:
            psf = assignment.pod_set(ps.name) if assignment is not None else None
            flavors = dict(psf.flavors) if psf else {}
            failure = psf.failure_reason if psf is not None else ""
            pod_sets.append(PodSetResult(ps.name, ps.count, flavors, failure_reason=failure))
        observable = self.state.gates.UnadmittedWorkloadsObservability and reason
        cond_reason = reason if observable else "Pending"
        self.result.events.append(Event(wl.key, "Warning", cond_reason, message))
        return WorkloadResult(wl, cq, status, message, pod_sets, list(wl.unhealthy_nodes),
                              conditions=self.unreserved(wl, cond_reason, message))

    def unreserved(self, wl: Workload, reason: str, message: str) -> list[Condition]:
        """The conditions of a workload left without a reservation: QuotaReserved=False, and
        Admitted=False, which Kueue writes only with UnadmittedWorkloadsObservability."""
        conditions = [Condition("QuotaReserved", "False", reason, message, self.now)]
        if self.state.gates.UnadmittedWorkloadsObservability:
            conditions.append(wl.no_reservation_condition(self.now))
        return conditions

    def waiting_for_pods_ready(self, e: Entry) -> WorkloadResult:
        """A head that fits, held back by blocked admission (Kueue sets the condition itself,
        whatever the observability gate says, and emits no event)."""
        pod_sets = [PodSetResult(psf.pod_set.name, psf.count, dict(psf.flavors)) for psf in e.assignment.pod_sets]
        return WorkloadResult(e.wl, e.cq.name, PENDING, WAITING_MESSAGE, pod_sets, list(e.wl.unhealthy_nodes),
                              conditions=self.unreserved(e.wl, WAITING_REASON, WAITING_MESSAGE))

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
        # Kueue's prepareWorkload: Admitted is synced only when the workload lists every check its
        # ClusterQueue requires for these flavors, and is then True only if all the checks the
        # workload lists (required or not) are Ready
        required = self.state.checks_for_flavors(cq, flavors)
        states = {ac.name: ac.state for ac in wl.admission_checks}
        synced = required <= states.keys()
        needs_checks = not synced or any(state != "Ready" for state in states.values())
        status = QUOTA_RESERVED if needs_checks else ADMITTED
        queued = wait_seconds(wl.creation_timestamp, self.now)
        reserved = f"Quota reserved in ClusterQueue {cq_name}, wait time since queued was {queued}"
        considered = FlavorAssigner(self.state, wl, cq).considered_flavors(assignment)
        event = f"{reserved}; Flavors considered: {considered}" if considered else reserved
        # the conditions carry Kueue's SetQuotaReservation / SyncAdmittedCondition messages, the
        # events the wait times
        conditions = [Condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}",
                                self.now)]
        self.result.events.append(Event(wl.key, "Normal", "QuotaReserved", event))
        if needs_checks and synced and self.state.gates.UnadmittedWorkloadsObservability:
            conditions.append(Condition("Admitted", "False", "UnsatisfiedAdmissionChecks",
                                        "The workload has not all checks ready", self.now))
        if not needs_checks:
            admitted = f"Admitted by ClusterQueue {cq_name}, wait time since reservation was 0s"
            conditions.append(Condition("Admitted", "True", "Admitted", WORKLOAD_ADMITTED, self.now))
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
        self.state.workload_changed(wl)  # charged to the cache: later entries see its usage
        charge = self.state.charges.get(wl.key)
        if charge is not None:
            self.takers.append((wl.key, cq_name, charge))
            self.state.charge_penalty(wl, charge)
        return WorkloadResult(wl, cq_name, status, reserved, pod_sets, list(wl.unhealthy_nodes),
                              conditions=list(wl.conditions))


def priority_text(state: ClusterState, wl: Workload) -> str:
    value = state.priority_of(wl)
    return f"{value} (base: {value}, boost: 0)"


def preempt_target(state: ClusterState, result: PassResult, preemptor: Preemptor, now: datetime, by: Workload,
                   t: Target, preemptor_path: str) -> WorkloadResult:
    """Evict a preemption target for `by`: its Evicted and Preempted conditions, Kueue's events
    and decision; it keeps its quota until its pods are gone. Returns its result."""
    wl = t.workload
    target_cq = wl.admission.cluster_queue if wl.admission else ""
    message = (f"{preemption_message(by, t.reason)}; preemptor path: {preemptor_path}; "
               f"preemptee path: {preemptor.cluster_queue_path(target_cq)}")
    priorities = (f"preemptor effective priority: {priority_text(state, by)}; "
                  f"preemptee effective priority: {priority_text(state, wl)}")
    evict(wl, "Preempted", message, now)
    set_condition(wl, Condition("Preempted", "True", t.reason, message, now))
    state.workload_changed(wl)  # still holds its quota until its pods are gone
    result.events += [
        Event(wl.key, "Normal", "EvictedDueToPreempted", message),
        Event(wl.key, "Normal", "Preempted", f"{message}; {priorities}"),
        Event(by.key, "Normal", "PreemptedWorkload",
              f"Preempted workload {wl.key} (UID: {wl.uid}) in ClusterQueue {target_cq}; {priorities}"),
    ]
    result.decisions.append(Decision(wl.key, WORKLOAD_PREEMPTED, trigger=f"preempted by {by.key}", message=message))
    out = unchanged_result(state, wl)
    out.status, out.message, out.eviction_reason = PREEMPTED, message, message
    out.decided = True
    return out


@dataclass(frozen=True, slots=True)
class NominationProblem:
    """Why Kueue's nomination turns a head away before any flavor is assigned."""
    message: str  # the QuotaReserved condition's message
    requeue: str  # how the head is requeued
    reason: str  # the condition's reason (UnadmittedWorkloadsObservability)
    step: str  # the why-pending step (scheduler.stops)
    explained: str  # the why-pending line


def nomination_problem(state: ClusterState, wl: Workload, cq: ClusterQueue) -> NominationProblem | None:
    """Kueue's nomination checks of a head, in its order: an admission check in Retry or Rejected
    (its controller has to set it back first), its ClusterQueue under a cycle of Cohorts (left
    out of Kueue's snapshot as inactive), then the namespace and the resources
    (`admissibility_problem`). None when the head goes on to flavor assignment."""
    if wl.admission_checks and has_failed_checks(wl):
        failed = ", ".join(f"{c.name} is {c.state}" + (f" ({c.message})" if c.message else "")
                           for c in wl.admission_checks if c.state in FAILED_CHECK_STATES)
        return NominationProblem(FAILED_CHECKS, REQUEUE_GENERIC, PENDING_EVALUATION, stops.FAILED_CHECKS,
                                 f"{FAILED_CHECKS}: {failed}; it is tried again once its check controller "
                                 "sets them back")
    cycle = state.quota.cycle_of(cq)
    if cycle is not None:
        message = f"ClusterQueue {cq.name} is inactive"
        return NominationProblem(message, REQUEUE_GENERIC, MISCONFIGURED, stops.MISCONFIGURED,
                                 f"{message}: {cohort_cycle_text(cq, cycle)}")
    problem = admissibility_problem(state, wl, cq)
    if problem is None:
        return None
    message, requeue = problem
    return NominationProblem(message, requeue, MISCONFIGURED, stops.MISCONFIGURED, message)


def cohort_cycle_text(cq: ClusterQueue, cycle: tuple[str, ...]) -> str:
    """Why a ClusterQueue under a cycle of Cohorts admits nothing, for people."""
    where = "is in" if cycle[-1] == cycle[0] else "leads into"
    return (f"its Cohort {cq.cohort} {where} a cycle of Cohorts ({' -> '.join(cycle)}), and Kueue admits nothing "
            "in the ClusterQueues under a cycle until it is broken")


def admissibility_problem(state: ClusterState, wl: Workload, cq: ClusterQueue) -> tuple[str, str] | None:
    """Kueue's workload.ValidateAdmissibility, as nomination runs it: (the condition message, how the
    head is requeued) when the namespace does not match the ClusterQueue's namespaceSelector or the
    resources are invalid. Namespaces are checked only when the input lists Namespace objects."""
    if state.namespace_hold(wl.namespace, cq):  # Kueue's message for each of its two causes
        if wl.namespace not in state.namespaces:
            return f'workload namespace "{wl.namespace}" does not exist: namespaces "{wl.namespace}" not found', \
                REQUEUE_GENERIC
        return NAMESPACE_MISMATCH, REQUEUE_NAMESPACE_MISMATCH
    errors = []
    for i, ps in enumerate(wl.pod_sets):
        for path, names in ps.limit_violations:
            value = "[" + ",".join(f'"{n}"' for n in names) + "]"
            errors.append(f"spec.podSets[{i}].template.spec.{path}: Invalid value: {value}: {REQUESTS_EXCEED_LIMITS}")
    if errors:
        text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return f"{INVALID_RESOURCES}: {text}", REQUEUE_GENERIC
    return None


def can_be_partially_admitted(wl: Workload) -> bool:
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.pod_sets)


def unchanged_status(wl: Workload) -> str:
    """The status of a workload the pass left as it was (that of `unchanged_result`)."""
    evicted = wl.condition("Evicted")
    if wl.is_finished:
        return FINISHED
    if evicted is not None and evicted.status == "True" and (wl.has_quota_reservation or not wl.active):
        return EVICTED  # still holding its quota until its pods are gone (or deactivated for good)
    if wl.has_quota_reservation:
        return ADMITTED if wl.is_admitted else QUOTA_RESERVED
    return PENDING


def unchanged_result(state: ClusterState, wl: Workload) -> WorkloadResult:
    """A workload the pass left as it was: report its current state."""
    cq = state.cluster_queue_for(wl)
    evicted = wl.condition("Evicted")
    status = unchanged_status(wl)
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
            if message == WORKLOAD_ADMITTED and wl.admission is not None:  # Kueue's condition names no queue
                message = f"Admitted by ClusterQueue {wl.admission.cluster_queue}"
            break
    eviction = evicted.message if status == EVICTED and evicted is not None else ""
    return WorkloadResult(wl, cq.name if cq else "", status, eviction or message, pod_sets,
                          list(wl.unhealthy_nodes), eviction_reason=eviction, conditions=list(wl.conditions),
                          decided=False)


def equivalent_result(result: WorkloadResult, wl: Workload) -> WorkloadResult:
    """The result of a workload parked with an equivalent one: the same answer, not evaluated
    again (Kueue's scheduling equivalence hashing)."""
    pod_sets = [PodSetResult(ps.name, ps.count, dict(src.flavors), failure_reason=src.failure_reason)
                for ps, src in zip(wl.pod_sets, result.pod_sets, strict=False)]
    return WorkloadResult(wl, result.cluster_queue, result.status, result.message, pod_sets,
                          list(wl.unhealthy_nodes), conditions=list(result.conditions), stop=result.stop)
