"""Predicted start times of waiting workloads, kept in `WorkloadPrediction`.

After a pass commits, the engine state it left (the scheduler process's long-lived engine in
control mode, the pass's own engine in observe mode) is noted here (`estimate_source_set`),
and a task (`tasks.estimate_start_times`) is queued on the scheduler queue. The scheduler's
worker runs one task at a time (a solo pool), so the estimate runs between passes, on the
engine state of the last committed pass, in the process that holds it:

* it copies the engine while no pass changes it (`engine_in_use`), then plays the queue on
  the copy: a pass may run meanwhile, and waits at most for that copy;
* it yields to a pass: when a pass task is queued it returns at once, and when one is queued
  while the plays run they stop within one of their passes and store nothing (the pass
  queues the next estimate when it commits), unless the stored predictions are older than
  `TAS_ETA_MAX_AGE_SECONDS` (with passes back to back it would never run);
* it plays the queue forward on private copies (`scheduler.eta.estimate`, the engine is left
  as it was) for at most `TAS_ETA_BUDGET_SECONDS` of wall clock (the plays stop there; the
  workloads left get no time and say why), up to `TAS_ETA_HORIZON_SECONDS` ahead;
* runtimes come from `RuntimeHistory`, built from the finished workloads of the mirror and
  read again every `TAS_ETA_HISTORY_REFRESH_SECONDS`;
* the predictions replace the stored ones in one transaction (rows of workloads no longer
  waiting go with them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from scheduler.clone import clone_engine
from scheduler.engine import Engine
from scheduler.eta import NEVER, Estimate, EtaSettings, Prediction, estimate
from scheduler.runtimes import RuntimeClass, RuntimeHistory, size_class
from tasweb.cluster import models as cluster
from tasweb.scheduling.leader import scheduler_key
from tasweb.scheduling.models import SchedulingPass, WorkloadPrediction

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_SECONDS = 2.0
DEFAULT_HORIZON_SECONDS = 24 * 3600.0
DEFAULT_HISTORY_REFRESH_SECONDS = 300.0
DEFAULT_MAX_AGE_SECONDS = 60.0
HISTORY_RUNS = 5000  # the latest finished workloads the runtime history learns from
NOT_ESTIMATED = "not estimated yet"


def eta_enabled() -> bool:
    return bool(getattr(settings, "TAS_ETA_ENABLED", True))


def eta_settings(*, budget: float | None = None) -> EtaSettings:
    seconds = float(getattr(settings, "TAS_ETA_BUDGET_SECONDS", DEFAULT_BUDGET_SECONDS)) if budget is None else budget
    horizon = float(getattr(settings, "TAS_ETA_HORIZON_SECONDS", DEFAULT_HORIZON_SECONDS))
    return EtaSettings(horizon=timedelta(seconds=horizon), budget_seconds=max(seconds, 0.0))


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
            .order_by("-finished_at").values_list("namespace", "queue_name", "pod_count", "admitted_at",
                                                  "finished_at", "raw__metadata__ownerReferences")[:limit])
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


# ---------------------------------------------------------------- estimating and storing


def _placement_json(prediction: Prediction) -> list[dict[str, Any]]:
    out = []
    for ps in prediction.placement:
        flavors = dict(ps.flavors)
        out.append({"podSet": ps.name, "count": ps.count, "flavors": flavors,
                    "flavor": next(iter(sorted(set(flavors.values()))), None) if flavors else None,
                    "topologyAssignment": ps.assignment.to_decoded_json() if ps.assignment is not None else None})
    return out


def prediction_row(prediction: Prediction, local_queue: str, *, now: datetime, stored_at: datetime,
                   scheduling_pass: int | None) -> WorkloadPrediction:
    namespace, _, _ = prediction.key.partition("/")
    runtime = prediction.runtime
    return WorkloadPrediction(
        workload_key=prediction.key, namespace=namespace, local_queue=local_queue,
        cluster_queue=prediction.cluster_queue, start=prediction.start, earliest=prediction.earliest,
        latest=prediction.latest,
        end=prediction.start + timedelta(seconds=runtime.median) if prediction.start is not None else None,
        source=runtime.source,
        runtime={"low": runtime.low, "median": runtime.median, "high": runtime.high, "source": runtime.source,
                 "detail": runtime.detail, "problems": list(runtime.problems)},
        placement=_placement_json(prediction), reason=prediction.reason, estimated_at=now, predicted_at=stored_at,
        scheduling_pass_id=scheduling_pass)


def predictions_replace(rows: list[WorkloadPrediction]) -> None:
    """The stored predictions become `rows`, in one transaction."""
    with transaction.atomic():
        WorkloadPrediction.objects.all().delete()
        WorkloadPrediction.objects.bulk_create(rows, batch_size=1000)


def start_estimate_run(*, engine: Engine, now: datetime, scheduling_pass: int | None = None,
                       budget: float | None = None, history: RuntimeHistory | None = None,
                       interrupt: Callable[[], bool] | None = None, own: bool = False) -> Estimate:
    """Predict when every workload waiting in `engine` starts, as of `now`, and store the
    predictions in place of the stored ones. `engine` is left as it was; the wall-clock
    budget (TAS_ETA_BUDGET_SECONDS unless given) bounds the plays: what they did not reach
    is stored without a start, with the reason."""
    local_queues = {key: f"{wl.namespace}/{wl.queue_name}" for key, wl in engine.state.workload_map.items()}
    settings_ = dataclasses.replace(eta_settings(budget=budget), interrupt=interrupt)
    result = estimate(engine, now, history or runtime_history(), settings_, own=own)
    if result.interrupted:  # partial: the stored predictions stay until the next estimate
        logger.info("start-time estimate: given up after %.2fs for a waiting scheduling pass", result.seconds)
        return result
    stored_at = timezone.now()
    rows = [prediction_row(p, local_queues.get(p.key, ""), now=now, stored_at=stored_at,
                           scheduling_pass=scheduling_pass) for p in result.predictions.values()]
    predictions_replace(rows)
    cache.set(scheduler_key("eta-done"), time.time(), timeout=None)
    # plays that stopped early (every play ends on NEVER while a workload can never fit)
    stopped = {level: play.stopped for level, play in result.plays.items() if play.stopped and play.stopped != NEVER}
    logger.info("start-time estimate: %d waiting workloads, %d within the horizon, %.2fs (copies %.2fs)%s",
                len(rows), sum(1 for r in rows if r.start is not None), result.seconds, result.clone_seconds,
                f", stopped: {stopped}" if stopped else "")
    return result


def predictions_clear() -> int:
    deleted, _ = WorkloadPrediction.objects.all().delete()
    return deleted


# ---------------------------------------------------------------- after a pass


INTERRUPT_CHECK_SECONDS = 0.05


def _max_age() -> float:
    return float(getattr(settings, "TAS_ETA_MAX_AGE_SECONDS", DEFAULT_MAX_AGE_SECONDS))


def estimate_schedule() -> bool:
    """Queue one estimate task unless one is queued already; True when this call queued it.
    Called after a pass committed, in the process that ran it."""
    if not eta_enabled():
        return False
    key = scheduler_key("eta-scheduled")
    if not cache.add(key, 1, timeout=max(10, int(_max_age()))):
        return False
    from tasweb.scheduling.tasks import estimate_start_times  # tasks import the services

    try:
        estimate_start_times.apply_async()
    except Exception:
        cache.delete(key)
        raise
    return True


def estimate_after_pass() -> str:
    """The queued estimate task: "ran", or why not ("disabled", "no engine", "pass queued")."""
    cache.delete(scheduler_key("eta-scheduled"))
    if not eta_enabled():
        return "disabled"
    source = estimate_source()
    if source is None:
        return "no engine"
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
    "estimate_schedule",
    "estimate_source",
    "estimate_source_set",
    "predictions_clear",
    "runtime_history",
    "runtime_history_build",
    "start_estimate_run",
]
