"""Writes to the mirrored cluster. Every source (the Kubernetes watch, the simulator, file
imports) goes through these functions, so every row is extracted the same way.

Writes are idempotent: an object is keyed by its uid and an update carrying a
resourceVersion older than the stored one is ignored, so a replayed watch event, or a
list that races with a watch, changes nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models import Field, Model, OuterRef, Subquery
from django.utils import timezone

from scheduler.cluster import is_concurrent_admission_parent, is_tas_pod, priority_boost
from scheduler.codec import decode_assignment
from scheduler.errors import InputError
from scheduler.model import STOP_NONE, TOPOLOGY_GATE
from scheduler.parse import (
    Where,
    object_label,
    parse_admission_check,
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_namespace,
    parse_node,
    parse_pod,
    parse_priority_class,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
)
from scheduler.validate import assignment_level_error
from tasweb.cluster.models import KINDS, MirroredObject, ResourceFlavor, Topology, WorkloadStatus

logger = logging.getLogger(__name__)

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


def stop_policy_of(raw: Any) -> str:
    """A ClusterQueue's or LocalQueue's spec.stopPolicy as stored (None when unset)."""
    spec = raw.get("spec") if isinstance(raw, Mapping) else None
    value = spec.get("stopPolicy") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) and value else STOP_NONE


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
    reserved = true("QuotaReserved") or (
        bool((obj.get("status") or {}).get("admission")) and "QuotaReserved" not in conditions)
    # evicted while it still holds quota: its pods are stopping; once the reservation is gone it waits again
    if reserved and true("Preempted"):
        return WorkloadStatus.PREEMPTED, message("Preempted")
    if reserved and true("Evicted"):
        return WorkloadStatus.EVICTED, message("Evicted")
    if true("Admitted"):
        return WorkloadStatus.ADMITTED, message("Admitted")
    if true("QuotaReserved"):
        return WorkloadStatus.QUOTA_RESERVED, message("QuotaReserved")
    if (obj.get("status") or {}).get("admission") and "QuotaReserved" not in conditions:
        return WorkloadStatus.ADMITTED, ""
    reason = (conditions.get("QuotaReserved") or {}).get("reason")
    status = WorkloadStatus.INADMISSIBLE if reason == "Inadmissible" else WorkloadStatus.PENDING
    return status, message("QuotaReserved") or (message("Evicted") if true("Evicted") else "")


# flavor set -> levels, while a bulk write builds its rows (see flavor_levels_cached)
_levels_cache: dict[frozenset[str], dict[str, list[str]]] | None = None


@contextlib.contextmanager
def flavor_levels_cached() -> Iterator[None]:
    """Read each flavor set's Topology levels once for the rows of a bulk write, not once a
    row; the rows must be built (and the levels read) before the write's COPY starts: a COPY
    in progress holds the connection, and a query on it would wait forever."""
    global _levels_cache
    outer, _levels_cache = _levels_cache, {} if _levels_cache is None else _levels_cache
    try:
        yield
    finally:
        _levels_cache = outer


def _flavor_levels(flavors: set[str]) -> dict[str, list[str]]:
    """The Topology levels of each named TAS flavor, among valid mirrored objects."""
    if _levels_cache is not None:
        key = frozenset(flavors)
        if key not in _levels_cache:
            _levels_cache[key] = _read_flavor_levels(flavors)
        return _levels_cache[key]
    return _read_flavor_levels(flavors)


def _read_flavor_levels(flavors: set[str]) -> dict[str, list[str]]:
    # one query (each flavor with its Topology's levels): a watch event of an admitted
    # Workload is checked on its own, and a second round trip would be most of its cost
    levels = Topology.objects.filter(name=OuterRef("topology_name"), invalid_reason="").values("levels")[:1]
    return {name: topology_levels for name, topology_levels in
            ResourceFlavor.objects.filter(name__in=flavors, invalid_reason="").exclude(topology_name="")
            .annotate(topology_levels=Subquery(levels)).values_list("name", "topology_levels")
            if topology_levels is not None}


def _check_assignment_levels(wl) -> None:
    if wl.admission is None:
        return
    flavors = {f for psa in wl.admission.pod_set_assignments if psa.topology_assignment is not None
               for f in psa.flavors.values()}
    if flavors:
        error = assignment_level_error(wl, _flavor_levels(flavors))
        if error is not None:
            raise error


def _workload_fields(obj: Mapping) -> dict[str, Any]:
    wl = parse_workload(obj, Where(object_label(obj)), decode_assignment)
    _check_assignment_levels(wl)
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
        "priority_boost": priority_boost(wl),
        "concurrent_admission_parent": is_concurrent_admission_parent(wl),
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
    # a Cohort closing a cycle is no error: Kueue keeps it and holds the ClusterQueues under the
    # cycle inactive, as the engine does
    "Cohort": _simple(parse_cohort, parent=lambda c: c.parent or ""),
    "AdmissionCheck": _simple(parse_admission_check, controller_name=lambda a: a.controller_name),
    "WorkloadPriorityClass": _simple(parse_priority_class, value=lambda p: p.value),
    "Namespace": _simple(parse_namespace, labels=lambda n: dict(n.labels)),
}


def extract_fields(kind: str, obj: Mapping) -> tuple[dict[str, Any], str]:
    """The typed columns of an object, and why the engine cannot read it ("" when it can).
    An object the engine fails on in a way it does not foresee is kept out of the passes the
    same way, with the failure in the log, so that one object cannot stop the mirror."""
    try:
        return EXTRACTORS[kind](obj), ""
    except InputError as exc:
        return {}, str(exc)
    except Exception as exc:  # a bug of the engine's reading, logged whole
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        logger.exception("the engine failed to read %s %r; it is kept out of the scheduling passes", kind, name)
        return {}, (f"the engine failed to read this object ({type(exc).__name__}: {exc}); it is kept out of the "
                    "scheduling passes, and the service's log has the details")


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


# Kinds whose objects are written again periodically with nothing but heartbeats changed: a
# kubelet reports its Node's status every nodeStatusReportFrequency (5 min by default), new
# lastHeartbeatTime in every condition, even when nothing changed -- about 170 updates a second
# on a 50,000-node cluster.
HEARTBEATING_KINDS = frozenset({"Node"})


def _without_heartbeats(obj: Mapping) -> dict[str, Any]:
    """The object but for what a status report changes when nothing else did: the
    resourceVersion, managedFields' times and the conditions' lastHeartbeatTime."""
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        meta = {key: value for key, value in meta.items() if key not in ("resourceVersion", "managedFields")}
    status = obj.get("status")
    if isinstance(status, Mapping) and isinstance(status.get("conditions"), list):
        status = {**status, "conditions": [
            {key: value for key, value in c.items() if key != "lastHeartbeatTime"} if isinstance(c, Mapping) else c
            for c in status["conditions"]]}
    return {**obj, "metadata": meta, "status": status}


def heartbeat_only(stored: Mapping, obj: Mapping) -> bool:
    """Whether `obj` differs from the stored object only by a heartbeat (`_without_heartbeats`)."""
    return _without_heartbeats(stored) == _without_heartbeats(obj)


def _unchanged(kind: str, obj: Mapping, stored_rv: int, stored_raw: Mapping | None) -> bool:
    """An update that changes nothing worth a write: stale (no newer than the stored row), or
    only a heartbeat of a kind that has them. Such a row keeps its older resourceVersion and
    raw object; a later change, or a list, stores the whole object again."""
    if _stale(_object_rv(obj), stored_rv):
        return True
    return kind in HEARTBEATING_KINDS and isinstance(stored_raw, Mapping) and heartbeat_only(stored_raw, obj)


def object_upsert(*, kind: str, obj: Mapping) -> UpsertResult:
    """Store one object; a stale resourceVersion (older than stored), or a heartbeat that
    changed nothing else, is ignored."""
    model = model_for(kind)
    uid = object_uid(kind, obj)
    if connection.vendor == "postgresql":
        # A replayed event is only looked up (no parse, no write: ON CONFLICT would lock the
        # row, which costs a commit); the statement itself re-checks the version, so a
        # concurrent writer in between cannot be overwritten by an older object.
        compared = ("rv_number", "raw") if kind in HEARTBEATING_KINDS else ("rv_number",)
        stored = model.objects.filter(uid=uid).values_list(*compared).first()
        if stored is not None and _unchanged(kind, obj, stored[0], stored[1] if len(stored) > 1 else None):
            return UpsertResult(kind, uid, created=False, changed=False)
        created = _pg_upsert(model, uid, _row_values(kind, obj))
        return UpsertResult(kind, uid, created=bool(created), changed=created is not None)
    values = _row_values(kind, obj)
    with transaction.atomic():
        row = model.objects.select_for_update().filter(uid=uid).first()
        if row is None:
            model.objects.create(uid=uid, **values)
            return UpsertResult(kind, uid, created=True, changed=True)
        if _unchanged(kind, obj, row.rv_number, row.raw):
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
    disappears, whatever changed is updated, and unchanged rows are not rewritten (nor
    even parsed: an object whose resourceVersion is not newer than the stored one is skipped,
    and so is one whose only change is a heartbeat, `heartbeat_only`).
    """
    model = model_for(kind)
    objects = list(objects)
    seen: set[str] = set()
    new: list[tuple[str, Mapping]] = []
    newer: list[tuple[str, Mapping]] = []
    with transaction.atomic():
        stored = dict(model.objects.values_list("uid", "rv_number"))
        for obj in objects:
            uid = object_uid(kind, obj)
            seen.add(uid)
            if uid not in stored:
                new.append((uid, obj))
            elif not _stale(_object_rv(obj), stored[uid]):
                newer.append((uid, obj))
        if kind in HEARTBEATING_KINDS:
            newer = _not_heartbeats_only(model, newer)
        # the Topology levels of admitted Workloads' flavors read once for the listing, not once
        # an object; every row built before the COPY starts
        with flavor_levels_cached():
            rows = [(uid, _row_values(kind, obj)) for uid, obj in new]
            updated = [(uid, _row_values(kind, obj)) for uid, obj in newer]
        if connection.vendor == "postgresql":
            _pg_insert(model, rows)
            _pg_update(model, updated)
        else:
            model.objects.bulk_create([model(uid=uid, **values) for uid, values in rows], batch_size=1000)
            for uid, values in updated:
                model.objects.filter(uid=uid).update(**values, updated_at=timezone.now())
        gone = [uid for uid in stored if uid not in seen]
        for start in range(0, len(gone), 1000):
            model.objects.filter(uid__in=gone[start:start + 1000]).delete()
    return {"created": len(new), "updated": len(newer), "deleted": len(gone), "total": len(objects)}


