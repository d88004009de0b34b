"""benchmarks/bench_estimate_service.py: its seeding and its forked estimate, run tiny.

No timing is asserted (the machine is shared); what must hold at any size: the service's own
passes leave the asked-for number of workloads waiting, the kept predictions give the
calibration its outcomes, and the forked estimate stores a prediction with a time for every
waiting workload, its range calibrated on those outcomes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_estimate_service as bench  # noqa: E402

from scheduler.eta import can_fork  # noqa: E402

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
def test_seed_and_a_forked_estimate(settings) -> None:
    from tasweb.scheduling import estimates
    from tasweb.scheduling.models import PredictionSnapshot

    settings.TAS_CLUSTER_SOURCE = "simulator"
    settings.TAS_ETA_RANGE = "chain"
    settings.TAS_ETA_FORK = True
    held = bench.seed_cluster(1_000, 20, seed=1)
    assert held["nodes"] == 1_000 and held["pending"] >= 20
    bench.seed_outcomes(3_000, 100, seed=1)
    assert PredictionSnapshot.objects.count() == 3_000
    calibration = estimates.calibration_read()
    assert calibration is not None and calibration.outcomes == 100

    seconds = bench.forked_estimate_seconds()
    assert seconds > 0
    rows = list(estimates.WorkloadPrediction.objects.all())
    assert len(rows) == held["pending"]
    assert all(r.start is not None for r in rows)
    assert {r.calibration["outcomes"] for r in rows} <= {b.outcomes for b in calibration.bands}
    assert all(r.calibration["coverage"] == calibration.coverage for r in rows)
