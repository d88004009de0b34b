"""How long a workload runs once admitted: what start-time estimates (scheduler.eta) need.

Sources, first that applies wins, and every estimate names the one it used:

1. `annotation`: `kueue.x-k8s.io/expected-runtime` on the Workload, else on a PodSet's pod
   template (Kueue copies the job's pod template into the Workload). A Go duration (`2h30m`,
   `1.5h`, `90s`, `250ms`) or a number of seconds (`3600`, `3600.5`); more than zero and at
   most 366 days. It is the runtime: low, median and high are all that value. A bad value is
   reported in `problems` and the next source is used.
2. `activeDeadlineSeconds` of the pod templates, when every PodSet has one (the largest):
   the job is stopped by then, so it is an upper bound. `high` is the deadline; `low` and
   `median` are the learned ones (source 3 or the default) capped at the deadline, or the
   deadline itself when there is no history of the workload's kind.
3. `history`: the runtimes of finished workloads, by class (owner kind, LocalQueue, size
   class), the first class with at least `min_samples` runs of these, finest first:
   (kind, LocalQueue, size), (kind, LocalQueue), (kind, size), (kind), every run. The
   low / median / high runtimes are the class's quantiles (`quantiles`, p10 / p50 / p90 by
   default) of its latest `window` runs. In a view `with_running`, the runs still going
   count too, as lower bounds (`with_censored`: the Kaplan-Meier estimate), also towards
   `min_samples` once one run of the class has finished: the first runs of a class to end
   are its short ones, and a coarser class is a poor stand-in for one whose long runs are
   still going.
4. `default`: `default_seconds` (1 h), low half of it, high twice it.

A workload already running for `elapsed` seconds with a learned estimate is expected to run,
in all, the quantile of the learned runs longer than `elapsed` (`total_given`), so that a
job past the median of its class is not expected to end at once.

Owner kind: the kind of the Workload's controller owner (`Job`, `JobSet`, `RayJob`, ...),
else of its first owner, else `Workload`. Size class: the Workload's pods over all its
PodSets, in powers of two: `1`, `2-3`, `4-7`, `8-15`, ...
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import functools
import math
import random
import re
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.model import PodSet, Workload
from scheduler.parse import EXPECTED_RUNTIME

ANNOTATION = "annotation"
DEADLINE = "activeDeadlineSeconds"
HISTORY = "history"
DEFAULT = "default"
SOURCES = (ANNOTATION, DEADLINE, HISTORY, DEFAULT)

MAX_RUNTIME_SECONDS = 366 * 24 * 3600.0
DEFAULT_RUNTIME_SECONDS = 3600.0
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)

LOW, MEDIAN, HIGH = "low", "median", "high"
LEVELS = (LOW, MEDIAN, HIGH)

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+", re.ASCII)
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+", re.ASCII)


_NORMAL = statistics.NormalDist()


def _log_ratio(a: float, b: float) -> float:
    return math.log(max(a, 1e-9) / max(b, 1e-9))


class DurationError(ValueError):
    """A runtime that cannot be read; the message says what was expected."""


@functools.lru_cache(maxsize=4096)  # every estimate reads every annotation again
def parse_duration(text: str) -> float:
    """Seconds of a Go duration (`2h30m`, `1.5h`, `90s`) or of a plain number of seconds."""
    value = text.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    elif _GO_DURATION.fullmatch(value):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _GO_PART.findall(value))
    else:
        raise DurationError(f"{text!r} is not a duration (a Go duration such as 2h30m or 90s, or seconds)")
    if not math.isfinite(seconds) or seconds <= 0:
        raise DurationError(f"{text!r} is not more than zero")
    if seconds > MAX_RUNTIME_SECONDS:
        raise DurationError(f"{text!r} is more than 366 days")
    return seconds


@dataclass(frozen=True, slots=True)
class RuntimeEstimate:
    """Seconds a workload runs once admitted: low, median and high, and where they come from."""

    low: float
    median: float
    high: float
    source: str
    detail: str = ""
    problems: tuple[str, ...] = ()
    # the learned runtimes (sorted) and the quantiles low, median and high were taken at:
    # what a running workload has left is taken from the runs that lasted longer
    samples: tuple[float, ...] = ()
    quantiles: tuple[float, float, float] = DEFAULT_QUANTILES
    # what the numbers are of, the same from one estimate to the next while the numbers move
    # (a class's learned runs, an annotation, a deadline, the default): workloads with the same
    # basis and problems have the same estimate
    basis: str = ""

    def at(self, level: str) -> float:
        return {LOW: self.low, MEDIAN: self.median, HIGH: self.high}[level]

    def sample(self, u: float, elapsed: float = 0.0, runs: Sequence[float] | None = None) -> float:
        """The runtime at quantile `u` (0 <= u <= 1) of what this estimate knows, for a workload
        that has run `elapsed` seconds already: an exact runtime (low = median = high) is
        itself; else the quantile of the learned runs (`runs` in their place when given, e.g.
        `resampled()`; of those longer than `elapsed` when there are 3 of them, as
        `total_given`), or without them of a log-normal law through low, median and high at
        their quantiles, conditioned on `elapsed`; never past a deadline."""
        u = min(max(u, 0.0), 1.0)
        if self.low == self.median == self.high:
            return self.median
        samples = self.samples if runs is None or not self.samples else runs
        if samples:
            first = bisect.bisect_right(samples, elapsed) if elapsed > 0 else 0
            value = quantile(samples, u, first if len(samples) - first >= 3 else 0)
        else:
            if elapsed > 0:
                u = self._cdf(elapsed) + u * (1.0 - self._cdf(elapsed))
            value = self._inverse(u)
        return self._capped(value)

    def _capped(self, value: float) -> float:
        """Never past the deadline, when the estimate has one (the job is stopped then)."""
        return min(value, self.high) if self.source == DEADLINE else value

    def resampled(self, rng: random.Random) -> tuple[float, ...]:
        """As many runs drawn from the learned ones with replacement, sorted: the runs another
        history of the same class might have given (a bootstrap). Plays that each draw from
        their own resample spread as far apart as a class's few runs leave its runtimes
        unknown; with many runs they barely differ."""
        return tuple(sorted(rng.choices(self.samples, k=len(self.samples))))

    def _spread(self, upper: bool) -> float:
        """ln(high / median) / z(q_high) above the median, ln(median / low) / -z(q_low) below."""
        q_low, _, q_high = self.quantiles
        if upper:
            return _log_ratio(self.high, self.median) / _NORMAL.inv_cdf(min(max(q_high, 0.5001), 0.9999))
        return _log_ratio(self.median, self.low) / -_NORMAL.inv_cdf(min(max(q_low, 0.0001), 0.4999))

    def _inverse(self, u: float) -> float:
        z = _NORMAL.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
        return max(self.median, 1e-9) * math.exp(z * self._spread(z > 0))

    def _cdf(self, seconds: float) -> float:
        z = _log_ratio(seconds, self.median)
        spread = self._spread(z > 0)
        return _NORMAL.cdf(z / spread) if spread > 0 else (1.0 if z >= 0 else 0.0)

    def total_given(self, level: str, elapsed: float, min_samples: int = 3) -> float | None:
        """The runtime at `level` of a workload still running after `elapsed` seconds: the
        quantile among the learned runs longer than that, never past a deadline; None
        without enough of them."""
        if not self.samples:
            return None
        first = bisect.bisect_right(self.samples, elapsed)
        if len(self.samples) - first < min_samples:
            return None
        return self._capped(quantile(self.samples, self.quantiles[LEVELS.index(level)], first))


@dataclass(frozen=True, slots=True)
class RuntimeClass:
    owner_kind: str
    local_queue: str  # namespace/name
    size: str


def owner_kind(wl: Workload) -> str:
    refs = wl.owner_references
    for ref in refs:
        if ref.controller:
            return ref.kind
    return refs[0].kind if refs else "Workload"


@functools.lru_cache(maxsize=256)
def size_class(pods: int) -> str:
    """`1`, `2-3`, `4-7`, ...: powers of two."""
    if pods <= 1:
        return "1"
    low = 1 << (pods.bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def runtime_class(wl: Workload) -> RuntimeClass:
    pods = sum(ps.count for ps in wl.pod_sets)
    return RuntimeClass(owner_kind(wl), wl.local_queue_key, size_class(pods))


def quantile(ordered: Sequence[float], q: float, first: int = 0) -> float:
    """The q-quantile of sorted values (of those from index `first` on: read in place, not
    copied), interpolated between the closest ranks."""
    if len(ordered) <= first:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1 - first)
    below = math.floor(pos)
    above = min(below + 1, len(ordered) - 1 - first)
    return ordered[first + below] + (ordered[first + above] - ordered[first + below]) * (pos - below)


class _Runs:
    """The latest runtimes of one class, also kept sorted for quantiles."""

    __slots__ = ("frozen", "ordered", "recent")

    def __init__(self) -> None:
        self.recent: deque[float] = deque()
        self.ordered: list[float] = []
        self.frozen: tuple[float, ...] | None = None

    def snapshot(self) -> tuple[float, ...]:
        if self.frozen is None:
            self.frozen = tuple(self.ordered)
        return self.frozen

    def add(self, seconds: float, window: int) -> None:
        self.frozen = None
        self.recent.append(seconds)
        bisect.insort(self.ordered, seconds)
        if len(self.recent) > window:
            old = self.recent.popleft()
            del self.ordered[bisect.bisect_left(self.ordered, old)]


class RuntimeHistory:
    """Runtimes of finished workloads per class, and the estimate of a workload from them."""

    def __init__(self, *, quantiles: tuple[float, float, float] = DEFAULT_QUANTILES, min_samples: int = 5,
                 window: int = 500, default_seconds: float = DEFAULT_RUNTIME_SECONDS) -> None:
        low, median, high = quantiles
        if not 0 <= low <= median <= high <= 1:
            raise ValueError(f"quantiles must be ordered within [0, 1], got {quantiles}")
        self.quantiles = quantiles
        self.min_samples = max(1, min_samples)
        self.window = max(1, window)
        self.default_seconds = default_seconds
        self._runs: dict[tuple[str, str, str], _Runs] = {}
        # runs still going, as lower bounds (`with_running`), per class; and what they made of it
        self._running: dict[tuple[str, str, str], list[float]] = {}
        self._learned: dict[tuple[str, str, str], RuntimeEstimate] = {}
        self._default: RuntimeEstimate | None = None
        # the estimate of each shape of workload seen (`_shape`), with the PodSets the shape
        # names by identity (held, so that no other PodSet can take their ids)
        self._by_shape: dict[tuple, tuple[tuple[PodSet, ...], RuntimeEstimate]] = {}

    # ------------------------------------------------------------ learning

    def add(self, cls: RuntimeClass, seconds: float) -> None:
        """One finished run of class `cls` (counted in every coarser class too)."""
        if not math.isfinite(seconds) or seconds < 0:
            return
        for key in _fallbacks(cls):
            self._runs.setdefault(key, _Runs()).add(seconds, self.window)
        self._learned.clear()
        self._by_shape.clear()

    def add_workload(self, wl: Workload, seconds: float) -> None:
        self.add(runtime_class(wl), seconds)

    def extend(self, runs: Iterable[tuple[RuntimeClass, float]]) -> None:
        for cls, seconds in runs:
            self.add(cls, seconds)

    def samples(self, cls: RuntimeClass) -> int:
        runs = self._runs.get(_fallbacks(cls)[0])
        return len(runs.recent) if runs else 0

    def with_running(self, running: Iterable[tuple[RuntimeClass, float]]) -> RuntimeHistory:
        """A view of this history in which the runs still going count too: (class, seconds run so
        far), each a lower bound of its runtime (a right-censored run). Without them, the learned
        runtimes of a class whose long runs have not ended yet (a new kind of job, a service
        started afresh) are those of its short runs only, and too short."""
        view = copy.copy(self)
        view._running, view._learned, view._by_shape = {}, {}, {}
        for cls, seconds in running:
            if math.isfinite(seconds) and seconds > 0:
                for key in _fallbacks(cls):
                    view._running.setdefault(key, []).append(seconds)
        return view

    # ------------------------------------------------------------ estimating

    def learned(self, cls: RuntimeClass) -> RuntimeEstimate | None:
        """The quantiles of the finest class of `cls` with enough runs (`min_samples`, finished
        or still going, one of them at least finished); None without one."""
        for key in _fallbacks(cls):
            runs = self._runs.get(key)
            if runs is not None and runs.ordered and \
                    len(runs.ordered) + len(self._running.get(key, ())) >= self.min_samples:
                learned = self._learned.get(key)
                if learned is None:
                    learned = self._learned[key] = self._learned_of(key, runs)
                return learned
        return None

    def _learned_of(self, key: tuple[str, str, str], runs: _Runs) -> RuntimeEstimate:
        running = self._running.get(key, [])
        samples = with_censored(runs.ordered, running) if running else runs.snapshot()
        low, median, high = (quantile(samples, q) for q in self.quantiles)
        going = f", {len(running)} running" if running else ""
        return RuntimeEstimate(low, median, high, HISTORY, f"{_describe(key)} ({len(runs.ordered)} runs{going})",
                               samples=samples, quantiles=self.quantiles, basis=f"history:{'/'.join(key)}")

    def default(self) -> RuntimeEstimate:
        d = self.default_seconds
        if self._default is None or self._default.median != d:
            self._default = RuntimeEstimate(d / 2, d, d * 2, DEFAULT, "no history of its kind", basis=f"default:{d!r}")
        return self._default

    def estimate(self, wl: Workload) -> RuntimeEstimate:
        """The workload's runtime from the first source that applies (see the module docstring).
        Workloads of one shape
        (their namespace, LocalQueue, owner kind, runtime annotation and PodSets, which are never
        edited once parsed and are shared by the workloads of one template) have the same, made
        once."""
        shape = _shape(wl)
        known = self._by_shape.get(shape)
        if known is not None:
            return known[1]
        est = self._estimate(wl)
        self._by_shape[shape] = (tuple(wl.pod_sets), est)
        return est

    def _estimate(self, wl: Workload) -> RuntimeEstimate:
        problems: list[str] = []
        explicit = _annotated(wl, problems)
        if explicit is not None:
            seconds, where = explicit
            return RuntimeEstimate(seconds, seconds, seconds, ANNOTATION, where, tuple(problems),
                                   basis=f"annotation:{where}:{seconds!r}")
        learned = self.learned(runtime_class(wl))
        deadline = _deadline(wl)
        if deadline is not None:
            if learned is None:
                return RuntimeEstimate(deadline, deadline, deadline, DEADLINE, f"{deadline:g}s",
                                       tuple(problems), basis=f"deadline:{deadline!r}")
            return RuntimeEstimate(min(learned.low, deadline), min(learned.median, deadline), deadline, DEADLINE,
                                   f"{deadline:g}s, below it {learned.detail}", tuple(problems),
                                   basis=f"deadline:{deadline!r}:{learned.basis}")
        if problems:
            return dataclasses.replace(learned or self.default(), problems=tuple(problems))
        return learned or self.default()  # shared by every workload of the class: it is frozen


def with_censored(finished: Sequence[float], running: Sequence[float]) -> tuple[float, ...]:
    """Runtimes standing for what the finished runs and the runs still going (each a lower
    bound) say together: the Kaplan-Meier estimate of the runtime's distribution, its share
    past the last finished run spread over the running ones longer than that (each taken to end
    now: still a lower bound), read off at evenly spaced quantiles, one per finished run and
    per running one past the last finished run. Sorted; the finished runs themselves when no
    run going is longer than one of them."""
    events = sorted(finished)
    if not running:
        return tuple(events)
    points = sorted([(t, 0) for t in events] + [(t, 1) for t in running])  # an end before a bound at a tie
    at_risk, surviving = len(points), 1.0
    support: list[tuple[float, float]] = []  # (runtime, probability)
    i = 0
    while i < len(points):
        t, censored = points[i]
        if censored:
            at_risk -= 1
            i += 1
            continue
        ended = 0
        while i < len(points) and points[i] == (t, 0):
            ended, i = ended + 1, i + 1
        mass = surviving * ended / at_risk
        support.append((t, mass))
        surviving -= mass
        at_risk -= ended
    last = events[-1] if events else 0.0
    beyond = [t for t in running if t > last]
    support += [(t, surviving / len(beyond)) for t in sorted(beyond)] if beyond else [(last, surviving)]
    n = len(events) + len(beyond)
    out: list[float] = []
    cumulative, j = 0.0, 0
    for k in range(n):
        q = (k + 0.5) / n
        while j < len(support) - 1 and cumulative + support[j][1] < q:
            cumulative += support[j][1]
            j += 1
        out.append(support[j][0])
    return tuple(out)


def _shape(wl: Workload) -> tuple:
    """What a workload's runtime estimate depends on (its PodSets by identity)."""
    return (wl.namespace, wl.queue_name, owner_kind(wl), wl.annotations.get(EXPECTED_RUNTIME),
            *map(id, wl.pod_sets))