def _not_heartbeats_only(model: type[MirroredObject], newer: list[tuple[str, Mapping]],
                         chunk: int = 1000) -> list[tuple[str, Mapping]]:
    """Of listed objects newer than their rows, those that changed more than heartbeats."""
    out: list[tuple[str, Mapping]] = []
    for start in range(0, len(newer), chunk):
        part = newer[start:start + chunk]
        stored = dict(model.objects.filter(uid__in=[uid for uid, _ in part]).values_list("uid", "raw"))
        out.extend((uid, obj) for uid, obj in part
                   if not isinstance(stored.get(uid), Mapping) or not heartbeat_only(stored[uid], obj))
    return out


# ---------------------------------------------------------------- PostgreSQL bulk paths
#
# The same writes as the generic ORM code above, in fewer round trips and less work: a watch
# event is a version check and one INSERT ... ON CONFLICT statement (instead of a locked read
# and a save in a transaction), a list's rows go in with COPY (Django's bulk INSERT of wide
# JSON rows spends its time escaping them), and updates join a COPY-filled temporary table.


def _object_rv(obj: Mapping) -> int:
    return resource_version_number((obj.get("metadata") or {}).get("resourceVersion"))


def _stale(new_rv: int, stored_rv: int) -> bool:
    """Whether an object at resourceVersion `new_rv` is no newer than the stored one."""
    return bool(new_rv and stored_rv and new_rv <= stored_rv)


