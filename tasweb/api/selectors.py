"""Reads behind the API: queries on the mirror and the stored decisions, and answers the
engine computes from the cached view of the mirror (capacity trees, quota usage, why a
workload waits). Views call these and serialize what they return."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import Count, F, Q, QuerySet

from scheduler.admission_fair_sharing import UsageEntry, written_status_json
from scheduler.admission_wait import admission_wait, eviction_wait
from scheduler.capacity import level_totals
from scheduler.cluster import Charge, ClusterState
from scheduler.errors import FlagError, InputError
from scheduler.eta import NOT_WITHIN_HORIZON, OUT_OF_BUDGET
from scheduler.explain import (
    LevelFit,
    NodeExclusions,
    PodSetExplanation,
    QuotaLine,
    Suggestion,
    WorkloadExplanation,
    explain_workload,
)
from scheduler.model import PodSet as EnginePodSet
from scheduler.model import Workload as EngineWorkload
from scheduler.model import slice_split
from scheduler.parse import Where, group_leaders, object_label, parse_workload
from scheduler.quantity import format_value
from scheduler.queue_status import active_condition, local_queue_condition
from scheduler.quota import cohort_cycles
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.stops import NOT_HEAD, UNDECIDED, WAITS, StopRecord
from scheduler.tree import TopologyTree, moved_leaves
from tasweb.api.state import EngineView, engine_view, remembered
from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.core.queries import json_key
from tasweb.scheduling.models import (
    MAX_LEVELS,
    AdmissionComparison,
    AssignmentDomain,
    ComparisonCategory,
    PodSetAssignment,
    PredictionRun,
    WorkloadEvent,
    WorkloadPrediction,
    WorkloadStop,
)
from tasweb.scheduling.selectors import prediction_run, sticky_heads_recorded
from tasweb.scheduling.services import feature_gates

# Workloads in a ClusterQueue's queue: the waiting ones (cluster.WAITING_STATUSES) and the
# evicted and preempted ones, which Kueue requeues; and workloads that hold quota.
QUEUED_STATUSES = (*cluster.WAITING_STATUSES, WorkloadStatus.EVICTED, WorkloadStatus.PREEMPTED)
RESERVING_STATUSES = (WorkloadStatus.QUOTA_RESERVED, WorkloadStatus.ADMITTED)
QUEUE_ORDER = ("-queue_priority", "created_at", "namespace", "name")


def gate_on(name: str) -> bool:
    """Whether the scheduler's feature gate `name` is on (gates that cannot be read, which
    start-up reports, count as off)."""
    try:
        return getattr(feature_gates(), name)
    except (InputError, FlagError):
        return False


def boost_counts() -> bool:
    """Whether queue order adds the priority-boost annotation to the priority, as the scheduler
    does while the PriorityBoost gate is on."""
    return gate_on("PriorityBoost")


def queued_q() -> Q:
    """The workloads in a queue: those waiting, less the ConcurrentAdmission parents while the
    gate is on (their variants are queued, as the scheduler keeps the parents off the queues)."""
    q = Q(status__in=QUEUED_STATUSES)
    return q & Q(concurrent_admission_parent=False) if gate_on("ConcurrentAdmission") else q


def with_queue_priority(rows: QuerySet, *, boosted: bool) -> QuerySet:
    """`rows` with `queue_priority`: the priority Kueue's queues order by."""
    return rows.annotate(queue_priority=F("priority") + F("priority_boost") if boosted else F("priority"))


def in_queue_order(rows: QuerySet) -> QuerySet:
    """Kueue's queue order: higher (effective) priority first, then the older workload."""
    return with_queue_priority(rows, boosted=boost_counts()).order_by(*QUEUE_ORDER)


MAX_DOMAIN_WORKLOADS = 50  # workload names listed per domain of a capacity tree
LEVEL_COLUMNS = tuple(f"level_{i}" for i in range(MAX_LEVELS))


def resources_text(values: Mapping[str, int]) -> dict[str, str]:
    return {resource: format_value(resource, value) for resource, value in sorted(values.items())}


# ---------------------------------------------------------------- the mirror's vocabulary


def flavor_names() -> list[str]:
    return list(cluster.ResourceFlavor.objects.order_by("name").values_list("name", flat=True))


def topology_levels() -> dict[str, list[str]]:
    """The levels of each Topology, keyed by its name."""
    return dict(cluster.Topology.objects.values_list("name", "levels"))


def topology_levels_by_flavor(topologies: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The levels of each TAS flavor's Topology, keyed by flavor name (`topologies`: what
    `topology_levels()` returned, when the caller has it already)."""
    topologies = topology_levels() if topologies is None else topologies
    return {flavor: list(topologies[topology])
            for flavor, topology in cluster.ResourceFlavor.objects.values_list("name", "topology_name")
            if topology in topologies}


def known_level_keys(topologies: Mapping[str, list[str]] | None = None) -> set[str]:
    topologies = topology_levels() if topologies is None else topologies
    return {level for levels in topologies.values() for level in levels}


def local_queue_targets() -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) -> its ClusterQueue."""
    return {(ns, name): cq for ns, name, cq in cluster.LocalQueue.objects.values_list(
        "namespace", "name", "cluster_queue")}


def local_queues_q(pairs: Iterable[tuple[str, str]]) -> Q:
    """Workloads submitted to any of the (namespace, LocalQueue) pairs."""
    q = Q(pk__in=[])
    for namespace, name in pairs:
        q |= Q(namespace=namespace, queue_name=name)
    return q


def cluster_queue_workloads_q(name: str, *, statuses: Iterable[str] | None = None) -> Q:
    """Workloads of a ClusterQueue: admitted to it, or waiting in one of its LocalQueues.

    `statuses`, when the caller filters on status too, drops the half that no such workload
    can match (the same rows; a plain `status = ... AND cluster_queue = ...` lets the
    database walk an index in the page's order instead of sorting every match)."""
    wanted = set(statuses) if statuses else None
    q = Q(pk__in=[])
    if wanted is None or wanted & set(QUEUED_STATUSES):
        queues = [key for key, cq in local_queue_targets().items() if cq == name]
        q |= Q(status__in=QUEUED_STATUSES) & local_queues_q(queues)
    if wanted is None or wanted - set(QUEUED_STATUSES):
        q |= Q(cluster_queue=name) & ~Q(status__in=QUEUED_STATUSES)
    return q


def workloads_in_domain_q(*, path: list[str], flavor: str | None = None) -> Q:
    """Workloads with pods in the domain named by its path of level values from the root."""
    filters = {LEVEL_COLUMNS[i]: value for i, value in enumerate(path)}
    if flavor:
        filters["flavor"] = flavor
    return Q(id__in=AssignmentDomain.objects.filter(**filters).values("workload_id"))


def workloads_on_node_q(*, node: str) -> Q:
    """Workloads with pods assigned to the node (by hostname or node name)."""
    return Q(id__in=AssignmentDomain.objects.filter(node=node).values("workload_id"))


