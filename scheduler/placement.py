"""Placement of one PodSet (or a leader/worker group) on a TAS flavor snapshot.

Kueue's algorithm (KEP-2724):

* phase 1 - for every domain, how many pods and slices fit (leaves from free capacity,
  parents by summing their children);
* phase 2a - the level and the domains at it that can hold the whole request: the
  requested level for `required`, climbing levels for `preferred`, the lowest level for
  `unconstrained`; BestFit picks the tightest domain that fits, LeastFreeCapacity the
  fullest;
* phase 2b - walk down level by level, spreading the pods over as few domains as possible;
* the assignment lists the lowest-level domains in order of their level values.

A level can hold every node of the cluster, so phase 2a orders it with numpy from the
phase-1 arrays (exact until phase 2 turns counters into lists), and LeastFreeCapacity,
which spreads over the smallest domains first, orders only the prefix it takes. Both give
the order of the Python sorts (same keys, same tie-break by rank), which later phases use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from scheduler.assignment import DomainAssignment, TopologyAssignment
from scheduler.features import FeatureGates
from scheduler.model import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NodeAffinity,
    PodSet,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
)
from scheduler.phase1 import (
    ALL_COUNTERS,
    MAX_INT32,
    NO_TAIL_FIT,
    Shape,
    compute,
    kept_counts,
    remaining_less,
    visited_leaves,
)
from scheduler.phase1 import Counts as Phase1Counts
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.tree import subtree_shape

# ---------------------------------------------------------------- inputs and results


@dataclass(slots=True)
class TASPodSetRequest:
    """What placement needs to know about one PodSet assigned to a TAS flavor."""

    pod_set: PodSet
    count: int
    single_pod_requests: Mapping[str, int]
    flavor: str
    implied: bool = False
    node_selector: Mapping[str, str] | None = None  # after podSetUpdates; None: the template's
    tolerations: tuple[Toleration, ...] | None = None  # after podSetUpdates; None: the template's
    previous_assignment: TopologyAssignment | None = None
    update_error: str = ""  # why the podSetUpdates cannot be merged: the placement fails with it

    @property
    def name(self) -> str:
        return self.pod_set.name

    @property
    def topology_request(self) -> TopologyRequest | None:
        return self.pod_set.topology_request

    @property
    def group_name(self) -> str | None:
        tr = self.pod_set.topology_request
        return tr.pod_set_group_name if tr is not None else None

    def effective_node_selector(self) -> Mapping[str, str]:
        return self.pod_set.spec.node_selector if self.node_selector is None else self.node_selector

    def effective_tolerations(self) -> tuple[Toleration, ...]:
        return self.pod_set.spec.tolerations if self.tolerations is None else self.tolerations


def pod_set_updates_for(wl: Workload, ps: PodSet) -> dict[str, object]:
    """The TASPodSetRequest fields the podSetUpdates of Ready admission checks change: the
    PodSet's node selector and tolerations merged with theirs as Kueue's PodSetInfo.Merge does
    (a key given two values is an error the placement fails with); {} when none applies."""
    updates = [u for check in wl.admission_checks if check.state == "Ready"
               for u in check.pod_set_updates if u.name == ps.name]
    if not updates:
        return {}
    selector = dict(ps.spec.node_selector)
    tolerations = list(ps.spec.tolerations)
    for update in updates:
        for key, value in sorted(selector.items()):
            other = update.node_selector.get(key)
            if other is not None and other != value:
                return {"update_error": "invalid admission check PodSetUpdate: conflict for nodeSelector: "
                                        f"conflict for key={key}, value1={value}, value2={other}"}
        selector.update(update.node_selector)
        for toleration in update.tolerations:
            if toleration not in tolerations:
                tolerations.append(toleration)
    return {"node_selector": selector, "tolerations": tuple(tolerations)}


@dataclass(slots=True)
class ExclusionStats:
    """Why nodes could not take a pod, for Kueue's failure message."""

    total_nodes: int = 0
    node_selector: int = 0
    affinity: int = 0
    topology_domain: int = 0
    taints: Counter = field(default_factory=Counter)
    resources: Counter = field(default_factory=Counter)

    def has_exclusions(self) -> bool:
        return bool(self.node_selector or self.affinity or self.topology_domain or self.taints or self.resources)

    def format_reasons(self) -> str:
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        if self.topology_domain:
            reasons.append(f"topologyDomain: {self.topology_domain}")
        reasons.extend(f"taint {go_quote(t)}: {n}" for t, n in self.taints.items())
        reasons.extend(f"resource {go_quote(r)}: {n}" for r, n in self.resources.items())
        return ", ".join(sorted(reasons))

    def suffix(self) -> str:
        """`. Total nodes: N; excluded: ...` when any node was excluded."""
        if not self.has_exclusions():
            return ""
        return f". Total nodes: {self.total_nodes}; excluded: {self.format_reasons()}"


def go_quote(text: str) -> str:
    """Go's %q for the plain strings that appear in Kueue's messages."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def go_string_map(m: Mapping[str, str]) -> str:
    """Go's %s of a map[string]string: `map[a:1 b:2]` with sorted keys."""
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(m.items())) + "]"


@dataclass(slots=True)
class PodSetPlacement:
    """The result for one PodSet: an assignment, or the reason it does not fit."""

    assignment: TopologyAssignment | None = None
    failure: str = ""


