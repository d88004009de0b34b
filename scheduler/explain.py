"""Why a workload waits: per PodSet, the level asked for, what the best domain at every level
can hold against what is needed, which nodes were excluded and why, quota against usage,
and the smallest change that would make it fit.

The answer is the scheduling cycle's own: where it stopped the workload (a
`scheduler.stops.StopRecord`, with the numbers the cycle used) decides the summary, the verdict
and, when the cycle counted quota, the quota lines. The per-level and per-node details are
computed with the same placement code on the state as it is when asked. A workload no cycle
has decided on yet is computed from scratch and said to be: such an answer never claims that
the next pass admits it, since heads ahead of it in its ClusterQueue and cohort go first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from scheduler.cluster import ClusterState
from scheduler.cycle import nomination_problem
from scheduler.flavorassigner import (
    EXCEEDS_MAX_QUOTA,
    PREEMPT,
    WAITING_FOR_QUOTA,
    FlavorAssigner,
    FlavorAssignment,
    PodSetFlavors,
    pod_set_needs,
)
from scheduler.model import PodSet, Workload
from scheduler.placement import Placer, PodSetPlacement, TASPodSetRequest, _Params, counters_of
from scheduler.preemption import HUMAN_READABLE_REASONS, Targets
from scheduler.quantity import PODS, format_value
from scheduler.queue_status import waiting_summary
from scheduler.quota import FlavorResource
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.stops import (
    FITS,
    NO_CANDIDATES,
    NOT_EVALUATED,
    QUOTA,
    QUOTA_LIMIT,
    TOPOLOGY,
    UNDECIDED,
    WAITS,
    StopRecord,
    never_fits_text,
    no_targets_text,
    parent_stop,
)
from scheduler.topology_assignment import (
    add_assumed_usage,
    find_leader_and_workers,
    find_topology_assignment,
    find_topology_assignments_for_flavor,
    prepare_placement,
)

MAX_FREEING_CANDIDATES = 12  # workloads tried, per domain, when looking for capacity to free
MAX_DOMAINS_TRIED = 4


@dataclass(slots=True)
class LevelFit:
    """At one level: the domain that can hold the most, against what the PodSet needs."""

    level: str
    needed: int
    unit: str  # "pod" | "slice"
    best_domain: list[str]
    best_fits: int
    domains: int
    domains_that_fit: int
    total_fits: int
    # with a partial slice (TASPartialSlices), the slices above count it as one; these are the
    # whole slices alone (the best domain's, all domains'), which fewer pods can be sure to use
    whole_fits: int = -1
    total_whole: int = -1


@dataclass(slots=True)
class NodeExclusions:
    nodes_of_flavor: int  # nodes carrying the flavor's labels
    in_topology: int  # of those, the Ready, schedulable ones with every level label
    not_ready: int = 0
    unschedulable: int = 0
    missing_level_label: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    node_selector: int = 0
    affinity: int = 0
    resources: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class QuotaLine:
    flavor: str
    resource: str
    requested: str
    nominal: str
    used: str
    available: str
    fits: bool
    # "cycle": the numbers the scheduling cycle used when it decided (its holds and admissions
    # included); "now": computed when asked, and the cycle's decision overrides them
    source: str = "now"
    short: str = ""
    limit: str = ""


@dataclass(slots=True)
class Suggestion:
    # "higher-level" | "fewer-pods" | "free-capacity" | "free-quota" | "preemption" | "never-fits" | "fits-now"
    # | "quota-only" | "topology-full" | "exceeds-quota" | "room-freed" | "quota-changed"
    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PodSetExplanation:
    name: str
    count: int
    flavor: str = ""
    mode: str = ""  # required | preferred | unconstrained | implied | none
    level: str = ""
    slice_level: str = ""
    slice_size: int = 1
    fits: bool = False
    reason: str = ""
    levels: list[LevelFit] = field(default_factory=list)
    exclusions: NodeExclusions | None = None
    suggestions: list[Suggestion] = field(default_factory=list)


@dataclass(slots=True)
class WorkloadExplanation:
    key: str
    cluster_queue: str
    fits: bool
    summary: str
    quota: list[QuotaLine] = field(default_factory=list)
    pod_sets: list[PodSetExplanation] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    verdict: str = UNDECIDED  # scheduler.stops: waits | fits | preempting | not-evaluated
    stop: StopRecord | None = None  # the record the answer tells (computed_now when not the cycle's)
    # computed now: whether the quota has room for it (None when no flavor matches it at all)
    quota_fits: bool | None = None


# ---------------------------------------------------------------- quota


def quota_lines(state: ClusterState, assigner: FlavorAssigner, wl: Workload) -> list[QuotaLine]:
    """Requested against nominal quota, usage and what is available (cohort borrowing included),
    for every resource the workload asks for, on every flavor that could provide it."""
    cq = assigner.cq
    tree = state.quota
    totals: dict[str, int] = {}
    for ps in wl.pod_sets:
        for resource, value in pod_set_needs(ps, ps.count, state.config).items():
            totals[resource] = totals.get(resource, 0) + value
    lines = []
    for resource, requested in totals.items():
        for rg in cq.resource_groups:
            if resource not in rg.covered_resources:
                continue
            for fq in rg.flavors:
                fr = FlavorResource(fq.name, resource)
                available = max(tree.available(cq.name, fr), 0)
                lines.append(QuotaLine(
                    fq.name, resource, format_value(resource, requested),
                    format_value(resource, tree.nominal(cq.name, fr)),
                    format_value(resource, tree.usage(cq.name, fr)), format_value(resource, available),
                    requested <= available))
    return lines


# ---------------------------------------------------------------- topology


def mode_of(ps: PodSet, implied: bool) -> tuple[str, str]:
    tr = ps.topology_request
    if tr is not None and tr.required:
        return "required", tr.required
    if tr is not None and tr.preferred:
        return "preferred", tr.preferred
    if tr is not None and tr.unconstrained:
        return "unconstrained", ""
    return ("implied", "") if implied else ("none", "")


def level_fits(placer: Placer, params: _Params) -> list[LevelFit]:
    tree, c = placer.tree, placer.counts
    slices = params.slice_size > 1
    needed = params.count // params.slice_size if slices else params.count
    out = []
    for lvl in range(tree.depth):
        domains = tree.level_domains(lvl)
        if not domains:
            continue
        partial = params.tail_size and lvl <= params.slice_level
        if partial:
            # the partial slice counts as a slice: a domain holds its whole slices beside it,
            # and none at all where the partial slice does not fit
            capacity = [t + 1 for t in counters_of(c.slice_t, domains)]
            whole = counters_of(c.slice, domains)
        else:
            capacity = counters_of(c.slice if slices and lvl <= params.slice_level else c.state, domains)
        level_needed = needed + 1 if partial else needed
        most = max(capacity)
        best = min((d for d, fits in zip(domains, capacity, strict=True) if fits == most),
                   key=placer.rank.__getitem__)
        fit = LevelFit(
            level=tree.level_keys[lvl], needed=level_needed, unit="slice" if slices else "pod",
            best_domain=list(tree.values_of[best]), best_fits=most, domains=len(domains),
            domains_that_fit=sum(1 for fits in capacity if fits >= level_needed), total_fits=sum(capacity))
        if partial:
            fit.total_fits = sum(whole) + (1 if most > 0 else 0)
            fit.whole_fits, fit.total_whole = c.slice[best], sum(whole)
        out.append(fit)
    return out


def node_exclusions(state: ClusterState, snap: TASFlavorSnapshot, placer: Placer) -> NodeExclusions:
    census = state.node_census(snap.flavor, tuple(snap.level_keys))
    ex = NodeExclusions(nodes_of_flavor=census.nodes_of_flavor, in_topology=snap.tree.leaf_count,
                        not_ready=census.not_ready, unschedulable=census.unschedulable,
                        missing_level_label=census.missing_level_label)
    stats = placer.stats
    ex.taints = dict(stats.taints)
    ex.node_selector = stats.node_selector
    ex.affinity = stats.affinity
    ex.resources = dict(stats.resources)
    return ex


def _fits(snap: TASFlavorSnapshot, req: TASPodSetRequest, state: ClusterState, assumed: dict,
          before: Sequence[TASPodSetRequest] = ()) -> bool:
    """Whether the request fits; with `before` (the workload's PodSets placed ahead of it on
    this flavor), whether they and it all fit, placed in order from scratch: their places on
    the nodes as they are now may not be where they go once others have finished."""
    if before:
        return not _placement_failure(snap, req, state, before)
    _, reason = find_topology_assignment(snap, req, None, gates=state.gates, assumed_usage=assumed)
    return not reason


def placed_after(snap: TASFlavorSnapshot, req: TASPodSetRequest, state: ClusterState,
                 before: Sequence[TASPodSetRequest], *, simulate_empty: bool = False) -> dict[str, PodSetPlacement]:
    """The request placed after the PodSets `before` it, in order, as the flavor assigner
    places them; `before` may hold the request itself, in its place among its podSetGroupName."""
    requests = list(before) if any(r.name == req.name for r in before) else [*before, req]
    return find_topology_assignments_for_flavor(snap, requests, gates=state.gates, simulate_empty=simulate_empty)


def _placement_failure(snap: TASFlavorSnapshot, req: TASPodSetRequest, state: ClusterState,
                       before: Sequence[TASPodSetRequest], *, simulate_empty: bool = False) -> str:
    """Why the request does not fit after the PodSets `before` it are placed, in order, as the
    flavor assigner places them ("" when they all fit)."""
    placed = placed_after(snap, req, state, before, simulate_empty=simulate_empty)
    return next((p.failure for p in placed.values() if p.failure), "" if req.name in placed else "not placed")


def higher_level_suggestion(levels: list[LevelFit], params: _Params, mode: str, *,
                            idle: bool = False) -> Suggestion | None:
    """The lowest level above the requested one with a domain that has room for the PodSet;
    `idle`: `levels` counted with no admitted workload on the nodes (it would fit there once
    room frees up)."""
    if mode != "required" or not levels:  # no levels: the flavor has no nodes at all
        return None
    for lvl in range(params.requested_level - 1, -1, -1):
        fit = levels[lvl]
        if fit.best_fits >= fit.needed:
            domain = "/".join(fit.best_domain)
            if idle:
                message = (f"would fit with `required: {fit.level}` once room frees up: domain {domain} holds "
                           f"{fit.best_fits} {fit.unit}(s) with no admitted workload on its nodes, {fit.needed} needed")
            else:
                message = (f"would fit with `required: {fit.level}`: domain {domain} has room for {fit.best_fits} "
                           f"{fit.unit}(s), {fit.needed} needed")
            return Suggestion("higher-level", message, {"level": fit.level, "domain": fit.best_domain, "idle": idle})
    return None


def fewer_pods_suggestion(levels: list[LevelFit], params: _Params, mode: str) -> Suggestion | None:
    if not levels:
        return None
    if mode == "required":
        fit = levels[params.requested_level]
        most = fit.best_fits
    else:  # preferred and unconstrained may spread over the whole topology
        fit = levels[0]
        most = fit.total_fits
    if most <= 0 or most >= fit.needed:
        return None
    if fit.whole_fits >= 0:  # with a partial slice: the whole slices that surely fit
        pods = (fit.whole_fits if mode == "required" else fit.total_whole) * params.slice_size
        if pods <= 0:
            return None
    else:
        pods = most * params.slice_size if fit.unit == "slice" else most
    return Suggestion("fewer-pods", f"{pods} pod(s) would fit now instead of {params.count}", {"count": pods})


def free_capacity_suggestion(state: ClusterState, snap: TASFlavorSnapshot, req: TASPodSetRequest, placer: Placer,
                             params: _Params, assumed: dict, shared: Shared | None = None,
                             before: Sequence[TASPodSetRequest] = ()) -> Suggestion | None:
    """The fewest admitted workloads whose finishing would let the PodSet fit."""
    tree = placer.tree
    level = params.requested_level if params.required else 0
    capacity = placer.counts.state
    domains = sorted(tree.level_domains(level), key=lambda d: -capacity[d])[:MAX_DOMAINS_TRIED]
    best: list[Workload] | None = None
    # shared by the domains tried (and by the workloads explained on the same state)
    running = shared.running(state, snap) if shared is not None else _RunningWorkloads(state, snap)
    for d in domains:
        path = tree.values_of[d]
        chosen = freeing_workloads(state, snap, req, path, assumed, running=running, before=before)
        if chosen is not None and (best is None or len(chosen) < len(best)):
            best = chosen
    if not best:
        return None
    names = [w.key for w in best]
    return Suggestion("free-capacity", f"would fit once {', '.join(names)} finish(es)", {"workloads": names})


_UNSEEN = object()


class _RunningWorkloads:
    """The workloads holding a reservation, with their pods per domain of `snap` and, for
    those tried, the usage they add to `snap`: the holders of a domain are found through the
    state's index of workloads by node, and each domain's are counted once per search, not
    once per removal (a 10,000-pod workload has 10,000 domains)."""

    def __init__(self, state: ClusterState, snap: TASFlavorSnapshot) -> None:
        self.state, self.snap = state, snap
        # the flavors whose charges `snap` counts (its own, and those sharing its nodes)
        self._flavors = {name for name in state.tas_snapshots if snap in state.snapshots_sharing_usage_of(name)}
        self._pods_in: dict[tuple[str, ...], list[tuple[Workload, int]]] = {}
        # per depth, an assignment domain's values -> the path of its leaf's domain at that depth
        self._prefixes: dict[int, dict[tuple[str, ...], object]] = {}
        self._usage: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def pods_in(self, path: tuple[str, ...]) -> list[tuple[Workload, int]]:
        """(workload, pods inside `path`) for every running workload with pods there, in the
        state's order."""
        found = self._pods_in.get(path)
        if found is None:
            found = self._pods_in[path] = self._count_pods_in(path)
        return list(found)

    def _count_pods_in(self, path: tuple[str, ...]) -> list[tuple[Workload, int]]:
        tree, state = self.snap.tree, self.state
        index = tree.domain_index(path)
        if index is None:
            return []
        leaf_values = tree.leaves.values
        depth = len(path)
        hosts = (leaf_values[leaf][-1] for leaf in tree.leaves_under(depth - 1, index))
        prefix_of = self._prefixes.setdefault(depth, {})
        out = []
        for wl in state.in_order(state.workloads_on_nodes(hosts)):
            charge = state.charges.get(wl.key)
            pods = 0
            for tc in charge.tas if charge is not None else ():
                if tc.flavor not in self._flavors:
                    continue
                for dom in tc.assignment.domains:
                    prefix = prefix_of.get(dom.values, _UNSEEN)
                    if prefix is _UNSEEN:
                        leaf = tree.leaf_for_values(dom.values)
                        prefix = prefix_of[dom.values] = None if leaf is None else leaf_values[leaf][:depth]
                    if prefix == path:
                        pods += dom.count
            if pods > 0:
                out.append((wl, pods))
        return out

    def usage(self, wl: Workload) -> tuple[np.ndarray, np.ndarray]:
        """(leaves, rows): what the workload's charge adds to `snap`, one row per assignment
        domain (a leaf may repeat)."""
        cached = self._usage.get(id(wl))
        if cached is not None:
            return cached
        state, snap = self.state, self.snap
        width = len(snap.resources.names)
        pods_column = np.zeros(width, dtype=np.int64)
        pods_column[snap.resources.column[PODS]] = 1
        leaves: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        charge = state.charges.get(wl.key)
        for tc in charge.tas if charge is not None else ():
            times = sum(1 for s in state.snapshots_sharing_usage_of(tc.flavor) if s is snap)
            found = [(leaf, dom.count) for dom in tc.assignment.domains
                     if (leaf := snap.tree.leaf_for_values(dom.values)) is not None]
            if not times or not found:
                continue
            per_pod = snap.vector(tc.requests) + pods_column  # each pod: its requests and a slot
            at = np.fromiter((leaf for leaf, _ in found), dtype=np.intp, count=len(found))
            counts = np.fromiter((count for _, count in found), dtype=np.int64, count=len(found))
            for _ in range(times):
                leaves.append(at)
                rows.append(np.outer(counts, per_pod))
        if leaves:
            cached = (np.concatenate(leaves), np.concatenate(rows))
        else:
            cached = (np.zeros(0, dtype=np.intp), np.zeros((0, width), dtype=np.int64))
        self._usage[id(wl)] = cached
        return cached

    def add(self, wl: Workload, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) the workload's usage on `snap` only: the only
        snapshot the fit test reads."""
        leaves, rows = self.usage(wl)
        if not len(leaves):
            return
        usage = self.snap.tas_usage
        if rows.shape[1] < usage.shape[1]:  # columns added since (by a fit test): none of our usage is there
            rows = np.hstack([rows, np.zeros((rows.shape[0], usage.shape[1] - rows.shape[1]), dtype=np.int64)])
        np.add.at(usage, leaves, rows if sign > 0 else -rows)
        self.snap.usage_changed(leaves)  # what placement keeps of the old usage is stale


class Shared:
    """What the explanations of many workloads on one state, unchanged meanwhile (what-if's
    posted workloads, after its pass), compute once: the running workloads of each TAS flavor
    and their usage, which every free-capacity search would otherwise list again from all
    the workloads of the state."""

    def __init__(self) -> None:
        self._running: dict[str, _RunningWorkloads] = {}

    def running(self, state: ClusterState, snap: TASFlavorSnapshot) -> _RunningWorkloads:
        found = self._running.get(snap.name)
        if found is None or found.state is not state or found.snap is not snap:
            found = self._running[snap.name] = _RunningWorkloads(state, snap)
        return found


def freeing_workloads(state: ClusterState, snap: TASFlavorSnapshot, req: TASPodSetRequest,
                      path: tuple[str, ...], assumed: dict, *,
                      running: _RunningWorkloads | None = None,
                      before: Sequence[TASPodSetRequest] = ()) -> list[Workload] | None:
    """Remove, biggest first (lowest priority first on ties), the workloads running inside
    `path` until the request fits (after the PodSets `before` it); put their usage back afterwards."""
    if running is None:
        running = _RunningWorkloads(state, snap)
    inside = running.pods_in(path)
    inside.sort(key=lambda wn: (-wn[1], state.priority_of(wn[0])))
    removed: list[Workload] = []
    try:
        for wl, _ in inside[:MAX_FREEING_CANDIDATES]:
            running.add(wl, sign=-1)
            removed.append(wl)
            if _fits(snap, req, state, assumed, before):
                return list(removed)
        return None
    finally:
        for wl in removed:
            running.add(wl, sign=1)


# ---------------------------------------------------------------- entry point


def pod_set_request(psf: PodSetFlavors, snap: TASFlavorSnapshot) -> TASPodSetRequest:
    """The TAS placement request of a PodSet on the flavor `snap`."""
    ps = psf.pod_set
    return TASPodSetRequest(pod_set=ps, count=psf.count, single_pod_requests=ps.spec.requests, flavor=snap.name,
                            implied=psf.implied, **psf.updates)


def constrained_as_placed(req: TASPodSetRequest, group: Sequence[TASPodSetRequest],
                          state: ClusterState) -> TASPodSetRequest:
    """The request with the node constraints its placement applies to it: without
    TASLeaderPodSetFeasibility a group's leader goes where its workers' node selector,
    tolerations and affinity allow, its own not consulted."""
    if not group or state.gates.TASLeaderPodSetFeasibility:
        return req
    leader, workers = find_leader_and_workers(list(group))
    if leader is None or leader.name != req.name:
        return req
    spec = replace(req.pod_set.spec, affinity=workers.pod_set.spec.affinity)
    return replace(req, pod_set=replace(req.pod_set, spec=spec), node_selector=workers.effective_node_selector(),
                   tolerations=workers.effective_tolerations())


def explain_pod_set(state: ClusterState, snap: TASFlavorSnapshot, psf: PodSetFlavors,
                    assumed: dict, shared: Shared | None = None, *, remedies: bool = True,
                    before: list[TASPodSetRequest] | None = None,
                    group: Sequence[TASPodSetRequest] = ()) -> PodSetExplanation:
    """The PodSet on the flavor's topology as it is now (on top of `assumed`, the usage of the
    workload's PodSets before it; when it fits, its own usage is added there for those after
    it, as the flavor assigner counts it); when it does not fit, what would make it
    (`remedies=False`: only whether it never fits, for a PodSet the quota holds back, whose
    other remedies would not be true). `before` lists the requests of the workload's PodSets
    placed ahead of it on this flavor (this one is added when it fits): whether it never fits,
    and which finishes would make room, are found with them placed first. `group` lists the
    PodSets of its podSetGroupName, itself included, in the workload's order (which decides
    the group's leader): they are placed in one go (Kueue's PodSet groups), whether it fits is
    theirs together, and the levels, counted for it alone, offer no remedy."""
    ps = psf.pod_set
    mode, level = mode_of(ps, psf.implied)
    out = PodSetExplanation(ps.name, psf.count, flavor=snap.name, mode=mode, level=level)
    req = constrained_as_placed(pod_set_request(psf, snap), group, state)
    placer, params, reason = prepare_placement(snap, req, None, gates=state.gates, assumed_usage=assumed)
    if placer is None or params is None:
        out.reason = reason
        return out
    out.slice_size = params.slice_size
    out.slice_level = snap.level_keys[params.slice_level]
    out.level = out.level or snap.level_keys[params.requested_level]
    out.levels = level_fits(placer, params)
    out.exclusions = node_exclusions(state, snap, placer)
    ahead = list(before) if before else []
    if group:  # placed in one go, after the PodSets before it, in the workload's order
        members = {r.name for r in group}
        ahead = [r for r in ahead if r.name not in members] + list(group)
        found = placed_after(snap, req, state, ahead)
        reason = next((p.failure for p in found.values() if p.failure), "")
        assignment = found[req.name].assignment if req.name in found and not reason else None
    else:
        assignments, reason = find_topology_assignment(snap, req, None, gates=state.gates, assumed_usage=assumed)
        assignment = assignments.get(req.name)
    out.fits, out.reason = not reason, reason
    if out.fits:
        if assignment is not None:
            add_assumed_usage(assumed, assignment, req.single_pod_requests, snap)
        if before is not None:
            before.append(req)
        return out
    if ahead:
        never = _placement_failure(snap, req, state, ahead, simulate_empty=True)
    else:
        _, never = find_topology_assignment(snap, req, None, gates=state.gates, assumed_usage=assumed,
                                            simulate_empty=True)
    if not remedies:
        out.suggestions = [s for s in (never_fits_suggestion(snap.name, never),) if s is not None]
        return out
    if group:  # the levels count it alone: no level or count would do for the group
        out.suggestions = [s for s in (never_fits_suggestion(snap.name, never),
                                       None if never else free_capacity_suggestion(
                                           state, snap, req, placer, params, assumed, shared, ahead)) if s is not None]
        return out
    higher = higher_level_suggestion(out.levels, params, mode)
    if higher is None and never:  # a level that holds it once room frees up
        idle_assumed = assumed
        if ahead:  # the PodSets before it where they go on idle nodes
            idle_assumed = {}
            find_topology_assignments_for_flavor(snap, ahead, gates=state.gates, simulate_empty=True,
                                                 assumed_usage=idle_assumed)
        idle, idle_params, _ = prepare_placement(snap, req, None, gates=state.gates, assumed_usage=idle_assumed,
                                                 simulate_empty=True)
        if idle is not None and idle_params is not None:
            higher = higher_level_suggestion(level_fits(idle, idle_params), idle_params, mode, idle=True)
    for suggestion in (never_fits_suggestion(snap.name, never),
                       higher,
                       fewer_pods_suggestion(out.levels, params, mode),
                       # when nothing would make room, freeing some of it would not either
                       None if never else free_capacity_suggestion(state, snap, req, placer, params, assumed,
                                                                   shared, ahead)):
        if suggestion is not None:
            out.suggestions.append(suggestion)
    return out


@dataclass
class PlacedInOrder:
    """A workload's TAS PodSets explained in the flavor assigner's order: each on top of those
    placed before it on its flavor; past the first that does not fit, the flavor assigner
    places no more of them on that flavor, and neither does the explanation."""

    pod_sets: Sequence[PodSetFlavors] = ()  # the workload's, for the PodSet groups
    before: dict[str, list[TASPodSetRequest]] = field(default_factory=dict)  # flavor -> placed requests
    failed: dict[str, str] = field(default_factory=dict)  # flavor -> the first PodSet that did not fit

    def explain(self, state: ClusterState, snap: TASFlavorSnapshot, psf: PodSetFlavors, assumed: dict,
                shared: Shared | None, *, remedies: bool = True) -> PodSetExplanation:
        first = self.failed.get(snap.name)
        group = group_of(self.pod_sets, psf, snap)
        if first is not None:
            mode, level = mode_of(psf.pod_set, psf.implied)
            grouped = any(r.name == first for r in group)
            return PodSetExplanation(psf.pod_set.name, psf.count, flavor=snap.name, mode=mode, level=level,
                                     reason=f"not placed: placed with pod set {first} as one group, which does not fit"
                                     if grouped else f"not placed: pod set {first} before it does not fit")
        out = explain_pod_set(state, snap, psf, assumed, shared, remedies=remedies,
                              before=self.before.setdefault(snap.name, []), group=group)
        if not out.fits:
            self.failed[snap.name] = psf.pod_set.name
        return out


def group_of(pod_sets: Sequence[PodSetFlavors], psf: PodSetFlavors, snap: TASFlavorSnapshot) -> list[TASPodSetRequest]:
    """The requests of the PodSets of `psf`'s podSetGroupName on the flavor `snap`, itself
    included, in the workload's order; [] when it has no group (or is alone in it)."""
    name = pod_set_request(psf, snap).group_name
    if name is None:
        return []
    # a PodSet the quota gave no flavor yet goes on its ClusterQueue's TAS flavor, as `psf` does
    members = [req for other in pod_sets if other is psf or (
        other.tas and (not other.flavors or snap.name in other.flavors.values()))
        if (req := pod_set_request(other, snap)).group_name == name]
    return members if len(members) > 1 else []


