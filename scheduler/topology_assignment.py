"""TopologyAssignments for the TAS PodSets of a workload on one flavor snapshot.

`find_topology_assignment` runs one placement (a PodSet, or a leader/worker group);
`find_topology_assignments_for_flavor` places every TAS PodSet of a workload in order,
each accounting the usage of those placed before it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from scheduler import balanced
from scheduler.assignment import DomainAssignment, TopologyAssignment
from scheduler.features import FeatureGates
from scheduler.model import TopologyRequest, leader_of_pair, slice_split
from scheduler.phase1 import Shape
from scheduler.placement import (
    NodeMatch,
    Placer,
    PodSetPlacement,
    TASPodSetRequest,
    _Params,
    go_quote,
    go_string_map,
    match_nodes,
)
from scheduler.quantity import PODS
from scheduler.snapshot import TASFlavorSnapshot

# ---------------------------------------------------------------- one PodSet (or group)


def slice_size_with_single_pod_default(tr: TopologyRequest | None) -> tuple[int, str]:
    """The outermost slice size; a single pod when no slice topology is requested."""
    layers = tr.slice_layers() if tr is not None else ()
    if not layers:
        return 1, ""
    if layers[0].size <= 0:
        return 0, "slice topology requested, but slice size not provided"
    return layers[0].size, ""


def slice_size_at_levels(
    snap: TASFlavorSnapshot, tr: TopologyRequest | None, slice_size: int, slice_level: int, gates: FeatureGates
) -> tuple[dict[int, int], str]:
    """For multi-layer slices: the slice size to distribute in at each level below the outermost layer."""
    sizes: dict[int, int] = {}
    if not gates.TASMultiLayerTopology or tr is None:
        return sizes, ""
    prev_size, prev_level = slice_size, slice_level
    for layer in tr.slice_layers()[1:]:
        level = snap.tree.level_index(layer.topology)
        if level is None:
            return {}, f"no requested topology level for additional slice layer: {layer.topology}"
        if level <= prev_level:
            return {}, (f"additional slice layer topology {layer.topology} must be at a lower level "
                        f"than {snap.level_keys[prev_level]}")
        if prev_size % layer.size != 0:
            return {}, f"additional slice layer size {layer.size} must evenly divide parent layer size {prev_size}"
        for lvl in range(prev_level + 1, level + 1):
            sizes[lvl] = layer.size
        prev_size, prev_level = layer.size, level
    return sizes, ""


def has_level(snap: TASFlavorSnapshot, tr: TopologyRequest | None, gates: FeatureGates) -> bool:
    """Whether the flavor's topology has every level the request names (Kueue's HasLevel)."""
    placer = Placer(snap, gates)
    key = placer.level_key(tr)
    if key is None:
        return False
    if not snap.has_level(key) or not snap.has_level(placer.slice_level_key(tr)):
        return False
    if tr is not None:
        return all(snap.has_level(layer.topology) for layer in tr.slice_layers())
    return True


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def invalid_selector_reason(selector: Mapping[str, str]) -> str | None:
    for key, value in sorted(selector.items()):
        if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            return (f"values[0][{key}]: Invalid value: {go_quote(value)}: a valid label must be an empty string "
                    "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                    "alphanumeric character")
    return None


def node_match_for(snap: TASFlavorSnapshot, req: TASPodSetRequest, gates: FeatureGates) -> NodeMatch:
    """The PodSet's node constraints against the flavor's nodes, cached per snapshot."""
    tolerations = req.effective_tolerations() + snap.tolerations
    selector = req.effective_node_selector()
    affinity = req.pod_set.spec.affinity
    score = gates.TASRespectNodeAffinityPreferred
    key = (tolerations, tuple(sorted(selector.items())), affinity, score)
    cached = snap.node_match_cache.get(key)
    if cached is None:
        cached = snap.node_match_cache[key] = match_nodes(snap, tolerations, selector, affinity, score)
    return cached  # type: ignore[return-value]


def leaves_in_domain(snap: TASFlavorSnapshot, domain: str) -> np.ndarray:
    """Leaves inside the domain a replacement must stay in (DomainID ancestry, not string
    prefixes): a domain's leaves are contiguous in the tree, found by following the first and
    past-the-last child down from it."""
    tree = snap.tree
    inside = np.zeros(tree.leaf_count, dtype=bool)
    path = domain.split(",")
    index = tree.domain_index(path)
    if index is None:
        return inside
    start, end = index, index + 1
    for level in tree.levels[len(path) - 1:-1]:
        start, end = int(level.child_start[start]), int(level.child_start[end])
    inside[start:end] = True
    return inside


def requested_levels(
    snap: TASFlavorSnapshot, placer: Placer, workers: TASPodSetRequest, gates: FeatureGates
) -> tuple[tuple[int, int, int, dict[int, int]] | None, str]:
    """The levels a request names, resolved on the snapshot's topology: the outermost slice size,
    the requested level, the slice level and the slice sizes of inner layers; or Kueue's reason
    the request cannot be evaluated on this topology (a level it lacks, a missing slice size, ...)."""
    tr = workers.topology_request
    slice_size, reason = slice_size_with_single_pod_default(tr)
    if reason:
        return None, reason
    key = placer.level_key_with_implied(workers)
    if key is None:
        return None, "topology level not specified"
    requested_level = snap.tree.level_index(key)
    if requested_level is None:
        return None, f"no requested topology level: {key}"
    slice_key = placer.slice_level_key(tr)
    slice_level = snap.tree.level_index(slice_key)
    if slice_level is None:
        return None, f"no requested topology level for slices: {slice_key}"
    if requested_level > slice_level:
        return None, f"podset slice topology {slice_key} is above the podset topology {key}"
    sizes, reason = slice_size_at_levels(snap, tr, slice_size, slice_level, gates)
    if reason:
        return None, reason
    return (slice_size, requested_level, slice_level, sizes), ""


def topology_request_reason(snap: TASFlavorSnapshot, workers: TASPodSetRequest, gates: FeatureGates) -> str:
    """What the placement says of a request whose levels its topology lacks, before placing
    anything ("no requested topology level for slices: ..."); "" when it can be evaluated."""
    return requested_levels(snap, Placer(snap, gates), workers, gates)[1]


def prepare_placement(
    snap: TASFlavorSnapshot,
    workers: TASPodSetRequest,
    leader: TASPodSetRequest | None,
    *,
    gates: FeatureGates,
    assumed_usage: Mapping[str, Mapping[str, int]] | None = None,
    simulate_empty: bool = False,
    required_replacement_domain: str = "",
) -> tuple[Placer | None, _Params | None, str]:
    """Phase 1 of a placement: how many pods and slices fit in every domain.

    Returns the Placer holding those counts and the run's parameters, or Kueue's reason
    the request cannot even be evaluated (unknown level, missing slice size, ...).
    """
    for request in (workers, leader):
        if request is not None and request.update_error:
            return None, None, f"invalid podSetUpdate for PodSet {request.name}, error: {request.update_error}"
    placer = Placer(snap, gates)
    tr = workers.topology_request
    levels, reason = requested_levels(snap, placer, workers, gates)
    if levels is None:
        return None, None, reason
    slice_size, requested_level, slice_level, sizes = levels
    required = tr is not None and tr.required is not None
    unconstrained = bool(tr is not None and tr.unconstrained) or workers.implied or bool(tr and tr.slice_only)
    multi_layer = tr.slice_layers() if sizes and tr is not None else ()
    match = leader_match = None
    if snap.lowest_is_node:
        # TASLeaderPodSetFeasibility: the leader is checked against its own node constraints
        # (selector, tolerations, required affinity) on every node; off, it follows its workers'
        own_leader = leader if gates.TASLeaderPodSetFeasibility else None
        for request in (workers, own_leader):
            if request is None:
                continue
            selector = request.effective_node_selector()
            bad = invalid_selector_reason(selector)
            if bad:
                return None, None, f"invalid node selectors: {go_string_map(selector)}, reason: {bad}"
        match = node_match_for(snap, workers, gates)
        if own_leader is not None:
            leader_match = node_match_for(snap, own_leader, gates)
            if leader_match is match:  # the workers' constraints: their counters serve as they are
                leader_match = None
    tail = partial_slice_size(tr, workers.count)
    if tail and not gates.TASPartialSlices:
        return None, None, (f"the count {workers.count} of PodSet {workers.name} is not a multiple of its slice size "
                            f"{slice_size}, which needs the TASPartialSlices feature gate")
    params = _Params(
        count=workers.count, slice_size=slice_size, leader_count=1 if leader else 0,
        requested_level=requested_level, slice_level=slice_level, required=required,
        unconstrained=unconstrained, slice_size_at_level=sizes, multi_layer=multi_layer, tail_size=tail,
    )
    if leader is not None:  # columns for every resource either asks for, before either vector is made
        snap.request_vector(leader.single_pod_requests)
    requests = snap.request_vector(workers.single_pod_requests)
    leader_requests = snap.request_vector(leader.single_pod_requests) if leader else None
    shape = Shape(requests, leader_requests, slice_level, slice_size, sizes, simulate_empty, tail)
    in_domain = leaves_in_domain(snap, required_replacement_domain) if required_replacement_domain else None
    assumed: dict[int, np.ndarray] = {}
    index = snap.tree.leaves.index_by_id
    for leaf_id, usage in (assumed_usage or {}).items():
        leaf = index.get(leaf_id)
        if leaf is not None:
            assumed[leaf] = snap.vector(usage)
    placer.fill_in_counts(shape, match, assumed, in_domain, leader_match)
    placer.params = params
    return placer, params, ""


def find_topology_assignment(
    snap: TASFlavorSnapshot,
    workers: TASPodSetRequest,
    leader: TASPodSetRequest | None,
    *,
    gates: FeatureGates,
    assumed_usage: Mapping[str, Mapping[str, int]] | None = None,
    simulate_empty: bool = False,
    required_replacement_domain: str = "",
) -> tuple[dict[str, TopologyAssignment], str]:
    """Assignments for the workers PodSet (and its leader), or Kueue's reason why they do not fit."""
    placer, params, reason = prepare_placement(
        snap, workers, leader, gates=gates, assumed_usage=assumed_usage, simulate_empty=simulate_empty,
        required_replacement_domain=required_replacement_domain)
    if placer is None or params is None:
        return {}, reason
    fit, fit_level, use_balanced = [], 0, False
    # BalancedPlacement spreads whole slices only: a PodSet with a partial slice takes BestFit
    if gates.TASBalancedPlacement and not params.required and not params.unconstrained and not params.tail_size:
        fit, threshold = balanced.find_best_domains(placer, params)
        if threshold > 0:
            fit, fit_level, reason = balanced.apply_balanced_placement(placer, params, threshold, fit)
            use_balanced = not reason  # on failure Kueue falls back to BestFit
    if not use_balanced:
        fit_level, fit, reason = placer.find_level_with_fit_domains(params.requested_level, params)
        if reason:
            return {}, reason
    fit = placer.descend(fit, fit_level, params, balanced=use_balanced)
    c = placer.counts
    assignments: dict[str, TopologyAssignment] = {}
    if leader is not None:
        leader_domains = [d for d in fit if c.leader[d] > 0]
        assignments[leader.name] = placer.build_assignment(leader_domains, [c.leader[d] for d in leader_domains])
        fit = [d for d in fit if c.state[d] > 0]
    assignments[workers.name] = placer.build_assignment(fit, [c.state[d] for d in fit])
    if params.tail_size:
        # the ungater ranks pods in the order of the assignment's domains: the partial slice last
        placed = tail_last(snap, assignments[workers.name], params.slice_level, params.slice_size)
        if placed.pod_count != params.count or not slice_aligned(snap, placed, params.slice_level, params.slice_size):
            return {}, f"cannot place the partial slice of PodSet {workers.name} in a single topology domain"
        assignments[workers.name] = placed
    return assignments, ""


