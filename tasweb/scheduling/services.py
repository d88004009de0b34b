"""Writes of the scheduling app: running an engine pass over the mirror and storing what it
decided, the decoded assignments, and every workload's history.

A pass's results are written in one transaction: a crash mid-write leaves the previous
state, and running the pass again redoes the same decisions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import CharField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from scheduler.admission_fair_sharing import UsageEntry
from scheduler.admission_fair_sharing import status_json as afs_status_json
from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.codec import decode_assignment, encode_assignment
from scheduler.compare import Comparison, compare_admissions
from scheduler.config import NO_CONFIGURATION, Configuration, effective_gates, parse_configuration_text
from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.features import FeatureGates
from scheduler.loader import read_text
from scheduler.memory import gc_paused
from scheduler.model import Node as EngineNode
from scheduler.model import Workload as EngineWorkload
from scheduler.quantity import format_value
from scheduler.replacement import annotate_failures
from scheduler.results import (
    NODE_REPLACED,
    NODE_UNHEALTHY,
    POD_TERMINATED,
    REPLACEMENT_FAILED,
    WORKLOAD_EVICTED,
    WORKLOAD_PREEMPTED,
    Decision,
    PassResult,
    PodSetResult,
    WorkloadResult,
    message_shape,
)
from scheduler.simulate import engine_pass
from scheduler.stops import StopRecord
from tasweb.cluster import models as cluster
from tasweb.cluster.models import WAITING_STATUSES, WorkloadStatus
from tasweb.cluster.services import (
    BatchedUpdate,
    PreparedRows,
    ids_reserve,
    instances_prepare,
    prepared_insert,
    rows_insert,
    rows_prepare,
    rows_update,
)
from tasweb.core.deadline import deadline
from tasweb.core.queries import json_key
from tasweb.scheduling.estimates import engine_in_use, estimate_schedule, estimate_source_set
from tasweb.scheduling.leader import held_in_this_process, leadership, lock_wait, pass_time_limit, scheduler_key
from tasweb.scheduling.models import (
    MAX_LEVELS,
    AdmissionComparison,
    AdmissionToCompare,
    AssignmentDomain,
    ClusterWrite,
    EventKind,
    PodSetAssignment,
    SchedulingPass,
    WorkloadEvent,
    WorkloadStop,
)
from tasweb.scheduling.runtime import (
    DEFAULT_RETENTION_SECONDS,
    SchedulerRuntime,
    change_log_prune,
    runtime_committed,
    runtime_discard,
    runtime_for_pass,
)
from tasweb.scheduling.selectors import engine_inputs, sticky_heads_recorded

logger = logging.getLogger(__name__)

DECISION_EVENTS = {
    NODE_UNHEALTHY: EventKind.NODE_UNHEALTHY,
    NODE_REPLACED: EventKind.NODE_REPLACED,
    REPLACEMENT_FAILED: EventKind.REPLACEMENT_FAILED,
    WORKLOAD_EVICTED: EventKind.EVICTED,
    WORKLOAD_PREEMPTED: EventKind.PREEMPTED,
    POD_TERMINATED: EventKind.POD_TERMINATED,
}
WORKLOAD_STATUSES = frozenset(WorkloadStatus.values)
HOLDING = {WorkloadStatus.ADMITTED, WorkloadStatus.QUOTA_RESERVED}
WAITING = frozenset(WAITING_STATUSES)


def feature_gates() -> FeatureGates:
    """The gates the engine follows: TAS_FEATURE_GATES, or the featureGates of the Kueue
    Configuration TAS_KUEUE_CONFIG names (Kueue takes one or the other, not both)."""
    return effective_gates(getattr(settings, "TAS_FEATURE_GATES", ""), kueue_configuration()[1],
                           flag_name="TAS_FEATURE_GATES")


_configurations: dict[tuple[str, int, int], tuple[str, Configuration]] = {}


def kueue_configuration() -> tuple[str, Configuration]:
    """Kueue's manager Configuration the engine follows (the file `TAS_KUEUE_CONFIG` names;
    none: Kueue's defaults), with a digest of the file: a changed file rebuilds the engine.
    A bad file raises InputError naming the file and the field."""
    path = getattr(settings, "TAS_KUEUE_CONFIG", "") or ""
    if not path:
        return "", NO_CONFIGURATION
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=path) from None
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _configurations:
        text = read_text(path)
        config = parse_configuration_text(text, file=path)
        _configurations.clear()
        _configurations[key] = (hashlib.sha256(text.encode()).hexdigest()[:16], config)
    return _configurations[key]


def engine_settings_key() -> str:
    """What the engine was built with: the feature gates and the Configuration's digest."""
    return f"{getattr(settings, 'TAS_FEATURE_GATES', '')}|{kueue_configuration()[0]}"


# ---------------------------------------------------------------- topology paths


class DomainPaths:
    """Full paths of level values for assignment domains (Kueue stores only the hostname
    when the lowest level is the hostname; history and queries want block and rack too)."""

    def __init__(self) -> None:
        self.levels_by_flavor: dict[str, list[str]] = {}
        topologies = dict(cluster.Topology.objects.values_list("name", "levels"))
        for flavor, topology in cluster.ResourceFlavor.objects.values_list("name", "topology_name"):
            if topology in topologies:
                self.levels_by_flavor[flavor] = list(topologies[topology])
        self._labels: dict[str, Mapping[str, str]] = {}
        self._lookup: Callable[[str], EngineNode | None] | None = None

    def look_up_in(self, node_for_hostname: Callable[[str], EngineNode | None]) -> None:
        """Take the labels of nodes from the pass's own state (by hostname, or name) before
        reading the database, and only for the nodes asked about."""
        self._lookup = node_for_hostname

    def labels_of(self, hostname: str) -> Mapping[str, str] | None:
        self.prefetch([hostname])
        return self._labels.get(hostname)

    def remember(self, nodes: Iterable[EngineNode]) -> None:
        """Take the labels of nodes a pass has read already, instead of reading them again."""
        for node in nodes:
            self._labels[node.labels.get(HOSTNAME_LABEL, node.name)] = node.labels
            self._labels.setdefault(node.name, node.labels)

    def prefetch(self, hostnames: Iterable[str]) -> None:
        wanted = [h for h in set(hostnames) if h not in self._labels]
        if self._lookup is not None and wanted:
            missing = []
            for hostname in wanted:
                node = self._lookup(hostname)
                if node is None:
                    missing.append(hostname)
                else:
                    self._labels[hostname] = node.labels
            wanted = missing
        for start in range(0, len(wanted), 2000):
            chunk = wanted[start:start + 2000]
            for hostname, name, labels in cluster.Node.objects.filter(hostname__in=chunk).values_list(
                    "hostname", "name", "labels"):
                self._labels[hostname] = labels
                self._labels.setdefault(name, labels)

    def full_path(self, flavor: str, levels: list[str], values: tuple[str, ...]) -> list[str]:
        topology_levels = self.levels_by_flavor.get(flavor) or list(levels)
        if len(values) == len(topology_levels):
            return list(values)
        if levels and levels[-1] == HOSTNAME_LABEL:
            labels = self._labels.get(values[-1])
            if labels is not None:
                return [labels.get(level, "") for level in topology_levels[:-1]] + [values[-1]]
        return [""] * (len(topology_levels) - len(values)) + list(values)


# ---------------------------------------------------------------- assignments


def _tas_flavor(flavors: Mapping[str, str], paths: DomainPaths) -> str:
    tas = sorted({f for f in flavors.values() if f in paths.levels_by_flavor})
    return tas[0] if tas else ""


