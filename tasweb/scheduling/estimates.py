"""Predicted start times of waiting workloads, kept in `WorkloadPrediction`.

After a pass commits, the engine state it left (the scheduler process's long-lived engine in
control mode, the pass's own engine in observe mode) is noted here (`estimate_source_set`),
and a task (`tasks.estimate_start_times`) is queued on the scheduler queue. The scheduler's
worker runs one task at a time (a solo pool), so the estimate runs between passes, on the
engine state of the last committed pass, in the process that holds it:

* where the OS can fork (`TAS_ETA_FORK`, on by default), the task forks the process while
  no pass changes the engine (`engine_in_use`) and returns: the child process has the
  engine's copy-on-write image, plays on it (its low and high plays in children of its own,
  on both cores; `scheduler.eta`, `fork_plays`) at a lower CPU priority
  (`TAS_ETA_NICE`), stores the predictions with database connections of its own and
  exits. The worker is free for the next pass at once; no copy of the engine is made. One
  child runs at a time: an estimate asked for meanwhile is queued again for when it is
  done, and a child running past three times its budget is killed;
* otherwise it copies the engine while no pass changes it, then plays the queue on the
  copy: a pass may run meanwhile, and waits at most for that copy. It yields to a pass: when
  a pass task is queued it returns at once, and when one is queued while the plays run they
  stop within one of their passes and store nothing (the pass queues the next estimate when
  it commits), unless the stored predictions are older than `TAS_ETA_MAX_AGE_SECONDS` (with
  passes back to back it would never run);
* the range comes from three plays, one per runtime level (`TAS_ETA_RANGE=plays`, the
  default), or from the median play alone, timed again along its chain of finishes
  (`chain`: a third of the work, a range that holds the actual start less often);
* the plays (`scheduler.eta.estimate`; the live engine is left as it was) run for at most
  `TAS_ETA_BUDGET_SECONDS` of wall clock (they stop there; the workloads left get no time
  and say why), up to `TAS_ETA_HORIZON_SECONDS` ahead;
* runtimes come from `RuntimeHistory`, built from the finished workloads of the mirror and
  read again every `TAS_ETA_HISTORY_REFRESH_SECONDS`;
* the workloads submitted in the last `TAS_ETA_ARRIVALS_WINDOW_SECONDS` before the pass are
  expected again, as often within the horizon, less the bursts
  (`scheduler.eta.expected_arrivals`): they wait in their queues in the plays like any other,
  so that a later workload passing a waiting one is foreseen. Off by default (0: none are
  played, as in Slurm): it pays under steady load, and misleads when the last window is not
  what comes next (a cluster filled at once is expected to be filled again every window);
* the predictions replace the stored ones in one transaction (rows of workloads no longer
  waiting go with them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, connections, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from scheduler.calibration import (
    DEFAULT_BANDS,
    DEFAULT_COVERAGE,
    Outcome,
    RangeCalibration,
    calibrated_range,
    calibration_of,
)
from scheduler.clone import clone_engine
from scheduler.engine import Engine
from scheduler.eta import (
    NEVER,
    PLAYS,
    SAMPLES,
    Estimate,
    EtaSettings,
    Prediction,
    RecentArrivals,
    can_fork,
    estimate,
    planned_range,
    play_seconds,
    plays_forked,
)
from scheduler.eta import RANGES as ENGINE_RANGES  # the modes the engine plays; the service adds "auto"
from scheduler.runtimes import RuntimeClass, RuntimeEstimate, RuntimeHistory, size_class
from tasweb.cluster import models as cluster
from tasweb.cluster.services import rows_insert, rows_stage
from tasweb.core.deadline import deadline
from tasweb.core.queries import json_key
from tasweb.scheduling.leader import pass_time_limit, scheduler_key
from tasweb.scheduling.models import PredictionRun, PredictionSnapshot, SchedulingPass, WorkloadPrediction
from tasweb.scheduling.selectors import read_beside, recent_workloads

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_SECONDS = 2.0
DEFAULT_HORIZON_SECONDS = 24 * 3600.0
DEFAULT_HISTORY_REFRESH_SECONDS = 300.0
DEFAULT_MAX_AGE_SECONDS = 60.0
DEFAULT_CALIBRATION_OUTCOMES = 500
DEFAULT_SNAPSHOT_SECONDS = 600.0
DEFAULT_SNAPSHOT_RETENTION_SECONDS = 48 * 3600.0
DEFAULT_ARRIVALS_WINDOW_SECONDS = 0.0  # off: see TAS_ETA_ARRIVALS_WINDOW_SECONDS in the settings
DEFAULT_NICE = 10
DEFAULT_SAMPLES = 11
DEFAULT_TARGET_SECONDS = 1.0
CHILD_BUDGET_FACTOR = 3  # a child running this many times its budget (and 10 s more) is killed
REQUEUE_SECONDS = 0.5  # an estimate asked for while the last one's child runs: tried again after this
HISTORY_RUNS = 5000  # the latest finished workloads the runtime history learns from
NOT_ESTIMATED = "not estimated yet"


def eta_enabled() -> bool:
    return bool(getattr(settings, "TAS_ETA_ENABLED", True))


def eta_fork_enabled() -> bool:
    """Whether estimates run in a forked child process (see the module docstring). Never on
    SQLite: its locks are the process's, so a child that inherits any trace of the parent's
    connections (a closed one's file kept open, an unreachable one not yet collected) can find
    the database locked by itself for good, and the parent's last close deletes the WAL the
    child is reading (seen as children that hung until killed on a fresh `make run`)."""
    return bool(getattr(settings, "TAS_ETA_FORK", True)) and can_fork() and connection.vendor != "sqlite"


AUTO = "auto"
RANGES = (AUTO, *ENGINE_RANGES)


def eta_range() -> str:
    """TAS_ETA_RANGE: how an estimate gets its prediction and range (`scheduler.eta.EtaSettings.range`),
    or `auto`: the richest that fits TAS_ETA_TARGET_SECONDS (`scheduler.eta.planned_range`)."""
    value = str(getattr(settings, "TAS_ETA_RANGE", AUTO) or AUTO)
    if value not in RANGES:
        raise ValueError(f"TAS_ETA_RANGE: {value!r} is not a range mode; expected one of {', '.join(RANGES)}")
    return value


def eta_samples() -> int:
    """TAS_ETA_SAMPLES: the sampled plays of an estimate (`samples`), at most (`auto`)."""
    value = getattr(settings, "TAS_ETA_SAMPLES", DEFAULT_SAMPLES)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"TAS_ETA_SAMPLES: must be a whole number of at least 1, got {value!r}")
    return value


def eta_target_seconds() -> float:
    """TAS_ETA_TARGET_SECONDS: the wall clock `auto` plans an estimate for."""
    value = getattr(settings, "TAS_ETA_TARGET_SECONDS", DEFAULT_TARGET_SECONDS)
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"TAS_ETA_TARGET_SECONDS: must be a number of seconds above 0, got {value!r}")
    return float(value)


def eta_coverage() -> float:
    """TAS_ETA_COVERAGE: the share of starts the ranges shown are calibrated to hold
    (`scheduler.calibration`); 0: the plays' own ranges."""
    value = getattr(settings, "TAS_ETA_COVERAGE", DEFAULT_COVERAGE)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1:
        raise ValueError(f"TAS_ETA_COVERAGE: must be a share of at least 0 and below 1, got {value!r}")
    return float(value)


def eta_calibration_bands() -> int:
    """TAS_ETA_CALIBRATION_BANDS: into how many bands of expected waits, at most, the
    outcomes are cut, each calibrated on its own (`scheduler.calibration`)."""
    value = getattr(settings, "TAS_ETA_CALIBRATION_BANDS", DEFAULT_BANDS)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"TAS_ETA_CALIBRATION_BANDS: must be a whole number of at least 1, got {value!r}")
    return value


