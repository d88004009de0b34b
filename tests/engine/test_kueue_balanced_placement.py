"""Cases of Kueue's balanced placement unit tests (pkg/cache/scheduler/tas_balanced_placement_test.go):
`TestSelectOptimalDomainSetToFit`, `TestSelectOptimalDomainSetToFitStableTieBreak`,
`TestCompareDomainCapacityAndEntropy`, `TestPlaceSlicesOnDomainsBalanced`,
`TestPlaceSlicesOnDomainsBalancedStableTieBreak`, `TestPruneDomainsBelowThreshold` and
`TestFindBestDomainsForBalancedPlacement`.

Kueue's tests build `domain` structs by hand (id, levelValues, parent/children and the five
counters state, sliceState, stateWithLeader, sliceStateWithLeader, leaderState) and call the
helpers directly. The engine's counterparts (`scheduler/balanced.py`) work on a `Placer`
whose domains are integer indices into the snapshot's topology tree, with per-domain counter
lists `counts.state`, `counts.slice`, `counts.state_wl`, `counts.slice_wl`, `counts.leader`.

Each case here builds the tree from nodes, one node per leaf, labelled with the Go domains'
level values (so domain order, ranks and parent/children are the tree's own), runs phase 1
for a one-pod request to get the Placer and its counter lists, and then writes every
domain's counters to the Go case's values (zero where the Go case sets none), as the Go case
sets its struct fields. The counters Kueue's cases give need not be consistent with node
capacity (parents with zero state, children that do not sum to their parent), which is why
they are written rather than derived from node sizes.

Kueue's `compareDomainCapacityAndEntropy` is, in the engine, the comparator
`select_optimal_domain_set` sorts by when `by_entropy` is set; it is not reachable by name, so
the test captures it from that call (wrapping `balanced.cmp_to_key`) and sorts the Go case's
domains with it, as the Go case sorts with `slices.SortFunc`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from scheduler import balanced
from scheduler.placement import Placer, _Params
from scheduler.topology_assignment import prepare_placement
from scheduler.tree import domain_id

from .factories import BLOCK, RACK, flavor_snapshot, gates, node, tas_requests, tas_setup, workload

HOST = "cloud.example.com/host"  # a third level, below the rack (not the node's hostname)


@dataclass(frozen=True)
class Dom:
    """A Go `domain`: its id, level values and counters (Go field names in comments)."""

    id: str
    values: tuple[str, ...]
    state: int = 0  # state
    slice: int = 0  # sliceState
    state_wl: int = 0  # stateWithLeader
    slice_wl: int = 0  # sliceStateWithLeader
    leader: int = 0  # leaderState


def dom(id: str, *values: str, state: int = 0, slice: int = 0, state_wl: int = 0, slice_wl: int = 0,
        leader: int = 0) -> Dom:
    return Dom(id, values or (id,), state, slice, state_wl, slice_wl, leader)


class Domains:
    """A Placer whose domains carry the given counters; Go ids mapped to domain indices."""

    def __init__(self, levels: Sequence[str], doms: Sequence[Dom]) -> None:
        depth = len(levels)
        leaves = [d.values for d in doms if len(d.values) == depth]
        nodes = [node("n-" + "-".join(path), hostname=False, labels=dict(zip(levels, path, strict=True)), cpu="8")
                 for path in leaves]
        snap = flavor_snapshot([*tas_setup(levels=levels), *nodes])
        (request,) = tas_requests(workload("w", count=1, cpu="1", preferred=levels[0]))
        placer, _, reason = prepare_placement(snap, request, None, gates=gates())
        assert placer is not None, reason
        self.placer: Placer = placer
        tree = placer.tree
        self.index: dict[str, int] = {}
        for d in doms:
            g = tree.global_index(len(d.values) - 1, domain_id(d.values))
            assert g is not None, d
            self.index[d.id] = g
        assert len(self.index) == tree.size, "every domain of the tree is one of the case's"
        c = placer.counts
        for name in ("state", "slice", "state_wl", "slice_wl", "leader"):
            values = getattr(c, name)  # the run's own list (small tree): written in place
            for d in doms:
                values[self.index[d.id]] = getattr(d, name)
        self.names = {g: name for name, g in self.index.items()}

    def __getitem__(self, name: str) -> int:
        return self.index[name]

    def of(self, *names: str) -> list[int]:
        return [self.index[n] for n in names]

    def ids(self, domains: Sequence[int] | None) -> list[str]:
        return [self.names[self.placer.original(d)] for d in domains or []]

    def counters(self, d: int) -> tuple[int, int, int, int, int]:
        """Go's [state, sliceState, stateWithLeader, sliceStateWithLeader, leaderState]."""
        c = self.placer.counts
        return c.state[d], c.slice[d], c.state_wl[d], c.slice_wl[d], c.leader[d]


