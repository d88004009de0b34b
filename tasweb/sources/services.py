"""Writes of the sources app.

The mirror: every list and every watch event goes into the mirrored cluster through
`tasweb.cluster.services` in one transaction together with the kind's checkpoint, so the
checkpoint never claims an event that is not stored, and never misses one that is. In
observe mode a Workload whose status or admission changed is passed on to
`workload_observed`, which keeps its decoded assignments and history in step with Kueue.

The writer (control mode): ClusterWrite rows are sent to the cluster in the order they
were written, see `cluster_writes_send`.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_delete, object_uid, object_upsert, objects_resync
from tasweb.core.queries import json_key
from tasweb.scheduling.models import ClusterWrite
from tasweb.scheduling.services import workload_deleted, workload_observed
from tasweb.sources.kubeapi import CONNECTION_ERRORS, Discovery, KubeApi, NotServed, describe_error
from tasweb.sources.locks import CacheLock
from tasweb.sources.models import ClusterWriteRetry, MirrorCheckpoint
from tasweb.sources.patches import local_queue_status_patch, pod_fail_patch, pod_ungate_patch, workload_status_patch
from tasweb.sources.selectors import cluster_writes_pending

log = logging.getLogger(__name__)

WorkloadState = tuple[str, Any]  # (status, status.admission) of a mirrored Workload


# ---------------------------------------------------------------- checkpoints


def _checkpoint_save(kind: str, *, api_version: str, resource_version: str, listed: bool = False,
                     events: int = 0) -> None:
    now = timezone.now()
    values: dict[str, Any] = {"api_version": api_version, "resource_version": resource_version,
                              "updated_at": now, "last_error": ""}
    if listed:
        values["listed_at"] = now
    if not MirrorCheckpoint.objects.filter(kind=kind).update(events_applied=F("events_applied") + events, **values):
        MirrorCheckpoint.objects.create(kind=kind, events_applied=events, **values)


def mirror_error_record(*, kind: str, error: str) -> None:
    """Why the mirror of `kind` is not progressing (shown until the next applied event)."""
    now = timezone.now()
    if not MirrorCheckpoint.objects.filter(kind=kind).update(last_error=error, last_error_at=now):
        MirrorCheckpoint.objects.create(kind=kind, last_error=error, last_error_at=now)


def mirror_checkpoint_reset(*, kind: str | None = None) -> int:
    """Forget where the mirror stands (one kind, or all): it lists again on its next start."""
    rows = MirrorCheckpoint.objects.all() if kind is None else MirrorCheckpoint.objects.filter(kind=kind)
    return rows.update(resource_version="", updated_at=timezone.now())


# ---------------------------------------------------------------- observe mode


def _workload_states(uids: Iterable[str] | None = None) -> dict[str, WorkloadState]:
    rows = cluster.Workload.objects.all()
    if uids is not None:
        rows = rows.filter(uid__in=list(uids))
    return {uid: (status, admission) for uid, status, admission in
            rows.annotate(admission=json_key("raw", "status", "admission")).values_list(
                "uid", "status", "admission").iterator(chunk_size=2000)}


def _observe(before: Mapping[str, WorkloadState], uids: Iterable[str]) -> int:
    """Tell the scheduling app about every workload whose status or admission changed."""
    after = _workload_states(uids)
    changed = [uid for uid, state in after.items() if before.get(uid) != state]
    for row in cluster.Workload.objects.filter(uid__in=changed).iterator(chunk_size=500):
        old_status, old_admission = before.get(row.uid, (None, None))
        workload_observed(workload=row, old_status=old_status, old_admission=old_admission)
    return len(changed)


def _workloads_deleted(uids: Iterable[str]) -> None:
    """Close the history of workloads about to leave the mirror (before their rows go)."""
    uids = list(uids)
    for start in range(0, len(uids), 1000):
        for row in cluster.Workload.objects.filter(uid__in=uids[start:start + 1000]).order_by("namespace", "name"):
            workload_deleted(workload=row)


# ---------------------------------------------------------------- the mirror


def mirror_list_apply(*, kind: str, api_version: str, objects: list[Mapping], resource_version: str,
                      observe: bool = False) -> dict[str, int]:
    """Make the mirror of `kind` equal to a full list and checkpoint the list's resourceVersion."""
    with transaction.atomic():
        before = _workload_states() if observe and kind == "Workload" else None
        if kind == "Workload":
            listed = {object_uid(kind, obj) for obj in objects}
            _workloads_deleted(uid for uid in cluster.Workload.objects.values_list("uid", flat=True)
                               if uid not in listed)
        counts = objects_resync(kind=kind, objects=objects)
        if before is not None:
            counts["observed"] = _observe(before, (object_uid(kind, obj) for obj in objects))
        _checkpoint_save(kind, api_version=api_version, resource_version=resource_version, listed=True)
    return counts


