"""Reads for the scheduling app: the engine's input built from the mirror, and queries on
stored assignments."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

import orjson
from django.db import connection, connections
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from scheduler.codec import decode_assignment
from scheduler.errors import InputError
from scheduler.model import Node as EngineNode
from scheduler.model import Pod as EnginePod
from scheduler.model import PodSpecInfo, Taint
from scheduler.model import Workload as EngineWorkload
from scheduler.parse import (
    ParsedObjects,
    Where,
    object_label,
    parse_admission_check,
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_namespace,
    parse_pod,
    parse_priority_class,
    parse_resource_flavor,
    parse_topology,
    parse_workload,
)
from tasweb.cluster import models as cluster
from tasweb.core.queries import json_key
from tasweb.scheduling.models import AssignmentDomain, PodSetAssignment, PredictionRun, SchedulingPass


def _taint(raw: dict) -> Taint:
    added = raw.get("timeAdded")
    return Taint(raw.get("key", ""), raw.get("value", "") or "", raw.get("effect", "") or "",
                 datetime.fromisoformat(added) if added else None)


def _rows_as_json(queryset: QuerySet, columns: str) -> list[list] | None:
    """The rows of `queryset` (a model's, filtered), as `columns` (SQL over its table), built
    into one JSON document by PostgreSQL: one decode for the whole table instead of one per
    JSON column and row, which is most of the time a pass spends reading 10,000 nodes.
    None on other databases."""
    if connection.vendor != "postgresql":
        return None
    qn = connection.ops.quote_name
    meta = queryset.model._meta
    inner, params = queryset.order_by().values("pk").query.sql_with_params()
    # in the model's order, as the queryset would have listed them
    order = ", ".join(f"{qn(name.lstrip('-'))}{' DESC' if name.startswith('-') else ''}" for name in meta.ordering)
    order = f" ORDER BY {order}" if order else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(json_agg(json_build_array({columns}){order})::text, '[]') "
                       f"FROM {qn(meta.db_table)} WHERE {qn(meta.pk.column)} IN ({inner})", params)
        return json.loads(cursor.fetchone()[0])


def engine_nodes(rows: QuerySet | None = None) -> list[EngineNode]:
    """Nodes from their extracted columns (no re-parse: this is the biggest part of a cluster);
    every valid one, or those of `rows`."""
    valid = (rows if rows is not None else cluster.Node.objects.all()).filter(invalid_reason="")
    values = _rows_as_json(valid, "name, labels, allocatable, taints, unschedulable, ready, ready_since, "
                                  "raw #> '{metadata,deletionTimestamp}'")
    if values is not None:
        for row in values:
            row[6] = datetime.fromisoformat(row[6]) if row[6] else None
    else:
        values = valid.annotate(deletion=json_key("raw", "metadata", "deletionTimestamp")).values_list(
            "name", "labels", "allocatable", "taints", "unschedulable", "ready", "ready_since", "deletion")
    nodes = []
    for name, labels, allocatable, taints, unschedulable, ready, ready_since, deleting in values:
        nodes.append(EngineNode(
            name=name,
            labels=MappingProxyType(labels),
            allocatable=MappingProxyType(allocatable),
            taints=tuple(_taint(t) for t in taints),
            unschedulable=unschedulable,
            ready=ready or None,
            ready_since=ready_since,
            deleted=bool(deleting),
        ))
    return nodes


def _json_object(text: str) -> dict:
    """A stored object from its JSON text, by orjson: a third of the time of json, which
    counts on a cold start reading 100,000 workloads. orjson reads an integer beyond 64 bits
    as a float; the engine keeps only the fields it parses, and a row whose parsed fields hold
    such an integer was refused when it was mirrored, so nothing it uses changes."""
    return orjson.loads(text)


def raw_objects(rows: QuerySet, *fields: str, chunk_size: int = 500, read_ahead: bool = False):
    """(raw object, *fields) of every row: the `raw` column read as text and parsed here,
    not by the JSON field's own decoder. With `read_ahead`, the rows are read by a thread of
    their own (`rows_read_ahead`)."""
    values = rows.annotate(raw_text=Cast("raw", TextField())).values_list("raw_text", *fields)
    for text, *rest in (rows_read_ahead(values, chunk_size) if read_ahead else values.iterator(chunk_size=chunk_size)):
        yield _json_object(text), *rest


def _own_thread_may_read() -> bool:
    """Whether a thread of its own (a connection of its own) reads what this one would: not
    inside a transaction (another connection would not see what it wrote), and on PostgreSQL."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def read_beside(read: Callable[[], Any], *, beside: bool = True) -> Callable[[], Any]:
    """Start `read` on a thread of its own (with its own database connection) where one may
    read (`_own_thread_may_read`) and the caller wants it (`beside`), else run it now; the
    returned function gives its result (or raises its error) once it is done."""
    if not (beside and _own_thread_may_read()):
        value = read()
        return lambda: value
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = read()
        except BaseException as exc:  # raised in the caller
            done["error"] = exc
        finally:
            connections.close_all()  # this thread's own

    reader = threading.Thread(target=run, name="mirror-read-beside", daemon=True)
    reader.start()

    def result() -> Any:
        reader.join()
        if "error" in done:
            raise done["error"]
        return done["value"]
    return result


_READ_AHEAD_CHUNKS = 8  # chunks read and not yet taken, at most
_END = object()


def rows_read_ahead(rows: QuerySet, chunk_size: int) -> Iterator:
    """The rows of `rows`, read by a thread on a database connection of its own while the
    caller works on those it was given: PostgreSQL produces the next rows (a cold start reads
    hundreds of megabytes of JSON) while this process parses the last ones, on the other core.
    A caller inside a transaction reads them itself (another connection would not see what the
    transaction wrote), as does one on another database."""
    if not _own_thread_may_read():
        yield from rows.iterator(chunk_size=chunk_size)
        return
    chunks: queue.Queue = queue.Queue(maxsize=_READ_AHEAD_CHUNKS)
    stop = threading.Event()

    def read() -> None:
        try:
            batch: list = []
            for row in rows.iterator(chunk_size=chunk_size):
                batch.append(row)
                if len(batch) >= chunk_size:
                    chunks.put(batch)
                    batch = []
                    if stop.is_set():
                        return
            chunks.put(batch)
            chunks.put(_END)
        except BaseException as exc:  # handed to the caller, raised there
            chunks.put(exc)
        finally:
            connections.close_all()  # this thread's own

    reader = threading.Thread(target=read, name="mirror-read-ahead", daemon=True)
    reader.start()
    try:
        while (item := chunks.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        stop.set()
        while reader.is_alive():  # let a reader blocked on a full queue see the stop
            with contextlib.suppress(queue.Empty):
                chunks.get(timeout=0.05)
        reader.join()


def engine_pods(rows: QuerySet | None = None) -> list[EnginePod]:
    """Pods of TAS workloads in full (the ungater and node-failure handling read them);
    every other bound pod only as the usage it puts on its node. Every valid pod the engine
    reads, or those of `rows`."""
    pods: list[EnginePod] = []
    base = (rows if rows is not None else cluster.Pod.objects.all()).filter(invalid_reason="")
    full = base.exclude(workload_name="", gated=False, tas=False)
    for (row,) in raw_objects(full, chunk_size=1000):
        try:
            pods.append(parse_pod(row, Where(object_label(row))))
        except InputError:
            continue
    usage_only = base.filter(workload_name="", gated=False, tas=False).exclude(node_name="")
    values = _rows_as_json(usage_only, "namespace, name, node_name, phase, deleting, requests")
    if values is None:
        values = usage_only.values_list("namespace", "name", "node_name", "phase", "deleting", "requests")
    for namespace, name, node_name, phase, deleting, requests in values:
        pods.append(EnginePod(namespace=namespace, name=name, node_name=node_name, phase=phase, deleting=deleting,
                              spec=PodSpecInfo(requests=MappingProxyType(requests))))
    return pods


def _parsed(model, parser, rows: QuerySet | None = None) -> list:
    out = []
    base = rows if rows is not None else model.objects.all()
    for raw in base.filter(invalid_reason="").values_list("raw", flat=True):
        try:
            out.append(parser(raw, Where(object_label(raw))))
        except InputError:
            continue  # kept in the mirror with its invalid_reason; a pass cannot use it
    return out


def active_workload_rows() -> QuerySet:
    """Workloads a pass must see: everything not finished."""
    return cluster.Workload.objects.filter(invalid_reason="").exclude(status=cluster.WorkloadStatus.FINISHED)


def engine_workloads(rows: QuerySet | None = None, versions: dict[str, int] | None = None,
                     order: dict[str, int] | None = None,
                     statuses: dict[str, tuple[str, str]] | None = None) -> list[EngineWorkload]:
    """Workloads not finished, parsed, in the order they entered the mirror; every one, or
    those of `rows`. `versions` and `order`, when given, receive the resourceVersion and the
    row id of every Workload read, by key; `statuses` the stored status and message of those
    waiting (pending or inadmissible)."""
    active = active_workload_rows() if rows is None else rows.filter(invalid_reason="").exclude(
        status=cluster.WorkloadStatus.FINISHED)
    workloads = []
    for raw, rv_number, row_id, status, message in raw_objects(active.order_by("id"), "rv_number", "id", "status",
                                                               "message", read_ahead=rows is None):
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        if versions is not None:
            versions[key] = rv_number
        if order is not None:
            order[key] = row_id
        if statuses is not None and status in cluster.WAITING_STATUSES:
            statuses[key] = (status, message)
        try:
            workloads.append(parse_workload(raw, Where(object_label(raw)), decode_assignment))
        except InputError:
            continue
    return workloads


def recent_workloads(since: datetime, until: datetime) -> list[EngineWorkload]:
    """Every valid Workload created in (since, until], finished ones too, parsed, oldest first
    (what was submitted lately: the start-time estimate expects as much again)."""
    rows = cluster.Workload.objects.filter(invalid_reason="", created_at__gt=since, created_at__lte=until)
    out = []
    for (raw,) in raw_objects(rows.order_by("created_at", "id")):
        try:
            out.append(parse_workload(raw, Where(object_label(raw)), decode_assignment))
        except InputError:
            continue
    return out


# kind -> (model, reader of a queryset of its rows into engine objects)
ENGINE_READERS: dict[str, Callable[[QuerySet], list]] = {
    "Node": engine_nodes,
    "Pod": engine_pods,
    "Topology": lambda rows: _parsed(cluster.Topology, parse_topology, rows),
    "ResourceFlavor": lambda rows: _parsed(cluster.ResourceFlavor, parse_resource_flavor, rows),
    "ClusterQueue": lambda rows: _parsed(cluster.ClusterQueue, parse_cluster_queue, rows),
    "LocalQueue": lambda rows: _parsed(cluster.LocalQueue, parse_local_queue, rows),
    "Cohort": lambda rows: _parsed(cluster.Cohort, parse_cohort, rows),
    "AdmissionCheck": lambda rows: _parsed(cluster.AdmissionCheck, parse_admission_check, rows),
    "WorkloadPriorityClass": lambda rows: _parsed(cluster.WorkloadPriorityClass, parse_priority_class, rows),
    "Namespace": lambda rows: _parsed(cluster.Namespace, parse_namespace, rows),
}


def engine_inputs(versions: dict[str, int] | None = None,
                  statuses: dict[str, tuple[str, str]] | None = None) -> ParsedObjects:
    """The engine's view of the mirrored cluster, fresh objects a pass may change.
    `versions` and `statuses`, when given, receive what `engine_workloads` gives them."""
    order: dict[str, int] = {}
    # the nodes and pods are read (PostgreSQL building their JSON) while the workloads are parsed
    nodes_and_pods = read_beside(lambda: (engine_nodes(), engine_pods()))
    workloads = engine_workloads(versions=versions, order=order, statuses=statuses)
    nodes, pods = nodes_and_pods()
    return ParsedObjects(
        nodes=nodes,
        pods=pods,
        topologies=_parsed(cluster.Topology, parse_topology),
        flavors=_parsed(cluster.ResourceFlavor, parse_resource_flavor),
        cluster_queues=_parsed(cluster.ClusterQueue, parse_cluster_queue),
        local_queues=_parsed(cluster.LocalQueue, parse_local_queue),
        cohorts=_parsed(cluster.Cohort, parse_cohort),
        admission_checks=_parsed(cluster.AdmissionCheck, parse_admission_check),
        priority_classes=_parsed(cluster.WorkloadPriorityClass, parse_priority_class),
        workloads=workloads,
        namespaces={ns.name: ns.labels for ns in _parsed(cluster.Namespace, parse_namespace)},
        workload_order=order,
    )


# ---------------------------------------------------------------- the change log


@dataclass(frozen=True, slots=True)
class ChangedObjects:
    """What changed in the mirror, as the engine reads it: objects to add or update (with the
    key each stands under), keys to delete, per kind; `versions` of the workloads read."""

    upserts: list[tuple[str, object]] = field(default_factory=list)
    deletes: list[tuple[str, str]] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)  # workload key -> its row id
    reset: bool = False  # a whole table was emptied: only a rebuild knows what is left


def engine_key(kind: str, obj: object) -> str:
    namespace = getattr(obj, "namespace", "")
    if kind == "LocalQueue":
        return obj.key  # type: ignore[attr-defined]
    return f"{namespace}/{obj.name}" if namespace else obj.name  # type: ignore[attr-defined]


def changed_objects(changes: Iterable[cluster.MirrorChange]) -> ChangedObjects:
    """The engine objects of the rows named by `changes`, as the rows are now: a row that
    exists and the engine reads is an upsert; a key whose row is gone, invalid, or no longer
    read (a finished workload, an unbound plain pod) is a delete."""
    ids: dict[str, set[int]] = {}
    keys: dict[str, set[str]] = {}
    by_key: dict[str, set[tuple[str, str]]] = {}  # rows to find by namespace and name
    out = ChangedObjects()
    for change in changes:
        if not change.kind:
            return ChangedObjects(reset=True)
        keys.setdefault(change.kind, set()).add(change.key)
        if change.deleted:
            continue
        if change.row_id is not None:
            ids.setdefault(change.kind, set()).add(change.row_id)
        else:
            by_key.setdefault(change.kind, set()).add((change.namespace, change.name))
    for kind, touched in keys.items():
        model = cluster.KINDS.get(kind)
        if model is None:
            continue
        objects: list = []
        wanted = by_key.get(kind, set())
        names = sorted({name for _, name in wanted})
        for start in range(0, len(names), 2000):
            for pk, namespace, name in model.objects.filter(name__in=names[start:start + 2000]).values_list(
                    "id", "namespace", "name"):
                if (namespace, name) in wanted:
                    ids.setdefault(kind, set()).add(pk)
        row_ids = sorted(ids.get(kind, ()))
        for start in range(0, len(row_ids), 2000):
            rows = model.objects.filter(id__in=row_ids[start:start + 2000])
            if kind == "Workload":
                objects += engine_workloads(rows, out.versions, out.order)
            else:
                objects += ENGINE_READERS[kind](rows)
        present = set()
        for obj in objects:
            key = engine_key(kind, obj)
            present.add(key)
            out.upserts.append((kind, obj))
        out.deletes.extend((kind, key) for key in sorted(touched - present))
    return out


def workloads_on_domain(*, flavor: str, values: list[str]) -> QuerySet:
    """Workloads with pods in the domain named by its path of level values ("b1", "r3")."""
    filters = {f"level_{i}": value for i, value in enumerate(values)}
    ids = AssignmentDomain.objects.filter(flavor=flavor, **filters).values("workload_id")
    return cluster.Workload.objects.filter(id__in=ids)


def assignments_of(workload: cluster.Workload) -> QuerySet:
    return PodSetAssignment.objects.filter(workload=workload).prefetch_related("domains")


def prediction_run() -> PredictionRun | None:
    """The estimate the stored predictions come from; None before the first is stored."""
    return PredictionRun.objects.order_by("-id").first()


def sticky_heads_recorded() -> dict[str, str]:
    """ClusterQueue -> the workload the last pass kept at its head while its preemptions
    complete (Kueue's sticky preemptor), as that pass recorded it."""
    heads = SchedulingPass.objects.order_by("-id").values_list("sticky_heads", flat=True).first()
    return dict(heads) if isinstance(heads, dict) else {}
