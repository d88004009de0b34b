"""The scheduler process's long-lived engine: built from the mirror once, then kept current
by the mirror's change log (DESIGN.md, "Performance model").

The process that runs passes as the leader holds one `SchedulerRuntime`: an `Engine` (cache
and queues) and the position in `cluster_change` up to which it has applied the mirror's
changes. Before each pass it applies the changes noted since, and nothing else; the pass
then works on the state in memory and writes what it decided. The database stays the
record, so the runtime is rebuilt from it (the cold start) whenever memory may disagree:

* at the first pass of the process, or when the feature gates or Kueue's Configuration changed;
* when another process ran a pass since this one's last (another leader decided meanwhile);
* when a pass did not commit (its decisions are in memory, not in the database);
* when a table was emptied, or the change log was pruned past what this runtime applied;
* at every pass while a mirrored table's change-log triggers are missing (a migration that
  rebuilt the table on SQLite drops them): its writes are not noted, so it cannot be followed.

Change-log ids are handed out when a row is written, not when its transaction commits, so
an id can become visible after higher ones were read. The runtime remembers the ids it
skipped (`gaps`) and looks for them again until they show up or are too old to be anything
but a rolled-back write.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max, Q
from django.utils import timezone

from scheduler.config import Configuration
from scheduler.engine import Engine
from scheduler.features import FeatureGates
from scheduler.results import message_shape
from tasweb.cluster import models as cluster
from tasweb.cluster.changelog import missing_change_triggers
from tasweb.scheduling.estimates import estimate_source_set
from tasweb.scheduling.models import SchedulingPass
from tasweb.scheduling.selectors import (
    ChangedObjects,
    changed_objects,
    engine_inputs,
    engine_key,
    sticky_heads_recorded,
)

logger = logging.getLogger(__name__)

DEFAULT_GAP_SECONDS = 300.0  # how long an unseen change-log id is waited for
DEFAULT_RETENTION_SECONDS = 3600.0  # change-log rows older than this are pruned
DEFAULT_FOLLOWER_SECONDS = 1800.0  # applied change-log rows are kept this long for the other processes
MAX_GAP_RANGES = 256  # beyond this many holes, rebuilding is cheaper than asking for each
MANY_CHANGES = 5000  # changes applied with the garbage collector paused, as at the build
DEFAULT_FULL_COLLECTION_SECONDS = 600.0  # how often the frozen objects are collected once


@dataclass
class Gap:
    low: int
    high: int
    since: float


@dataclass
class SchedulerRuntime:
    engine: Engine
    gates: str
    cursor: int  # every change-log id up to this one was applied, or is a gap
    gaps: list[Gap] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)  # workload key -> resourceVersion applied
    # objects to read again whatever the change log says: those of workloads a pass left
    # alone because a source changed them meanwhile (memory holds the pass's view of them)
    rereads: set[tuple[str, str]] = field(default_factory=set)
    last_pass: int | None = None  # the SchedulingPass this runtime last committed
    built_at: float = field(default_factory=time.monotonic)
    applied_at: float = field(default_factory=time.monotonic)
    changes_applied: int = 0
    collected_at: float = field(default_factory=time.monotonic)  # the last full garbage collection
    unnoted: list[str] = field(default_factory=list)  # change-log triggers missing at the build


_lock = threading.Lock()
_runtime: SchedulerRuntime | None = None
_reported_unnoted: list[str] = []  # what was last logged as missing, so it is logged once


def _gap_seconds() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_CHANGE_GAP_SECONDS", DEFAULT_GAP_SECONDS))


def _retention_seconds() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_CHANGE_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS))


def _latest_change() -> int:
    return cluster.MirrorChange.objects.aggregate(top=Max("id"))["top"] or 0


def _latest_pass() -> int | None:
    return SchedulingPass.objects.aggregate(top=Max("id"))["top"]


@contextlib.contextmanager
def _made_to_keep(many: bool = True, *, freeze: bool = True) -> Iterator[None]:
    """When `many`: no cyclic garbage collection while the objects made within are made, and
    (with `freeze`) those left afterwards out of later collections (they are the long-lived
    state). They are frozen before collections resume: the first allocation after would
    otherwise start a collection of everything made meanwhile."""
    enabled = many and gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if many and freeze:
            gc.freeze()
        if enabled:
            gc.enable()


def runtime_build(*, gates_text: str, gates: FeatureGates, config: Configuration | None = None,
                  freeze: bool = True, what: str = "scheduler state") -> SchedulerRuntime:
    """The cold start: the engine from every table of the mirror. The change-log position is
    read first, so a change committed while the tables are read is applied again later
    (applying a change twice changes nothing). `freeze`: leave the objects made out of the
    garbage collector's later collections (the scheduler process, which collects them
    itself between passes); `what` names the state in the log."""
    started = time.perf_counter()
    collect_garbage_left()
    unnoted = _missing_triggers()
    cursor = _latest_change()
    versions: dict[str, int] = {}
    # Millions of objects are made here and kept: the cyclic garbage collector would walk
    # them again and again while they are built (half the time), and at every collection
    # after. It waits until they are built, and then leaves them out of its collections.
    statuses: dict[str, tuple[str, str]] = {}
    with _made_to_keep(freeze=freeze):
        parsed = engine_inputs(versions, statuses)
        engine = Engine.from_parsed(parsed, gates, _log_warning, config=config)
        engine.queues.restore_sticky(sticky_heads_recorded())  # the heads a state before kept
        # what the database says of each waiting workload is the answer already given (thousands
        # share a message: each is masked once)
        shapes: dict[str, str] = {}
        for key, (status, message) in statuses.items():
            shape = shapes.get(message)
            if shape is None:
                shape = shapes[message] = message_shape(message)
            engine.answered[key] = (status, shape)
    runtime = SchedulerRuntime(engine=engine, gates=gates_text, cursor=cursor, versions=versions,
                               last_pass=_latest_pass(), unnoted=unnoted)
    logger.info("%s built from the mirror: %d nodes, %d workloads, %d pods in %.2fs", what,
                len(engine.state.nodes), len(engine.state.workload_map), len(engine.state.pod_map()),
                time.perf_counter() - started)
    return runtime


def _log_warning(message: str) -> None:
    logger.warning("%s", message)


def collect_garbage_left() -> None:
    """Free what a state built before left behind (one discarded after a rolled-back pass,
    or replaced because it could not be trusted), before a new one is read with the
    collector paused: its reference cycles would otherwise wait, those of a frozen state for
    the next full collection. On a first build it walks only what the process has imported."""
    gc.unfreeze()
    gc.collect()


def _missing_triggers() -> list[str]:
    """The change-log triggers missing from the mirrored tables, logged when that changes."""
    global _reported_unnoted
    missing = missing_change_triggers(connection)
    if missing != _reported_unnoted:
        if missing:
            logger.error("the mirror's change log misses %d trigger(s) (%s): the scheduler state is built again "
                         "at every pass until `manage.py migrate` makes them", len(missing), ", ".join(missing))
        else:
            logger.info("the mirror's change log has all its triggers again")
        _reported_unnoted = missing
    return missing


def _pending_changes(runtime: SchedulerRuntime) -> list[cluster.MirrorChange]:
    query = Q(id__gt=runtime.cursor)
    for gap in runtime.gaps:
        query |= Q(id__gte=gap.low, id__lte=gap.high)
    return list(cluster.MirrorChange.objects.filter(query).order_by("id"))


def _advance(runtime: SchedulerRuntime, changes: list[cluster.MirrorChange]) -> None:
    """Move the cursor past what was read; holes below it become gaps, gaps filled or
    expired are forgotten."""
    now = time.monotonic()
    seen = sorted(c.id for c in changes if c.id <= runtime.cursor)
    gaps = []
    for gap in runtime.gaps:
        if now - gap.since > _gap_seconds():
            continue
        gaps += _split(gap, [i for i in seen if gap.low <= i <= gap.high])
    expected = runtime.cursor + 1
    for change in changes:
        if change.id <= runtime.cursor:
            continue
        if change.id > expected:
            gaps.append(Gap(expected, change.id - 1, now))
        expected = change.id + 1
    runtime.cursor = max(runtime.cursor, expected - 1)
    runtime.gaps = gaps


def _split(gap: Gap, filled: list[int]) -> list[Gap]:
    """What is left of a gap once the (sorted) ids `filled` showed up."""
    out: list[Gap] = []
    low = gap.low
    for i in filled:
        if i > low:
            out.append(Gap(low, i - 1, gap.since))
        low = i + 1
    if low <= gap.high:
        out.append(Gap(low, gap.high, gap.since))
    return out


def runtime_apply(runtime: SchedulerRuntime, changed: ChangedObjects) -> None:
    """Apply what changed to the engine, one object at a time."""
    engine = runtime.engine
    for kind, key in changed.deletes:
        engine.delete(kind, key)
        if kind == "Workload":
            runtime.versions.pop(key, None)
    for kind, obj in changed.upserts:
        engine.upsert(obj, order=changed.order.get(engine_key(kind, obj)) if kind == "Workload" else None)
    runtime.versions.update(changed.versions)
    runtime.changes_applied += len(changed.deletes) + len(changed.upserts)


def runtime_untrusted(runtime: SchedulerRuntime, gates_text: str, *, kept_seconds: float, decides: bool) -> str:
    """Why the runtime cannot be brought up to date from the change log and must be built
    afresh ("" if it can). `kept_seconds`: how long the log keeps the changes it would read;
    `decides`: its process runs passes (a pass another process ran decided what this one's
    memory does not hold)."""
    if runtime.gates != gates_text:
        return "feature gates or Kueue Configuration changed"
    if runtime.unnoted:
        return "the change log misses triggers"
    if decides and _latest_pass() != runtime.last_pass:
        return "another process ran a pass"
    if time.monotonic() - runtime.applied_at > kept_seconds / 2:
        return "idle longer than the change log keeps what it would read"
    if len(runtime.gaps) > MAX_GAP_RANGES:
        return "too many changes not visible yet"
    return ""


def _needs_rebuild(runtime: SchedulerRuntime | None, gates_text: str) -> str:
    if runtime is None:
        return "first pass of this process"
    return runtime_untrusted(runtime, gates_text, kept_seconds=_retention_seconds(), decides=True)


def runtime_for_pass(*, gates_text: str, gates: FeatureGates, config: Configuration | None = None
                     ) -> SchedulerRuntime:
    """The engine state for the pass about to run: the process's runtime brought up to date
    with the mirror, or built afresh when it cannot be trusted."""
    global _runtime
    with _lock:
        runtime = _runtime
        reason = _needs_rebuild(runtime, gates_text)
        if not reason:
            assert runtime is not None
            reason = runtime_catch_up(runtime)
        if reason:
            logger.info("scheduler state: building it from the mirror (%s)", reason)
            # the state it replaces goes first: the two at once would double the process's memory
            _runtime = runtime = None
            estimate_source_set(None)
            runtime = runtime_build(gates_text=gates_text, gates=gates, config=config)
        _runtime = runtime
        return runtime


def runtime_catch_up(runtime: SchedulerRuntime, *, freeze: bool = True) -> str:
    """Apply to the runtime's engine the changes noted since its position (and the objects it
    was asked to read again); "" once done, else why it cannot be, and must be built afresh
    (a mirrored table was emptied). `freeze` as for `runtime_build`, when many changed."""
    changes = _pending_changes(runtime)
    rereads = [cluster.MirrorChange(kind=kind, namespace=key.partition("/")[0] if "/" in key else "",
                                    name=key.rpartition("/")[2]) for kind, key in sorted(runtime.rereads)]
    many = len(changes) + len(rereads) >= MANY_CHANGES
    with _made_to_keep(many, freeze=freeze):  # as at the build
        changed = changed_objects([*changes, *rereads])
        runtime.rereads = set()
        if changed.reset:
            return "a mirrored table was emptied"
        runtime_apply(runtime, changed)
        _advance(runtime, changes)
        runtime.applied_at = time.monotonic()
    return ""


def runtime_committed(runtime: SchedulerRuntime, scheduling_pass: SchedulingPass, *,
                      left_alone: set[str] = frozenset()) -> None:
    """The pass committed: its decisions are the database's too, except for the workloads
    it `left_alone` (changed by a source meanwhile), which are read again, pods included."""
    runtime.last_pass = scheduling_pass.id
    state = runtime.engine.state
    for key in left_alone:
        runtime.rereads.add(("Workload", key))
        runtime.rereads.update(("Pod", pod.key) for pod in state.pods_of(key))
    settle_memory(runtime)


def settle_memory(runtime: SchedulerRuntime) -> None:
    """What outlives a pass is mostly the engine's state, kept for many more: it is left out of
    the cyclic garbage collector's collections (`gc.freeze`), so that a pass does not pay for
    walking millions of long-lived objects (a full collection of a 50,000-node state takes
    about half a second). Objects that die are still freed at once by reference counting;
    only garbage in reference cycles waits, for the full collection made every
    TAS_SCHEDULER_FULL_COLLECTION_SECONDS, between passes."""
    period = float(getattr(settings, "TAS_SCHEDULER_FULL_COLLECTION_SECONDS", DEFAULT_FULL_COLLECTION_SECONDS))
    now = time.monotonic()
    # the garbage in cycles the pass made (it ran with the collector paused), before what is
    # left of it joins the frozen state: one walk over the pass's survivors
    gc.collect(0)
    if now - runtime.collected_at >= period:
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        runtime.collected_at = now
        logger.info("scheduler: full garbage collection, %d unreachable objects, %.2fs", found,
                    time.perf_counter() - started)
    gc.freeze()


def runtime_discard(reason: str) -> None:
    """Forget the runtime (a pass rolled back: memory holds decisions the database does not),
    and the engine the estimates play from, which is its engine."""
    global _runtime
    with _lock:
        if _runtime is not None:
            logger.info("scheduler state discarded: %s", reason)
        _runtime = None
    estimate_source_set(None)


def runtime_current() -> SchedulerRuntime | None:
    return _runtime


def follower_seconds() -> float:
    """How long a change stays in the log after this process's runtime applied it, for the
    other processes that follow the log (the web processes' views, `tasweb.api.state`): one
    that has not caught up for half as long builds its state afresh instead."""
    return float(getattr(settings, "TAS_CHANGE_LOG_FOLLOWER_SECONDS", DEFAULT_FOLLOWER_SECONDS))


def change_log_prune(*, before: datetime | None = None, now: datetime | None = None) -> int:
    """Drop change-log rows older than the retention (`before`), and those this process's
    runtime applied once the followers had time to apply them too (`follower_seconds`)."""
    runtime = _runtime
    query = Q()
    if before is not None:
        query |= Q(at__lt=before)
    if runtime is not None:
        low = min([runtime.cursor + 1, *(g.low for g in runtime.gaps)])
        followed = (now or timezone.now()) - timedelta(seconds=follower_seconds())
        query |= Q(id__lt=low) & (Q(at__lt=followed) | Q(at__isnull=True))
    if not query:
        return 0
    deleted, _ = cluster.MirrorChange.objects.filter(query).delete()
    return deleted


__all__ = [
    "SchedulerRuntime",
    "change_log_prune",
    "follower_seconds",
    "runtime_build",
    "runtime_catch_up",
    "runtime_committed",
    "runtime_current",
    "runtime_discard",
    "runtime_for_pass",
    "runtime_untrusted",
]