def mirror_event_apply(*, kind: str, api_version: str, event_type: str, obj: Mapping,
                       observe: bool = False, unsaved_events: int = 0, save_unchanged: bool = True) -> bool:
    """Apply one ADDED / MODIFIED / DELETED watch event and advance the checkpoint to its
    resourceVersion; True when the mirror changed.

    An event that changed nothing (replayed, or a heartbeat) leaves the checkpoint alone when
    `save_unchanged` is False: the watch saves it a little later (`mirror_bookmark_apply`),
    and one that stops in between replays such events, which change nothing again.
    `unsaved_events` are those the next save counts too."""
    resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    with transaction.atomic():
        if event_type == "DELETED":
            if kind == "Workload":
                _workloads_deleted([object_uid(kind, obj)])
            changed = object_delete(kind=kind, obj=obj)
        else:
            uid = object_uid(kind, obj)
            watch_workload = observe and kind == "Workload"
            before = _workload_states([uid]) if watch_workload else {}
            changed = object_upsert(kind=kind, obj=obj).changed
            if watch_workload and changed:
                _observe(before, [uid])
        if changed or save_unchanged:
            _checkpoint_save(kind, api_version=api_version, resource_version=resource_version,
                             events=1 + unsaved_events)
    return changed


def mirror_bookmark_apply(*, kind: str, api_version: str, resource_version: str, events: int = 0) -> None:
    """A BOOKMARK, or events that changed nothing: nothing changed up to `resource_version`;
    watch from there next time. `events` are watch events applied since the last save."""
    _checkpoint_save(kind, api_version=api_version, resource_version=resource_version, events=events)


# ---------------------------------------------------------------- control mode: the writer

RETRY_BASE_SECONDS = 2.0
RETRY_CAP_SECONDS = 300.0
MAX_ATTEMPTS = 20
CONFLICT_RETRIES = 3  # a 409 is tried again at once this many times before backing off
PERMANENT_STATUSES = {400, 422}  # the server rejects the body itself: sending it again cannot help


@dataclass
class SendSummary:
    sent: int = 0
    gone: int = 0  # the object no longer exists: done, with the 404 recorded
    failed: int = 0  # will be retried
    abandoned: int = 0
    deferred: int = 0  # waiting for an earlier write (same object, or the pod's workload) or a backoff
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "gone": self.gone, "failed": self.failed, "abandoned": self.abandoned,
                "deferred": self.deferred, "errors": self.errors[:20]}


@dataclass(frozen=True)
class Delivery:
    ok: bool
    status: int | None = None
    error: str = ""

    @property
    def gone(self) -> bool:
        return self.status == 404

    @property
    def permanent(self) -> bool:
        return self.status in PERMANENT_STATUSES


def backoff_delay(failures: int, *, base: float, cap: float) -> float:
    """Seconds to wait after `failures` failures in a row: doubling, capped, with jitter (half
    fixed, half random, so clients that failed together do not retry in step)."""
    delay = min(cap, base * 2 ** max(0, failures - 1))
    return delay / 2 + random.uniform(0, delay / 2)


