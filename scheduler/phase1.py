"""Phase 1 of placement: how many pods and slices fit in every domain of a flavor's tree.

Leaves count from their remaining capacity; every other domain from its children
(Kueue's fillInCounts). The counters depend on the capacity and on a few properties of the
request (its per-pod requests, the leader's, the nodes it may use, the slice sizes), not on
how many pods it asks for. So the snapshot keeps them per such request shape, and when
capacity or usage changes on a few leaves (an admission, a finished workload, a pod), it
counts those leaves again and recomputes only their ancestors instead of the whole tree:
on a large cluster that is the difference between counting 50,000 leaves and counting four.

The counters are numpy arrays indexed by global domain index (one window per level).
Placement reads them as arrays while ordering a whole level and as Python lists while it
walks down the tree; the lists are made the first time a counter is read that way and
then kept in step with the arrays.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scheduler.snapshot import TASFlavorSnapshot, worth_patching

if TYPE_CHECKING:
    from scheduler.placement import NodeMatch
    from scheduler.tree import TopologyTree

MAX_INT32 = 2**31 - 1
_NO_CONTRIBUTOR = np.int64(2**62)
_FIRST = np.zeros(1, dtype=np.int64)  # the segment starts of one group

COUNTERS = ("affinity", "leader", "slice", "slice_wl", "state", "state_wl")
# A PodSet whose count is not a multiple of its slice size also has a partial slice to place
# (TASPartialSlices): `slice_t` is the whole slices a domain holds while it also holds the
# partial one, `slice_wlt` the same with room kept for the leader; NO_TAIL_FIT where the
# partial slice does not fit. Only shapes with a partial slice carry them.
TAIL_COUNTERS = ("slice_t", "slice_wlt")
ALL_COUNTERS = COUNTERS + TAIL_COUNTERS
NO_TAIL_FIT = -1
_NO_PENALTY = 2**40  # above any penalty in slices, and still no overflow when two are added

# Shapes kept per snapshot; each costs a few arrays (and lists) the size of the tree.
SHAPES_KEPT = 16


@dataclass(frozen=True, slots=True)
class Shape:
    """What phase 1 depends on besides capacity (not the pod count)."""

    requests: np.ndarray
    leader_requests: np.ndarray | None
    slice_level: int
    slice_size: int
    slice_size_at_level: Mapping[int, int]
    simulate_empty: bool = False
    tail_size: int = 0  # pods of the partial slice (the count modulo the slice size)

    def key(self, match: NodeMatch | None, leader_match: NodeMatch | None = None) -> tuple:
        return (self.requests.tobytes(), None if self.leader_requests is None else self.leader_requests.tobytes(),
                self.slice_level, self.slice_size, tuple(sorted(self.slice_size_at_level.items())),
                self.simulate_empty, self.tail_size, id(match), id(leader_match))

    @property
    def counters(self) -> tuple[str, ...]:
        return ALL_COUNTERS if self.tail_size else COUNTERS

    def hosting_tail(self, pods: int) -> int:
        """Whole slices a domain of `pods` free pods at the slice level holds next to the partial
        slice (sliceCountHostingTail); NO_TAIL_FIT when the partial slice itself does not fit."""
        return NO_TAIL_FIT if pods < self.tail_size else (pods - self.tail_size) // self.slice_size

    def hosting_tail_array(self, pods: np.ndarray) -> np.ndarray:
        return np.where(pods < self.tail_size, NO_TAIL_FIT, (pods - self.tail_size) // self.slice_size)


@dataclass(slots=True)
class Counts:
    """Phase-1 counters of every domain for one request shape on one snapshot."""

    shape: Shape
    match: NodeMatch | None
    visited: np.ndarray  # bool per leaf: the leaves the request may use
    arrays: dict[str, np.ndarray]  # counter -> int64 per global domain index
    limiting: np.ndarray  # per leaf: the resource column that leaves it without a pod (-1: none)
    resources: Counter  # leaves the request may use that hold no pod, per limiting resource name
    version: int = -1  # the snapshot version the counters describe (-1: not kept)
    assumed: np.ndarray | None = None  # leaves counted with assumed usage taken off
    generation: int = 0  # bumped whenever the counters change in place
    lists: dict[str, list[int]] = field(default_factory=dict)
    # the leader's own node constraints (TASLeaderPodSetFeasibility) and the leaves they leave
    # it; None: the leader may use the workers' leaves, and only those
    leader_match: NodeMatch | None = None
    leader_visited: np.ndarray | None = None

    def as_list(self, name: str) -> list[int]:
        """The counter as a Python list (shared: read it, copy before writing)."""
        values = self.lists.get(name)
        if values is None:
            values = self.lists[name] = self.arrays[name].tolist()
        return values


# ---------------------------------------------------------------- computing


def count_in(requests: np.ndarray, capacity: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """How many times `requests` fits in each row of `capacity`, and, for the rows where it
    does not fit at all, the limiting column (-1 elsewhere).

    Ties between resources go to the alphabetically first name, as in Kueue's
    CountInWithLimitingResource; a row limited by nothing reports -1.
    """
    cols = np.flatnonzero(requests).tolist()
    cols.sort(key=lambda i: names[i])
    n = capacity.shape[0]
    if not cols:
        return np.full(n, MAX_INT32, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    per_resource = np.maximum(capacity[:, cols] // requests[cols], 0)
    np.minimum(per_resource, MAX_INT32, out=per_resource)
    counts = per_resource.min(axis=1)
    # the limiting resource matters only where nothing fits (the failure message counts it);
    # elsewhere it is reported as -1
    limiting = np.full(n, -1, dtype=np.int64)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        limiting[empty] = np.asarray(cols, dtype=np.int64)[np.argmin(per_resource[empty], axis=1)]
    return counts, limiting


def _leaf_counters(shape: Shape, remaining: np.ndarray, visited: np.ndarray, affinity: np.ndarray | None,
                   names: Sequence[str], lowest_is_slice_level: bool,
                   leader_visited: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The counters of some leaves (`remaining`, `visited`, `affinity` and `leader_visited` rows
    of those leaves).

    The leader takes a leaf it fits on among `leader_visited` (its own node constraints) or,
    without them, among the workers' leaves. A leaf only the leader may use holds the leader
    and no worker: its `state` and `state_wl` stay 0 (Kueue's fillLeaderOnlyLeafCounts)."""
    state, limiting = count_in(shape.requests, remaining, names)
    state[~visited] = 0
    if shape.leader_requests is not None:
        leader_requests = shape.leader_requests
        if len(leader_requests) < remaining.shape[1]:  # resources added since: it asks for none of them
            leader_requests = np.pad(leader_requests, (0, remaining.shape[1] - len(leader_requests)))
        leader_fits, _ = count_in(leader_requests, remaining, names)
        leader_mask = (leader_fits > 0) & (visited if leader_visited is None else leader_visited)
        after_leader = remaining - np.where(leader_mask[:, None], leader_requests[None, :], 0)
        state_wl, _ = count_in(shape.requests, after_leader, names)
        state_wl[~visited] = 0
        leader = leader_mask.astype(np.int64)
    else:
        leader = np.zeros(len(state), dtype=np.int64)
        state_wl = state.copy()
    affinity = np.zeros(len(state), dtype=np.int64) if affinity is None else np.where(visited, affinity, 0)
    if lowest_is_slice_level:
        slice_, slice_wl = state // shape.slice_size, state_wl // shape.slice_size
    else:
        slice_, slice_wl = np.zeros_like(state), np.zeros_like(state)
    counters = dict(state=state, state_wl=state_wl, slice=slice_, slice_wl=slice_wl, leader=leader,
                    affinity=affinity)
    if shape.tail_size:
        if lowest_is_slice_level:
            counters["slice_t"] = shape.hosting_tail_array(state)
            counters["slice_wlt"] = shape.hosting_tail_array(state_wl)
        else:  # below the slice level a domain holds no slice: never read
            counters["slice_t"], counters["slice_wlt"] = np.zeros_like(state), np.zeros_like(state)
    return counters, limiting


