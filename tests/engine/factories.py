"""Builders of Kubernetes and Kueue objects as plain JSON dicts, and helpers that feed them
through the real parser into the engine.

Every test builds its cluster from these dicts, so what it exercises is the same path a
YAML file on the command line takes: `scheduler.parse` first, then the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.cluster import ClusterState
from scheduler.codec import decode_assignment
from scheduler.config import Configuration
from scheduler.engine import Engine, PassOutcome
from scheduler.features import DEFAULT_GATES, FeatureGates
from scheduler.model import Namespace
from scheduler.parse import ParsedObjects, parse_objects
from scheduler.placement import TASPodSetRequest
from scheduler.quota import available_in
from scheduler.replacement import annotate_failures
from scheduler.results import PassResult, WorkloadResult
from scheduler.simulate import simulate
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.topology_assignment import find_topology_assignment

HOSTNAME = HOSTNAME_LABEL
BLOCK = "cloud.example.com/block"
RACK = "cloud.example.com/rack"
LEVELS = (BLOCK, RACK, HOSTNAME)

V1 = "v1"
V1BETA1 = "kueue.x-k8s.io/v1beta1"
V1BETA2 = "kueue.x-k8s.io/v1beta2"

TOPOLOGY = "default"
FLAVOR = "tas-flavor"
CLUSTER_QUEUE = "cq"
LOCAL_QUEUE = "lq"
NAMESPACE = "default"

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
FILE = "cluster.yaml"


def resource_list(*, cpu: object = None, memory: object = None, pods: object = None,
                  extra: Mapping[str, object] | None = None) -> dict[str, str]:
    """A resource list with the unset (None) entries dropped; other resources go in `extra`."""
    out = {name: str(value) for name, value in (("cpu", cpu), ("memory", memory), ("pods", pods))
           if value is not None}
    out.update({k: str(v) for k, v in (extra or {}).items()})
    return out


def timestamp(offset_seconds: float = 0) -> str:
    return (NOW + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- core/v1


def taint(key: str, value: str = "", effect: str = "NoSchedule", *, time_added: float | None = None) -> dict:
    """A node taint; `time_added` is its `timeAdded`, in seconds relative to NOW."""
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    if time_added is not None:
        out["timeAdded"] = timestamp(time_added)
    return out


def toleration(key: str = "", value: str = "", *, operator: str = "Equal", effect: str = "",
               seconds: int | None = None) -> dict:
    """A toleration; `seconds` is its `tolerationSeconds`."""
    out: dict[str, Any] = {"operator": operator}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def node(
    name: str,
    *,
    block: str | None = None,
    rack: str | None = None,
    hostname: bool = True,
    labels: Mapping[str, str] | None = None,
    cpu: object = "8",
    memory: object = None,
    pods: object = "110",
    extra: Mapping[str, object] | None = None,
    taints: Sequence[dict] = (),
    unschedulable: bool = False,
    ready: str | None = "True",
    deleted: bool = False,
    ready_since: float | None = None,
) -> dict:
    """A Node; `block` / `rack` / the hostname become the topology labels. `ready_since` is
    the Ready condition's `lastTransitionTime`, in seconds relative to NOW."""
    node_labels: dict[str, str] = {}
    if block is not None:
        node_labels[BLOCK] = block
    if rack is not None:
        node_labels[RACK] = rack
    if hostname:
        node_labels[HOSTNAME] = name
    node_labels.update(labels or {})
    metadata: dict[str, Any] = {"name": name, "labels": node_labels}
    if deleted:
        metadata["deletionTimestamp"] = timestamp(-60)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": resource_list(cpu=cpu, memory=memory, pods=pods, extra=extra)}
    if ready is not None:
        condition = {"type": "Ready", "status": ready}
        if ready_since is not None:
            condition["lastTransitionTime"] = timestamp(ready_since)
        status["conditions"] = [condition]
    return {"apiVersion": V1, "kind": "Node", "metadata": metadata, "spec": spec, "status": status}


def grid(blocks: int = 2, racks: int = 2, nodes: int = 2, **node_kwargs: Any) -> list[dict]:
    """Nodes `b{i}-r{j}-n{k}`; rack values `r1`, `r2`, ... repeat in every block."""
    return [
        node(f"b{b}-r{r}-n{n}", block=f"b{b}", rack=f"r{r}", **node_kwargs)
        for b in range(1, blocks + 1)
        for r in range(1, racks + 1)
        for n in range(1, nodes + 1)
    ]


