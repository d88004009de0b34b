"""benchmarks/bench_topology_page.py, run tiny: each round reads the page and the tree with
what the view keeps and with it dropped, and what was kept equals a view built afresh."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scheduler_state as seeding  # noqa: E402
import bench_topology_page as bench  # noqa: E402

pytestmark = [pytest.mark.services, pytest.mark.django_db]

TINY = seeding.BenchSettings(nodes=200, workloads=600, admitted=100, admit=20, node_changes=10)


def test_a_timed_page_and_tree_kept_and_afresh(capsys) -> None:
    from tasweb.api.state import engine_view_reset

    engine_view_reset()
    info = seeding.seed(TINY, log=lambda _message: None)
    try:
        figures = bench.measure(info.finishing, rounds=2, finish=5)
    finally:
        engine_view_reset()
    assert figures["same_as_fresh"]
    assert len(figures["kept_s"]) == len(figures["afresh_s"]) == len(figures["tree_kept_s"]) == 2
    assert all(seconds > 0 for seconds in figures["kept_s"] + figures["afresh_s"])
    assert sum(figures["admitted"]) > 0  # the passes between the reads changed the usage
    flavor = figures["flavor"]
    # the last reads came from what the view kept: the display's frame and usage, the tree's workloads
    assert {str(("display-frame", flavor)), str(("display-usage", flavor)),
            str(("domain-workloads", flavor))} <= set(figures["kept_in_view"])
    out = capsys.readouterr().out
    assert "the kept display equals one made on a view built afresh: yes" in out
    assert "the tree made with the kept workloads equals one made on a view built afresh: yes" in out
