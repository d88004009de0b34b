"""The README's demo cluster: up to date with its generator, and shaped as the demo needs."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "cluster.yaml"
LEVELS = ["cloud.example.com/topology-block", "cloud.example.com/topology-rack", "kubernetes.io/hostname"]


def load() -> list[dict]:
    with CLUSTER.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def test_checked_in_file_matches_its_generator():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "generate_cluster.py"), "--check"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_cluster_has_the_advertised_shape():
    objects = load()
    kinds = Counter(obj["kind"] for obj in objects)
    assert kinds["Node"] == 64
    assert kinds["Topology"] == kinds["ResourceFlavor"] == kinds["ClusterQueue"] == kinds["LocalQueue"] == 1
    assert 6 <= kinds["Workload"] <= 10

    topology = next(obj for obj in objects if obj["kind"] == "Topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == LEVELS

    nodes = [obj for obj in objects if obj["kind"] == "Node"]
    assert len({n["metadata"]["name"] for n in nodes}) == 64
    for n in nodes:
        assert set(LEVELS) <= set(n["metadata"]["labels"]), n["metadata"]["name"]
    not_ready = [n for n in nodes if n["status"]["conditions"][0]["status"] != "True"]
    tainted = [n for n in nodes if n["spec"].get("taints")]
    assert len(not_ready) == 1 and len(tainted) == 1


def test_workloads_cover_every_kind_of_topology_request():
    workloads = [obj for obj in load() if obj["kind"] == "Workload"]
    assert {w["apiVersion"] for w in workloads} == {"kueue.x-k8s.io/v1beta2"}
    assert len({w["spec"]["priority"] for w in workloads}) == len(workloads)
    assert len({w["metadata"]["creationTimestamp"] for w in workloads}) == len(workloads)

    requests = [ps.get("topologyRequest") for w in workloads for ps in w["spec"]["podSets"]]
    kinds = {next(iter(r)) if r else None for r in requests}
    assert {"required", "preferred", "unconstrained", None} <= kinds
    assert any(len(w["spec"]["podSets"]) > 1 for w in workloads)
