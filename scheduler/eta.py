"""When will a waiting workload start: the queue played forward with the engine itself.

Kueue's visibility API gives a position in the queue; Slurm's backfill scheduler gives an
estimated start (`squeue --start`) by simulating its queue forward. This does the latter for
TAS workloads: on a private copy of an engine (`scheduler.clone`), workloads holding quota
finish at their expected end, and at each such time the engine's own pass runs (quota,
cohorts, fair sharing, TAS placement, preemption, exactly as the live passes), recording
when each waiting workload is admitted and on which domains.

* Time: the first pass runs at `now` (the same decisions the next live pass makes on the
  same state); then the next due finish is found, every finish due within
  `resolution` x (time ahead) of it (at least `min_step`) is applied, and a pass runs at the
  last of them: coalescing keeps the number of passes small far ahead, where a few seconds
  do not matter, and costs at most that share of the predicted wait. A workload the
  simulation preempts or evicts gives its quota back at once and queues again, and a pass
  `min_step` later admits in its place (Kueue's preemptor waits for the next pass too), at
  most `max_wakes` such passes in a row before the next finish (workloads that preempt one
  another in turn would otherwise keep the play at one time); admitted workloads' pods are
  taken to be ready at once. A workload admitted and preempted in the same pass has not
  started.
* Arrivals: workloads not yet submitted are unknown to the engine. Without `arrivals` none
  are played (as in Slurm); with them (e.g. `expected_arrivals`: the last hour's submissions
  again, hour after hour) each is added at its time, waits in its queue like any other, and
  can take capacity ahead of the workloads predicted (BestEffortFIFO lets a later, smaller
  workload pass a large one that does not fit yet).
* It stops when every workload waiting at `now` has been admitted, when the next finish is
  past `horizon`, when nothing is due, or when the wall-clock `budget_seconds` runs out: the
  workloads left get no time (`reason` says which).
* Runtimes (`scheduler.runtimes`): each workload's low, median and high runtime. A workload
  running at `now` ends at its start (the QuotaReserved transition) plus its runtime (with a
  learned runtime: the quantile among the learned runs longer than it has run so far); one
  already past that ends `overrun_share` of its runtime from now (at least `min_step`).
* Sampled plays (`range="samples"`): `samples` plays, in each of which every workload's
  runtime is drawn at a random quantile of what is known of it (`RuntimeEstimate.sample`:
  the learned runs, conditioned on the time a running workload has run already; an exact
  runtime stays exact) and the expected arrivals are drawn anew (`RecentArrivals.sampled`: a
  Poisson stream at the recent rate, each arrival one of the recent submissions). Each play
  draws learned runtimes from its own resample of the class's runs
  (`RuntimeEstimate.resampled`, a bootstrap): a class known from a few runs may run longer
  or shorter than they did, and the range shows it; one known from many barely moves. The
  prediction is the median of the plays' times, with the placement of the play at the
  median; `earliest` and `latest` are their 10th and 90th percentiles. The median of plays
  is the better guess: which of many running workloads ends first, and when the next
  arrivals come, is chance, and a single play with every runtime at its median has them all
  end together. The arrivals are drawn from a seed of `now`, the runtimes from the workload's
  key: the same state gives the same answer, and a workload keeps its draws from one
  estimate to the next.
* The range of the other modes: three plays, every runtime at its low, median and high value
  (`range="plays"`), or the median one alone, the others timed along its chain of finishes
  (`range="chain"`, see `_Chain`). The prediction is the median play's time and placement;
  `earliest` and `latest` are the smallest and largest time of the three (scheduling is not
  monotonic: a shorter job ending early can let another head take the capacity first, so the
  low play is not always the earliest). A workload admitted in the median play but not in the
  high one has no `latest`.
* Plays in parallel (`fork_plays`, where the OS can fork): the plays other than the median
  one, or every sampled play (`processes` at a time), run in child processes, each on the
  copy-on-write image of the engine the fork gives (no copy is made), and send back when and
  where they admitted each workload; the median play runs meanwhile in the calling process.
  A child that fails or sends nothing leaves its play out (`PLAY_FAILED`).
* What fits a budget (`planned_range`): the most sampled plays that fit, else the three
  plays, else the chain, from what a play of the last estimate took.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import heapq
import math
import os
import pickle
import random
import selectors
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.assignment import TopologyAssignment
from scheduler.clone import clone_engine
from scheduler.cluster import holds_quota, is_pending
from scheduler.cycle import cohort_cycle_text
from scheduler.engine import Engine, PassOutcome
from scheduler.eviction import is_evicted
from scheduler.memory import gc_paused
from scheduler.model import Condition, Workload
from scheduler.queue_status import waiting_summary
from scheduler.results import ADMITTED, QUOTA_RESERVED, WorkloadResult
from scheduler.runtimes import HIGH, LEVELS, LOW, MEDIAN, RuntimeEstimate, RuntimeHistory, runtime_class
from scheduler.stops import EXCEEDS_QUOTA, StopRecord

PLAYS, CHAIN, SAMPLES = "plays", "chain", "samples"
RANGES = (PLAYS, CHAIN, SAMPLES)
MIN_SAMPLES = 5  # fewer sampled plays make a noisier median than the median play

NOT_WITHIN_HORIZON = "not within the horizon"
OUT_OF_BUDGET = "estimate stopped: out of time budget"
NEVER = "not admitted when nothing more is due"
# its flavor's topology cannot hold it even with no admitted workload on its nodes
NEVER_FITS = "never: its topology cannot hold it"
# it asks for more than its ClusterQueue can ever have (nominal quota and what it may borrow)
NEVER_EXCEEDS_QUOTA = "never: more than its ClusterQueue can ever have"
# a ConcurrentAdmission parent: one of its variants is admitted, never the parent itself
NEVER_AS_PARENT = "never itself: a ConcurrentAdmission parent, one of its variants is admitted"
# its LocalQueue or ClusterQueue is missing, stopped or inactive (under a cycle of Cohorts too):
# nothing is admitted from there until someone changes that (the cause follows)
NEVER_WHILE = "not while"
INTERRUPTED = "estimate stopped: a scheduling pass was waiting"
PLAY_FAILED = "estimate stopped: the play failed"


@dataclass(frozen=True, slots=True)
class EtaSettings:
    horizon: timedelta = timedelta(hours=24)
    resolution: float = 0.01  # finishes within this share of the time ahead share a pass
    min_step: float = 1.0  # seconds
    overrun_share: float = 0.1
    budget_seconds: float | None = None  # wall clock for the three plays; None: no limit
    max_wakes: int = 3  # passes in a row after evictions, with no finish in between
    levels: tuple[str, ...] = LEVELS
    # "plays": one play per level; "chain": the median play only, the other levels' times
    # worked out along the chain of finishes that let each workload in (see `_Chain`);
    # "samples": `samples` plays, each with every runtime (and the expected arrivals) drawn at
    # random, the prediction their median (see `estimate`)
    range: str = "plays"
    samples: int = 11
    # of the sampled plays' draws: None, the arrivals' from `now` and each workload's runtimes
    # from its key (the same state gives the same answer, and a workload keeps its draws)
    seed: int | None = None
    processes: int | None = None  # sampled plays run at once when forking; None: the CPUs
    # asked between the plays' passes: True stops the estimate (its caller has more urgent
    # work, such as a scheduling pass waiting); the estimate is then `interrupted`
    interrupt: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    name: str
    count: int
    flavors: tuple[tuple[str, str], ...]  # (resource, flavor)
    assignment: TopologyAssignment | None


@dataclass(frozen=True, slots=True)
class Prediction:
    key: str
    cluster_queue: str
    start: datetime | None  # the median play's admission; None: not within the horizon
    earliest: datetime | None
    latest: datetime | None
    placement: tuple[PodSetPlacement, ...]
    runtime: RuntimeEstimate
    reason: str = ""  # why there is no start

    @property
    def within_horizon(self) -> bool:
        return self.start is not None


@dataclass(slots=True)
class PlayStats:
    level: str
    passes: int = 0
    finishes: int = 0
    seconds: float = 0.0
    end: datetime | None = None  # simulated time reached
    stopped: str = ""  # "" (all admitted), NOT_WITHIN_HORIZON, OUT_OF_BUDGET, NEVER, INTERRUPTED
    # stopped NEVER: the workloads it left waiting whose last evaluation says no pass ever
    # admits them (a reason per key): found once the quota had room, which the real pass may
    # not have seen (Kueue looks at the topology only when the quota fits)
    never: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Estimate:
    now: datetime
    horizon_end: datetime
    predictions: dict[str, Prediction] = field(default_factory=dict)
    plays: dict[str, PlayStats] = field(default_factory=dict)
    clone_seconds: float = 0.0
    seconds: float = 0.0
    # how far the play the predictions' times come from got when it stopped short (out of its
    # budget, or at the horizon): a prediction without a start, for that reason, was not
    # started by then; None when it did not stop short, or with sampled plays (a play each)
    played_until: datetime | None = None

    @property
    def interrupted(self) -> bool:
        """Stopped for its caller: the predictions are partial, not to be shown."""
        return any(play.stopped == INTERRUPTED for play in self.plays.values())


@dataclass(slots=True)
class _Admission:
    at: float  # seconds after now
    cluster_queue: str
    placement: tuple[PodSetPlacement, ...]
    pass_index: int = -1  # which of the play's passes admitted it

    @classmethod
    def of(cls, at: float, result: WorkloadResult, pass_index: int) -> _Admission:
        placement = tuple(PodSetPlacement(ps.name, ps.count, tuple(sorted(ps.flavors.items())), ps.assignment)
                          for ps in result.pod_sets)
        return cls(at, result.cluster_queue, placement, pass_index)


@dataclass(slots=True)
class _Chain:
    """How each pass of a play came about, so that its time can be worked out again with the
    runtimes of another level: a pass runs at a fixed time (the start, an expected arrival),
    a short wait after another pass (a wake), or when a workload finishes -- one running at the
    start (its end per level is known) or one a pass of the play admitted (that pass's time
    plus its runtime); it runs once the last of the events it waited for (those the play
    applied for it) has happened. The workloads a pass admits are taken to need all of them;
    a reordering the other runtimes would bring is not seen (the cost of one play instead of
    three)."""

    # per pass, the events it waited for: (kind, what it refers to)
    passes: list[list[tuple[str, object]]] = field(default_factory=list)
    started: dict[tuple[str, int], int] = field(default_factory=dict)  # (key, run) -> the pass that admitted it
    ends_at_start: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)  # runs going at now

    def times(self, level: str, runtime_of: Callable[[str, str], float], min_step: float) -> list[float]:
        """Every pass's time, seconds after now, with the runtimes of `level`: the last of the
        events it waited for."""
        out: list[float] = []
        for events in self.passes:
            at = 0.0
            for kind, ref in events:
                at = max(at, self._event_time(kind, ref, out, level, runtime_of, min_step))
            out.append(at)
        return out

    def _event_time(self, kind: str, ref: object, passes: list[float], level: str,
                    runtime_of: Callable[[str, str], float], min_step: float) -> float:
        if kind == "fixed":
            return float(ref)  # type: ignore[arg-type]
        if kind == "wake":
            return passes[ref] + min_step  # type: ignore[index]
        if kind == "finish":
            key, run = ref  # type: ignore[misc]
            by = self.started.get((key, run))
            return passes[by] + runtime_of(key, level) if by is not None else self.ends_at_start[(key, run)][level]
        raise ValueError(f"unknown pass event {kind!r}")


RuntimeSource = Callable[[Workload], RuntimeEstimate]
Arrivals = Sequence[tuple[float, Workload]]


def estimate(engine: Engine, now: datetime, runtimes: RuntimeSource | RuntimeHistory | None = None,
             settings: EtaSettings | None = None, arrivals: Arrivals | RecentArrivals = (), *,
             own: bool = False, fork_plays: bool = False) -> Estimate:
    """Predicted admission of every workload waiting in `engine` at `now`; `engine` is left as it
    was, unless `own`: the caller's private copy, on which the last play runs (one copy fewer).
    `arrivals` are workloads expected to arrive, seconds after `now`, or the recent submissions
    they are drawn from (`RecentArrivals`: replayed in the plays of runtime levels, drawn anew
    for every sampled play); they take their place in the queues but get no prediction. With
    `fork_plays` (and `can_fork()`), the plays but the median one, or every sampled play, run in
    child processes (see the module docstring)."""
    settings = settings or EtaSettings()
    if settings.range not in RANGES:
        raise ValueError(f"range must be one of {', '.join(RANGES)}, got {settings.range!r}")
    started = time.perf_counter()
    deadline = None if settings.budget_seconds is None else started + settings.budget_seconds
    out = Estimate(now, now + settings.horizon)
    state = engine.state
    # read before the plays: the last one may change `engine`
    pending = [wl for wl in state.workload_map.values() if is_pending(wl)]
    waiting = [wl.key for wl in pending]
    never = {key: why for key in waiting if (why := never_reason(engine.decisions.get(key)))}
    never.update((wl.key, NEVER_AS_PARENT) for wl in pending if state.waits_as_parent(wl))
    for key in engine.queues.orphans:  # its queue admits nothing: why
        wl = state.workload(key)
        if wl is not None and is_pending(wl) and (blocked := waiting_summary(state, wl)):
            never[key] = f"{NEVER_WHILE} {blocked}"
    queue_of: dict[str, str] = {}
    for wl in pending:
        cq = state.cluster_queue_for(wl)
        queue_of[wl.key] = cq.name if cq is not None else ""
        # its ClusterQueue is under a cycle of Cohorts: nothing admits it until that changes
        if cq is not None and (cycle := state.quota.cycle_of(cq)) is not None:
            never[wl.key] = f"{NEVER_WHILE} ClusterQueue {cq.name} is inactive: {cohort_cycle_text(cq, cycle)}"
        # nomination turns it away, and no requeue of its ClusterQueue brings it back
        elif cq is not None and (hold := state.namespace_hold(wl.namespace, cq)):
            never[wl.key] = f"{NEVER_WHILE} {hold}"
    # every play times the running workloads' ends: their runtimes and how long they have run
    # are made here, once, for all of them (and the forked plays); a waiting workload's runtime
    # when a play admits it, or for its prediction after the plays (the budget is for the plays)
    holders = list(state.holders())
    elapsed = {wl.key: _elapsed(wl, now) for wl in holders}
    if isinstance(runtimes, RuntimeHistory):  # what runs now is a lower bound of its runtime
        runtimes = runtimes.with_running((runtime_class(wl), elapsed[wl.key]) for wl in holders
                                         if elapsed[wl.key] > 0)
    source = _runtime_source(runtimes)
    estimates = {wl.key: source(wl) for wl in holders}
    run = _Runner(engine, now, waiting, estimates, elapsed, settings, deadline, source, arrivals)
    if settings.range == SAMPLES:
        plays = _sampled_plays(run, out, own=own, fork=fork_plays and can_fork())
        predict = _sampled_prediction
    else:
        plays = _level_plays(run, out, own=own, fork=fork_plays and can_fork())
        predict = _prediction
        if plays:
            main = out.plays[_main_play(plays)]
            if main.stopped in (OUT_OF_BUDGET, NOT_WITHIN_HORIZON):
                out.played_until = main.end
    for stats in out.plays.values():
        for key, why in stats.never.items():
            never.setdefault(key, why)
    for wl in pending:
        runtime = estimates.get(wl.key) or source(wl)
        prediction = predict(wl.key, queue_of[wl.key], now, plays, out.plays, runtime)
        if prediction.start is None and wl.key in never:  # no play would ever admit it: why
            prediction = dataclasses.replace(prediction, reason=never[wl.key])
        out.predictions[wl.key] = prediction
    out.seconds = time.perf_counter() - started
    return out


def never_reason(stop: StopRecord | None) -> str:
    """Why no pass ever admits a workload the scheduler stopped at `stop`, "" unless one of
    these: its topology cannot hold it, or it asks for more than its ClusterQueue can have."""
    if stop is None:
        return ""
    if stop.never_fits:
        return NEVER_FITS
    return NEVER_EXCEEDS_QUOTA if stop.step == EXCEEDS_QUOTA else ""


def _played_levels(settings: EtaSettings) -> tuple[list[str], list[str]]:
    """The runtime levels played, and those read along the median play's chain instead."""
    levels = list(settings.levels)
    if settings.range == CHAIN and MEDIAN in levels:
        return [MEDIAN], [level for level in levels if level != MEDIAN]
    return levels, []


