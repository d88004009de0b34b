"""Inputs of the Kueue performance-test replay, written by the tests themselves: a generator
file of the shape of Kueue's TAS performance test (1 block x 10 racks x 64 nodes, 5 cohorts x 6
ClusterQueues, nine workload classes, 15,000 workloads) and a rangespec file with the comment
format Kueue's carries its means in. The project's benchmarks read Kueue's own files beside
the checkout; the tests need nothing outside the project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"

# class, count, creation interval (ms), pods, cpu, priority, runtime (ms), constraint, slice size
CLASSES = [
    ("small-required-rack", 120, 100, 2, "500m", 50, 200, "required", 0),
    ("small-preferred-rack", 120, 100, 2, "500m", 50, 200, "preferred", 0),
    ("small-balanced-rack", 110, 100, 2, "500m", 50, 200, "balanced", 1),
    ("medium-required-rack", 34, 500, 4, "1250m", 100, 500, "required", 0),
    ("medium-preferred-rack", 33, 500, 4, "1250m", 100, 500, "preferred", 0),
    ("medium-balanced-rack", 33, 500, 4, "1250m", 100, 500, "balanced", 2),
    ("large-required-rack", 17, 1200, 8, "2500m", 200, 1000, "required", 0),
    ("large-preferred-rack", 17, 1200, 8, "2500m", 200, 1000, "preferred", 0),
    ("large-balanced-rack", 16, 1200, 8, "2500m", 200, 1000, "balanced", 4),
]
# Kueue's published means (rangespec.yaml comments): wall, usage, per class
WALL_MS = 401_472
USAGE_PCT = 62.41
MEANS_MS = {"large-balanced-rack": 37_862, "large-preferred-rack": 39_573, "large-required-rack": 39_625,
            "medium-balanced-rack": 106_303, "medium-preferred-rack": 106_324, "medium-required-rack": 107_071,
            "small-balanced-rack": 237_846, "small-preferred-rack": 246_090, "small-required-rack": 246_755}


def kueue_shaped_generator() -> dict[str, Any]:
    sets = []
    for name, count, interval, pods, cpu, priority, runtime, constraint, slice_size in CLASSES:
        workload = {"className": name, "runtimeMs": runtime, "priority": priority, "request": cpu,
                    "podCount": pods, "tasConstraint": constraint, "tasLevel": RACK}
        if slice_size:
            workload["sliceSize"] = slice_size
        sets.append({"count": count, "creationIntervalMs": interval, "workloads": [workload]})
    return {
        "topology": {"name": "default-topology", "levels": [
            {"name": "block", "count": 1, "nodeLabel": BLOCK},
            {"name": "rack", "count": 10, "nodeLabel": RACK},
            {"name": "node", "count": 64, "nodeLabel": HOST, "capacity": {"cpu": "96", "memory": "256Gi"}}]},
        "resourceFlavor": {"name": "tas-flavor", "nodeLabel": "tas-node-group", "topologyName": "default-topology"},
        "cohorts": [{"className": "cohort", "count": 5, "queuesSets": [{
            "className": "cq", "count": 6, "nominalQuota": "20", "borrowingLimit": "100",
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority", "workloadsSets": sets}]}],
    }


def rangespec_text() -> str:
    lines = ["cmd:", f"  maxWallMs: 482_000       # {WALL_MS} / 5737 / 1.43%", "",
             "clusterQueueClassesMinUsage:", f"  cq:  57.0          # {USAGE_PCT} / 0.30 / 0.48%", "",
             "wlClassesMaxAvgTimeToAdmissionMs:"]
    lines += [f"  {name}:    {mean * 12 // 10}        # {mean} / 1573 / 4.15%" for name, mean in MEANS_MS.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def kueue_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(generator.yaml, rangespec.yaml) of the shape of Kueue's TAS performance test."""
    folder = tmp_path_factory.mktemp("kueue-perf-tas")
    generator = folder / "generator.yaml"
    generator.write_text(yaml.safe_dump(kueue_shaped_generator(), sort_keys=False))
    rangespec = folder / "rangespec.yaml"
    rangespec.write_text(rangespec_text())
    return generator, rangespec
