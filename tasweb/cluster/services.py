"""Writes to the mirrored cluster. Every source (the Kubernetes watch, the simulator, file
imports) goes through these functions, so every row is extracted the same way.

Writes are idempotent: an object is keyed by its uid and an update carrying a
resourceVersion older than the stored one is ignored, so a replayed watch event, or a
list that races with a watch, changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.cluster import is_tas_pod
from scheduler.codec import decode_assignment
from scheduler.errors import InputError
from scheduler.model import TOPOLOGY_GATE
from scheduler.parse import (
    Where,
    object_label,
    parse_admission_check,
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_node,
    parse_pod,
    parse_priority_class,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
)
from tasweb.cluster.models import KINDS, MirroredObject, WorkloadStatus

WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
PODSET_LABEL = "kueue.x-k8s.io/podset"


@dataclass(frozen=True)
class UpsertResult:
    kind: str
    uid: str
    created: bool
    changed: bool  # False when the stored object was as new or newer


def resource_version_number(rv: object) -> int:
    """etcd's resourceVersions are integers; an opaque one sorts as 0 (always applied)."""
    try:
        return int(str(rv))
    except (TypeError, ValueError):
        return 0


def object_uid(kind: str, obj: Mapping) -> str:
    """The object's uid, or a stable stand-in for objects that have none (files, tests)."""
    meta = obj.get("metadata") or {}
    uid = meta.get("uid")
    if uid:
        return str(uid)
    ns = meta.get("namespace") or ""
    return f"{kind}:{ns}/{meta.get('name', '')}"


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ---------------------------------------------------------------- field extraction


def _node_fields(obj: Mapping) -> dict[str, Any]:
    node = parse_node(obj, Where(object_label(obj)))
    return {
        "hostname": node.labels.get("kubernetes.io/hostname", node.name),
        "labels": dict(node.labels),
        "allocatable": dict(node.allocatable),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect,
                    "timeAdded": t.time_added.isoformat() if t.time_added else None} for t in node.taints],
        "unschedulable": node.unschedulable,
        "ready": node.ready or "",
        "ready_since": node.ready_since,
    }


def _pod_fields(obj: Mapping) -> dict[str, Any]:
    pod = parse_pod(obj, Where(object_label(obj)))
    return {
        "node_name": pod.node_name,
        "phase": pod.phase,
        "workload_name": pod.annotations.get(WORKLOAD_ANNOTATION, ""),
        "pod_set": pod.labels.get(PODSET_LABEL, ""),
        "gated": TOPOLOGY_GATE in pod.scheduling_gates,
        "tas": is_tas_pod(pod),
        "deleting": pod.deleting,
        "requests": dict(pod.spec.requests),
    }


