"""The topology ungater: Kueue's TAS controller that lets the pods of an admitted workload
reach the kube-scheduler (KEP-2724, `pkg/controller/tas/topology_ungater.go`).

Every pod of a TAS workload is created with the `kueue.x-k8s.io/topology` scheduling gate.
Once the workload is admitted with a TopologyAssignment, the ungater removes the gate and
adds a node selector naming one domain of the assignment (one label per level of the
assignment: the hostname alone, or e.g. block and rack), so that each domain receives
exactly the number of pods it was assigned. Per PodSet it picks the domains in one of
two ways:

* by rank, when the PodSet's topologyRequest names a `podIndexLabel` (Job completion
  index, JobSet job index x replicas, LeaderWorkerSet worker index, Kubeflow replica
  index, pod-group index, with the `kueue.x-k8s.io/pod-index-offset` annotation and the
  PodSet-group offsets Kueue applies): rank r takes the r-th slot of the assignment,
  counting slots domain by domain in the assignment's order;
* greedily otherwise, or whenever the ranks cannot be trusted (a label missing or out of
  range, two pods with one rank, or a pod that already runs outside its rank's domain):
  the pods already ungated keep their domain and consume its slots, and the gated pods,
  in name order, fill the remaining slots domain by domain.

Pods in a terminal phase (Succeeded/Failed) free their slot. Pods being deleted are
counted like any other pod, as Kueue counts them. A pod whose slot lies on a node listed
in the workload's `status.unhealthyNodes` stays gated: it could never schedule there.

The parsed `Pod` objects are never modified: `ungate_pods` returns one `PodResult` per pod
it ungates, and `apply_ungating` builds the pods as they are afterwards.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.cluster import ClusterState
from scheduler.model import TOPOLOGY_GATE, Node, Pod, PodSetAssignment, TopologyRequest, Workload
from scheduler.results import PodResult

WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
WORKLOAD_SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
POD_SET_LABEL = "kueue.x-k8s.io/podset"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"

DomainID = tuple[str, ...]  # one value per level of the assignment (Kueue's TopologyDomainID)

_UINT = re.compile(r"[0-9]+")  # Go's strconv.ParseUint(s, 10, 0): ASCII digits only
_INT = re.compile(r"[+-]?[0-9]+")  # Go's strconv.Atoi
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})  # Kueue's utilpod.IsTerminated


class UngateError(Exception):
    """Kueue's Reconcile returns an error for the workload: none of its pods is ungated."""


class _NoRanks(Exception):
    """The ranks of a PodSet's pods cannot be used; the PodSet falls back to greedy."""


# ---------------------------------------------------------------- the live pods


@dataclass(slots=True)
class LivePod:
    """A pod as the ungater sees it during the pass: ungating it updates the view, not the Pod."""

    pod: Pod
    gated: bool
    node_selector: Mapping[str, str]


class PodIndex:
    """Non-terminal pods by (namespace, workload slice name, PodSet), each list in name order.

    Kueue lists them through a field index on the `kueue.x-k8s.io/workload-slice-name`
    annotation (or `kueue.x-k8s.io/workload` for ordinary workloads) plus the
    `kueue.x-k8s.io/podset` label. Kueue's own tests list pods in name order, which is
    also what the greedy assignment hands domains out by.
    """

    def __init__(self, pods: Iterable[Pod]) -> None:
        groups: dict[tuple[str, str, str], list[LivePod]] = defaultdict(list)
        for pod in pods:
            # Most pods of a large cluster belong to no workload: the cheapest test goes first.
            annotations = pod.annotations
            if not annotations:
                continue
            owner = annotations.get(WORKLOAD_SLICE_NAME_ANNOTATION) or annotations.get(WORKLOAD_ANNOTATION)
            pod_set = pod.labels.get(POD_SET_LABEL)
            if owner is None or pod_set is None:
                continue
            if pod.phase in _TERMINAL_PHASES:
                # Succeeded/Failed pods are replaced by new ones: they hold no slot.
                continue
            live = LivePod(pod, TOPOLOGY_GATE in pod.scheduling_gates, pod.spec.node_selector)
            groups[(pod.namespace, owner, pod_set)].append(live)
        for live_pods in groups.values():
            live_pods.sort(key=lambda p: p.pod.name)
        self._groups = dict(groups)

    def pods_for(self, wl: Workload, pod_set: str) -> list[LivePod]:
        return self._groups.get((wl.namespace, workload_slice_name(wl), pod_set), [])