def partial_slice_size(tr: TopologyRequest | None, count: int) -> int:
    """The pods of a PodSet's partial slice (`slice_split`: a single layer only)."""
    split = slice_split(tr, count)
    return split.partial if split is not None else 0


def slice_level_owners(snap: TASFlavorSnapshot, assignment: TopologyAssignment, slice_level: int) -> list[int | None]:
    """Per domain of the assignment, its ancestor at `slice_level` (global index); None for a
    domain the snapshot does not hold."""
    tree = snap.tree
    lowest = tree.depth - 1
    owners: list[int | None] = []
    for dom in assignment.domains:
        leaf = tree.leaf_for_values(dom.values)
        owners.append(None if leaf is None else tree.offsets[slice_level] + tree.ancestor(lowest, leaf, slice_level))
    return owners


def slice_level_counts(snap: TASFlavorSnapshot, assignment: TopologyAssignment, slice_level: int,
                       owners: list[int | None] | None = None) -> dict[int, int]:
    """Pods per domain at `slice_level` (global index), in the order the assignment names them."""
    counts: dict[int, int] = {}
    for dom, owner in zip(assignment.domains, owners or slice_level_owners(snap, assignment, slice_level),
                          strict=True):
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + dom.count
    return counts


def tail_last(snap: TASFlavorSnapshot, assignment: TopologyAssignment, slice_level: int,
              slice_size: int) -> TopologyAssignment:
    """The assignment with the domain at the slice level that holds the partial slice named
    last (normalizeTailLast); as it is when the pods divide into whole slices."""
    remainder = assignment.pod_count % slice_size
    if slice_size <= 1 or remainder == 0:
        return assignment
    owners = slice_level_owners(snap, assignment, slice_level)
    per_domain = slice_level_counts(snap, assignment, slice_level, owners)
    holder = next((d for d, n in per_domain.items() if n % slice_size == remainder), None)
    if holder is None or holder == list(per_domain)[-1]:
        return assignment
    pairs = list(zip(assignment.domains, owners, strict=True))
    head = tuple(dom for dom, owner in pairs if owner != holder)
    return TopologyAssignment(assignment.levels, head + tuple(dom for dom, owner in pairs if owner == holder))


