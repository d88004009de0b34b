"""Choosing a ResourceFlavor for every PodSet of a workload, then its TAS placement.

For each PodSet and each resource group covering its requests, flavors are tried in the
ClusterQueue's order; the first whose constraints the PodSet meets and whose quota has
room is taken. PodSets that request TAS (explicitly, or implied by a TAS-only
ClusterQueue) are then placed on their TAS flavor's snapshot.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from enum import IntEnum

from scheduler.assignment import TopologyAssignment
from scheduler.cluster import ClusterState
from scheduler.config import NO_CONFIGURATION, Configuration
from scheduler.model import ClusterQueue, PodSet, PodSetAssignment, ResourceFlavor, ResourceGroup, Taint, Workload
from scheduler.placement import PodSetPlacement, TASPodSetRequest, pod_set_updates_for, untolerated_taint
from scheduler.preemption import POSSIBLE_NONE, POSSIBLE_PREEMPT, Preemptor, Targets
from scheduler.quantity import PODS, format_value
from scheduler.quota import FlavorResource, borrowing_height
from scheduler.topology_assignment import find_topology_assignments_for_flavor, has_level, topology_request_reason

FIT, PREEMPT, NO_FIT = "Fit", "Preempt", "NoFit"
MODE_ORDER = [NO_FIT, PREEMPT, FIT]  # worse to better
# why a workload could not get flavors (UnadmittedWorkloadsObservability's reasons)
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
WAITING_FOR_QUOTA = "WaitingForQuota"
TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
_SEVERITY = {TOPOLOGY_PLACEMENT_FAILED: 1, WAITING_FOR_QUOTA: 2, EXCEEDS_MAX_QUOTA: 3, NO_MATCHING_FLAVOR: 4}


class Grain(IntEnum):
    """How a flavor can take a resource, finer than Fit/Preempt/NoFit: the flavor assigner prefers
    a flavor where preemption found targets over one where it found none."""

    NO_FIT = 0
    NO_CANDIDATES = 1  # preemption could help, but nothing can be preempted
    PREEMPT = 2  # targets found, some in the ClusterQueue itself
    RECLAIM = 3  # targets found, all borrowing from elsewhere in the cohort
    FIT = 4

    @property
    def mode(self) -> str:
        return NO_FIT if self == Grain.NO_FIT else FIT if self == Grain.FIT else PREEMPT

    def describe(self) -> str:
        if self in (Grain.NO_CANDIDATES, Grain.PREEMPT, Grain.RECLAIM):
            return "preemptionMode=" + {Grain.NO_CANDIDATES: "NoCandidates", Grain.PREEMPT: "Preempt",
                                         Grain.RECLAIM: "Reclaim"}[self]
        return self.mode


@dataclass(frozen=True, slots=True)
class GranularMode:
    grain: Grain
    borrow: int = 0


def is_preferred(a: GranularMode, b: GranularMode, fungibility: Mapping) -> bool:
    """Kueue's isPreferred: whether flavor mode `a` beats `b` under the ClusterQueue's fungibility."""
    if a.grain == Grain.NO_FIT:
        return False
    if b.grain == Grain.NO_FIT:
        return True
    a_none, b_none = a.grain == Grain.NO_CANDIDATES, b.grain == Grain.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if fungibility.get("preference") == "PreemptionOverBorrowing":
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.grain > b.grain
    if a.grain != b.grain:
        return a.grain > b.grain
    return a.borrow < b.borrow


def should_try_next_flavor(mode: GranularMode, fungibility: Mapping) -> bool:
    if mode.grain in (Grain.NO_FIT, Grain.NO_CANDIDATES):
        return True
    if mode.grain in (Grain.PREEMPT, Grain.RECLAIM) and \
            fungibility.get("whenCanPreempt", "TryNextFlavor") == "TryNextFlavor":
        return True
    return mode.borrow > 0 and fungibility.get("whenCanBorrow", "MayStopSearch") == "TryNextFlavor"


def most_severe(a: str, b: str) -> str:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


@dataclass(slots=True)
class FlavorAttempt:
    """One flavor tried for a PodSet's resource group, and how it went."""

    flavor: str
    mode: str
    borrow: int = 0
    reasons: list[str] = field(default_factory=list)
    grain: Grain | None = None
    kind: str = ""  # why it does not fit (NoFit attempts)
    # a flavor whose topology lacks a level the PodSet names: what the TAS placement says of it there
    placement_reason: str = ""

    def describe(self) -> str:
        text = self.grain.describe() if self.grain is not None else self.mode
        if self.borrow:
            text += f";borrow={self.borrow}"
        if self.reasons:
            text += ";" + ";".join(self.reasons)
        return f"{self.flavor}({text})"