def workload_slice_name(wl: Workload) -> str:
    """Kueue's workloadslicing.SliceName: the first workload of an elastic slice chain names its pods."""
    return wl.annotations.get(WORKLOAD_SLICE_NAME_ANNOTATION) or wl.name


def live_domain(pod: LivePod, levels: Sequence[str], nodes: Mapping[str, Node]) -> DomainID:
    """The domain an ungated pod holds: its node's labels once it is bound (where it really
    runs), otherwise its node selector (where the ungater sent it). Kueue reads only the
    selector; the two agree for every pod the ungater placed."""
    node = nodes.get(pod.pod.node_name) if pod.pod.node_name else None
    if node is not None:
        labels = node.labels
        try:
            return tuple([labels[level] for level in levels])
        except KeyError:
            pass  # a node without the topology's labels: fall back to the selector
    selector = pod.node_selector
    return tuple([selector.get(level, "") for level in levels])


# ---------------------------------------------------------------- which workloads


def is_admitted_by_tas(wl: Workload) -> bool:
    """Kueue's workload.IsAdmittedByTAS: the Admitted condition and at least one
    TopologyAssignment. A finished or evicted workload is skipped as well: its pods are on
    their way out, and Kueue's ungater leaves them gated (its elastic-slice tests check both)."""
    if wl.admission is None or not wl.is_admitted:
        return False
    if wl.is_finished or wl.condition_true("Evicted"):
        return False
    return any(psa.topology_assignment is not None for psa in wl.admission.pod_set_assignments)


# ---------------------------------------------------------------- rank windows


@dataclass(frozen=True, slots=True)
class RankWindow:
    """What a PodSet's pod index means: rank = index - offset, and an index must stay
    below max_rank (Kueue's rankOffsets / maxRank)."""

    offset: int = 0
    max_rank: int = 0

    def shifted(self, by: int) -> RankWindow:
        return RankWindow(self.offset + by, self.max_rank + by)


def pod_set_size(wl: Workload, psa: PodSetAssignment) -> int:
    if psa.count is not None:
        return psa.count
    ps = wl.pod_set(psa.name)
    if ps is not None:
        return ps.count
    return psa.topology_assignment.pod_count if psa.topology_assignment is not None else 0


def rank_windows(wl: Workload, requests: Mapping[str, TopologyRequest | None]) -> dict[str, RankWindow]:
    """Rank windows per PodSet. PodSets sharing a `podSetGroupName` are ranked as one: in a
    LeaderWorkerSet (or an MPIJob's launcher and workers) the smaller PodSet is the leader
    holding the first ranks, and the larger one's indexes continue after it."""
    assert wl.admission is not None
    groups: dict[tuple[str, str | int], list[PodSetAssignment]] = defaultdict(list)
    for i, psa in enumerate(wl.admission.pod_set_assignments):
        tr = requests.get(psa.name)
        key = ("group", tr.pod_set_group_name) if tr is not None and tr.pod_set_group_name is not None else ("", i)
        groups[key].append(psa)
    windows: dict[str, RankWindow] = {}
    for psas in groups.values():
        if len(psas) == 1:
            windows[psas[0].name] = RankWindow(0, pod_set_size(wl, psas[0]))
            continue
        # Kueue pairs the first two PodSets of a group; any further one gets no window.
        smaller, larger = psas[0], psas[1]
        if pod_set_size(wl, smaller) > pod_set_size(wl, larger):
            smaller, larger = larger, smaller
        leaders = pod_set_size(wl, smaller)
        windows[smaller.name] = RankWindow(0, leaders)
        windows[larger.name] = RankWindow(leaders, pod_set_size(wl, larger) + leaders)
    return windows


def index_offset(pod: Pod) -> int:
    """The `kueue.x-k8s.io/pod-index-offset` annotation (0 when absent). Kueue reads it from
    the first listed pod of the PodSet and fails the whole reconcile when it does not parse."""
    raw = pod.annotations.get(POD_INDEX_OFFSET_ANNOTATION)
    if raw is None:
        return 0
    if not _INT.fullmatch(raw):
        raise UngateError(f"failed to parse offset annotation {POD_INDEX_OFFSET_ANNOTATION}={raw!r} "
                          f"of Pod {pod.key}")
    return int(raw)


# ---------------------------------------------------------------- ranks


