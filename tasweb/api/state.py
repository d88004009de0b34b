"""The engine's view of the mirrored cluster, built once per mirror version and kept in the
web process.

Building a `ClusterState` for 10,000 nodes and thousands of active workloads takes seconds;
reading a cheap *mirror version* takes a millisecond. The version is one query: for every
mirrored table its latest `updated_at` (every write path, `save()`, `bulk_create()`, COPY
and the resync's `update()`, sets that column; the large tables index it), a note of the
latest deletion, and the feature gates; nothing in it scans a table (with 100,000 stored
workloads, counting rows cost more than the answers it guards). An insert or update
moves a `max(updated_at)`, a delete adds a row to `cluster_mirror_deletion` (a trigger on
every mirrored table, cluster migration 0003), so any change the engine could see gives a
new version and the next request rebuilds; requests in between share one immutable view. A
scheduling pass moves it only through what it writes to the mirror (the workloads it
admits, evicts or explains): one that changes nothing, as most do while the cluster is
quiet (one every TAS_SCHEDULER_BEAT_SECONDS), leaves the view as it is -- rebuilding it
takes seconds at 100,000 workloads. What a pass writes elsewhere (the stop records of
why-pending) is read per request and keys what is remembered of it. (SQLite, the embedded
default, has no deletion trigger and counts each table's rows instead.)

A long transaction that commits a row whose `updated_at` (or deletion note) is older than
one committed meanwhile could leave the version unchanged; `TAS_API_STATE_MAX_AGE`
(seconds) bounds how long a view is trusted anyway.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection

from scheduler.cluster import ClusterState
from scheduler.memory import gc_paused
from scheduler.model import Workload as EngineWorkload
from scheduler.parse import ParsedObjects
from tasweb.cluster import models as cluster
from tasweb.scheduling.selectors import engine_inputs
from tasweb.scheduling.services import engine_settings_key, feature_gates, kueue_configuration

T = TypeVar("T")

MIRRORED_MODELS = (
    cluster.Node,
    cluster.Pod,
    cluster.Topology,
    cluster.ResourceFlavor,
    cluster.ClusterQueue,
    cluster.LocalQueue,
    cluster.Cohort,
    cluster.AdmissionCheck,
    cluster.WorkloadPriorityClass,
    cluster.Workload,
)
MEMO_ENTRIES = 256  # computed answers (trees, explanations) kept per view
DELETION_LOG = "cluster_mirror_deletion"  # written by a trigger on every mirrored table (PostgreSQL)


def mirror_version() -> tuple:
    """A value that changes whenever anything the engine reads from the mirror changes."""
    quote = connection.ops.quote_name
    parts = []
    for model in MIRRORED_MODELS:
        table = quote(model._meta.db_table)
        if connection.vendor != "postgresql":
            parts.append(f"(SELECT COUNT(*) FROM {table})")
        parts.append(f"(SELECT MAX({quote('updated_at')}) FROM {table})")
    if connection.vendor == "postgresql":
        parts.append(f"(SELECT MAX({quote('id')}) FROM {quote(DELETION_LOG)})")
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts))
        row = cursor.fetchone()
    return (*row, engine_settings_key())


@dataclass(eq=False)
class EngineView:
    """One immutable engine state of the mirror. Readers that let the engine change it for a
    moment (the why-pending search removes workloads' usage and puts it back) hold `lock`."""

    version: tuple
    built_at: float
    parsed: ParsedObjects
    state: ClusterState
    workloads: dict[str, EngineWorkload]
    lock: threading.RLock = field(default_factory=threading.RLock)
    memo: OrderedDict = field(default_factory=OrderedDict)

    def remember(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per view and key; the answer cannot change until the mirror does."""
        with self.lock:
            if key in self.memo:
                self.memo.move_to_end(key)
                return self.memo[key]
            value = compute()
            self.memo[key] = value
            while len(self.memo) > MEMO_ENTRIES:
                self.memo.popitem(last=False)
            return value


_build_lock = threading.Lock()
_current: EngineView | None = None


def _max_age() -> float:
    return float(getattr(settings, "TAS_API_STATE_MAX_AGE", 300))


def _fresh(view: EngineView | None, version: tuple) -> bool:
    return view is not None and view.version == version and time.monotonic() - view.built_at < _max_age()


def build_view(version: tuple) -> EngineView:
    with gc_paused():  # hundreds of thousands of objects made, next to no cycles
        parsed = engine_inputs()
        state = ClusterState(parsed, feature_gates(), lambda _message: None, config=kueue_configuration()[1])
    return EngineView(version=version, built_at=time.monotonic(), parsed=parsed, state=state,
                      workloads={w.key: w for w in state.workloads})


def engine_view() -> EngineView:
    """The engine state of the mirror as it is now: the cached one while the version holds."""
    global _current
    version = mirror_version()
    view = _current
    if _fresh(view, version):
        return view
    with _build_lock:  # one build at a time; the others wait and share it
        view = _current
        if _fresh(view, version):
            return view
        view = build_view(version)
        _current = view
        return view


def engine_view_reset() -> None:
    """Forget the cached view (tests, and after settings that change the engine)."""
    global _current
    with _build_lock:
        _current = None


def remembered(key: Hashable, compute: Callable[[EngineView], Any]) -> Any:
    view = engine_view()
    return view.remember(key, lambda: compute(view))
