"""Fair preemption: which admitted workloads to evict so that a pending one fits, when fair
sharing is on (Kueue's fairPreemptions, pkg/scheduler/preemption/preemption.go and
preemption_plan.go, with pkg/scheduler/preemption/fairsharing/).

Candidates are the admitted workloads that use a flavor/resource the preemptor needs: those of
its own ClusterQueue its `withinClusterQueue` policy allows, and those of every ClusterQueue of
its cohort tree that borrows one of these flavor/resources its `reclaimWithinCohort` policy
allows. With the preemptor's usage counted in its ClusterQueue, the ClusterQueues are visited
from the root down, always into the child with the highest share (Cohorts before
ClusterQueues on ties, equal ClusterQueues by their first candidate), pruning nodes that no
longer borrow:

* a candidate of the preemptor's own ClusterQueue is taken (reason InClusterQueue);
* while the preemptor's ClusterQueue stays within its nominal quota on the resources needing
  preemption, any candidate is taken (InCohortReclamation, FairSharingPreemptWithinNominal);
* otherwise a candidate is taken when the configured first strategy holds between the shares
  of the two children of the lowest common Cohort on the preemptor's and the target's sides
  (InCohortFairSharing): LessThanOrEqualToFinalShare, the preemptor's share with its workload
  not above the target's once the candidate is gone; LessThanInitialShare, below the target's
  share as it is. Candidates refused go to a second round with LessThanInitialShare, at most
  one per ClusterQueue.

Candidates are removed one by one until the preemptor fits (borrowing allowed); then those not
needed after all are put back, latest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scheduler.config import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from scheduler.fair_sharing import DRS, NEGATIVE_DRS, FairShares, compare_drs, simulated_usage
from scheduler.model import ClusterQueue, Workload
from scheduler.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Preemptor,
    Target,
    _Candidate,
    _Search,
)
from scheduler.quota import FlavorResource, QuotaNode, path_to_root, root_of, subtree_queues

Strategy = Callable[[DRS, DRS, DRS], bool]  # (preemptor's new share, target's old share, target's new share)


def less_than_or_equal_to_final_share(preemptor_new: DRS, _target_old: DRS, target_new: DRS) -> bool:
    """Rule S2-a of KEP-1714."""
    return compare_drs(preemptor_new, target_new) <= 0


def less_than_initial_share(preemptor_new: DRS, target_old: DRS, _target_new: DRS) -> bool:
    """Rule S2-b of KEP-1714."""
    return compare_drs(preemptor_new, target_old) < 0


STRATEGIES: dict[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: less_than_or_equal_to_final_share,
    LESS_THAN_INITIAL_SHARE: less_than_initial_share,
}


@dataclass(slots=True)
class _Taken:
    candidate: _Candidate
    reason: str


class _TargetOrdering:
    """The ClusterQueues to take candidates from, next one first (Kueue's TargetClusterQueueOrdering).

    The same ClusterQueue may come several times in a row; between two, the caller pops one of its
    candidates or drops it."""

    def __init__(self, search: FairSearch, candidates: list[_Candidate]) -> None:
        self.search = search
        self.preemptor = search.node
        self.ancestors = {id(a) for a in path_to_root(self.preemptor)}
        self.by_queue: dict[str, list[_Candidate]] = {}
        for cand in candidates:
            self.by_queue.setdefault(cand.cluster_queue, []).append(cand)
        self.pruned: set[int] = set()

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.preemptor.parent is None:
            while self.has(self.preemptor):
                yield self.preemptor
            return
        root = root_of(self.preemptor)
        while id(root) not in self.pruned:
            target = self.next_target(root)
            if target is not None:
                yield target

    def has(self, cq: QuotaNode) -> bool:
        return bool(self.by_queue.get(cq.name))

    def pop(self, cq: QuotaNode) -> _Candidate:
        return self.by_queue[cq.name].pop(0)

    def drop(self, cq: QuotaNode) -> None:
        self.pruned.add(id(cq))

    def next_target(self, cohort: QuotaNode) -> QuotaNode | None:
        shares = self.search.shares
        best_cq, best_cq_drs = None, NEGATIVE_DRS
        for child in cohort.children:
            if child.is_cohort or id(child) in self.pruned:
                continue
            drs = shares.of(child)
            # the preemptor's ClusterQueue stays until it runs out of candidates
            if (drs.is_zero and child is not self.preemptor) or not self.has(child):
                self.pruned.add(id(child))
                continue
            order = compare_drs(drs, best_cq_drs)
            if order == 0 and best_cq is not None:
                if self.search.candidate_key(self.by_queue[child.name][0]) < \
                        self.search.candidate_key(self.by_queue[best_cq.name][0]):
                    best_cq = child
            elif order > 0:
                best_cq, best_cq_drs = child, drs
        best_cohort, best_cohort_drs = None, NEGATIVE_DRS
        for child in cohort.children:
            if not child.is_cohort or id(child) in self.pruned:
                continue
            drs = shares.of(child)
            # a Cohort that no longer borrows can still hold an imbalance if the preemptor is inside it
            if drs.is_zero and id(child) not in self.ancestors:
                self.pruned.add(id(child))
            elif compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and compare_drs(best_cohort_drs, best_cq_drs) >= 0:
            return self.next_target(best_cohort)
        return best_cq

    def almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The children of the lowest Cohort shared by the preemptor's and the target's ClusterQueues,
        on the preemptor's side and on the target's."""
        lca = next(a for a in path_to_root(target) if id(a) in self.ancestors)
        return _child_on_path(self.preemptor, lca), _child_on_path(target, lca)


def _child_on_path(node: QuotaNode, ancestor: QuotaNode) -> QuotaNode:
    while node.parent is not ancestor:
        assert node.parent is not None, "the ancestor is not on the node's path"
        node = node.parent
    return node


class FairSearch(_Search):
    """One fair preemption search."""

    def __init__(self, preemptor: Preemptor, wl: Workload, cq: ClusterQueue, usage: dict[FlavorResource, int],
                 frs_need: set[FlavorResource], tas_fits: Callable[[], bool] | None, *,
                 strategies: tuple[str, ...], shares: FairShares | None = None) -> None:
        super().__init__(preemptor, wl, cq, usage, frs_need, tas_fits)
        self.strategies = [STRATEGIES[s] for s in strategies] or list(STRATEGIES.values())
        self.shares = shares or FairShares()
        self.tree = self.state.quota
        self.taken: list[_Taken] = []

    def candidate_key(self, cand: _Candidate) -> tuple:
        return self.p.ordering_key(cand, self.cq.name)

    def fair_candidates(self) -> list[_Candidate]:
        out = self.same_queue_candidates()
        if self.node.parent is not None and self.policy(False) != "Never":
            for q in subtree_queues(root_of(self.node)):
                if q is not self.node and any(q.usage.get(fr, 0) > q.subtree.get(fr, 0) for fr in self.frs_need):
                    out.extend(self.from_queue(q, None, False))
        return sorted(out, key=self.candidate_key)

    def run(self) -> list[Target]:
        candidates = self.fair_candidates()
        self.candidates = len(candidates)
        if not candidates:
            return []
        try:
            with simulated_usage(self.tree, self.cq.name, self.usage):  # shares count the incoming workload
                fits = self.try_strategies(candidates)
            if not fits:
                return []
            return self.fill_back_taken()
        finally:
            for taken in self.taken:
                self.p.restore(taken.candidate.workload)
            self.taken.clear()

    # ------------------------------------------------------------ strategies

    def try_strategies(self, candidates: list[_Candidate]) -> bool:
        first = self.strategies[0]
        retry, fits, from_own_queue = self.first_strategy(candidates, first)
        if fits:
            return True
        if self.state.gates.FairSharingReevaluatePreemptionCandidates and from_own_queue and retry:
            # the preemptor's share went down: candidates refused before may now pass
            retry, fits, _ = self.first_strategy(retry, first)
            if fits:
                return True
        if len(self.strategies) > 1 and retry:
            return self.second_strategy(retry)
        return False

    def take(self, cand: _Candidate, reason: str) -> bool:
        """Remove the candidate; whether the preemptor fits now."""
        self.p.remove(cand.workload)
        self.taken.append(_Taken(cand, reason))
        with simulated_usage(self.tree, self.cq.name, self.usage, -1):
            return self.fits(True)

    def first_strategy(self, candidates: list[_Candidate], strategy: Strategy
                       ) -> tuple[list[_Candidate], bool, bool]:
        """(candidates refused, whether the preemptor fits, whether one of its own was taken)."""
        ordering = _TargetOrdering(self, candidates)
        within_nominal = self.state.gates.FairSharingPreemptWithinNominal and not any(
            self.node.usage.get(fr, 0) > self.node.subtree.get(fr, 0) for fr in self.frs_need)
        retry: list[_Candidate] = []
        own = False
        for target in ordering:
            if target is self.node:
                own = True
                if self.take(ordering.pop(target), IN_CLUSTER_QUEUE):
                    return retry, True, own
                continue
            if within_nominal:
                if self.take(ordering.pop(target), IN_COHORT_RECLAMATION):
                    return retry, True, own
                continue
            preemptor_side, target_side = ordering.almost_lcas(target)
            preemptor_new, target_old = self.shares.of(preemptor_side), self.shares.of(target_side)
            if preemptor_new.zero_weight_borrows and not target_old.zero_weight_borrows:
                while ordering.has(target):  # no candidate here can pass
                    retry.append(ordering.pop(target))
                continue
            while ordering.has(target):
                cand = ordering.pop(target)
                target_new = self.share_without(cand, target, target_side)
                if strategy(preemptor_new, target_old, target_new):
                    if self.take(cand, IN_COHORT_FAIR_SHARING):
                        return retry, True, own
                    break  # shares changed: the next target may be elsewhere
                retry.append(cand)
        return retry, False, own

    def second_strategy(self, candidates: list[_Candidate]) -> bool:
        ordering = _TargetOrdering(self, candidates)
        for target in ordering:
            preemptor_side, target_side = ordering.almost_lcas(target)
            passed = less_than_initial_share(self.shares.of(preemptor_side), self.shares.of(target_side), NEGATIVE_DRS)
            cand = ordering.pop(target)
            if passed and self.take(cand, IN_COHORT_FAIR_SHARING):
                return True
            ordering.drop(target)  # the rule does not depend on the workload: once per ClusterQueue
        return False

    def share_without(self, cand: _Candidate, target: QuotaNode, target_side: QuotaNode) -> DRS:
        charge = self.state.charges.get(cand.workload.key)
        quota = charge.quota if charge is not None else {}
        with simulated_usage(self.tree, target.name, quota, -1):
            return self.shares.of(target_side)

    # ------------------------------------------------------------ fill-back

    def fill_back_taken(self) -> list[Target]:
        """Put back every taken workload (latest first, except the last) the preemptor does not need
        gone, borrowing allowed. `taken` keeps exactly the workloads still removed."""
        kept = self.taken
        for i in range(len(kept) - 2, -1, -1):
            self.p.restore(kept[i].candidate.workload)
            if self.fits(True):
                kept[i] = kept[-1]
                kept.pop()
            else:
                self.p.remove(kept[i].candidate.workload)
        return [Target(t.candidate.workload, t.reason) for t in kept]