def never_fits_suggestion(flavor: str, reason: str) -> Suggestion | None:
    """`reason`: why the PodSet does not fit the flavor even with no admitted workload on its
    nodes ("" when it would)."""
    if not reason:
        return None
    return Suggestion("never-fits", f"{never_fits_text(flavor, reason)}; it waits until the flavor's nodes "
                      "change (more of them, or more of them usable) or its request does (fewer pods, a higher "
                      "level)", {"flavor": flavor, "reason": reason})


def explain_never_fitting(state: ClusterState, assignment: FlavorAssignment, never: PodSetFlavors,
                          shared: Shared | None) -> list[PodSetExplanation]:
    """A PodSet (`never`) that its flavor's topology could not hold even with no admitted
    workload on its nodes, after the workload's PodSets placed before it there: those PodSets
    as they are now, then it, with its levels and nodes as they are and why no room made would
    do (its reason is the one on empty nodes)."""
    snap = next(state.tas_snapshots[f] for f in never.flavors.values() if f in state.tas_snapshots)
    out: list[PodSetExplanation] = []
    assumed: dict[str, dict[str, int]] = {}
    before: list[TASPodSetRequest] = []
    for psf in assignment.pod_sets:
        if psf.pod_set.name == never.pod_set.name:
            break
        if psf.tas and snap.name in psf.flavors.values():
            # no remedies: however they fit, the workload waits for the one that never does
            out.append(explain_pod_set(state, snap, psf, assumed, shared, remedies=False))
            before.append(pod_set_request(psf, snap))
    explanation = explain_pod_set(state, snap, never, assumed, shared, before=before)
    explanation.fits, explanation.reason = False, never.empty_failure
    suggestion = never_fits_suggestion(snap.name, never.empty_failure)
    if suggestion is not None and not any(s.kind == suggestion.kind for s in explanation.suggestions):
        explanation.suggestions.insert(0, suggestion)
    # no finish makes room; and what would fit "now" counts only the PodSets before it that fit now
    all_placed = all(e.fits for e in out)
    explanation.suggestions = [s for s in explanation.suggestions if s.kind != "free-capacity" and (
        all_placed or s.kind == "never-fits" or (s.kind == "higher-level" and s.details.get("idle")))]
    out.append(explanation)
    return out


