"""benchmarks/bench_what_if.py, run tiny: the Workloads it posts are new copies of waiting
ones, every stage of a what-if is timed, forked and in the process, the two answers are compared,
and the functions it times are put back after."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scheduler_state as seeding  # noqa: E402
import bench_what_if as bench  # noqa: E402

pytestmark = [pytest.mark.services, pytest.mark.django_db]

TINY = seeding.BenchSettings(nodes=200, workloads=600, admitted=100, admit=20, node_changes=10)


def test_a_timed_what_if_of_posted_copies(capsys) -> None:
    import scheduler.engine as engine_module
    import tasweb.api.whatif as whatif
    from tasweb.scheduling.services import scheduling_pass_run

    seeding.seed(TINY, log=lambda _message: None)
    scheduling_pass_run(now=seeding.NOW)
    body = bench.posted_workloads(3)
    assert [w["metadata"]["name"] for w in body] == ["what-if-0", "what-if-1", "what-if-2"]
    assert all("status" not in w and w["kind"] == "Workload" for w in body)
    originals = (whatif.engine_view, whatif.engine_workloads, whatif.engine_pods, whatif.forked_answer, whatif.play,
                 engine_module.Engine.run_pass)

    runs = bench.both_ways("tiny", body)
    forked, in_process = runs
    assert forked["forked"] and not in_process["forked"]
    assert set(forked["stages"]) == {"view", "child"}
    assert set(in_process["stages"]) == {"view", "workloads", "pods", "engine", "pass"}
    assert all(run["same_answer"] for run in runs)
    assert forked["child_private_mib"] > 0 and in_process["child_private_mib"] is None  # kept out of the answers
    for run in runs:
        assert run["seconds"] >= sum(run["stages"].values()) and run["rest"] >= 0
        assert run["bytes"] > 0
    out = capsys.readouterr().out
    assert "tiny, forked" in out and "tiny, in-process" in out and "the same answer both ways: yes" in out
    assert (whatif.engine_view, whatif.engine_workloads, whatif.engine_pods, whatif.forked_answer, whatif.play,
            engine_module.Engine.run_pass) == originals
    with pytest.raises(SystemExit, match="fewer than --posted"):
        bench.posted_workloads(10_000)