def _stored_fields(model: type[MirroredObject]) -> list[Field]:
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def _full_row(model: type[MirroredObject], uid: str, values: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """Every column of a new row: the model's defaults, then what the object says."""
    row = {f.attname: f.get_default() for f in _stored_fields(model)}
    row.update(values, uid=uid, updated_at=now)
    return row


def _db_values(fields: list[Field], row: Mapping[str, Any]) -> list[Any]:
    return [f.get_db_prep_save(row[f.attname], connection) for f in fields]


def _pg_upsert(model: type[MirroredObject], uid: str, values: Mapping[str, Any]) -> bool | None:
    """Insert or update one row in one statement: True when created, False when updated,
    None when the stored row was as new or newer (left alone)."""
    fields = _stored_fields(model)
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    columns = ", ".join(qn(f.column) for f in fields)
    changed = [model._meta.get_field(name) for name in (*values, "updated_at")]
    assignments = ", ".join(f"{qn(f.column)} = EXCLUDED.{qn(f.column)}" for f in changed)
    rv = qn(model._meta.get_field("rv_number").column)
    sql = (f"INSERT INTO {table} AS stored ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) "
           f"ON CONFLICT ({qn(model._meta.get_field('uid').column)}) DO UPDATE SET {assignments} "
           f"WHERE EXCLUDED.{rv} = 0 OR stored.{rv} = 0 OR EXCLUDED.{rv} > stored.{rv} "
           f"RETURNING (xmax = 0)")
    with connection.cursor() as cursor:
        cursor.execute(sql, _db_values(fields, _full_row(model, uid, values, timezone.now())))
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _pg_insert(model: type[MirroredObject], rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
    rows_insert(model=model, rows=({"uid": uid, **values} for uid, values in rows))


def _pg_update(model: type[MirroredObject], rows: list[tuple[str, dict[str, Any]]]) -> None:
    """Update rows by uid from a temporary table filled with COPY; an update older than the
    stored row (a watch event got there first) is not applied."""
    by_columns: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
    for uid, values in rows:
        by_columns.setdefault(tuple(values), []).append((uid, values))
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    rv = qn(model._meta.get_field("rv_number").column)
    now = timezone.now()
    for names, group in by_columns.items():
        fields = [model._meta.get_field(name) for name in ("uid", *names, "updated_at")]
        columns = ", ".join(qn(f.column) for f in fields)
        assignments = ", ".join(f"{qn(f.column)} = incoming.{qn(f.column)}" for f in fields[1:])
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMPORARY TABLE mirror_incoming ON COMMIT DROP AS "
                           f"SELECT {columns} FROM {table} WITH NO DATA")
            with cursor.cursor.copy(f"COPY mirror_incoming ({columns}) FROM STDIN") as copy:
                for uid, values in group:
                    copy.write_row(_db_values(fields, {**values, "uid": uid, "updated_at": now}))
            cursor.execute(f"UPDATE {table} AS stored SET {assignments} FROM mirror_incoming AS incoming "
                           f"WHERE stored.uid = incoming.uid AND (incoming.{rv} = 0 OR stored.{rv} = 0 "
                           f"OR incoming.{rv} > stored.{rv})")
            cursor.execute("DROP TABLE mirror_incoming")


def rows_update(*, rows: Sequence[Model], fields: Sequence[str],
                set_keys: Sequence[tuple[str, str, str]] = ()) -> None:
    """Save `fields` (and auto_now fields among them) of many rows of one model, as
    `row.save(update_fields=fields)` would one by one, in a few statements on PostgreSQL.

    `set_keys` are (JSON field, key, attribute): the key of the stored document is set to the
    row's attribute and the rest of the document is left as stored, so the row need not have
    read it (e.g. a Workload's `status` in `raw`, given as `raw_status`)."""
    with _incoming_update(rows=rows, fields=fields, set_keys=set_keys) as statement:
        if statement is not None:
            with connection.cursor() as cursor:
                cursor.execute(*statement)


@contextlib.contextmanager
def rows_update_beside(*, rows: Sequence[Model], fields: Sequence[str],
                       set_keys: Sequence[tuple[str, str, str]] = ()) -> Iterator[None]:
    """`rows_update`, whose UPDATE runs on PostgreSQL while the caller's block does work that
    needs no database (the block's end waits for it; a database call within waits sooner).
    Its error, if any, is raised at the end of the block."""
    with _incoming_update(rows=rows, fields=fields, set_keys=set_keys) as statement:
        if statement is None:
            yield
        else:
            with statement_beside(*statement):
                yield


class BatchedUpdate:
    """`rows_update` for rows that come one at a time, in batches: each batch's UPDATE runs on
    PostgreSQL (`rows_update_beside`) while the caller goes on making the next rows, so that
    the server's work on the first rows overlaps the making of the last.

    Use it as a context manager: `add` rows, then `send` what is left; the block's end waits
    for the batch still running. A database call of the caller in between waits for the
    running batch first (one statement at a time on the connection), then sees what it
    wrote, and another update may run meanwhile. Rows are added and sent at the level of
    `transaction.atomic` blocks the block began in (a batch holds a savepoint until it ends).
    A failed batch raises at the next `send`, `wait` or at the block's end. Elsewhere than
    PostgreSQL the rows are saved when sent."""

    def __init__(self, *, fields: Sequence[str], set_keys: Sequence[tuple[str, str, str]] = (),
                 batch_size: int = 250) -> None:
        self.fields = fields
        self.set_keys = set_keys
        self.batch_size = batch_size
        self.rows: list[Model] = []  # every row added, in order
        self._pending: list[Model] = []
        self._running = contextlib.ExitStack()

    def add(self, row: Model) -> None:
        self.rows.append(row)
        self._pending.append(row)
        if len(self._pending) >= self.batch_size:
            self.send()

    def send(self) -> None:
        """Start the UPDATE of the rows added since the last batch, once the running one ends
        (with none added, the running batch goes on)."""
        if not self._pending:
            return
        self.wait()
        batch, self._pending = self._pending, []
        self._running.enter_context(rows_update_beside(rows=batch, fields=self.fields, set_keys=self.set_keys))

    def wait(self) -> None:
        """Wait for the running batch; raise its error, if it failed."""
        running, self._running = self._running, contextlib.ExitStack()
        running.close()

    def __enter__(self) -> BatchedUpdate:
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        running, self._running = self._running, contextlib.ExitStack()
        return bool(running.__exit__(*exc_info))


_INCOMING_TABLES = itertools.count()


@contextlib.contextmanager
def _incoming_update(*, rows: Sequence[Model], fields: Sequence[str],
                     set_keys: Sequence[tuple[str, str, str]]) -> Iterator[tuple[str, list[Any]] | None]:
    """`rows_update`'s rows in a temporary table (COPY), and the UPDATE from it to run within;
    None where there is nothing left to run (no rows, or not PostgreSQL: saved one by one)."""
    if not rows:
        yield None
        return
    model = type(rows[0])
    if connection.vendor != "postgresql":
        for row in rows:
            for name, key, attribute in set_keys:
                setattr(row, name, {**(getattr(row, name) or {}), key: getattr(row, attribute)})
            row.save(update_fields=[*fields, *(name for name, _, _ in set_keys)])
        yield None
        return
    pk = model._meta.pk
    targets = [model._meta.get_field(name) for name in fields]
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    extra = [f"set_{i}" for i in range(len(set_keys))]
    columns = ", ".join(qn(f.column) for f in (pk, *targets))
    assignments = [f"{qn(f.column)} = incoming.{qn(f.column)}" for f in targets]
    for (name, _key, _), column in zip(set_keys, extra, strict=True):
        stored = qn(model._meta.get_field(name).column)
        assignments.append(f"{stored} = jsonb_set(COALESCE(stored.{stored}, '{{}}'::jsonb), %s, "
                           f"COALESCE(incoming.{column}, 'null'::jsonb))")
    with transaction.atomic(), connection.cursor() as cursor:
        # a name of its own: another update may start while this one's statement still runs
        # (a BatchedUpdate's batch, and a pass's update of pods meanwhile)
        incoming = f"rows_incoming_{next(_INCOMING_TABLES)}"
        cursor.execute(f"CREATE TEMPORARY TABLE {incoming} ON COMMIT DROP AS SELECT {columns}"
                       + "".join(f", NULL::jsonb AS {c}" for c in extra) + f" FROM {table} WITH NO DATA")
        plan = [(f, _to_db(f, connection)) for f in (pk, *targets)]
        with connection.wrap_database_errors, \
                cursor.cursor.copy(f"COPY {incoming} ({', '.join([columns, *extra])}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([*(to_db(f.pre_save(row, False)) for f, to_db in plan),
                                *(_json_text(getattr(row, attribute)) for _, _, attribute in set_keys)])
        yield (f"UPDATE {table} AS stored SET {', '.join(assignments)} FROM {incoming} AS incoming "
               f"WHERE stored.{qn(pk.column)} = incoming.{qn(pk.column)}", [[key] for _, key, _ in set_keys])
        cursor.execute(f"DROP TABLE {incoming}")


