"""Choosing a ResourceFlavor for every PodSet of a workload, then its TAS placement.

For each PodSet and each resource group covering its requests, flavors are tried in the
ClusterQueue's order; the first whose constraints the PodSet meets and whose quota has
room is taken. PodSets that request TAS (explicitly, or implied by a TAS-only
ClusterQueue) are then placed on their TAS flavor's snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.cluster import ClusterState, FlavorResource
from scheduler.model import ClusterQueue, PodSet, ResourceFlavor, ResourceGroup, Workload
from scheduler.placement import PodSetPlacement, TASPodSetRequest, untolerated_taint
from scheduler.quantity import PODS, format_value
from scheduler.topology_assignment import find_topology_assignments_for_flavor, has_level


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


@dataclass(slots=True)
class FlavorAssignment:
    pod_sets: list[PodSetFlavors]
    failure: str = ""
    failed_pod_set: str = ""
    kind: str = ""  # why it failed: "NoMatchingFlavor" | "QuotaExceeded" | "TopologyPlacementFailed"

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

    def quota_shortfall(self, flavor: str, resource: str, need: int, pending: Mapping[FlavorResource, int]) -> str:
        """Why `need` more of `resource` does not fit the flavor's nominal quota ("" when it does)."""
        fq = next((f for rg in self.cq.resource_groups for f in rg.flavors if f.name == flavor), None)
        quota = fq.quota(resource) if fq else None
        nominal = quota.nominal if quota else 0
        fr = FlavorResource(flavor, resource)
        already = pending.get(fr, 0)
        if already + need > nominal:
            return (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets "
                    f"requests ({format_value(resource, already)}) + current podset request "
                    f"({format_value(resource, need)}) > maximum capacity ({format_value(resource, nominal)})")
        available = nominal - self._used(fr) - already
        if need > available:
            return (f"insufficient unused quota for {resource} in flavor {flavor}, "
                    f"{format_value(resource, need - max(available, 0))} more needed")
        return ""

    def _used(self, fr: FlavorResource) -> int:
        return self.state.quota_usage[self.cq.name].get(fr, 0)

    # ------------------------------------------------------------ assignment

    def assign(self) -> FlavorAssignment:
        result: list[PodSetFlavors] = []
        pending: dict[FlavorResource, int] = {}
        for ps in self.wl.pod_sets:
            psf = PodSetFlavors(ps, ps.count, tas=self.tas_requested(ps), implied=self.tas_implied(ps))
            needs = pod_set_needs(ps, ps.count)
            reason, kind = self._assign_pod_set(psf, needs, pending)
            if reason:
                return FlavorAssignment(result, f"couldn't assign flavors to pod set {ps.name}: {reason}", ps.name,
                                        kind)
            result.append(psf)
        return FlavorAssignment(result)

    def _assign_pod_set(
        self, psf: PodSetFlavors, needs: dict[str, int], pending: dict[FlavorResource, int]
    ) -> tuple[str, str]:
        groups: list[tuple[ResourceGroup, list[str]]] = []
        for resource in needs:
            group = next((rg for rg in self.cq.resource_groups if resource in rg.covered_resources), None)
            if group is None:
                if resource == PODS:
                    continue
                return f"resource {resource} unavailable in ClusterQueue", "NoMatchingFlavor"
            for g, resources in groups:
                if g is group:
                    resources.append(resource)
                    break
            else:
                groups.append((group, [resource]))
        for group, resources in groups:
            reasons: list[str] = []
            kind = "NoMatchingFlavor"
            for fq in group.flavors:
                flavor = self.state.flavors.get(fq.name)
                if flavor is None:
                    reasons.append(f"flavor {fq.name} not found")
                    continue
                mismatch = self.flavor_mismatch(psf.pod_set, flavor, group)
                if mismatch:
                    reasons.append(mismatch)
                    continue
                shortfalls = [s for r in resources if (s := self.quota_shortfall(fq.name, r, needs[r], pending))]
                if shortfalls:
                    reasons.extend(shortfalls)
                    kind = "QuotaExceeded"
                    continue
                for r in resources:
                    psf.flavors[r] = fq.name
                    psf.usage[r] = needs[r]
                    fr = FlavorResource(fq.name, r)
                    pending[fr] = pending.get(fr, 0) + needs[r]
                break
            else:
                return ", ".join(reasons) or "no flavors in the resource group", kind
        return "", ""

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