def plays_forked(settings: EtaSettings, fork_plays: bool) -> bool:
    """Whether `estimate` with these settings forks plays off the calling process (every
    sampled play; the levels but one, where more than one is played)."""
    if not (fork_plays and can_fork()):
        return False
    return settings.range == SAMPLES or len(_played_levels(settings)[0]) > 1


def _level_plays(run: _Runner, out: Estimate, *, own: bool, fork: bool) -> dict[str, dict[str, _Admission]]:
    """A play per runtime level (or the median one, the others along its chain)."""
    settings, engine = run.settings, run.engine
    levels, chained = _played_levels(settings)
    forked: dict[str, _ForkedPlay] = {}
    if fork and len(levels) > 1:
        main = MEDIAN if MEDIAN in levels else levels[-1]
        forked = {level: run.fork(_PlaySpec(level)) for level in levels if level != main}
        levels = [main]
    plays: dict[str, dict[str, _Admission]] = {}
    for i, level in enumerate(levels):
        t0 = time.perf_counter()
        copy = engine if own and i == len(levels) - 1 else clone_engine(engine)
        out.clone_seconds += time.perf_counter() - t0
        stats = PlayStats(level)
        plays[level], chain = run.play(copy, _PlaySpec(level), stats)
        stats.seconds = time.perf_counter() - t0
        out.plays[level] = stats
        if stats.stopped == INTERRUPTED:
            break
        for other in chained:
            plays[other], out.plays[other] = _chained(plays[level], stats, chain, other, run)
    _collect_forked(forked.values(), plays, out.plays)
    out.plays = {level: out.plays[level] for level in settings.levels if level in out.plays}
    return {level: plays[level] for level in settings.levels if level in plays}