def topology_behind_quota(state: ClusterState, assigner: FlavorAssigner, assignment: FlavorAssignment,
                          shared: Shared | None, failed: str) -> list[PodSetExplanation]:
    """The quota stopped the workload at PodSet `failed` (the assignment's, before any TAS
    step: that step marks every PodSet it checks for preemption): each TAS PodSet on its
    flavor's topology as it is now, and what that means once the quota has room: only the
    quota holds it back, the nodes have no room for it now either, or they never will (no
    quota makes room then). A PodSet whose own quota fits is not said to fail it."""
    out = []
    assumed: dict[str, dict[str, int]] = {}
    placed = PlacedInOrder(assignment.pod_sets)
    for psf in assignment.pod_sets:
        snap = _tas_snapshot_for(state, assigner, psf)
        if snap is None or not psf.tas or psf.count == 0:
            continue
        reached = snap.name not in placed.failed
        explanation = placed.explain(state, snap, psf, assumed, shared, remedies=False)
        if explanation.fits:
            explanation.suggestions.append(Suggestion(
                "quota-only", f"only the quota holds it back: the topology has room for pod set {psf.pod_set.name} "
                f"({psf.count} pod(s)) now", {"podSet": psf.pod_set.name, "flavor": snap.name}))
        elif reached and not explanation.suggestions:  # not never-fits: room must free up as well
            explanation.suggestions.append(Suggestion(
                "topology-full", f"the topology has no room for pod set {psf.pod_set.name} now either: "
                f"{explanation.reason}; the quota and room on the nodes must both free up",
                {"podSet": psf.pod_set.name, "flavor": snap.name, "reason": explanation.reason}))
        if psf.reasons or psf.pod_set.name == failed:  # the quota failed this one
            explanation.fits = False
            explanation.reason = psf.message if psf.reasons else assignment.failure
        out.append(explanation)
    return out


