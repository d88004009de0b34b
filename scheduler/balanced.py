"""Balanced placement (TASBalancedPlacement): spread a preferred request evenly.

Instead of filling the tightest domains first, pick the fewest domains that can hold the
request and give each of them at least a threshold of slices: the largest minimum any
such set allows. Candidate sets are pruned copies of the tree (domains below the
threshold are emptied), so the shared counters stay intact for the BestFit fallback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cmp_to_key

from scheduler.placement import Placer, _Params


def evaluate_greedy(placer: Placer, domains: Sequence[int], slice_count: int, leader_count: int
                    ) -> tuple[bool, int, int | None, int | None]:
    """Whether a greedy BestFit pass over `domains` fits the request, how many domains it uses,
    and the last domain it takes with the leader and without."""
    c = placer.counts
    selected = 0
    remaining_slices, remaining_leaders = slice_count, leader_count
    last = last_with_leader = None
    if leader_count > 0:
        with_leader = placer.sorted_domains_with_leader(domains, False)
        idx = 0
        while remaining_leaders > 0 and idx < len(with_leader) and c.leader[with_leader[idx]] > 0:
            d = with_leader[idx]
            selected += 1
            last_with_leader = d
            remaining_leaders -= c.leader[d]
            remaining_slices -= c.slice_wl[d]
            idx += 1
        without_leader = placer.sorted_domains(with_leader[idx:], False)
    else:
        without_leader = placer.sorted_domains(domains, False)
    if remaining_leaders > 0:
        return False, 0, None, None
    idx = 0
    while remaining_slices > 0 and idx < len(without_leader) and c.slice[without_leader[idx]] > 0:
        d = without_leader[idx]
        selected += 1
        last = d
        remaining_slices -= c.slice[d]
        idx += 1
    if remaining_slices > 0:
        return False, 0, None, None
    return True, selected, last_with_leader, last


def balance_threshold(placer: Placer, slice_count: int, selected: int, last_with_leader: int | None,
                      last: int | None) -> int:
    """The largest minimum number of slices per domain a balanced solution can reach."""
    c = placer.counts
    threshold = slice_count // selected if selected else 0  # nothing to place: no domain taken
    if last_with_leader is not None:
        threshold = min(threshold, c.slice_wl[last_with_leader])
    if last is not None:
        threshold = min(threshold, c.slice[last])
    return threshold


def children_entropy(placer: Placer, d: int) -> float:
    state = placer.counts.state
    counts = [state[ch] for ch in placer.children[d]]
    total = sum(counts)
    if total == 0:
        return 0.0
    return -sum((n / total) * math.log2(n / total) for n in counts if n > 0)


def select_optimal_domain_set(placer: Placer, domains: Sequence[int], slice_count: int, leader_count: int,
                              slice_size: int, by_entropy: bool) -> list[int] | None:
    """The fewest domains (as many as greedy needs) that fit the request with the least capacity left
    over, by dynamic programming over (domains used, leaders left, pods left)."""
    fit, optimal, _, _ = evaluate_greedy(placer, domains, slice_count, leader_count)
    if not fit:
        return None
    c = placer.counts
    if by_entropy:
        entropies: dict[int, float] = {}

        def entropy(d: int) -> float:
            value = entropies.get(d)
            if value is None:
                value = entropies[d] = children_entropy(placer, d)
            return value

        def compare(a: int, b: int) -> int:
            if c.leader[a] != c.leader[b]:
                return c.leader[b] - c.leader[a]
            if c.slice_wl[a] != c.slice_wl[b]:
                return c.slice_wl[b] - c.slice_wl[a]
            ea, eb = entropy(a), entropy(b)
            if ea != eb:
                return 1 if eb > ea else -1
            return (placer.rank[a] > placer.rank[b]) - (placer.rank[a] < placer.rank[b])
        ordered = sorted(domains, key=cmp_to_key(compare))
    else:
        ordered = sorted(domains, key=lambda d: placer.rank[d])
    placements: list[dict[int, dict[int, list[int]]]] = [{} for _ in range(optimal + 1)]
    placements[0][leader_count] = {slice_count * slice_size: []}
    for d in ordered:
        for i in range(optimal, 0, -1):
            before_level = placements[i - 1]
            for before_leaders in sorted(before_level):
                by_pods = before_level[before_leaders]
                for before_pods in sorted(by_pods):
                    if before_leaders <= 0 and before_pods <= 0:
                        continue
                    chosen = [*by_pods[before_pods], d]
                    if before_leaders > 0 and c.leader[d] > 0:
                        placements[i].setdefault(before_leaders - c.leader[d], {}).setdefault(
                            before_pods - c.state_wl[d], chosen)
                    if c.slice[d] > 0:
                        placements[i].setdefault(before_leaders, {}).setdefault(before_pods - c.state[d], chosen)
    best_slice, best = -(2**31), None
    for left in sorted(placements[optimal].get(0, {})):
        if best_slice < left <= 0:
            best_slice, best = left, placements[optimal][0][left]
    return best


def place_slices_balanced(placer: Placer, domains: Sequence[int], slice_count: int, leader_count: int,
                          slice_size: int, threshold: int) -> tuple[list[int], str]:
    chosen = select_optimal_domain_set(placer, domains, slice_count, leader_count, slice_size, False)
    if chosen is None:
        return [], "TAS Balanced Placement: Cannot find optimal domain set to fit the request"
    if slice_count < len(chosen) * threshold:
        return [], "TAS Balanced Placement: Not enough slices to meet the threshold"
    c = placer.counts
    chosen = placer.sorted_domains_with_leader(chosen, False)
    extra = slice_count - len(chosen) * threshold
    leaders_left = leader_count
    for d in chosen:
        if leaders_left > 0:
            take = min(c.slice_wl[d] - threshold, extra)
            c.leader[d] = 1
            leaders_left -= 1
        elif extra > 0:
            take = min(c.slice[d] - threshold, extra)
            c.leader[d] = 0
        else:
            c.leader[d] = 0
            take = 0
        c.slice[d] = threshold + take
        c.state[d] = c.slice[d] * slice_size
        c.slice_wl[d] = c.slice[d]
        c.state_wl[d] = c.state[d] - c.leader[d]
        extra -= take
    if extra > 0 or leaders_left > 0:
        return [], "TAS Balanced Placement: Not all slices or leaders could be placed"
    return chosen, ""


# ---------------------------------------------------------------- pruning copies of the tree


def _clear(placer: Placer, d: int) -> None:
    c = placer.counts
    c.state[d] = c.state_wl[d] = c.slice[d] = c.slice_wl[d] = c.leader[d] = 0
    for ch in placer.children[d]:
        _clear(placer, ch)


def _clear_leader_capacity(placer: Placer, d: int) -> None:
    c = placer.counts
    c.state_wl[d] = c.slice_wl[d] = c.leader[d] = 0
    for ch in placer.children[d]:
        _clear_leader_capacity(placer, ch)


def _prune_node(placer: Placer, d: int, threshold: int, leader_required: bool) -> None:
    c = placer.counts
    if c.slice[d] < threshold:
        _clear(placer, d)
        return
    # still usable for workers, but not as the leader's host at this threshold
    if leader_required and c.leader[d] > 0 and c.slice_wl[d] < threshold:
        _clear_leader_capacity(placer, d)


def refill_counts(placer: Placer, d: int, slice_size: int, slice_level: int, level: int,
                  leader_required: bool) -> None:
    """Recompute a subtree's counters from its leaves (fillInCountsHelper, no inner slice layers)."""
    c = placer.counts
    children = placer.children[d]
    if not children:
        if level == slice_level:
            c.slice[d] = c.state[d] // slice_size
            c.slice_wl[d] = c.state_wl[d] // slice_size
        return
    state, state_wl, slices, slices_wl = c.state, c.state_wl, c.slice, c.slice_wl
    leaders, affinities, children_of = c.leader, c.affinity, placer.children
    leaf_slices = level + 1 == slice_level  # what a leaf child's refill would do, done here
    capacity = slice_capacity = 0
    contributor = False
    min_diff = min_slice_diff = 2**31 - 1
    leader = affinity = 0
    for ch in children:
        if children_of[ch]:
            refill_counts(placer, ch, slice_size, slice_level, level + 1, leader_required)
        elif leaf_slices:
            slices[ch] = state[ch] // slice_size
            slices_wl[ch] = state_wl[ch] // slice_size
        ch_state, ch_slice, ch_leader = state[ch], slices[ch], leaders[ch]
        capacity += ch_state
        slice_capacity += ch_slice
        if not leader_required or ch_leader > 0:
            contributor = True
            min_diff = min(ch_state - state_wl[ch], min_diff)
            min_slice_diff = min(ch_slice - slices_wl[ch], min_slice_diff)
        leader = max(leader, ch_leader)
        affinity += affinities[ch]
    state[d] = capacity
    slice_wl = 0
    if contributor:
        state_wl[d] = capacity - min_diff
        slice_wl = slice_capacity - min_slice_diff
    else:
        state_wl[d] = 0
    leaders[d] = leader
    affinities[d] = affinity
    if level == slice_level:
        slice_capacity = state[d] // slice_size
        slice_wl = state_wl[d] // slice_size
    slices[d] = slice_capacity
    slices_wl[d] = slice_wl