def assignment_rows_replace(*, workload: cluster.Workload, pod_sets: list[dict[str, Any]],
                            paths: DomainPaths | None = None) -> None:
    """Store the workload's admission: encoded per PodSet, and decoded one row per domain.

    `pod_sets` are Kueue podSetAssignments (JSON); their topologyAssignment in either form.
    """
    assignments_replace(admissions=[(workload, pod_sets)], paths=paths)


def assignments_replace(*, admissions: list[tuple[cluster.Workload, list[dict[str, Any]]]],
                        paths: DomainPaths | None = None,
                        known: Mapping[tuple[int, str], TopologyAssignment] | None = None) -> None:
    """assignment_rows_replace for many workloads at once, in a handful of statements.

    `known` holds assignments already decoded, by (workload id, PodSet name), whose JSON in
    the admission is their v1beta2 encoding (a pass's own results): they are not decoded
    and encoded again.
    """
    assignments_write(assignments_prepare(admissions=admissions, paths=paths, known=known))


@dataclass
class PreparedAssignments:
    """`assignments_replace`'s rows, made ready (and their ids taken) before they are written."""

    workload_ids: list[int]
    pod_sets: PreparedRows
    domains: PreparedRows


def assignments_prepare(*, admissions: list[tuple[cluster.Workload, list[dict[str, Any]]]],
                        paths: DomainPaths | None = None,
                        known: Mapping[tuple[int, str], TopologyAssignment] | None = None,
                        ids: list[int] | None = None) -> PreparedAssignments:
    """The rows `assignments_replace` writes. `ids` are the PodSetAssignments' (`ids_reserve`,
    one a PodSet; taken here if not given); beyond that, it needs the database only for the
    labels of nodes `paths` does not know."""
    paths = paths or DomainPaths()
    rows: list[dict[str, Any]] = []
    decoded: list[tuple[dict[str, Any], TopologyAssignment | None]] = []
    for workload, pod_sets in admissions:
        for psa in pod_sets:
            pod_set = str(psa.get("name") or "main")
            ta = encoded = None
            if psa.get("topologyAssignment"):
                ta = (known or {}).get((workload.pk, pod_set))
                if ta is not None:
                    encoded = psa["topologyAssignment"]
                else:
                    try:
                        ta = decode_assignment(psa["topologyAssignment"])
                    except InputError:
                        ta = None
                    encoded = encode_assignment(ta) if ta else None
            flavors = dict(psa.get("flavors") or {})
            flavor = _tas_flavor(flavors, paths)
            row = {
                "workload_id": workload.pk, "pod_set": pod_set, "flavor": flavor,
                "flavors": flavors, "count": int(psa.get("count") or 0), "levels": list(ta.levels) if ta else [],
                "topology_levels": paths.levels_by_flavor.get(flavor, list(ta.levels) if ta else []),
                "encoded": encoded,
                "delayed_topology_request": str(psa.get("delayedTopologyRequest") or ""),
            }
            rows.append(row)
            decoded.append((row, ta))
    if ids is None:
        ids = ids_reserve(model=PodSetAssignment, count=len(rows))
    for row, pk in zip(rows, ids, strict=True):
        row["id"] = pk
    paths.prefetch(d.values[-1] for _, ta in decoded if ta for d in ta.domains)
    domains = []
    for row, ta in decoded:
        levels = row["levels"]
        for position, dom in enumerate(ta.domains if ta else ()):
            full = paths.full_path(row["flavor"], levels, dom.values)
            domain = {
                "assignment_id": row["id"], "workload_id": row["workload_id"],
                "flavor": row["flavor"], "position": position, "count": dom.count, "values": full,
                "node": dom.values[-1] if levels and levels[-1] == HOSTNAME_LABEL else "",
            }
            domain.update((f"level_{i}", v) for i, v in enumerate(full[:MAX_LEVELS]))
            domains.append(domain)
    return PreparedAssignments([workload.pk for workload, _ in admissions],
                               rows_prepare(model=PodSetAssignment, rows=rows, with_pk=True),
                               rows_prepare(model=AssignmentDomain, rows=domains))


def assignments_write(prepared: PreparedAssignments) -> None:
    """Replace the workloads' stored assignments with the prepared rows."""
    ids = prepared.workload_ids
    for start in range(0, len(ids), 2000):
        chunk = ids[start:start + 2000]
        AssignmentDomain.objects.filter(workload_id__in=chunk).delete()
        PodSetAssignment.objects.filter(workload_id__in=chunk).delete()
    prepared_insert(prepared.pod_sets)
    prepared_insert(prepared.domains)


def _admission_pod_sets(workload: cluster.Workload) -> list[dict[str, Any]]:
    return _status_pod_sets(workload.raw.get("status"))


def _status_pod_sets(status: Any) -> list[dict[str, Any]]:
    admission = status.get("admission") if isinstance(status, Mapping) else None
    return list((admission or {}).get("podSetAssignments") or [])


def workload_assignments_sync(*, workload: cluster.Workload, paths: DomainPaths | None = None) -> None:
    """Make the stored assignments match the admission in the workload's mirrored object."""
    assignment_rows_replace(workload=workload, pod_sets=_admission_pod_sets(workload), paths=paths)


# ---------------------------------------------------------------- Kubernetes JSON for results