def _roll_level(shape: Shape, level: int, child: Mapping[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
    """Counters of domains at `level` from their children's (`child`, grouped by parent, each
    group starting at `starts`) -- fillInCountsHelper for one level."""
    c_state, c_state_wl = child["state"], child["state_wl"]
    inner = shape.slice_size_at_level.get(level + 1)
    if inner:
        c_state = c_state // inner * inner
        c_state_wl = c_state_wl // inner * inner
    leader_required = shape.leader_requests is not None
    contributor = child["leader"] > 0 if leader_required else np.ones(len(c_state), dtype=bool)
    min_diff = np.minimum.reduceat(np.where(contributor, c_state - c_state_wl, _NO_CONTRIBUTOR), starts)
    min_slice_diff = np.minimum.reduceat(
        np.where(contributor, child["slice"] - child["slice_wl"], _NO_CONTRIBUTOR), starts)
    has = np.maximum.reduceat(contributor.astype(np.int8), starts) > 0
    d_state = np.add.reduceat(c_state, starts)
    slice_cap = np.add.reduceat(child["slice"], starts)
    d_state_wl = np.where(has, d_state - min_diff, 0)
    d_slice_wl = np.where(has, slice_cap - min_slice_diff, 0)
    children_slices = slice_cap
    if level == shape.slice_level:
        slice_cap = d_state // shape.slice_size
        d_slice_wl = d_state_wl // shape.slice_size
    rolled = dict(state=d_state, state_wl=d_state_wl, slice=slice_cap, slice_wl=d_slice_wl,
                  leader=np.maximum.reduceat(child["leader"], starts),
                  affinity=np.add.reduceat(child["affinity"], starts))
    if shape.tail_size:
        rolled["slice_t"], rolled["slice_wlt"] = _roll_tail(shape, level, child, starts, d_state, d_state_wl,
                                                            children_slices)
    return rolled


def _roll_tail(shape: Shape, level: int, child: Mapping[str, np.ndarray], starts: np.ndarray, d_state: np.ndarray,
               d_state_wl: np.ndarray, children_slices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The partial-slice counters of domains at `level` (fillTailCounts). At the slice level the
    partial slice is charged against the domain's own pods; above it, against the child that
    gives up the fewest whole slices for it (for the leader and the partial slice together: one
    child taking both, or the two cheapest different children), bounded by the domain's pods."""
    if level > shape.slice_level:
        return np.zeros_like(d_state), np.zeros_like(d_state)
    if level == shape.slice_level:
        return shape.hosting_tail_array(d_state), shape.hosting_tail_array(d_state_wl)
    c_slice, c_tail, c_wlt = child["slice"], child["slice_t"], child["slice_wlt"]
    tail_penalty = np.where(c_tail != NO_TAIL_FIT, c_slice - c_tail, _NO_PENALTY)
    t1, t1_at, t2 = _two_least(tail_penalty, starts)
    d_tail = np.where(t1 < _NO_PENALTY, np.minimum(children_slices - t1, shape.hosting_tail_array(d_state)),
                      NO_TAIL_FIT)
    if shape.leader_requests is None:
        return d_tail, np.full_like(d_tail, NO_TAIL_FIT)
    eligible = child["leader"] > 0
    leader_penalty = np.where(eligible, c_slice - child["slice_wl"], _NO_PENALTY)
    both_penalty = np.where(eligible & (c_wlt != NO_TAIL_FIT), c_slice - c_wlt, _NO_PENALTY)
    l1, l1_at, l2 = _two_least(leader_penalty, starts)
    split = np.where(l1_at != t1_at, l1 + t1, np.minimum(l2 + t1, l1 + t2))
    best = np.minimum(np.minimum.reduceat(both_penalty, starts), split)
    d_wlt = np.where(best < _NO_PENALTY, np.minimum(children_slices - best, shape.hosting_tail_array(d_state_wl)),
                     NO_TAIL_FIT)
    return d_tail, d_wlt


def _two_least(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group (starting at `starts`): the least value, the position of its first occurrence,
    and the least of the others."""
    least = np.minimum.reduceat(values, starts)
    sizes = np.diff(np.append(starts, len(values)))
    positions = np.arange(len(values))
    first = np.minimum.reduceat(np.where(values == np.repeat(least, sizes), positions, len(values)), starts)
    others = values.copy()
    others[first] = _NO_PENALTY
    return least, first, np.minimum.reduceat(others, starts)


def _window(tree: TopologyTree, level: int) -> slice:
    start = tree.offsets[level]
    return slice(start, start + len(tree.levels[level]))


def _starved(visited: np.ndarray, state: np.ndarray, limiting: np.ndarray, names: Sequence[str]) -> Counter:
    starved = np.flatnonzero(visited & (state == 0) & (limiting >= 0))
    out: Counter = Counter()
    if len(starved) <= 64:
        for col in limiting[starved].tolist():
            out[names[col]] += 1
    else:
        for col, num in zip(*np.unique(limiting[starved], return_counts=True), strict=True):
            out[names[int(col)]] += int(num)
    return out


def compute(tree: TopologyTree, shape: Shape, match: NodeMatch | None, remaining: np.ndarray,
            visited: np.ndarray, names: Sequence[str], leader_match: NodeMatch | None = None,
            leader_visited: np.ndarray | None = None) -> Counts:
    """Every domain's counters from the leaves' remaining capacity."""
    lowest = tree.depth - 1
    affinity = match.affinity_score if match is not None else None
    leaf, limiting = _leaf_counters(shape, remaining, visited, affinity, names, shape.slice_level == lowest,
                                    leader_visited)
    names_kept = shape.counters
    arrays = {name: np.empty(tree.size, dtype=np.int64) for name in names_kept}
    window = _window(tree, lowest)
    for name in names_kept:
        arrays[name][window] = leaf[name]
    for lvl in range(lowest - 1, -1, -1):
        child_window = _window(tree, lvl + 1)
        child = {name: arrays[name][child_window] for name in names_kept}
        rolled = _roll_level(shape, lvl, child, tree.levels[lvl].child_start[:-1])
        window = _window(tree, lvl)
        for name in names_kept:
            arrays[name][window] = rolled[name]
    return Counts(shape, match, visited, arrays, limiting, _starved(visited, leaf["state"], limiting, names),
                  leader_match=leader_match, leader_visited=leader_visited)


def refresh(counts: Counts, tree: TopologyTree, leaves: np.ndarray, rows: np.ndarray, names: Sequence[str]) -> None:
    """Count `leaves` (sorted local leaf indices) again, from their remaining capacity `rows`,
    and recompute their ancestors."""
    if counts.shape.leader_requests is None and not counts.shape.tail_size and len(leaves) <= FEW_LEAVES:
        _refresh_few(counts, tree, leaves.tolist(), rows.tolist(), names)
        return
    shape, arrays, lists = counts.shape, counts.arrays, counts.lists
    lowest = tree.depth - 1
    visited = counts.visited[leaves]
    affinity = counts.match.affinity_score if counts.match is not None else None
    leader_visited = None if counts.leader_visited is None else counts.leader_visited[leaves]
    leaf, limiting = _leaf_counters(shape, rows, visited,
                                    None if affinity is None else affinity[leaves], names, shape.slice_level == lowest,
                                    leader_visited)
    window = tree.offsets[lowest] + leaves
    before = arrays["state"][window]
    if (visited & ((before == 0) | (leaf["state"] == 0))).any():  # a leaf was or is starved
        counts.resources.subtract(_starved(visited, before, counts.limiting[leaves], names))
        counts.resources.update(_starved(visited, leaf["state"], limiting, names))
        counts.resources += Counter()  # drop the resources no leaf is starved of any more
    counts.limiting[leaves] = limiting
    _store(arrays, lists, window, leaf)
    changed = leaves
    for lvl in range(lowest - 1, -1, -1):
        if len(changed) <= FEW_PARENTS:  # the common case, a handful of domains: in Python
            changed = _roll_few(counts, tree, lvl, changed)
            continue
        parents = np.unique(tree.levels[lvl + 1].parent[changed])
        child_start = tree.levels[lvl].child_start
        below = tree.offsets[lvl + 1]
        if len(parents) == 1:  # the common case: every change under one domain
            parent = int(parents[0])
            members = np.arange(below + int(child_start[parent]), below + int(child_start[parent + 1]))
            starts = _FIRST
        else:
            first, stop = child_start[parents], child_start[parents + 1]
            sizes = stop - first
            starts = np.zeros(len(parents), dtype=np.int64)
            np.cumsum(sizes[:-1], out=starts[1:])
            members = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts - first, sizes)
            members += below
        child = {name: arrays[name][members] for name in shape.counters}
        _store(arrays, lists, tree.offsets[lvl] + parents, _roll_level(shape, lvl, child, starts))
        changed = parents
    counts.generation += 1


# Up to this many changed domains at a level, their parents are rolled up one by one in
# Python (numpy's fixed cost per call is most of the time for so few).
FEW_PARENTS = 16
# Up to this many changed leaves of a shape without a leader, `_refresh_few` counts them and
# carries the change up in Python. It costs about 1 us a leaf, the numpy path 80-200 us
# whatever the count below a few hundred leaves (measured on 10,000 nodes): the two meet near
# 180 leaves. A play finishes many workloads between two placements of a shape.
FEW_LEAVES = 128


def _refresh_few(counts: Counts, tree: TopologyTree, leaves: list[int], rows: list[list[int]],
                 names: Sequence[str]) -> None:
    """`refresh` of a few leaves for a shape without a leader, in Python, carrying each
    domain's change up instead of adding up its children again.

    Without a leader no domain holds a leader pod, so `state_wl` equals `state` and
    `slice_wl` equals `slice` everywhere, and `leader` is 0; `affinity` depends on the
    nodes a request may use, not on capacity. What changes is `state` (a sum of the
    children's, each rounded down to the inner slice size) and `slice` (the children's sum,
    or `state` // the slice size at the slice level): a parent changes by the sum of its
    children's changes."""
    shape, arrays, lists = counts.shape, counts.arrays, counts.lists
    requests = shape.requests.tolist()
    cols = sorted((i for i, r in enumerate(requests) if r), key=lambda i: names[i])
    lowest = tree.depth - 1
    slice_size = shape.slice_size if shape.slice_level == lowest else 0
    visited, limiting, state = counts.visited, counts.limiting, arrays["state"]
    base = tree.offsets[lowest]
    starved: Counter = Counter()
    changed: dict[int, tuple[int, int, int, int]] = {}  # domain (at the level) -> old and new state, slice
    for leaf, row in zip(leaves, rows, strict=True):
        fit, short = MAX_INT32, -1
        for col in cols:  # in the resources' name order: the first to run out is the limiting one
            n = row[col] // requests[col]
            if n <= 0:
                fit, short = 0, col
                break
            if n < fit:
                fit = n
        if fit:
            short = -1
        new = fit if visited[leaf] else 0
        old, old_short = int(state[base + leaf]), int(limiting[leaf])
        if visited[leaf]:
            if old == 0 and old_short >= 0:
                starved[names[old_short]] -= 1
            if new == 0 and short >= 0:
                starved[names[short]] += 1
        limiting[leaf] = short
        old_slice = int(arrays["slice"][base + leaf])
        changed[leaf] = (old, new, old_slice, new // slice_size if slice_size else 0)
    if starved:
        counts.resources.update(starved)
        counts.resources += Counter()  # drop the resources no leaf is starved of any more
    _store_few(arrays, lists, base, changed)
    for level in range(lowest - 1, -1, -1):
        inner = shape.slice_size_at_level.get(level + 1)
        parent_of = tree.levels[level + 1].parent
        here = tree.offsets[level]
        sums: dict[int, list[int]] = {}
        for child, (old, new, old_slice, new_slice) in changed.items():
            if inner:
                old, new = old // inner * inner, new // inner * inner
            if old != new or old_slice != new_slice:
                delta = sums.setdefault(int(parent_of[child]), [0, 0])
                delta[0] += new - old
                delta[1] += new_slice - old_slice
        changed = {}
        for parent, (d_state, d_slice) in sums.items():
            old, old_slice = int(state[here + parent]), int(arrays["slice"][here + parent])
            new = old + d_state
            new_slice = new // shape.slice_size if level == shape.slice_level else old_slice + d_slice
            changed[parent] = (old, new, old_slice, new_slice)
        _store_few(arrays, lists, here, changed)
        if not changed:
            break
    counts.generation += 1


def _store_few(arrays: dict[str, np.ndarray], lists: dict[str, list[int]], offset: int,
               changed: Mapping[int, tuple[int, int, int, int]]) -> None:
    """New `state` and `slice` (and their `_wl` twins, equal without a leader) of a few domains."""
    for name, pick in (("state", 1), ("state_wl", 1), ("slice", 3), ("slice_wl", 3)):
        array, listed = arrays[name], lists.get(name)
        for domain, values in changed.items():
            array[offset + domain] = values[pick]
            if listed is not None:
                listed[offset + domain] = values[pick]


def _roll_few(counts: Counts, tree: TopologyTree, level: int, changed: np.ndarray | list[int]) -> list[int]:
    """`_roll_level` for the parents (at `level`) of the few `changed` domains of the level
    below, one parent at a time on Python lists; the parents, sorted."""
    shape, arrays, lists = counts.shape, counts.arrays, counts.lists
    parent_of = tree.levels[level + 1].parent
    child_start = tree.levels[level].child_start
    below, here = tree.offsets[level + 1], tree.offsets[level]
    parents = sorted({int(parent_of[i]) for i in changed})
    for parent in parents:
        lo, hi = below + int(child_start[parent]), below + int(child_start[parent + 1])
        kids = {name: lists[name][lo:hi] if name in lists else arrays[name][lo:hi].tolist()
                for name in shape.counters}
        at = here + parent
        for name, value in _roll_one(shape, level, kids).items():
            arrays[name][at] = value
            listed = lists.get(name)
            if listed is not None:
                listed[at] = value
    return parents


def _roll_one(shape: Shape, level: int, kids: Mapping[str, list[int]]) -> dict[str, int]:
    """One domain's counters at `level` from its children's (see `_roll_level`)."""
    c_state, c_state_wl = kids["state"], kids["state_wl"]
    inner = shape.slice_size_at_level.get(level + 1)
    if inner:
        c_state = [v // inner * inner for v in c_state]
        c_state_wl = [v // inner * inner for v in c_state_wl]
    if shape.leader_requests is not None:
        contributors = [i for i, leader in enumerate(kids["leader"]) if leader > 0]
    else:
        contributors = range(len(c_state))
    d_state, slice_cap = sum(c_state), sum(kids["slice"])
    if contributors:
        slices, slices_wl = kids["slice"], kids["slice_wl"]
        d_state_wl = d_state - min(c_state[i] - c_state_wl[i] for i in contributors)
        d_slice_wl = slice_cap - min(slices[i] - slices_wl[i] for i in contributors)
    else:
        d_state_wl = d_slice_wl = 0
    children_slices = slice_cap
    if level == shape.slice_level:
        slice_cap, d_slice_wl = d_state // shape.slice_size, d_state_wl // shape.slice_size
    rolled = {"state": d_state, "state_wl": d_state_wl, "slice": slice_cap, "slice_wl": d_slice_wl,
              "leader": max(kids["leader"], default=0), "affinity": sum(kids["affinity"])}
    if shape.tail_size:
        rolled["slice_t"], rolled["slice_wlt"] = _roll_tail_one(shape, level, kids, d_state, d_state_wl,
                                                                children_slices)
    return rolled


def _roll_tail_one(shape: Shape, level: int, kids: Mapping[str, list[int]], d_state: int, d_state_wl: int,
                   children_slices: int) -> tuple[int, int]:
    """`_roll_tail` of one domain."""
    if level > shape.slice_level:
        return 0, 0
    if level == shape.slice_level:
        return shape.hosting_tail(d_state), shape.hosting_tail(d_state_wl)
    slices = kids["slice"]
    tails = [(s - t, i) for i, (s, t) in enumerate(zip(slices, kids["slice_t"], strict=True)) if t != NO_TAIL_FIT]
    tail = NO_TAIL_FIT
    if tails:
        tail = min(children_slices - min(tails)[0], shape.hosting_tail(d_state))
    if shape.leader_requests is None:
        return tail, NO_TAIL_FIT
    leaders = [(slices[i] - kids["slice_wl"][i], i) for i, n in enumerate(kids["leader"]) if n > 0]
    options = [slices[i] - kids["slice_wlt"][i] for _, i in leaders if kids["slice_wlt"][i] != NO_TAIL_FIT]
    options += [lp + tp for lp, li in leaders for tp, ti in tails if li != ti]
    if not options:
        return tail, NO_TAIL_FIT
    return tail, min(children_slices - min(options), shape.hosting_tail(d_state_wl))


def _store(arrays: dict[str, np.ndarray], lists: dict[str, list[int]], at: np.ndarray,
           values: Mapping[str, np.ndarray]) -> None:
    positions: list[int] | None = None
    for name in values:
        arrays[name][at] = values[name]
        listed = lists.get(name)
        if listed is not None:
            if positions is None:
                positions = at.tolist()
            for i, v in zip(positions, values[name].tolist(), strict=True):
                listed[i] = v


# ---------------------------------------------------------------- kept per snapshot


def visited_leaves(snap: TASFlavorSnapshot, match: NodeMatch | None) -> np.ndarray:
    visited = np.ones(snap.tree.leaf_count, dtype=bool)
    if match is not None:
        visited &= ~match.excluded
    return visited


def remaining_less(snap: TASFlavorSnapshot, shape: Shape, assumed: Mapping[int, np.ndarray] | None) -> np.ndarray:
    """The leaves' remaining capacity for this shape, less the `assumed` usage per leaf (a copy
    then: the snapshot's is shared)."""
    remaining = snap.remaining(simulate_empty=shape.simulate_empty)
    if assumed:
        remaining = remaining.copy()
        for leaf, usage in assumed.items():
            remaining[leaf] -= usage
    return remaining


def kept_counts(snap: TASFlavorSnapshot, shape: Shape, match: NodeMatch | None,
                assumed: Mapping[int, np.ndarray] | None = None, leader_match: NodeMatch | None = None) -> Counts:
    """The snapshot's counters for this shape, brought up to date with its capacity and usage,
    less `assumed` usage per leaf (PodSets of the same workload placed before this one), with
    the leader on the leaves of `leader_match` when it is given.

    The leaves that carry assumed usage are counted again from the real capacity the next
    time the counters are asked for."""
    cache: OrderedDict[tuple, Counts] = snap.phase1_cache
    key = shape.key(match, leader_match)
    version = snap.free_version if shape.simulate_empty else snap.version
    counts = cache.get(key)
    assumed_leaves = np.fromiter(sorted(assumed), dtype=np.intp, count=len(assumed)) if assumed else None
    if counts is not None and counts.match is match and counts.leader_match is leader_match:
        cache.move_to_end(key)
        if counts.version == version and counts.assumed is None and assumed_leaves is None:
            return counts
        leaves = snap.changed_leaves(counts.version, simulate_empty=shape.simulate_empty)
        if leaves is not None:
            extra = [a for a in (counts.assumed, assumed_leaves) if a is not None]
            if extra:
                leaves = np.unique(np.concatenate([leaves, *extra]))
            if worth_patching(len(leaves), snap.tree.leaf_count):
                if len(leaves):
                    rows = snap.remaining(simulate_empty=shape.simulate_empty)[leaves]
                    if assumed:
                        positions = np.searchsorted(leaves, assumed_leaves)
                        rows[positions] -= np.stack([assumed[int(leaf)] for leaf in assumed_leaves])
                    refresh(counts, snap.tree, leaves, rows, snap.resources.names)
                counts.version, counts.assumed = version, assumed_leaves
                return counts
    counts = compute(snap.tree, shape, match, remaining_less(snap, shape, assumed), visited_leaves(snap, match),
                     snap.resources.names, leader_match,
                     None if leader_match is None else visited_leaves(snap, leader_match))
    counts.version, counts.assumed = version, assumed_leaves
    cache[key] = counts
    cache.move_to_end(key)
    while len(cache) > SHAPES_KEPT:
        cache.popitem(last=False)
    return counts