def read_index(pod: Pod, label: str, bound: int) -> int:
    """Kueue's ReadUIntFromLabelBelowBound."""
    raw = pod.labels.get(label)
    if raw is None:
        raise _NoRanks(f"no label {label!r} on Pod {pod.key}")
    if not _UINT.fullmatch(raw):
        raise _NoRanks(f"label {label}={raw!r} of Pod {pod.key} is not an unsigned integer")
    value = int(raw)
    if value >= bound:
        raise _NoRanks(f"label {label}={raw!r} of Pod {pod.key} is not below {bound}")
    return value


def read_ranks(pods: Sequence[LivePod], tr: TopologyRequest, size: int, window: RankWindow) -> dict[int, LivePod]:
    """Every pod's rank within the PodSet (Kueue's readRanksForLabels); `_NoRanks` when a
    pod has none, or when two pods claim one rank."""
    assert tr.pod_index_label is not None
    single_job_size = size
    sub_groups = tr.sub_group_count or 0
    if tr.sub_group_index_label is not None:
        if sub_groups <= 0:
            raise _NoRanks("subGroupIndexLabel without a positive subGroupCount")
        single_job_size = size // sub_groups
    ranks: dict[int, LivePod] = {}
    for live in pods:
        index = read_index(live.pod, tr.pod_index_label, window.max_rank)
        rank = index - window.offset
        if tr.sub_group_index_label is not None:
            job_index = read_index(live.pod, tr.sub_group_index_label, sub_groups)
            if index >= single_job_size:
                raise _NoRanks(f"pod index {index} of Pod {live.pod.key} exceeds the single Job size {single_job_size}")
            rank = index + job_index * single_job_size - window.offset
        if not 0 <= rank < size:
            raise _NoRanks(f"rank {rank} of Pod {live.pod.key} is outside the PodSet of {size}")
        if rank in ranks:
            raise _NoRanks(f"conflicting rank {rank} for Pod {live.pod.key}")
        ranks[rank] = live
    return ranks


def rank_slots(ta: TopologyAssignment) -> list[DomainID]:
    """The domain of every rank: the assignment's slots, domain by domain in its order."""
    slots: list[DomainID] = []
    for domain in ta.domains:
        slots.extend([domain.values] * domain.count)
    return slots


# ---------------------------------------------------------------- assigning gated pods


Placement = tuple[LivePod, DomainID]
DomainOf = Callable[[LivePod], DomainID]


def assign_by_ranks(ranks: Mapping[int, LivePod], slots: Sequence[DomainID], domain_of: DomainOf) -> list[Placement]:
    """Rank r to slot r. `_NoRanks` when a rank has no slot, or when a pod that already left
    the gate holds another domain than its rank's (a replacement pod would then be sent
    where a survivor already sits: two pods on one slot)."""
    for rank, live in ranks.items():
        if rank >= len(slots):
            raise _NoRanks(f"rank {rank} is beyond the {len(slots)} slots of the assignment")
        if not live.gated and domain_of(live) != slots[rank]:
            raise _NoRanks(f"Pod {live.pod.key} of rank {rank} runs in {domain_of(live)}, not {slots[rank]}")
    return [(live, slots[rank]) for rank, live in sorted(ranks.items()) if live.gated]


def assign_greedily(ta: TopologyAssignment, pods: Sequence[LivePod], domain_of: DomainOf) -> list[Placement]:
    """Kueue's assignGatedPodsToDomainsGreedy: ungated pods keep the slots of their domain;
    the gated ones, in order, take the free slots domain by domain."""
    held = Counter(domain_of(live) for live in pods if not live.gated)
    gated: Iterator[LivePod] = iter([live for live in pods if live.gated])
    placed: list[Placement] = []
    for domain in ta.domains:
        free = max(domain.count - held[domain.values], 0)
        placed.extend((live, domain.values) for live in islice(gated, free))
    return placed


def assign_gated_pods(
    ta: TopologyAssignment,
    pods: Sequence[LivePod],
    tr: TopologyRequest | None,
    size: int,
    window: RankWindow,
    domain_of: DomainOf,
) -> list[Placement]:
    if tr is not None and tr.pod_index_label is not None:
        try:
            return assign_by_ranks(read_ranks(pods, tr, size, window), rank_slots(ta), domain_of)
        except _NoRanks:
            pass  # Kueue logs why and places the PodSet greedily
    return assign_greedily(ta, pods, domain_of)


# ---------------------------------------------------------------- one workload