# Up to this many workload ids found by a domain search are put in the workload query as a
# list, read once, rather than as a subquery that the page and the count would each run.
MAX_LISTED_IDS = 2000


def listed_or_subquery(ids: QuerySet) -> Q:
    """`id IN (ids)`: the ids themselves when there are few, else the subquery."""
    found = list(ids.order_by().distinct()[:MAX_LISTED_IDS + 1])
    return Q(id__in=found) if len(found) <= MAX_LISTED_IDS else Q(id__in=ids)


def workloads_at_level_q(*, level: str, value: str,
                         levels_by_flavor: Mapping[str, list[str]] | None = None) -> Q:
    """Workloads with pods in any domain whose value at topology level `level` is `value`
    ("everything on rack r3", whatever block r3 is in). A level below the top has no index
    of its own, so the domains are scanned once here (see `listed_or_subquery`)."""
    q = Q()
    for flavor, levels in (topology_levels_by_flavor() if levels_by_flavor is None else levels_by_flavor).items():
        if level in levels and levels.index(level) < MAX_LEVELS:
            column = LEVEL_COLUMNS[levels.index(level)]
            q |= Q(flavor=flavor, **{column: value})
    if not q:
        return Q(pk__in=[])
    return listed_or_subquery(AssignmentDomain.objects.filter(q).values_list("workload_id", flat=True))


# ---------------------------------------------------------------- workloads


WORKLOAD_LIST_FIELDS = ("id", "uid", "namespace", "name", "queue_name", "cluster_queue", "status", "message",
                        "priority", "pod_count", "unhealthy_nodes", "created_at", "admitted_at", "finished_at",
                        "invalid_reason")


def workload_list() -> QuerySet:
    """Workloads without their (large) raw objects."""
    return cluster.Workload.objects.only(*WORKLOAD_LIST_FIELDS)


def workload_get(*, namespace: str, name: str) -> cluster.Workload | None:
    return cluster.Workload.objects.filter(namespace=namespace, name=name).first()


def kueue_ordered(encoded: Any) -> Any:
    """A v1beta2 TopologyAssignment with its keys in the order Kueue's Go structs serialize
    them (the database's JSON type does not keep key order), so its JSON text is the bytes
    Kueue stores."""
    if not isinstance(encoded, Mapping):
        return encoded

    def ordered(mapping: Mapping, keys: tuple[str, ...]) -> dict:
        return {key: mapping[key] for key in keys if key in mapping}

    def level(values: Mapping) -> dict:
        out = ordered(values, ("universal", "individual"))
        if isinstance(out.get("individual"), Mapping):
            out["individual"] = ordered(out["individual"], ("prefix", "suffix", "roots"))
        return out

    out = ordered(encoded, ("levels", "slices"))
    if isinstance(out.get("slices"), list):
        out["slices"] = [
            {**ordered(s, ("domainCount",)),
             **({"valuesPerLevel": [level(v) for v in s["valuesPerLevel"]]} if "valuesPerLevel" in s else {}),
             **({"podCounts": ordered(s["podCounts"], ("universal", "individual"))} if "podCounts" in s else {})}
            for s in out["slices"]
        ]
    return out


def encoded_json_text(encoded: Any) -> str:
    """The JSON text Kueue stores for an encoded assignment (Go's encoding/json: compact)."""
    return json.dumps(kueue_ordered(encoded), separators=(",", ":"), ensure_ascii=False)


def assignments_decoded(*, workload: cluster.Workload) -> list[dict[str, Any]]:
    """Per PodSet: flavors, count, and the assignment encoded (Kueue's bytes) and decoded,
    one domain per row with the value of every topology level."""
    rows = list(PodSetAssignment.objects.filter(workload=workload).order_by("pod_set"))
    by_assignment: dict[int, list[dict[str, Any]]] = defaultdict(list)
    depth = {row.id: len(row.topology_levels) or len(row.levels) for row in rows}
    domains = AssignmentDomain.objects.filter(workload=workload).order_by("assignment_id", "position")
    for assignment_id, count, node, *levels in domains.values_list("assignment_id", "count", "node",
                                                                  *LEVEL_COLUMNS).iterator(chunk_size=5000):
        by_assignment[assignment_id].append(
            {"values": levels[:depth[assignment_id]], "count": count, "node": node or None})
    out = []
    for row in rows:
        out.append({
            "name": row.pod_set,
            "flavors": row.flavors,
            "flavor": row.flavor or None,
            "count": row.count,
            "delayedTopologyRequest": row.delayed_topology_request or None,
            "levels": row.levels,
            "topologyLevels": row.topology_levels,
            "encoded": kueue_ordered(row.encoded) if row.encoded is not None else None,
            "decoded": {"levels": row.topology_levels or row.levels, "domains": by_assignment.get(row.id, [])}
            if row.encoded is not None else None,
        })
    return out


def pod_sets_of(raw: Mapping) -> list[dict[str, Any]]:
    """The PodSets of a workload object: count, topology request and per-pod requests."""
    requests: dict[str, dict[str, str]] = {}
    slices: dict[str, dict[str, Any]] = {}
    try:
        parsed = parse_workload(raw, Where(object_label(raw)), lambda data: None)
        requests = {ps.name: resources_text(ps.spec.requests) for ps in parsed.pod_sets}
        slices = slices_of(parsed.pod_sets)
    except Exception:  # an invalid object still shows what it has; its invalid_reason says why
        parsed = None
    out = []
    for ps in (raw.get("spec") or {}).get("podSets") or []:
        if not isinstance(ps, Mapping):
            continue
        name = str(ps.get("name") or "main")
        template = ps.get("template") if isinstance(ps.get("template"), Mapping) else {}
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        topology_request = ps.get("topologyRequest")
        if topology_request is None and isinstance(annotations, Mapping):
            from_annotations = {key.removeprefix("kueue.x-k8s.io/"): value for key, value in annotations.items()
                                if key.startswith("kueue.x-k8s.io/podset-")}
            topology_request = {"fromAnnotations": from_annotations} if from_annotations else None
        out.append({
            "name": name,
            "count": ps.get("count"),
            "minCount": ps.get("minCount"),
            "topologyRequest": topology_request,
            "requests": requests.get(name, {}),
            "slices": slices.get(name),
        })
    return out


def slices_of(pod_sets: Sequence[EnginePodSet]) -> dict[str, dict[str, Any]]:
    """Per PodSet placed by its slices: how its pods are cut (the leader of a leader-and-workers
    group is placed as one pod whatever its request says, so it has none)."""
    leaders = group_leaders(list(pod_sets))
    out = {}
    for i, ps in enumerate(pod_sets):
        split = slice_split(ps.topology_request, ps.count) if i not in leaders else None
        if split is not None:
            out[ps.name] = {"topology": split.topology, "size": split.size, "whole": split.whole,
                            "partial": split.partial, "layers": split.layers}
    return out


