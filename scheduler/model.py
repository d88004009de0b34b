"""The object model: the parts of Kubernetes and Kueue objects that TAS reads.

Instances are built by `scheduler.parse` from Kubernetes/Kueue JSON (v1beta1 and v1beta2
shapes alike) and are treated as immutable by the engine; the scheduling pass records
its decisions separately.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment

Requests = Mapping[str, int]
EMPTY: Mapping[str, str] = MappingProxyType({})

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
# set on a new elastic workload slice: "namespace/name" of the admitted slice it replaces
WORKLOAD_SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # "true" on the Workload of an elastic job
NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
WORKLOAD_ADMITTED = "The workload is admitted"  # the Admitted=True message of Kueue's SyncAdmittedCondition


# ---------------------------------------------------------------- scheduling primitives


# ClusterQueue and LocalQueue spec.stopPolicy
STOP_NONE = "None"
STOP_HOLD = "Hold"
STOP_HOLD_AND_DRAIN = "HoldAndDrain"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""
    time_added: datetime | None = None

    def __str__(self) -> str:  # Kubernetes' Taint.ToString
        if not self.value:
            return f"{self.key}:{self.effect}"
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists | Gt | Lt
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        if self.operator in ("Gt", "Lt"):
            try:
                have, want = int(taint.value), int(self.value)
            except ValueError:
                return False
            return have > want if self.operator == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement (matchExpressions / matchFields item)."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        # An empty term matches no node (Kubernetes' nodeaffinity semantics).
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(r.matches(labels) for r in self.match_expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(r.matches(fields) for r in self.match_fields)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    required: tuple[NodeSelectorTerm, ...] | None = None  # None: no required affinity
    preferred: tuple[PreferredTerm, ...] = ()

    def required_matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.required is None:
            return True
        return any(term.matches(labels, node_name) for term in self.required)

    def preferred_score(self, labels: Mapping[str, str], node_name: str) -> int:
        return sum(t.weight for t in self.preferred if t.weight and t.preference.matches(labels, node_name))


# ---------------------------------------------------------------- Kubernetes objects


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Requests
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: str | None = None  # status of the Ready condition: "True" | "False" | "Unknown" | None
    ready_since: datetime | None = None  # lastTransitionTime of the Ready condition
    deleted: bool = False  # has a deletionTimestamp

    @property
    def is_ready(self) -> bool:
        return self.ready == "True"

    @property
    def schedulable_and_ready(self) -> bool:
        return self.is_ready and not self.unschedulable and not self.deleted


@dataclass(slots=True)
class PodSpecInfo:
    """What placement reads from a pod template: requests and node constraints."""

    requests: Requests
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    affinity: NodeAffinity | None = None


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    spec: PodSpecInfo = field(default_factory=lambda: PodSpecInfo(requests={}))
    scheduling_gates: tuple[str, ...] = ()
    phase: str = ""
    deleting: bool = False
    owner_references: tuple[OwnerReference, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def gated_by_topology(self) -> bool:
        return TOPOLOGY_GATE in self.scheduling_gates


# ---------------------------------------------------------------- Kueue objects


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]

    @property
    def lowest_is_hostname(self) -> bool:
        return bool(self.levels) and self.levels[-1] == HOSTNAME_LABEL


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None

    @property
    def is_tas(self) -> bool:
        return self.topology_name is not None


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]

    def quota(self, resource: str) -> ResourceQuota | None:
        for q in self.resources:
            if q.name == resource:
                return q
        return None


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class AdmissionCheckStrategyRule:
    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: Mapping | None = None
    preemption: Mapping = field(default_factory=dict)
    flavor_fungibility: Mapping = field(default_factory=dict)
    admission_checks: tuple[AdmissionCheckStrategyRule, ...] = ()
    stop_policy: str = STOP_NONE  # spec.stopPolicy: None, Hold or HoldAndDrain
    fair_weight: float = 1.0  # spec.fairSharing.weight; 0 is an infinite share when borrowing
    admission_mode: str = ""  # spec.admissionScope.admissionMode
    # has a deletionTimestamp: Kueue's finalizer keeps it while workloads hold quota in it, and
    # until they are gone it admits nothing (Kueue's cache status "terminating")
    terminating: bool = False

    def flavor_names(self) -> list[str]:
        return [fq.name for rg in self.resource_groups for fq in rg.flavors]


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = STOP_NONE  # spec.stopPolicy: None, Hold or HoldAndDrain
    fair_weight: float = 1.0  # spec.fairSharing.weight: admission fair sharing divides its usage by it
    # status.fairSharing.admissionFairSharingStatus as last written: the decayed usage per
    # resource (as Kubernetes amounts: cores, bytes, units) and when it was last sampled
    consumed: tuple[tuple[str, float], ...] = ()
    consumed_at: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def same_spec(self, other: LocalQueue) -> bool:
        """Whether only the admission fair sharing status tells the two apart."""
        return (self.namespace, self.name, self.cluster_queue, self.stop_policy, self.fair_weight) == (
            other.namespace, other.name, other.cluster_queue, other.stop_policy, other.fair_weight)


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0  # spec.fairSharing.weight


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    name: str
    controller_name: str = ""
    active: bool = True
    # the object has an Active condition: Kueue holds one without it inactive (its controller has
    # not marked it yet); a hand-written one is taken as active, with a warning (simulate)
    active_stated: bool = True

    @property
    def is_provisioning_request(self) -> bool:
        return self.controller_name == "kueue.x-k8s.io/provisioning-request"

    @property
    def is_multikueue(self) -> bool:
        return self.controller_name == "kueue.x-k8s.io/multikueue"


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Namespace:
    """A v1 Namespace, for what a ClusterQueue's namespaceSelector is matched against."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SliceConstraint:
    topology: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Kueue's PodSetTopologyRequest."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    slice_required_topology: str | None = None
    slice_size: int | None = None
    slice_constraints: tuple[SliceConstraint, ...] = ()

    @property
    def explicit(self) -> bool:
        """Kueue's IsExplicitlyRequestingTAS for one PodSet: `unconstrained` set at all counts,
        false included (a request that then names no level)."""
        return (
            self.required is not None
            or self.preferred is not None
            or self.unconstrained is not None
            or self.slice_required_topology is not None
            or bool(self.slice_constraints)
        )

    def slice_layers(self) -> tuple[SliceConstraint, ...]:
        """The slice constraints, outermost first, whichever form the request used
        (Kueue's PodSetSliceRequiredTopologyConstraints); a missing size reads as 0."""
        if self.slice_constraints:
            return self.slice_constraints
        if self.slice_required_topology is None:
            return ()
        return (SliceConstraint(self.slice_required_topology, self.slice_size or 0),)

    @property
    def slice_only(self) -> bool:
        return self.required is None and self.preferred is None and bool(self.slice_layers())

    @property
    def slices_requested(self) -> bool:
        return bool(self.slice_layers())