def retry_delay(attempts: int) -> timedelta:
    return timedelta(seconds=backoff_delay(attempts, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS))


def _deliver(write: ClusterWrite, *, api: KubeApi, discovery: Discovery) -> Delivery:
    for attempt in range(1, CONFLICT_RETRIES + 1):
        try:
            if write.kind == ClusterWrite.Kind.WORKLOAD_STATUS:
                resource = discovery.resource("Workload")
                body = workload_status_patch(write.payload, version=resource.version, decided_at=write.created_at)
                api.patch_workload_status(resource, write.namespace, write.name, body)
            elif write.kind == ClusterWrite.Kind.POD_UNGATE:
                api.patch_pod(write.namespace, write.name, pod_ungate_patch(write.payload))
            elif write.kind == ClusterWrite.Kind.POD_FAIL:
                api.patch_pod_status(write.namespace, write.name, pod_fail_patch(write.payload))
            elif write.kind == ClusterWrite.Kind.LOCAL_QUEUE_STATUS:
                api.patch_status(discovery.resource("LocalQueue"), write.namespace, write.name,
                                 local_queue_status_patch(write.payload))
            else:
                return Delivery(False, 400, f"unknown write kind {write.kind!r}")
            return Delivery(True)
        except ApiException as exc:
            if exc.status == 409 and attempt < CONFLICT_RETRIES:
                continue
            return Delivery(False, exc.status, describe_error(exc))
        except NotServed as exc:
            return Delivery(False, None, str(exc))
        except CONNECTION_ERRORS as exc:
            return Delivery(False, None, describe_error(exc))
    raise AssertionError("unreachable: the last attempt returns")


WRITE_TARGETS = {ClusterWrite.Kind.WORKLOAD_STATUS: "Workload", ClusterWrite.Kind.LOCAL_QUEUE_STATUS: "LocalQueue"}


def _target(write: ClusterWrite) -> tuple[str, str, str]:
    return WRITE_TARGETS.get(write.kind, "Pod"), write.namespace, write.name


def _record(write: ClusterWrite, delivery: Delivery, now: datetime, summary: SendSummary) -> bool:
    """Store the outcome of one delivery; True when the write is done (sent or gone)."""
    attempts = write.attempts + 1
    label = f"{write.kind} {write.namespace}/{write.name} (write {write.id})"
    if delivery.ok or delivery.gone:
        error = f"not sent: the object is gone ({delivery.error})" if delivery.gone else ""
        with transaction.atomic():
            ClusterWrite.objects.filter(id=write.id).update(sent_at=now, attempts=attempts, last_error=error)
            ClusterWriteRetry.objects.filter(write_id=write.id).delete()
        if delivery.gone:
            summary.gone += 1
            log.info("%s: %s", label, error)
        else:
            summary.sent += 1
        return True
    abandon = delivery.permanent or attempts >= MAX_ATTEMPTS
    with transaction.atomic():
        ClusterWrite.objects.filter(id=write.id).update(attempts=attempts, last_error=delivery.error)
        ClusterWriteRetry.objects.update_or_create(write_id=write.id, defaults={
            "next_attempt_at": now + retry_delay(attempts), "abandoned": abandon})
    summary.errors.append(f"{label}: {delivery.error}")
    if abandon:
        summary.abandoned += 1
        log.error("%s: given up after %d attempt(s): %s", label, attempts, delivery.error)
    else:
        summary.failed += 1
        log.warning("%s: attempt %d failed, will retry: %s", label, attempts, delivery.error)
    return False