PLAY_SECONDS_KEY = "eta-play-seconds"  # what a play of the last estimate took: `auto` plans the next with it


def estimate_cost_forget() -> None:
    cache.delete(scheduler_key(PLAY_SECONDS_KEY))


def eta_settings(*, budget: float | None = None) -> EtaSettings:
    seconds = float(getattr(settings, "TAS_ETA_BUDGET_SECONDS", DEFAULT_BUDGET_SECONDS)) if budget is None else budget
    horizon = float(getattr(settings, "TAS_ETA_HORIZON_SECONDS", DEFAULT_HORIZON_SECONDS))
    range_, samples = eta_range(), eta_samples()
    if range_ == AUTO:
        processes = (os.cpu_count() or 1) if eta_fork_enabled() else 1
        range_, samples = planned_range(cache.get(scheduler_key(PLAY_SECONDS_KEY)), eta_target_seconds(),
                                        processes, samples)
    return EtaSettings(horizon=timedelta(seconds=horizon), budget_seconds=max(seconds, 0.0), range=range_,
                       samples=samples)


# ---------------------------------------------------------------- the engine state to estimate on


@dataclass
class EstimateSource:
    engine: Engine
    scheduling_pass: int | None
    now: datetime  # the pass's time: the engine's clock


_source_lock = threading.Lock()
_source: EstimateSource | None = None
# Held by a control pass while it changes the long-lived engine, and by the estimate while it
# copies it. A solo worker runs one task at a time, but its timer thread may start a pass
# (a task with a countdown) while the main thread runs the estimate.
_engine_lock = threading.Lock()


