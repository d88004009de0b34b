"""The engine's view of the mirrored cluster, kept in the web process: built once, then
brought up to date from the mirror's change log, as the scheduler keeps its state.

Building a `ClusterState` for 50,000 nodes and 100,000 workloads takes seconds; reading a
cheap *mirror version* takes a millisecond, and applying a few changes a few more. The
version is one query: for every mirrored table its latest `updated_at` (every write path,
`save()`, `bulk_create()`, COPY and the resync's `update()`, sets that column; the large
tables index it), a note of the latest deletion, and the feature gates; nothing in it scans
a table (with 100,000 stored workloads, counting rows cost more than the answers it
guards). An insert or update moves a `max(updated_at)`, a delete adds a row to
`cluster_mirror_deletion` (a trigger on every mirrored table, cluster migration 0003), so
any change the engine could see gives a new version; the next request then applies the
changes the change log noted since the view's position (`runtime_catch_up`, the
scheduler's own) and requests in between share the view as it is. A scheduling pass moves
the version only through what it writes to the mirror (the workloads it admits, evicts or
explains): one that changes nothing, as most do while the cluster is quiet (one every
TAS_SCHEDULER_BEAT_SECONDS), leaves the view as it is. What a pass writes elsewhere (the
stop records of why-pending) is read per request and keys what is remembered of it.

The view is built afresh when it cannot follow: at the first request, when the feature
gates or Kueue's Configuration changed, when a mirrored table was emptied, while the
change log misses triggers, when it was not brought up to date for half of
TAS_CHANGE_LOG_FOLLOWER_SECONDS (the scheduler prunes what it applied after that long),
and when too many changes it skipped are still not visible (the scheduler's own rules,
`runtime_untrusted`, less the one about passes: the web runs none).
(SQLite, the embedded default, has no deletion trigger and counts each table's rows
instead.)

In a gunicorn worker a thread of its own keeps the view (`view_keeper_start`, started by
gunicorn.conf.py): it builds it at start and brings it up to date every
TAS_API_VIEW_KEEP_SECONDS, so that neither the first request nor one after a quiet spell
waits seconds for a build on a large cluster.

A long transaction that commits a row whose `updated_at` (or deletion note) is older than
one committed meanwhile could leave the version unchanged; after `TAS_API_STATE_MAX_AGE`
seconds the change log is read anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, connections

from scheduler.cluster import ClusterState
from scheduler.model import Workload as EngineWorkload
from tasweb.cluster import models as cluster
from tasweb.scheduling.runtime import (
    SchedulerRuntime,
    follower_seconds,
    runtime_build,
    runtime_catch_up,
    runtime_untrusted,
)
from tasweb.scheduling.services import engine_settings_key, feature_gates, kueue_configuration

T = TypeVar("T")
logger = logging.getLogger(__name__)

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
    cluster.Namespace,
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
    """The engine state of the mirror at `version`, shared by the requests of this process.
    Between versions it is brought up to date from the change log, under `lock`; readers that
    let the engine change it for a moment (the why-pending search removes workloads' usage
    and puts it back) hold `lock` too, and so do `remember`'s computations."""

    version: tuple
    checked_at: float  # when the version was last read and the state brought up to it
    runtime: SchedulerRuntime  # the state and its position in the mirror's change log
    lock: threading.RLock = field(default_factory=threading.RLock)
    memo: OrderedDict = field(default_factory=OrderedDict)
    # computed parts kept across versions, each holding what it was computed from, to be
    # checked by its reader (the dashboard's display frames)
    kept: dict = field(default_factory=dict)
    caught_up: int = 0  # times brought up to date since it was built

    @property
    def state(self) -> ClusterState:
        return self.runtime.engine.state

    @property
    def workloads(self) -> dict[str, EngineWorkload]:
        return self.state.workload_map

    def remember(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per version and key; the answer cannot change until the mirror does."""
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
    return view is not None and view.version == version and time.monotonic() - view.checked_at < _max_age()


def build_view(version: tuple) -> EngineView:
    runtime = runtime_build(gates_text=engine_settings_key(), gates=feature_gates(), config=kueue_configuration()[1],
                            freeze=False, what="the web's engine view")
    return EngineView(version=version, checked_at=time.monotonic(), runtime=runtime)


def _catch_up(view: EngineView, version: tuple) -> bool | None:
    """Bring the view up to `version` from the change log: True once done, False when it must
    be built afresh, None when another thread of this process is reading it (it is served as
    it is, and a later request brings it up to date: waiting here for a reader that may itself
    be asking for the view, while holding the build lock, could wait for ever)."""
    # the version's last part is the engine's settings; the scheduler keeps what it applied
    # in the change log for the followers as long as follower_seconds()
    reason = runtime_untrusted(view.runtime, version[-1], kept_seconds=follower_seconds(), decides=False)
    if not reason:
        if not view.lock.acquire(blocking=False):
            return None
        try:
            reason = runtime_catch_up(view.runtime, freeze=False)
            if not reason:
                # the queues take what changed (as a pass would first): they would otherwise hold
                # on to every workload deleted since, and the cache to the list of changes
                view.runtime.engine.sync(None)
                view.version, view.checked_at = version, time.monotonic()
                view.memo.clear()
                view.caught_up += 1
                return True
        finally:
            view.lock.release()
    logger.info("the web's engine view: building it afresh (%s)", reason)
    return False


def engine_view() -> EngineView:
    """The engine state of the mirror as it is now: the process's view while the mirror's
    version holds; when it moved, the same view brought up to date from the change log (a
    few milliseconds for a few changes, where building it afresh takes seconds on a large
    cluster), or a new one where that cannot be done."""
    global _current
    version = mirror_version()
    view = _current
    if _fresh(view, version):
        return view
    with _build_lock:  # one update at a time; the others wait and share it
        view = _current
        if _fresh(view, version):
            return view
        followed = _catch_up(view, version) if view is not None else False
        if followed is None:
            assert view is not None
            return view
        if not followed:
            # the view it replaces goes first (runtime_build collects what it leaves), not to hold
            # two at once; a request reading it keeps it
            _current = view = None
            view = build_view(version)  # with the garbage collector paused, as the scheduler builds its state
        _current = view
        return view


def engine_view_reset() -> None:
    """Forget the cached view (tests, and after settings that change the engine)."""
    global _current
    with _build_lock:
        _current = None


# What a keeper computes with the view besides the engine's own parts, each a callable of the
# view run under its lock (the dashboard's display of every TAS flavor, registered by its app):
# so that the first visitor of a page finds it made too.
view_warmers: list[Callable[[EngineView], None]] = []


def keep_seconds() -> float:
    return float(getattr(settings, "TAS_API_VIEW_KEEP_SECONDS", 60.0))


def view_keeper_start(seconds: float | None = None, *, stop: threading.Event | None = None
                      ) -> threading.Thread | None:
    """Keep this process's view in a thread of its own: built now, so that the first request
    finds it (seconds on a large cluster), then brought up to date every `seconds`
    (TAS_API_VIEW_KEEP_SECONDS; 0: no thread) whether requests come or not, so that it never
    falls out of the change log's window and is built afresh for the next visitor. What the
    engine computes on first use (the TAS snapshots, the quota tree) is computed too, and so
    is what `view_warmers` make. Each
    gunicorn worker starts one (gunicorn.conf.py); `stop`, when set, ends it."""
    seconds = keep_seconds() if seconds is None else seconds
    if seconds <= 0:
        return None
    thread = threading.Thread(target=_keep, args=(seconds, stop or threading.Event()), name="tas-engine-view",
                              daemon=True)
    thread.start()
    return thread


VIEW_READY = "the web's engine view ready"  # logged once a keeper has made everything


def _keep(seconds: float, stop: threading.Event) -> None:
    ready = False
    while not stop.is_set():
        try:
            started = time.monotonic()
            view = engine_view()
            with view.lock:
                view.state.derive()
                for warm in view_warmers:
                    warm(view)
            if not ready:
                ready = True
                logger.info("%s: built or followed, derived and made by %d warmer(s) in %.1f s", VIEW_READY,
                            len(view_warmers), time.monotonic() - started)
        except Exception:
            logger.exception("the web's engine view could not be brought up to date; trying again in %.0fs", seconds)
        finally:
            connections.close_all()  # this thread's own: it sleeps until the next time
        stop.wait(seconds)


def remembered(key: Hashable, compute: Callable[[EngineView], Any]) -> Any:
    view = engine_view()
    return view.remember(key, lambda: compute(view))
