"""Calibrated ranges of predicted start times (`scheduler.calibration`)."""

from __future__ import annotations

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
    assert cal.below == 0  # the earliest side never missed: it stays the plays' own
    assert cal.above == pytest.approx(0.36)  # ceil(41 * 0.9) = 37th smallest miss: 36 s
    # a new prediction expecting a wait of an hour moves its latest 0.36 h later
    low, high = cal.widen(at(1000), at(1000 + 3600), at(1000 + 3000), at(1000 + 4000))
    assert low == at(1000 + 3000)
    assert high == at(1000 + 4000 + 0.36 * 3600)


def test_a_range_wider_than_needed_is_never_narrowed():
    outcomes = [outcome(0, 100, 0, 1000, 100) for _ in range(50)]  # always well inside
    cal = calibration_of(outcomes)
    assert (cal.below, cal.above) == (0, 0)
    assert cal.widen(at(0), at(100), at(50), at(150)) == (at(50), at(150))


def test_the_range_stays_around_the_start_and_after_the_time_it_was_made():
    outcomes = [outcome(0, 100, 100, 100, 100 - 50 - i) for i in range(40)]  # starts well before earliest
    cal = calibration_of(outcomes)
    assert cal.below > 0.5
    assert cal.widen(at(500), at(600), at(600), at(600)) == (at(600 - cal.below * 100), at(600))
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