def container(name: str = "c", *, cpu: object = None, memory: object = None,
              limits: Mapping[str, object] | None = None, restart_policy: str | None = None,
              extra: Mapping[str, object] | None = None) -> dict:
    resources: dict[str, Any] = {}
    requests = resource_list(cpu=cpu, memory=memory, extra=extra)
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = {k: str(v) for k, v in limits.items()}
    out: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if restart_policy is not None:
        out["restartPolicy"] = restart_policy
    return out


def pod_spec(
    *,
    cpu: object = None,
    memory: object = None,
    extra: Mapping[str, object] | None = None,
    containers: Sequence[dict] | None = None,
    init_containers: Sequence[dict] = (),
    overhead: Mapping[str, object] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[dict] = (),
    affinity: dict | None = None,
    active_deadline_seconds: object = None,
) -> dict:
    spec: dict[str, Any] = {
        "containers": list(containers) if containers is not None
        else [container(cpu=cpu, memory=memory, extra=extra)],
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = {k: str(v) for k, v in overhead.items()}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if affinity:
        spec["affinity"] = affinity
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    return spec


def pod(
    name: str,
    *,
    node: str | None = None,
    namespace: str = NAMESPACE,
    phase: str = "Running",
    annotations: Mapping[str, str] | None = None,
    **spec_kwargs: Any,
) -> dict:
    """A Pod, bound to `node` when given (a running non-TAS pod unless annotated otherwise)."""
    spec = pod_spec(**spec_kwargs)
    if node is not None:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": V1, "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def workload_pod(
    name: str,
    workload_name: str,
    *,
    node: str | None = None,
    phase: str = "Running",
    deleting: bool = False,
    gates: Sequence[str] = (),
    node_selector: Mapping[str, str] | None = None,
    pod_set_name: str = "main",
    namespace: str = NAMESPACE,
    cpu: object = "1",
    topology_annotations: Mapping[str, str] | None = None,
) -> dict:
    """A pod of workload `workload_name` (its `kueue.x-k8s.io/workload` annotation and
    `kueue.x-k8s.io/podset` label), bound to `node` when given. It carries the PodSet's
    topology annotation (by default a required rack), as Kueue's job integrations copy it
    onto the pods, so that it does not count as non-TAS usage."""
    annotations = {"kueue.x-k8s.io/workload": workload_name,
                   **(topology_annotations or {"kueue.x-k8s.io/podset-required-topology": RACK})}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                "labels": {"kueue.x-k8s.io/podset": pod_set_name}, "annotations": annotations}
    if deleting:
        metadata["deletionTimestamp"] = timestamp(-5)
    spec = pod_spec(cpu=cpu, node_selector=node_selector)
    if node is not None:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": V1, "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def required_affinity(key: str, operator: str, values: Sequence[str] = ()) -> dict:
    expr: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expr["values"] = list(values)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}


def preferred_affinity(key: str, values: Sequence[str], weight: int = 10) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [
            {"key": key, "operator": "In", "values": list(values)}]}}]}}


# ---------------------------------------------------------------- kueue.x-k8s.io


