"""The vectorised domain ordering gives exactly the placements of the plain Python ordering.

`OldOrderingPlacer` keeps the ordering as it was written before it was vectorised: every
domain of a level sorted with Python's `sorted`, the whole level walked, and the counters
as Python lists from the start. Random small clusters and PodSets (unconstrained mostly,
the other modes too, with and without a leader, TASProfileMixed, preferred node affinity
and balanced placement) must get identical assignments or identical failure messages from
both.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import placement, topology_assignment
from scheduler.phase1 import COUNTERS
from scheduler.placement import Placer, _Params, lex_first, lex_smallest
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.topology_assignment import find_leader_and_workers, find_topology_assignment, prepare_placement

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    flavor_snapshot,
    gates,
    node,
    pod,
    pod_set,
    preferred_affinity,
    taint,
    tas_requests,
    tas_setup,
    toleration,
    workload,
)

ZONE = "example.com/zone"


class OldOrderingPlacer(Placer):
    """Placement with the ordering of every level done by Python sorts over all its domains."""

    def fill_in_counts(self, *args, **kwargs) -> None:
        super().fill_in_counts(*args, **kwargs)
        for name in COUNTERS:  # lists from the start: no phase-1 arrays to take shortcuts with
            getattr(self.counts, name)

    def sorted_domains(self, domains: Sequence[int], unconstrained: bool) -> list[int]:
        c, rank = self.counts, self.rank
        sign = 1 if self.least_free(unconstrained) else -1
        if self.affinity_first:
            return sorted(domains, key=lambda d: (-c.affinity[d], sign * c.slice[d], c.state[d], rank[d]))
        return sorted(domains, key=lambda d: (sign * c.slice[d], c.state[d], rank[d]))

    def sorted_domains_with_leader(self, domains: Sequence[int], unconstrained: bool) -> list[int]:
        c, rank = self.counts, self.rank
        sign = 1 if self.least_free(unconstrained) else -1
        if self.affinity_first:
            return sorted(domains, key=lambda d: (-c.leader[d], -c.affinity[d], sign * c.slice_wl[d],
                                                  c.state_wl[d], rank[d]))
        return sorted(domains, key=lambda d: (-c.leader[d], sign * c.slice_wl[d], c.state_wl[d], rank[d]))

    def find_level_with_fit_domains(self, level: int, p: _Params) -> tuple[int, list[int], str]:
        c, tree = self.counts, self.tree
        domains = tree.level_domains(level)
        if len(domains) == 0:
            return 0, [], f"no topology domains at level: {tree.level_keys[level]}"
        ordered = self.sorted_domains_with_leader(domains, p.unconstrained)
        top = ordered[0]
        slice_count = p.count // p.slice_size
        best_fit = self.best_fit(p.unconstrained)
        if best_fit and c.slice_wl[top] >= slice_count and c.leader[top] >= p.leader_count:
            top = self.best_fit_for_slices(ordered, slice_count, p.leader_count)

        def not_fit(fit: int, total: int) -> str:
            if p.multi_layer:
                return self.multi_layer_not_fit_message(level, p)
            return self.not_fit_message(fit, total, p.slice_size)

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
        return self._spread_over_level(level, ordered, slice_count, p, not_fit)

    def _spread_over_level(self, level, ordered, slice_count, p: _Params, not_fit) -> tuple[int, list[int], str]:
        c = self.counts
        best_fit = self.best_fit(p.unconstrained)
        results: list[int] = []
        remaining_slices, remaining_leaders = slice_count, p.leader_count
        ordered = self.prioritize_leader_domain(ordered, p.count, p.leader_count, p.slice_size, True)
        idx = 0
        while remaining_leaders > 0 and idx < len(ordered) and c.leader[ordered[idx]] > 0:
            d = ordered[idx]
            if best_fit and c.slice_wl[d] >= remaining_slices:
                d = self.best_fit_for_slices(ordered[idx:], remaining_slices, remaining_leaders)
            results.append(d)
            remaining_leaders -= c.leader[d]
            remaining_slices -= c.slice_wl[d]
            idx += 1
        if remaining_leaders > 0:
            return 0, [], not_fit(p.leader_count - remaining_leaders, slice_count)
        rest = self.sorted_domains(ordered[idx:], p.unconstrained)
        i = 0
        while remaining_slices > 0 and i < len(rest):
            d = rest[i]
            if best_fit and c.slice[d] >= remaining_slices:
                d = self.best_fit_for_slices(rest[i:], remaining_slices, 0)
            results.append(d)
            remaining_slices -= c.slice[d]
            i += 1
        if remaining_slices > 0:
            return 0, [], not_fit(slice_count - remaining_slices, slice_count)
        return level, results, ""


@contextmanager
def old_ordering() -> Iterator[list[OldOrderingPlacer]]:
    """`find_topology_assignment` running on `OldOrderingPlacer`; yields the placers it made."""
    made: list[OldOrderingPlacer] = []

    def placer(*args, **kwargs) -> OldOrderingPlacer:
        made.append(OldOrderingPlacer(*args, **kwargs))
        return made[-1]

    with mock.patch.object(topology_assignment, "Placer", placer):
        yield made


# ---------------------------------------------------------------- random cases


@dataclass(frozen=True)
class NodeSpec:
    block: int
    rack: int
    index: int
    cpu: int  # milli-CPU
    pods: int
    used_cpu: int | None  # milli-CPU of a running non-TAS pod
    tainted: bool
    zone: str

    @property
    def name(self) -> str:
        return f"b{self.block}-r{self.rack}-n{self.index}"


@dataclass(frozen=True)
class Case:
    hostname_lowest: bool
    nodes: tuple[NodeSpec, ...]
    mode: str  # unconstrained | implied | slice-only | required | preferred
    level: int
    slice_level: int | None
    slice_size: int
    inner_layer: tuple[int, int] | None  # (level, size) of a second slice layer
    count: int
    cpu: int
    leader_cpu: int | None  # a leader PodSet in the same group, when set
    tolerate: bool
    prefer_zone: bool
    profile_mixed: bool
    affinity_first: bool
    balanced: bool

    @property
    def levels(self) -> tuple[str, ...]:
        return (BLOCK, RACK, HOSTNAME) if self.hostname_lowest else (BLOCK, RACK)


@st.composite
def node_specs(draw) -> tuple[NodeSpec, ...]:
    nodes = []
    for b in range(1, draw(st.integers(1, 3)) + 1):
        for r in range(1, draw(st.integers(1, 4)) + 1):
            for n in range(1, draw(st.integers(1, 4)) + 1):
                nodes.append(NodeSpec(
                    block=b, rack=r, index=n,
                    cpu=draw(st.sampled_from([0, 1000, 2000, 3000, 4000, 4000, 8000])),
                    pods=draw(st.sampled_from([0, 2, 3, 110, 110])),
                    used_cpu=draw(st.sampled_from([None, None, 0, 1000, 3000])),
                    tainted=draw(st.integers(0, 5)) == 0,
                    zone=draw(st.sampled_from(["z1", "z2"])),
                ))
    return tuple(nodes)


@st.composite
def cases(draw) -> Case:
    hostname_lowest = draw(st.integers(0, 3)) > 0
    depth = 3 if hostname_lowest else 2
    mode = draw(st.sampled_from(["unconstrained", "unconstrained", "unconstrained", "implied", "slice-only",
                                 "required", "preferred"]))
    level = draw(st.integers(0, depth - 1)) if mode in ("required", "preferred") else (
        0 if mode == "slice-only" else depth - 1)
    slice_level, slice_size, inner_layer = None, 1, None
    if mode == "slice-only" or (mode != "implied" and draw(st.integers(0, 3)) == 0):
        slice_level = draw(st.integers(level, depth - 1))
        slice_size = draw(st.integers(1, 4))
        if slice_level < depth - 1 and draw(st.booleans()):
            inner_size = draw(st.sampled_from([size for size in (1, 2) if slice_size % size == 0]))
            inner_layer = (draw(st.integers(slice_level + 1, depth - 1)), inner_size)
    leader_cpu = draw(st.sampled_from([None, None, None, 1000, 3000])) if mode != "implied" else None
    # beside a leader, workers have pods: with none, the leader's one pod would be placed as
    # the workers, in slices its request does not divide (a workload the parser refuses)
    count = slice_size * draw(st.integers(0 if leader_cpu is None else 1, 20 // slice_size))
    return Case(
        hostname_lowest=hostname_lowest,
        nodes=draw(node_specs()),
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        inner_layer=inner_layer,
        count=count,
        cpu=draw(st.sampled_from([500, 1000, 1000, 2000])),
        leader_cpu=leader_cpu,
        tolerate=draw(st.booleans()),
        prefer_zone=draw(st.booleans()),
        profile_mixed=draw(st.booleans()),
        affinity_first=draw(st.booleans()),
        balanced=count > 0 and draw(st.booleans()),  # balanced placement divides by zero on no pods
    )


def objects_of(case: Case) -> list[dict]:
    objects = tas_setup(levels=case.levels)
    for spec in case.nodes:
        objects.append(node(
            spec.name, block=f"b{spec.block}", rack=f"r{spec.rack}", cpu=f"{spec.cpu}m", pods=str(spec.pods),
            labels={ZONE: spec.zone}, taints=[taint("dedicated", "batch")] if spec.tainted else [],
        ))
        if spec.used_cpu is not None:
            objects.append(pod(f"daemon-{spec.name}", node=spec.name, cpu=f"{spec.used_cpu}m"))
    return objects


def topology_request_of(case: Case) -> dict:
    levels = case.levels
    request: dict = {}
    if case.mode in ("required", "preferred"):
        request[case.mode] = levels[case.level]
    elif case.mode == "unconstrained":
        request["unconstrained"] = True
    if case.inner_layer is not None and case.slice_level is not None:
        inner_level, inner_size = case.inner_layer
        request["podsetSliceRequiredTopologyConstraints"] = [
            {"topology": levels[case.slice_level], "size": case.slice_size},
            {"topology": levels[inner_level], "size": inner_size},
        ]
    elif case.slice_level is not None:
        request["podSetSliceRequiredTopology"] = levels[case.slice_level]
        request["podSetSliceSize"] = case.slice_size
    if case.leader_cpu is not None:
        request["podSetGroupName"] = "g"
    return request


def pod_sets_of(case: Case) -> list[dict]:
    request = topology_request_of(case)
    spec: dict = {"tolerations": [toleration("dedicated", "batch")] if case.tolerate else []}
    if case.prefer_zone:
        spec["affinity"] = preferred_affinity(ZONE, ["z2"])
    if request:
        spec["raw_topology_request"] = request
    workers = pod_set("main", count=case.count, cpu=f"{case.cpu}m", **spec)
    if case.leader_cpu is None:
        return [workers]
    return [pod_set("leader", count=1, cpu=f"{case.leader_cpu}m", **spec), workers]


def run(case: Case) -> tuple[dict, str]:
    feature_gates = gates(TASProfileMixed=case.profile_mixed, TASRespectNodeAffinityPreferred=case.affinity_first,
                          TASBalancedPlacement=case.balanced)
    snap = flavor_snapshot(objects_of(case), feature_gates=feature_gates)
    requests = tas_requests(workload("w", pod_sets=pod_sets_of(case)), implied=case.mode == "implied")
    leader, workers = find_leader_and_workers(requests)
    return find_topology_assignment(snap, workers, leader, gates=feature_gates)


# ---------------------------------------------------------------- properties


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_same_placement_as_the_python_ordering(case: Case):
    assignments, reason = run(case)
    with old_ordering() as made:
        expected, expected_reason = run(case)
    assert made, "the reference placement did not run"
    assert reason == expected_reason
    assert assignments == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_same_placement_through_overlays_as_through_copies(case: Case):
    """Large trees read the kept counters through overlays, small ones copy them: same placements."""
    with mock.patch.object(placement, "COPY_BELOW", 0):
        assignments, reason = run(case)
    expected, expected_reason = run(case)
    assert reason == expected_reason
    assert assignments == expected


@functools.cache
def many_nodes() -> TASFlavorSnapshot:
    """960 nodes with few distinct free capacities (many ties, some nodes full)."""
    rnd = random.Random(2724)
    objects = tas_setup()
    for b in range(1, 3):
        for r in range(1, 13):
            for n in range(1, 41):
                name = f"b{b}-r{r}-n{n}"
                objects.append(node(name, block=f"b{b}", rack=f"r{r}", cpu=str(rnd.choice([0, 4, 8, 8, 16]))))
                objects.append(pod(f"daemon-{name}", node=name, cpu=str(rnd.choice([0, 1, 4]))))
    return flavor_snapshot(objects)


@pytest.mark.parametrize("profile_mixed", [True, False])
@pytest.mark.parametrize(("count", "cpu", "leader_cpu"), [
    (1, "1", None), (200, "1", None), (1000, "2", None), (3000, "1", None), (9000, "1", None), (500, "3", "2"),
])
def test_same_placement_on_many_nodes(profile_mixed: bool, count: int, cpu: str, leader_cpu: str | None):
    feature_gates = gates(TASProfileMixed=profile_mixed)
    snap = many_nodes()
    group = {"podSetGroupName": "g"} if leader_cpu else {}
    pod_sets = [pod_set("main", count=count, cpu=cpu, raw_topology_request={"unconstrained": True, **group})]
    if leader_cpu:
        pod_sets.insert(0, pod_set("leader", count=1, cpu=leader_cpu, raw_topology_request={"unconstrained": True,
                                                                                              **group}))
    leader, workers = find_leader_and_workers(tas_requests(workload("w", pod_sets=pod_sets)))
    result = find_topology_assignment(snap, workers, leader, gates=feature_gates)
    with old_ordering() as made:
        expected = find_topology_assignment(snap, workers, leader, gates=feature_gates)
    assert made
    assert result == expected


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_lex_smallest_is_a_stable_sort_prefix(data):
    n = data.draw(st.integers(0, 40))
    columns = data.draw(st.integers(1, 4))
    keys = [np.asarray(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.int64)
            for _ in range(columns)]
    k = data.draw(st.integers(0, n + 2))
    expected = sorted(range(n), key=lambda i: tuple(int(key[i]) for key in keys))[:k]
    assert lex_smallest(keys, k).tolist() == expected
    if n:
        assert lex_first(keys) == sorted(range(n), key=lambda i: tuple(int(key[i]) for key in keys))[0]
        largest = data.draw(st.lists(st.booleans(), min_size=columns, max_size=columns))
        signed = [-key if big else key for key, big in zip(keys, largest, strict=True)]
        assert lex_first(keys, largest) == lex_smallest(signed, 1)[0]


def ten_pods_on_many_nodes(monkeypatch, copy_below: int, topology_request: dict):
    """A placement run of 10 one-CPU pods on `many_nodes`, with its counters copied for the
    run or read through overlays; (the snapshot, the request, the run)."""
    monkeypatch.setattr(placement, "COPY_BELOW", copy_below)
    snap = many_nodes()
    pod_sets = [pod_set("main", count=10, cpu="1", raw_topology_request=topology_request)]
    (workers,) = tas_requests(workload("w", pod_sets=pod_sets))
    placer, _, _ = prepare_placement(snap, workers, None, gates=gates())
    return snap, workers, placer


@pytest.mark.parametrize("copy_below", [placement.COPY_BELOW, 0], ids=["copies", "overlays"])
def test_counters_are_read_from_the_kept_ones_and_written_apart(copy_below, monkeypatch):
    snap, workers, placer = ten_pods_on_many_nodes(monkeypatch, copy_below, {"unconstrained": True})
    counts = placer.counts
    arrays = counts.phase1_arrays()
    assert arrays is not None
    state = counts.state
    assert list(state) == arrays["state"].tolist()
    assert counts.state is state  # made once, then read and written as a list
    assert counts.phase1_arrays() is arrays  # reading leaves the arrays exact
    leaf = snap.tree.offsets[-1]
    state[leaf] = state[leaf] + 1
    state.extend([7, 8])
    assert counts.phase1_arrays() is None  # a counter was written: the arrays no longer describe this run
    assert (state[leaf], state[len(state) - 2], state[len(state) - 1]) == (arrays["state"][leaf] + 1, 7, 8)
    assert len(state) == snap.tree.size + 2
    again, _, _ = prepare_placement(snap, workers, None, gates=gates())
    assert again.counts.state[leaf] == arrays["state"][leaf]  # the first run's writes stayed its own
    assert len(again.counts.state) == snap.tree.size


def subtree_copy_matches(placer: Placer, original: int, copy: int) -> int:
    """Assert that `copy` is a copy of `original` (structure, rank, origin, counters, all the way
    down, each copy's domains numbered after their parent); returns how many domains it has."""
    c = placer.counts
    assert placer.origin[copy] == placer.origin[original] and placer.rank[copy] == placer.rank[original]
    for name in COUNTERS:
        assert getattr(c, name)[copy] == getattr(c, name)[original], name
    kids, copied = list(placer.children[original]), list(placer.children[copy])
    assert len(kids) == len(copied)
    size = 1
    for kid, kid_copy in zip(kids, copied, strict=True):
        assert kid_copy == copy + size  # preorder: each child right after its elder siblings' subtrees
        size += subtree_copy_matches(placer, kid, kid_copy)
    return size


@pytest.mark.parametrize("copy_below", [placement.COPY_BELOW, 0], ids=["copies", "overlays"])
def test_a_clone_copies_a_subtree_whose_counters_are_its_own(copy_below, monkeypatch):
    snap, _, placer = ten_pods_on_many_nodes(monkeypatch, copy_below, {"required": RACK})
    tree, c = snap.tree, placer.counts
    block = tree.level_domains(0)[1]
    before = {name: [getattr(c, name)[d] for d in range(tree.size)] for name in COUNTERS}

    first = placer.clone(block)
    assert first == tree.size
    assert subtree_copy_matches(placer, block, first) == 1 + 12 + 12 * 40
    rack_copy = placer.children[first][3]
    again = placer.clone(rack_copy)  # a copy of a copy
    assert again == tree.size + 1 + 12 + 12 * 40
    assert subtree_copy_matches(placer, rack_copy, again) == 1 + 40
    assert placer.origin[again] == tree.level_domains(1)[12 + 3]
    # the copies' counters change apart from the originals and from each other
    for d in range(first, again + 41):
        c.state[d] = c.slice[d] = -1
    host_copy = placer.children[again][0]
    c.leader[host_copy] = 99
    assert {name: [getattr(c, name)[d] for d in range(tree.size)] for name in COUNTERS} == before
    assert c.leader[placer.children[rack_copy][0]] != 99
    assert len(placer.children) == len(placer.rank) == len(placer.origin) == len(c.state) == again + 41