def workload_status(obj: Mapping) -> tuple[str, str]:
    """Status and message as Kueue's conditions state them."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []
                  if isinstance(c, Mapping)}

    def true(kind: str) -> bool:
        return (conditions.get(kind) or {}).get("status") == "True"

    def message(kind: str) -> str:
        return str((conditions.get(kind) or {}).get("message") or "")

    if true("Finished"):
        return WorkloadStatus.FINISHED, message("Finished")
    if true("Evicted"):
        return WorkloadStatus.EVICTED, message("Evicted")
    if true("Preempted"):
        return WorkloadStatus.PREEMPTED, message("Preempted")
    if true("Admitted"):
        return WorkloadStatus.ADMITTED, message("Admitted")
    if true("QuotaReserved"):
        return WorkloadStatus.QUOTA_RESERVED, message("QuotaReserved")
    if (obj.get("status") or {}).get("admission") and "QuotaReserved" not in conditions:
        return WorkloadStatus.ADMITTED, ""
    reason = (conditions.get("QuotaReserved") or {}).get("reason")
    status = WorkloadStatus.INADMISSIBLE if reason == "Inadmissible" else WorkloadStatus.PENDING
    return status, message("QuotaReserved")


def _workload_fields(obj: Mapping) -> dict[str, Any]:
    wl = parse_workload(obj, Where(object_label(obj)), decode_assignment)
    status, message = workload_status(obj)
    conditions = {c.type: c for c in wl.conditions}
    admitted = conditions.get("Admitted")
    finished = conditions.get("Finished")
    return {
        "queue_name": wl.queue_name,
        "cluster_queue": wl.admission.cluster_queue if wl.admission else "",
        "status": status,
        "message": message,
        "priority": wl.priority or 0,
        "pod_count": sum(ps.count for ps in wl.pod_sets),
        "unhealthy_nodes": list(wl.unhealthy_nodes),
        "admitted_at": admitted.last_transition_time if admitted and admitted.status == "True" else None,
        "finished_at": finished.last_transition_time if finished and finished.status == "True" else None,
    }


def _simple(parser, **fields):
    def extract(obj: Mapping) -> dict[str, Any]:
        parsed = parser(obj, Where(object_label(obj)))
        return {name: getter(parsed) for name, getter in fields.items()}
    return extract


EXTRACTORS = {
    "Node": _node_fields,
    "Pod": _pod_fields,
    "Workload": _workload_fields,
    "Topology": _simple(parse_topology, levels=lambda t: list(t.levels)),
    "ResourceFlavor": _simple(parse_resource_flavor, topology_name=lambda f: f.topology_name or "",
                              node_labels=lambda f: dict(f.node_labels)),
    "ClusterQueue": _simple(parse_cluster_queue, cohort=lambda c: c.cohort or ""),
    "LocalQueue": _simple(parse_local_queue, cluster_queue=lambda q: q.cluster_queue),
    "Cohort": _simple(parse_cohort, parent=lambda c: c.parent or ""),
    "AdmissionCheck": _simple(parse_admission_check, controller_name=lambda a: a.controller_name),
    "WorkloadPriorityClass": _simple(parse_priority_class, value=lambda p: p.value),
}


def extract_fields(kind: str, obj: Mapping) -> tuple[dict[str, Any], str]:
    """The typed columns of an object, and why the engine cannot read it ("" when it can)."""
    try:
        return EXTRACTORS[kind](obj), ""
    except InputError as exc:
        return {}, str(exc)


# ---------------------------------------------------------------- writes


def model_for(kind: str) -> type[MirroredObject]:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"kind {kind!r} is not mirrored (known: {', '.join(KINDS)})") from None


def _row_values(kind: str, obj: Mapping) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    fields, invalid = extract_fields(kind, obj)
    if kind == "Workload" and not invalid:
        # the queue's ClusterQueue until an admission names it
        fields.setdefault("cluster_queue", "")
    return {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "resource_version": str(meta.get("resourceVersion") or ""),
        "rv_number": resource_version_number(meta.get("resourceVersion")),
        "raw": dict(obj),
        "invalid_reason": invalid,
        "created_at": _timestamp(meta.get("creationTimestamp")),
        **fields,
    }


def object_upsert(*, kind: str, obj: Mapping) -> UpsertResult:
    """Store one object; a stale resourceVersion (older than stored) is ignored."""
    model = model_for(kind)
    uid = object_uid(kind, obj)
    values = _row_values(kind, obj)
    with transaction.atomic():
        row = model.objects.select_for_update().filter(uid=uid).first()
        if row is None:
            model.objects.create(uid=uid, **values)
            return UpsertResult(kind, uid, created=True, changed=True)
        if values["rv_number"] and row.rv_number and values["rv_number"] <= row.rv_number:
            return UpsertResult(kind, uid, created=False, changed=False)
        for name, value in values.items():
            setattr(row, name, value)
        row.save()
        return UpsertResult(kind, uid, created=False, changed=True)


def object_delete(*, kind: str, obj: Mapping) -> bool:
    """Remove an object (a DELETED event); True when a row was removed."""
    model = model_for(kind)
    deleted, _ = model.objects.filter(uid=object_uid(kind, obj)).delete()
    return bool(deleted)


def objects_resync(*, kind: str, objects: Iterable[Mapping]) -> dict[str, int]:
    """Make the mirror of one kind equal to a full list: upsert every object, delete the rest.

    Used after a (re-)list, e.g. on 410 Gone: whatever was deleted while the watch was down
    disappears, whatever changed is updated, and unchanged rows are not rewritten.
    """
    model = model_for(kind)
    objects = list(objects)
    seen: set[str] = set()
    created = changed = 0
    with transaction.atomic():
        stored = dict(model.objects.values_list("uid", "rv_number"))
        new_rows = []
        for obj in objects:
            uid = object_uid(kind, obj)
            seen.add(uid)
            values = _row_values(kind, obj)
            if uid not in stored:
                new_rows.append(model(uid=uid, **values))
                created += 1
            elif not (values["rv_number"] and stored[uid] and values["rv_number"] <= stored[uid]):
                model.objects.filter(uid=uid).update(**values, updated_at=timezone.now())
                changed += 1
        model.objects.bulk_create(new_rows, batch_size=1000)
        gone = [uid for uid in stored if uid not in seen]
        for start in range(0, len(gone), 1000):
            model.objects.filter(uid__in=gone[start:start + 1000]).delete()
    return {"created": created, "updated": changed, "deleted": len(gone), "total": len(objects)}