@contextlib.contextmanager
def engine_in_use() -> Iterator[None]:
    with _engine_lock:
        yield


def estimate_source_set(engine: Engine | None, *, scheduling_pass: SchedulingPass | None = None,
                        now: datetime | None = None) -> None:
    """The engine state the next estimate plays from (None: none to trust, e.g. a pass rolled
    back). Nothing is kept while estimates are turned off."""
    global _source
    if engine is not None and not eta_enabled():
        engine = None
    with _source_lock:
        _source = None if engine is None else EstimateSource(
            engine, scheduling_pass.id if scheduling_pass is not None else None, now or timezone.now())


def estimate_source() -> EstimateSource | None:
    return _source


# ---------------------------------------------------------------- runtime history


_history_lock = threading.Lock()
_history: tuple[float, RuntimeHistory] | None = None


def _owner_kind(raw: Any) -> str:
    refs = ((raw or {}).get("metadata") or {}).get("ownerReferences") or []
    refs = [r for r in refs if isinstance(r, dict)]
    for ref in refs:
        if ref.get("controller"):
            return str(ref.get("kind") or "Workload")
    return str(refs[0].get("kind") or "Workload") if refs else "Workload"


def runtime_history_build(*, limit: int = HISTORY_RUNS) -> RuntimeHistory:
    """What the mirror's finished workloads ran (admission to finish), by owner kind,
    LocalQueue and size class, oldest first so the newest runs stay in each class's window."""
    history = RuntimeHistory()
    rows = (cluster.Workload.objects.filter(status=cluster.WorkloadStatus.FINISHED, admitted_at__isnull=False,
                                            finished_at__isnull=False)
            .order_by("-finished_at").annotate(owners=json_key("raw", "metadata", "ownerReferences"))
            .values_list("namespace", "queue_name", "pod_count", "admitted_at", "finished_at", "owners")[:limit])
    runs = []
    for namespace, queue, pods, admitted, finished, owners in rows:
        seconds = (finished - admitted).total_seconds()
        cls = RuntimeClass(_owner_kind({"metadata": {"ownerReferences": owners}}), f"{namespace}/{queue}",
                           size_class(pods))
        runs.append((cls, seconds))
    history.extend(reversed(runs))
    return history


def runtime_history(*, refresh: bool = False) -> RuntimeHistory:
    """The runtime history, read again from the database every TAS_ETA_HISTORY_REFRESH_SECONDS."""
    global _history
    period = float(getattr(settings, "TAS_ETA_HISTORY_REFRESH_SECONDS", DEFAULT_HISTORY_REFRESH_SECONDS))
    with _history_lock:
        if refresh or _history is None or time.monotonic() - _history[0] >= period:
            _history = (time.monotonic(), runtime_history_build())
        return _history[1]


def runtime_history_forget() -> None:
    global _history
    with _history_lock:
        _history = None


# ---------------------------------------------------------------- expected arrivals


def expected_arrivals_read(now: datetime) -> RecentArrivals:
    """What to expect after `now`: the workloads submitted in the TAS_ETA_ARRIVALS_WINDOW_SECONDS
    before it, less the bursts (none while that is 0)."""
    window = float(getattr(settings, "TAS_ETA_ARRIVALS_WINDOW_SECONDS", DEFAULT_ARRIVALS_WINDOW_SECONDS))
    span = timedelta(seconds=max(window, 0.0))
    return RecentArrivals.of(recent_workloads(now - span, now) if window > 0 else [], now, span)