@contextlib.contextmanager
def statement_beside(sql: str, params: Sequence[Any] = ()) -> Iterator[None]:
    """Run one statement in this connection's transaction on a thread, while the caller's block
    runs: the server works on it meanwhile, and the thread waits without holding the
    interpreter. The driver's connection lets one statement in at a time, so a database call
    within the block only waits for it. Its error is raised at the end of the block, as one of
    Django's database errors."""
    connection.ensure_connection()
    raw = connection.connection
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with raw.cursor() as cursor:
                cursor.execute(sql, params)
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    thread = threading.Thread(target=run, name="statement-beside", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        with connection.wrap_database_errors:  # as Django's own cursors raise it
            raise failed[0]


# Field types whose Python values the driver takes as they are (get_db_prep_save would only
# re-check them, which costs more than the COPY itself on wide batches).
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField, models.ForeignKey)


def _json_text(value: Any) -> str | None:
    """A JSONField value as the JSON text COPY gives PostgreSQL (None: SQL NULL, as Django
    stores it): orjson, several times faster than the json module Django's adapter calls."""
    if value is None:
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # e.g. an integer beyond 64 bits, which the json module writes
        return json.dumps(value)


def _to_db(field: Field, db) -> Callable[[Any], Any]:
    if isinstance(field, models.JSONField):
        if field.encoder is None and db.vendor == "postgresql":
            return _json_text
    elif isinstance(field, _PLAIN_FIELDS):
        return lambda value: value
    elif isinstance(field, models.DateTimeField) and db.vendor == "postgresql":
        return _aware_datetime(field, db)
    return lambda value: field.get_db_prep_save(value, db)