def slice_aligned(snap: TASFlavorSnapshot, assignment: TopologyAssignment, slice_level: int, slice_size: int) -> bool:
    """Whether every domain at the slice level holds whole slices, but the last, which may hold
    the partial slice (assignmentSliceAligned)."""
    if slice_size <= 1:
        return True
    per_domain = list(slice_level_counts(snap, assignment, slice_level).values())
    total = sum(per_domain)
    if total != assignment.pod_count:
        return False
    last = len(per_domain) - 1
    return all(n % slice_size == (total % slice_size if i == last else 0) for i, n in enumerate(per_domain))


# ---------------------------------------------------------------- all PodSets of a workload on one flavor


def find_leader_and_workers(group: list[TASPodSetRequest]) -> tuple[TASPodSetRequest | None, TASPodSetRequest]:
    """In a PodSet group the PodSet with fewer pods is the leader (LeaderWorkerSet's leader + workers)."""
    if len(group) == 1:
        return None, group[0]
    leader = leader_of_pair(group[0].count, group[1].count)
    return group[leader], group[1 - leader]


def add_assumed_usage(assumed: dict[str, dict[str, int]], assignment: TopologyAssignment,
                      requests: Mapping[str, int], snap: TASFlavorSnapshot) -> None:
    """Record what an assignment uses, keyed by leaf ID (the hostname for hostname-leaf topologies)."""
    tree = snap.tree
    for dom in assignment.domains:
        leaf = tree.leaf_for_values(dom.values)
        if leaf is None:
            continue
        usage = assumed.setdefault(tree.leaves.ids[leaf], {})
        for name, value in requests.items():
            usage[name] = usage.get(name, 0) + value * dom.count
        usage[PODS] = usage.get(PODS, 0) + dom.count