# ---------------------------------------------------------------- estimating and storing


def _placement_json(prediction: Prediction) -> list[dict[str, Any]]:
    out = []
    for ps in prediction.placement:
        flavors = dict(ps.flavors)
        out.append({"podSet": ps.name, "count": ps.count, "flavors": flavors,
                    "flavor": next(iter(sorted(set(flavors.values()))), None) if flavors else None,
                    "topologyAssignment": ps.assignment.to_decoded_json() if ps.assignment is not None else None})
    return out


class RunRuntimes(dict):
    """The runtimes of one estimate's predictions (PredictionRun.runtimes), each under a key
    that stays the same from one estimate to the next while its numbers move: its basis (the
    class whose runs it learned from, the annotation, the deadline) and its problems."""

    def key_of(self, runtime: RuntimeEstimate) -> str:
        value = {"low": runtime.low, "median": runtime.median, "high": runtime.high, "source": runtime.source,
                 "detail": runtime.detail, "problems": list(runtime.problems)}
        key = runtime.basis or f"content:{_digest(value)}"
        if runtime.problems:
            key += "|" + "|".join(runtime.problems)
        known = self.setdefault(key, value)
        if known != value:  # one basis, two estimates: told apart by their content
            key = f"{key}#{_digest(value)}"
            self[key] = value
        return key


def _digest(value: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def prediction_row(prediction: Prediction, local_queue: str, *, now: datetime, runtimes: RunRuntimes,
                   calibration: RangeCalibration | None = None) -> dict[str, Any]:
    """The stored WorkloadPrediction of a prediction, as its field values (for `rows_insert`);
    its runtime goes to `runtimes`, which the row names."""
    namespace, _, _ = prediction.key.partition("/")
    runtime = prediction.runtime
    start, earliest, latest = prediction.start, prediction.earliest, prediction.latest
    calibrated: dict[str, Any] = {}
    widened = calibrated_range(calibration, now, start, earliest, latest)
    if widened is not None and calibration is not None:
        earliest, latest = widened
        band = calibration.band_for(now, start)
        calibrated = {"coverage": calibration.coverage, "outcomes": band.outcomes, "below": band.below,
                      "above": band.above, "waitFrom": band.low,
                      "waitTo": band.high if math.isfinite(band.high) else None}
    return dict(
        workload_key=prediction.key, namespace=namespace, local_queue=local_queue,
        cluster_queue=prediction.cluster_queue, start=start, earliest=earliest, latest=latest,
        plays_earliest=prediction.earliest, plays_latest=prediction.latest, calibration=calibrated,
        end=prediction.start + timedelta(seconds=runtime.median) if prediction.start is not None else None,
        source=runtime.source, runtime_key=runtimes.key_of(runtime),
        placement=_placement_json(prediction), reason=prediction.reason)


PREDICTIONS_LOCK = 0x7461735F657461  # a PostgreSQL advisory lock key of its own ("tas_eta")
INCOMING = "tas_incoming_predictions"  # the temporary table an estimate's rows are compared in


def predictions_replace(rows: Iterable[dict[str, Any]], *, estimated_at: datetime, predicted_at: datetime,
                        scheduling_pass: int | None = None, runtimes: Mapping[str, Any] | None = None,
                        played_until: datetime | None = None) -> PredictionRun | None:
    """The stored predictions become `rows` (`prediction_row`s, taken as they are made: on
    PostgreSQL the server takes the first ones while the next are made), in one transaction,
    and the stored run becomes this one; the run, or None when nothing was stored: the rows of
    an estimate made on an engine state older than the stored one's (`estimated_at`: the time
    of the pass it started from) are dropped, since an estimate's child process that outlived
    its worker must not overwrite what the next worker stored. `runtimes`: what the rows'
    `runtime_key`s name (read once the rows are, as `prediction_row` fills it); `played_until`:
    the estimate's (`Estimate.played_until`), kept on the run rather than on every row.

    On PostgreSQL only the rows that differ are written (`_merge_predictions`): between two
    estimates most workloads beyond the horizon keep theirs, and what is not written is not
    logged either (the write-ahead log a replica or an archive takes)."""
    with transaction.atomic():
        postgresql = connections[WorkloadPrediction.objects.db].vendor == "postgresql"
        if postgresql:
            with connections[WorkloadPrediction.objects.db].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PREDICTIONS_LOCK])
        stored = PredictionRun.objects.aggregate(latest=Max("estimated_at"))["latest"]
        if stored is not None and stored > estimated_at:
            return None
        if postgresql:
            counts = _merge_predictions(rows)
        else:
            deleted, _ = WorkloadPrediction.objects.all().delete()
            rows = list(rows)
            rows_insert(model=WorkloadPrediction, rows=rows)
            counts = {"predictions": len(rows), "inserted": len(rows), "updated": 0, "deleted": deleted}
        PredictionRun.objects.all().delete()
        return PredictionRun.objects.create(estimated_at=estimated_at, predicted_at=predicted_at,
                                            scheduling_pass_id=scheduling_pass, runtimes=dict(runtimes or {}),
                                            played_until=played_until, **counts)