# the operators of a metav1.LabelSelector's matchExpressions (a node selector has Gt and Lt too)
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_text(selector: Mapping | None) -> str:
    """A label selector as kubectl writes it (`team=eng,tier in (a,b),!legacy`); "" for the
    empty selector (every object) and for a nil one (none): the caller tells them apart."""
    if not selector:
        return ""
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), ",".join(req.get("values") or ())
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": f"{key}",
                      "DoesNotExist": f"!{key}"}.get(op, f"{key} {op} ({values})"))
    return ",".join(parts)


def selector_matches(selector: Mapping | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels): a nil selector matches nothing, an
    empty one everything; an operator a label selector does not have matches nothing."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or []:
        op = req.get("operator")
        if op not in LABEL_SELECTOR_OPERATORS or \
                not Requirement(req.get("key"), op, tuple(req.get("values") or ())).matches(labels):
            return False
    return True


@dataclass(frozen=True, slots=True)
class SliceSplit:
    """How a PodSet's pods are cut into slices of its outermost slice layer: `whole` slices of
    `size` pods and, with TASPartialSlices, one partial slice of `partial` pods (a single
    layer only), each held by one domain at level `topology`."""

    topology: str
    size: int
    whole: int
    partial: int
    layers: int


def slice_split(request: TopologyRequest | None, count: int) -> SliceSplit | None:
    """The PodSet's slices, or None when it asks for none (or for a slice size of 0)."""
    layers = request.slice_layers() if request is not None else ()
    if not layers or layers[0].size <= 0:
        return None
    outer = layers[0]
    whole, partial = divmod(count, outer.size)
    return SliceSplit(outer.topology, outer.size, whole, partial if len(layers) == 1 else 0, len(layers))


def leader_of_pair(first_count: int, second_count: int) -> int:
    """In a PodSet group of two (LeaderWorkerSet's leader and workers), the index of the
    leader: the second, unless it has more pods than the first."""
    return 0 if second_count > first_count else 1


@dataclass(slots=True)
class PodSet:
    name: str
    count: int
    spec: PodSpecInfo
    min_count: int | None = None
    topology_request: TopologyRequest | None = None
    # read for runtime estimates only (scheduler.runtimes), never for placement: the pod
    # template's spec.activeDeadlineSeconds, and its kueue.x-k8s.io/expected-runtime annotation
    # as written (checked where it is used, so that a bad one never stops scheduling)
    active_deadline_seconds: int | None = None
    expected_runtime: str | None = None
    # Kueue's workload.ValidateResources: per (init)container or the pod-level resources, the
    # resources whose request exceeds the limit, as (path under template.spec, names)
    limit_violations: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def explicit_tas(self) -> bool:
        return self.topology_request is not None and self.topology_request.explicit


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    flavors: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None
    resource_usage: Requests = field(default_factory=dict)
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: str | None = None  # "Pending" | "Ready"