def _tas_snapshot_for(state: ClusterState, assigner: FlavorAssigner, psf: PodSetFlavors) -> TASFlavorSnapshot | None:
    """The TAS flavor the PodSet took, or, when the quota gave it none, the one TAS flavor its
    ClusterQueue has for its resources (None when there are several to choose from)."""
    snapshots = state.tas_snapshots
    taken = {f for f in psf.flavors.values() if f in snapshots}
    if not taken:
        needs = pod_set_needs(psf.pod_set, psf.count, state.config)
        taken = {fq.name for rg in assigner.cq.resource_groups if set(needs) & set(rg.covered_resources)
                 for fq in rg.flavors if fq.name in snapshots}
    return snapshots[next(iter(taken))] if len(taken) == 1 else None


# ---------------------------------------------------------------- preemption


def preemption_targets(assigner: FlavorAssigner, assignment: FlavorAssignment) -> Targets:
    """The workloads the scheduling cycle would preempt for an assignment that fits only by
    preemption (none when the ClusterQueue's preemption policy allows no candidate, or when
    preempting those it allows would not make room)."""
    assigner.assign_topology(assignment)
    return assigner.preemption_targets(assignment) if assignment.mode == PREEMPT else Targets()


def preemption_suggestion(targets: Targets, *, fair_sharing: bool = False) -> Suggestion:
    if not targets:
        rules = ("its ClusterQueue (withinClusterQueue, reclaimWithinCohort) and the fair sharing preemption "
                 "strategies" if fair_sharing else
                 "its ClusterQueue and cohort (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort)")
        return Suggestion("preemption", f"{no_targets_text(targets.candidates, rules)}: it waits for workloads "
                          "to finish", {"targets": [], "candidates": targets.candidates})
    names = ", ".join(f"{t.workload.key} ({HUMAN_READABLE_REASONS.get(t.reason, t.reason)})" for t in targets)
    noun = "workload" if len(targets) == 1 else "workloads"
    return Suggestion("preemption", f"preempting {len(targets)} {noun} would make room for it now: {names}",
                      {"targets": [{"workload": t.workload.key, "reason": t.reason} for t in targets]})