def _merge_predictions(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """PostgreSQL: `rows` are copied into a temporary table (not logged), then the stored rows
    are brought in line with it: those of workloads no longer waiting deleted, those that
    differ updated, the new ones inserted. What each statement wrote, and how many rows.

    The joins are made by hashing, whatever the planner thinks of the tables' sizes: a table
    that was empty when last analyzed, scanned once for each of 70,000 incoming rows, took a
    minute."""
    db = connections[WorkloadPrediction.objects.db]
    qn = db.ops.quote_name
    table, incoming = qn(WorkloadPrediction._meta.db_table), qn(INCOMING)
    with db.cursor() as cursor:
        # dropped here, not only at the commit: the caller's transaction may go on (a savepoint)
        cursor.execute(f"DROP TABLE IF EXISTS {incoming}")
        cursor.execute(f"CREATE TEMPORARY TABLE {incoming} ON COMMIT DROP AS SELECT * FROM {table} WITH NO DATA")
        columns, predictions = rows_stage(model=WorkloadPrediction, rows=rows, table=INCOMING)
        cursor.execute("SELECT current_setting('enable_nestloop')")
        (nestloop,) = cursor.fetchone()
        cursor.execute("SET LOCAL enable_nestloop = off")
        key = qn("workload_key")
        cursor.execute(f"DELETE FROM {table} AS p WHERE NOT EXISTS "
                       f"(SELECT 1 FROM {incoming} AS i WHERE i.{key} = p.{key})")
        deleted = cursor.rowcount
        values = [c for c in columns if c != "workload_key"]
        mine = ", ".join(f"p.{qn(c)}" for c in values)
        theirs = ", ".join(f"i.{qn(c)}" for c in values)
        cursor.execute(f"UPDATE {table} AS p SET ({', '.join(qn(c) for c in values)}) = ({theirs}) "
                       f"FROM {incoming} AS i WHERE i.{key} = p.{key} AND ({mine}) IS DISTINCT FROM ({theirs})")
        updated = cursor.rowcount
        listed = ", ".join(qn(c) for c in columns)
        cursor.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {incoming} "
                       f"ON CONFLICT ({key}) DO NOTHING")
        inserted = cursor.rowcount
        cursor.execute("SELECT set_config('enable_nestloop', %s, true)", [nestloop])
        cursor.execute(f"DROP TABLE {incoming}")
    return {"predictions": predictions, "inserted": inserted, "updated": updated, "deleted": deleted}