def _time(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def pod_set_assignment_json(ps: PodSetResult, usage: Mapping[str, int]) -> dict[str, Any]:
    """One PodSetAssignment of the admission; `usage` is what the PodSet is charged in total
    (resource transformations applied), per resource."""
    out: dict[str, Any] = {"name": ps.name, "flavors": dict(ps.flavors), "count": ps.count}
    charged = {r: format_value(r, v) for r, v in usage.items() if r in ps.flavors}
    if charged:
        out["resourceUsage"] = charged
    if ps.assignment is not None:
        out["topologyAssignment"] = encode_assignment(ps.assignment)
    if ps.delayed_topology_request:
        out["delayedTopologyRequest"] = ps.delayed_topology_request
    return out


def _charged_usage(wl: EngineWorkload, ps: PodSetResult) -> Mapping[str, int]:
    """The admission's usage of a PodSet, or its requests times its count where it has none."""
    assert wl.admission is not None
    psa = next((a for a in wl.admission.pod_set_assignments if a.name == ps.name), None)
    if psa is not None and psa.resource_usage:
        return psa.resource_usage
    spec = wl.pod_set(ps.name)
    return {r: v * ps.count for r, v in spec.spec.requests.items()} if spec else {}


def workload_status_json(result: WorkloadResult) -> dict[str, Any]:
    """The Workload status the pass decided, in Kueue's shape: the workload's conditions, with
    those of the result in place of the same types (a workload left waiting keeps only in its
    result the QuotaReserved=False, and Admitted=False, that say why)."""
    wl = result.workload
    conditions = {c.type: c for c in wl.conditions}
    conditions.update((c.type, c) for c in result.conditions)
    status: dict[str, Any] = {
        "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                        "lastTransitionTime": _time(c.last_transition_time)} for c in conditions.values()],
    }
    if wl.admission is not None:
        status["admission"] = {
            "clusterQueue": wl.admission.cluster_queue,
            "podSetAssignments": [pod_set_assignment_json(ps, _charged_usage(wl, ps)) for ps in result.pod_sets],
        }
    if result.unhealthy_nodes:
        status["unhealthyNodes"] = [{"name": n} for n in result.unhealthy_nodes]
    if wl.requeue_count or wl.requeue_at is not None:
        status["requeueState"] = {"count": wl.requeue_count, **(
            {"requeueAt": _time(wl.requeue_at)} if wl.requeue_at is not None else {})}
    return status


def admission_checks_json(wl: EngineWorkload, old_status: Mapping[str, Any], now: datetime) -> list[dict] | None:
    """The Workload's `admissionChecks` to write when the pass changed them (a reservation's list
    made the ClusterQueue's, a check reset to Pending by an eviction), else None. An entry whose
    state the pass left keeps every stored field (podSetUpdates with their labels, ...); one
    whose state it changed is written anew, as Kueue writes it (its requeueAfterSeconds and
    retryCount carried, `now` as its lastTransitionTime)."""
    stored = [c for c in old_status.get("admissionChecks") or [] if isinstance(c, Mapping)]
    if [(c.name, c.state, c.message, c.retry_count) for c in wl.admission_checks] == \
            [(c.get("name"), c.get("state") or "Pending", c.get("message") or "", c.get("retryCount"))
             for c in stored]:
        return None
    by_name = {c.get("name"): c for c in stored}
    out = []
    for check in wl.admission_checks:
        before = by_name.get(check.name) or {}
        if before and (before.get("state") or "Pending") == check.state:
            entry = {**before, "message": check.message}
            if not entry.get("lastTransitionTime"):
                entry["lastTransitionTime"] = _time(now)
        else:
            entry = {"name": check.name, "state": check.state, "message": check.message,
                     "lastTransitionTime": _time(check.last_transition_time or now)}
            if check.requeue_after_seconds is not None:
                entry["requeueAfterSeconds"] = check.requeue_after_seconds
        entry.pop("retryCount", None)
        if check.retry_count is not None:
            entry["retryCount"] = check.retry_count
        out.append(entry)
    return out


def status_merged(old: Mapping[str, Any], decided: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload status after a write of `decided`: its fields replace the old ones (those
    it lacks of unhealthyNodes, admission and requeueState go), and a condition whose status
    did not change keeps its lastTransitionTime, as Kueue's SetStatusCondition keeps it."""
    status = {**old, **decided}
    for name in ("unhealthyNodes", "admission", "requeueState"):
        if name not in decided:
            status.pop(name, None)
    before = {c.get("type"): c for c in old.get("conditions") or [] if isinstance(c, Mapping)}
    conditions = []
    for c in decided.get("conditions") or []:
        kept = before.get(c.get("type"))
        if kept is not None and kept.get("status") == c.get("status") and kept.get("lastTransitionTime"):
            c = {**c, "lastTransitionTime": kept["lastTransitionTime"]}
        conditions.append(c)
    status["conditions"] = conditions
    return status


# ---------------------------------------------------------------- recording a pass

ROW_CHUNK = 2000  # names per query when reading rows to write
UPDATE_BATCH = 250  # workload rows a pass saves in one statement, while it makes the next ones
WORKLOAD_RESULT_FIELDS = ("status", "message", "cluster_queue", "unhealthy_nodes", "admitted_at", "updated_at")
# a pass sets the `status` of the mirrored object, read and written on its own (`raw_status`):
# the rest of the document, several times its size, is neither read nor written again
WORKLOAD_RESULT_KEYS = (("raw", "status", "raw_status"),)
POD_UNGATED_FIELDS = ("raw", "gated", "updated_at")
POD_TERMINATED_FIELDS = ("raw", "phase", "updated_at")


@dataclass
class PassCounts:
    """What a pass did, as its SchedulingPass row counts it."""

    admitted: int = 0
    evicted: int = 0
    nodes_replaced: int = 0
    pods_ungated: int = 0

    @classmethod
    def decided(cls, result: PassResult) -> PassCounts:
        """What the engine decided (observe mode: what it would have done; nothing is written)."""
        return cls(admitted=sum(1 for e in result.events if e.reason == "QuotaReserved"),
                   evicted=sum(1 for d in result.decisions if d.kind == WORKLOAD_EVICTED),
                   nodes_replaced=sum(1 for d in result.decisions if d.kind == NODE_REPLACED and d.replacement),
                   pods_ungated=sum(1 for p in result.pods if p.ungated))


@dataclass
class PassRecorder:
    """Writes one PassResult: workload rows, assignments, history, writes for the cluster."""

    scheduling_pass: SchedulingPass
    now: datetime
    send_to_cluster: bool
    paths: DomainPaths = field(default_factory=DomainPaths)
    rows: dict[str, cluster.Workload] = field(default_factory=dict)
    events: list[WorkloadEvent] = field(default_factory=list)
    # the workload rows a pass changes, saved in batches as they are made (each batch's UPDATE
    # runs on the server while the next rows are made), in a few statements rather than a few a row
    updates: BatchedUpdate = field(default_factory=lambda: BatchedUpdate(
        fields=WORKLOAD_RESULT_FIELDS, set_keys=WORKLOAD_RESULT_KEYS, batch_size=UPDATE_BATCH))
    resynced: list[cluster.Workload] = field(default_factory=list)
    writes: list[ClusterWrite] = field(default_factory=list)  # in the order they must be sent
    assignments: dict[tuple[int, str], TopologyAssignment] = field(default_factory=dict)
    # the resourceVersion of each Workload as the engine read it; a workload written since
    # (a source, the simulator, another writer) is left alone: its change asked for the next
    # pass, which decides on what it now is, instead of this pass writing back a stale view
    read_versions: dict[str, int] | None = None
    stale: set[str] = field(default_factory=set)
    assignment_ids: list[int] = field(default_factory=list)  # reserve_assignment_ids
    # what was written, not what the engine decided: a workload left to the next pass
    # (`stale`) is counted by the pass that writes its decision
    written: PassCounts = field(default_factory=PassCounts)

    def event(self, key: str, kind: str, *, message: str = "", node: str = "", trigger: str = "",
              details: dict | None = None, domain: str = "") -> None:
        row = self.rows.get(key)
        self.events.append(WorkloadEvent(
            workload=row, workload_key=key, cluster_queue=row.cluster_queue if row else "", kind=kind,
            at=self.now, node=node, domain=domain, trigger=trigger, message=message, details=details or {},
            scheduling_pass=self.scheduling_pass))

    def load_rows(self, result: PassResult) -> None:
        by_namespace: dict[str, set[str]] = defaultdict(set)
        for w in result.workloads:
            by_namespace[w.workload.namespace].add(w.workload.name)
        # by (namespace, name), as the index is; locked until the pass commits: no writer
        # slips in between this check and the write
        rows = cluster.Workload.objects.select_for_update().defer("raw").annotate(raw_status=json_key("raw", "status"))
        for namespace, names in sorted(by_namespace.items()):
            ordered = sorted(names)
            for start in range(0, len(ordered), ROW_CHUNK):
                for row in rows.filter(namespace=namespace, name__in=ordered[start:start + ROW_CHUNK]):
                    self.rows[row.key] = row
        if self.read_versions is not None:
            self.stale = {key for key, row in self.rows.items()
                          if key in self.read_versions and row.rv_number != self.read_versions[key]}
            if self.stale:
                logger.info("scheduling pass %s: %d workload(s) changed while it ran, left to the next pass: %s",
                            self.scheduling_pass.id, len(self.stale), ", ".join(sorted(self.stale)[:10]))

    def record(self, result: PassResult, usage: Mapping[str, UsageEntry] | None = None) -> None:
        """`usage`: the LocalQueues the pass sampled (admission fair sharing), for their status."""
        self.load_rows(result)
        # its rows are apart from the workloads': written before the server gets busy with those
        self.record_stops(result)
        self.reserve_assignment_ids(result)
        with self.updates:
            for wr in result.workloads:
                row = self.rows.get(wr.key)
                if row is not None and wr.key not in self.stale:
                    self.record_workload(row, wr)
            for decision in result.decisions:
                self.record_decision(decision)
            self.record_ungated(result)
            self.record_terminated(result)
            if usage:
                self.record_local_queue_usage(usage)
            self.flush()

    def record_local_queue_usage(self, usage: Mapping[str, UsageEntry]) -> None:
        """The LocalQueues' `status.fairSharing.admissionFairSharingStatus` after their sample,
        as Kueue's LocalQueue controller writes it: on their rows (a restart reads it back) and,
        in a real cluster, to the cluster."""
        names: dict[str, set[str]] = defaultdict(set)
        for key in usage:
            namespace, _, name = key.partition("/")
            names[namespace].add(name)
        changed = []
        now = timezone.now()
        for namespace, in_namespace in sorted(names.items()):
            for row in cluster.LocalQueue.objects.select_for_update().filter(namespace=namespace,
                                                                            name__in=sorted(in_namespace)):
                written = afs_status_json(usage[f"{row.namespace}/{row.name}"])
                raw = dict(row.raw) if isinstance(row.raw, dict) else {}
                status = dict(raw.get("status") or {})
                fair_sharing = dict(status.get("fairSharing") or {})
                before = fair_sharing.get("admissionFairSharingStatus")
                if before == written:
                    continue
                # a merge patch keeps what it does not name: a resource no longer consumed is named null
                gone = set((before or {}).get("consumedResources") or {}) - set(written["consumedResources"])
                patch = {**written, "consumedResources": {**written["consumedResources"],
                                                          **dict.fromkeys(sorted(gone))}}
                fair_sharing["admissionFairSharingStatus"] = written
                status["fairSharing"] = fair_sharing
                raw["status"] = status
                row.raw, row.updated_at = raw, now
                changed.append(row)
                if self.send_to_cluster:
                    self.writes.append(ClusterWrite(
                        kind=ClusterWrite.Kind.LOCAL_QUEUE_STATUS, namespace=row.namespace, name=row.name,
                        payload={"status": {"fairSharing": {"admissionFairSharingStatus": patch}}}))
        if changed:
            cluster.LocalQueue.objects.bulk_update(changed, ["raw", "updated_at"])

    def reserve_assignment_ids(self, result: PassResult) -> None:
        """Take the ids of the PodSetAssignments the pass may write, while the connection is
        free: one for each PodSet of a workload the pass leaves admitted (those whose
        admission does not change are not written; their ids are left unused)."""
        count = sum(len(wr.pod_sets) for wr in result.workloads
                    if wr.workload.admission is not None and wr.key in self.rows and wr.key not in self.stale)
        self.assignment_ids = ids_reserve(model=PodSetAssignment, count=count)

    def flush(self) -> None:
        # the workloads' UPDATE is the largest statement of a pass (every index of the table
        # moves): the last batch of it runs while the rows of the assignments and the history
        # are made
        self.updates.send()
        admissions = [(row, _status_pod_sets(row.raw_status)) for row in self.resynced]
        count = sum(len(pod_sets) for _, pod_sets in admissions)
        ids = self.assignment_ids[:count]
        if len(ids) < count:  # not foreseen: taken now, after the running batch
            ids += ids_reserve(model=PodSetAssignment, count=count - len(ids))
        assignments = assignments_prepare(admissions=admissions, paths=self.paths, known=self.assignments, ids=ids)
        events = instances_prepare(objs=self.events)
        writes = instances_prepare(objs=self.writes)
        self.updates.wait()
        assignments_write(assignments)
        prepared_insert(events)
        prepared_insert(writes)

    def explain(self, result: PassResult) -> None:
        """Observe mode: record the engine's reason for each waiting workload when it changes."""
        self.load_rows(result)
        last = {}
        keys = [wr.key for wr in result.workloads if wr.status in WAITING]
        for key, message in WorkloadEvent.objects.filter(
                workload_key__in=keys, kind=EventKind.PENDING).order_by("workload_key", "-at", "-id").values_list(
                "workload_key", "message"):
            last.setdefault(key, message)
        for wr in result.workloads:
            if wr.status in WAITING and wr.key in self.rows and last.get(wr.key) != wr.message:
                failed = [{"podSet": ps.name, "reason": ps.failure_reason} for ps in wr.pod_sets
                          if ps.failure_reason]
                self.event(wr.key, EventKind.PENDING, message=wr.message,
                           details={"status": wr.status, "podSets": failed, "source": "engine"})
        WorkloadEvent.objects.bulk_create(self.events, batch_size=2000)
        self.record_stops(result)

    def record_stops(self, result: PassResult) -> None:
        """Keep, per waiting workload the pass decided on, where the cycle stopped it (for
        why-pending); forget it for those that no longer wait."""
        stops: dict[str, dict[str, Any]] = {}
        # a parked equivalence class shares one record: made into JSON once
        as_json: dict[int, dict[str, Any]] = {}
        done = []
        for wr in result.workloads:
            if wr.key not in self.rows or wr.key in self.stale:
                continue
            if wr.status in WAITING and isinstance(wr.stop, StopRecord):
                record = as_json.get(id(wr.stop))
                if record is None:
                    record = as_json[id(wr.stop)] = wr.stop.to_json()
                stops[wr.key] = {"workload_key": wr.key, "step": wr.stop.step, "record": record, "at": self.now,
                                 "scheduling_pass": self.scheduling_pass}
            elif wr.status not in WAITING:
                done.append(wr.key)
        self._keep_unchanged_stops(stops)
        # replaced: the old rows go, the new ones come in one COPY (a first pass writes one a
        # waiting workload, tens of thousands)
        replaced = [*done, *stops]
        for start in range(0, len(replaced), ROW_CHUNK):
            WorkloadStop.objects.filter(workload_key__in=replaced[start:start + ROW_CHUNK]).delete()
        rows_insert(model=WorkloadStop, rows=stops.values())

    @staticmethod
    def _keep_unchanged_stops(stops: dict[str, dict[str, Any]]) -> None:
        """Leave out of `stops` the records whose stored row already says the same (step,
        message and Kueue's condition message): a head decided again and again keeps the record
        of when it was first stopped so (its `since`), and a pass writes only what changed. A
        record whose message stays while the condition's changes (one that never fits, first
        short of room and then of quota) is written again, so that it never shows a reason the
        workload no longer has."""
        keys = list(stops)
        for start in range(0, len(keys), ROW_CHUNK):
            stored = WorkloadStop.objects.filter(workload_key__in=keys[start:start + ROW_CHUNK]).annotate(
                stored_message=json_key("record", "message"), stored_reason=json_key("record", "reason"),
            ).values_list("workload_key", "step", "stored_message", "stored_reason")
            for key, step, message, reason in stored:
                record = stops[key]["record"]
                if stops[key]["step"] == step and record.get("message") == message and \
                        (record.get("reason") or "") == (reason or ""):
                    del stops[key]

    def record_workload(self, row: cluster.Workload, wr: WorkloadResult) -> None:
        new_status = WorkloadStatus(wr.status) if wr.status in WORKLOAD_STATUSES else WorkloadStatus.PENDING
        old_status = row.status
        status_json = workload_status_json(wr)
        old_status_json = row.raw_status if isinstance(row.raw_status, dict) else {}
        checks = admission_checks_json(wr.workload, old_status_json, self.now)
        if checks is not None:
            status_json["admissionChecks"] = checks
        old_admission = old_status_json.get("admission")
        changed_admission = old_admission != status_json.get("admission")
        message = wr.message
        if not wr.decided and new_status in WAITING and old_status in WAITING:
            # a waiting workload the cycle did not get to this time: nothing new to say, so
            # it keeps the status and the reason the last pass that evaluated it gave
            new_status, message = old_status, row.message
        if new_status == old_status and not changed_admission and row.message == message and checks is None and \
                row.unhealthy_nodes == wr.unhealthy_nodes and row.cluster_queue == wr.cluster_queue:
            return
        row.raw_status = status_merged(old_status_json, status_json)
        row.status = new_status
        previous_message, row.message = row.message, message
        row.cluster_queue = wr.cluster_queue or row.cluster_queue
        row.unhealthy_nodes = list(wr.unhealthy_nodes)
        if new_status in HOLDING and old_status not in HOLDING:
            row.admitted_at = self.now
        self.updates.add(row)
        if changed_admission:
            self.resynced.append(row)
            self.assignments.update(((row.pk, ps.name), ps.assignment) for ps in wr.pod_sets
                                    if ps.assignment is not None)
        self.transition_events(row, old_status, new_status, wr, previous_message)
        # the cluster gets every change of the status, as Kueue writes it: an admission, an
        # eviction, but also unhealthy nodes marked, or a waiting workload's new reason
        if self.send_to_cluster and row.raw_status != old_status_json:
            self.writes.append(ClusterWrite(kind=ClusterWrite.Kind.WORKLOAD_STATUS, namespace=row.namespace,
                                            name=row.name, payload={"status": row.raw_status}))

    def transition_events(self, row: cluster.Workload, old: str, new: str, wr: WorkloadResult,
                          previous_message: str) -> None:
        if new in HOLDING and old not in HOLDING:
            self.written.admitted += 1
            domains = sum(len(ps.assignment.domains) for ps in wr.pod_sets if ps.assignment)
            self.event(row.key, EventKind.ADMITTED, message=wr.message, details={
                "flavors": {ps.name: ps.flavors for ps in wr.pod_sets}, "domains": domains,
                "podSets": [{"name": ps.name, "count": ps.count} for ps in wr.pod_sets]})
        elif old == WorkloadStatus.QUOTA_RESERVED and new == WorkloadStatus.ADMITTED:
            # the reservation became an admission (its checks Ready, its delayed topology placed):
            # counted once, when the quota was reserved
            domains = sum(len(ps.assignment.domains) for ps in wr.pod_sets if ps.assignment)
            self.event(row.key, EventKind.ADMITTED, message=wr.message, details={
                "flavors": {ps.name: ps.flavors for ps in wr.pod_sets}, "domains": domains, "afterReservation": True,
                "podSets": [{"name": ps.name, "count": ps.count} for ps in wr.pod_sets]})
        elif new in WAITING and (old != new or message_shape(previous_message) != message_shape(row.message)):
            failed = [{"podSet": ps.name, "reason": ps.failure_reason} for ps in wr.pod_sets if ps.failure_reason]
            self.event(row.key, EventKind.PENDING, message=row.message, details={"status": new, "podSets": failed})

    def record_decision(self, d: Decision) -> None:
        kind = DECISION_EVENTS.get(d.kind)
        if kind is None or d.key in self.stale:
            return
        if d.kind == WORKLOAD_EVICTED:
            self.written.evicted += 1
        elif d.kind == NODE_REPLACED and d.replacement:
            self.written.nodes_replaced += 1
        self.event(d.key, kind, message=d.message, node=d.node, trigger=d.trigger,
                   details={"replacement": d.replacement, "podSet": d.pod_set},
                   domain=self.node_domain(d.node))

    def node_domain(self, node: str) -> str:
        if not node or "," in node:
            return ""
        labels = self.paths.labels_of(node)
        if labels is None:
            return ""
        for levels in self.paths.levels_by_flavor.values():
            if levels and levels[-1] == HOSTNAME_LABEL and all(level in labels for level in levels):
                return "/".join(labels[level] for level in levels)
        return ""

    def record_ungated(self, result: PassResult) -> None:
        by_workload: dict[str, list] = {}
        pods = {(p.namespace, p.name): p for p in result.pods if p.ungated}
        if not pods:
            return
        rows = cluster.Pod.objects.filter(name__in={name for _, name in pods})
        ungated_rows: list[cluster.Pod] = []
        for row in rows:
            pod = pods.get((row.namespace, row.name))
            if pod is None or f"{row.namespace}/{row.workload_name}" in self.stale:
                continue
            spec = dict(row.raw.get("spec") or {})
            spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or []
                                       if g.get("name") != "kueue.x-k8s.io/topology"] or None
            if spec["schedulingGates"] is None:
                spec.pop("schedulingGates")
            spec["nodeSelector"] = dict(pod.node_selector)
            row.raw = {**row.raw, "spec": spec}
            row.gated = False
            ungated_rows.append(row)
            by_workload.setdefault(f"{row.namespace}/{row.workload_name}", []).append(pod)
            if self.send_to_cluster:
                self.writes.append(ClusterWrite(kind=ClusterWrite.Kind.POD_UNGATE, namespace=row.namespace,
                                                name=row.name, payload={"nodeSelector": dict(pod.node_selector)}))
        rows_update(rows=ungated_rows, fields=POD_UNGATED_FIELDS)
        self.written.pods_ungated += len(ungated_rows)
        for key, ungated in by_workload.items():
            # the nodes they go to: the hostname level of the selector the ungater set (its
            # other levels and the flavor's own labels name no node)
            nodes = sorted({p.node_selector[HOSTNAME_LABEL] for p in ungated if HOSTNAME_LABEL in p.node_selector})
            self.event(key, EventKind.PODS_UNGATED, message=f"{len(ungated)} pod(s) ungated",
                       details={"pods": [p.name for p in ungated][:200], "nodes": nodes[:200]})

    def record_terminated(self, result: PassResult) -> None:
        if not result.terminated_pods:
            return
        stored: dict[tuple[str, str], cluster.Pod] = {}
        for row in cluster.Pod.objects.filter(name__in={t.name for t in result.terminated_pods}).order_by("id"):
            stored.setdefault((row.namespace, row.name), row)
        terminated_rows: list[cluster.Pod] = []
        for t in result.terminated_pods:
            row = stored.get((t.namespace, t.name))
            if row is None or f"{row.namespace}/{row.workload_name}" in self.stale:
                continue
            status = {**(row.raw.get("status") or {}), "phase": "Failed", "conditions": [
                {"type": "TerminatedByKueue", "status": "True", "reason": t.reason, "message": t.message,
                 "lastTransitionTime": _time(self.now)}]}
            row.raw = {**row.raw, "status": status}
            row.phase = "Failed"
            terminated_rows.append(row)
            if self.send_to_cluster:
                self.writes.append(ClusterWrite(kind=ClusterWrite.Kind.POD_FAIL, namespace=t.namespace, name=t.name,
                                                payload={"status": status}))
        rows_update(rows=terminated_rows, fields=POD_TERMINATED_FIELDS)


def workload_observed(*, workload: cluster.Workload, old_status: str | None, old_admission: Any,
                      at: datetime | None = None) -> None:
    """A workload changed in the cluster (observe mode: Kueue decides). Keep its decoded
    assignments in step and record the transition in its history."""
    at = at or timezone.now()
    admission = (workload.raw.get("status") or {}).get("admission")
    if admission != old_admission:
        workload_assignments_sync(workload=workload)
        if not old_admission and _has_topology_assignment(admission):
            # Kueue admitted it: the next observe pass compares that with this engine's decision
            AdmissionToCompare.objects.create(workload_key=workload.key, uid=workload.uid, observed_at=at)
    if old_status == workload.status:
        return
    kind = {
        WorkloadStatus.ADMITTED: EventKind.ADMITTED, WorkloadStatus.QUOTA_RESERVED: EventKind.ADMITTED,
        WorkloadStatus.EVICTED: EventKind.EVICTED, WorkloadStatus.PREEMPTED: EventKind.PREEMPTED,
        WorkloadStatus.FINISHED: EventKind.FINISHED, WorkloadStatus.PENDING: EventKind.PENDING,
        WorkloadStatus.INADMISSIBLE: EventKind.PENDING,
    }.get(workload.status)
    if old_status is None:
        kind = EventKind.QUEUED if workload.status in WAITING else kind
    elif old_status in (WorkloadStatus.EVICTED, WorkloadStatus.PREEMPTED) and workload.status in WAITING:
        kind = EventKind.REQUEUED
    if kind is not None:
        WorkloadEvent.objects.create(workload=workload, workload_key=workload.key,
                                     cluster_queue=workload.cluster_queue, kind=kind, at=at,
                                     message=workload.message, details={"observed": True})


def _has_topology_assignment(admission: Any) -> bool:
    return isinstance(admission, Mapping) and any(
        isinstance(psa, Mapping) and psa.get("topologyAssignment") for psa in admission.get("podSetAssignments") or [])


def workload_deleted(*, workload: cluster.Workload, reason: str = "", at: datetime | None = None) -> None:
    """A workload is about to leave the mirror: close its history with a Deleted event that
    says what it was doing and why it went, unless it had finished (Finished is its end).
    Called before the row is deleted; the event keeps the workload's key after that."""
    WorkloadStop.objects.filter(workload_key=workload.key).delete()  # nothing waits any more
    if workload.status == WorkloadStatus.FINISHED:
        return
    why = reason or "deleted from the cluster"
    message = f"{why}; it was {workload.status}"
    if workload.message:
        message += f": {workload.message}"
    WorkloadEvent.objects.create(workload=workload, workload_key=workload.key, cluster_queue=workload.cluster_queue,
                                 kind=EventKind.DELETED, at=at or timezone.now(), message=message,
                                 details={"status": workload.status, "reason": why})


def scheduling_pass_run(*, now: datetime | None = None, trigger: str = SchedulingPass.Trigger.MANUAL,
                        send_to_cluster: bool | None = None, observe: bool | None = None,
                        before_commit: Callable[[SchedulingPass], None] | None = None) -> SchedulingPass:
    """Run one engine pass and store its results in one transaction.

    When we decide (the simulator, imported files, or a real cluster in control mode) the
    pass runs on the process's long-lived engine state, brought up to date with the mirror's
    change log first (`tasweb.scheduling.runtime`), and writes only what it changed. In
    observe mode Kueue makes the decisions: the pass builds a throwaway state, only explains
    pending workloads (a Pending event with the engine's reason) and changes nothing else.

    `before_commit` is called inside the transaction once everything is written; raising
    there rolls the whole pass back (the leader uses it to confirm it still holds the lock).
    """
    started = time.perf_counter()
    now = now or timezone.now()
    real_cluster = getattr(settings, "TAS_CLUSTER_SOURCE", "simulator") == "kubernetes"
    if send_to_cluster is None:
        send_to_cluster = real_cluster
    if observe is None:
        # imported files have no Kueue of their own, nor has the simulator unless its stand-in
        # Kueue is on (TAS_SIM_KUEUE_PROFILE): we decide there
        from tasweb.simulator.config import simulator_observed  # the simulator imports this module

        observe = (real_cluster and getattr(settings, "TAS_MODE", "observe") == "observe") or simulator_observed()
    if observe:
        return _observe_pass_run(now=now, trigger=trigger, started=started, before_commit=before_commit)
    return _control_pass_run(now=now, trigger=trigger, send_to_cluster=send_to_cluster, started=started,
                             before_commit=before_commit)


def pass_deadline(runtime: SchedulerRuntime) -> contextlib.AbstractContextManager[bool]:
    """The time limit of a control-mode pass (TAS_SCHEDULER_PASS_TIME_LIMIT), from when its
    engine state is up to date to the commit: past it the pass is stopped and rolls back, and
    the next one starts from a state built afresh.

    Only a pass that follows one committed on the same state is limited: it does what the
    changes since then ask. The first pass on a state just built (it writes every waiting
    workload's status, tens of seconds at 100,000 workloads) and an observe-mode pass
    (built afresh each time) run to their end, since stopping them would only start the same
    work over; so does building the state, which grows with the cluster.
    """
    return deadline(pass_limit(runtime), "the scheduling pass", setting="TAS_SCHEDULER_PASS_TIME_LIMIT")


def pass_limit(runtime: SchedulerRuntime) -> float:
    """TAS_SCHEDULER_PASS_TIME_LIMIT for a pass that follows one committed on the same state,
    0 (none) for the first pass on a state just built (see `pass_deadline`)."""
    return 0.0 if runtime.last_pass is None else pass_time_limit()


def _control_pass_run(*, now: datetime, trigger: str, send_to_cluster: bool, started: float,
                      before_commit: Callable[[SchedulingPass], None] | None) -> SchedulingPass:
    # the start-time estimate copies this engine between passes: never while a pass changes it
    with engine_in_use():
        return _control_pass_locked(now=now, trigger=trigger, send_to_cluster=send_to_cluster, started=started,
                                    before_commit=before_commit)


def _control_pass_locked(*, now: datetime, trigger: str, send_to_cluster: bool, started: float,
                         before_commit: Callable[[SchedulingPass], None] | None) -> SchedulingPass:
    runtime = runtime_for_pass(gates_text=engine_settings_key(), gates=feature_gates(),
                               config=kueue_configuration()[1])
    engine = runtime.engine
    try:
        # what a pass makes is collected once, after it (runtime_committed), not again and again within
        with gc_paused():
            cycle_seconds = pass_cycle_seconds(runtime)
            with pass_deadline(runtime):
                result = engine_pass_run(engine, now, cycle_seconds=cycle_seconds)
                with transaction.atomic():
                    record = SchedulingPass.objects.create(started_at=now, trigger=trigger, mode="control",
                                                           workloads_seen=len(engine.state.workload_map),
                                                           sticky_heads=engine.queues.sticky_heads())
                    recorder = PassRecorder(record, now, send_to_cluster, read_versions=runtime.versions)
                    recorder.paths.look_up_in(engine.state.node_for_hostname)
                    recorder.record(result, usage=engine.state.take_usage_sampled())
                    if before_commit is not None:
                        before_commit(record)
                    _finish_record(record, recorder.written, started, pending=engine.queues.pending_count())
            left_alone, cut_short = recorder.stale, result.cut_short
            # the rows written and the results die here, not after the collector has walked them
            del result, recorder
    except BaseException:
        runtime_discard("the pass did not commit")
        raise
    runtime_committed(runtime, record, left_alone=left_alone)
    if cut_short:
        _more_to_admit(record, cycle_seconds)
    estimate_source_set(engine, scheduling_pass=record, now=now)
    _prune_change_log(record)
    return record


def _more_to_admit(record: SchedulingPass, cycle_seconds: float) -> None:
    """A pass whose cycles were cut short committed what they decided: mark the mirror as
    changed, so that the leader queues the next pass (TAS_SCHEDULER_DEBOUNCE later, as after a
    change that came in while a pass ran) instead of waiting for a change or the beat."""
    logger.info("scheduling pass %s: its scheduling cycles stopped at %.0f s with workloads left to try; "
                "the next pass goes on", record.id, cycle_seconds)
    try:
        cache.set(scheduler_key("changed"), uuid.uuid4().hex, timeout=None)
    except Exception:  # the beat's pass goes on instead
        logger.warning("scheduling pass %s: the next pass could not be asked for", record.id, exc_info=True)


CHANGE_LOG_PRUNE_EVERY = 50  # passes


def _prune_change_log(record: SchedulingPass) -> None:
    """Now and then, drop the change-log rows the runtime applied and those past retention."""
    if record.id % CHANGE_LOG_PRUNE_EVERY == 0:
        retention = float(getattr(settings, "TAS_SCHEDULER_CHANGE_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS))
        deleted = change_log_prune(before=timezone.now() - timedelta(seconds=retention))
        logger.debug("change log: %d rows pruned", deleted)
        stale = stops_prune()
        logger.debug("why-pending records of workloads gone from the mirror: %d pruned", stale)
        kept = float(getattr(settings, "TAS_COMPARISON_RETENTION_SECONDS", DEFAULT_COMPARISON_RETENTION_SECONDS))
        # on the pass's clock, the one comparisons are stamped with (a simulation's may not be now)
        old = comparisons_prune(before=record.started_at - timedelta(seconds=kept))
        logger.debug("comparisons with Kueue older than %.0f s: %d pruned", kept, old)


def stops_prune() -> int:
    """Drop the scheduler's stop records of workloads no longer in the mirror (deleted by a
    path that did not go through workload_deleted, e.g. a table emptied by a re-list)."""
    live = cluster.Workload.objects.annotate(
        key=Concat("namespace", Value("/"), "name", output_field=CharField())).values("key")
    deleted, _ = WorkloadStop.objects.exclude(workload_key__in=live).delete()
    return deleted


# A time-limited pass stops its scheduling cycles after this share of the limit, leaving the
# rest for writing what they decided: at 50,000 nodes a cycle admits one head of a ClusterQueue
# in about half a millisecond, and writing it takes about as long again.
CYCLES_SHARE_OF_LIMIT = 1 / 3


def pass_cycle_seconds(runtime: SchedulerRuntime) -> float:
    """How long a control-mode pass may run scheduling cycles (0: as long as they admit): a
    share of TAS_SCHEDULER_PASS_TIME_LIMIT, for the passes that limit applies to."""
    return pass_limit(runtime) * CYCLES_SHARE_OF_LIMIT


def engine_pass_run(engine: Engine, now: datetime, *, cycle_seconds: float = 0.0) -> PassResult:
    """One pass of the long-lived engine, with the result of every workload it changed (in the
    engine's order): what the recorder writes. With `cycle_seconds`, its scheduling cycles stop
    once they have run that long (`result.cut_short`: the next pass goes on from there, as
    Kueue's cycles go on one after another; a pass after a large release admits thousands)."""
    stop = None
    if cycle_seconds > 0:
        until = time.monotonic() + cycle_seconds

        def stop() -> bool:
            return time.monotonic() > until
    outcome = engine.run_pass(now, stop=stop)
    result = outcome.result
    result.cut_short = outcome.stopped
    order = engine.state.order
    result.workloads = engine.results_for(sorted(outcome.changed, key=lambda k: order.get(k, 0)), outcome)
    annotate_failures(result.workloads, outcome.replacement_failures)
    return result


def _observe_pass_run(*, now: datetime, trigger: str, started: float,
                      before_commit: Callable[[SchedulingPass], None] | None) -> SchedulingPass:
    read_versions: dict[str, int] = {}
    estimate_source_set(None)  # the previous pass's engine is not kept while this one is built
    # the admissions to compare are read before the mirror: each of them is in what is read next
    marks = list(AdmissionToCompare.objects.order_by("id").values_list("id", "workload_key", "observed_at"))
    parsed = engine_inputs(read_versions)
    engine = Engine.from_parsed(parsed, feature_gates(), config=kueue_configuration()[1])
    engine.queues.restore_sticky(sticky_heads_recorded())
    # before the pass: on the mirror as read, each compared workload's admission taken back
    # for its comparison and put back after it (scheduler.compare); the pass then runs as ever
    comparisons = compare_admissions(engine, {key for _, key, _ in marks}, now) if marks else []
    result = engine_pass(engine, now, cycles=None)
    with transaction.atomic():
        record = SchedulingPass.objects.create(started_at=now, trigger=trigger, mode="observe",
                                               workloads_seen=len(result.workloads),
                                               sticky_heads=engine.queues.sticky_heads())
        recorder = PassRecorder(record, now, False, read_versions=read_versions)
        recorder.paths.remember(parsed.nodes)
        recorder.explain(result)
        comparisons_record(scheduling_pass=record, comparisons=comparisons, marks=marks, now=now)
        if before_commit is not None:
            before_commit(record)
        _finish_record(record, PassCounts.decided(result), started,
                       pending=sum(1 for w in result.workloads if w.status in WAITING))
    # the estimate plays from what this pass decided would happen now (Kueue may decide otherwise)
    estimate_source_set(engine, scheduling_pass=record, now=now)
    _prune_change_log(record)  # no runtime follows the log here: rows only age out
    return record


def comparisons_record(*, scheduling_pass: SchedulingPass | None, comparisons: list[Comparison],
                       marks: list[tuple[int, str, datetime]], now: datetime) -> int:
    """Store one AdmissionComparison per compared admission and drop the marks that asked for
    them (a mark whose workload no longer holds an admission is dropped uncompared: there is
    nothing left to compare). Returns how many rows were stored."""
    seen: dict[str, datetime] = {}
    for _, key, observed_at in marks:
        seen[key] = min(observed_at, seen.get(key, observed_at))
    keys = [c.key for c in comparisons]
    rows_by_key: dict[str, cluster.Workload] = {}
    for start in range(0, len(keys), ROW_CHUNK):
        names = {k.partition("/")[2] for k in keys[start:start + ROW_CHUNK]}
        for row in cluster.Workload.objects.filter(name__in=names).only("id", "namespace", "name"):
            rows_by_key.setdefault(row.key, row)
    rows = []
    for c in comparisons:
        admitted_at = seen.get(c.key, now)
        identity = (c.reserved_at or admitted_at).isoformat()
        rows.append(AdmissionComparison(
            workload=rows_by_key.get(c.key), workload_key=c.key, namespace=c.key.partition("/")[0], uid=c.uid,
            admission=identity, cluster_queue=c.cluster_queue, flavor=c.flavor, category=c.category,
            kueue=[p.to_json() for p in c.kueue], engine=[p.to_json() for p in c.engine], pod_sets=c.pod_sets,
            reason=c.reason, stop=c.stop.to_json() if c.stop is not None else None, admitted_at=admitted_at,
            compared_at=now, scheduling_pass=scheduling_pass))
    # an admission compared already (a mark written twice for it) keeps its first row
    AdmissionComparison.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    ids = [pk for pk, _, _ in marks]
    for start in range(0, len(ids), ROW_CHUNK):
        AdmissionToCompare.objects.filter(id__in=ids[start:start + ROW_CHUNK]).delete()
    return len(rows)


DEFAULT_COMPARISON_RETENTION_SECONDS = 7 * 24 * 3600.0


def comparisons_prune(*, before: datetime) -> int:
    deleted, _ = AdmissionComparison.objects.filter(admitted_at__lt=before).delete()
    return deleted


def _finish_record(record: SchedulingPass, counts: PassCounts, started: float, *, pending: int) -> None:
    record.admitted = counts.admitted
    record.evicted = counts.evicted
    record.nodes_replaced = counts.nodes_replaced
    record.pods_ungated = counts.pods_ungated
    record.pending = pending
    record.finished_at = timezone.now()
    record.duration_ms = int((time.perf_counter() - started) * 1000)
    record.save()


# ---------------------------------------------------------------- triggers and the leader
#
# Passes are triggered by changes (sources call request_pass after mirroring one) and by
# Celery beat. Three cache entries (Redis, or the embedded file cache), keyed per database,
# turn a burst of changes into one pass shortly after, without losing any:
#   "changed"   a token replaced at every change, after the change is committed;
#   "done"      the "changed" token the last committed pass read before reading the mirror;
#               the two differ exactly while some change has not been read by any pass;
#   "scheduled" set while a debounced pass task is queued (expires on its own if the task
#               message is lost, e.g. with Redis restarted empty).

DEFAULT_DEBOUNCE = 1.0
# How long "scheduled" outlives the task's countdown (TAS_SCHEDULER_SCHEDULED_SLACK): the
# time a queued task may wait for a free worker before another change is allowed to queue
# one more. Short, because it is also how long a mark left by a task lost with its worker
# (SIGKILL, Redis restarted empty) holds back change-triggered passes; a surplus task finds
# every change read and returns ("covered").
DEFAULT_SCHEDULED_SLACK = 8.0


def scheduled_slack() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_SCHEDULED_SLACK", DEFAULT_SCHEDULED_SLACK))


@dataclass(frozen=True)
class LeaderPassOutcome:
    """What a triggered pass did: "ran" (`scheduling_pass` is its record), "covered" (every
    change had been read by a pass already), or "busy" (another leader held the lock)."""

    outcome: str
    scheduling_pass: SchedulingPass | None = None


def pass_debounce() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_DEBOUNCE", DEFAULT_DEBOUNCE))


def changes_pending() -> bool:
    """Whether a change was mirrored that no committed pass has read yet."""
    changed = cache.get(scheduler_key("changed"))
    return changed is not None and changed != cache.get(scheduler_key("done"))


def pass_schedule(*, countdown: float) -> bool:
    """Queue one change-triggered pass in `countdown` seconds unless one is queued already;
    True when this call queued it."""
    scheduled = scheduler_key("scheduled")
    if not cache.add(scheduled, 1, timeout=max(1, math.ceil(countdown + scheduled_slack()))):
        return False
    from tasweb.scheduling.tasks import run_pass  # tasks import this module

    try:
        # no countdown at all for "now": a message with an ETA waits for the worker's timer
        options = {"countdown": countdown} if countdown > 0 else {}
        run_pass.apply_async(kwargs={"trigger": SchedulingPass.Trigger.CHANGE}, **options)
    except Exception:
        cache.delete(scheduled)  # so that the next change tries again
        raise
    return True


def request_pass(*, countdown: float | None = None) -> None:
    """Tell the scheduler the mirror changed: a pass follows within `countdown` seconds
    (default TAS_SCHEDULER_DEBOUNCE), one for a whole burst of changes.

    Cheap (two cache writes, and one task message per burst). Called inside a transaction,
    it takes effect when the transaction commits, so the pass is sure to read the change.
    Raises when the cache or the broker is unreachable (redis/kombu connection errors): the
    caller's task retries, its mirror writes being idempotent.
    """
    delay = pass_debounce() if countdown is None else countdown

    def note_change() -> None:
        cache.set(scheduler_key("changed"), uuid.uuid4().hex, timeout=None)
        pass_schedule(countdown=delay)

    transaction.on_commit(note_change)


def _test_only_hold(record: SchedulingPass) -> None:
    # Test-only, off unless the fault tests (tests/scheduling) set these variables: hold the
    # pass open inside its transaction, everything written but nothing committed, long
    # enough to kill its worker mid-write, and note which process is in there.
    trace = os.environ.get("TAS_TEST_PASS_TRACE")
    if trace:
        line = json.dumps({"pid": os.getpid(), "trigger": record.trigger, "at": time.time()})
        with open(trace, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    delay = float(os.environ.get("TAS_TEST_PASS_DELAY") or 0)
    if delay > 0:
        time.sleep(delay)


def leader_pass_run(*, trigger: str, now: datetime | None = None) -> LeaderPassOutcome:
    """Run a scheduling pass as the scheduler's leader, or leave it to the current leader.

    * "change": runs only while some change is unread; when another leader is busy, queues
      itself again (debounced), so the change is read even if that leader dies mid-pass.
    * "beat": runs unless another leader holds the lock right now (the next beat is near).
    * "manual": runs; when another leader is busy, it becomes a change request.

    The pass commits only if the lock is confirmed right before the commit; otherwise it
    rolls back with LeadershipLost (transient: the task retries).
    """
    if trigger == SchedulingPass.Trigger.CHANGE:
        cache.delete(scheduler_key("scheduled"))  # this task is running: later changes queue another
        if not changes_pending():
            return LeaderPassOutcome("covered")
    wait = 0.0 if trigger == SchedulingPass.Trigger.BEAT else lock_wait()
    with leadership(wait=wait) as lock:
        if lock is None:
            if held_in_this_process():
                # not news: a pass of this worker is running, and it or the next one covers this
                logger.debug("scheduling pass (%s): another pass of this worker holds the lock; left to it", trigger)
            else:
                logger.info("scheduling pass (%s): another worker is the leader; left to it", trigger)
            if trigger == SchedulingPass.Trigger.CHANGE:
                pass_schedule(countdown=pass_debounce())
            elif trigger != SchedulingPass.Trigger.BEAT:
                request_pass()
            return LeaderPassOutcome("busy")

        def confirm_leadership(record: SchedulingPass) -> None:
            _test_only_hold(record)
            lock.confirm()

        reading = cache.get(scheduler_key("changed"))  # before the pass reads the mirror
        record = scheduling_pass_run(now=now, trigger=trigger, before_commit=confirm_leadership)
        if reading is not None:
            cache.set(scheduler_key("done"), reading, timeout=None)
    logger.info("scheduling pass %s (%s): %s admitted, %s evicted, %s pending, %s ms", record.id, trigger,
                record.admitted, record.evicted, record.pending, record.duration_ms)
    if changes_pending():  # a change arrived while the pass ran
        pass_schedule(countdown=pass_debounce())
    try:
        estimate_schedule()  # start times, on the state this pass left (after any pass queued above)
    except Exception:  # the predictions only age; the next pass queues another estimate
        logger.warning("start-time estimate not queued", exc_info=True)
    return LeaderPassOutcome("ran", record)


__all__ = [
    "DomainPaths",
    "LeaderPassOutcome",
    "PassRecorder",
    "assignment_rows_replace",
    "changes_pending",
    "comparisons_record",
    "feature_gates",
    "leader_pass_run",
    "pass_schedule",
    "request_pass",
    "scheduling_pass_run",
    "workload_assignments_sync",
    "workload_observed",
]
