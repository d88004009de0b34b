"""Choosing a ResourceFlavor for every PodSet of a workload, then its TAS placement.

For each PodSet and each resource group covering its requests, flavors are tried in the
ClusterQueue's order; the first whose constraints the PodSet meets and whose quota has
room is taken. PodSets that request TAS (explicitly, or implied by a TAS-only
ClusterQueue) are then placed on their TAS flavor's snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.cluster import ClusterState
from scheduler.model import ClusterQueue, PodSet, ResourceFlavor, ResourceGroup, Workload
from scheduler.placement import PodSetPlacement, TASPodSetRequest, untolerated_taint
from scheduler.quantity import PODS, format_value
from scheduler.quota import FlavorResource
from scheduler.topology_assignment import find_topology_assignments_for_flavor, has_level

FIT, PREEMPT, NO_FIT = "Fit", "Preempt", "NoFit"
MODE_ORDER = [NO_FIT, PREEMPT, FIT]  # worse to better
# why a workload could not get flavors (UnadmittedWorkloadsObservability's reasons)
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
WAITING_FOR_QUOTA = "WaitingForQuota"
TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"


@dataclass(slots=True)
class FlavorAttempt:
    """One flavor tried for a PodSet's resource group, and how it went."""

    flavor: str
    mode: str
    borrow: int = 0
    reasons: list[str] = field(default_factory=list)

    def describe(self) -> str:
        text = self.mode
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


@dataclass(slots=True)
class FlavorAssignment:
    pod_sets: list[PodSetFlavors]
    failure: str = ""
    failed_pod_set: str = ""
    kind: str = ""  # why it failed: one of the reasons above

    @property
    def ok(self) -> bool:
        return not self.failure


def flavor_matches_node_constraints(ps: PodSet, flavor: ResourceFlavor, allowed_keys: set[str]) -> bool:
    """The PodSet's nodeSelector and required node affinity, restricted to the label keys flavors
    define, against the flavor's nodeLabels (as kube-scheduler's NodeAffinity filter would)."""
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


def pod_set_needs(ps: PodSet, count: int) -> dict[str, int]:
    """Total requests of `count` pods of the PodSet, with Kueue's implicit `pods` resource."""
    needs = {r: v * count for r, v in ps.spec.requests.items()}
    needs[PODS] = count
    return needs