def _sampled_plays(run: _Runner, out: Estimate, *, own: bool, fork: bool) -> dict[str, dict[str, _Admission]]:
    """`settings.samples` plays, each drawing every workload's runtime quantile (and the
    arrivals) at random: in child processes, `processes` at a time, when forking; else one
    after another, each on a copy (the last on `engine` itself when `own`)."""
    settings = run.settings
    seed = settings.seed if settings.seed is not None else int(run.now.timestamp())
    salt = "" if settings.seed is None else f"{settings.seed}:"
    specs = [_PlaySpec(f"sample-{i + 1}", random.Random(f"{seed}:{i}"), salt) for i in range(max(1, settings.samples))]
    plays: dict[str, dict[str, _Admission]] = {}
    if fork:
        running: list[_ForkedPlay] = []
        slots = max(1, settings.processes or os.cpu_count() or 1)
        for spec in specs:
            if run.out_of_time():
                out.plays[spec.name] = PlayStats(spec.name, stopped=OUT_OF_BUDGET)
                continue
            if len(running) >= slots:
                _collect_forked(_first_done(running), plays, out.plays)
            running.append(run.fork(spec))
        _collect_forked(running, plays, out.plays)
    else:
        for i, spec in enumerate(specs):
            stats = out.plays[spec.name] = PlayStats(spec.name)
            if run.out_of_time():
                stats.stopped = OUT_OF_BUDGET
                continue
            t0 = time.perf_counter()
            copy = run.engine if own and i == len(specs) - 1 else clone_engine(run.engine)
            out.clone_seconds += time.perf_counter() - t0
            plays[spec.name], _ = run.play(copy, spec, stats)
            stats.seconds = time.perf_counter() - t0
            if stats.stopped == INTERRUPTED:
                break
    out.plays = {spec.name: out.plays[spec.name] for spec in specs if spec.name in out.plays}
    return {spec.name: plays[spec.name] for spec in specs if spec.name in plays}