def workload_detail(*, workload: cluster.Workload) -> dict[str, Any]:
    raw = workload.raw or {}
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    admission = status.get("admission") if isinstance(status.get("admission"), Mapping) else None
    return {
        **workload_summary(workload),
        "podSets": pod_sets_of(raw),
        "conditions": list(status.get("conditions") or []),
        "admission": {
            "clusterQueue": admission.get("clusterQueue") if admission else workload.cluster_queue,
            "podSetAssignments": assignments_decoded(workload=workload),
        } if admission is not None else None,
        "object": raw,
    }


CUT_SHORT = frozenset({OUT_OF_BUDGET, NOT_WITHIN_HORIZON})  # reasons of a play that stopped short


def prediction_json(row: WorkloadPrediction | None, run: PredictionRun | None) -> dict[str, Any] | None:
    """A stored start-time prediction as the API shows it, with the estimate it comes from
    (`prediction_run`); None without one."""
    if row is None:
        return None
    # a range calibrated before the outcomes were cut into bands had one band, every wait
    calibration = {"waitFrom": 0.0, "waitTo": None, **row.calibration} if row.calibration else None
    # a prediction its play left without a start when it stopped short was not started by then
    played_until = run.played_until if run is not None and row.start is None and row.reason in CUT_SHORT else None
    return {"time": row.start, "earliest": row.earliest, "latest": row.latest, "playsEarliest": row.plays_earliest,
            "playsLatest": row.plays_latest, "calibration": calibration, "end": row.end,
            "source": row.source, "runtime": run.runtimes.get(row.runtime_key, {}) if run is not None else {},
            "placement": row.placement or [],
            "reason": row.reason or None, "playedUntil": played_until,
            "estimatedAt": run.estimated_at if run is not None else None}