def group_requests(requests: Sequence[TASPodSetRequest]) -> list[list[TASPodSetRequest]]:
    """PodSets sharing a podSetGroupName are placed together; the others one by one, in order."""
    groups: dict[str, list[TASPodSetRequest]] = {}
    for i, req in enumerate(requests):
        key = req.group_name if req.group_name is not None else f"#{i}"
        groups.setdefault(key, []).append(req)
    return list(groups.values())


PLACEMENT_CACHE_ENTRIES = 4096


def request_key(req: TASPodSetRequest) -> tuple:
    """Everything about a PodSet request that placement reads."""
    spec = req.pod_set.spec
    selector = req.node_selector
    return (req.name, req.count, req.flavor, req.implied, req.pod_set.topology_request,
            tuple(sorted(req.single_pod_requests.items())), tuple(sorted(spec.node_selector.items())),
            spec.tolerations, spec.affinity, None if selector is None else tuple(sorted(selector.items())),
            req.tolerations, req.previous_assignment)


def find_topology_assignments_for_flavor(
    snap: TASFlavorSnapshot,
    requests: Sequence[TASPodSetRequest],
    *,
    gates: FeatureGates,
    simulate_empty: bool = False,
    assumed_usage: dict[str, dict[str, int]] | None = None,
) -> dict[str, PodSetPlacement]:
    """Place every TAS PodSet of one workload on this flavor; PodSets placed earlier count as used.

    Stops at the first PodSet that does not fit, as Kueue does. `assumed_usage` (leaf ID ->
    requests) carries usage between flavors sharing nodes and is updated in place.

    The same requests on the same capacity and usage (the snapshot's versions) place the
    same way: heads of the same shape in several ClusterQueues, a head tried again in the
    next cycle, the empty-topology check of every head that needs preemption. Such a
    placement is taken from the snapshot's cache.
    """
    if assumed_usage:
        return _find_topology_assignments(snap, requests, gates=gates, simulate_empty=simulate_empty,
                                          assumed_usage=assumed_usage)
    version = snap.free_version if simulate_empty else snap.version
    key = (simulate_empty, tuple(sorted(gates.overrides.items())), tuple(request_key(r) for r in requests))
    cached = snap.placement_cache.get(key)
    if cached is not None and cached[0] == version:
        _, result, added = cached
    else:
        added = {}
        result = _find_topology_assignments(snap, requests, gates=gates, simulate_empty=simulate_empty,
                                            assumed_usage=added)
        if len(snap.placement_cache) >= PLACEMENT_CACHE_ENTRIES:
            snap.placement_cache.clear()
        snap.placement_cache[key] = (version, result, added)
    if assumed_usage is not None:
        assumed_usage.update({leaf: dict(usage) for leaf, usage in added.items()})
    return {name: dataclasses.replace(p) for name, p in result.items()}