def _elapsed(wl: Workload, now: datetime) -> float:
    """Seconds a workload holding quota has run at `now` (0 when its start is not known)."""
    started = _reserved_at(wl)
    return (now - started).total_seconds() if started is not None else 0.0


def can_fork() -> bool:
    return hasattr(os, "fork")


def planned_range(play_seconds: float | None, target_seconds: float, processes: int, samples: int,
                  ) -> tuple[str, int]:
    """The richest estimate expected to take at most `target_seconds` when each play takes
    `play_seconds` and `processes` run at once (the plays forked): the most sampled plays that
    fit, up to `samples` (odd, at least `MIN_SAMPLES`), else a play per runtime level, else the
    median play and its chain (also while the cost is not known). Returns (range, samples)."""
    if not play_seconds or play_seconds <= 0:
        return CHAIN, samples
    processes = max(1, processes)
    rounds = max(0, math.floor(target_seconds / play_seconds))
    fitting = min(samples, rounds * processes)
    if fitting % 2 == 0:
        fitting -= 1
    if fitting >= MIN_SAMPLES:
        return SAMPLES, fitting
    if play_seconds * max(1.0, len(LEVELS) / processes) <= target_seconds:
        return PLAYS, samples
    return CHAIN, samples


def play_seconds(est: Estimate) -> float | None:
    """What one play of `est` took (the median of its plays that ran), to plan the next."""
    seconds = [p.seconds for p in est.plays.values() if p.seconds > 0]
    return statistics.median(seconds) if seconds else None


@dataclass(slots=True)
class _PlaySpec:
    """How one play times the workloads: every runtime at the level `name`, or (a sampled play,
    `rng` set) each at a quantile of its own, the expected arrivals drawn from `rng`."""

    name: str
    rng: random.Random | None = None
    salt: str = ""  # of the runtimes' draws

    def quantile(self, key: str) -> float:
        """A sampled play's runtime quantile of the workload `key`, uniform in (0, 1): a hash of
        the play and the key, so that a workload keeps its draws from one estimate to the next
        and the predictions do not jump with every estimate."""
        digest = hashlib.blake2b(f"{self.salt}{self.name}/{key}".encode(), digest_size=8).digest()
        return (int.from_bytes(digest, "big") + 0.5) / 2.0**64


