"""Quota and usage of ClusterQueues and Cohorts, as Kueue's hierarchical resource nodes.

Every ClusterQueue and Cohort is a node holding its own quotas per (flavor, resource).
A node's subtree quota is its nominal quota plus what its children lend (their subtree
quota minus what a lending limit keeps local); a child's usage beyond what it keeps
local counts against its parent. A ClusterQueue can use what is free along the path to
the root, within its borrowing limits.

Cohorts whose parent chain comes back to a Cohort already on it (those of a cycle, and those
under one) form no tree: as Kueue does, their ClusterQueues admit nothing until the cycle is
broken (`QuotaTree.cycles`). They are not linked to their parents, so that nothing here walks
a cycle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.model import ClusterQueue, Cohort, ResourceGroup


@dataclass(frozen=True, slots=True)
class FlavorResource:
    flavor: str
    resource: str


@dataclass(slots=True)
class Quota:
    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class QuotaNode:
    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    parent: QuotaNode | None = None
    children: list[QuotaNode] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=lambda: defaultdict(int))
    usage: dict[FlavorResource, int] = field(default_factory=lambda: defaultdict(int))
    fair_weight: float = 1.0

    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity this subtree keeps to itself because of a lending limit."""
        quota = self.quotas.get(fr)
        if quota is not None and quota.lending_limit is not None:
            return max(0, self.subtree[fr] - quota.lending_limit)
        return 0

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage[fr])


def _quotas(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Quota]:
    out = {}
    for group in groups:
        for fq in group.flavors:
            for q in fq.resources:
                out[FlavorResource(fq.name, q.name)] = Quota(q.nominal, q.borrowing_limit, q.lending_limit)
    return out


class QuotaTree:
    def __init__(self, cluster_queues: Iterable[ClusterQueue], cohorts: Iterable[Cohort]) -> None:
        self.cohorts: dict[str, QuotaNode] = {}
        for c in cohorts:
            self.cohorts[c.name] = QuotaNode(c.name, True, _quotas(c.resource_groups), fair_weight=c.fair_weight)
        parents = {c.name: c.parent for c in cohorts}
        self.queues: dict[str, QuotaNode] = {}
        for cq in cluster_queues:
            node = self.queues[cq.name] = QuotaNode(cq.name, False, _quotas(cq.resource_groups),
                                                    fair_weight=cq.fair_weight)
            if cq.cohort:
                self._link(node, self._cohort(cq.cohort))
        # Cohort -> the chain of Cohorts its parents run through until one repeats
        self.cycles: dict[str, tuple[str, ...]] = cohort_cycles(parents)
        for name, parent in parents.items():
            if parent and name not in self.cycles:  # the Cohorts of a cycle stay apart, each a root
                self._link(self.cohorts[name], self._cohort(parent))
        for root in [n for n in [*self.cohorts.values(), *self.queues.values()] if n.parent is None]:
            self._accumulate(root)

    def _cohort(self, name: str) -> QuotaNode:
        # a Cohort named by a ClusterQueue exists even without a Cohort object (no quota of its own)
        if name not in self.cohorts:
            self.cohorts[name] = QuotaNode(name, True)
        return self.cohorts[name]

    @staticmethod
    def _link(child: QuotaNode, parent: QuotaNode) -> None:
        child.parent = parent
        parent.children.append(child)

    def _accumulate(self, node: QuotaNode) -> None:
        node.subtree = defaultdict(int, {fr: q.nominal for fr, q in node.quotas.items()})
        for child in node.children:
            self._accumulate(child)
            for fr, value in child.subtree.items():
                node.subtree[fr] += value - child.local_quota(fr)

    # ------------------------------------------------------------ queries

    def cycle_of(self, cq: ClusterQueue) -> tuple[str, ...] | None:
        """The chain of Cohorts, from the ClusterQueue's own, that runs into a cycle (Kueue's
        hierarchy.HasCycle of its Cohort): Kueue's snapshot holds such a ClusterQueue inactive.
        None when its Cohort tree has no cycle."""
        return self.cycles.get(cq.cohort) if cq.cohort else None

    def available(self, cq: str, fr: FlavorResource) -> int:
        return _available(self.queues[cq], fr)

    def potential_available(self, cq: str, fr: FlavorResource) -> int:
        return _potential(self.queues[cq], fr)

    def borrowing_with(self, cq: str, fr: FlavorResource, value: int) -> bool:
        node = self.queues[cq]
        return node.usage[fr] + value > node.subtree[fr]

    def usage(self, cq: str, fr: FlavorResource) -> int:
        node = self.queues.get(cq)
        return node.usage[fr] if node else 0

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        node = self.queues.get(cq)
        quota = node.quotas.get(fr) if node else None
        return quota.nominal if quota else 0

    # ------------------------------------------------------------ usage

    def add_usage(self, cq: str, fr: FlavorResource, value: int) -> None:
        node = self.queues.get(cq)
        if node is None:
            return
        if value >= 0:
            _add(node, fr, value)
        else:
            _remove(node, fr, -value)