def topology(name: str = TOPOLOGY, levels: Sequence[str] = LEVELS, *, api_version: str = V1BETA2) -> dict:
    return {"apiVersion": api_version, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def resource_flavor(
    name: str = FLAVOR,
    *,
    topology_name: str | None = TOPOLOGY,
    node_labels: Mapping[str, str] | None = None,
    tolerations: Sequence[dict] = (),
    node_taints: Sequence[dict] = (),
    api_version: str = V1BETA2,
) -> dict:
    spec: dict[str, Any] = {}
    if topology_name is not None:
        spec["topologyName"] = topology_name
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if node_taints:
        spec["nodeTaints"] = list(node_taints)
    return {"apiVersion": api_version, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str = CLUSTER_QUEUE,
    *,
    flavors: Sequence[str] = (FLAVOR,),
    quota: Mapping[str, object] | None = None,
    admission_checks: Sequence[str] = (),
    cohort: str | None = None,
    api_version: str = V1BETA2,
) -> dict:
    """One resource group covering `quota`'s resources, each flavor with the same nominal quota."""
    quota = quota or {"cpu": "1000", "memory": "4Ti"}
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": list(quota),
            "flavors": [
                {"name": f, "resources": [{"name": r, "nominalQuota": str(q)} for r, q in quota.items()]}
                for f in flavors
            ],
        }],
    }
    if admission_checks:
        spec["admissionChecks"] = list(admission_checks)
    if cohort is not None:
        spec["cohort" if api_version == V1BETA1 else "cohortName"] = cohort
    return {"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def queue_with_policy(name: str, *, cpu: int, cohort: str | None = None, reclaim: str = "Never",
                      within: str = "Never", strategy: str | None = None, borrowing_limit: int | None = None,
                      flavor: str = FLAVOR) -> dict:
    """A ClusterQueue of `cpu` CPUs on one flavor, with its preemption policies, cohort and
    queueing strategy."""
    resource: dict[str, Any] = {"name": "cpu", "nominalQuota": str(cpu)}
    if borrowing_limit is not None:
        resource["borrowingLimit"] = str(borrowing_limit)
    spec: dict[str, Any] = {
        "namespaceSelector": {}, "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": within},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [resource]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str = LOCAL_QUEUE, *, namespace: str = NAMESPACE,
                cluster_queue_name: str = CLUSTER_QUEUE) -> dict:
    return {"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}


def admission_check(name: str, controller: str = "example.com/check") -> dict:
    return {"apiVersion": V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": controller},
            "status": {"conditions": [{"type": "Active", "status": "True"}]}}


def topology_request(
    *,
    required: str | None = None,
    preferred: str | None = None,
    unconstrained: bool | None = None,
    slice_topology: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
) -> dict | None:
    out: dict[str, Any] = {}
    if required is not None:
        out["required"] = required
    if preferred is not None:
        out["preferred"] = preferred
    if unconstrained is not None:
        out["unconstrained"] = unconstrained
    if slice_topology is not None:
        out["podSetSliceRequiredTopology"] = slice_topology
    if slice_size is not None:
        out["podSetSliceSize"] = slice_size
    if group is not None:
        out["podSetGroupName"] = group
    return out or None


def pod_set(
    name: str = "main",
    *,
    count: int = 1,
    cpu: object = "1",
    memory: object = None,
    extra: Mapping[str, object] | None = None,
    min_count: int | None = None,
    required: str | None = None,
    preferred: str | None = None,
    unconstrained: bool | None = None,
    slice_topology: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
    raw_topology_request: dict | None = None,
    **spec_kwargs: Any,
) -> dict:
    """A PodSet; the topology keywords build its `topologyRequest`."""
    out: dict[str, Any] = {
        "name": name,
        "count": count,
        "template": {"spec": pod_spec(cpu=cpu, memory=memory, extra=extra, **spec_kwargs)},
    }
    if min_count is not None:
        out["minCount"] = min_count
    request = raw_topology_request or topology_request(
        required=required, preferred=preferred, unconstrained=unconstrained,
        slice_topology=slice_topology, slice_size=slice_size, group=group)
    if request is not None:
        out["topologyRequest"] = request
    return out


def workload(
    name: str,
    *,
    pod_sets: Sequence[dict] | None = None,
    queue: str | None = LOCAL_QUEUE,
    namespace: str = NAMESPACE,
    priority: int | None = None,
    created: float | None = 0,
    api_version: str = V1BETA2,
    annotations: Mapping[str, str] | None = None,
    owners: Sequence[dict] = (),
    **pod_set_kwargs: Any,
) -> dict:
    """A pending Workload; without `pod_sets`, one PodSet `main` built from the keywords
    (`count`, `cpu`, `required`, `preferred`, `unconstrained`, ...). `owners` are its
    `metadata.ownerReferences` (see `owner_reference`)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if created is not None:
        metadata["creationTimestamp"] = timestamp(created)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owners:
        metadata["ownerReferences"] = list(owners)
    spec: dict[str, Any] = {"podSets": list(pod_sets) if pod_sets is not None else [pod_set(**pod_set_kwargs)]}
    if queue is not None:
        spec["queueName"] = queue
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": api_version, "kind": "Workload", "metadata": metadata, "spec": spec}


def owner_reference(kind: str, name: str, *, api_version: str = V1, controller: bool = True) -> dict:
    """An entry of `metadata.ownerReferences`: `owner_reference("Pod", "p0")`,
    `owner_reference("Job", "train", api_version="batch/v1")`."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": controller}