@dataclass(slots=True)
class _Runner:
    """What every play of one estimate shares."""

    engine: Engine
    now: datetime
    waiting: list[str]
    estimates: dict[str, RuntimeEstimate]
    elapsed: dict[str, float]  # seconds each workload holding quota at `now` has run
    settings: EtaSettings
    deadline: float | None
    source: RuntimeSource
    arrivals: Arrivals | RecentArrivals

    def play(self, engine: Engine, spec: _PlaySpec, stats: PlayStats) -> tuple[dict[str, _Admission], _Chain]:
        with gc_paused():  # a play makes millions of short-lived objects and next to no cycles
            return _play(engine, self, spec, stats, self.arrivals_for(spec))

    def arrivals_for(self, spec: _PlaySpec) -> list[tuple[float, Workload]]:
        if not isinstance(self.arrivals, RecentArrivals):
            return sorted(self.arrivals, key=lambda a: a[0])
        if spec.rng is None:
            return self.arrivals.replayed(self.settings.horizon)
        return self.arrivals.sampled(random.Random(spec.rng.random()), self.settings.horizon)

    def runtime_of(self, key: str, level: str) -> float:
        return max(self.estimates[key].at(level), 0.0) if key in self.estimates else 0.0

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def fork(self, spec: _PlaySpec) -> _ForkedPlay:
        """The play of `spec` in a child process, on the engine's copy-on-write image."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: play, send the admissions back, exit without running any cleanup
            code = 1
            try:
                os.close(read_end)
                gc.disable()  # nothing to collect that matters before this process exits
                started = time.perf_counter()
                stats = PlayStats(spec.name)
                admitted, _ = self.play(self.engine, spec, stats)
                stats.seconds = time.perf_counter() - started
                payload = pickle.dumps((admitted, stats), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write_end, "wb") as pipe:
                    pipe.write(payload)
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        return _ForkedPlay(spec.name, pid, read_end)


@dataclass(slots=True)
class _ForkedPlay:
    name: str
    pid: int
    read_end: int
    received: bytearray = field(default_factory=bytearray)
    done: bool = False

    def read_some(self) -> None:
        """Read what the child has sent so far; `done` at the end of its output."""
        chunk = os.read(self.read_end, 1 << 20)
        if chunk:
            self.received += chunk
        else:
            self.done = True

    def collect(self) -> tuple[dict[str, _Admission], PlayStats]:
        """Wait for the child; what it admitted and its stats. A child that failed gives an
        empty play, `PLAY_FAILED`."""
        while not self.done:
            self.read_some()
        os.close(self.read_end)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped by someone else
            status = 0
        try:
            admitted, stats = pickle.loads(self.received) if self.received and \
                os.waitstatus_to_exitcode(status) == 0 else ({}, None)
        except (pickle.UnpicklingError, EOFError, ValueError):
            admitted, stats = {}, None
        if stats is None:
            return {}, PlayStats(self.name, stopped=PLAY_FAILED)
        return admitted, stats


def _first_done(children: list[_ForkedPlay]) -> list[_ForkedPlay]:
    """Read the children's pipes until one has sent all it has: that one, taken out of `children`."""
    with selectors.DefaultSelector() as sel:
        for child in children:
            sel.register(child.read_end, selectors.EVENT_READ, child)
        while True:
            for key, _ in sel.select():
                child = key.data
                child.read_some()
                if child.done:
                    children.remove(child)
                    return [child]


def _collect_forked(children: Iterable[_ForkedPlay], plays: dict[str, dict[str, _Admission]],
                   stats: dict[str, PlayStats]) -> None:
    for child in list(children):
        admitted, stats[child.name] = child.collect()
        if stats[child.name].stopped != PLAY_FAILED:
            plays[child.name] = admitted


def _runtime_source(runtimes: RuntimeSource | RuntimeHistory | None) -> RuntimeSource:
    if runtimes is None:
        return RuntimeHistory().estimate
    if isinstance(runtimes, RuntimeHistory):
        return runtimes.estimate
    return runtimes


def _main_play(plays: dict[str, dict[str, _Admission]]) -> str:
    """The play whose admissions are the predictions' times (the others give their range)."""
    return MEDIAN if MEDIAN in plays else next(iter(plays))


def _prediction(key: str, cluster_queue: str, now: datetime, plays: dict[str, dict[str, _Admission]],
                stats: dict[str, PlayStats], runtime: RuntimeEstimate) -> Prediction:
    main = _main_play(plays)
    admitted = plays[main].get(key)
    times = [plays[level][key].at for level in plays if key in plays[level]]
    if admitted is None:
        reason = stats[main].stopped or NEVER
        return Prediction(key, cluster_queue, None, _at(now, min(times, default=None)), None, (),
                          runtime, reason)
    latest = max(times) if all(key in plays[level] for level in plays) else None
    return Prediction(key, admitted.cluster_queue, _at(now, admitted.at), _at(now, min(times)),
                      _at(now, latest), admitted.placement, runtime)


RANGE_QUANTILES = (0.1, 0.9)  # of the sampled plays' times: earliest and latest