@dataclass(slots=True)
class Admission:
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment]

    def assignment_for(self, pod_set: str) -> PodSetAssignment | None:
        for psa in self.pod_set_assignments:
            if psa.name == pod_set:
                return psa
        return None


@dataclass(slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class PodSetUpdate:
    """What an admission check asks to add to a PodSet's pods (status.admissionChecks[].
    podSetUpdates[]): placement merges its node selector and tolerations into the PodSet's."""

    name: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(slots=True)
class AdmissionCheckState:
    name: str
    state: str  # Pending | Ready | Retry | Rejected
    message: str = ""
    pod_set_updates: tuple[PodSetUpdate, ...] = ()
    retry_count: int | None = None  # how many times the check went to Retry (counted on each eviction)
    # KEP-3258: the check's controller asks for the workload to be tried again no sooner than
    # this many seconds after the check's lastTransitionTime (read in Retry only)
    requeue_after_seconds: int | None = None
    last_transition_time: datetime | None = None


@dataclass(slots=True)
class Workload:
    namespace: str
    name: str
    pod_sets: list[PodSet]
    queue_name: str = ""
    priority: int | None = None
    priority_class_name: str | None = None
    uid: str = ""
    creation_timestamp: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    active: bool = True
    admission: Admission | None = None
    conditions: list[Condition] = field(default_factory=list)
    admission_checks: list[AdmissionCheckState] = field(default_factory=list)
    unhealthy_nodes: list[str] = field(default_factory=list)
    source_api_version: str = "kueue.x-k8s.io/v1beta2"
    # status.requeueState: evictions for a PodsReady timeout so far, and when it may queue again
    requeue_count: int = 0
    requeue_at: datetime | None = None
    # status.reclaimablePods: per PodSet, pods that completed and need not run again (their
    # quota goes back while the rest run; a PodSet whose pods all completed frees its domains)
    reclaimable_pods: Mapping[str, int] = field(default_factory=dict)
    # spec.preemptionGates names, and status.preemptionGates positions by name (Open | Closed)
    preemption_gates: tuple[str, ...] = ()
    preemption_gate_positions: Mapping[str, str] = field(default_factory=dict)
    # metadata.generation: a change of the spec makes a waiting preemptor a workload Kueue
    # has not evaluated (its PrioritizePreemptorWorkloads looks only at the generation it saw)
    generation: int = 0
    # namespace/name, made once: read for every look-up of the workload in the engine's maps
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def local_queue_key(self) -> str:
        """namespace/name of the LocalQueue it is submitted to."""
        return f"{self.namespace}/{self.queue_name}"

    def condition(self, type_: str) -> Condition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    def condition_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.status == "True"

    @property
    def has_quota_reservation(self) -> bool:
        # Kueue reads the QuotaReserved condition; an admission written without any
        # condition (hand-made objects) is taken at its word.
        if self.admission is None:
            return False
        cond = self.condition("QuotaReserved")
        return cond is None or cond.status == "True"

    @property
    def is_admitted(self) -> bool:
        return self.admission is not None and self.condition_true("Admitted")

    @property
    def is_finished(self) -> bool:
        return self.condition_true("Finished")

    def no_reservation_condition(self, at: datetime | None) -> Condition:
        """Kueue's Admitted condition of a workload that holds no quota reservation
        (SyncAdmittedCondition): its listed admission checks say which of the two reasons."""
        if any(ac.state != "Ready" for ac in self.admission_checks):
            return Condition("Admitted", "False", "NoReservationUnsatisfiedChecks",
                             "The workload has no reservation and not all checks ready", at)
        return Condition("Admitted", "False", "NoReservation", "The workload has no reservation", at)

    @property
    def replacement_for(self) -> str | None:
        """Key of the workload slice this one replaces (Kueue's workloadslicing.ReplacementForKey)."""
        return self.annotations.get(WORKLOAD_SLICE_REPLACEMENT_FOR) or None

    @property
    def marked_elastic(self) -> bool:
        """The Workload of an elastic job (Kueue's workloadslicing.Enabled, less its feature gate)."""
        return self.annotations.get(ELASTIC_JOB) == "true"

    def pod_set(self, name: str) -> PodSet | None:
        for ps in self.pod_sets:
            if ps.name == name:
                return ps
        return None

    @property
    def has_closed_preemption_gate(self) -> bool:
        """Kueue's workload.HasClosedPreemptionGate: a gate listed in the spec and not opened in the
        status (a gate only in the spec is closed)."""
        return any(self.preemption_gate_positions.get(g, "Closed") == "Closed" for g in self.preemption_gates)