def _pods_workloads(writes: list[ClusterWrite]) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the name of the Workload the pod belongs to, for the pods written."""
    pods = {(w.namespace, w.name) for w in writes if w.kind == ClusterWrite.Kind.POD_UNGATE}
    out: dict[tuple[str, str], str] = {}
    names = {name for _, name in pods}
    for namespace, name, workload_name in cluster.Pod.objects.filter(name__in=names).values_list(
            "namespace", "name", "workload_name"):
        if (namespace, name) in pods and workload_name:
            out[namespace, name] = workload_name
    return out


def _status_writes(workloads: set[tuple[str, str]]) -> dict[tuple[str, str], list[list]]:
    """Per workload, its WorkloadStatus writes as [id, sent] in id order."""
    out: dict[tuple[str, str], list[list]] = defaultdict(list)
    if not workloads:
        return out
    rows = ClusterWrite.objects.filter(kind=ClusterWrite.Kind.WORKLOAD_STATUS,
                                       name__in={name for _, name in workloads}).order_by("id")
    for write_id, namespace, name, sent_at in rows.values_list("id", "namespace", "name", "sent_at"):
        if (namespace, name) in workloads:
            out[namespace, name].append([write_id, sent_at is not None])
    return out


def _status_unsent_before(entries: list[list], write_id: int) -> bool:
    """Whether the latest status write of the workload made before `write_id` is still unsent."""
    earlier = [entry for entry in entries if entry[0] < write_id]
    return bool(earlier) and not earlier[-1][1]


def cluster_writes_send(*, api: KubeApi, discovery: Discovery | None = None, now: datetime | None = None,
                        limit: int = 2000) -> SendSummary:
    """Send the unsent ClusterWrite rows to the cluster, oldest first.

    Order is kept where it matters: a write waits while an earlier write to the same object
    failed or is backing off, and a pod is ungated only once the latest status write of its
    Workload made before the ungate decision is in the cluster. A failed write is retried
    with capped exponential backoff; a 404 (the object is gone) ends it, with the error
    recorded; a 400/422 (the body is invalid) gives it up. Sending is idempotent: a write
    sent again (e.g. after a crash between sending and recording it) changes nothing.
    """
    now = now or timezone.now()
    discovery = discovery or Discovery(api)
    summary = SendSummary()
    writes = list(cluster_writes_pending()[:limit])
    pod_workloads = _pods_workloads(writes)
    # every status write counts here, abandoned ones too: one that never reached the
    # cluster holds back the pods of its workload until a later one is sent
    status_writes = _status_writes({(ns, wl) for (ns, _), wl in pod_workloads.items()})
    blocked: set[tuple[str, str, str]] = set()
    for write in writes:
        target = _target(write)
        waits_for = None
        if write.kind == ClusterWrite.Kind.POD_UNGATE:
            workload_name = pod_workloads.get((write.namespace, write.name))
            if workload_name and _status_unsent_before(status_writes.get((write.namespace, workload_name), []),
                                                      write.id):
                waits_for = ("Workload", write.namespace, workload_name)
        try:
            next_attempt = write.retry.next_attempt_at
        except ObjectDoesNotExist:
            next_attempt = None
        if target in blocked or waits_for is not None or (next_attempt is not None and next_attempt > now):
            blocked.add(target)
            summary.deferred += 1
            continue
        done = _record(write, _deliver(write, api=api, discovery=discovery), now, summary)
        if not done:
            blocked.add(target)
        elif write.kind == ClusterWrite.Kind.WORKLOAD_STATUS:
            for entry in status_writes.get((write.namespace, write.name), []):
                if entry[0] == write.id:
                    entry[1] = True
    return summary


WRITER_LOCK_TTL = 300  # seconds; longer than a run of `limit` writes takes


def cluster_writes_deliver(*, api: KubeApi | None = None, now: datetime | None = None) -> dict[str, Any]:
    """`cluster_writes_send` by one worker at a time (a cache lock), with the configured cluster."""
    lock = CacheLock("cluster-writes", ttl=WRITER_LOCK_TTL)
    if not lock.acquire():
        return {"skipped": "another worker is sending the writes"}
    own_api = api is None
    try:
        api = api or KubeApi.from_settings()
        return cluster_writes_send(api=api, now=now).as_dict()
    finally:
        if own_api and api is not None:
            api.close()
        lock.release()