def prune_below_threshold(placer: Placer, domains: Sequence[int], threshold: int, p: _Params) -> None:
    leader_required = p.leader_count > 0
    for d in domains:
        for ch in placer.children[d]:
            _prune_node(placer, ch, threshold, leader_required)
    for d in domains:
        refill_counts(placer, d, p.slice_size, p.slice_level, p.requested_level, leader_required)
        _prune_node(placer, d, threshold, leader_required)


# ---------------------------------------------------------------- entry points


def find_best_domains(placer: Placer, p: _Params) -> tuple[list[int], int]:
    """The candidate set (pruned copies of sibling domains at the requested level) with the best
    threshold; a threshold of 0 means balanced placement is not possible."""
    tree = placer.tree
    slice_count = p.count // p.slice_size
    if p.requested_level == 0:
        groups = [list(tree.level_domains(0))]
    else:
        higher = sorted(tree.level_domains(p.requested_level - 1), key=lambda d: placer.rank[d])
        groups = [list(placer.children[h]) for h in higher]
    best_threshold = best_count = 0
    best: list[int] = []
    for siblings in groups:
        candidates = [placer.clone(d) for d in siblings]
        lower = [ch for d in candidates for ch in placer.children[d]] \
            if p.requested_level < p.slice_level else candidates
        fits, selected, last_with_leader, last = evaluate_greedy(placer, lower, slice_count, p.leader_count)
        if not fits:
            continue
        threshold = balance_threshold(placer, slice_count, selected, last_with_leader, last)
        reserved = threshold
        if p.leader_count > 0 and last is not None:
            reserved = min(threshold, placer.counts.slice_wl[last])
        if threshold < best_threshold:
            continue
        prune_below_threshold(placer, candidates, threshold, p)
        fits, count, _, _ = evaluate_greedy(placer, candidates, slice_count, p.leader_count)
        if not fits and reserved < threshold:
            # retry with a lower threshold that keeps room for the leader
            if reserved <= 0 or reserved < best_threshold:
                continue
            threshold = reserved
            candidates = [placer.clone(d) for d in siblings]
            prune_below_threshold(placer, candidates, threshold, p)
            fits, count, _, _ = evaluate_greedy(placer, candidates, slice_count, p.leader_count)
        if not fits:
            continue
        if threshold > best_threshold or (threshold == best_threshold and count < best_count):
            best_threshold, best_count, best = threshold, count, candidates
    return best, best_threshold


def apply_balanced_placement(placer: Placer, p: _Params, threshold: int, candidates: list[int]
                             ) -> tuple[list[int], int, str]:
    """The domains to descend from, and their level, with counters set to a balanced split."""
    slice_count = p.count // p.slice_size
    fit_level = p.requested_level
    if p.requested_level < p.slice_level:
        chosen = select_optimal_domain_set(placer, candidates, slice_count, p.leader_count, p.slice_size, True)
        if chosen is None:
            return [], 0, "TAS Balanced Placement: Cannot find optimal domain set to fit the request"
        candidates = [ch for d in chosen for ch in placer.children[d]]
        fit_level = p.requested_level + 1
    placed, reason = place_slices_balanced(placer, candidates, slice_count, p.leader_count, p.slice_size, threshold)
    if reason:
        return [], 0, reason
    return placed, fit_level, ""
