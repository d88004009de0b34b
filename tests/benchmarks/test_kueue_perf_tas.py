"""benchmarks/kueue_perf_tas.py: the replay of Kueue's TAS scheduler performance test, run small.

No timing is asserted: the replay runs in real time on a machine shared with other work. What
must hold whatever the speed: every workload finishes, the measures are well formed, preempted
workloads run again, and a malformed generator file is refused with the file and the field named.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kueue_perf_tas as perf  # noqa: E402

DOCUMENTED_KEYS = {"wall_s", "cq_usage_pct", "avg_time_to_admission_ms", "evictions", "mode"}
RACK = "cloud.provider.com/topology-rack"

def tiny_config() -> dict[str, Any]:
    """Two ClusterQueues sharing a cohort of 4 CPU: the low-priority workloads fill it, then a
    high-priority one per ClusterQueue must preempt its own."""
    low = {"className": "low", "runtimeMs": 600, "priority": 1, "request": "1", "podCount": 1,
           "tasConstraint": "required", "tasLevel": RACK}
    high = {"className": "high", "runtimeMs": 300, "priority": 100, "request": "1", "podCount": 2,
            "tasConstraint": "balanced", "tasLevel": RACK, "sliceSize": 1}
    return {
        "topology": {"name": "t", "levels": [
            {"name": "block", "count": 1, "nodeLabel": "cloud.provider.com/topology-block"},
            {"name": "rack", "count": 2, "nodeLabel": RACK},
            {"name": "node", "count": 2, "nodeLabel": "kubernetes.io/hostname", "capacity": {"cpu": "8"}}]},
        "resourceFlavor": {"name": "f", "nodeLabel": "tas-node-group", "topologyName": "t"},
        "cohorts": [{"className": "cohort", "count": 1, "queuesSets": [{
            "className": "cq", "count": 2, "nominalQuota": "2", "borrowingLimit": "2",
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
            "workloadsSets": [{"count": 4, "creationIntervalMs": 10, "workloads": [low]},
                              {"count": 1, "creationIntervalMs": 200, "workloads": [high]}]}]}],
    }


def write_config(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "generator.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def small_run(kueue_files: tuple[Path, Path]) -> tuple[perf.ReplayResult, perf.Replay]:
    return perf.replay(perf.load_config(kueue_files[0]), scale=0.02)


# ---------------------------------------------------------------- the replay


def test_every_workload_finishes(small_run: tuple[perf.ReplayResult, perf.Replay]) -> None:
    result, run = small_run
    records = run.recorder.workloads
    assert result.workloads == len(run.arrivals) == len(records) > 0
    assert run.engine is not None
    for key, rec in records.items():
        assert rec.finished_s is not None, f"{key} never finished"
        assert rec.finished_s >= rec.created_s + rec.runtime_s, f"{key} finished before running its runtime"
        wl = run.engine.state.workload(key)
        assert wl is not None and wl.is_finished, f"{key} is not Finished in the engine"


def test_each_class_has_an_average(small_run: tuple[perf.ReplayResult, perf.Replay]) -> None:
    result, run = small_run
    classes = {t.class_name for cs in run.config.cohorts for qs in cs.queues_sets
               for ws in qs.workloads_sets for t in ws.workloads}
    assert set(result.avg_time_to_admission_ms) == classes
    assert all(isinstance(ms, int) and ms >= 0 for ms in result.avg_time_to_admission_ms.values())


def test_usage_is_a_percentage(small_run: tuple[perf.ReplayResult, perf.Replay]) -> None:
    result, run = small_run
    assert 0 < result.cq_usage_pct <= 100
    # nothing holds quota once every workload has finished
    assert all(q.usage_m == 0 for q in run.recorder.queues.values())


def test_json_has_the_documented_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     kueue_files: tuple[Path, Path]) -> None:
    generator, rangespec = kueue_files
    out = tmp_path / "perf.json"
    assert perf.main(["--config", str(generator), "--rangespec", str(rangespec), "--scale", "0.01",
                      "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) >= DOCUMENTED_KEYS
    assert data["mode"] == "engine"
    assert isinstance(data["evictions"], int)
    assert set(data["avg_time_to_admission_ms"]) == set(perf.read_rangespec(rangespec).avg_time_to_admission_ms)
    table = capsys.readouterr().out
    assert "wall time (s)" in table and "bound / instant" in table and "401.5" in table


def test_preempted_workloads_run_again(tmp_path: Path) -> None:
    result, run = perf.replay(perf.load_config(write_config(tmp_path, tiny_config())))
    records = run.recorder.workloads
    assert result.evictions > 0
    assert result.evictions == sum(r.evictions for r in records.values())
    for key, rec in records.items():
        assert rec.finished_s is not None, f"{key} never finished"
        assert rec.admissions == rec.evictions + 1, f"{key}: every eviction is followed by a readmission"
    assert result.evictions_by_class["high"] == 0


# ---------------------------------------------------------------- reading Kueue's files


def test_arrivals_follow_the_generator(kueue_files: tuple[Path, Path]) -> None:
    config = perf.load_config(kueue_files[0])
    queues = perf.queue_specs(config)
    arrivals = perf.arrivals(queues)
    assert len(queues) == 30 and queues[0].name == "cq-0-0-cohort-0"
    assert len(arrivals) == 15_000
    # each set waits one interval before every creation, all sets and queues together
    first = arrivals[0]
    assert first.at_ms == 100 and first.name == "small-required-rack-0-0-0"
    assert max(a.at_ms for a in arrivals) == 17 * 1200
    assert perf.physical_bound_s(config) == pytest.approx(66.0)


def test_instant_reference(kueue_files: tuple[Path, Path]) -> None:
    """Six large workloads at a time per cohort, fifteen arriving a second for 20 s: even served
    first, the large ones wait about 15 s on average."""
    reference = perf.instant_reference_ms(perf.load_config(kueue_files[0]))
    assert len(reference) == 9
    assert all(14_000 < reference[c] < 16_000 for c in reference if c.startswith("large-"))
    assert all(reference[c] > reference["large-required-rack"] for c in reference if not c.startswith("large-"))


def test_rangespec_means(kueue_files: tuple[Path, Path]) -> None:
    means = perf.read_rangespec(kueue_files[1])
    assert means.wall_ms == 401_472
    assert means.usage_pct == {"cq": 62.41}
    assert means.avg_time_to_admission_ms["large-balanced-rack"] == 37_862
    assert len(means.avg_time_to_admission_ms) == 9


def test_scale_shrinks_counts_only(tmp_path: Path) -> None:
    config = perf.load_config(write_config(tmp_path, tiny_config()))
    small = perf.scaled(config, 0.01)
    sets = small.cohorts[0].queues_sets[0].workloads_sets
    assert [ws.count for ws in sets] == [1, 1]
    assert [ws.creation_interval_ms for ws in sets] == [10, 200]
    assert small.cohorts[0].queues_sets[0].count == 2


@pytest.mark.parametrize(("edit", "field", "reason"), [
    (lambda d: d["cohorts"][0]["queuesSets"][0]["workloadsSets"][0].update(creationIntervalMs="fast"),
     "cohorts[0].queuesSets[0].workloadsSets[0].creationIntervalMs", "must be an integer"),
    (lambda d: d["cohorts"][0]["queuesSets"][0].update(nominalQuota="lots"),
     "cohorts[0].queuesSets[0].nominalQuota", "not a valid quantity"),
    (lambda d: d["cohorts"][0]["queuesSets"][0]["workloadsSets"][1]["workloads"][0].update(tasConstraint="spread"),
     "cohorts[0].queuesSets[0].workloadsSets[1].workloads[0].tasConstraint", "must be one of"),
    (lambda d: d.update(cohorts=[]), "cohorts", "at least one"),
    (lambda d: d.pop("topology"), "topology", "is required"),
])
def test_malformed_generator_is_refused(tmp_path: Path, edit, field: str, reason: str) -> None:
    data = tiny_config()
    edit(data)
    path = write_config(tmp_path, data)
    with pytest.raises(perf.ConfigError) as caught:
        perf.load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert reason in message


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_config(tmp_path, ["not", "a", "mapping"])
    assert perf.main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "must be a mapping" in err
    missing = tmp_path / "nowhere.yaml"
    assert perf.main(["--config", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err


def test_stack_mode_options_are_checked_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    """Stack mode itself (databases, a worker) is tested in test_kueue_perf_stack.py."""
    with pytest.raises(SystemExit) as caught:
        perf.main(["--mode", "stack", "--poll-ms", "0"])
    assert caught.value.code == 2
    assert "--poll-ms must be > 0" in capsys.readouterr().err