# ---------------------------------------------------------------- node matching


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates (FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(slots=True)
class NodeMatch:
    """Which leaves a PodSet's node constraints exclude, and the preferred-affinity score of each."""

    excluded: np.ndarray  # bool per leaf
    affinity_score: np.ndarray | None  # int64 per leaf, None when no preferred terms apply
    taints: Counter
    node_selector: int
    affinity: int


def match_nodes(
    snap: TASFlavorSnapshot,
    tolerations: tuple[Toleration, ...],
    selector: Mapping[str, str],
    affinity: NodeAffinity | None,
    score_preferred: bool,
) -> NodeMatch:
    """Taints first, then the nodeSelector, then required node affinity, as Kueue checks them."""
    n = snap.tree.leaf_count
    excluded = np.zeros(n, dtype=bool)
    taints: Counter = Counter()
    for leaf, leaf_taints in snap.tainted_leaves:
        taint = untolerated_taint(leaf_taints, tolerations)
        if taint is not None:
            excluded[leaf] = True
            taints[str(taint)] += 1
    selector_excluded = 0
    if selector:
        matches = np.ones(n, dtype=bool)
        for key, value in selector.items():
            matches &= snap.label_column(key) == value
        newly = ~matches & ~excluded
        selector_excluded = int(newly.sum())
        excluded |= newly
    affinity_excluded = 0
    score = None
    if affinity is not None:
        nodes = snap.tree.leaf_nodes
        if affinity.required is not None:
            for leaf in np.flatnonzero(~excluded).tolist():
                node = nodes[leaf][0]
                if not affinity.required_matches(node.labels, node.name):
                    excluded[leaf] = True
                    affinity_excluded += 1
        if score_preferred and affinity.preferred:
            score = np.zeros(n, dtype=np.int64)
            for leaf in np.flatnonzero(~excluded).tolist():
                node = nodes[leaf][0]
                score[leaf] = affinity.preferred_score(node.labels, node.name)
    return NodeMatch(excluded, score, taints, selector_excluded, affinity_excluded)


# ---------------------------------------------------------------- per-run domain state


@dataclass(slots=True)
class _Params:
    count: int
    slice_size: int
    leader_count: int
    requested_level: int
    slice_level: int
    required: bool
    unconstrained: bool
    slice_size_at_level: dict[int, int]
    multi_layer: tuple = ()
    tail_size: int = 0  # pods of the partial slice (TASPartialSlices), placed with the whole ones


class _Overlay:
    """One counter of one placement run: reads fall through to the phase-1 list the snapshot
    keeps (shared by every placement of that shape), writes and the counters of clones (added
    at the end) stay here."""

    __slots__ = ("base", "over", "size")

    def __init__(self, base: list[int]) -> None:
        self.base = base
        self.over: dict[int, int] = {}
        self.size = len(base)

    def __getitem__(self, d: int) -> int:
        value = self.over.get(d)
        return self.base[d] if value is None else value

    def __setitem__(self, d: int, value: int) -> None:
        self.over[d] = value

    def window(self, domains: range) -> list[int]:
        """The counters of a range of domains, as a list."""
        start, stop = domains.start, domains.stop
        out = self.base[start:stop]
        out.extend(0 for _ in range(stop - start - len(out)))
        for d, value in self.over.items():
            if start <= d < stop:
                out[d - start] = value
        return out

    def extend(self, values: Iterable[int]) -> None:
        over, size = self.over, self.size
        for value in values:
            over[size] = value
            size += 1
        self.size = size

    def __len__(self) -> int:
        return self.size


def _readable(values: list[int] | _Overlay, domains: Sequence[int]) -> list[int] | _Overlay:
    """What to read `domains` of a counter from: the kept list itself when the run wrote none
    of them (plain list reads, for sorting), else the counter."""
    if isinstance(values, _Overlay) and (not values.over or values.over.keys().isdisjoint(domains)):
        return values.base
    return values


# Below this many domains a counter is copied for each run (a list copy costs less than the
# overlay's reads); above it, phase 2 reads through an overlay.
COPY_BELOW = 16384


def counters_of(values: list[int] | _Overlay, domains: range) -> list[int]:
    """A placement's counters (`Placer.counts`) of a range of domains, as a list."""
    return values.window(domains) if isinstance(values, _Overlay) else values[domains.start:domains.stop]


class _Counts:
    """Per-domain counters of one placement run, indexed by global domain index.

    `state`: pods that fit (phase 1), then pods assigned (phase 2); `slice`: slices that fit;
    `*_wl`: the same with room kept for the leader; `leader`: whether the leader fits.

    Phase 1 leaves numpy arrays (kept by the snapshot per request shape); phase 2 reads and
    writes each counter as a list of its own (small trees) or as a list-like overlay of the
    kept list (large trees), made when first used.
    """

    state: list[int] | _Overlay
    state_wl: list[int] | _Overlay
    slice: list[int] | _Overlay
    slice_wl: list[int] | _Overlay
    leader: list[int] | _Overlay
    affinity: list[int] | _Overlay
    slice_t: list[int] | _Overlay  # with a partial slice only: slices held next to it
    slice_wlt: list[int] | _Overlay  # the same with room kept for the leader

    def __init__(self, phase1: Phase1Counts) -> None:
        self._phase1 = phase1
        self._generation = phase1.generation
        self._made: dict[str, list[int] | _Overlay] = {}

    def __getattr__(self, name: str) -> list[int] | _Overlay:
        # Only reached while the counter's attribute is still unset.
        if name not in ALL_COUNTERS:
            raise AttributeError(name)
        if self._phase1.generation != self._generation:
            raise RuntimeError("the snapshot's capacity changed during a placement")
        base = self._phase1.as_list(name)
        values: list[int] | _Overlay = list(base) if len(base) < COPY_BELOW else _Overlay(base)
        setattr(self, name, values)
        self._made[name] = values
        return values

    def phase1_arrays(self) -> dict[str, np.ndarray] | None:
        """The phase-1 counters as arrays while they are still exact: until phase 2 writes."""
        if self._phase1.generation != self._generation:
            return None
        for name, values in self._made.items():
            if values.over if isinstance(values, _Overlay) else values != self._phase1.lists[name]:
                return None
        return self._phase1.arrays


Field = Literal["state", "state_wl", "slice", "slice_wl"]


class Placer:
    """One run of Kueue's placement algorithm for a PodSet (with an optional leader PodSet)."""

    def __init__(self, snap: TASFlavorSnapshot, gates: FeatureGates) -> None:
        self.snap = snap
        self.tree = snap.tree
        self.gates = gates
        self.affinity_first = gates.TASRespectNodeAffinityPreferred
        self.stats = ExclusionStats()
        self.counts: _Counts | None = None
        self.params: _Params | None = None
        # Structure by global domain index. Shared with the tree until balanced placement
        # clones subtrees (copies with counters of their own), then private and extended.
        self.children: list = snap.tree.children_of
        self.rank: list[int] = snap.tree.rank_of
        self.origin: list[int] | None = None

    # ------------------------------------------------------------ structure (clones included)

    def original(self, d: int) -> int:
        return d if self.origin is None else self.origin[d]

    def values(self, d: int) -> tuple[str, ...]:
        return self.tree.values_of[self.original(d)]

    def domain_id(self, d: int) -> str:
        return self.tree.id_of[self.original(d)]

    def clone(self, d: int) -> int:
        """A copy of domain `d` and its subtree whose counters can change independently: new
        domains at the end, numbered in preorder (the copy of `d` first)."""
        if self.origin is None:
            self.children = list(self.children)
            self.rank = list(self.rank)
            self.origin = list(range(len(self.children)))
        children = self.children
        # a domain of the tree has the tree's subtree (kept there); a copy, one of its own
        order, shape = self.tree.subtree_shape(d) if d < self.tree.size else subtree_shape(children, d)
        new = len(children)
        children.extend([[new + i for i in positions] for positions in shape])
        rank, origin = self.rank, self.origin
        rank.extend([rank[old] for old in order])
        origin.extend([origin[old] for old in order])
        c = self.counts
        for values in (c.state, c.state_wl, c.slice, c.slice_wl, c.leader, c.affinity):
            values.extend([values[old] for old in order])
        return new

    # ------------------------------------------------------------ algorithm choice

    def least_free(self, unconstrained: bool) -> bool:
        """LeastFreeCapacity for unconstrained requests under TASProfileMixed (KEP-2724's matrix)."""
        return unconstrained and self.gates.TASProfileMixed

    def best_fit(self, unconstrained: bool) -> bool:
        return not self.least_free(unconstrained)

    # ------------------------------------------------------------ level keys

    def level_key(self, tr: TopologyRequest | None) -> str | None:
        if tr is None:
            return None
        if tr.required is not None:
            return tr.required
        if tr.preferred is not None:
            return tr.preferred
        if tr.slice_only:
            return self.tree.level_keys[0]
        if tr.unconstrained:
            return self.tree.level_keys[-1]
        return None

    def level_key_with_implied(self, req: TASPodSetRequest) -> str | None:
        key = self.level_key(req.topology_request)
        if key is None and req.implied:
            return self.tree.level_keys[-1]
        return key

    def slice_level_key(self, tr: TopologyRequest | None) -> str:
        layers = tr.slice_layers() if tr is not None else ()
        return layers[0].topology if layers else self.tree.level_keys[-1]

    # ------------------------------------------------------------ phase 1

    def fill_in_counts(
        self, shape: Shape, match: NodeMatch | None, assumed: Mapping[int, np.ndarray] | None = None,
        in_domain: np.ndarray | None = None, leader_match: NodeMatch | None = None,
    ) -> None:
        """Phase 1: the snapshot's counters for this request shape, less the `assumed` usage per
        leaf; within `in_domain` (the leaves a replacement must stay in), counters computed
        for this run alone. With `leader_match`, the leader goes only where its own node
        constraints let it (which the failure message's node counts do not include, as in Kueue)."""
        snap = self.snap
        self.stats.total_nodes += snap.tree.leaf_count
        if match is not None:
            self.stats.taints.update(match.taints)
            self.stats.node_selector += match.node_selector
            self.stats.affinity += match.affinity
        if in_domain is None:
            counts = kept_counts(snap, shape, match, assumed, leader_match)
        else:
            visited = visited_leaves(snap, match)
            self.stats.topology_domain += int((visited & ~in_domain).sum())
            visited &= in_domain
            leader_visited = None if leader_match is None else visited_leaves(snap, leader_match) & in_domain
            counts = compute(self.tree, shape, match, remaining_less(snap, shape, assumed), visited,
                             snap.resources.names, leader_match, leader_visited)
        self.stats.resources.update(counts.resources)
        self.counts = _Counts(counts)

    # ------------------------------------------------------------ ordering

    def sorted_domains(self, domains: Sequence[int], unconstrained: bool) -> list[int]:
        """BestFit: most slices first; LeastFreeCapacity: fewest first; then fewest pods, then values."""
        c, rank = self.counts, self.rank
        slices, state = _readable(c.slice, domains), _readable(c.state, domains)
        sign = 1 if self.least_free(unconstrained) else -1
        if self.affinity_first:
            affinity = _readable(c.affinity, domains)
            return sorted(domains, key=lambda d: (-affinity[d], sign * slices[d], state[d], rank[d]))
        return sorted(domains, key=lambda d: (sign * slices[d], state[d], rank[d]))

    def sorted_domains_with_leader(self, domains: Sequence[int], unconstrained: bool) -> list[int]:
        c, rank = self.counts, self.rank
        leader, slices = _readable(c.leader, domains), _readable(c.slice_wl, domains)
        state = _readable(c.state_wl, domains)
        sign = 1 if self.least_free(unconstrained) else -1
        if self.affinity_first:
            affinity = _readable(c.affinity, domains)
            return sorted(domains, key=lambda d: (-leader[d], -affinity[d], sign * slices[d], state[d], rank[d]))
        return sorted(domains, key=lambda d: (-leader[d], sign * slices[d], state[d], rank[d]))

    def _level_order_keys(
        self, arrays: dict[str, np.ndarray], level: int, unconstrained: bool, with_leader: bool
    ) -> list[np.ndarray]:
        """The keys of `sorted_domains` (`sorted_domains_with_leader` when `with_leader`) for every
        domain of `level`, most significant first, as arrays indexed by position in the level.

        The level's `rank` orders its domains as `rank_of` does (both follow the sorted values),
        which holds while no domain has been cloned.
        """
        tree = self.tree
        window = slice(tree.offsets[level], tree.offsets[level] + len(tree.levels[level]))
        sign = 1 if self.least_free(unconstrained) else -1
        slices, state = ("slice_wl", "state_wl") if with_leader else ("slice", "state")
        keys = [sign * arrays[slices][window], arrays[state][window], tree.levels[level].rank]
        if self.affinity_first:
            keys.insert(0, -arrays["affinity"][window])
        if with_leader:
            keys.insert(0, -arrays["leader"][window])
        return keys

    def _phase1_arrays(self) -> dict[str, np.ndarray] | None:
        """Phase-1 counters as arrays, when they still describe every domain exactly."""
        if self.counts is None or self.origin is not None:
            return None
        return self.counts.phase1_arrays()

    def top_affinity_tier(self, candidates: Sequence[int]) -> Sequence[int]:
        if not self.affinity_first or not candidates:
            return candidates
        score = self.counts.affinity[candidates[0]]
        for i, d in enumerate(candidates):
            if self.counts.affinity[d] != score:
                return candidates[:i]
        return candidates

    def best_fit_domain(self, domains: Sequence[int], needed: int, getter: list[int], leader_count: int) -> int:
        """The first domain with the fewest free units that still holds `needed` (and the leaders);
        the first domain when none does."""
        candidates = self.top_affinity_tier(domains)
        leader = self.counts.leader
        best, best_count, found = candidates[0], MAX_INT32, False
        for d in candidates:
            if leader[d] < leader_count:
                continue
            s = getter[d]
            if needed <= s < best_count:
                best, best_count, found = d, s, True
        return best if found else candidates[0]

    def best_fit_for_pods(self, domains: Sequence[int], count: int, leader_count: int) -> int:
        getter = self.counts.state_wl if leader_count > 0 else self.counts.state
        return self.best_fit_domain(domains, count, getter, leader_count)

    def best_fit_for_slices(self, domains: Sequence[int], slice_count: int, leader_count: int) -> int:
        getter = self.counts.slice_wl if leader_count > 0 else self.counts.slice
        return self.best_fit_domain(domains, slice_count, getter, leader_count)

    # ------------------------------------------------------------ the partial slice

    def slice_capacity(self, d: int, with_leader: bool, with_tail: bool) -> int:
        """Whole slices `d` holds while it also holds the leader and/or the partial slice."""
        c = self.counts
        if with_tail:
            return c.slice_wlt[d] if with_leader else c.slice_t[d]
        return c.slice_wl[d] if with_leader else c.slice[d]

    def fits_slices(self, d: int, slice_count: int, leader_count: int, with_tail: bool) -> bool:
        if leader_count > 0 and self.counts.leader[d] < leader_count:
            return False
        return self.slice_capacity(d, leader_count > 0, with_tail) >= slice_count

    def best_fit_with_tail(self, domains: Sequence[int], slice_count: int, leader_count: int) -> int:
        """BestFit for the domain that also takes the partial slice: the fewest whole slices next to
        it that still hold `slice_count`, ties to the fewest whole slices; the first domain when
        none holds them."""
        candidates = self.top_affinity_tier(domains)
        leader, with_leader = self.counts.leader, leader_count > 0
        best, best_tail, best_whole, found = candidates[0], MAX_INT32, MAX_INT32, False
        for d in candidates:
            if leader[d] < leader_count:
                continue
            tail, whole = self.slice_capacity(d, with_leader, True), self.slice_capacity(d, with_leader, False)
            if tail >= slice_count and (tail < best_tail or (tail == best_tail and whole < best_whole)):
                best, best_tail, best_whole, found = d, tail, whole, True
        return best if found else candidates[0]

    def cheapest_tail_domains(self, domains: Sequence[int]) -> tuple[int | None, int, int | None]:
        """The fewest whole slices a domain gives up by taking the partial slice, at which position
        of `domains`, and the fewest of the others (None: no such domain)."""
        c = self.counts
        best: int | None = None
        second: int | None = None
        best_at = -1
        for i, d in enumerate(domains):
            if c.slice_t[d] == NO_TAIL_FIT:
                continue
            penalty = c.slice[d] - c.slice_t[d]
            if best is None or penalty < best:
                second, best, best_at = best, penalty, i
            elif second is None or penalty < second:
                second = penalty
        return best, best_at, second

    def leader_penalty_with_tail(self, domains: Sequence[int], tail_costs: tuple[int | None, int, int | None],
                                 i: int) -> int | None:
        """Whole slices given up when the leader goes to `domains[i]` and the partial slice where it
        costs least (there too, or the cheapest other domain); None when it then has no home."""
        c, d = self.counts, domains[i]
        penalty = c.slice[d] - c.slice_wlt[d] if c.slice_wlt[d] != NO_TAIL_FIT else None
        best, best_at, second = tail_costs
        elsewhere = best if best_at != i else second
        if elsewhere is not None:
            split = c.slice[d] - c.slice_wl[d] + elsewhere
            if penalty is None or split < penalty:
                penalty = split
        return penalty

    def hosts_tail_with_assigned_slices(self, d: int) -> bool:
        """Whether `d` takes the partial slice on top of the whole slices assigned to it (its
        `slice`, trimmed by the descent; the partial-slice counters keep the room it had)."""
        c = self.counts
        capacity = c.slice_wlt[d] if c.leader[d] > 0 else c.slice_t[d]
        return capacity != NO_TAIL_FIT and c.slice[d] <= capacity

    def first_domain_hosting_tail(self, candidates: Sequence[int], selected: Sequence[int]) -> int | None:
        taken = set(selected)
        slice_t = self.counts.slice_t
        return next((d for d in candidates if d not in taken and slice_t[d] != NO_TAIL_FIT), None)

    def selection_holds_tail(self, selected: Sequence[int], assigned: Sequence[int],
                             takes_leader: Sequence[bool]) -> bool:
        """Whether one of the chosen domains has room for the partial slice next to the whole
        slices it is expected to take."""
        for d, slices, leader in zip(selected, assigned, takes_leader, strict=True):
            capacity = self.slice_capacity(d, leader, True)
            if capacity != NO_TAIL_FIT and slices <= capacity:
                return True
        return False

    def place_tail(self, used: list[int], candidates: Sequence[int], tail: int) -> list[int]:
        """Close a distribution: the partial slice to the first used domain with room for it, else
        to the first other candidate that holds it; [] when none does (the roll-up rules it out)."""
        c = self.counts
        for d in used:
            if self.hosts_tail_with_assigned_slices(d):
                c.state[d] += tail
                return used
        d = self.first_domain_hosting_tail(candidates, used)
        if d is None:
            return []
        c.slice[d] = 0
        c.leader[d] = 0
        c.state[d] = tail
        return [*used, d]

    def closing_domain_with_tail(self, candidates: Sequence[int], remaining: int, leaders: int, slice_size: int,
                                 tail: int, unconstrained: bool) -> int | None:
        """A domain that takes the remaining whole slices, leaders and the partial slice at once,
        without a larger whole-slice capacity than BestFit's choice for the whole slices alone."""
        c = self.counts
        with_leader = leaders > 0
        first = candidates[0]
        if self.slice_capacity(first, with_leader, False) < remaining or c.leader[first] < leaders:
            return None
        closing = whole_fit = first
        if self.best_fit(unconstrained):
            closing = self.best_fit_with_tail(candidates, remaining, leaders)
            whole_fit = self.best_fit_for_slices(candidates, remaining, leaders)
        wider = self.slice_capacity(closing, with_leader, False) > self.slice_capacity(whole_fit, with_leader, False)
        if self.slice_capacity(closing, with_leader, True) < remaining or c.leader[closing] < leaders or wider:
            return None
        c.leader[closing] = leaders
        c.slice_wl[closing] = remaining
        c.slice[closing] = remaining
        c.state[closing] = remaining * slice_size + tail
        return closing

    # ------------------------------------------------------------ phase 2a

    def not_fit_message(self, fit: int, total: int, slice_size: int) -> str:
        unit = "pod" if slice_size == 1 else "slice"
        name = go_quote(self.snap.topology_name)
        if fit == 0:
            head = f"topology {name} doesn't allow to fit any of {total} {unit}(s)"
        else:
            head = f"topology {name} allows to fit only {fit} out of {total} {unit}(s)"
        return head + self.stats.suffix()

    def multi_layer_not_fit_message(self, level: int, params: _Params) -> str:
        c, tree = self.counts, self.tree
        text = f"topology {go_quote(self.snap.topology_name)} doesn't allow to fit"
        best = None
        for d in tree.level_domains(level):
            if best is None or c.slice[d] > c.slice[best] or (
                c.slice[d] == c.slice[best] and self.domain_id(d) < self.domain_id(best)
            ):
                best = d
        if best is None:
            return text
        for constraint in params.multi_layer:
            target = tree.level_index(constraint.topology)
            if target is None:
                continue
            needed = params.count // constraint.size
            fit = self._slices_in_subtree(best, level, target, constraint.size)
            text += f"; {fit}/{needed} slice(s) fit on level {constraint.topology}"
        return text + self.stats.suffix()

    def _slices_in_subtree(self, d: int, level: int, target: int, size: int) -> int:
        if level == target:
            return self.counts.state[d] // size
        return sum(self._slices_in_subtree(ch, level + 1, target, size) for ch in self.children[d])

    def find_level_with_fit_domains(self, level: int, p: _Params) -> tuple[int, list[int], str]:
        c, tree = self.counts, self.tree
        domains = tree.level_domains(level)
        if len(domains) == 0:
            return 0, [], f"no topology domains at level: {tree.level_keys[level]}"
        slice_count = p.count // p.slice_size
        has_tail = p.tail_size > 0
        # the partial slice counts as a slice of its own in the failure messages
        requested = slice_count + 1 if has_tail else slice_count

        def not_fit(fit: int, total: int) -> str:
            if p.multi_layer:
                return self.multi_layer_not_fit_message(level, p)
            return self.not_fit_message(fit, total, p.slice_size)

        arrays = self._phase1_arrays()
        if has_tail:
            return self._fit_with_tail(level, p, slice_count, requested, not_fit, arrays)
        if arrays is not None and self._walks_a_prefix(p, slice_count):
            return self._least_free_over_level(arrays, level, slice_count, not_fit)
        if arrays is not None and self.best_fit(p.unconstrained) and not self.affinity_first:
            top = self._best_fit_top(arrays, level, p, slice_count)
            if arrays["slice_wl"][top] >= slice_count and arrays["leader"][top] >= p.leader_count:
                return level, [top], ""
            if p.required:
                return 0, [], not_fit(int(arrays["slice"][top]), slice_count)
            if level > 0 and not p.unconstrained:
                return self.find_level_with_fit_domains(level - 1, p)
        ordered = self._ordered_level(level, p.unconstrained, arrays)
        top = ordered[0]
        best_fit = self.best_fit(p.unconstrained)
        if best_fit and c.slice_wl[top] >= slice_count and c.leader[top] >= p.leader_count:
            top = self.best_fit_for_slices(ordered, slice_count, p.leader_count)

        if self.least_free(p.unconstrained):
            for d in ordered:
                capacity = c.slice[d]
                if p.leader_count > 0:
                    if c.leader[d] < p.leader_count:
                        continue
                    capacity = c.slice_wl[d]
                if capacity >= slice_count:
                    return level, [d], ""
            if p.required:
                return 0, [], not_fit(c.state[ordered[-1]], slice_count)
        if c.slice_wl[top] >= slice_count and c.leader[top] >= p.leader_count:
            return level, [top], ""
        if p.required:
            if self.affinity_first:
                for i in range(1, len(ordered)):
                    d = ordered[i]
                    if c.slice_wl[d] >= slice_count and c.leader[d] >= p.leader_count:
                        return level, [self.best_fit_for_slices(ordered[i:], slice_count, p.leader_count)], ""
            return 0, [], not_fit(c.slice[top], slice_count)
        if level > 0 and not p.unconstrained:
            return self.find_level_with_fit_domains(level - 1, p)
        # Phase 2a only reads the counters, so arrays exact at its start are exact here too.
        return self._spread_over_level(level, ordered, slice_count, p, not_fit, arrays)

    def _fit_with_tail(
        self, level: int, p: _Params, slice_count: int, requested: int, not_fit: Callable[[int, int], str],
        arrays: dict[str, np.ndarray] | None,
    ) -> tuple[int, list[int], str]:
        """`find_level_with_fit_domains` for a PodSet with a partial slice: a domain fits when it
        holds the whole slices next to the partial one, so a set of domains is only chosen when
        the partial slice has a home in it. Domains are ordered by their whole slices, so the
        first need not hold the partial one: BestFit looks for the domain that does."""
        c = self.counts
        ordered = self._ordered_level(level, p.unconstrained, arrays)
        top = ordered[0]
        if self.best_fit(p.unconstrained) and c.leader[top] >= p.leader_count:
            top = self.best_fit_with_tail(ordered, slice_count, p.leader_count)
        if self.least_free(p.unconstrained):
            for d in ordered:
                if self.fits_slices(d, slice_count, p.leader_count, True):
                    return level, [d], ""
            if p.required:
                return 0, [], not_fit(c.state[ordered[-1]], requested)
        if self.fits_slices(top, slice_count, p.leader_count, True):
            return level, [top], ""
        if p.required:
            if self.affinity_first:
                for i in range(1, len(ordered)):
                    if self.fits_slices(ordered[i], slice_count, p.leader_count, True):
                        return level, [self.best_fit_with_tail(ordered[i:], slice_count, p.leader_count)], ""
            return 0, [], not_fit(c.slice[top], requested)
        if level > 0 and not p.unconstrained:
            return self.find_level_with_fit_domains(level - 1, p)
        return self._spread_over_level(level, ordered, slice_count, p, not_fit, arrays)

    def _best_fit_top(self, arrays: dict[str, np.ndarray], level: int, p: _Params, slice_count: int) -> int:
        """BestFit's domain at `level` on the phase-1 arrays: the first in order, or, when it holds
        every slice (and the leaders), the first of the fewest free units that still does
        (`sorted_domains_with_leader` then `best_fit_for_slices`, without listing the level)."""
        start = self.tree.offsets[level]
        window = slice(start, start + len(self.tree.levels[level]))
        slice_wl, leader = arrays["slice_wl"][window], arrays["leader"][window]
        # the order: most leaders (when there is one), most slices, fewest pods, then the rank,
        # which is the position in the level
        keys = [slice_wl, arrays["state_wl"][window]]
        largest = [True, False]
        if p.leader_count > 0:
            keys.insert(0, leader)
            largest.insert(0, True)
        top = None
        most = MAX_INT32 if p.leader_count > 0 else slice_wl.max()
        # without leaders (`slice_wl` is then `slice`), the first in the order holds every slice
        # exactly when the most slices any domain holds do: the order's first need not be found
        if p.leader_count > 0 or most < slice_count:
            top = lex_first(keys, largest)
            if slice_wl[top] < slice_count or leader[top] < p.leader_count:
                return start + top
        units = (arrays["slice_wl"] if p.leader_count > 0 else arrays["slice"])[window]
        ok = units >= slice_count
        if most >= MAX_INT32:  # an unlimited domain is no fit to weigh
            ok &= units < MAX_INT32
        if p.leader_count > 0:
            ok &= leader >= p.leader_count
        fitting = np.flatnonzero(ok)
        if not fitting.size:
            return start + (top if top is not None else lex_first(keys, largest))
        fitting_units = units[fitting]
        tied = fitting[fitting_units == fitting_units.min()]
        # the first of them in the order
        return start + int(tied[lex_first([key[tied] for key in keys], largest)])

    def _walks_a_prefix(self, p: _Params, slice_count: int) -> bool:
        """Whether phase 2a is LeastFreeCapacity's plain walk in order (no leader to place first,
        no `required` failure message naming the last domain, something to place)."""
        return self.least_free(p.unconstrained) and p.leader_count == 0 and not p.required and slice_count > 0

    def _ordered_level(self, level: int, unconstrained: bool, arrays: dict[str, np.ndarray] | None) -> list[int]:
        """`sorted_domains_with_leader` of every domain of `level`, in numpy from exact phase-1 arrays."""
        if arrays is None:
            return self.sorted_domains_with_leader(self.tree.level_domains(level), unconstrained)
        keys = self._level_order_keys(arrays, level, unconstrained, with_leader=True)
        return (np.lexsort(keys[::-1]) + self.tree.offsets[level]).tolist()

    def _least_free_over_level(
        self, arrays: dict[str, np.ndarray], level: int, slice_count: int, not_fit: Callable[[int, int], str]
    ) -> tuple[int, list[int], str]:
        """LeastFreeCapacity without a leader, on the phase-1 arrays: the first domain in order that
        holds every slice, else the first domains in order that together hold them.

        Equivalent to ordering the whole level and walking it (the general path), but it only
        orders the prefix the walk reaches. Domains without a slice are left out: the walk takes
        them, yet they end up with no pods and never reduce what remains to place.
        """
        start = self.tree.offsets[level]
        capacity = arrays["slice"][start:start + len(self.tree.levels[level])]
        fits = np.flatnonzero(capacity >= slice_count)
        if fits.size:
            keys = self._level_order_keys(arrays, level, True, with_leader=True)
            return level, [start + int(fits[lex_first([key[fits] for key in keys])])], ""
        usable = np.flatnonzero(capacity > 0)
        keys = self._level_order_keys(arrays, level, True, with_leader=False)
        # Every usable domain holds at least one slice, so the first `slice_count` always suffice.
        order = usable[lex_smallest([key[usable] for key in keys], slice_count)]
        placed = np.cumsum(capacity[order])
        if placed.size == 0 or placed[-1] < slice_count:
            return 0, [], not_fit(int(capacity.sum()), slice_count)
        taken = int(np.searchsorted(placed, slice_count)) + 1
        return level, (order[:taken] + start).tolist(), ""

    def _spread_over_level(
        self, level: int, ordered: Sequence[int], slice_count: int, p: _Params, not_fit: Callable[[int, int], str],
        arrays: dict[str, np.ndarray] | None = None,
    ) -> tuple[int, list[int], str]:
        """No single domain holds everything: take domains in order, leaders first."""
        c = self.counts
        best_fit = self.best_fit(p.unconstrained)
        results: list[int] = []
        assigned: list[int] = []  # the whole slices each of `results` is expected to take
        takes_leader: list[bool] = []
        requested = slice_count + 1 if p.tail_size else slice_count
        remaining_slices, remaining_leaders = slice_count, p.leader_count
        ordered = self.prioritize_leader_domain(ordered, p.count, p.leader_count, p.slice_size, True, p.tail_size)
        idx = 0
        while remaining_leaders > 0 and idx < len(ordered) and c.leader[ordered[idx]] > 0:
            d = ordered[idx]
            if best_fit and c.slice_wl[d] >= remaining_slices:
                d = self.best_fit_for_slices(ordered[idx:], remaining_slices, remaining_leaders)
            results.append(d)
            assigned.append(min(c.slice_wl[d], remaining_slices))
            takes_leader.append(True)
            remaining_leaders -= c.leader[d]
            remaining_slices -= c.slice_wl[d]
            idx += 1
        if remaining_leaders > 0:
            return 0, [], not_fit(p.leader_count - remaining_leaders, requested)
        rest = self._sorted_rest(level, ordered, idx, p.unconstrained, arrays)
        i = 0
        while remaining_slices > 0 and i < len(rest):
            d = rest[i]
            if best_fit and c.slice[d] >= remaining_slices:
                d = self.best_fit_for_slices(rest[i:], remaining_slices, 0)
            results.append(d)
            assigned.append(min(c.slice[d], remaining_slices))
            takes_leader.append(False)
            remaining_slices -= c.slice[d]
            i += 1
        if remaining_slices > 0:
            return 0, [], not_fit(slice_count - remaining_slices, requested)
        if p.tail_size and not self.selection_holds_tail(results, assigned, takes_leader):
            # No chosen domain has room for the partial slice next to its whole ones: widen the
            # set by one that does (any domain: best fit takes the closing one out of order).
            extra = self.first_domain_hosting_tail(rest, results)
            if extra is None:
                return 0, [], not_fit(slice_count, requested)
            results.append(extra)
        return level, results, ""

    def _sorted_rest(
        self, level: int, ordered: Sequence[int], idx: int, unconstrained: bool, arrays: dict[str, np.ndarray] | None
    ) -> list[int]:
        """`sorted_domains(ordered[idx:])`, where `ordered` holds every domain of `level`.

        With the level's phase-1 arrays, the whole level is ordered in numpy and the first `idx`
        domains of `ordered` are dropped: a subset keeps the order the whole set sorts into
        (ties are impossible without clones, as the rank differs between domains).
        """
        if arrays is None:
            return self.sorted_domains(ordered[idx:], unconstrained)
        keys = self._level_order_keys(arrays, level, unconstrained, with_leader=False)
        order: list[int] = (np.lexsort(keys[::-1]) + self.tree.offsets[level]).tolist()
        if idx == 0:
            return order
        taken = set(ordered[:idx])
        return [d for d in order if d not in taken]

    # ------------------------------------------------------------ phase 2b

    def consume_with_leaders(
        self, d: int, rest: Sequence[int], remaining: int, leaders: int, unconstrained: bool, slices: bool,
        slice_size: int,
    ) -> tuple[int, bool, int, int]:
        """Take what domain `d` offers while leaders are still to be placed (consumeWithLeadersGeneric)."""
        c = self.counts
        wl, primary = (c.slice_wl, c.slice) if slices else (c.state_wl, c.state)
        if self.best_fit(unconstrained) and wl[d] >= remaining and c.leader[d] >= leaders:
            if slices:
                d = self.best_fit_for_slices(rest, remaining, leaders)
            else:
                d = self.best_fit_for_pods(rest, remaining, leaders)
        if wl[d] >= remaining and c.leader[d] >= leaders:
            primary[d] = remaining
            c.leader[d] = leaders
            c.state[d] = remaining * slice_size
            return d, True, 0, 0
        wl[d] = min(wl[d], remaining)
        c.leader[d] = min(c.leader[d], leaders)
        primary[d] = wl[d]
        c.state[d] = wl[d] * slice_size
        return d, False, remaining - wl[d], leaders - c.leader[d]

    def prioritize_leader_domain(
        self, domains: Sequence[int], count: int, leader_count: int, slice_size: int, slices: bool, tail: int = 0
    ) -> Sequence[int]:
        """Move to the front the first domain that can host the leader without costing the workers
        capacity they need (the roll-up assumed the cheapest leader placement). With a partial
        slice, the leader and the partial slice are costed together, as the roll-up did: a
        domain that is the partial slice's only home is not given the leader."""
        if leader_count == 0 or len(domains) < 2:
            return domains
        c = self.counts
        required = count // slice_size if slices else count
        available = sum(c.slice[d] for d in domains) if slices else sum(c.state[d] for d in domains)
        tail_costs = self.cheapest_tail_domains(domains) if slices and tail else None
        for i, d in enumerate(domains):
            if c.leader[d] < leader_count:
                continue
            penalty: int | None = c.slice[d] - c.slice_wl[d] if slices else c.state[d] - c.state_wl[d]
            if tail_costs is not None:
                penalty = self.leader_penalty_with_tail(domains, tail_costs, i)
                if penalty is None:
                    continue
            if available - penalty < required:
                continue
            if i == 0:
                return domains
            return [d, *domains[:i], *domains[i + 1:]]
        return domains

    def update_counts_to_minimum(
        self, domains: Sequence[int], count: int, leader_count: int, slice_size: int, unconstrained: bool,
        slices: bool, tail: int = 0,
    ) -> list[int]:
        """Assign `count` pods (or slices) greedily over `domains`, optimizing the last one. A
        partial slice of `tail` pods (only while whole slices are distributed) goes with them:
        to the domain that closes the count when it holds both, else to a chosen domain with
        room for it, else to one more domain."""
        c = self.counts
        best_fit = self.best_fit(unconstrained)
        domains = self.prioritize_leader_domain(domains, count, leader_count, slice_size, slices, tail)
        result: list[int] = []
        remaining = count // slice_size if slices else count
        leaders = leader_count
        tail_pending = slices and tail > 0
        tail_hosted = False
        for i, d in enumerate(domains):
            if tail_pending and not tail_hosted:
                closing = self.closing_domain_with_tail(domains[i:], remaining, leaders, slice_size, tail,
                                                        unconstrained)
                if closing is not None:
                    result.append(closing)
                    return result
            if leaders > 0:
                d, done, remaining, leaders = self.consume_with_leaders(
                    d, domains[i:], remaining, leaders, unconstrained, slices, slice_size)
                result.append(d)
                tail_hosted = tail_hosted or (tail_pending and self.hosts_tail_with_assigned_slices(d))
                if done:
                    return self.place_tail(result, domains, tail) if tail_pending else result
                continue
            if slices:
                if best_fit and c.slice[d] >= remaining:
                    d = self.best_fit_for_slices(domains[i:], remaining, 0)
                c.leader[d] = 0
                if c.slice[d] >= remaining:
                    c.state[d] = remaining * slice_size
                    c.slice[d] = remaining
                    result.append(d)
                    return self.place_tail(result, domains, tail) if tail_pending else result
                c.state[d] = c.slice[d] * slice_size
                remaining -= c.slice[d]
                result.append(d)
                tail_hosted = tail_hosted or (tail_pending and self.hosts_tail_with_assigned_slices(d))
                continue
            if best_fit and c.state[d] >= remaining:
                d = self.best_fit_for_pods(domains[i:], remaining, 0)
            c.leader[d] = 0
            if c.state[d] >= remaining:
                c.state[d] = remaining
                result.append(d)
                return result
            remaining -= c.state[d]
            result.append(d)
        return []  # Kueue logs "unexpected remainingCount" and assigns nothing

    def descend(self, fit: list[int], fit_level: int, p: _Params, balanced: bool = False) -> list[int]:
        """Walk from the fit level to the leaves, narrowing the domains at each level."""
        tree, c = self.tree, self.counts
        fit = self.update_counts_to_minimum(fit, p.count, p.leader_count, p.slice_size, p.unconstrained, True,
                                            p.tail_size)
        level = fit_level
        lowest = tree.depth - 1
        while level < min(lowest, p.slice_level) and not balanced:
            children = [ch for d in fit for ch in self.children[d]]
            ordered = self.sorted_domains(children, p.unconstrained)
            fit = self.update_counts_to_minimum(ordered, p.count, p.leader_count, p.slice_size, p.unconstrained, True,
                                                p.tail_size)
            level += 1
        while level < lowest:
            size = p.slice_size
            if level >= p.slice_level:
                size = p.slice_size_at_level.get(level + 1, 1)
            next_fit: list[int] = []
            for d in fit:
                ordered = self.sorted_domains(self.children[d], p.unconstrained)
                if size > 1:
                    for ch in ordered:
                        c.slice[ch] = c.state[ch] // size
                        c.slice_wl[ch] = c.state_wl[ch] // size
                next_fit.extend(self.update_counts_to_minimum(
                    ordered, c.state[d], c.leader[d], size, p.unconstrained, size > 1))
            fit = next_fit
            level += 1
        return fit

    def build_assignment(self, domains: Sequence[int], counts: Sequence[int]) -> TopologyAssignment:
        """Lowest-level domains sorted by their level values; only the hostname when it is the lowest level."""
        tree = self.tree
        start = tree.depth - 1 if tree.lowest_is_node else 0
        pairs = sorted((self.values(d), n) for d, n in zip(domains, counts, strict=True) if n)
        return TopologyAssignment(
            tree.level_keys[start:], tuple(DomainAssignment(values[start:], n) for values, n in pairs))


# ---------------------------------------------------------------- vector helpers


def lex_first(keys: Sequence[np.ndarray], largest: Sequence[bool] | None = None) -> int:
    """The position a stable sort by `keys` (most significant first) puts first: `lex_smallest(keys, 1)`,
    narrowing to the rows holding each key's least value (its greatest, where `largest`) in turn."""
    pool: np.ndarray | None = None
    for i, key in enumerate(keys):
        values = key if pool is None else key[pool]
        target = values.max() if largest is not None and largest[i] else values.min()
        hits = np.flatnonzero(values == target)
        pool = hits if pool is None else pool[hits]
        if len(pool) == 1:
            break
    assert pool is not None and len(pool), "no keys, or no rows"
    return int(pool[0])


def lex_smallest(keys: Sequence[np.ndarray], k: int) -> np.ndarray:
    """Positions of the `k` rows a stable sort by `keys` (most significant first) puts first, in
    that order; rows equal in every key keep their position order.

    Each key only narrows the rows tied at the cut (by partitioning, not sorting), so taking
    a few rows out of many costs a few linear passes.
    """
    n = len(keys[0]) if keys else 0
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    need = min(k, n)
    pool = np.arange(n)
    whole = True  # pool is still every row, so a key needs no gathering
    taken: list[np.ndarray] = []
    for key in keys:
        if pool.size <= need:
            break
        values = key if whole else key[pool]
        cut = np.partition(values, need - 1)[need - 1]
        below = values < cut
        taken.append(pool[below])
        need -= int(np.count_nonzero(below))
        tied = values == cut
        if not whole or not tied.all():
            pool, whole = pool[tied], False
    else:
        pool = pool[:need]
    chosen = np.sort(np.concatenate([*taken, pool]))
    return chosen[np.lexsort([key[chosen] for key in reversed(keys)])]