def domains_json(levels: Sequence[str], domains: Iterable[tuple[Sequence[str] | str, int]]) -> dict:
    """A TopologyAssignment in the v1beta1 `domains` form (accepted whatever the apiVersion)."""
    return {"levels": list(levels),
            "domains": [{"values": [v] if isinstance(v, str) else list(v), "count": c} for v, c in domains]}


def admitted(
    wl: dict,
    *,
    assignments: Mapping[str, dict | None],
    cluster_queue_name: str = CLUSTER_QUEUE,
    flavor: str = FLAVOR,
    resources: Sequence[str] = ("cpu",),
    finished: bool = False,
    unhealthy_nodes: Sequence[str] = (),
) -> dict:
    """`wl` holding a quota reservation and admitted, each PodSet with the given
    TopologyAssignment JSON (see `domains_json`); `unhealthy_nodes` go in
    `status.unhealthyNodes`."""
    psas = []
    for ps in wl["spec"]["podSets"]:
        psa: dict[str, Any] = {"name": ps["name"], "flavors": {r: flavor for r in resources},
                               "count": ps.get("count", 1)}
        ta = assignments.get(ps["name"])
        if ta is not None:
            psa["topologyAssignment"] = ta
        psas.append(psa)
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted"},
    ]
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"})
    status: dict[str, Any] = {"admission": {"clusterQueue": cluster_queue_name, "podSetAssignments": psas},
                              "conditions": conditions}
    if unhealthy_nodes:
        status["unhealthyNodes"] = [{"name": n} for n in unhealthy_nodes]
    return {**wl, "status": status}