def _fallbacks(cls: RuntimeClass) -> list[tuple[str, str, str]]:
    """The classes a run counts in, finest first ("" stands for any)."""
    return [(cls.owner_kind, cls.local_queue, cls.size), (cls.owner_kind, cls.local_queue, ""),
            (cls.owner_kind, "", cls.size), (cls.owner_kind, "", ""), ("", "", "")]


def _describe(key: tuple[str, str, str]) -> str:
    kind, queue, size = key
    if not kind:
        return "every finished workload"
    parts = [kind]
    if queue:
        parts.append(f"in {queue}")
    if size:
        parts.append(f"of {size} pods")
    return " ".join(parts)


def _annotated(wl: Workload, problems: list[str]) -> tuple[float, str] | None:
    """The expected-runtime annotation of the Workload, else of its first PodSet that has one."""
    candidates = [(wl.annotations.get(EXPECTED_RUNTIME), "Workload")]
    candidates += [(ps.expected_runtime, f"PodSet {ps.name}") for ps in wl.pod_sets]
    for text, where in candidates:
        if text is None:
            continue
        try:
            return parse_duration(text), f"{EXPECTED_RUNTIME}={text} on the {where}"
        except DurationError as exc:
            problems.append(f"{EXPECTED_RUNTIME} on the {where}: {exc}; ignored")
    return None


def _deadline(wl: Workload) -> float | None:
    deadlines = [ps.active_deadline_seconds for ps in wl.pod_sets]
    if not deadlines or any(d is None for d in deadlines):
        return None
    return float(max(d for d in deadlines if d is not None))
