"""Ranges of predicted start times, calibrated on what happened to earlier predictions.

The plays of `scheduler.eta` give each waiting workload a range (`earliest` .. `latest`) from
the spread of their runtimes and arrivals. What they cannot play (which workloads will be
submitted, how long a class's runs that have not ended yet will last) makes that range too
narrow: on the accuracy benchmark it held the actual start about half the time. Here the
range is widened by what earlier predictions missed by, the way conformalized quantile
regression does (Romano, Patterson and Candès, 2019):

* an `Outcome` is one earlier prediction and the time its workload was actually admitted;
* its misses are how far the actual start fell before `earliest` and after `latest`, as a
  share of the wait that prediction expected (`start - made_at`, at least `floor_seconds`),
  so that predictions a minute ahead and a day ahead are measured alike;
* a `RangeCalibration` moves each side out by the quantile of its misses that leaves
  `(1 - coverage) / 2` of the outcomes beyond it, times the new prediction's expected wait.
  It never moves a side in: where the plays' range was wider than it needed to be (runtimes
  known exactly, say), it stays the plays' range, whose spread is what the plays know.

With exchangeable outcomes that range holds the actual start with probability `coverage`
or more; the recent past stands in for the near future, so the outcomes used are the
latest ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

DEFAULT_COVERAGE = 0.8
DEFAULT_MIN_OUTCOMES = 30
DEFAULT_FLOOR_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """An earlier prediction (made at `made_at`) and when its workload was admitted."""

    made_at: datetime
    start: datetime
    earliest: datetime
    latest: datetime
    actual: datetime


@dataclass(frozen=True, slots=True)
class RangeCalibration:
    """How far to move each side of a range, in shares of the prediction's expected wait."""

    below: float  # earliest moves earlier by this share of the expected wait (>= 0)
    above: float  # latest moves later by this share (>= 0)
    outcomes: int
    coverage: float
    floor_seconds: float = DEFAULT_FLOOR_SECONDS

    def widen(self, made_at: datetime, start: datetime, earliest: datetime,
              latest: datetime) -> tuple[datetime, datetime]:
        """The calibrated range of a prediction: never after the start below, nor before it
        above, nor before the time the prediction was made."""
        scale = expected_wait(made_at, start, self.floor_seconds)
        low = min(earliest - timedelta(seconds=self.below * scale), start)
        high = max(latest + timedelta(seconds=self.above * scale), start)
        return max(low, made_at), high


def calibrated_range(calibration: RangeCalibration | None, made_at: datetime, start: datetime | None,
                     earliest: datetime | None, latest: datetime | None) -> tuple[datetime, datetime] | None:
    """The range `calibration` gives a prediction; None when there is nothing to calibrate
    (no calibration, or a prediction without a start or without both ends of its range)."""
    if calibration is None or start is None or earliest is None or latest is None:
        return None
    return calibration.widen(made_at, start, earliest, latest)


def expected_wait(made_at: datetime, start: datetime, floor_seconds: float) -> float:
    return max((start - made_at).total_seconds(), floor_seconds)


def conformal_quantile(scores: Sequence[float], level: float) -> float:
    """The `level` quantile of `scores` with the finite-sample correction of split conformal
    prediction: the ceil((n + 1) * level)-th smallest (the largest when that is past n)."""
    ordered = sorted(scores)
    rank = min(math.ceil((len(ordered) + 1) * level), len(ordered))
    return ordered[max(rank, 1) - 1]


def calibration_of(outcomes: Sequence[Outcome], *, coverage: float = DEFAULT_COVERAGE,
                   min_outcomes: int = DEFAULT_MIN_OUTCOMES,
                   floor_seconds: float = DEFAULT_FLOOR_SECONDS) -> RangeCalibration | None:
    """The calibration `outcomes` give, or None with fewer than `min_outcomes` of them."""
    if not 0.0 < coverage < 1.0:
        raise ValueError(f"coverage must be between 0 and 1 (exclusive), not {coverage}")
    if len(outcomes) < max(min_outcomes, 1):
        return None
    below, above = [], []
    for o in outcomes:
        scale = expected_wait(o.made_at, o.start, floor_seconds)
        below.append((o.earliest - o.actual).total_seconds() / scale)
        above.append((o.actual - o.latest).total_seconds() / scale)
    level = 1.0 - (1.0 - coverage) / 2
    return RangeCalibration(max(conformal_quantile(below, level), 0.0), max(conformal_quantile(above, level), 0.0),
                            len(outcomes), coverage, floor_seconds)


__all__ = ["Outcome", "RangeCalibration", "calibrated_range", "calibration_of", "conformal_quantile"]