def _aware_datetime(field: Field, db) -> Callable[[Any], Any]:
    """A DateTimeField's value for PostgreSQL's driver: an aware datetime as it is (what
    Django's own conversion returns for it, after checks that cost more than the COPY of
    the value); anything else through Django, which warns about and localises a naive one."""

    def convert(value: Any) -> Any:
        if type(value) is datetime and value.tzinfo is not None:
            return value
        return field.get_db_prep_save(value, db)

    return convert


@dataclass
class PreparedRows:
    """Rows of one model made ready for the database (`rows_prepare`), written by `prepared_insert`."""

    model: type[Model]
    fields: list[Field]  # the columns of `rows`, in order (PostgreSQL)
    rows: list[Any]  # PostgreSQL: each row's column values as the driver takes them; elsewhere: instances


def _insert_plan(model: type[Model], db, *, with_pk: bool) -> tuple[list[Field], list[tuple]]:
    fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
    stamped = {f.attname for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)}
    now = timezone.now()
    # defaults are computed once: rows only pass them to the driver, never change them
    plan = [(f.attname, f.name if f.is_relation else None, _to_db(f, db),
             now if f.attname in stamped else f.get_default()) for f in fields]
    return fields, plan


def _planned_values(row: Mapping[str, Any], plan: list[tuple]) -> list[Any]:
    values = []
    for attname, relation, to_db, default in plan:
        if attname in row:
            value = row[attname]
        elif relation is not None and relation in row:
            value = row[relation].pk if row[relation] is not None else None
        else:
            value = default  # as the model's constructor would
        values.append(to_db(value))
    return values