def explain_workload(state: ClusterState, wl: Workload, *, stop: StopRecord | None = None,
                     shared: Shared | None = None) -> WorkloadExplanation:
    """Why `wl` waits: the scheduler's record `stop` of where it stopped it, with the details
    computed on `state`; without one (no cycle decided on it yet), computed from scratch.
    Explaining many workloads on a state that does not change meanwhile, pass one `shared`."""
    out = compute_explanation(state, wl, shared)
    if stop is None and state.waits_as_parent(wl):
        stop = parent_stop(state, wl)  # never evaluated, nor will it be: its variants are
    if stop is None:
        return not_evaluated(out, wl)
    return with_record(out, stop)


def not_evaluated(out: WorkloadExplanation, wl: Workload) -> WorkloadExplanation:
    """A fresh computation, said to be one; it never claims the next pass admits the workload."""
    since = wl.creation_timestamp
    when = f" since {since:%Y-%m-%dT%H:%M:%SZ}" if since is not None else ""
    if out.fits:
        found = ("the quota and the topology have room for it now; the next pass decides, after the heads "
                 "ahead of it in its ClusterQueue and cohort")
    else:
        found = out.summary
    out.summary = f"not evaluated by a scheduling cycle{when}: computed now: {found}"
    out.suggestions = [s for s in out.suggestions if s.kind != "fits-now"]
    out.fits = False
    out.verdict = NOT_EVALUATED
    out.stop = StopRecord(NOT_EVALUATED, out.summary, verdict=NOT_EVALUATED, cluster_queue=out.cluster_queue,
                          computed_now=True)
    return out