def _find_topology_assignments(
    snap: TASFlavorSnapshot,
    requests: Sequence[TASPodSetRequest],
    *,
    gates: FeatureGates,
    simulate_empty: bool,
    assumed_usage: dict[str, dict[str, int]],
) -> dict[str, PodSetPlacement]:
    result: dict[str, PodSetPlacement] = {}
    assumed = assumed_usage
    for group in group_requests(requests):
        leader, workers = find_leader_and_workers(group)
        elastic = gates.ElasticJobsViaWorkloadSlicesWithTAS and workers.previous_assignment is not None \
            and not previous_assignment_stale(snap, workers, leader)
        if elastic:
            assignments, reason = find_elastic_assignment(
                snap, workers, leader, gates=gates, assumed_usage=assumed, simulate_empty=simulate_empty)
        else:
            assignments, reason = find_topology_assignment(
                snap, workers, leader, gates=gates, assumed_usage=assumed, simulate_empty=simulate_empty)
        for req in group:
            result[req.name] = PodSetPlacement(assignments.get(req.name), reason)
        if reason:
            return result
        for req in group:
            add_assumed_usage(assumed, assignments[req.name], req.single_pod_requests, snap)
    return result


# ---------------------------------------------------------------- elastic workload slices


def previous_assignment_stale(snap: TASFlavorSnapshot, workers: TASPodSetRequest,
                              leader: TASPodSetRequest | None) -> bool:
    """Some domain the replaced slice's pods of the group ran on is gone from the snapshot (node
    deleted or no longer Ready): the whole group is placed afresh."""
    leaf_for_values = snap.tree.leaf_for_values
    for req in (workers, leader):
        previous = req.previous_assignment if req is not None else None
        if previous is not None and any(leaf_for_values(d.values) is None for d in previous.domains):
            return True
    return False


def truncate_assignment(assignment: TopologyAssignment, count: int) -> TopologyAssignment:
    """The first `count` pods of the assignment, its domains kept in order (Kueue's TruncateAssignment)."""
    domains: list[DomainAssignment] = []
    left = count
    for dom in assignment.domains:
        if left <= 0:
            break
        domains.append(dom if dom.count <= left else DomainAssignment(dom.values, left))
        left -= dom.count
    return TopologyAssignment(assignment.levels, tuple(domains))