# ---------------------------------------------------------------- TestSelectOptimalDomainSetToFit

SELECT_DOMAINS = [
    dom("d1", state=9, slice=9, leader=1, state_wl=8, slice_wl=8),
    dom("d2", state=6, slice=6, leader=0, state_wl=6, slice_wl=6),
    dom("d3", state=4, slice=4, leader=1, state_wl=3, slice_wl=3),
    dom("d4", state=2, slice=2, leader=0, state_wl=2, slice_wl=2),
]


@pytest.mark.parametrize(("worker_count", "leader_count", "want"), [
    pytest.param(22, 0, [], id="no_fit"),
    pytest.param(5, 1, ["d1"], id="simple_fit_one_domain"),
    pytest.param(9, 1, ["d2", "d3"], id="perfect_fit_with_two_domains"),
    pytest.param(10, 1, ["d1", "d4"], id="perfect_fit_with_two_domains_2"),
    pytest.param(5, 0, ["d2"], id="best_fit_single_domain"),
])
def test_select_optimal_domain_set_to_fit(worker_count, leader_count, want):
    """Go: TestSelectOptimalDomainSetToFit, cases "no fit", "simple fit one domain", "perfect fit
    with two domains", "perfect fit with two domains 2", "best fit, single domain".
    selectOptimalDomainSetToFit(s, domains, workerCount, leaderCount, sliceSize 1,
    prioritizeByEntropy true); the chosen ids compared sorted."""
    ds = Domains((BLOCK,), SELECT_DOMAINS)
    got = balanced.select_optimal_domain_set(ds.placer, ds.of("d1", "d2", "d3", "d4"), worker_count, leader_count,
                                             1, True)
    assert sorted(ds.ids(got)) == sorted(want)


# ---------------------------------------------------------------- TestSelectOptimalDomainSetToFitStableTieBreak

TIE_BREAK_LEAVES = [
    dom("block-a", "block-a"),
    dom("block-b", "block-b"),
    dom("leaf-a", "block-b", "host-a", state=3, slice=3, state_wl=3, slice_wl=3),
    dom("leaf-m", "block-b", "host-m", state=3, slice=3, state_wl=3, slice_wl=3),
    dom("leaf-z", "block-a", "host-z", state=3, slice=3, state_wl=3, slice_wl=3),
    dom("leaf-zz", "block-a", "host-zz", state=3, slice=3, state_wl=3, slice_wl=3),
]


@pytest.mark.parametrize("prioritize_by_entropy", [
    pytest.param(False, id="balanced_selection"),
    pytest.param(True, id="entropy_prioritized_selection"),
])
def test_select_optimal_domain_set_to_fit_stable_tie_break(prioritize_by_entropy):
    """Go: TestSelectOptimalDomainSetToFitStableTieBreak, cases "balanced selection" and
    "entropy-prioritized selection": four equal leaves; one worker, no leader, slice size 1.
    The tie goes to the leaf whose level values sort first: leaf-z (block-a/host-z)."""
    ds = Domains((BLOCK, RACK), TIE_BREAK_LEAVES)
    got = balanced.select_optimal_domain_set(ds.placer, ds.of("leaf-a", "leaf-m", "leaf-z", "leaf-zz"), 1, 0, 1,
                                             prioritize_by_entropy)
    assert ds.ids(got) == ["leaf-z"]


# ---------------------------------------------------------------- TestCompareDomainCapacityAndEntropy


def entropy_comparator(ds: Domains, domains: Sequence[int], monkeypatch: pytest.MonkeyPatch
                       ) -> Callable[[int, int], int]:
    """The comparator `select_optimal_domain_set` orders `domains` with when `by_entropy` is
    set (the engine's compareDomainCapacityAndEntropy), captured from a call with nothing to
    place (which fits without any domain, so the domains are still ordered)."""
    captured: list[Callable[[int, int], int]] = []

    def capture(compare):
        captured.append(compare)
        return functools.cmp_to_key(compare)

    monkeypatch.setattr(balanced, "cmp_to_key", capture)
    balanced.select_optimal_domain_set(ds.placer, domains, 0, 0, 1, True)
    assert len(captured) == 1
    return captured[0]


