"""Fair sharing: the Dominant Resource Share (DRS) of ClusterQueues and Cohorts, and the order
in which a scheduling cycle considers its heads when fair sharing is on.

A node's DRS (Kueue's `dominantResourceShare`, pkg/cache/scheduler/fair_sharing.go): for each
resource, what the node uses above its subtree quota, summed over flavors, per mille of what
its parent could lend of that resource (summed over flavors); the largest of these ratios,
divided by the node's `spec.fairSharing.weight`. A node that does not borrow, or a root, has
a share of 0; a borrowing node with weight 0 has an infinite share. Shares are compared as
Kueue compares them (`CompareDRS`): exactly, not rounded.

The order of heads (Kueue's fairSharingIterator, pkg/scheduler/fair_sharing_iterator.go) is
a tournament up each cohort tree: every ClusterQueue nominates its head, and at every Cohort
the child whose share *with its nominee admitted* is lowest wins; a child that would not
borrow on the resources its nominee requests comes first (FairSharingPrioritizeNonBorrowing),
equal shares fall back to priority (PrioritySortingWithinCohort), then FIFO. Shares are
computed again before every pick, so admissions earlier in the cycle count.

Shares are computed on demand from the quota tree, for the heads of a cycle only; what a
cohort can lend depends on quotas alone and is kept for the life of one `FairShares`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from scheduler.quota import FlavorResource, QuotaNode, QuotaTree, potential_available, root_of, subtree_queues

MAX_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class DRS:
    """One node's Dominant Resource Share."""

    weight: float = 1.0
    ratio: float = 0.0  # unweighted: per mille of what the parent can lend
    dominant_resource: str = ""
    borrowing: bool = False  # uses more than its subtree quota of some flavor/resource
    borrowed: frozenset[FlavorResource] = frozenset()

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.borrowing

    @property
    def precise(self) -> float:
        """The weighted share (Kueue's PreciseWeightedShare)."""
        if self.zero_weight_borrows:
            return math.inf
        if self.is_zero:
            return 0.0
        if self.weight == 0:  # a share over a zero weight, as Go's float division gives it
            return math.copysign(math.inf, self.ratio)
        return self.ratio / self.weight

    @property
    def weighted_share(self) -> int:
        """The rounded share Kueue reports in status and metrics (ceil; MaxInt64 when infinite)."""
        if self.zero_weight_borrows:
            return MAX_INT64
        return math.ceil(self.precise)

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        """Whether the node borrows any flavor/resource of which `requested` asks a positive amount."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


NEGATIVE_DRS = DRS(ratio=-1.0)  # below every share: the start of a search for the highest


def compare_drs(a: DRS, b: DRS) -> int:
    """-1, 0 or 1 as `a`'s share is lower than, equal to or higher than `b`'s (Kueue's CompareDRS:
    two zero-weight borrowers compare by their unweighted ratios)."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        x, y = a.ratio, b.ratio
    elif a.zero_weight_borrows:
        return 1
    elif b.zero_weight_borrows:
        return -1
    else:
        x, y = a.precise, b.precise
    return (x > y) - (x < y)


class FairShares:
    """DRS of quota-tree nodes as the tree stands when asked."""

    def __init__(self) -> None:
        self._lendable: dict[int, tuple[QuotaNode, dict[str, int]]] = {}

    def lendable(self, node: QuotaNode) -> dict[str, int]:
        """Per resource, what the node could lend its children, summed over every flavor of its tree
        (Kueue's calculateLendable). Depends on quotas only."""
        cached = self._lendable.get(id(node))
        if cached is not None and cached[0] is node:
            return cached[1]
        out: dict[str, int] = {}
        for fr in list(root_of(node).subtree):
            out[fr.resource] = out.get(fr.resource, 0) + potential_available(node, fr)
        self._lendable[id(node)] = (node, out)
        return out

    def of(self, node: QuotaNode, requests: Mapping[FlavorResource, int] | None = None) -> DRS:
        """The node's share, with `requests` added to its usage."""
        if node.parent is None:
            return DRS(node.fair_weight)
        requests = requests or {}
        usage = node.usage
        borrowing: dict[str, int] = {}
        borrowed = []
        for fr, quota in list(node.subtree.items()):
            amount = requests.get(fr, 0) + usage.get(fr, 0) - quota
            if amount > 0:
                borrowing[fr.resource] = borrowing.get(fr.resource, 0) + amount
                borrowed.append(fr)
        if not borrowing:
            return DRS(node.fair_weight)
        lendable = self.lendable(node.parent)
        ratio, dominant = 0.0, ""
        for resource, amount in borrowing.items():
            can_lend = lendable.get(resource, 0)
            if can_lend > 0:
                value = float(amount) * 1000.0 / float(can_lend)
                # the alphabetically first resource among equal ratios, for a deterministic name
                if value > ratio or (value == ratio and resource < dominant):
                    ratio, dominant = value, resource
        return DRS(node.fair_weight, ratio, dominant, True, frozenset(borrowed))