def _sampled_prediction(key: str, cluster_queue: str, now: datetime, plays: dict[str, dict[str, _Admission]],
                        stats: dict[str, PlayStats], runtime: RuntimeEstimate) -> Prediction:
    """The median of the sampled plays' times (a play that did not admit the workload counts as
    later than any), the placement of the play at the median, the range between the
    `RANGE_QUANTILES` of the times. Plays cut short (out of budget) are left out while a whole
    one is there: what they did not reach is not known to come late."""
    whole = {name: play for name, play in plays.items() if stats[name].stopped != OUT_OF_BUDGET} or plays
    if not whole:
        return Prediction(key, cluster_queue, None, None, None, (), runtime,
                          next((p.stopped for p in stats.values() if p.stopped), NEVER))
    ranked = sorted(((play[key].at if key in play else math.inf), name) for name, play in whole.items())
    n = len(ranked)
    at, name = ranked[(n - 1) // 2]
    low = ranked[math.floor(RANGE_QUANTILES[0] * (n - 1))][0]
    high = ranked[math.ceil(RANGE_QUANTILES[1] * (n - 1))][0]
    earliest = None if math.isinf(low) else _at(now, low)
    if math.isinf(at):
        return Prediction(key, cluster_queue, None, earliest, None, (), runtime, stats[name].stopped or NEVER)
    admitted = whole[name][key]
    return Prediction(key, admitted.cluster_queue, _at(now, at), earliest,
                      None if math.isinf(high) else _at(now, high), admitted.placement, runtime)


def _at(now: datetime, seconds: float | None) -> datetime | None:
    return None if seconds is None else now + timedelta(seconds=seconds)


def _chained(played: dict[str, _Admission], stats: PlayStats, chain: _Chain, level: str,
             run: _Runner) -> tuple[dict[str, _Admission], PlayStats]:
    """The admissions of a play, timed again along its chain with the runtimes of `level`;
    those past the horizon are left out."""
    times = chain.times(level, run.runtime_of, run.settings.min_step)
    horizon = run.settings.horizon.total_seconds()
    admitted = {key: dataclasses.replace(a, at=times[a.pass_index]) for key, a in played.items()
                if times[a.pass_index] <= horizon}
    return admitted, dataclasses.replace(stats, level=level, seconds=0.0)


# ---------------------------------------------------------------- one play


class _Play:
    """The state of one play: the engine copy, the finishes due, what was admitted."""

    def __init__(self, engine: Engine, now: datetime, estimates: dict[str, RuntimeEstimate], spec: _PlaySpec,
                 settings: EtaSettings, source: RuntimeSource, elapsed: dict[str, float] | None = None) -> None:
        self.engine = engine
        self.now = now
        self.estimates = estimates
        self.elapsed = elapsed or {}  # of the workloads holding quota at `now`, when known
        self.level = spec.name
        self.spec = spec
        self.rng = spec.rng
        self.drawn: dict[str, float] = {}  # a sampled play's runtime quantile of each workload
        self.resampled: dict[str, tuple[float, ...]] = {}  # its learned runs of each class (`runs_of`)
        self.settings = settings
        self.source = source
        self.due: list[tuple[float, int, str, int]] = []  # (end, seq, key, run)
        self.wakes: list[tuple[float, int]] = []  # passes asked for, after evictions: (time, by which pass)
        self.chain = _Chain()
        self.waited: list[tuple[str, object]] = []  # the events the next pass waits for
        self.woken = 0  # passes woken since the last finish
        self.arrivals: list[tuple[float, Workload]] = []
        self.next_arrival = 0
        self.runs: dict[str, int] = {}
        self.seq = 0
        self.ready_needed = engine.state.config.wait_for_pods_ready is not None
        self.deadline: float | None = None  # time.perf_counter() past which the play stops
        self.halt: str | None = None  # why it stopped early (OUT_OF_BUDGET, INTERRUPTED), once it did

    def halted(self) -> bool:
        """Whether the play must stop: its budget is spent, or the caller interrupts it. Asked
        between passes and between the cycles of a pass (a pass after a large release admits
        thousands, a cycle each); once it says so, it keeps saying so."""
        if self.halt is None:
            if self.deadline is not None and time.perf_counter() > self.deadline:
                self.halt = OUT_OF_BUDGET
            elif self.settings.interrupt is not None and self.settings.interrupt():
                self.halt = INTERRUPTED
        return self.halt is not None

    def estimate_of(self, wl: Workload) -> RuntimeEstimate:
        est = self.estimates.get(wl.key)
        if est is None:
            est = self.estimates[wl.key] = self.source(wl)
        return est

    def quantile(self, key: str) -> float:
        """A sampled play's runtime quantile of `key`, the same for its runs to come."""
        u = self.drawn.get(key)
        if u is None:
            u = self.drawn[key] = self.spec.quantile(key)
        return u

    def runs_of(self, est: RuntimeEstimate) -> tuple[float, ...]:
        """A sampled play's own resample of the learned runs of `est`, one per class
        (`RuntimeEstimate.resampled`): drawn from the play and the class, so the same in the
        next estimate while the class's runs stay the same."""
        runs = self.resampled.get(est.detail)
        if runs is None:
            rng = random.Random(f"{self.spec.salt}{self.spec.name}/{est.detail}")
            runs = self.resampled[est.detail] = est.resampled(rng)
        return runs

    def sampled(self, est: RuntimeEstimate, key: str, elapsed: float = 0.0) -> float:
        runs = self.runs_of(est) if est.samples else None
        return max(est.sample(self.quantile(key), elapsed, runs), 0.0)

    def runtime(self, wl: Workload) -> float:
        est = self.estimate_of(wl)
        if self.rng is not None:
            return self.sampled(est, wl.key)
        return max(est.at(self.level), 0.0)

    def schedule_end(self, key: str, end: float) -> int:
        """Schedule the end of a new run of `key`; the run's number, never given before (a
        workload preempted and admitted again must not be finished by its first run's end)."""
        self.seq += 1
        run = self.runs[key] = self.seq
        heapq.heappush(self.due, (end, self.seq, key, run))
        return run

    def remaining(self, wl: Workload, levels: Sequence[str]) -> dict[str, float]:
        """What a workload running at `now` has left to run, with the runtimes of each level."""
        est = self.estimate_of(wl)
        elapsed = self.elapsed.get(wl.key)
        if elapsed is None:
            elapsed = _elapsed(wl, self.now)
        return {level: self._left(est, wl.key, level, elapsed) for level in levels}

    def _left(self, est: RuntimeEstimate, key: str, level: str, elapsed: float) -> float:
        s = self.settings
        if self.rng is not None:
            runtime = self.sampled(est, key, elapsed)
        else:
            runtime = max(est.at(level), 0.0)
            if elapsed > 0:
                runtime = est.total_given(level, elapsed) or runtime
        remaining = runtime - elapsed
        return remaining if remaining > 0 else max(s.min_step, runtime * s.overrun_share)

    def schedule_running(self) -> None:
        levels = LEVELS if self.settings.range == CHAIN else (self.level,)
        for wl in self.engine.state.holders():
            if is_evicted(wl):
                continue  # released after the first pass
            ends = self.remaining(wl, levels)
            run = self.schedule_end(wl.key, ends[self.level])
            self.chain.ends_at_start[(wl.key, run)] = ends

    def next_due(self) -> float | None:
        """The next finish, or the next pass asked for."""
        while self.due:
            _, _, key, run = self.due[0]
            if self.runs.get(key) == run:
                break
            heapq.heappop(self.due)
        ends = [self.due[0][0]] if self.due else []
        if self.next_arrival < len(self.arrivals):
            ends.append(self.arrivals[self.next_arrival][0])
        return min([*ends, *(at for at, _ in self.wakes[:1])], default=None)

    def arrive_due(self, until: float) -> float:
        """Add every expected arrival due by `until`; the time of the last (0 for none)."""
        last = 0.0
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival][0] <= until:
            at, wl = self.arrivals[self.next_arrival]
            self.next_arrival += 1
            self.engine.upsert(_expected(wl, self.stamp(at), self.next_arrival))
            last = at
        if last:
            self.waited.append(("fixed", last))
        return last

    def wake_due(self, until: float) -> None:
        while self.wakes and self.wakes[0][0] <= until:
            _, by = heapq.heappop(self.wakes)
            self.waited.append(("wake", by))

    def finish_due(self, until: float) -> tuple[int, float]:
        """Finish every workload due by `until`; (how many, the time of the last)."""
        state = self.engine.state
        count, last = 0, 0.0
        while self.due and self.due[0][0] <= until:
            end, _, key, run = heapq.heappop(self.due)
            if self.runs.get(key) != run:
                continue
            del self.runs[key]
            wl = state.workload(key)
            if wl is None or not holds_quota(wl):
                continue
            self.engine.upsert(_finished(wl, self.stamp(end)))
            count, last = count + 1, max(last, end)
            self.waited.append(("finish", (key, run)))
        return count, last

    def stamp(self, at: float) -> datetime:
        return self.now + timedelta(seconds=at)

    def run_pass(self, at: float, admitted: dict[str, _Admission], tracked: set[str]) -> None:
        """A pass at `at`; the workloads it preempted or evicted give their quota back, and a
        pass `min_step` later admits in their place."""
        # a pass with nothing noted (its finish was stale) is taken to run at a time of its own
        self.chain.passes.append(self.waited or [("fixed", at)])
        self.waited = []
        outcome = self.engine.run_pass(self.stamp(at), bulk_results=False, stop=self.halted)
        if self.observe(outcome, at, admitted, tracked):
            self.wake(at)

    def wake(self, at: float) -> None:
        """Ask for a pass `min_step` after `at`, unless as many passes in a row were woken
        already without a finish (workloads preempting each other in turn: the next finish
        is what changes anything)."""
        if self.woken < self.settings.max_wakes:
            self.woken += 1
            heapq.heappush(self.wakes, (at + self.settings.min_step, len(self.chain.passes) - 1))

    def observe(self, outcome: PassOutcome, at: float, admitted: dict[str, _Admission], tracked: set[str]) -> bool:
        """Record admissions, start their runtimes, release what was evicted; whether anything was."""
        state = self.engine.state
        released = False
        for key, result in outcome.decided.items():
            if result.status not in (ADMITTED, QUOTA_RESERVED):
                continue
            wl = state.workload(key)
            if wl is None or not holds_quota(wl):
                continue
            this_pass = len(self.chain.passes) - 1
            if key in tracked and key not in admitted:
                admitted[key] = _Admission.of(at, result, this_pass)
            run = self.schedule_end(key, at + self.runtime(wl))
            self.chain.started[(key, run)] = this_pass
            if self.ready_needed:
                self.engine.upsert(_pods_ready(wl, self.stamp(at)))
        for key in outcome.changed:
            wl = state.workload(key)
            if wl is not None and holds_quota(wl) and is_evicted(wl):
                self.runs.pop(key, None)
                self.engine.upsert(_released(wl, self.stamp(at)))
                released = True
        return released

    def release_evicted(self, at: float) -> bool:
        """Workloads evicted before `now`, waiting for their pods to stop: they stop now."""
        released = False
        for wl in list(self.engine.state.holders()):
            if is_evicted(wl):
                self.runs.pop(wl.key, None)
                self.engine.upsert(_released(wl, self.stamp(at)))
                released = True
        if self.ready_needed:
            for wl in list(self.engine.state.holders()):
                if not wl.condition_true("PodsReady"):
                    self.engine.upsert(_pods_ready(wl, self.stamp(at)))
        return released