def predictions_of(keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    """namespace/name -> its prediction (as `prediction_json`), for the workloads of `keys`
    that have one."""
    keys = list(dict.fromkeys(keys))
    out: dict[str, dict[str, Any]] = {}
    run = prediction_run() if keys else None
    for start in range(0, len(keys), 1000):
        for row in WorkloadPrediction.objects.filter(workload_key__in=keys[start:start + 1000]):
            out[row.workload_key] = prediction_json(row, run)
    return out


def workload_prediction(w: cluster.Workload, predictions: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The workload's predicted start while it is queued (from `predictions` when given, else
    read); None when it is not, or no estimate covered it yet."""
    if w.status not in QUEUED_STATUSES:
        return None
    if predictions is not None:
        return predictions.get(w.key)
    row = WorkloadPrediction.objects.filter(workload_key=w.key).first()
    return prediction_json(row, prediction_run() if row is not None else None)


def workload_summary(w: cluster.Workload, predictions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`predictions`: those of a page of workloads (`predictions_of`), read in one query."""
    return {
        "namespace": w.namespace,
        "name": w.name,
        "uid": w.uid,
        "queueName": w.queue_name,
        "clusterQueue": w.cluster_queue or None,
        "status": w.status,
        "message": w.message,
        "priority": w.priority,
        "podCount": w.pod_count,
        "unhealthyNodes": [n.get("name", "") if isinstance(n, Mapping) else str(n) for n in w.unhealthy_nodes],
        "createdAt": w.created_at,
        "admittedAt": w.admitted_at,
        "finishedAt": w.finished_at,
        "invalidReason": w.invalid_reason or None,
        "predictedStart": workload_prediction(w, predictions),
    }


# ---------------------------------------------------------------- history


def event_list() -> QuerySet:
    return WorkloadEvent.objects.all()


# ---------------------------------------------------------------- side by side with Kueue


def comparison_list() -> QuerySet:
    return AdmissionComparison.objects.all()


def comparison_json(row: AdmissionComparison) -> dict[str, Any]:
    return {"id": row.id, "workload": row.workload_key, "namespace": row.namespace,
            "clusterQueue": row.cluster_queue, "flavor": row.flavor, "category": row.category,
            "agrees": row.category == ComparisonCategory.SAME_DOMAINS, "kueue": row.kueue or [],
            "engine": row.engine or [], "podSets": row.pod_sets or {}, "reason": row.reason,
            "stop": row.stop if isinstance(row.stop, dict) else None, "admittedAt": row.admitted_at,
            "comparedAt": row.compared_at, "schedulingPass": row.scheduling_pass_id}


def _agreement(categories: Mapping[str, int]) -> dict[str, Any]:
    total = sum(categories.values())
    agreeing = categories.get(ComparisonCategory.SAME_DOMAINS, 0)
    return {"total": total, "agreeing": agreeing, "agreementRate": agreeing / total if total else None,
            "categories": {c: categories.get(c, 0) for c in ComparisonCategory.values}}


def comparison_summary(queryset: QuerySet, *, bucket: str = "hour") -> dict[str, Any]:
    """The agreement rate over the comparisons of `queryset`, overall and per time bucket."""
    from django.db.models.functions import TruncDay, TruncHour, TruncMinute

    trunc = {"minute": TruncMinute, "hour": TruncHour, "day": TruncDay}[bucket]
    overall: dict[str, int] = defaultdict(int)
    per_bucket: dict[Any, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = (queryset.order_by().annotate(start=trunc("admitted_at")).values_list("start", "category")
            .annotate(n=Count("id")))
    for start, category, n in rows:
        overall[category] += n
        per_bucket[start][category] += n
    return {"overall": _agreement(overall), "bucket": bucket,
            "buckets": [{"start": start, **_agreement(counts)} for start, counts in sorted(per_bucket.items())]}


# ---------------------------------------------------------------- queues


def _counts_by_local_queue(selected: Q) -> dict[tuple[str, str], dict[str, int]]:
    """(namespace, LocalQueue) -> {status: count} over the workloads `selected`."""
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    rows = (cluster.Workload.objects.filter(selected)
            .values_list("namespace", "queue_name", "status").annotate(n=Count("id")).order_by())
    for namespace, queue, status, n in rows:
        out[(namespace, queue)][status] = n
    return out


def waiting_counts_by_local_queue() -> dict[tuple[str, str], dict[str, int]]:
    return _counts_by_local_queue(queued_q())


def reserving_counts_by_local_queue() -> dict[tuple[str, str], dict[str, int]]:
    return _counts_by_local_queue(Q(status__in=RESERVING_STATUSES))


def reserving_counts_by_cluster_queue() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    rows = (cluster.Workload.objects.filter(status__in=RESERVING_STATUSES)
            .values_list("cluster_queue", "status").annotate(n=Count("id")).order_by())
    for cq, status, n in rows:
        out[cq][status] = n
    return out


@dataclass(frozen=True)
class QueueCounts:
    pending: int = 0  # queued and not found inadmissible (Pending, Evicted, Preempted)
    inadmissible: int = 0
    waiting: int = 0  # Pending or Inadmissible
    reserving: int = 0  # QuotaReserved or Admitted
    admitted: int = 0

    @property
    def awaiting_checks(self) -> int:
        """Holding a quota reservation that is not an admission yet (QuotaReserved)."""
        return self.reserving - self.admitted

    def as_json(self) -> dict[str, int]:
        return {"waitingWorkloads": self.waiting,
                "pendingWorkloads": self.pending + self.inadmissible, "activePendingWorkloads": self.pending,
                "inadmissibleWorkloads": self.inadmissible, "reservingWorkloads": self.reserving,
                "admittedWorkloads": self.admitted}


def _counts(waiting: Mapping[str, int], reserving: Mapping[str, int]) -> QueueCounts:
    inadmissible = waiting.get(WorkloadStatus.INADMISSIBLE, 0)
    return QueueCounts(
        pending=sum(waiting.values()) - inadmissible, inadmissible=inadmissible,
        waiting=sum(waiting.get(status, 0) for status in cluster.WAITING_STATUSES),
        reserving=sum(reserving.values()), admitted=reserving.get(WorkloadStatus.ADMITTED, 0))


def local_queue_counts(waiting_by_lq: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
                       ) -> dict[tuple[str, str], QueueCounts]:
    """Workload counts per LocalQueue; `waiting_by_lq`: `waiting_counts_by_local_queue()` when
    the caller has it already (it is the largest count: counted once, not again here)."""
    waiting = waiting_counts_by_local_queue() if waiting_by_lq is None else waiting_by_lq
    reserving = reserving_counts_by_local_queue()
    return {key: _counts(waiting.get(key, {}), reserving.get(key, {})) for key in {*waiting, *reserving}}


def cluster_queue_counts(waiting_by_lq: Mapping[tuple[str, str], Mapping[str, int]] | None = None,
                         ) -> dict[str, QueueCounts]:
    """Workload counts per ClusterQueue: the waiting ones through their LocalQueues (see
    `local_queue_counts` for `waiting_by_lq`), the reserving ones by their admission."""
    targets = local_queue_targets()
    waiting: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_lq = waiting_counts_by_local_queue() if waiting_by_lq is None else waiting_by_lq
    for key, statuses in by_lq.items():
        cq = targets.get(key)
        if cq is not None:
            for status, n in statuses.items():
                waiting[cq][status] += n
    reserving = reserving_counts_by_cluster_queue()
    return {cq: _counts(waiting.get(cq, {}), reserving.get(cq, {})) for cq in {*waiting, *reserving}}


def _quota_groups(view: EngineView, name: str, resource_groups, usage: Mapping | None) -> list[dict[str, Any]]:
    groups = []
    for rg in resource_groups:
        flavors = []
        for fq in rg.flavors:
            resources = []
            for quota in fq.resources:
                line: dict[str, Any] = {
                    "name": quota.name,
                    "nominalQuota": format_value(quota.name, quota.nominal),
                    "borrowingLimit": None if quota.borrowing_limit is None
                    else format_value(quota.name, quota.borrowing_limit),
                    "lendingLimit": None if quota.lending_limit is None
                    else format_value(quota.name, quota.lending_limit),
                }
                if usage is not None:
                    used = next((v for fr, v in usage.items() if fr.flavor == fq.name and fr.resource == quota.name), 0)
                    line["usage"] = format_value(quota.name, used)
                    line["available"] = format_value(quota.name, max(quota.nominal - used, 0))
                resources.append(line)
            flavors.append({"name": fq.name, "resources": resources})
        groups.append({"coveredResources": list(rg.covered_resources), "flavors": flavors})
    return groups


def cluster_queue_quota(*, name: str) -> list[dict[str, Any]] | None:
    """The ClusterQueue's resource groups with nominal quota, limits and current usage, as the
    engine counts them; None when the engine cannot read the ClusterQueue."""
    view = engine_view()
    with view.lock:  # the view is brought up to date under it
        cq = view.state.cluster_queues.get(name)
        if cq is None:
            return None
        return _quota_groups(view, name, cq.resource_groups, view.state.quota_usage.get(name, {}))


def cluster_queue_activity() -> dict[str, dict[str, str]]:
    """ClusterQueue -> Kueue's `Active` condition as the engine finds it ({"status", "reason",
    "message"}): False while the ClusterQueue is being deleted, is stopped or lacks a ResourceFlavor, an
    AdmissionCheck or a Topology; ClusterQueues the engine cannot read are left out."""
    view = engine_view()
    with view.lock:
        state = view.state
        inactive = state.inactive_cluster_queues
        return {name: dict(zip(("status", "reason", "message"), active_condition(inactive.get(name, ())),
                               strict=True))
                for name in state.cluster_queues}


def local_queue_activity() -> dict[tuple[str, str], dict[str, str]]:
    """(namespace, name) -> Kueue's `Active` condition of the LocalQueue as the engine finds it:
    False while it is stopped or its ClusterQueue is missing or inactive."""
    view = engine_view()
    with view.lock:
        state = view.state
        return {(lq.namespace, lq.name): dict(zip(("status", "reason", "message"),
                                                  local_queue_condition(state, lq), strict=True))
                for lq in state.local_queues.values()}


def local_queue_fair_sharing() -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) -> the LocalQueue's weight, its usage as admission fair sharing orders
    by it (None without admissionFairSharing, or past any number: a LocalQueue of weight 0 that
    used anything), whether its ClusterQueue orders by it, and its status."""
    view = engine_view()
    with view.lock:
        state = view.state
        kept = {(u.namespace, u.name): u.json() for u in state.local_queue_usages()}
        out = {}
        for lq in state.local_queues.values():
            shown = kept.get((lq.namespace, lq.name))
            if shown is None:  # no usage kept: the status as written
                shown = {"weight": lq.fair_weight, "usage": None, "ordersByUsage": False,
                         "admissionFairSharingStatus": written_status_json(UsageEntry(dict(lq.consumed),
                                                                                      lq.consumed_at))}
            out[lq.namespace, lq.name] = {field: shown[field] for field in FAIR_SHARING_FIELDS}
        return out


FAIR_SHARING_FIELDS = ("weight", "usage", "ordersByUsage", "admissionFairSharingStatus")


def cluster_queues_by_usage() -> set[str]:
    """The ClusterQueues that order their workloads by their LocalQueues' usage first."""
    view = engine_view()
    with view.lock:
        state = view.state
        return {name for name, cq in state.cluster_queues.items() if state.orders_by_local_queue_usage(cq)}


def local_queue_usage_order(cluster_queue: str) -> dict[tuple[str, str], float] | None:
    """(namespace, LocalQueue) -> the usage the ClusterQueue orders its workloads by, first;
    None when it does not order by usage."""
    view = engine_view()
    with view.lock:
        state = view.state
        cq = state.cluster_queues.get(cluster_queue)
        if cq is None or not state.orders_by_local_queue_usage(cq):
            return None
        return {(lq.namespace, lq.name): state.local_queue_usage(key)
                for key, lq in state.local_queues.items() if lq.cluster_queue == cluster_queue}


@dataclass(frozen=True)
class CohortRelations:
    """How the mirrored Cohorts and ClusterQueues hang together."""

    members: dict[str, list[str]]  # Cohort -> its ClusterQueues
    children: dict[str, list[str]]  # Cohort -> the Cohorts whose parent it is
    cycles: dict[str, tuple[str, ...]]  # Cohort -> its parent chain up to the Cohort it repeats


def cohort_relations() -> CohortRelations:
    members: dict[str, list[str]] = defaultdict(list)
    for name, cohort in cluster.ClusterQueue.objects.exclude(cohort="").values_list("name", "cohort"):
        members[cohort].append(name)
    children: dict[str, list[str]] = defaultdict(list)
    for name, parent in cluster.Cohort.objects.exclude(parent="").values_list("name", "parent"):
        children[parent].append(name)
    return CohortRelations(members, children, cohort_chains())


def cohort_chains() -> dict[str, tuple[str, ...]]:
    """Per Cohort under a cycle of Cohorts, its parent chain up to the Cohort it repeats (of the
    Cohorts the engine reads: the valid ones)."""
    rows = cluster.Cohort.objects.filter(invalid_reason="").values_list("name", "parent")
    return cohort_cycles({name: parent or None for name, parent in rows})


def cohort_quota(*, name: str) -> list[dict[str, Any]] | None:
    view = engine_view()
    with view.lock:
        cohort = view.state.cohorts.get(name)
        if cohort is None:
            return None
        return _quota_groups(view, name, cohort.resource_groups, None)


# ---------------------------------------------------------------- visibility (Kueue's pendingworkloads)


@dataclass(frozen=True)
class PendingWorkload:
    namespace: str
    name: str
    created_at: Any
    owner_references: list
    priority: int
    local_queue: str
    position_in_cluster_queue: int
    position_in_local_queue: int


def _queue_rows(q: Q, *, stop: int | None = None, sticky: str | None = None,
                usage: Mapping[tuple[str, str], float] | None = None) -> Iterator[tuple]:
    """The waiting workloads `q` selects in queue order; only the first `stop` when given.
    `sticky` ("namespace/name"): the workload the scheduler keeps at the head while its
    preemptions complete, first whatever its priority (as Kueue's queue snapshot orders it).
    `usage`: admission fair sharing's usage of each (namespace, LocalQueue), which orders the
    workloads first (the sticky one first among those of the same usage)."""
    if usage:
        by_usage: dict[float, list[tuple[str, str]]] = defaultdict(list)
        for pair, value in usage.items():
            by_usage[value].append(pair)
        # the groups in order of usage, then any workload of a LocalQueue the engine cannot read
        groups = [local_queues_q(by_usage[value]) for value in sorted(by_usage)]
        groups.append(~local_queues_q(list(usage)))
        produced = 0
        for group in groups:
            if stop is not None and produced >= stop:
                return
            for row in _queue_rows(q & group, sticky=sticky, stop=None if stop is None else stop - produced):
                produced += 1
                yield row
        return
    selected = cluster.Workload.objects.filter(q, queued_q())

    def listed(rows: QuerySet) -> QuerySet:
        return (in_queue_order(rows).annotate(owners=json_key("raw", "metadata", "ownerReferences"))
                .values_list("namespace", "name", "queue_name", "priority", "created_at", "owners"))

    head: list[tuple] = []
    if sticky:
        namespace, _, name = sticky.partition("/")
        head = list(listed(selected.filter(namespace=namespace, name=name)))
        if head:
            selected = selected.exclude(namespace=namespace, name=name)
    rest = listed(selected)
    if stop is not None:
        rest = rest[:max(stop - len(head), 0)]
    yield from head
    yield from rest.iterator(chunk_size=2000)


def pending_in_cluster_queue(*, name: str, offset: int, limit: int,
                             namespaces: Collection[str] | None = None) -> list[PendingWorkload]:
    """Kueue's pendingWorkloadsInCqREST: the ClusterQueue's queue in order, from `offset`.

    `namespaces`: only entries of these namespaces are listed (`offset` and `limit` count
    those), each still with its position in the whole queue; None lists every entry."""
    queues = [key for key, cq in local_queue_targets().items() if cq == name]
    out: list[PendingWorkload] = []
    positions: dict[tuple[str, str], int] = defaultdict(int)
    shown = 0
    rows = _queue_rows(local_queues_q(queues), stop=offset + limit if namespaces is None else None,
                       sticky=sticky_heads_recorded().get(name), usage=local_queue_usage_order(name))
    for index, (namespace, wl_name, queue, priority, created, owners) in enumerate(rows):
        if shown >= offset + limit:
            break
        in_local = positions[(namespace, queue)]
        positions[(namespace, queue)] += 1
        if namespaces is not None and namespace not in namespaces:
            continue
        if shown >= offset:
            out.append(PendingWorkload(namespace, wl_name, created, owners or [], priority, queue, index, in_local))
        shown += 1
    return out


def pending_in_local_queue(*, namespace: str, name: str, cluster_queue: str, offset: int,
                           limit: int) -> list[PendingWorkload]:
    """Kueue's pendingWorkloadsInLqREST: the LocalQueue's workloads in the ClusterQueue's
    order, with their position in both queues."""
    queues = [key for key, cq in local_queue_targets().items() if cq == cluster_queue] or [(namespace, name)]
    out: list[PendingWorkload] = []
    skipped = 0
    rows = _queue_rows(local_queues_q(queues), sticky=sticky_heads_recorded().get(cluster_queue),
                       usage=local_queue_usage_order(cluster_queue))
    for index, (wl_ns, wl_name, queue, priority, created, owners) in enumerate(rows):
        if len(out) >= limit:
            break
        if wl_ns != namespace or queue != name:
            continue
        if skipped < offset:
            skipped += 1
            continue
        out.append(PendingWorkload(wl_ns, wl_name, created, owners or [], priority, queue, index, len(out) + offset))
    return out


# ---------------------------------------------------------------- capacity trees


@dataclass(eq=False)
class DomainOccupants:
    """The workloads holding pods in each domain of a flavor's tree (every ancestor of the
    leaves they use), kept across versions of the view and brought up to date from what
    changed: the engine makes a new `Charge` whenever a workload holding quota changes and
    drops it when the workload stops holding any, so comparing its charges by identity with
    those seen last finds every workload whose domains may differ (at 50,000 nodes, going
    over every admitted workload took half a second at every version)."""

    tree: TopologyTree
    flavor: str
    tas_flavors: frozenset[str]  # the engine's TAS flavors when made: which flavor a PodSet is on
    charges: dict[str, Charge] = field(default_factory=dict)  # as last seen
    paths: dict[str, frozenset[tuple[str, ...]]] = field(default_factory=dict)  # workload key -> its domains
    occupants: dict[tuple[str, ...], set[str]] = field(default_factory=dict)  # domain path -> workload keys

    def follow(self, state: ClusterState) -> list[tuple[Charge | None, Charge | None]]:
        """Up to date with the state; the charges that changed since, as (old, new) pairs."""
        charges = state.charges
        changed = [key for key, charge in charges.items() if self.charges.get(key) is not charge]
        changed += [key for key in self.charges if key not in charges]
        for key in changed:
            self._place(key, state, holds=key in charges)
        pairs = [(self.charges.get(key), charges.get(key)) for key in changed]
        self.charges = dict(charges)
        return pairs

    def move_to(self, tree: TopologyTree, state: ClusterState) -> None:
        """Onto `tree`, the flavor's tree after nodes changed: only the workloads with pods on
        a leaf that came, went or moved are placed again (their charges stay as last seen, so
        `follow` still reports those that changed)."""
        old = self.tree
        moved = moved_leaves(old, tree)
        self.tree = tree
        if not moved:
            return
        keys: set[str] = set()
        for leaf_key in moved:
            for t in (old, tree):
                leaf = t.leaves.index_by_id.get(leaf_key) if t.levels else None
                if leaf is not None:
                    path = t.leaves.values[leaf]  # its last value names the leaf, as holders are indexed
                    keys.update(self.occupants.get(path, ()))
                    keys |= state.workloads_on_nodes([path[-1]])
        for key in keys:
            self._place(key, state, holds=key in self.charges)

    def _place(self, key: str, state: ClusterState, *, holds: bool) -> None:
        """The workload's domains on the tree, as it is in `state` (none unless it `holds` a charge)."""
        self._leave(key)
        wl = state.workload(key) if holds else None
        paths = occupied_domains(state, wl, self.tree, self.flavor) if wl is not None else frozenset()
        if paths:
            self.paths[key] = paths
            for path in paths:
                self.occupants.setdefault(path, set()).add(key)

    def _leave(self, key: str) -> None:
        for path in self.paths.pop(key, ()):
            holders = self.occupants[path]
            holders.discard(key)
            if not holders:
                del self.occupants[path]


def domain_workloads(view: EngineView, snap: TASFlavorSnapshot) -> dict[tuple[str, ...], set[str]]:
    """Workloads holding pods in each domain of the engine's snapshot of a flavor, kept in the
    view and brought up to date from the charges that changed, and, when the engine made the
    snapshot again after nodes changed, from the leaves that moved. Read-only, and valid
    until the view changes."""
    state = view.state
    tas_flavors = state.tas_flavor_names()
    key = ("domain-workloads", snap.name)
    kept = view.kept.get(key)
    if kept is None or kept.tas_flavors != tas_flavors:
        kept = view.kept[key] = DomainOccupants(snap.tree, snap.name, tas_flavors)
    elif kept.tree is not snap.tree:
        kept.move_to(snap.tree, state)
    kept.follow(state)
    return kept.occupants


def occupied_domains(state: ClusterState, wl: EngineWorkload, tree: TopologyTree, flavor: str
                     ) -> frozenset[tuple[str, ...]]:
    """The domains of `tree` (every ancestor of the leaves) where the workload's admission
    assigns pods on `flavor`."""
    if wl.admission is None:
        return frozenset()
    leaves: set[int | None] = set()
    for psa in wl.admission.pod_set_assignments:
        if psa.topology_assignment is not None and state.tas_flavor_of(psa) == flavor:
            leaves.update(tree.leaf_for_values(dom.values) for dom in psa.topology_assignment.domains)
    leaves.discard(None)
    return frozenset(path[:depth] for leaf in leaves for path in (tree.leaves.values[leaf],)
                     for depth in range(1, len(path) + 1))


_ABSENT = np.iinfo(np.int64).min  # a resource a row does not show


class _QuantityTexts:
    """Rows of resource values as the tree shows them ({resource: "8"}, zeros left out), each
    distinct row formatted once: across 10,000 nodes most rows repeat."""

    def __init__(self, names: list[str]) -> None:
        self.order = sorted(range(len(names)), key=names.__getitem__)
        self.names = [names[j] for j in self.order]

    def rows(self, values: np.ndarray, present: np.ndarray | None = None) -> list[dict[str, str]]:
        """One dict per row of `values`; a resource is shown where `present` (default: non-zero)."""
        values = values[:, self.order]
        present = (values != 0) if present is None else present[:, self.order]
        if not len(values):
            return []
        distinct, inverse = np.unique(np.where(present, values, _ABSENT), axis=0, return_inverse=True)
        texts = [{name: format_value(name, value) for name, value in zip(self.names, row, strict=True)
                  if value != _ABSENT} for row in distinct.tolist()]
        return [texts[i] for i in inverse.reshape(-1).tolist()]


def _tree(view: EngineView, flavor: str, depth: int | None = None) -> dict[str, Any] | None:
    """The flavor's tree, the domains of its first `depth` levels only when given (at 50,000
    nodes the leaves are most of the work)."""
    snap = view.state.tas_snapshots.get(flavor)
    if snap is None:
        return None
    occupants = domain_workloads(view, snap)
    keys = snap.level_keys
    texts = _QuantityTexts(list(snap.resources.names))
    domains = []
    for level, totals in enumerate(level_totals(snap)[:depth]):
        alloc, tas, other = totals.allocatable, totals.tas_usage, totals.non_tas_usage
        used_or_held = (alloc != 0) | (tas != 0) | (other != 0)
        columns = zip(snap.tree.levels[level].values, totals.nodes.tolist(), texts.rows(alloc), texts.rows(tas),
                      texts.rows(other), texts.rows(alloc - tas - other, used_or_held), strict=True)
        for path, nodes, alloc_text, tas_text, other_text, free_text in columns:
            names = sorted(occupants.get(path, ()))
            domains.append({
                "id": "/".join(path),
                "level": level,
                "levelKey": keys[level],
                "name": path[-1],
                "values": list(path),
                "parent": "/".join(path[:-1]) or None,
                "nodes": nodes,
                "allocatable": alloc_text,
                "tasUsage": tas_text,
                "nonTasUsage": other_text,
                "free": free_text,
                "workloads": names[:MAX_DOMAIN_WORKLOADS],
                "workloadCount": len(names),
            })
    return {
        "flavor": flavor,
        "topology": snap.topology_name,
        "levels": list(keys),
        "nodes": sum(len(group) for group in snap.tree.leaf_nodes),
        "domains": domains,
    }


def flavor_tree(*, flavor: str, depth: int | None = None, root: list[str] | None = None) -> dict[str, Any] | None:
    """Every domain of a TAS flavor's topology at every level with its capacity, TAS and
    non-TAS usage, free capacity and the workloads in it; None when the flavor has no
    topology the engine can use. `depth` keeps the top levels, `root` one subtree."""
    return _flavor_tree_of(engine_view(), flavor=flavor, depth=depth, root=root)


def flavor_tree_rendered(*, flavor: str, depth: int | None, root: list[str] | None, variant: Hashable,
                         render: Callable[[dict[str, Any]], bytes]) -> bytes | None:
    """`flavor_tree`'s answer as `render` turns it into bytes, rendered once per engine view
    (so once per mirror version) for each flavor, depth, root and `variant` (whatever else
    changes the bytes, e.g. the JSON indent); None when the flavor has no usable topology."""
    key = ("tree-rendered", flavor, depth, tuple(root or ()), variant)

    def compute(view: EngineView) -> bytes | None:
        tree = _flavor_tree_of(view, flavor=flavor, depth=depth, root=root)
        return None if tree is None else render(tree)

    return remembered(key, compute)


def _flavor_tree_of(view: EngineView, *, flavor: str, depth: int | None, root: list[str] | None,
                    ) -> dict[str, Any] | None:
    with view.lock:
        snap = view.state.tas_snapshots.get(flavor)
        whole = ("tree", flavor) in view.memo  # made already: it serves any depth
    if snap is not None and depth is not None and depth < len(snap.level_keys) and not whole:
        tree = view.remember(("tree", flavor, depth), lambda: _tree(view, flavor, depth))
    else:
        tree = view.remember(("tree", flavor), lambda: _tree(view, flavor))
    if tree is None:
        return None
    domains = tree["domains"]
    if depth is not None or root:
        width = len(root or ())
        domains = [d for d in domains
                   if (depth is None or d["level"] < depth)
                   and (not root or (len(d["values"]) >= width and d["values"][:width] == root))]
    return {**tree, "domains": domains}


def flavor_has_domain(*, flavor: str, values: list[str]) -> bool:
    """Whether the flavor's topology has the domain named by its level values from the root."""
    view = engine_view()
    with view.lock:
        snap = view.state.tas_snapshots.get(flavor)
        return snap is not None and snap.tree.domain_index(values) is not None


def tas_flavor_names() -> list[str]:
    view = engine_view()
    with view.lock:
        return sorted(view.state.tas_snapshots)


# ---------------------------------------------------------------- why pending


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _level_json(fit: LevelFit) -> dict[str, Any]:
    best = "/".join(fit.best_domain)
    return {
        "level": fit.level,
        "needed": fit.needed,
        "unit": fit.unit,
        "bestDomain": fit.best_domain,
        "bestFits": fit.best_fits,
        "domains": fit.domains,
        "domainsThatFit": fit.domains_that_fit,
        "totalFits": fit.total_fits,
        "message": (f"at level {fit.level}, the best domain {best} has room for {_plural(fit.best_fits, fit.unit)} of "
                    f"the {fit.needed} needed; {fit.domains_that_fit} of {_plural(fit.domains, 'domain')} "
                    f"can take them all"),
    }


def _exclusions_json(ex: NodeExclusions) -> dict[str, Any]:
    messages = []
    if ex.not_ready:
        messages.append(f"{_plural(ex.not_ready, 'node')} not Ready")
    if ex.unschedulable:
        messages.append(f"{_plural(ex.unschedulable, 'node')} cordoned (unschedulable)")
    if ex.missing_level_label:
        messages.append(f"{_plural(ex.missing_level_label, 'node')} without a label for every topology level")
    for taint, n in sorted(ex.taints.items()):
        messages.append(f"{_plural(n, 'node')} with taint {taint} the pod set does not tolerate")
    if ex.node_selector:
        messages.append(f"{_plural(ex.node_selector, 'node')} not matching the pod set's nodeSelector")
    if ex.affinity:
        messages.append(f"{_plural(ex.affinity, 'node')} not matching the pod set's node affinity")
    for resource, n in sorted(ex.resources.items()):
        messages.append(f"{_plural(n, 'node')} without enough free {resource} for one pod")
    return {
        "nodesOfFlavor": ex.nodes_of_flavor,
        "inTopology": ex.in_topology,
        "notReady": ex.not_ready,
        "unschedulable": ex.unschedulable,
        "missingLevelLabel": ex.missing_level_label,
        "taints": dict(ex.taints),
        "nodeSelector": ex.node_selector,
        "affinity": ex.affinity,
        "resources": dict(ex.resources),
        "messages": messages,
    }


def _suggestion_json(s: Suggestion) -> dict[str, Any]:
    return {"kind": s.kind, "message": s.message, "details": dict(s.details)}


def _quota_json(line: QuotaLine) -> dict[str, Any]:
    verdict = "fits" if line.fits else f"does not fit, short by {line.short}" if line.short else "does not fit"
    if line.limit:
        verdict += f" ({line.limit} binds)"
    where = ("as the scheduling cycle counted it, holds and admissions of the cycle included" if line.source == "cycle"
             else "computed now; the scheduling cycle's decision above overrides it")
    return {
        "flavor": line.flavor, "resource": line.resource, "requested": line.requested, "nominal": line.nominal,
        "used": line.used, "available": line.available, "fits": line.fits, "source": line.source,
        "message": (f"{line.resource} on {line.flavor}: {line.requested} requested, {line.available} of "
                    f"{line.nominal} available ({line.used} in use): {verdict} ({where})"),
    }


def _pod_set_message(ps: PodSetExplanation) -> str:
    if ps.fits:
        return f"pod set {ps.name}: {_plural(ps.count, 'pod')} fit now"
    where = {"required": f"all in one {ps.level} (required)", "preferred": f"preferably in one {ps.level}",
             "unconstrained": "anywhere in the topology", "implied": "on the TAS flavor",
             "none": ""}.get(ps.mode, "")
    slices = f", in slices of {ps.slice_size} per {ps.slice_level}" if ps.slice_size > 1 else ""
    text = f"pod set {ps.name} asks for {_plural(ps.count, 'pod')} {where}{slices}".replace("  ", " ").rstrip()
    return f"{text}: {ps.reason}" if ps.reason else text


def stop_json(stop: StopRecord | None) -> dict[str, Any] | None:
    if stop is None:
        return None
    return {"step": stop.step, "message": stop.headline(), "verdict": stop.verdict,
            "evaluated": not stop.computed_now, "blocking": list(stop.blocking),
            "at": stop.at.isoformat() if stop.at is not None else None, "pass": stop.pass_number or None,
            "cycle": stop.cycle or None, "parked": stop.parked, "requeueOn": list(stop.requeue_on),
            "representative": stop.representative or None, "reason": stop.reason, "details": dict(stop.details)}


def explanation_json(e: WorkloadExplanation) -> dict[str, Any]:
    return {
        "clusterQueue": e.cluster_queue or None,
        "fits": e.fits,
        "verdict": e.verdict,
        "summary": e.summary,
        "stop": stop_json(e.stop),
        "quota": [_quota_json(line) for line in e.quota],
        "podSets": [{
            "name": ps.name, "count": ps.count, "flavor": ps.flavor or None, "mode": ps.mode or None,
            "level": ps.level or None, "sliceLevel": ps.slice_level or None, "sliceSize": ps.slice_size,
            "fits": ps.fits, "reason": ps.reason, "message": _pod_set_message(ps),
            "levels": [_level_json(fit) for fit in ps.levels],
            "exclusions": _exclusions_json(ps.exclusions) if ps.exclusions else None,
            "suggestions": [_suggestion_json(s) for s in ps.suggestions],
        } for ps in e.pod_sets],
        "suggestions": [_suggestion_json(s) for s in e.suggestions]
        + [_pod_set_suggestion_json(ps, s, several=len(e.pod_sets) > 1) for ps in e.pod_sets for s in ps.suggestions],
    }


def _pod_set_suggestion_json(ps: PodSetExplanation, s: Suggestion, *, several: bool) -> dict[str, Any]:
    """A PodSet's suggestion among the workload's: with several PodSets, it says which one it is for."""
    out = _suggestion_json(s)
    if several:
        if not out["message"].startswith("pod set ") and f"pod set {ps.name}" not in out["message"]:
            out["message"] = f"pod set {ps.name}: {out['message']}"
        out["details"].setdefault("podSet", ps.name)
    return out


def workload_stop(workload: cluster.Workload) -> StopRecord | None:
    """What the scheduler recorded of where it stopped the waiting workload, as it answers now:
    its own record, or, for a workload behind the head of its ClusterQueue, that head. None
    when no pass decided on it (why-pending computes an answer, and says so)."""
    row = WorkloadStop.objects.filter(workload_key=workload.key).first()
    record = StopRecord.from_json(row.record) if row is not None else None
    if workload.status != WorkloadStatus.PENDING:
        return record  # parked (Inadmissible): the record of the cycle that parked it stands
    if workload.concurrent_admission_parent and gate_on("ConcurrentAdmission"):
        return None  # never in a queue: the engine answers with its variants
    # where it waits: its LocalQueue's ClusterQueue (a workload no pass has decided on yet has
    # none written), with every workload waiting there
    targets = local_queue_targets()
    cq_name = targets.get((workload.namespace, workload.queue_name)) or workload.cluster_queue
    if not cq_name:
        return record
    queue = cluster.Workload.objects.filter(local_queues_q(k for k, cq in targets.items() if cq == cq_name),
                                            queued_q(), status=WorkloadStatus.PENDING)
    sticky_key = sticky_heads_recorded().get(cq_name)
    if sticky_key == workload.key:
        return record  # kept at the head while its preemptions complete
    sticky = None
    if sticky_key:
        namespace, _, name = sticky_key.partition("/")
        sticky = queue.filter(namespace=namespace, name=name).first()
    boosted = boost_counts()
    mine = workload.priority + (workload.priority_boost if boosted else 0)
    queue = with_queue_priority(queue, boosted=boosted)
    same = Q(queue_priority=mine)
    at = workload.created_at
    earlier = Q(created_at__isnull=False) if at is None else Q(created_at__lt=at)
    tie = Q(created_at__isnull=True) if at is None else Q(created_at=at)
    ahead = queue.filter(Q(queue_priority__gt=mine) | (same & earlier)
                         | (same & tie & Q(namespace__lt=workload.namespace))
                         | (same & tie & Q(namespace=workload.namespace, name__lt=workload.name)))
    position = ahead.count() if sticky is None else ahead.exclude(pk=sticky.pk).count() + 1
    if position == 0:
        return record
    head = sticky or queue.order_by(*QUEUE_ORDER).first()
    if head is None or head.key == workload.key:
        return record
    head_row = WorkloadStop.objects.filter(workload_key=head.key).first()
    head_record = StopRecord.from_json(head_row.record) if head_row is not None else None
    verdict = WAITS if head_record is not None and head_record.verdict == WAITS else UNDECIDED
    why = f"{head.key} waits: {head_record.headline()}" if head_record is not None else \
        f"{head.key} has not been evaluated yet"
    kept = " (kept at the head until its preemptions complete)" if head is sticky else ""
    return StopRecord(NOT_HEAD, f"not a head: behind workload {head.key} in ClusterQueue {cq_name}"
                      f"{kept}, at position {position + 1}; {why}", verdict=verdict, cluster_queue=cq_name,
                      blocking=[head.key], computed_now=True,
                      details={"position": position + 1, "head": head.key,
                               "headStep": head_record.step if head_record is not None else None})


def reservation_wait(workload: cluster.Workload) -> dict[str, Any]:
    """What a Workload holding a quota reservation waits for before it is admitted (its admission
    checks, the second pass of its TopologyAssignment, its queues): `summary` and
    `admissionWait`, as the engine's view of the mirror finds it."""
    def compute(view: EngineView) -> dict[str, Any] | None:
        wl = view.workloads.get(workload.key)
        if wl is None:
            return None
        with view.lock:
            wait = admission_wait(view.state, wl)
            return wait.to_json() if wait is not None else {}

    wait = remembered(("admission-wait", workload.key), compute)
    if wait is None:
        return {"summary": "the Workload is not in the engine's view of the mirror", "admissionWait": None}
    if not wait:
        return {"summary": "the Workload holds no reservation waiting for admission in the engine's view of the "
                           "mirror", "admissionWait": None}
    return {"summary": wait["summary"], "admissionWait": wait}


def why_pending(*, workload: cluster.Workload) -> dict[str, Any]:
    """Why the workload waits: where the scheduler stopped it (the record its last pass wrote),
    with the details computed on the engine's view of the mirror; computed from scratch, and
    said to be, only for what no pass decided on."""
    base = {"namespace": workload.namespace, "name": workload.name, "status": workload.status,
            "message": workload.message}
    if workload.invalid_reason:
        return {**base, "pending": False, "explanation": None,
                "summary": f"the engine cannot read this Workload: {workload.invalid_reason}"}
    if workload.status == WorkloadStatus.QUOTA_RESERVED:
        return {**base, "pending": False, "explanation": None, **reservation_wait(workload)}
    if workload.status not in QUEUED_STATUSES:
        return {**base, "pending": False, "explanation": None,
                "summary": f"the Workload is {workload.status}, not waiting: nothing to explain"}
    stop = workload_stop(workload)
    stop_key = json.dumps(stop.to_json(), sort_keys=True, default=str) if stop is not None else None

    def compute(view: EngineView) -> dict[str, Any] | None:
        wl = view.workloads.get(workload.key)
        if wl is None:
            return None
        with view.lock:
            if wl.has_quota_reservation:
                return {"reserved": eviction_wait(wl) or "the Workload holds quota in the engine's view of the mirror"}
            return explanation_json(explain_workload(view.state, wl, stop=stop))

    explained = remembered(("why-pending", workload.key, stop_key), compute)
    if explained is None or explained.get("reserved"):
        summary = explained["reserved"] if explained else "the Workload is not in the engine's view of the mirror"
        return {**base, "pending": False, "explanation": None, "summary": summary}
    return {**base, "pending": True, "summary": explained["summary"], "explanation": explained}