def _copy_in(db, model: type[Model], fields: list[Field], rows: Iterable[list[Any]], *,
             table: str | None = None) -> int:
    """COPY `rows` into the model's table (or `table`, of the same columns); how many."""
    qn = db.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    written = 0
    # the driver's own errors come out as Django's (an OperationalError is retried as any other)
    with db.wrap_database_errors, db.cursor() as cursor, \
            cursor.cursor.copy(f"COPY {qn(table or model._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for values in rows:
            copy.write_row(values)
            written += 1
    return written


def rows_stage(*, model: type[Model], rows: Iterable[Mapping[str, Any]], table: str) -> tuple[list[str], int]:
    """PostgreSQL: COPY rows of `model` (as `rows_insert` takes them, without ids) into
    `table`, a table of the model's columns (a temporary one, to compare with the model's
    rows in SQL); the columns written and how many rows."""
    db = connections[DEFAULT_DB_ALIAS]
    fields, plan = _insert_plan(model, db, with_pk=False)
    written = _copy_in(db, model, fields, (_planned_values(row, plan) for row in rows), table=table)
    return [f.column for f in fields], written


def rows_insert(*, model: type[Model], rows: Iterable[Mapping[str, Any]], with_pk: bool = False) -> None:
    """Insert many rows of `model` given as {field name: value} (missing fields take their
    defaults; ids are not returned, or given with `with_pk`): COPY on PostgreSQL, streamed as
    `rows` are produced, bulk_create elsewhere."""
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**row) for row in rows], batch_size=1000)
        return
    db = connections[DEFAULT_DB_ALIAS]
    fields, plan = _insert_plan(model, db, with_pk=with_pk)
    _copy_in(db, model, fields, (_planned_values(row, plan) for row in rows))