def _available(node: QuotaNode, fr: FlavorResource) -> int:
    if node.parent is None:
        return node.subtree[fr] - node.usage[fr]
    parent_available = _available(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        stored_in_parent = node.subtree[fr] - node.local_quota(fr)
        used_in_parent = max(0, node.usage[fr] - node.local_quota(fr))
        parent_available = min(stored_in_parent - used_in_parent + quota.borrowing_limit, parent_available)
    return node.local_available(fr) + parent_available


def available_in(node: QuotaNode, fr: FlavorResource) -> int:
    """Unused quota a workload of `node`'s subtree can take, its ancestors' limits included."""
    return _available(node, fr)


def _potential(node: QuotaNode, fr: FlavorResource) -> int:
    if node.parent is None:
        return node.subtree[fr]
    value = node.local_quota(fr) + _potential(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        value = min(node.subtree[fr] + quota.borrowing_limit, value)
    return value


def _add(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    local = node.local_available(fr)
    node.usage[fr] += value
    if node.parent is not None and value > local:
        _add(node.parent, fr, value - local)


def _remove(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    stored_in_parent = node.usage[fr] - node.local_quota(fr)
    node.usage[fr] -= value
    if stored_in_parent > 0 and node.parent is not None:
        _remove(node.parent, fr, min(value, stored_in_parent))


def cohort_cycles(parents: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Per Cohort whose parent chain comes back to a Cohort already on it, that chain up to the
    repeat (`("d", "a", "b", "a")`: d's parent a is in the cycle a -> b -> a). A parent that
    is not a Cohort object ends a chain: it is a root without quota of its own."""
    verdicts: dict[str, tuple[str, ...] | None] = {}
    for start in parents:
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = start
        while current is not None and current not in verdicts and current not in on_chain:
            chain.append(current)
            on_chain.add(current)
            current = parents.get(current) or None
        if current is None:
            verdicts.update(dict.fromkeys(chain))
        elif current in on_chain:  # a new cycle: each Cohort's chain ends where it repeats
            start_of_cycle = chain.index(current)
            for i, name in enumerate(chain):
                verdicts[name] = (*chain[i:], *chain[start_of_cycle:max(i, start_of_cycle) + 1])
        else:  # a Cohort decided before
            known = verdicts[current]
            for i, name in enumerate(chain):
                verdicts[name] = None if known is None else (*chain[i:], *known)
    return {name: chain for name, chain in verdicts.items() if chain is not None}


# ------------------------------------------------------------ hierarchy queries (preemption)


def path_to_root(node: QuotaNode) -> list[QuotaNode]:
    """The node's ancestors, parent first."""
    out = []
    current = node.parent
    while current is not None:
        out.append(current)
        current = current.parent
    return out


def root_of(node: QuotaNode) -> QuotaNode:
    while node.parent is not None:
        node = node.parent
    return node


def node_path(node: QuotaNode) -> str:
    """"/root/.../name", as Kueue names a ClusterQueue's place in its cohort tree."""
    names = [node.name] + [n.name for n in path_to_root(node)]
    return "/" + "/".join(reversed(names))


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """What the node could use of `fr` with nothing used anywhere (Kueue's potentialAvailable)."""
    return _potential(node, fr)


def is_borrowing_with(node: QuotaNode, fr: FlavorResource, value: int) -> bool:
    return node.usage[fr] + value > node.subtree[fr]


def within_nominal(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """No resource of `frs` uses more than the node's subtree quota."""
    return all(node.usage[fr] <= node.subtree[fr] for fr in frs)


def fits_in_quota(node: QuotaNode, requests: dict[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether `requests` fit the node's own subtree quota, and what exceeds what it keeps locally
    (the part its parent has to provide)."""
    fits = True
    remaining = {}
    for fr, value in requests.items():
        if node.usage[fr] + value > node.subtree[fr]:
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining


def node_height(node: QuotaNode) -> int:
    """Distance to the furthest leaf (a cohort with only ClusterQueues has height 1)."""
    height = min(len(node.children), 1)
    for child in node.children:
        if child.is_cohort:
            height = max(height, node_height(child) + 1)
    return height


def borrowing_height(node: QuotaNode, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """Height of the lowest subtree holding the ClusterQueue that fits `value` more of `fr` (0 when
    no borrowing is needed), and whether that subtree is smaller than the whole cohort tree (so
    its quota could be reclaimed from the rest)."""
    if node.parent is None or not is_borrowing_with(node, fr, value):
        return 0, node.parent is not None
    remaining = value - node.local_available(fr)
    for ancestor in path_to_root(node):
        if not is_borrowing_with(ancestor, fr, remaining):
            return node_height(ancestor), ancestor.parent is not None
        remaining -= ancestor.local_available(fr)
    return node_height(root_of(node)), False


def subtree_queues(node: QuotaNode) -> list[QuotaNode]:
    if not node.is_cohort:
        return [node]
    return [q for child in node.children for q in subtree_queues(child)]