@contextmanager
def simulated_usage(tree: QuotaTree, cq: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> Iterator[None]:
    """The tree with `usage` added to (sign=1) or taken from (sign=-1) a ClusterQueue, then as before."""
    changes = [(fr, sign * value) for fr, value in usage.items() if value]
    for fr, value in changes:
        tree.add_usage(cq, fr, value)
    try:
        yield
    finally:
        for fr, value in reversed(changes):
            tree.add_usage(cq, fr, -value)


# ---------------------------------------------------------------- admission order

E = TypeVar("E")


@dataclass(frozen=True)
class HeadInfo:
    """What the tournament needs of a head: its ClusterQueue, the quota its admission would add,
    and its place among equal shares (lower first: priority, then FIFO)."""

    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    tie_key: tuple


class FairSharingIterator(Generic[E]):
    """The heads of a cycle in Kueue's fair-sharing order; iterate it lazily, admitting each entry
    before asking for the next, so that shares count what was admitted before."""

    def __init__(self, tree: QuotaTree, entries: Sequence[E], info: Callable[[E], HeadInfo], *,
                 prioritize_non_borrowing: bool = True, shares: FairShares | None = None) -> None:
        self.tree = tree
        self.shares = shares or FairShares()
        self.prioritize_non_borrowing = prioritize_non_borrowing
        self.info: dict[int, HeadInfo] = {}
        # per ClusterQueue, its entries in the order given (the first one is its nominee)
        self.pending: dict[str, list[E]] = {}
        for e in entries:
            head = self.info[id(e)] = info(e)
            self.pending.setdefault(head.cluster_queue, []).append(e)
        self._drs: dict[tuple[str, int], DRS] = {}
        self._queue_shares: dict[str, tuple[tuple, DRS]] = {}

    def __iter__(self) -> Iterator[E]:
        while self.pending:
            yield self.pop()

    def pop(self) -> E:
        name = next(iter(self.pending))
        node = self.tree.queues.get(name)
        if node is None or node.parent is None:
            return self._take(name)
        root = root_of(node)
        self._compute_shares(root)
        winner = self._tournament(root)
        assert winner is not None  # the ClusterQueue we started from has an entry
        return self._take(self.info[id(winner)].cluster_queue)

    def _take(self, cq: str) -> E:
        entries = self.pending[cq]
        head = entries.pop(0)
        if not entries:
            del self.pending[cq]
        return head

    def _compute_shares(self, root: QuotaNode) -> None:
        """Every nominee's share with itself admitted, at each Cohort on its way to the root: the share
        of the child of that Cohort it belongs to."""
        self._drs = {}
        for cq_node in subtree_queues(root):
            entries = self.pending.get(cq_node.name)
            if not entries:
                continue
            head = entries[0]
            usage = self.info[id(head)].usage
            parent = cq_node.parent
            assert parent is not None
            self._drs[(parent.name, id(head))] = self._queue_share(cq_node, head, usage)
            if parent.parent is None:
                continue
            # a Cohort's usage with the nominee depends on the lending limits below it: add it for real
            with simulated_usage(self.tree, cq_node.name, usage):
                ancestor = parent
                while ancestor.parent is not None:
                    self._drs[(ancestor.parent.name, id(head))] = self.shares.of(ancestor)
                    ancestor = ancestor.parent

    def _queue_share(self, cq_node: QuotaNode, head: E, usage: Mapping[FlavorResource, int]) -> DRS:
        """The ClusterQueue's share with its nominee, kept while the ClusterQueue's usage stays the same
        (other ClusterQueues' admissions leave it alone)."""
        signature = (id(head), tuple(cq_node.usage.get(fr, 0) for fr in cq_node.subtree))
        cached = self._queue_shares.get(cq_node.name)
        if cached is not None and cached[0] == signature:
            return cached[1]
        share = self.shares.of(cq_node, usage)
        self._queue_shares[cq_node.name] = (signature, share)
        return share

    def _tournament(self, cohort: QuotaNode) -> E | None:
        candidates: list[E] = []
        for child in cohort.children:
            if child.is_cohort:
                winner = self._tournament(child)
                if winner is not None:
                    candidates.append(winner)
        for child in cohort.children:
            if not child.is_cohort and child.name in self.pending:
                candidates.append(self.pending[child.name][0])
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self._less(current, best, cohort.name):
                best = current
        return best

    def _less(self, a: E, b: E, cohort: str) -> bool:
        a_info, b_info = self.info[id(a)], self.info[id(b)]
        a_drs, b_drs = self._drs[(cohort, id(a))], self._drs[(cohort, id(b))]
        if self.prioritize_non_borrowing:
            # within nominal at this level (on the flavors it asks for) first
            a_borrows, b_borrows = a_drs.borrowing_on(a_info.usage), b_drs.borrowing_on(b_info.usage)
            if a_borrows != b_borrows:
                return not a_borrows
        order = compare_drs(a_drs, b_drs)
        if order != 0:
            return order < 0
        return a_info.tie_key < b_info.tie_key