def _play(engine: Engine, run: _Runner, spec: _PlaySpec, stats: PlayStats,
          arrivals: list[tuple[float, Workload]]) -> tuple[dict[str, _Admission], _Chain]:
    now, waiting, settings = run.now, run.waiting, run.settings
    play = _Play(engine, now, run.estimates, spec, settings, run.source, run.elapsed)
    play.deadline = run.deadline
    play.arrivals = [(at, wl) for at, wl in arrivals if at >= 0]
    play.schedule_running()
    horizon = settings.horizon.total_seconds()
    tracked = set(waiting)
    admitted: dict[str, _Admission] = {}
    play.run_pass(0.0, admitted, tracked)
    stats.passes += 1
    if play.release_evicted(0.0):
        play.wake(0.0)
    at = 0.0
    while len(admitted) < len(tracked):
        if play.halted():
            stats.stopped = play.halt
            break
        nxt = play.next_due()
        if nxt is None:
            stats.stopped = NEVER
            stats.never = {key: why for key in tracked if key not in admitted
                           if (why := never_reason(engine.decisions.get(key)))}
            break
        if nxt > horizon:
            stats.stopped = NOT_WITHIN_HORIZON
            break
        window = max(settings.min_step, settings.resolution * nxt)
        until = min(nxt + window, horizon)
        count, last = play.finish_due(until)
        last = max(last, play.arrive_due(until))
        play.wake_due(until)
        if count:
            play.woken = 0
        stats.finishes += count
        at = max(at, last, nxt)
        play.run_pass(at, admitted, tracked)
        stats.passes += 1
    # a play that stops at the horizon has nothing due before it: it got that far
    stats.end = play.stamp(horizon if stats.stopped == NOT_WITHIN_HORIZON else at)
    return admitted, play.chain


# ---------------------------------------------------------------- workload changes of the play


