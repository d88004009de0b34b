"""Preemption: which admitted workloads to evict so that a pending one fits (Kueue's classical
preemption).

Candidates are the admitted workloads that use a flavor/resource the preemptor needs and that
the ClusterQueue's policies allow it to preempt: lower priority ones in its own ClusterQueue
(`withinClusterQueue`), and workloads of other ClusterQueues of the cohort that borrow
(`reclaimWithinCohort`, subject to `borrowWithinCohort`). They are removed one by one, in
order (already evicted first, other ClusterQueues before the own one, lower priority first,
most recently admitted first), until the preemptor fits its quota and its TopologyAssignment;
then every removed workload that is not needed after all is put back.

With fair sharing on, `scheduler.fair_preemption` chooses the targets instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum

from scheduler.cluster import ClusterState
from scheduler.fair_sharing import FairShares
from scheduler.model import ClusterQueue, Workload
from scheduler.quota import (
    FlavorResource,
    QuotaNode,
    borrowing_height,
    fits_in_quota,
    is_borrowing_with,
    node_path,
    path_to_root,
    within_nominal,
)

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# what a preemption simulation for one flavor/resource found (the flavor assigner ranks flavors by it)
POSSIBLE_NONE, POSSIBLE_PREEMPT, POSSIBLE_RECLAIM = "NoCandidates", "Preempt", "Reclaim"


class Variant(IntEnum):
    NEVER = 0
    WITHIN_CQ = 1
    HIERARCHICAL_RECLAIM = 2  # the preemptor is closer to the quota the candidate uses
    RECLAIM_WITHOUT_BORROWING = 3  # only if the preemptor's ClusterQueue then does not borrow
    RECLAIM_WHILE_BORROWING = 4

    @property
    def reason(self) -> str:
        if self == Variant.WITHIN_CQ:
            return IN_CLUSTER_QUEUE
        if self == Variant.RECLAIM_WHILE_BORROWING:
            return IN_COHORT_RECLAIM_WHILE_BORROWING
        return IN_COHORT_RECLAMATION


@dataclass(slots=True)
class Target:
    workload: Workload
    reason: str


class Targets(list[Target]):
    """The targets a preemption search found, and how many candidates it had: the admitted
    workloads the preemption policies let it preempt. No targets with candidates means that
    preempting them would not make room."""

    candidates: int = 0


@dataclass(slots=True)
class _Candidate:
    workload: Workload
    cluster_queue: str
    lca: QuotaNode | None  # the cohort shared with the preemptor's ClusterQueue
    variant: Variant


def uses_resources(wl: Workload, frs: set[FlavorResource]) -> bool:
    if wl.admission is None:
        return False
    return any(FlavorResource(flavor, resource) in frs
               for psa in wl.admission.pod_set_assignments for resource, flavor in psa.flavors.items())


def preemption_message(preemptor: Workload, reason: str) -> str:
    uid = preemptor.uid or "UNKNOWN"
    job_uid = preemptor.labels.get(JOB_UID_LABEL) or "UNKNOWN"
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) "
            f"due to {HUMAN_READABLE_REASONS.get(reason, 'UNKNOWN')}")


class Preemptor:
    """Finds preemption targets on the cluster state as the current cycle sees it."""

    def __init__(self, state: ClusterState, now: datetime | None = None, excluded: set[str] | None = None) -> None:
        self.state = state
        self.now = now or datetime.now(UTC)
        # workloads admitted during this cycle: their usage counts, but they are not candidates
        self.excluded = excluded if excluded is not None else set()
        self.fair_shares = FairShares()  # what cohorts can lend, for fair preemption

    # ------------------------------------------------------------ snapshot edits

    def remove(self, wl: Workload) -> None:
        self.state.suspend_usage(wl)

    def restore(self, wl: Workload) -> None:
        self.state.resume_usage(wl)

    @contextmanager
    def without(self, workloads: list[Workload]) -> Iterator[None]:
        """The state as if `workloads` had released their quota and TAS usage."""
        for wl in workloads:
            self.remove(wl)
        try:
            yield
        finally:
            for wl in workloads:
                self.restore(wl)

    # ------------------------------------------------------------ queries

    def admitted_in(self, cq_name: str, *, below: int | None = None, up_to: int | None = None) -> list[Workload]:
        """The workloads holding quota in the ClusterQueue, except those admitted in this cycle,
        in the state's order; with `below` (`up_to`), only those of a lower (or equal) priority.

        None from an inactive ClusterQueue. A ClusterQueue can hold tens of thousands of
        workloads while a policy such as LowerPriority can only take the few below the
        preemptor: the cache keeps them by priority, so that only those are looked at."""
        if cq_name in self.state.inactive_cluster_queues:
            return []  # Kueue's snapshot leaves inactive ClusterQueues out, and their workloads with them
        ranked = self.state.holders_by_priority.get(cq_name, [])
        if below is not None:
            ranked = ranked[:bisect.bisect_left(ranked, (below,))]
        elif up_to is not None:
            ranked = ranked[:bisect.bisect_left(ranked, (up_to + 1,))]
        holders = self.state.holding.get(cq_name, {})
        excluded = self.excluded
        return [holders[key] for _, _, key in sorted(ranked, key=lambda e: e[1]) if key not in excluded]

    def queue_order_time(self, wl: Workload) -> datetime:
        return wl.creation_timestamp or _GO_ZERO_TIME

    def quota_reservation_time(self, wl: Workload) -> datetime:
        cond = wl.condition("QuotaReserved")
        if cond is None or cond.status != "True" or cond.last_transition_time is None:
            return self.now
        return cond.last_transition_time

    def ordering_key(self, cand: _Candidate, cq_name: str) -> tuple:
        """Kueue's CandidatesOrdering: evicted ones first, then those of other ClusterQueues,
        those of LocalQueues that used more first (admission fair sharing, in the preemptor's
        ClusterQueue), lower priority, admitted later."""
        wl = cand.workload
        same_queue = cand.cluster_queue == cq_name
        usage = 0.0
        if same_queue and self.state.orders_by_local_queue_usage(self.state.cluster_queues[cq_name]):
            usage = -self.state.local_queue_usage(wl.local_queue_key)
        return (not wl.condition_true("Evicted"), same_queue, usage, self.state.priority_of(wl),
                -self.quota_reservation_time(wl).timestamp(), wl.uid)

    # ------------------------------------------------------------ targets

    def get_targets(self, wl: Workload, cq: ClusterQueue, usage: Mapping[FlavorResource, int],
                    frs_need: set[FlavorResource], tas_fits: Callable[[], bool] | None = None) -> Targets:
        """The workloads to evict for `wl` to fit `usage` (and, through `tas_fits`, its topology)."""
        fair_sharing = self.state.config.fair_sharing
        search: _Search
        if fair_sharing is not None:
            from scheduler.fair_preemption import FairSearch  # it builds on _Search below

            search = FairSearch(self, wl, cq, dict(usage), frs_need, tas_fits,
                                strategies=fair_sharing.preemption_strategies, shares=self.fair_shares)
        else:
            search = _Search(self, wl, cq, dict(usage), frs_need, tas_fits)
        found = Targets(search.run())
        found.candidates = search.candidates
        return found

    def simulate(self, wl: Workload, cq: ClusterQueue, fr: FlavorResource, value: int) -> tuple[str, int]:
        """Whether preemption could make room for `value` of one flavor/resource: NoCandidates,
        Preempt (some targets are in the ClusterQueue) or Reclaim (all are elsewhere in the cohort),
        and the borrowing height after those preemptions."""
        node = self.state.quota.queues[cq.name]
        targets = self.get_targets(wl, cq, {fr: value}, {fr})
        if not targets:
            return POSSIBLE_NONE, borrowing_height(node, fr, value)[0]
        with self.without([t.workload for t in targets]):
            height = borrowing_height(node, fr, value)[0]
        if any(t.workload.admission.cluster_queue == cq.name for t in targets):
            return POSSIBLE_PREEMPT, height
        return POSSIBLE_RECLAIM, height

    def cluster_queue_path(self, name: str) -> str:
        node = self.state.quota.queues.get(name)
        return node_path(node) if node is not None else f"/{name}"


class _Search:
    """One preemption search: candidates, then removal until the preemptor fits, then fill-back."""

    def __init__(self, preemptor: Preemptor, wl: Workload, cq: ClusterQueue, usage: dict[FlavorResource, int],
                 frs_need: set[FlavorResource], tas_fits: Callable[[], bool] | None) -> None:
        self.p = preemptor
        self.state = preemptor.state
        self.wl = wl
        self.cq = cq
        self.node = self.state.quota.queues[cq.name]
        self.usage = usage
        self.frs_need = frs_need
        self.tas_fits = tas_fits
        self.candidates = 0  # how many the policies allowed (set by `run`)
        self.priority = self.state.priority_of(wl)
        borrow_within = dict(cq.preemption.get("borrowWithinCohort") or {})
        self.borrow_forbidden = borrow_within.get("policy", "Never") == "Never"
        threshold = borrow_within.get("maxPriorityThreshold")
        self.threshold = int(threshold) if threshold is not None else None

    # ------------------------------------------------------------ policy

    def policy(self, same_queue: bool) -> str:
        key = "withinClusterQueue" if same_queue else "reclaimWithinCohort"
        return str(self.cq.preemption.get(key) or "Never")

    def satisfies_policy(self, cand: Workload, same_queue: bool) -> bool:
        policy = self.policy(same_queue)
        cand_priority = self.state.priority_of(cand)
        lower = self.priority > cand_priority
        if policy == "LowerPriority":
            return lower
        if policy == "LowerOrNewerEqualPriority":
            newer_equal = cand_priority == self.priority and \
                self.p.queue_order_time(self.wl) < self.p.queue_order_time(cand)
            return lower or newer_equal
        return policy == "Any"

    def classify(self, cand: Workload, cand_cq: str, advantage: bool) -> Variant:
        charge = self.state.charges.get(cand.key)
        uses = not charge.names.isdisjoint(self.frs_need) if charge is not None else uses_resources(cand, self.frs_need)
        if not uses:
            return Variant.NEVER
        same_queue = cand_cq == self.cq.name
        if not self.satisfies_policy(cand, same_queue):
            return Variant.NEVER
        if same_queue:
            return Variant.WITHIN_CQ
        if advantage:
            return Variant.HIERARCHICAL_RECLAIM
        if self.borrow_forbidden:
            return Variant.RECLAIM_WITHOUT_BORROWING
        cand_priority = self.state.priority_of(cand)
        if cand_priority >= self.priority or (self.threshold is not None and cand_priority > self.threshold):
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING

    # ------------------------------------------------------------ candidates

    def from_queue(self, cq_node: QuotaNode, lca: QuotaNode | None, advantage: bool) -> list[_Candidate]:
        policy = self.policy(cq_node.name == self.cq.name)
        if policy == "Never":
            return []
        if policy == "LowerPriority":
            holders = self.p.admitted_in(cq_node.name, below=self.priority)
        elif policy == "LowerOrNewerEqualPriority":
            holders = self.p.admitted_in(cq_node.name, up_to=self.priority)
        else:
            holders = self.p.admitted_in(cq_node.name)
        out = []
        for cand in holders:
            variant = self.classify(cand, cq_node.name, advantage)
            if variant != Variant.NEVER:
                out.append(_Candidate(cand, cq_node.name, lca, variant))
        return out

    def same_queue_candidates(self) -> list[_Candidate]:
        if self.policy(True) == "Never":
            return []
        return self.from_queue(self.node, None, False)

    def cohort_candidates(self) -> tuple[list[_Candidate], list[_Candidate]]:
        """(hierarchy candidates, priority candidates) from the ClusterQueue's cohort tree."""
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if self.node.parent is None or self.policy(False) == "Never":
            return hierarchy, by_priority
        advantage, remaining = fits_in_quota(self.node, self.usage)
        previous: QuotaNode | None = None
        for subtree_root in path_to_root(self.node):
            self.collect(subtree_root, subtree_root, previous, advantage, hierarchy if advantage else by_priority)
            fits, remaining = fits_in_quota(subtree_root, remaining)
            advantage = advantage or fits
            previous = subtree_root
        return hierarchy, by_priority

    def collect(self, current: QuotaNode, subtree_root: QuotaNode, skip: QuotaNode | None, advantage: bool,
                out: list[_Candidate]) -> None:
        """Candidates in the subtree, skipping parts within their quota and the one already visited."""
        for child in current.children:
            if child.is_cohort:
                if child is skip or within_nominal(child, self.frs_need):
                    continue
                self.collect(child, subtree_root, skip, advantage, out)
        for child in current.children:
            if not child.is_cohort and child is not self.node and not within_nominal(child, self.frs_need):
                out.extend(self.from_queue(child, subtree_root, advantage))

    def ordered(self, candidates: list[_Candidate]) -> list[_Candidate]:
        return sorted(candidates, key=lambda c: self.p.ordering_key(c, self.cq.name))

    # ------------------------------------------------------------ search

    def run(self) -> list[Target]:
        same = self.ordered(self.same_queue_candidates())
        hierarchy, by_priority = self.cohort_candidates()
        hierarchy, by_priority = self.ordered(hierarchy), self.ordered(by_priority)

        def evicted(c: _Candidate) -> bool:
            return c.workload.condition_true("Evicted")

        groups = [hierarchy, by_priority, same]
        candidates = [c for g in groups for c in g if evicted(c)] + [c for g in groups for c in g if not evicted(c)]
        self.candidates = len(candidates)
        if not candidates:
            return []
        if (not hierarchy and not by_priority) or (self.borrow_forbidden and not self.under_nominal()):
            attempts = [True]
        elif self.borrow_forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            targets = self.attempt(candidates, borrowing)
            if targets:
                return targets
        return []

    def under_nominal(self) -> bool:
        return all(self.node.usage[fr] < self.state.quota.nominal(self.cq.name, fr) for fr in self.frs_need)

    def attempt(self, candidates: list[_Candidate], borrowing: bool) -> list[Target]:
        removed: list[_Candidate] = []
        try:
            for cand in candidates:
                if not self.valid(cand, borrowing):
                    continue
                self.p.remove(cand.workload)
                removed.append(cand)
                if self.fits(borrowing):
                    return self.fill_back(removed, borrowing)
            return []
        finally:
            for cand in removed:
                self.p.restore(cand.workload)

    def fill_back(self, removed: list[_Candidate], borrowing: bool) -> list[Target]:
        """Put back every removed workload (latest first, except the last) the preemptor does not need
        gone. `removed` keeps exactly the workloads still removed, so the caller can restore them."""
        kept = list(removed)
        for i in range(len(kept) - 2, -1, -1):
            self.p.restore(kept[i].workload)
            if self.fits(borrowing):
                kept[i] = kept[-1]
                kept.pop()
            else:
                self.p.remove(kept[i].workload)
        removed[:] = kept
        return [Target(c.workload, c.variant.reason) for c in kept]

    def valid(self, cand: _Candidate, borrowing: bool) -> bool:
        """Still worth preempting, now that earlier candidates are gone."""
        if cand.cluster_queue == self.cq.name:
            return True
        if borrowing and cand.variant == Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.state.quota.queues[cand.cluster_queue]
        if within_nominal(node, self.frs_need):
            return False
        for ancestor in path_to_root(node):
            if ancestor is cand.lca:
                break
            if within_nominal(ancestor, self.frs_need):
                return False
        return True

    def fits(self, borrowing: bool) -> bool:
        for fr, value in self.usage.items():
            if not borrowing and is_borrowing_with(self.node, fr, value):
                return False
            if value > self.state.quota.available(self.cq.name, fr):
                return False
        return self.tas_fits is None or self.tas_fits()