@dataclass(slots=True)
class PodSetFlavors:
    """The flavors chosen for one PodSet, and what it needs from each."""

    pod_set: PodSet
    count: int
    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor
    usage: dict[str, int] = field(default_factory=dict)  # resource -> total request
    tas: bool = False
    implied: bool = False
    delayed: str | None = None  # "Pending" when TAS waits for a ProvisioningRequest (second pass)
    borrow: int = 0
    attempts: list[FlavorAttempt] = field(default_factory=list)
    mode: str = FIT
    reasons: list[str] = field(default_factory=list)  # why it does not simply fit
    kind: str = ""
    # an error building its TAS request (Kueue's Status.err): the PodSet cannot be admitted
    error: str = ""
    # the placement's reason when it does not fit the topology even with no admitted workload
    # on the flavor's nodes (Kueue's simulate-empty check): no preemption or finish makes room
    empty_failure: str = ""
    # the TASPodSetRequest fields its Ready admission checks' podSetUpdates change
    updates: Mapping[str, object] = field(default_factory=dict)

    @property
    def message(self) -> str:
        if self.error:
            return f"failed to assign flavors to pod set {self.pod_set.name}: {self.error}"
        return f"couldn't assign flavors to pod set {self.pod_set.name}: {', '.join(sorted(self.reasons))}"

    @property
    def failure_reason(self) -> str:
        """Why the PodSet did not fit: when every flavor tried lacks a level it names, the TAS
        placement's own reason on the first ("no requested topology level for slices: ..."), as
        Kueue's placement gives it; otherwise the flavor assigner's reasons."""
        if self.error:
            return self.error
        if self.mode == NO_FIT and self.attempts and all(a.placement_reason for a in self.attempts):
            return self.attempts[0].placement_reason
        return ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class FlavorAssignment:
    pod_sets: list[PodSetFlavors]
    failure: str = ""
    failed_pod_set: str = ""
    kind: str = ""  # why it failed: one of the reasons above
    mode: str = FIT
    placements: dict[str, PodSetPlacement] = field(default_factory=dict)
    # per (PodSet, resource group): the flavor index the search stopped at, -1 when it tried them all
    tried: dict[tuple[str, int], int] = field(default_factory=dict)
    # TAS placement failed on the nodes as they are (quota was not what stopped it): capacity
    # freed on the flavor's nodes by any ClusterQueue may change the answer
    topology_failed: bool = False
    # the PodSet it failed for, and the placement's reason
    topology_failure: tuple[str, str] = ("", "")

    @property
    def pending_flavors(self) -> bool:
        """Some resource group has flavors left to try (Kueue requeues such a workload at once)."""
        return any(index != -1 for index in self.tried.values())

    @property
    def ok(self) -> bool:
        return self.mode == FIT

    @property
    def borrowing(self) -> int:
        return max((psf.borrow for psf in self.pod_sets), default=0)

    def pod_set(self, name: str) -> PodSetFlavors | None:
        return next((p for p in self.pod_sets if p.pod_set.name == name), None)

    def usage(self) -> dict[FlavorResource, int]:
        total: dict[FlavorResource, int] = {}
        for psf in self.pod_sets:
            for resource, value in psf.usage.items():
                fr = FlavorResource(psf.flavors[resource], resource)
                total[fr] = total.get(fr, 0) + value
        return total

    def resources_needing_preemption(self) -> set[FlavorResource]:
        return {FlavorResource(flavor, resource) for psf in self.pod_sets if psf.mode == PREEMPT
                for resource, flavor in psf.flavors.items()}

    def refresh(self) -> None:
        """Recompute the overall mode and message from the PodSets' (Kueue's RepresentativeMode)."""
        modes = [psf.mode for psf in self.pod_sets] or [NO_FIT]
        self.mode = min(modes, key=MODE_ORDER.index)
        troubled = [psf for psf in self.pod_sets if psf.reasons or psf.error]
        errored = next((psf for psf in troubled if psf.error), None)
        if self.mode == FIT:
            self.failure = ""
        elif errored is not None:
            self.failure = errored.message  # Kueue's Message() returns at the first PodSet with an error
        else:
            self.failure = "; ".join(psf.message for psf in troubled)
        failed = next((p for p in self.pod_sets if p.mode == NO_FIT), None) or next(
            (p for p in self.pod_sets if p.mode != FIT), None)
        self.failed_pod_set = failed.pod_set.name if failed is not None and self.mode != FIT else ""
        if self.mode == FIT:
            self.kind = ""
        elif self.mode == PREEMPT:
            self.kind = WAITING_FOR_QUOTA
        else:
            self.kind = ""
            for psf in self.pod_sets:
                if psf.mode == NO_FIT:
                    # an errored PodSet tried its flavors with success: it adds no reason (resolveNoFitReason)
                    self.kind = most_severe(self.kind, psf.kind if psf.error else psf.kind or NO_MATCHING_FLAVOR)