def with_record(out: WorkloadExplanation, stop: StopRecord) -> WorkloadExplanation:
    """The cycle's record decides; details computed now never contradict it. When the details
    computed now find room for the whole workload where the cycle found none on the quota and
    nodes as they were, the answer says that capacity has freed since (`room-freed`)."""
    fits_now, quota_fits_now, found_now = out.fits, out.quota_fits, out.summary
    out.stop = stop
    out.verdict = stop.verdict
    out.fits = stop.verdict == FITS
    out.summary = stop.headline()
    out.suggestions = [s for s in out.suggestions if s.kind != "fits-now"]
    if stop.quota:
        out.quota = [QuotaLine(c.flavor, c.resource, c.text("requested"), c.text("nominal"), c.text("used"),
                               c.text("available"), c.fits, source="cycle", short=c.text("short") if c.short else "",
                               limit=c.limit)
                     for c in stop.quota]
        # a PodSet the quota failed now tells the cycle's reason, as the quota lines do
        for ps in out.pod_sets:
            own = own_reason(stop.reason, ps.name)
            if not ps.fits and own and ps.reason.startswith(f"{POD_SET_REASON}{ps.name}: "):
                ps.reason = own
    named = stop.details.get("podSet")
    if stop.step.startswith(TOPOLOGY) or (stop.step == NO_CANDIDATES and named is not None):
        for ps in out.pod_sets:
            if ps.name == named or (named is None and ps.fits):
                ps.fits = False
                ps.reason = stop.details.get("reason") or stop.message
    if fits_now and stop.verdict == WAITS and stop.step in DECIDED_ON_CAPACITY:
        out.suggestions.append(Suggestion(
            "room-freed", "capacity has freed since the scheduling cycle decided: computed now, the quota and the "
            "topology have room for it; the cycle's decision stands until a pass tries it again",
            {"podSet": named} if named is not None else {}))
    changed = quota_changed(stop, quota_fits_now, found_now, fits_now)
    if changed is not None:
        out.suggestions.append(changed)
    return out


