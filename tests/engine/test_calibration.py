"""Calibrated ranges of predicted start times (`scheduler.calibration`)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.calibration import Outcome, calibrated_range, calibration_of, conformal_quantile

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def outcome(made: float, start: float, earliest: float, latest: float, actual: float) -> Outcome:
    return Outcome(at(made), at(start), at(earliest), at(latest), at(actual))


def test_the_conformal_quantile_rounds_up_with_one_more():
    scores = [float(i) for i in range(1, 11)]  # 1 .. 10
    assert conformal_quantile(scores, 0.5) == 6  # ceil(11 * 0.5) = 6th
    assert conformal_quantile(scores, 0.9) == 10  # ceil(9.9) = 10th
    assert conformal_quantile(scores, 0.95) == 10  # past n: the largest
    assert conformal_quantile([3.0], 0.1) == 3


def test_too_few_outcomes_calibrate_nothing():
    one = outcome(0, 100, 90, 110, 200)
    assert calibration_of([one] * 29) is None
    assert calibration_of([one] * 30) is not None
    assert calibration_of([one] * 5, min_outcomes=5) is not None


@pytest.mark.parametrize("coverage", [0.0, 1.0, -0.5, 1.5])
def test_a_coverage_outside_zero_to_one_is_refused(coverage):
    with pytest.raises(ValueError, match="coverage must be between 0 and 1"):
        calibration_of([outcome(0, 100, 90, 110, 100)] * 40, coverage=coverage)


def test_each_side_moves_out_by_what_the_outcomes_missed_by_in_shares_of_the_expected_wait():
    # expected waits of 100 s; the actual starts 0 .. 39 s after `latest`, never before `earliest`
    outcomes = [outcome(0, 100, 80, 120, 120 + i) for i in range(40)]
    cal = calibration_of(outcomes, coverage=0.8)
    assert cal is not None and cal.outcomes == 40
    (band,) = cal.bands  # too few outcomes for two bands of 30
    assert band.below == 0  # the earliest side never missed: it stays the plays' own
    assert band.above == pytest.approx(0.36)  # ceil(41 * 0.9) = 37th smallest miss: 36 s
    # a new prediction expecting a wait of an hour moves its latest 0.36 h later
    low, high = cal.widen(at(1000), at(1000 + 3600), at(1000 + 3000), at(1000 + 4000))
    assert low == at(1000 + 3000)
    assert high == at(1000 + 4000 + 0.36 * 3600)


def test_a_range_wider_than_needed_is_never_narrowed():
    outcomes = [outcome(0, 100, 0, 1000, 100) for _ in range(50)]  # always well inside
    cal = calibration_of(outcomes)
    assert [(b.below, b.above) for b in cal.bands] == [(0, 0)]
    assert cal.widen(at(0), at(100), at(50), at(150)) == (at(50), at(150))


def test_the_range_stays_around_the_start_and_after_the_time_it_was_made():
    outcomes = [outcome(0, 100, 100, 100, 100 - 50 - i) for i in range(40)]  # starts well before earliest
    cal = calibration_of(outcomes)
    below = cal.bands[0].below
    assert below > 0.5
    assert cal.widen(at(500), at(600), at(600), at(600)) == (at(600 - below * 100), at(600))
    low, high = cal.widen(at(550), at(560), at(560), at(560))
    assert low == at(550)  # not before the prediction was made
    assert high == at(560)
    # a start a second ahead is measured against the floor (a minute), not that one second
    low, _ = cal.widen(at(0), at(1), at(1), at(1))
    assert low == at(0)


def test_calibrated_ranges_hold_the_start_as_often_as_asked_on_new_predictions():
    """The plays' ranges are too narrow (they hold about 40 % of the starts drawn here); the
    calibrated ones hold about the coverage asked for on predictions they were not fitted on."""
    rng = random.Random(5)

    def draw(n: int) -> list[Outcome]:
        out = []
        for _ in range(n):
            made = rng.uniform(0, 10_000)
            wait = rng.uniform(60, 7200)
            start = made + wait
            actual = made + wait * rng.lognormvariate(0.2, 0.5)
            out.append(outcome(made, start, start - 0.2 * wait, start + 0.2 * wait, actual))
        return out

    def held(outcomes: list[Outcome], widen) -> float:
        inside = 0
        for o in outcomes:
            low, high = widen(o)
            inside += low <= o.actual <= high
        return inside / len(outcomes)

    fitted, fresh = draw(2000), draw(4000)
    plays = held(fresh, lambda o: (o.earliest, o.latest))
    for coverage in (0.8, 0.9):
        cal = calibration_of(fitted, coverage=coverage)
        calibrated = held(fresh, lambda o, c=cal: c.widen(o.made_at, o.start, o.earliest, o.latest))
        assert plays < 0.5
        assert coverage - 0.03 <= calibrated <= coverage + 0.05, (coverage, calibrated)


def test_a_prediction_without_a_start_or_both_ends_is_left_as_it_is():
    cal = calibration_of([outcome(0, 100, 90, 110, 200)] * 40)
    assert calibrated_range(None, at(0), at(100), at(90), at(110)) is None
    assert calibrated_range(cal, at(0), None, at(90), at(110)) is None
    assert calibrated_range(cal, at(0), at(100), at(90), None) is None
    assert calibrated_range(cal, at(0), at(100), at(90), at(110)) == cal.widen(at(0), at(100), at(90), at(110))


def misses_by_wait(count: int, wait: float, miss: float, *, made: float = 0.0) -> list[Outcome]:
    """`count` predictions expecting `wait` seconds, admitted 0 .. `miss` shares of it after `latest`."""
    return [outcome(made, made + wait, made + wait, made + wait, made + wait * (1 + miss * i / (count - 1)))
            for i in range(count)]


def test_outcomes_are_cut_into_bands_by_the_wait_they_expected_each_calibrated_on_its_own():
    # short waits (5 min) missed by up to their whole wait, long ones (3 h) by up to a tenth
    short, long = misses_by_wait(60, 300, 1.0), misses_by_wait(60, 3 * 3600, 0.1)
    cal = calibration_of(long + short, coverage=0.8, bands=2)
    assert [b.outcomes for b in cal.bands] == [60, 60]
    low, high = cal.bands
    assert (low.low, low.high, high.low, high.high) == (0.0, 3 * 3600, 3 * 3600, math.inf)
    assert low.above == pytest.approx(54 / 59)  # ceil(61 * 0.9) = 55th smallest of 0, 1/59, ..
    assert high.above == pytest.approx(0.1 * 54 / 59)
    # a new prediction takes the band of the wait it expects
    assert cal.band_for(at(0), at(600)) is low
    assert cal.band_for(at(0), at(5 * 3600)) is high
    assert cal.widen(at(0), at(600), at(600), at(600))[1] == at(600 + low.above * 600)
    assert cal.widen(at(0), at(5 * 3600), at(5 * 3600), at(5 * 3600))[1] == at(5 * 3600 * (1 + high.above))
    # one band: one quantile for all, too wide for the long waits and too narrow for the short
    (pooled,) = calibration_of(long + short, coverage=0.8, bands=1).bands
    assert high.above < pooled.above < low.above


def test_bands_are_as_many_as_the_outcomes_allow_and_never_smaller_than_the_least():
    spread = [o for i in range(10) for o in misses_by_wait(10, 60 * (i + 2), 0.5)]  # 100 outcomes, 10 waits
    assert len(calibration_of(spread, bands=3).bands) == 3
    assert len(calibration_of(spread, bands=5).bands) == 3  # 100 // 30: three bands of 30 or more
    assert len(calibration_of(spread, bands=5, min_outcomes=20).bands) == 5
    for cal in (calibration_of(spread, bands=3), calibration_of(spread, bands=5, min_outcomes=20)):
        assert cal.outcomes == 100
        assert all(b.outcomes >= 20 for b in cal.bands)
        assert cal.bands[0].low == 0 and cal.bands[-1].high == math.inf
        assert all(a.high == b.low for a, b in zip(cal.bands, cal.bands[1:], strict=False))
    # most outcomes expecting the same wait (the floor): the bands that would split them join
    tied = misses_by_wait(80, 30, 0.5) + misses_by_wait(20, 4000, 0.5)
    cal = calibration_of(tied, bands=3)
    assert [b.outcomes for b in cal.bands] == [100]


def test_a_band_count_below_one_is_refused():
    with pytest.raises(ValueError, match="bands must be at least 1"):
        calibration_of(misses_by_wait(40, 300, 0.5), bands=0)


def test_banded_ranges_hold_the_start_as_often_as_asked_for_short_and_long_waits_alike():
    """Where short waits miss by more of their wait than long ones, one calibration for all
    holds the short ones less often than asked and the long ones more; bands hold both."""
    rng = random.Random(11)

    def draw(n: int) -> list[Outcome]:
        out = []
        for _ in range(n):
            made = rng.uniform(0, 10_000)
            wait = rng.choice((rng.uniform(60, 900), rng.uniform(3600, 14_400)))
            spread = 0.8 if wait < 900 else 0.15
            start = made + wait
            out.append(outcome(made, start, start, start, made + wait * (1 + rng.uniform(-spread, spread))))
        return out

    def held(outcomes: list[Outcome], cal) -> float:
        inside = sum(low <= o.actual <= high for o in outcomes
                     for low, high in [cal.widen(o.made_at, o.start, o.earliest, o.latest)])
        return inside / len(outcomes)

    fitted, fresh = draw(1000), draw(4000)
    short = [o for o in fresh if (o.start - o.made_at).total_seconds() < 900]
    long = [o for o in fresh if (o.start - o.made_at).total_seconds() >= 3600]
    pooled, banded = calibration_of(fitted, bands=1), calibration_of(fitted, bands=2)
    assert held(short, pooled) < 0.6 and held(long, pooled) > 0.95
    for group in (short, long):
        assert 0.77 <= held(group, banded) <= 0.85, held(group, banded)