def _reserved_at(wl: Workload) -> datetime | None:
    cond = wl.condition("QuotaReserved")
    if cond is not None and cond.status == "True" and cond.last_transition_time is not None:
        return cond.last_transition_time
    cond = wl.condition("Admitted")
    return cond.last_transition_time if cond is not None and cond.status == "True" else None


def _with_conditions(wl: Workload, replaced: Iterable[str], added: list[Condition], **changes: object) -> Workload:
    kinds = set(replaced)
    kept = [c for c in wl.conditions if c.type not in kinds]
    return dataclasses.replace(wl, conditions=[*kept, *added], **changes)


def _expected(wl: Workload, at: datetime, n: int) -> Workload:
    """A fresh copy of `wl`, waiting, created at `at`, under a name no workload has."""
    return dataclasses.replace(wl, name=f"{wl.name}~expected-{n}", uid=f"{wl.uid}~expected-{n}", creation_timestamp=at,
                               admission=None, conditions=[], admission_checks=[], unhealthy_nodes=[],
                               requeue_count=0, requeue_at=None, reclaimable_pods={})


ARRIVAL_BINS = 12  # the window's parts a burst is told apart in


@dataclass(frozen=True, slots=True)
class RecentArrivals:
    """The workloads created in the `window` before `now`, less the bursts (`without_bursts`: a
    one-off burst is not expected again every window), oldest first: the recent past as the
    forecast of what arrives next."""

    workloads: tuple[Workload, ...]
    now: datetime
    window: timedelta

    @classmethod
    def of(cls, recent: Iterable[Workload], now: datetime, window: timedelta, *,
           bins: int = ARRIVAL_BINS) -> RecentArrivals:
        span = window.total_seconds()
        if span <= 0:
            return cls((), now, window)
        inside = [wl for wl in recent
                  if wl.creation_timestamp is not None and now - window < wl.creation_timestamp <= now]
        return cls(tuple(without_bursts(inside, now, span, bins)), now, window)

    def __len__(self) -> int:
        return len(self.workloads)

    def replayed(self, horizon: timedelta) -> list[tuple[float, Workload]]:
        """Each one `window`, 2 x `window`, ... after its creation, until `horizon` from now."""
        out: list[tuple[float, Workload]] = []
        span, end = self.window.total_seconds(), horizon.total_seconds()
        for wl in self.workloads:
            at = (wl.creation_timestamp - self.now).total_seconds() + span  # type: ignore[operator]
            while at <= end:
                out.append((at, wl))
                at += span
        out.sort(key=lambda a: a[0])
        return out

    def sampled(self, rng: random.Random, horizon: timedelta) -> list[tuple[float, Workload]]:
        """Arrivals drawn at random until `horizon` from now: a Poisson stream at the window's
        rate, each arrival one of the window's workloads, any of them alike."""
        out: list[tuple[float, Workload]] = []
        if not self.workloads:
            return out
        rate = len(self.workloads) / self.window.total_seconds()
        end = horizon.total_seconds()
        at = rng.expovariate(rate)
        while at <= end:
            out.append((at, rng.choice(self.workloads)))
            at += rng.expovariate(rate)
        return out


def expected_arrivals(recent: Iterable[Workload], now: datetime, window: timedelta,
                      horizon: timedelta, *, bins: int = ARRIVAL_BINS) -> list[tuple[float, Workload]]:
    """The workloads created in the `window` before `now`, expected again: each one `window`,
    2 x `window`, ... after its creation, until `horizon` from now, less the bursts
    (`RecentArrivals.replayed`)."""
    return RecentArrivals.of(recent, now, window, bins=bins).replayed(horizon)


def without_bursts(created: list[Workload], now: datetime, span: float, bins: int) -> list[Workload]:
    """`created` (all within `span` seconds before `now`) with its bursts thinned: the span is
    cut into `bins` parts, and a part holding more than a steady (Poisson) stream would --
    the median part's count plus three of its standard deviations, plus one -- keeps only
    that many, spread over it in creation order (the kinds of workload it held keep their
    shares). Oldest first."""
    if bins <= 1 or not created:
        return list(created)
    width = span / bins
    parts: list[list[Workload]] = [[] for _ in range(bins)]
    for wl in sorted(created, key=lambda w: (w.creation_timestamp, w.key)):
        age = (now - wl.creation_timestamp).total_seconds()  # type: ignore[operator]
        parts[min(bins - 1, int(age // width))].append(wl)
    median = statistics.median(len(part) for part in parts)
    cap = math.floor(median + 3 * math.sqrt(median)) + 1
    out: list[Workload] = []
    for part in reversed(parts):  # the oldest first
        if len(part) > cap:
            step = len(part) / cap
            part = [part[int(i * step)] for i in range(cap)]
        out.extend(part)
    return out


def _finished(wl: Workload, at: datetime) -> Workload:
    return _with_conditions(wl, ("Finished",), [Condition("Finished", "True", "Succeeded", "expected end", at)])


def _pods_ready(wl: Workload, at: datetime) -> Workload:
    return _with_conditions(wl, ("PodsReady",), [Condition("PodsReady", "True", "PodsReady", "expected ready", at)])


def _released(wl: Workload, at: datetime) -> Workload:
    """Its pods stopped: no admission, queued again (Evicted and Preempted stay as they are)."""
    return _with_conditions(wl, ("QuotaReserved", "Admitted"), [
        Condition("QuotaReserved", "False", "Pending", "evicted", at),
        wl.no_reservation_condition(at),
    ], admission=None)


__all__ = [
    "HIGH",
    "LOW",
    "MEDIAN",
    "MIN_SAMPLES",
    "PLAY_FAILED",
    "RANGES",
    "SAMPLES",
    "Estimate",
    "EtaSettings",
    "PodSetPlacement",
    "Prediction",
    "RecentArrivals",
    "can_fork",
    "estimate",
    "expected_arrivals",
    "planned_range",
    "play_seconds",
    "plays_forked",
    "without_bursts",
]