def quota_changed(stop: StopRecord, quota_fits_now: bool | None, found_now: str, fits_now: bool) -> Suggestion | None:
    """When the quota computed now says otherwise than the numbers the cycle decided on (its
    quota lines, which the answer shows): quota used since (by the cycle's later admissions
    or since the pass), or quota freed where the topology still has no room (both having
    room is `room-freed`). `found_now`: the quota's reason now, when it falls short."""
    if quota_fits_now is None or not stop.quota or stop.verdict != WAITS or stop.step not in DECIDED_ON_CAPACITY:
        return None
    fitted = all(check.fits for check in stop.quota)
    if fitted and not quota_fits_now:
        return Suggestion("quota-changed", f"quota has been used since the scheduling cycle decided: computed now, "
                          f"{found_now}; the cycle's decision stands until a pass tries it again",
                          {"quotaFits": False, "reason": found_now})
    if not fitted and quota_fits_now and not fits_now:
        return Suggestion("quota-changed", "quota has freed since the scheduling cycle decided: computed now, the "
                          "quota has room for it and the topology does not (see its pod sets); the cycle's decision "
                          "stands until a pass tries it again", {"quotaFits": True})
    return None


POD_SET_REASON = "couldn't assign flavors to pod set "
# the steps a cycle decides on the quota and the nodes as they are at its start (not on what
# other heads of the cycle held, nor on the queue's order)
DECIDED_ON_CAPACITY = frozenset({QUOTA, QUOTA_LIMIT, TOPOLOGY, NO_CANDIDATES})


def own_reason(reason: str, pod_set: str) -> str:
    """The part of a workload's reason (Kueue's names every PodSet that failed, joined by "; ")
    that is about `pod_set`; "" if none is."""
    prefix = f"{POD_SET_REASON}{pod_set}: "
    for i, text in enumerate(reason.split("; " + POD_SET_REASON)):
        text = text if i == 0 else POD_SET_REASON + text
        if text.startswith(prefix):
            return text
    return ""