def find_elastic_assignment(
    snap: TASFlavorSnapshot,
    workers: TASPodSetRequest,
    leader: TASPodSetRequest | None,
    *,
    gates: FeatureGates,
    assumed_usage: dict[str, dict[str, int]],
    simulate_empty: bool = False,
) -> tuple[dict[str, TopologyAssignment], str]:
    """Delta-only placement of a group whose replaced slice ran on `previous_assignment`
    (Kueue's handleElasticWorkload): the pods that keep running stay where they are, a scale-down
    drops the last ones, a scale-up places only the extra pods on what the kept ones leave.

    The replaced slice's own usage is not in the snapshot (the cycle takes it out while its
    replacement is evaluated), so the kept pods are counted here, once."""
    previous = workers.previous_assignment
    assert previous is not None
    assignments: dict[str, TopologyAssignment] = {}
    kept = {leaf: dict(usage) for leaf, usage in assumed_usage.items()}
    extra = workers.count - previous.pod_count
    kept_workers = truncate_assignment(previous, workers.count) if extra < 0 else previous
    add_assumed_usage(kept, kept_workers, workers.single_pod_requests, snap)
    fresh_leader = None
    if leader is not None:
        if leader.previous_assignment is not None and leader.count <= leader.previous_assignment.pod_count:
            assignments[leader.name] = truncate_assignment(leader.previous_assignment, leader.count)
            add_assumed_usage(kept, assignments[leader.name], leader.single_pod_requests, snap)
        else:
            fresh_leader = replace(leader, previous_assignment=None)  # it did not run before
    if extra <= 0:
        assignments[workers.name] = kept_workers
        if fresh_leader is not None:
            placed, reason = find_topology_assignment(
                snap, fresh_leader, None, gates=gates, assumed_usage=kept, simulate_empty=simulate_empty)
            if reason:
                return {}, reason
            assignments[leader.name] = placed[fresh_leader.name]
        return assignments, ""
    delta = replace(workers, count=extra, previous_assignment=None)
    placed, reason = find_topology_assignment(
        snap, delta, fresh_leader, gates=gates, assumed_usage=kept, simulate_empty=simulate_empty)
    if reason:
        return {}, reason
    assignments[workers.name] = merge_assignments(snap, placed[workers.name], previous)
    if fresh_leader is not None:
        assignments[fresh_leader.name] = placed[fresh_leader.name]
    return assignments, ""


# ---------------------------------------------------------------- node replacement


def find_incomplete_slice_domain(
    snap: TASFlavorSnapshot, assignment: TopologyAssignment, missing: int, slice_size: int, key: str,
    partial_slices: bool = True,
) -> str:
    """The slice-level domain that, with the `missing` pods back, holds whole slices again; with
    partial slices the last domain of the assignment holds the partial slice instead (and when
    the domain that held it lost every pod, the domain now last takes it over)."""
    tree = snap.tree
    level = tree.level_index(key)
    if level is None:
        return ""
    per_domain = list(slice_level_counts(snap, assignment, level).items())
    total = missing + sum(count for _, count in per_domain)
    residue = total % slice_size if partial_slices else 0
    last = len(per_domain) - 1
    for i, (domain, count) in enumerate(per_domain):
        if (count + missing) % slice_size == (residue if i == last else 0):
            return tree.id_of[domain]
    return ""


def required_replacement_domain(snap: TASFlavorSnapshot, req: TASPodSetRequest, gates: FeatureGates,
                                assignment: TopologyAssignment) -> str:
    """The domain the replacement pods must stay in: the incomplete slice's domain, or for a
    `required` request the domain at the required level that holds the rest of the pods."""
    tree = snap.tree
    key = Placer(snap, gates).level_key_with_implied(req)
    level = tree.level_index(key) if key is not None else None
    if level is None or not assignment.domains:
        return ""
    tr = req.topology_request
    size, reason = slice_size_with_single_pod_default(tr)
    if reason:
        return ""
    if tr is not None and tr.slices_requested and req.count % size != 0:
        layers = tr.slice_layers()
        if len(layers) > 1:
            for layer in reversed(layers):
                if req.count % layer.size != 0:
                    return find_incomplete_slice_domain(snap, assignment, req.count, layer.size, layer.topology,
                                                        gates.TASPartialSlices)
        return find_incomplete_slice_domain(snap, assignment, req.count, size, layers[0].topology,
                                            gates.TASPartialSlices)
    if tr is None or tr.required is None:
        return ""
    leaf = tree.leaf_for_values(assignment.domains[0].values)
    if leaf is None:
        return ""
    return tree.id_of[tree.offsets[level] + tree.ancestor(tree.depth - 1, leaf, level)]