class FlavorAssigner:
    def __init__(self, state: ClusterState, wl: Workload, cq: ClusterQueue) -> None:
        self.state = state
        self.wl = wl
        self.cq = cq
        self.tas_only = state.is_tas_only(cq)

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
            return f"untolerated taint {taint} in flavor {flavor.name}"
        if not flavor_matches_node_constraints(ps, flavor, self.group_label_keys(group)):
            return f"flavor {flavor.name} doesn't match node affinity"
        return None

    def group_label_keys(self, group: ResourceGroup) -> set[str]:
        """The node label keys of every flavor in the group: the only keys a flavor can be judged by."""
        keys: set[str] = set()
        for fq in group.flavors:
            flavor = self.state.flavors.get(fq.name)
            if flavor is not None:
                keys.update(flavor.node_labels)
        return keys

    # ------------------------------------------------------------ quota

    def quota_mode(self, flavor: str, resource: str, need: int, pending: Mapping[FlavorResource, int]
                   ) -> tuple[str, int, str]:
        """(Fit | Preempt | NoFit, borrowing, reason) for `need` more of a resource on a flavor,
        on top of what earlier PodSets of the workload take (Kueue's fitsResourceQuota)."""
        tree = self.state.quota
        fr = FlavorResource(flavor, resource)
        already = pending.get(fr, 0)
        value = already + need
        maximum = tree.potential_available(self.cq.name, fr)
        if value > maximum:
            return NO_FIT, 0, (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                f"({format_value(resource, already)}) + current podset request ({format_value(resource, need)}) "
                f"> maximum capacity ({format_value(resource, maximum)})")
        borrow = 1 if tree.borrowing_with(self.cq.name, fr, value) else 0
        available = tree.available(self.cq.name, fr)
        if value <= available:
            return FIT, borrow, ""
        return PREEMPT, borrow, (f"insufficient unused quota for {resource} in flavor {flavor}, "
                                 f"{format_value(resource, value - available)} more needed")

    # ------------------------------------------------------------ assignment

    def assign(self) -> FlavorAssignment:
        result: list[PodSetFlavors] = []
        pending: dict[FlavorResource, int] = {}
        for ps in self.wl.pod_sets:
            psf = PodSetFlavors(ps, ps.count, tas=self.tas_requested(ps), implied=self.tas_implied(ps))
            needs = pod_set_needs(ps, ps.count)
            reason, kind = self._assign_pod_set(psf, needs, pending)
            if reason:
                return FlavorAssignment([*result, psf], f"couldn't assign flavors to pod set {ps.name}: {reason}",
                                        ps.name, kind)
            result.append(psf)
        return FlavorAssignment(result)

    def _resource_groups(self, needs: dict[str, int]) -> tuple[list[tuple[ResourceGroup, list[str]]], str]:
        groups: list[tuple[ResourceGroup, list[str]]] = []
        for resource, value in needs.items():
            group = next((rg for rg in self.cq.resource_groups if resource in rg.covered_resources), None)
            if group is None:
                if resource == PODS or value == 0:
                    continue  # nothing to account: Kueue ignores it
                return [], f"resource {resource} unavailable in ClusterQueue"
            for g, resources in groups:
                if g is group:
                    resources.append(resource)
                    break
            else:
                groups.append((group, [resource]))
        return groups, ""

    def _assign_pod_set(
        self, psf: PodSetFlavors, needs: dict[str, int], pending: dict[FlavorResource, int]
    ) -> tuple[str, str]:
        groups, missing = self._resource_groups(needs)
        if missing:
            return missing, NO_MATCHING_FLAVOR
        fungibility = self.cq.flavor_fungibility
        stop_when_borrowing = fungibility.get("whenCanBorrow", "MayStopSearch") != "TryNextFlavor"
        stop_when_preempting = fungibility.get("whenCanPreempt", "TryNextFlavor") == "MayStopSearch"
        for group, resources in groups:
            reasons: list[str] = []
            best: tuple[str, int, str] | None = None  # (mode, borrow, flavor)
            quota_no_fit = False
            for fq in group.flavors:
                flavor = self.state.flavors.get(fq.name)
                if flavor is None:
                    reasons.append(f"flavor {fq.name} not found")
                    psf.attempts.append(FlavorAttempt(fq.name, NO_FIT, reasons=[f"flavor {fq.name} not found"]))
                    continue
                mismatch = self.flavor_mismatch(psf.pod_set, flavor, group)
                if mismatch:
                    reasons.append(mismatch)
                    psf.attempts.append(FlavorAttempt(fq.name, NO_FIT, reasons=[mismatch]))
                    continue
                mode, borrow, flavor_reasons = FIT, 0, []
                for r in resources:
                    m, b, why = self.quota_mode(fq.name, r, needs[r], pending)
                    mode, borrow = min(mode, m, key=MODE_ORDER.index), max(borrow, b)
                    if why:
                        flavor_reasons.append(why)
                quota_no_fit = quota_no_fit or mode == NO_FIT
                reasons.extend(flavor_reasons)
                psf.attempts.append(FlavorAttempt(fq.name, mode, borrow, sorted(flavor_reasons)))
                if mode == NO_FIT:
                    continue
                if best is None or MODE_ORDER.index(mode) > MODE_ORDER.index(best[0]) or (
                        mode == best[0] and borrow < best[1]):
                    best = (mode, borrow, fq.name)
                if mode == FIT and (borrow == 0 or stop_when_borrowing):
                    break
                if mode == PREEMPT and stop_when_preempting:
                    break
            if best is None or best[0] != FIT:
                # no preemption: a flavor that only fits by preempting leaves the workload waiting
                kind = WAITING_FOR_QUOTA if best is not None else (
                    EXCEEDS_MAX_QUOTA if quota_no_fit else NO_MATCHING_FLAVOR)
                return ", ".join(reasons) or "no flavors in the resource group", kind
            for r in resources:
                psf.flavors[r] = best[2]
                psf.usage[r] = needs[r]
                fr = FlavorResource(best[2], r)
                pending[fr] = pending.get(fr, 0) + needs[r]
            psf.borrow = max(psf.borrow, best[1])
        return "", ""

    def considered_flavors(self, assignment: FlavorAssignment) -> str:
        """Kueue's "Flavors considered" text: every attempt that was not a plain fit, per PodSet."""
        parts = []
        for psf in assignment.pod_sets:
            attempts = [a.describe() for a in sorted(psf.attempts, key=lambda a: a.flavor)
                        if not (a.mode == FIT and a.borrow == 0)]
            if attempts:
                parts.append(f"{psf.pod_set.name}: {', '.join(attempts)}")
        return " | ".join(parts)

    # ------------------------------------------------------------ TAS

    def tas_requests(self, assignment: FlavorAssignment) -> dict[str, list[TASPodSetRequest]]:
        by_flavor: dict[str, list[TASPodSetRequest]] = {}
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
                flavor=flavor, implied=psf.implied))
        return by_flavor

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
