"""benchmarks/eta_accuracy.py: the start-time estimates checked against what happens, run small.

No accuracy or timing is asserted (a few simulated hours are too few to judge either); what
must hold: every mode scores its predictions, the sampled plays give a range that holds most
actual starts when runtimes are exact, and the timing run reports each way the service plays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import eta_accuracy as bench  # noqa: E402

from scheduler.eta import can_fork  # noqa: E402


def test_both_modes_score_their_predictions(tmp_path, capsys):
    out = tmp_path / "accuracy.json"
    assert bench.main(["--hours", "4", "--warmup", "1", "--samples", "3", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures) == {"exact", "learned"}
    for mode in ("exact", "learned"):
        rows = {r["group"]: r for r in figures[mode]["at_queueing_by_class"]}
        assert rows["all"]["n"] > 0 and rows["all"]["n"] == sum(r["n"] for g, r in rows.items() if g != "all")
        assert 0 <= rows["all"]["median"] <= rows["all"]["p90"]
        assert figures[mode]["estimates"] > 0 and figures[mode]["predictions"] >= rows["all"]["n"]
        by_hour = figures[mode]["at_queueing_by_hour"]
        assert sum(r["n"] for r in by_hour) == rows["all"]["n"]  # every prediction at queueing, once
        for r in [*by_hour, *rows.values()]:
            assert r["in_range"] + r["range_too_early"] + r["range_too_late"] <= 1 + 1e-9
    printed = capsys.readouterr().out
    assert "estimator: 3 sampled plays, arrivals from the last 2 h" in printed
    assert "target (median <= 10 %, p90 <= 25 % at queueing)" in printed
    assert "per hour of the day it was made" in printed and "too early" in printed


def test_calibrated_ranges_are_never_narrower_and_hold_more_starts(tmp_path, capsys):
    figures = {}
    for coverage in ("0", "0.8"):
        out = tmp_path / f"{coverage}.json"
        assert bench.main(["--mode", "learned", "--hours", "5", "--warmup", "1", "--samples", "3", "--seed", "2",
                           "--coverage", coverage, "--json", str(out)]) == 0
        figures[coverage] = {r["group"]: r for r in json.loads(out.read_text())["learned"]["by_lead_time"]}
    plays, calibrated = figures["0"]["all"], figures["0.8"]["all"]
    assert calibrated["n"] == plays["n"] and calibrated["median"] == plays["median"]  # the times themselves stay
    assert calibrated["range_width"] > plays["range_width"]
    assert calibrated["in_range"] > plays["in_range"]
    printed = capsys.readouterr().out
    assert "the plays' own ranges" in printed and "ranges calibrated to 80% on the last 500 outcomes" in printed


@pytest.mark.parametrize("args", [["--coverage", "1"], ["--coverage", "-0.1"], ["--calibration-outcomes", "0"],
                                  ["--calibration-bands", "0"]])
def test_bad_calibration_arguments_are_refused(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--mode", "learned", "--hours", "1", *args])
    assert exit_.value.code == 2
    assert "must be at least" in capsys.readouterr().err


def test_a_play_per_level_replays_the_last_hour(capsys):
    assert bench.main(["--mode", "exact", "--hours", "3", "--warmup", "1", "--range", "plays"]) == 0
    assert "estimator: range plays, arrivals from the last 1 h" in capsys.readouterr().out


@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
def test_the_timing_run_reports_every_way_the_service_plays(tmp_path):
    out = tmp_path / "timing.json"
    assert bench.main(["--timing", "--nodes", "1000", "--pending", "40", "--samples", "3", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["nodes"] == 1000 and figures["pending"] >= 40
    for key in ("clone_s", "median_play_s", "estimate_s", "chain_s", "forked_s", "forked_s_chain", "forked_s_samples"):
        assert figures[key] > 0, key
    assert figures["forked_predicted_samples"] == figures["forked_predicted"] > 0
    assert figures["auto_plan"][0] in ("samples", "plays", "chain")