@dataclass(frozen=True, slots=True)
class FlavorScanProgress:
    """Where a workload's flavor scan stopped (Kueue's AssignmentClusterQueueState, kept as the
    workload's LastAssignment): per (PodSet, resource group) the index of the last flavor tried,
    -1 when the scan went through them all. The next attempt resumes after it, so a workload whose
    first flavor has quota but no room in its topology gets to the next flavor."""

    last_tried: Mapping[tuple[str, int], int]
    cluster_queue_generation: int  # the ClusterQueue's AllocatableResourceGeneration then
    scheduling_cycle: int  # the cycle that recorded it
    shape: Hashable = None  # the workload's scheduling shape then: the indexes mean nothing for another

    @property
    def pending_flavors(self) -> bool:
        """Some resource group has flavors left to try (Kueue's PendingFlavors)."""
        return any(index != -1 for index in self.last_tried.values())

    def next_flavor(self, key: tuple[str, int]) -> int:
        """Kueue's NextFlavorToTryForPodSetResource."""
        return self.last_tried.get(key, -1) + 1

    def outdated(self, generation: int, cycle: int, shape: Hashable, *, preserve: bool) -> bool:
        """Kueue's lastAssignmentOutdated: the ClusterQueue's generation advanced since (with
        FlavorFungibilityPreserveScanProgress, only once the progress is older than the previous
        cycle: on a busy cluster the generation advances every cycle), or the workload changed shape."""
        if shape != self.shape:
            return True
        if generation <= self.cluster_queue_generation:
            return False
        return not preserve or self.scheduling_cycle < cycle - 1


def go_taint(taint: Taint) -> str:
    """A corev1.Taint as Go's %s prints the struct value: {key value effect timeAdded}."""
    added = "<nil>" if taint.time_added is None else \
        taint.time_added.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    return f"{{{taint.key} {taint.value} {taint.effect} {added}}}"


def flavor_matches_node_constraints(ps: PodSet, flavor: ResourceFlavor, allowed_keys: set[str]) -> bool:
    """The PodSet's nodeSelector and required node affinity, restricted to the label keys the
    flavor defines, against the flavor's nodeLabels (as kube-scheduler's NodeAffinity filter would)."""
    labels = flavor.node_labels
    for key, value in ps.spec.node_selector.items():
        if key in allowed_keys and labels.get(key) != value:
            return False
    affinity = ps.spec.affinity
    if affinity is None or not affinity.required:
        return True
    terms = []
    for term in affinity.required:
        relevant = [r for r in term.match_expressions if r.key in allowed_keys]
        if not relevant:
            return True  # a term that says nothing about flavor labels lets any flavor through
        terms.append(relevant)
    return any(all(r.matches(labels) for r in term) for term in terms)


def pod_set_needs(ps: PodSet, count: int, config: Configuration = NO_CONFIGURATION) -> dict[str, int]:
    """Total requests of `count` pods of the PodSet as quota sees them (the Configuration's
    excluded resources and transformations applied), with Kueue's implicit `pods` resource."""
    needs = {r: v * count for r, v in config.quota_requests(ps.spec.requests).items()}
    needs[PODS] = count
    return needs