def tas_setup(*, levels: Sequence[str] = LEVELS, quota: Mapping[str, object] | None = None,
              flavor_kwargs: Mapping[str, Any] | None = None, cq_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Topology, TAS ResourceFlavor, ClusterQueue and LocalQueue: everything but nodes and workloads."""
    return [
        topology(levels=levels),
        resource_flavor(**(flavor_kwargs or {})),
        cluster_queue(quota=quota, **(cq_kwargs or {})),
        local_queue(),
    ]


# ---------------------------------------------------------------- through the parser into the engine


def gates(**values: bool) -> FeatureGates:
    return DEFAULT_GATES.with_overrides(**values) if values else DEFAULT_GATES


def parse(objects: Iterable[dict], *, file: str = FILE, warnings: list[str] | None = None) -> ParsedObjects:
    sink = warnings if warnings is not None else []
    return parse_objects([(file, obj) for obj in objects], decode_assignment=decode_assignment, warn=sink.append)


def parse_one(obj: dict) -> object:
    """The engine object of one Kubernetes object (a change to feed a long-lived engine)."""
    parsed = parse([obj])
    for kind in ("nodes", "pods", "topologies", "flavors", "cluster_queues", "local_queues", "cohorts",
                 "admission_checks", "priority_classes", "workloads"):
        items = getattr(parsed, kind)
        if items:
            return items[0]
    for name, labels in parsed.namespaces.items():
        return Namespace(name, labels)
    raise AssertionError(f"{obj.get('kind')} is not read by the engine")


def cluster_state(objects: Iterable[dict], *, feature_gates: FeatureGates = DEFAULT_GATES) -> ClusterState:
    warnings: list[str] = []
    return ClusterState(parse(objects, warnings=warnings), feature_gates, warnings.append)


def flavor_snapshot(objects: Iterable[dict], *, flavor: str = FLAVOR,
                    feature_gates: FeatureGates = DEFAULT_GATES) -> TASFlavorSnapshot:
    """The TAS snapshot of `flavor`: nodes, non-TAS pods and admitted TAS workloads accounted."""
    return cluster_state(objects, feature_gates=feature_gates).tas_snapshots[flavor]


def tas_requests(wl: dict, *, flavor: str = FLAVOR, implied: bool = False) -> list[TASPodSetRequest]:
    """Placement requests for every PodSet of a Workload dict, parsed the real way."""
    (parsed,) = parse([wl]).workloads
    return [TASPodSetRequest(pod_set=ps, count=ps.count, single_pod_requests=ps.spec.requests,
                             flavor=flavor, implied=implied) for ps in parsed.pod_sets]


def place(objects: Iterable[dict], wl: dict, *, feature_gates: FeatureGates = DEFAULT_GATES,
          implied: bool = False) -> tuple[TopologyAssignment | None, str]:
    """The assignment (or failure reason) of a one-PodSet workload on the cluster's TAS flavor."""
    snap = flavor_snapshot(objects, feature_gates=feature_gates)
    (request,) = tas_requests(wl, implied=implied)
    assignments, reason = find_topology_assignment(snap, request, None, gates=feature_gates)
    return assignments.get(request.name), reason


def domains(assignment: TopologyAssignment | None) -> list[tuple[str, int]]:
    """An assignment's domains as `("b1/r1", 3)` pairs, in the assignment's order."""
    assert assignment is not None
    return [("/".join(d.values), d.count) for d in assignment.domains]


def run(objects: Iterable[dict], *, feature_gates: FeatureGates = DEFAULT_GATES,
        warnings: list[str] | None = None, cycles: int | None = None,
        config: Configuration | None = None) -> PassResult:
    """One pass; by default with as many scheduling cycles as it takes (as the service runs)."""
    sink = warnings if warnings is not None else []
    return simulate([(FILE, obj) for obj in objects], gates=feature_gates, now=NOW, warn=sink.append,
                    cycles=cycles, config=config)


def run_passes(objects: Iterable[dict], *, feature_gates: FeatureGates = DEFAULT_GATES,
               warnings: list[str] | None = None, cycles: int | None = None, passes: int = 2,
               step: timedelta = timedelta(seconds=1), config: Configuration | None = None) -> PassResult:
    """`passes` passes of one long-lived engine, `step` apart from NOW (a node found failed in
    one pass is replaced in the next, once the second-pass backoff of 1 s has run out). The
    result holds every pass's events, decisions and pods, and each workload's latest result."""
    sink = warnings if warnings is not None else []
    engine = Engine.from_parsed(parse(objects, warnings=sink), feature_gates, sink.append, config=config)
    merged = PassResult()
    decided: dict[str, WorkloadResult] = {}
    failures: dict[str, tuple[str, str]] = {}
    for n in range(passes):
        outcome = engine.run_pass(NOW + n * step, cycles=cycles)
        merged.events += outcome.result.events
        merged.decisions += outcome.result.decisions
        merged.pods += outcome.result.pods
        merged.terminated_pods += outcome.result.terminated_pods
        decided.update(outcome.decided)
        failures = outcome.replacement_failures or failures
    final = PassOutcome(merged, decided=decided)
    merged.workloads = engine.results_for(engine.state.workload_map, final)
    annotate_failures(merged.workloads, failures)
    return merged


def result_of(result: PassResult, name: str, namespace: str = NAMESPACE) -> WorkloadResult:
    for w in result.workloads:
        if w.workload.name == name and w.workload.namespace == namespace:
            return w
    raise AssertionError(f"workload {namespace}/{name} missing from the result")


def overcommitted_view(state: ClusterState) -> dict:
    """Where more is held than there is: a TAS leaf's free room less its TAS usage, per
    resource, and a ClusterQueue's available quota (its cohorts' limits included), where
    either is below zero."""
    out: dict[tuple, int] = {}
    for name, snap in state.tas_snapshots.items():
        if not snap.tree.levels:
            continue
        remaining = snap.free - snap.tas_usage
        for leaf, col in zip(*(remaining < 0).nonzero(), strict=True):
            out[("tas", name, snap.tree.leaves.ids[leaf], snap.resources.names[col])] = int(remaining[leaf, col])
    for name, quota_node in state.quota.queues.items():
        for fr in set(quota_node.usage) | set(quota_node.subtree):
            available = available_in(quota_node, fr)
            if available < 0:
                out[("quota", name, fr.flavor, fr.resource)] = available
    return out


def assert_no_new_overcommit(before: dict, after: dict) -> None:
    """A pass never takes more than there is: no node's room and no quota goes below zero by
    what it admits or places (the objects may come over-committed; a pass adds nothing to it).
    `before` and `after`: `overcommitted_view` around the pass."""
    for where, short in after.items():
        assert where in before and short >= before[where], (where, before.get(where), short)