def compute_explanation(state: ClusterState, wl: Workload, shared: Shared | None = None) -> WorkloadExplanation:
    """Why `wl` would not be admitted on the cluster `state` describes, computed from scratch
    (`fits` when quota and topology have room for it as they are)."""
    blocked = waiting_summary(state, wl)
    if blocked:  # no queue to wait in, or one that admits nothing, whatever room there is
        lq = state.local_queues.get(wl.local_queue_key)
        return WorkloadExplanation(wl.key, lq.cluster_queue if lq is not None else "", False, blocked)
    cq = state.cluster_queue_for(wl)
    assert cq is not None  # waiting_summary found its LocalQueue and ClusterQueue
    problem = nomination_problem(state, wl, cq)
    if problem is not None:  # turned away before any flavor is tried, whatever room there is
        return WorkloadExplanation(wl.key, cq.name, False, problem.explained)
    assigner = FlavorAssigner(state, wl, cq)
    out = WorkloadExplanation(wl.key, cq.name, False, "", quota=quota_lines(state, assigner, wl))
    assignment = assigner.assign()
    out.quota_fits = True if assignment.ok else (
        False if assignment.kind in (WAITING_FOR_QUOTA, EXCEEDS_MAX_QUOTA) else None)
    if not assignment.ok:
        out.summary = assignment.failure
        # the PodSet it failed at, with its own reason (the workload's names every PodSet that failed)
        failed = assignment.failed_pod_set
        stopped = assignment.pod_set(failed)
        reason = stopped.message if stopped is not None and (stopped.reasons or stopped.error) else assignment.failure
        out.pod_sets = [PodSetExplanation(ps.name, ps.count, reason=reason) for ps in wl.pod_sets if ps.name == failed]
        if assignment.mode == PREEMPT:
            targets = preemption_targets(assigner, assignment)
            never = next((psf for psf in assignment.pod_sets if psf.empty_failure), None)
            if never is not None:  # preempting cannot make room: the topology is too small for it
                out.pod_sets = explain_never_fitting(state, assignment, never, shared)
            else:
                out.pod_sets = topology_behind_quota(state, assigner, assignment, shared, failed) or out.pod_sets
                out.suggestions.append(preemption_suggestion(targets, fair_sharing=state.config.fair_sharing
                                                             is not None))
        elif assignment.kind == EXCEEDS_MAX_QUOTA:
            out.suggestions.append(Suggestion(
                "exceeds-quota", "it asks for more than its ClusterQueue can ever have (its nominal quota and "
                "what it may borrow): no workload finishing makes room; only more quota or a smaller request does",
                {"clusterQueue": cq.name}))
        elif assignment.kind == WAITING_FOR_QUOTA:
            out.pod_sets = topology_behind_quota(state, assigner, assignment, shared, failed) or out.pod_sets
            out.suggestions.append(Suggestion("free-quota", "the ClusterQueue's quota is used up: it frees as "
                                              "admitted workloads in it finish",
                                              {"admitted": sorted(w.key for w in state.workloads
                                                                  if w.has_quota_reservation and w.admission
                                                                  and w.admission.cluster_queue == cq.name)}))
        return out
    assumed: dict[str, dict[str, int]] = {}
    placed = PlacedInOrder(assignment.pod_sets)
    for psf in assignment.pod_sets:
        snap_name = next((f for f in psf.flavors.values() if f in state.tas_snapshots), None)
        if not psf.tas or snap_name is None:
            out.pod_sets.append(PodSetExplanation(psf.pod_set.name, psf.count, fits=True,
                                                  flavor=next(iter(psf.flavors.values()), "")))
            continue
        out.pod_sets.append(placed.explain(state, state.tas_snapshots[snap_name], psf, assumed, shared))
    failing = [p for p in out.pod_sets if not p.fits]
    out.fits = not failing
    if failing:
        out.summary = f"couldn't assign flavors to pod set {failing[0].name}: {failing[0].reason}"
        # the quota has room, the topology does not: Kueue looks for workloads to preempt
        targets = preemption_targets(assigner, assignment)
        never = next((psf for psf in assignment.pod_sets if psf.empty_failure), None)
        if never is not None and never.pod_set.name != failing[0].name:
            # a PodSet after the one that does not fit now never fits after those before it: what
            # would make room for the first would not admit the workload
            told = {e.name: e for e in explain_never_fitting(state, assignment, never, shared)}
            out.pod_sets = [told.get(p.name, p) for p in out.pod_sets]
            flavor = next((f for f in never.flavors.values() if f in state.tas_snapshots), "")
            out.summary = f"couldn't assign flavors to pod set {never.pod_set.name}: " \
                          f"{never_fits_text(flavor, never.empty_failure)}"
        elif assignment.mode == PREEMPT:
            out.suggestions.append(preemption_suggestion(targets, fair_sharing=state.config.fair_sharing
                                                         is not None))
    else:
        out.summary = "the quota and the topology have room for it now"
        out.suggestions.append(Suggestion("fits-now", out.summary))
    return out


__all__ = [
    "LevelFit",
    "NodeExclusions",
    "PodSetExplanation",
    "QuotaLine",
    "Shared",
    "Suggestion",
    "WorkloadExplanation",
    "compute_explanation",
    "explain_workload",
    "preemption_suggestion",
    "preemption_targets",
]