def start_estimate_run(*, engine: Engine, now: datetime, scheduling_pass: int | None = None,
                       budget: float | None = None, history: RuntimeHistory | None = None,
                       interrupt: Callable[[], bool] | None = None, own: bool = False,
                       fork_plays: bool = False, arrivals: RecentArrivals | None = None) -> Estimate:
    """Predict when every workload waiting in `engine` starts, as of `now`, and store the
    predictions in place of the stored ones. `engine` is left as it was; the wall-clock
    budget (TAS_ETA_BUDGET_SECONDS unless given) bounds the plays: what they did not reach
    is stored without a start, with the reason. `arrivals`: the workloads expected to arrive
    (`expected_arrivals_read`, unless given)."""
    local_queues = {key: f"{wl.namespace}/{wl.queue_name}" for key, wl in engine.state.workload_map.items()}
    settings_ = dataclasses.replace(eta_settings(budget=budget), interrupt=interrupt)
    if arrivals is None:
        arrivals = expected_arrivals_read(now)
    # the outcomes that calibrate the ranges are read (PostgreSQL's work, on the other core)
    # while the plays run, which do not depend on them; not where the plays are forked off
    # (a process is forked with no thread of its own running)
    calibration_of_outcomes = read_beside(calibration_read, beside=not plays_forked(settings_, fork_plays))
    result = estimate(engine, now, history or runtime_history(), settings_, arrivals, own=own, fork_plays=fork_plays)
    calibration = calibration_of_outcomes()
    if result.interrupted:  # partial: the stored predictions stay until the next estimate
        logger.info("start-time estimate: given up after %.2fs for a waiting scheduling pass", result.seconds)
        return result
    runtimes = RunRuntimes()
    rows = (prediction_row(p, local_queues.get(p.key, ""), now=now, runtimes=runtimes, calibration=calibration)
            for p in result.predictions.values())
    run = predictions_replace(rows, estimated_at=now, predicted_at=timezone.now(), scheduling_pass=scheduling_pass,
                              runtimes=runtimes, played_until=result.played_until)
    if run is None:
        logger.info("start-time estimate as of %s dropped: the stored one is newer", now.isoformat())
        return result
    snapshots_record(result.predictions.values(), now=now)
    cache.set(scheduler_key("eta-done"), time.time(), timeout=None)
    if (seconds := play_seconds(result)) is not None:
        cache.set(scheduler_key(PLAY_SECONDS_KEY), seconds, timeout=None)
    # plays that stopped early (every play ends on NEVER while a workload can never fit)
    stopped = {level: play.stopped for level, play in result.plays.items() if play.stopped and play.stopped != NEVER}
    logger.info("start-time estimate: %d waiting workloads, %d within the horizon, %s, %d recent submissions "
                "expected again, %.2fs (copies %.2fs)%s; stored %d new, %d changed, %d gone [process %d]",
                len(result.predictions), sum(1 for p in result.predictions.values() if p.start is not None),
                _plays_text(result, settings_), len(arrivals), result.seconds, result.clone_seconds,
                f", stopped: {stopped}" if stopped else "", run.inserted, run.updated, run.deleted, os.getpid())
    return result


# ---------------------------------------------------------------- calibrating the ranges


def calibration_read(*, limit: int | None = None) -> RangeCalibration | None:
    """The calibration the latest outcomes give (`outcomes_read`, TAS_ETA_CALIBRATION_OUTCOMES
    of them); None when calibration is off or the outcomes are still too few."""
    coverage = eta_coverage()
    if not coverage:
        return None
    limit = limit or int(getattr(settings, "TAS_ETA_CALIBRATION_OUTCOMES", DEFAULT_CALIBRATION_OUTCOMES))
    return calibration_of(outcomes_read(limit), coverage=coverage, bands=eta_calibration_bands())