def merge_assignments(snap: TASFlavorSnapshot, a: TopologyAssignment, b: TopologyAssignment) -> TopologyAssignment:
    """Both assignments' domains in order of their full level values, equal domains summed."""
    tree = snap.tree

    def order(values: tuple[str, ...]) -> str:
        leaf = tree.leaf_for_values(values)
        return ",".join(tree.leaves.values[leaf]) if leaf is not None else ",".join(values)

    merged: list[DomainAssignment] = []
    for dom in sorted([*a.domains, *b.domains], key=lambda d: order(d.values)):
        if merged and merged[-1].values == dom.values:
            merged[-1] = DomainAssignment(dom.values, merged[-1].count + dom.count)
        else:
            merged.append(dom)
    return TopologyAssignment(a.levels or b.levels, tuple(merged))


def replacement_request(req: TASPodSetRequest, required_domain: str) -> TASPodSetRequest:
    """For a broken slice, place the missing pods as the innermost slice layer their count divides."""
    tr = req.topology_request
    if tr is None or not tr.slices_requested or not required_domain:
        return req
    size, _ = slice_size_with_single_pod_default(tr)
    if size == 0 or req.count % size == 0:
        return req
    topology, effective = None, 1
    for layer in reversed(tr.slice_layers()):
        if req.count % layer.size == 0:
            topology, effective = layer.topology, layer.size
            break
    narrowed = replace(tr, slice_constraints=(), slice_required_topology=topology, slice_size=effective)
    return replace(req, pod_set=replace(req.pod_set, topology_request=narrowed))


def find_replacement_assignment(
    snap: TASFlavorSnapshot,
    req: TASPodSetRequest,
    existing: TopologyAssignment,
    unhealthy_node: str,
    *,
    gates: FeatureGates,
    assumed_usage: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[TopologyAssignment | None, TopologyAssignment | None, str]:
    """(the whole new assignment, the part that replaces the node, failure reason)."""
    kept = tuple(d for d in existing.domains if d.values[-1] != unhealthy_node)
    affected = next((d.count for d in reversed(existing.domains) if d.values[-1] == unhealthy_node), 0)
    remaining = TopologyAssignment(existing.levels, kept)
    for dom in kept:
        if snap.tree.leaf_for_values(dom.values) is None:
            return None, None, ("Cannot replace the node, because the existing topologyAssignment is invalid, "
                                f"as it contains the stale domain {dom.values[0]}")
    req = replace(req, count=affected)
    required_domain = required_replacement_domain(snap, req, gates, remaining)
    _, reason = slice_size_with_single_pod_default(req.topology_request)
    if reason:
        return None, None, reason
    placed, reason = find_topology_assignment(
        snap, replacement_request(req, required_domain), None, gates=gates, assumed_usage=assumed_usage,
        required_replacement_domain=required_domain)
    if reason:
        return None, None, reason
    replacement = placed.get(req.name)
    if replacement is None or not replacement.domains:
        return None, None, f"cannot find replacement assignment for unhealthy node: {unhealthy_node}"
    merged = merge_assignments(snap, replacement, remaining)
    tr = req.topology_request
    size, _ = slice_size_with_single_pod_default(tr)
    level = snap.tree.level_index(tr.slice_layers()[0].topology) if tr is not None and tr.slices_requested else None
    if gates.TASPartialSlices and level is not None and size > 1:
        # merging orders the domains by their values: the partial slice goes last again, and a
        # repair that splits a slice is refused rather than published
        merged = tail_last(snap, merged, level, size)
        if not slice_aligned(snap, merged, level, size):
            return None, None, f"cannot replace the node {unhealthy_node} without splitting a PodSet slice"
    return merged, replacement, ""