def rows_prepare(*, model: type[Model], rows: Iterable[Mapping[str, Any]], with_pk: bool = False) -> PreparedRows:
    """`rows_insert`'s work short of the database: what is left for `prepared_insert` is to
    send the rows (so the two can be apart, e.g. while another statement runs)."""
    if connection.vendor != "postgresql":
        return PreparedRows(model, [], [model(**row) for row in rows])
    fields, plan = _insert_plan(model, connections[DEFAULT_DB_ALIAS], with_pk=with_pk)
    return PreparedRows(model, fields, [_planned_values(row, plan) for row in rows])


def prepared_insert(prepared: PreparedRows) -> None:
    """Insert rows made ready by `rows_prepare`."""
    if not prepared.rows:
        return
    if connection.vendor != "postgresql":
        prepared.model.objects.bulk_create(prepared.rows, batch_size=1000)
        return
    _copy_in(connections[DEFAULT_DB_ALIAS], prepared.model, prepared.fields, prepared.rows)


def ids_reserve(*, model: type[Model], count: int) -> list[int]:
    """`count` new primary keys of `model`, for rows inserted with them in this transaction
    (`with_pk`): the rows that refer to them can then be made before they are inserted."""
    if count <= 0:
        return []
    qn = connection.ops.quote_name
    table, pk = model._meta.db_table, model._meta.pk.column
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                           [qn(table), pk, count])
            return [row[0] for row in cursor.fetchall()]
        # elsewhere (SQLite: the write lock is held from the transaction's start) after the largest
        cursor.execute(f"SELECT COALESCE(MAX({qn(pk)}), 0) FROM {qn(table)}")
        largest = int(cursor.fetchone()[0])
    return list(range(largest + 1, largest + 1 + count))


def _instance_rows(objs: Sequence[Model]) -> Iterator[dict[str, Any]]:
    fields = [f for f in type(objs[0])._meta.concrete_fields if not f.primary_key]
    # pre_save, as bulk_create does: it fills auto_now(_add) fields and returns the rest
    return ({f.attname: f.pre_save(obj, True) for f in fields} for obj in objs)


def instances_insert(*, objs: Sequence[Model]) -> None:
    """Insert unsaved model instances of one model, in order (their ids are not set)."""
    if objs:
        rows_insert(model=type(objs[0]), rows=_instance_rows(objs))


def instances_prepare(*, objs: Sequence[Model]) -> PreparedRows:
    """`instances_insert` made ready, for `prepared_insert`."""
    if not objs:
        return PreparedRows(Model, [], [])
    return rows_prepare(model=type(objs[0]), rows=_instance_rows(objs))