def outcomes_read(limit: int) -> list[Outcome]:
    """The kept predictions of workloads admitted after they were made, those of the latest
    admissions first, at most `limit`. The snapshots are grouped by workload first (one row a
    workload: most snapshots are of workloads still waiting, and looking up the workload of
    each took about a second at 140,000 of them; this takes a tenth of that), and only the
    snapshots of the latest `limit` admitted workloads are read."""
    qn = connection.ops.quote_name
    snapshots, workloads = qn(PredictionSnapshot._meta.db_table), qn(cluster.Workload._meta.db_table)
    sql = f"""
        WITH kept AS (SELECT namespace, name, MIN(made_at) AS first_made FROM {snapshots} GROUP BY namespace, name),
        latest AS (
            SELECT kept.namespace, kept.name, MAX(w.admitted_at) AS actual FROM kept
            JOIN {workloads} AS w ON w.namespace = kept.namespace AND w.name = kept.name
            WHERE w.admitted_at > kept.first_made
            GROUP BY kept.namespace, kept.name ORDER BY actual DESC LIMIT %s)
        SELECT s.made_at, s.start, s.earliest, s.latest, latest.actual FROM latest
        JOIN {snapshots} AS s ON s.namespace = latest.namespace AND s.name = latest.name AND s.made_at < latest.actual
        ORDER BY latest.actual DESC, s.made_at DESC LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit, limit])
        return [Outcome(*map(_stored_time, row)) for row in cursor.fetchall()]


def _stored_time(value: datetime | str) -> datetime:
    """A time as a raw query gives it: PostgreSQL's, or SQLite's (naive, or text when
    computed; UTC either way)."""
    parsed = value if isinstance(value, datetime) else parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a stored time: {value!r}")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def snapshots_record(predictions: Iterable[Prediction], *, now: datetime) -> int:
    """Keep the predictions with a start and range to be checked later: one per workload
    every TAS_ETA_SNAPSHOT_SECONDS; those older than TAS_ETA_SNAPSHOT_RETENTION_SECONDS go.
    How many were kept."""
    every = float(getattr(settings, "TAS_ETA_SNAPSHOT_SECONDS", DEFAULT_SNAPSHOT_SECONDS))
    retention = float(getattr(settings, "TAS_ETA_SNAPSHOT_RETENTION_SECONDS", DEFAULT_SNAPSHOT_RETENTION_SECONDS))
    PredictionSnapshot.objects.filter(made_at__lt=now - timedelta(seconds=retention)).delete()
    recent = set(PredictionSnapshot.objects.filter(made_at__gt=now - timedelta(seconds=every))
                 .values_list("namespace", "name"))
    rows = []
    for p in predictions:
        if p.start is None or p.earliest is None or p.latest is None:
            continue
        namespace, _, name = p.key.partition("/")
        if (namespace, name) not in recent:
            rows.append(PredictionSnapshot(namespace=namespace, name=name, made_at=now, start=p.start,
                                           earliest=p.earliest, latest=p.latest))
    PredictionSnapshot.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def _plays_text(result: Estimate, settings_: EtaSettings) -> str:
    if settings_.range == SAMPLES:
        return f"{len(result.plays)} sampled plays"
    return "a play per runtime level" if settings_.range == PLAYS else "the median play and its chain"


def predictions_clear() -> int:
    with transaction.atomic():
        deleted, _ = WorkloadPrediction.objects.all().delete()
        PredictionRun.objects.all().delete()
    return deleted


# ---------------------------------------------------------------- after a pass


INTERRUPT_CHECK_SECONDS = 0.05


def _max_age() -> float:
    return float(getattr(settings, "TAS_ETA_MAX_AGE_SECONDS", DEFAULT_MAX_AGE_SECONDS))


def estimate_schedule(*, countdown: float | None = None) -> bool:
    """Queue one estimate task unless one is queued already; True when this call queued it.
    Called after a pass committed, in the process that ran it."""
    if not eta_enabled():
        return False
    key = scheduler_key("eta-scheduled")
    if not cache.add(key, 1, timeout=max(10, int(_max_age()))):
        return False
    from tasweb.scheduling.tasks import estimate_start_times  # tasks import the services

    try:
        estimate_start_times.apply_async(countdown=countdown)
    except Exception:
        cache.delete(key)
        raise
    return True


def estimate_after_pass() -> str:
    """The queued estimate task: "ran", or why not ("disabled", "no engine", "pass queued").
    It stops where it is when it runs past the pass's time limit (TAS_SCHEDULER_PASS_TIME_LIMIT)."""
    with deadline(pass_time_limit(), "the start-time estimate", setting="TAS_SCHEDULER_PASS_TIME_LIMIT"):
        return _estimate_after_pass()


def _estimate_after_pass() -> str:
    cache.delete(scheduler_key("eta-scheduled"))
    if not eta_enabled():
        return "disabled"
    source = estimate_source()
    if source is None:
        return "no engine"
    if _can_fork_now():
        return _estimate_forked(source)
    done = cache.get(scheduler_key("eta-done"))
    fresh = done is not None and time.time() - float(done) < _max_age()
    if fresh and _pass_waiting():  # a pass task is queued: it goes first
        return "pass queued"
    # a private copy, made while no pass changes the engine (a pass may run once it is made); the
    # last play runs on it, the others on copies of it
    with engine_in_use():
        engine = clone_engine(source.engine)
    # while the stored predictions are fresh, a pass queued meanwhile stops the plays (this
    # worker runs one task at a time: the pass would wait for them); the pass queues the next
    # estimate when it commits. Stale ones are replaced whatever waits, so that back-to-back
    # passes never starve the estimate.
    result = start_estimate_run(engine=engine, now=source.now, scheduling_pass=source.scheduling_pass,
                                interrupt=_pass_waiting_every(INTERRUPT_CHECK_SECONDS) if fresh else None,
                                own=True)
    return "interrupted" if result.interrupted else "ran"