class FlavorAssigner:
    def __init__(self, state: ClusterState, wl: Workload, cq: ClusterQueue,
                 preemptor: Preemptor | None = None) -> None:
        self.state = state
        self.wl = wl
        self.cq = cq
        self.tas_only = state.is_tas_only(cq)
        self.preemptor = preemptor if preemptor is not None else Preemptor(state)
        # flavors chosen at nomination: a recompute within the cycle sticks to them
        self.nominated: dict[str, dict[str, str]] | None = None
        # where an earlier attempt's flavor scan stopped: this one resumes after it
        self.progress: FlavorScanProgress | None = None
        self.tried: dict[tuple[str, int], int] = {}
        # the admitted workload slice this one replaces (elastic jobs): its pods keep their places
        self.replaced = state.replaced_slice(wl, cq.name)
        # resources.quotaCheckStrategy: IgnoreUndeclared leaves resources the ClusterQueue does
        # not cover out of quota instead of blocking the workload
        self.ignore_undeclared = state.config.ignores_undeclared(state.gates)
        # ConcurrentAdmission: a variant takes only the flavors its annotation names
        self.allowed_flavors = state.allowed_flavors_of(wl)

    # ------------------------------------------------------------ PodSet <-> flavor compatibility

    def tas_requested(self, ps: PodSet) -> bool:
        return ps.explicit_tas or self.tas_implied(ps)

    def tas_implied(self, ps: PodSet) -> bool:
        return not ps.explicit_tas and self.tas_only

    def flavor_mismatch(self, ps: PodSet, flavor: ResourceFlavor, group: ResourceGroup) -> str | None:
        """Why the PodSet cannot use the flavor, in Kueue's words; None when it can."""
        gates = self.state.gates
        if gates.TopologyAwareScheduling and self.tas_requested(ps):
            if not self.tas_implied(ps):
                if not flavor.is_tas:
                    if not any(r in group.covered_resources for r, v in ps.spec.requests.items() if v):
                        return None
                    return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
                snap = self.state.tas_snapshots.get(flavor.name)
                if snap is None:
                    return f'Flavor "{flavor.name}" information missing in TAS cache'
                if not has_level(snap, ps.topology_request, gates):
                    return f'Flavor "{flavor.name}" does not contain the requested level'
        elif flavor.is_tas and gates.TopologyAwareScheduling:
            return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
        taint = untolerated_taint(flavor.node_taints, ps.spec.tolerations + flavor.tolerations)
        if taint is not None:
            return f"untolerated taint {go_taint(taint)} in flavor {flavor.name}"
        # only the flavor's own label keys judge it (Kueue #12449): a key another flavor of the
        # group declares says nothing about this one
        if not flavor_matches_node_constraints(ps, flavor, set(flavor.node_labels)):
            return f"flavor {flavor.name} doesn't match node affinity"
        return None

    def missing_level_reason(self, psf: PodSetFlavors, flavor: str) -> str:
        """The TAS placement's reason for a PodSet on a TAS flavor whose topology lacks a level
        the PodSet names; "" for any other flavor."""
        snap = self.state.tas_snapshots.get(flavor)
        ps = psf.pod_set
        if snap is None or not psf.tas or psf.implied or has_level(snap, ps.topology_request, self.state.gates):
            return ""
        request = TASPodSetRequest(pod_set=ps, count=psf.count, single_pod_requests=ps.spec.requests, flavor=flavor)
        return topology_request_reason(snap, request, self.state.gates)

    # ------------------------------------------------------------ quota

    def can_preempt_while_borrowing(self) -> bool:
        borrow = self.cq.preemption.get("borrowWithinCohort") or {}
        if borrow.get("policy", "Never") != "Never":
            return True
        # fair sharing may preempt in the cohort whatever the preemptor borrows
        return self.state.config.fair_sharing is not None and \
            self.cq.preemption.get("reclaimWithinCohort", "Never") != "Never"

    def quota_mode(self, flavor: str, resource: str, need: int, pending: Mapping[FlavorResource, int],
                   released: int = 0) -> tuple[GranularMode, str, str]:
        """How `need` more of a resource fits a flavor on top of what earlier PodSets of the workload
        take (Kueue's fitsResourceQuota): the mode, why it does not simply fit, and the kind of
        reason when it cannot fit at all. `released` is what the workload slice it replaces holds
        of it there: Kueue asks the maximum capacity for the difference only (the replaced
        slice's usage is out of the state while a replacement is assigned, which makes the other
        checks the same)."""
        tree = self.state.quota
        fr = FlavorResource(flavor, resource)
        already = pending.get(fr, 0)
        value = already + need
        maximum = tree.potential_available(self.cq.name, fr)
        if value - released > maximum:
            return GranularMode(Grain.NO_FIT), (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                f"({format_value(resource, already)}) + current podset request "
                f"({format_value(resource, need - released)}) > maximum capacity ({format_value(resource, maximum)})"
            ), EXCEEDS_MAX_QUOTA
        node = tree.queues[self.cq.name]
        borrow, may_reclaim = borrowing_height(node, fr, value)
        available = tree.available(self.cq.name, fr)
        if value <= available:
            return GranularMode(Grain.FIT, borrow), "", ""
        reason = (f"insufficient unused quota for {resource} in flavor {flavor}, "
                  f"{format_value(resource, value - available)} more needed")
        if tree.nominal(self.cq.name, fr) >= value or may_reclaim or self.can_preempt_while_borrowing():
            possibility, borrow_after = self.preemptor.simulate(self.wl, self.cq, fr, value)
            grain = {POSSIBLE_NONE: Grain.NO_CANDIDATES, POSSIBLE_PREEMPT: Grain.PREEMPT}.get(
                possibility, Grain.RECLAIM)
            return GranularMode(grain, borrow_after), reason, ""
        return GranularMode(Grain.NO_FIT, borrow), reason, WAITING_FOR_QUOTA

    # ------------------------------------------------------------ assignment

    def assign(self, counts: Mapping[str, int] | None = None) -> FlavorAssignment:
        """Flavors for every PodSet (with `counts` pods instead of its count, for partial admission);
        the assignment's mode says whether it fits, needs preemption, or cannot fit (then PodSets
        after the failing one are not considered). PodSets naming the same podSetGroupName get
        their flavors together (Kueue's groupedRequests), groups in the order they first appear,
        and the assignment lists them so, a group's PodSets side by side (as Kueue's does: its
        messages and admission follow that order)."""
        result: list[PodSetFlavors] = []
        pending: dict[FlavorResource, int] = {}
        self.tried = {}
        for members in self.pod_set_groups():
            psfs, needs = [], []
            for ps in members:
                needed = self.state.pods_after_reclaim(self.wl, ps)
                count = counts.get(ps.name, needed) if counts else needed
                psfs.append(PodSetFlavors(ps, count, tas=self.tas_requested(ps), implied=self.tas_implied(ps),
                                          updates=pod_set_updates_for(self.wl, ps)))
                needs.append(pod_set_needs(ps, count, self.state.config))
            if len(psfs) == 1:
                self._assign_pod_set(psfs[0], needs[0], pending)
            else:
                self._assign_group(psfs, needs, pending)
            result.extend(psfs)
            if any(psf.mode == NO_FIT for psf in psfs):
                break
        assignment = FlavorAssignment(result, tried=dict(self.tried))
        assignment.refresh()
        return assignment

    def pod_set_groups(self) -> list[list[PodSet]]:
        """The workload's PodSets grouped by topologyRequest.podSetGroupName (a PodSet without one
        is a group of its own), in the order each group first appears."""
        groups: dict[str, list[PodSet]] = {}
        for i, ps in enumerate(self.wl.pod_sets):
            tr = ps.topology_request
            key = f"group:{tr.pod_set_group_name}" if tr is not None and tr.pod_set_group_name else f"index:{i}"
            groups.setdefault(key, []).append(ps)
        return list(groups.values())

    def _resource_groups(self, needs: dict[str, int]) -> tuple[list[tuple[ResourceGroup, list[str]]], str]:
        groups: list[tuple[ResourceGroup, list[str]]] = []
        for resource, value in needs.items():
            group = next((rg for rg in self.cq.resource_groups if resource in rg.covered_resources), None)
            if group is None:
                if resource == PODS or value == 0 or self.ignore_undeclared:
                    continue  # nothing to account: Kueue ignores it
                return [], f"resource {resource} unavailable in ClusterQueue"
            for g, resources in groups:
                if g is group:
                    resources.append(resource)
                    break
            else:
                groups.append((group, [resource]))
        return groups, ""

    def _assign_pod_set(self, psf: PodSetFlavors, needs: dict[str, int], pending: dict[FlavorResource, int]) -> None:
        groups, missing = self._resource_groups(needs)
        if missing:
            psf.mode, psf.kind, psf.reasons = NO_FIT, NO_MATCHING_FLAVOR, [missing]
            return
        for group, resources in groups:
            best = self._best_flavor(psf, group, resources, needs, pending)
            if best is None:
                psf.mode = NO_FIT
                return
            flavor, mode = best
            for r in resources:
                self._take(psf, r, flavor, mode, needs[r], pending)

    @staticmethod
    def _take(psf: PodSetFlavors, resource: str, flavor: str, mode: GranularMode, amount: int,
              pending: dict[FlavorResource, int]) -> None:
        """The PodSet takes `flavor` for `resource`, `amount` of it, which the PodSets after it
        find pending; how it fits there (borrowing, preempting) becomes the PodSet's."""
        psf.flavors[resource] = flavor
        psf.usage[resource] = amount
        fr = FlavorResource(flavor, resource)
        pending[fr] = pending.get(fr, 0) + amount
        psf.borrow = max(psf.borrow, mode.borrow)
        if mode.grain != Grain.FIT:
            psf.mode = PREEMPT

    def _assign_group(self, psfs: list[PodSetFlavors], needs: list[dict[str, int]],
                      pending: dict[FlavorResource, int]) -> None:
        """One flavor per resource for a PodSet group: the group's summed requests are checked
        against each flavor, every member against its constraints; each member then takes the
        flavors of the resources it requests (a member requesting none of them, the group's TAS
        flavors), and all members share the group's reasons and attempts (Kueue's assignFlavors
        over groupedRequests, resolvePodSetFlavors)."""
        lead = psfs[0]
        total: dict[str, int] = {}
        for n in needs:
            for r, v in n.items():
                total[r] = total.get(r, 0) + v
        groups, missing = self._resource_groups(total)
        if missing:
            for psf in psfs:
                psf.mode, psf.kind, psf.reasons = NO_FIT, NO_MATCHING_FLAVOR, [missing]
            return
        members = [psf.pod_set for psf in psfs]
        chosen: dict[str, tuple[str, GranularMode]] = {}
        for group, resources in groups:
            best = self._best_flavor(lead, group, resources, total, pending, members=members)
            if best is None:
                for psf in psfs:
                    psf.mode, psf.kind = NO_FIT, lead.kind
                    psf.reasons, psf.attempts = list(lead.reasons), list(lead.attempts)
                return
            for r in resources:
                chosen[r] = best
        covers_pods = any(PODS in rg.covered_resources for rg in self.cq.resource_groups)
        for psf, n in zip(psfs, needs, strict=True):
            requested = set(self.state.config.quota_requests(psf.pod_set.spec.requests))
            if covers_pods:
                requested.add(PODS)
            if requested:
                own = [r for r in chosen if r in requested]
            else:  # e.g. a LeaderWorkerSet leader without requests: the group's TAS flavors
                own = [r for r, (f, _) in chosen.items() if f in self.state.tas_snapshots]
            for r in own:
                flavor, mode = chosen[r]
                self._take(psf, r, flavor, mode, n.get(r, 0), pending)
            if psf is not lead:
                psf.reasons, psf.attempts = list(lead.reasons), list(lead.attempts)

    def _best_flavor(self, psf: PodSetFlavors, group: ResourceGroup, resources: list[str], needs: dict[str, int],
                     pending: dict[FlavorResource, int], members: list[PodSet] | None = None
                     ) -> tuple[str, GranularMode] | None:
        """The flavor of the group the PodSet (or PodSet group `members`) takes (Kueue's
        findFlavorForPodSets), or None; reasons for anything short of a plain fit go to the PodSet."""
        members = members or [psf.pod_set]
        fungibility = self.cq.flavor_fungibility
        reasons: list[str] = []
        kinds: list[str] = []
        best: tuple[str, GranularMode] | None = None
        key = (psf.pod_set.name, self.cq.resource_groups.index(group))
        attempted = -1
        for index in range(self.first_flavor(key), len(group.flavors)):
            fq = group.flavors[index]
            attempted = index
            if self.nominated is not None and not any(
                    fq.name in self.nominated.get(ps.name, {}).values() for ps in members):
                reasons.append(f"skipping flavor {fq.name} as it is not found in the nomination mapping "
                               f"for resource {resources[0]}")
                continue
            if self.allowed_flavors is not None and fq.name not in self.allowed_flavors:
                reasons.append(f"skipping flavor {fq.name} due to WorkloadAllowedResourceFlavorAnnotation annotation")
                continue
            flavor = self.state.flavors.get(fq.name)
            mismatch = f"flavor {fq.name} not found" if flavor is None else \
                next((m for m in (self.flavor_mismatch(ps, flavor, group) for ps in members) if m), None)
            if mismatch:
                reasons.append(mismatch)
                kinds.append(NO_MATCHING_FLAVOR)
                psf.attempts.append(FlavorAttempt(fq.name, NO_FIT, reasons=[mismatch], grain=Grain.NO_FIT,
                                                  kind=NO_MATCHING_FLAVOR,
                                                  placement_reason=self.missing_level_reason(psf, fq.name)))
                continue
            mode = GranularMode(Grain.FIT)
            max_borrow, flavor_reasons, kind = 0, [], ""
            for r in resources:
                original, released = self.replaced_request(members, r, fq.name)
                if original is not None:
                    # Kueue keeps a replacement slice on its predecessor's flavors: this flavor does
                    # not fit, whatever its quota says (checked all the same, as Kueue does)
                    flavor_reasons.append(f"could not assign {fq.name} flavor since the original workload is "
                                          f"assigned: {original}")
                    kind = most_severe(kind, NO_MATCHING_FLAVOR)
                    _m, why, _k = self.quota_mode(fq.name, r, needs[r], pending)
                    if why:
                        flavor_reasons.append(why)
                    mode = GranularMode(Grain.NO_FIT)
                    break
                m, why, why_kind = self.quota_mode(fq.name, r, needs[r], pending, released)
                max_borrow = max(max_borrow, m.borrow)
                if why:
                    flavor_reasons.append(why)
                if why_kind:
                    kind = most_severe(kind, why_kind)
                if is_preferred(mode, m, fungibility):
                    mode = m
            reasons.extend(flavor_reasons)
            psf.attempts.append(FlavorAttempt(fq.name, mode.grain.mode, max_borrow, sorted(flavor_reasons),
                                              grain=mode.grain, kind=kind))
            if mode.grain == Grain.NO_FIT:
                kinds.append(kind or WAITING_FOR_QUOTA)
                continue
            if not should_try_next_flavor(mode, fungibility):
                best = (fq.name, mode)
                break
            if best is None or is_preferred(mode, best[1], fungibility):
                best = (fq.name, mode)
        # where the next attempt resumes when this one stopped before the group's last flavor
        self.tried[key] = -1 if attempted in (-1, len(group.flavors) - 1) else attempted
        if best is None:
            # as Kueue does, the failing group's reasons replace those of groups before it
            psf.reasons = reasons or ["no flavors in the resource group"]
            # the least severe alternative is what stands in the way
            psf.kind = min(kinds, key=lambda k: _SEVERITY.get(k, 0)) if kinds else NO_MATCHING_FLAVOR
            return None
        if best[1].grain != Grain.FIT:
            psf.reasons.extend(reasons)
        return best

    def first_flavor(self, key: tuple[str, int]) -> int:
        """The index the scan of a (PodSet, resource group) starts at: after where the last attempt
        stopped (from the first flavor without FlavorFungibility)."""
        if self.progress is None or not self.state.gates.FlavorFungibility:
            return 0
        return self.progress.next_flavor(key)

    def preemption_targets(self, assignment: FlavorAssignment) -> Targets:
        """The workloads to preempt for an assignment that fits only by preemption: its quota,
        and its topology (placed as if they were gone); none when no candidate will do."""
        return self.preemptor.get_targets(
            self.wl, self.cq, assignment.usage(), assignment.resources_needing_preemption(),
            tas_fits=lambda: not any(p.failure for p in self.place(assignment).values()))

    # ------------------------------------------------------------ TAS within the assignment

    def assign_topology(self, assignment: FlavorAssignment) -> None:
        """Kueue's TAS step of flavor assignment: place a fitting assignment (a PodSet that does not fit
        the topology now needs preemption); for one needing preemption, check it could fit an empty
        topology at all (if not, it cannot fit)."""
        if not self.state.gates.TopologyAwareScheduling:
            return
        if self.tas_request_errors(assignment):
            return
        if assignment.mode == FIT:
            placements = self.place(assignment)
            failed = next((name for name, p in placements.items() if p.failure), None)
            if failed is None:
                assignment.placements = placements
                return
            psf = assignment.pod_set(failed)
            psf.reasons.append(placements[failed].failure)
            psf.mode = PREEMPT
            assignment.topology_failed = True
            assignment.topology_failure = (failed, placements[failed].failure)
            assignment.refresh()
        if assignment.mode == PREEMPT and not self.wl.unhealthy_nodes:
            empty = self.place(assignment, simulate_empty=True)
            failed = next((name for name, p in empty.items() if p.failure), None)
            if failed is not None:
                psf = assignment.pod_set(failed)
                if not psf.reasons:
                    psf.reasons.append(empty[failed].failure)
                psf.empty_failure = empty[failed].failure
                psf.mode, psf.kind = NO_FIT, TOPOLOGY_PLACEMENT_FAILED
            else:
                for name in empty:
                    assignment.pod_set(name).mode = PREEMPT
            assignment.refresh()

    def tas_request_errors(self, assignment: FlavorAssignment) -> bool:
        """Kueue's errors building the TAS requests: the topology request of an elastic workload's
        PodSet must be unconstrained, and a PodSet that needs TAS must have exactly one TAS flavor
        among its flavors, else it cannot be admitted ("failed to assign flavors to pod set ...");
        True when some PodSet has such an error (the assignment is then NoFit)."""
        cq_tas = any(fq.name in self.state.tas_snapshots for rg in self.cq.resource_groups for fq in rg.flavors)
        failed = False
        for psf in assignment.pod_sets:
            if not psf.tas or psf.count == 0 or psf.error:
                continue
            tas_flavors = sorted({f for f in psf.flavors.values() if f in self.state.tas_snapshots})
            if elastic_error := self.elastic_topology_error(psf):
                psf.error = elastic_error
            elif not cq_tas:
                psf.error = "workload requires Topology, but there is no TAS cache information"
            elif not tas_flavors:
                psf.error = "no TAS flavor assigned"
            elif len(tas_flavors) > 1:
                psf.error = f"more than one TAS flavor assigned: {', '.join(tas_flavors)}"
            else:
                continue
            psf.mode, psf.kind = NO_FIT, ""
            failed = True
        if failed:
            assignment.refresh()
        return failed

    def considered_flavors(self, assignment: FlavorAssignment) -> str:
        """Kueue's "Flavors considered" text: every attempt that was not a plain fit, per PodSet."""
        parts = []
        for psf in assignment.pod_sets:
            attempts = [a.describe() for a in sorted(psf.attempts, key=lambda a: a.flavor)
                        if not (a.mode == FIT and a.borrow == 0)]
            if attempts:
                parts.append(f"{psf.pod_set.name}: {', '.join(attempts)}")
        return " | ".join(parts)

    def replaced_request(self, members: list[PodSet], resource: str, flavor: str) -> tuple[str | None, int]:
        """Replacing a workload slice (Kueue's TotalRequests of the slice, by PodSet index): the
        slice's flavor of `resource` where one of its PodSets at the positions of `members` has
        another flavor than `flavor` ("" for none), else None; and what those before it hold of
        the resource. (None, 0) without a replaced slice."""
        old = self.replaced
        if old is None or old.admission is None:
            return None, 0
        released = 0
        for ps in members:
            index = next(i for i, p in enumerate(self.wl.pod_sets) if p is ps)
            old_ps = old.pod_sets[index] if index < len(old.pod_sets) else None
            psa = old.admission.assignment_for(old_ps.name) if old_ps is not None else None
            original = psa.flavors.get(resource, "") if psa is not None else ""
            if psa is None or old_ps is None or original != flavor:
                return original, released
            released += self.slice_usage(psa, old_ps).get(resource, 0)
        return None, released

    def slice_usage(self, psa: PodSetAssignment, ps: PodSet) -> Mapping[str, int]:
        """What a PodSet of the replaced slice holds: its admission's resource usage, else its
        requests times its admitted count."""
        if psa.resource_usage:
            return psa.resource_usage
        count = psa.count if psa.count is not None else ps.count
        return {r: v * count for r, v in self.state.config.quota_requests(ps.spec.requests).items()}

    # ------------------------------------------------------------ TAS

    def previous_assignment(self, ps: PodSet) -> TopologyAssignment | None:
        """The PodSet's TopologyAssignment in the replaced workload slice (getPreviousTopologyAssignment)."""
        if self.replaced is None or self.replaced.admission is None:
            return None
        psa = self.replaced.admission.assignment_for(ps.name)
        return psa.topology_assignment if psa is not None else None

    @property
    def elastic_tas(self) -> bool:
        """The workload is elastic and TAS keeps its slices' placements (Kueue's
        IsElasticWorkload with ElasticJobsViaWorkloadSlicesWithTAS): only such a workload has a
        previous assignment, and only its topology requests are limited to unconstrained."""
        gates = self.state.gates
        return gates.ElasticJobsViaWorkloadSlicesWithTAS and gates.ElasticJobsViaWorkloadSlices \
            and self.wl.marked_elastic

    def tas_requests(self, assignment: FlavorAssignment) -> dict[str, list[TASPodSetRequest]]:
        by_flavor: dict[str, list[TASPodSetRequest]] = {}
        elastic = self.elastic_tas
        for psf in assignment.pod_sets:
            if not psf.tas or psf.count == 0:
                continue
            tas_flavors = {f for f in psf.flavors.values() if f in self.state.tas_snapshots}
            if len(tas_flavors) != 1:
                continue
            flavor = tas_flavors.pop()
            if not self.wl.has_quota_reservation and self.state.delays_topology(self.cq, flavor):
                psf.delayed = "Pending"
                continue
            by_flavor.setdefault(flavor, []).append(TASPodSetRequest(
                pod_set=psf.pod_set, count=psf.count, single_pod_requests=psf.pod_set.spec.requests,
                flavor=flavor, implied=psf.implied,
                previous_assignment=self.previous_assignment(psf.pod_set) if elastic else None,
                **psf.updates))
        return by_flavor

    def elastic_topology_error(self, psf: PodSetFlavors) -> str:
        """Kueue's error for a TAS PodSet of an elastic workload whose topology request its
        slices cannot keep: only unconstrained (or implied) requests are supported."""
        tr = psf.pod_set.topology_request
        if not self.elastic_tas or tr is None:
            return ""
        if tr.required is not None:
            return "required topology is not supported with ElasticJobsViaWorkloadSlices"
        if tr.preferred is not None:
            return "preferred topology is not supported with ElasticJobsViaWorkloadSlices"
        return ""

    def place(self, assignment: FlavorAssignment, *, simulate_empty: bool = False) -> dict[str, PodSetPlacement]:
        """TAS placements of every TAS PodSet, flavor by flavor in name order; stops at a failure."""
        gates = self.state.gates
        results: dict[str, PodSetPlacement] = {}
        # usage this workload puts on nodes shared by hostname-leaf flavors, keyed by hostname
        shared: dict[str, dict[str, int]] | None = {} if gates.TASHandleOverlappingFlavors else None
        for flavor, requests in sorted(self.tas_requests(assignment).items()):
            snap = self.state.tas_snapshots[flavor]
            assumed = shared if (shared is not None and snap.lowest_is_node) else {}
            placed = find_topology_assignments_for_flavor(
                snap, requests, gates=gates, simulate_empty=simulate_empty, assumed_usage=assumed)
            results.update(placed)
            if any(p.failure for p in placed.values()):
                break
        return results