@dataclass(frozen=True, slots=True)
class Ungate:
    """One pod to ungate, with the node labels its domain adds to the node selector."""

    pod: LivePod
    node_labels: Mapping[str, str]

    def node_selector(self) -> dict[str, str]:
        return {**self.pod.node_selector, **self.node_labels}


def unhealthy_domains(wl: Workload, ta: TopologyAssignment) -> frozenset[DomainID]:
    """Hostname domains listed in `status.unhealthyNodes`: a pod sent there could never
    schedule (the node controller would fail it), so it waits gated for the replacement."""
    if not wl.unhealthy_nodes or not ta.levels or ta.levels[-1] != HOSTNAME_LABEL:
        return frozenset()
    unhealthy = set(wl.unhealthy_nodes)
    return frozenset(d.values for d in ta.domains if d.values[-1] in unhealthy)


def plan_workload(wl: Workload, index: PodIndex, nodes: Mapping[str, Node]) -> list[Ungate]:
    """The pods of one admitted workload to ungate (Kueue's Reconcile, before any patch)."""
    assert wl.admission is not None
    requests = {ps.name: ps.topology_request for ps in wl.pod_sets}
    windows = rank_windows(wl, requests)
    plan: list[Ungate] = []
    for psa in wl.admission.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None:
            continue  # not placed by TAS, or a delayed topology request still pending
        pods = index.pods_for(wl, psa.name)
        window = windows.get(psa.name, RankWindow())
        if pods:
            window = window.shifted(index_offset(pods[0].pod))
        domain_of = partial(live_domain, levels=ta.levels, nodes=nodes)
        placed = assign_gated_pods(ta, pods, requests.get(psa.name), pod_set_size(wl, psa), window, domain_of)
        node_labels = {d.values: dict(zip(ta.levels, d.values, strict=True)) for d in ta.domains}
        blocked = unhealthy_domains(wl, ta)
        plan.extend(Ungate(live, node_labels[domain]) for live, domain in placed if domain not in blocked)
    return plan


# ---------------------------------------------------------------- the pass


def workloads_with_gated_pods(state: ClusterState) -> list[Workload]:
    """The workloads some live pod of which still carries the topology gate, in the state's order."""
    keys: set[str] = set()
    for owner in state.gated_owners:
        keys |= state.slice_members.get(owner, set())
    return state.in_order(keys)


def ungate_pods(state: ClusterState, workloads: Iterable[Workload] | None = None) -> list[PodResult]:
    """Step 4 of the pass: ungate the pods of every workload admitted by TAS (or of `workloads`).

    Returns one result per ungated pod with its complete node selector afterwards (the
    selectors it had plus the domain's labels). Workloads are handled one after another,
    each seeing the pods the previous ones ungated as ungated.
    """
    if workloads is None:
        index = PodIndex(state.pods)
        candidates: Iterable[Workload] = state.workloads
    else:
        candidates = list(workloads)
        owners = {(w.namespace, workload_slice_name(w)) for w in candidates}
        index = PodIndex(p for owner in owners for p in state.pods_by_owner.get(owner, {}).values())
    results: list[PodResult] = []
    for wl in candidates:
        if not is_admitted_by_tas(wl):
            continue
        try:
            plan = plan_workload(wl, index, state.nodes)
        except UngateError as exc:
            state.warn(f"Workload/{wl.namespace}/{wl.name}: {exc}; its pods stay gated")
            continue
        for ungate in plan:
            selector = ungate.node_selector()
            ungate.pod.gated = False
            ungate.pod.node_selector = selector
            results.append(PodResult(ungate.pod.pod.namespace, ungate.pod.pod.name, True, selector))
    return results


def apply_ungating(pods: Iterable[Pod], results: Iterable[PodResult]) -> list[Pod]:
    """The pods as they are after the pass: copies of the ungated ones without the topology
    gate and with their new node selector; the others unchanged (the same objects)."""
    by_key = {(r.namespace, r.name): r for r in results if r.ungated}
    out = []
    for pod in pods:
        result = by_key.get((pod.namespace, pod.name))
        if result is None:
            out.append(pod)
            continue
        gates = tuple(g for g in pod.scheduling_gates if g != TOPOLOGY_GATE)
        spec = dataclasses.replace(pod.spec, node_selector=dict(result.node_selector))
        out.append(dataclasses.replace(pod, scheduling_gates=gates, spec=spec))
    return out