def test_tie_breaking_on_level_values_when_capacity_and_entropy_are_equal(monkeypatch):
    """Go: TestCompareDomainCapacityAndEntropy, case "tie-breaking on level values when capacity
    and entropy are equal": leaderState 1, sliceStateWithLeader 5 and two children of state 2
    each; the order follows the level values."""
    leaves = []
    for name, block, host in (("leaf-a", "block-b", "host-a"), ("leaf-m", "block-b", "host-m"),
                              ("leaf-z", "block-a", "host-z")):
        leaves += [dom(name, block, host, leader=1, slice_wl=5),
                   dom(f"{name}/c1", block, host, "c1", state=2), dom(f"{name}/c2", block, host, "c2", state=2)]
    ds = Domains((BLOCK, RACK, HOST), [dom("block-a", "block-a"), dom("block-b", "block-b"), *leaves])
    domains = ds.of("leaf-a", "leaf-m", "leaf-z")
    compare = entropy_comparator(ds, domains, monkeypatch)
    assert ds.ids(sorted(domains, key=functools.cmp_to_key(compare))) == ["leaf-z", "leaf-a", "leaf-m"]


def test_capacity_overrides_entropy_and_higher_entropy_overrides_level_values(monkeypatch):
    """Go: TestCompareDomainCapacityAndEntropy, case "capacity overrides entropy, and higher
    entropy overrides level values": more leaders first, then more slices with the leader, then
    higher entropy of the children's states, then level values."""
    spec = (("lower-leader", "a", 0, 100, 50, 50), ("lower-capacity", "b", 1, 4, 2, 2),
            ("low-entropy", "c", 1, 5, 4, 0), ("high-entropy", "d", 1, 5, 2, 2))
    doms = []
    for name, value, leader, slice_wl, first, second in spec:
        doms += [dom(name, value, leader=leader, slice_wl=slice_wl),
                 dom(f"{name}/c1", value, "c1", state=first), dom(f"{name}/c2", value, "c2", state=second)]
    ds = Domains((BLOCK, RACK), doms)
    domains = ds.of("lower-leader", "lower-capacity", "low-entropy", "high-entropy")
    compare = entropy_comparator(ds, domains, monkeypatch)
    assert ds.ids(sorted(domains, key=functools.cmp_to_key(compare))) == [
        "high-entropy", "low-entropy", "lower-capacity", "lower-leader"]


# ---------------------------------------------------------------- TestPlaceSlicesOnDomainsBalanced

PLACE_DOMAINS = [
    dom("d1", state=18, slice=18, state_wl=18, leader=0, slice_wl=18),
    dom("d2", state=18, slice=18, state_wl=18, leader=0, slice_wl=18),
    dom("d3", state=18, slice=18, state_wl=18, leader=0, slice_wl=18),
    dom("d4", state=10, slice=10, state_wl=10, leader=0, slice_wl=10),
    dom("d5", state=2, slice=2, state_wl=2, leader=0, slice_wl=2),
]


def placed(id: str, n: int) -> tuple[str, tuple[int, int, int, int, int]]:
    """A wanted domain: sliceState, state, stateWithLeader, sliceStateWithLeader all n, leaderState 0."""
    return id, (n, n, n, n, 0)


@pytest.mark.parametrize(("domains", "slice_count", "leader_count", "slice_size", "threshold", "want"), [
    pytest.param(["d1", "d2", "d3"], 20, 0, 1, 10, [placed("d1", 10), placed("d2", 10)],
                 id="simple_balanced_placement_on_two_domains"),
    pytest.param(["d1", "d2", "d3"], 40, 0, 1, 13, [placed("d1", 14), placed("d2", 13), placed("d3", 13)],
                 id="simple_placement_on_three_domains"),
    pytest.param(["d1", "d2", "d3", "d4", "d5"], 2, 0, 1, 2, [placed("d5", 2)],
                 id="find_smallest_domain_that_fits"),
    pytest.param(["d1", "d2", "d3", "d4", "d5"], 25, 0, 1, 10, [placed("d1", 15), placed("d4", 10)],
                 id="correctly_select_domains"),
])
def test_place_slices_on_domains_balanced(domains, slice_count, leader_count, slice_size, threshold, want):
    """Go: TestPlaceSlicesOnDomainsBalanced, cases "simple balanced placement on two domains",
    "simple placement on three domains", "find smallest domain that fits", "correctly select
    domains": the returned domains (sorted by id) with their five counters."""
    ds = Domains((BLOCK,), PLACE_DOMAINS)
    got, _ = balanced.place_slices_balanced(ds.placer, ds.of(*domains), slice_count, leader_count, slice_size,
                                            threshold)
    assert sorted(zip(ds.ids(got), map(ds.counters, got), strict=True)) == sorted(want)