# ---------------------------------------------------------------- in a child process


@dataclass
class _Child:
    pid: int
    started: float  # time.monotonic()
    budget: float


_child: _Child | None = None


def _can_fork_now() -> bool:
    """Forking needs no database connection open (the child must not share one): none can be
    closed inside a transaction, so a caller in one estimates in this process."""
    return eta_fork_enabled() and not any(conn.in_atomic_block for conn in connections.all())


def estimate_child_running() -> bool:
    """Whether the last estimate's child process still runs (it is reaped here once it ended)."""
    global _child
    if _child is None:
        return False
    try:
        pid, status = os.waitpid(_child.pid, os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere
        pid, status = _child.pid, 0
    if pid == 0:
        return True
    if os.waitstatus_to_exitcode(status) != 0:
        logger.warning("start-time estimate: the child process %s ended with %s", _child.pid,
                       os.waitstatus_to_exitcode(status))
    _child = None
    return False


def estimate_child_wait(timeout: float) -> bool:
    """Wait up to `timeout` seconds for the estimate's child process; whether it ended."""
    end = time.monotonic() + timeout
    while estimate_child_running():
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def _estimate_forked(source: EstimateSource) -> str:
    """Fork a child that estimates and stores (see the module docstring): "forked", or
    "running" when the last one still runs (this estimate is queued again for after it)."""
    global _child
    if estimate_child_running():
        assert _child is not None
        if time.monotonic() - _child.started < _child.budget * CHILD_BUDGET_FACTOR + 10:
            estimate_schedule(countdown=REQUEUE_SECONDS)
            return "running"
        logger.warning("start-time estimate: the child process %s ran for %.0fs, killed", _child.pid,
                       time.monotonic() - _child.started)
        with contextlib.suppress(ProcessLookupError):
            os.kill(_child.pid, signal.SIGKILL)
        estimate_child_wait(5.0)
    history = runtime_history()  # read here: the child reads no more than it must
    budget = eta_settings().budget_seconds or 0.0
    connections.close_all()  # the child opens its own; none is shared across the fork
    with engine_in_use():
        pid = os.fork()
    if pid == 0:
        _estimate_in_child(source, history)  # does not return
    _child = _Child(pid, time.monotonic(), budget)
    return "forked"


def _estimate_in_child(source: EstimateSource, history: RuntimeHistory) -> None:
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.nice(int(getattr(settings, "TAS_ETA_NICE", DEFAULT_NICE)))
        # the engine is this process's own copy-on-write image: the median play runs on it
        start_estimate_run(engine=source.engine, now=source.now, scheduling_pass=source.scheduling_pass,
                           history=history, own=True, fork_plays=True)
        code = 0
    except BaseException:
        logger.exception("start-time estimate failed")
    finally:
        with contextlib.suppress(Exception):
            connections.close_all()
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(code)


def _pass_waiting() -> bool:
    return cache.get(scheduler_key("scheduled")) is not None


def _pass_waiting_every(seconds: float) -> Callable[[], bool]:
    """_pass_waiting, asked of the cache at most every `seconds` (the plays ask after each pass)."""
    last = time.monotonic()

    def waiting() -> bool:
        nonlocal last
        if time.monotonic() - last < seconds:
            return False
        last = time.monotonic()
        return _pass_waiting()
    return waiting


__all__ = [
    "NOT_ESTIMATED",
    "estimate_after_pass",
    "estimate_child_running",
    "estimate_child_wait",
    "estimate_cost_forget",
    "estimate_schedule",
    "estimate_source",
    "estimate_source_set",
    "predictions_clear",
    "runtime_history",
    "runtime_history_build",
    "start_estimate_run",
]