def test_place_slices_on_domains_balanced_stable_tie_break():
    """Go: TestPlaceSlicesOnDomainsBalancedStableTieBreak: two equal leaves, one slice,
    threshold 1; no failure, and the leaf whose level values sort first (leaf-z) is chosen."""
    ds = Domains((BLOCK, RACK), [
        dom("block-a", "block-a"),
        dom("block-b", "block-b"),
        dom("leaf-a", "block-b", "host-a", state=3, slice=3, state_wl=3, slice_wl=3),
        dom("leaf-z", "block-a", "host-z", state=3, slice=3, state_wl=3, slice_wl=3),
    ])
    got, reason = balanced.place_slices_balanced(ds.placer, ds.of("leaf-a", "leaf-z"), 1, 0, 1, 1)
    assert reason == ""
    assert ds.ids(got) == ["leaf-z"]


# ---------------------------------------------------------------- TestPruneDomainsBelowThreshold


def test_keeps_worker_only_domain():
    """Go: TestPruneDomainsBelowThreshold, case "keeps worker only domain": threshold 5, slice
    size 1, sliceLevelIdx 2, level 0, leader required. The worker-only domain (4 slices with
    the leader) loses its leader capacity but keeps its 5 worker slices; the parent is refilled
    from its children."""
    ds = Domains((BLOCK, RACK, HOST), [
        dom("parent-domain", "parent-domain"),
        dom("leader-domain", "parent-domain", "leader-domain",
            state=6, slice=6, leader=1, state_wl=5, slice_wl=5),
        dom("leader-leaf", "parent-domain", "leader-domain", "leader-leaf",
            state=6, slice=6, leader=1, state_wl=5, slice_wl=5),
        dom("worker-only-domain", "parent-domain", "worker-only-domain",
            state=5, slice=5, leader=1, state_wl=4, slice_wl=4),
        dom("worker-only-leaf", "parent-domain", "worker-only-domain", "worker-only-leaf",
            state=5, slice=5, leader=1, state_wl=4, slice_wl=4),
    ])
    params = _Params(count=0, slice_size=1, leader_count=1, requested_level=0, slice_level=2, required=False,
                     unconstrained=False, slice_size_at_level={})
    balanced.prune_below_threshold(ds.placer, ds.of("parent-domain"), 5, params)
    got = {name: ds.counters(ds[name])
           for name in ("leader-domain", "parent-domain", "worker-only-domain", "worker-only-leaf")}
    assert got == {
        "leader-domain": (6, 6, 5, 5, 1),
        "parent-domain": (11, 11, 10, 10, 1),
        "worker-only-domain": (5, 5, 0, 0, 0),
        "worker-only-leaf": (5, 5, 0, 0, 0),
    }


# ---------------------------------------------------------------- TestFindBestDomainsForBalancedPlacement


def rack(block: str, name: str, state: int, slice_: int, state_wl: int, slice_wl: int, leader: int) -> Dom:
    return dom(f"{block}/{name}", block, name, state=state, slice=slice_, state_wl=state_wl, slice_wl=slice_wl,
               leader=leader)


@pytest.mark.parametrize(("doms", "count", "want_threshold", "want_domains_count"), [
    pytest.param([dom("b1"), dom("b2"),
                  rack("b1", "r1", 3, 3, 2, 2, 1), rack("b2", "r1", 2, 2, 1, 1, 1), rack("b2", "r2", 4, 4, 2, 2, 1)],
                 8, 1, 2, id="falls_back_after_pruning"),
    pytest.param([dom("b1"), dom("b2"), dom("b3"),
                  rack("b1", "r1", 2, 2, 1, 1, 1), rack("b2", "r1", 3, 3, 1, 1, 1), rack("b2", "r2", 4, 4, 2, 2, 1),
                  rack("b3", "r1", 4, 4, 3, 3, 1)],
                 12, 0, 0, id="rejects_after_fallback"),
])
def test_find_best_domains_for_balanced_placement(doms, count, want_threshold, want_domains_count):
    """Go: TestFindBestDomainsForBalancedPlacement, cases "falls back after pruning" and
    "rejects after fallback": levels block, rack; block domains with no counters, racks with the
    case's; count as given, slice size 1, one leader, requestedLevelIdx 0, sliceLevelIdx 1. The
    threshold and the number of domains returned."""
    ds = Domains((BLOCK, RACK), doms)
    params = _Params(count=count, slice_size=1, leader_count=1, requested_level=0, slice_level=1, required=False,
                     unconstrained=False, slice_size_at_level={})
    got, threshold = balanced.find_best_domains(ds.placer, params)
    assert threshold == want_threshold
    assert len(got) == want_domains_count
