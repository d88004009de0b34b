"""Snapshot and placement speed on a generated cluster (10,000 nodes unless told otherwise).

    .venv/bin/python benchmarks/bench_placement.py [--nodes 10000] [--repeat 30]

Cluster: 16 nodes a rack, 16 racks a block; each node 96 CPU, 384Gi, 110 pods, with one
running non-TAS pod of 1 CPU / 1Gi (95 CPU, 383Gi free). Measured: building the flavor
snapshot (topology tree, capacity, non-TAS usage) from parsed objects, and the median time
of each placement (`find_topology_assignment` only, on the snapshot built once), compared
with a plain vectorised scan of the nodes' free capacity (how many pods fit on every node:
the least any placement must do).

Each placement is timed twice: with phase 1 (how many pods fit in every domain) counted from
scratch, as on a snapshot first seen, and right after one node's usage changed, as between
two admissions of a scheduling pass, where the counts the snapshot keeps for the request's
shape are patched on that node and its ancestors only (the change itself is in the time).

The unconstrained rows place 1,000 pods with LeastFreeCapacity (TASProfileMixed, on by
default; the last row with it off, so BestFit): 4 CPU pods fit 23 a node (44 nodes used);
24 CPU / 96Gi pods fit 3 a node, so the 1,000 pods spread over 334 nodes. `a node` is how
many pods fit on a typical node, `nodes` how many nodes the assignment uses.

    .venv/bin/python benchmarks/bench_placement.py --nodes 100000 --repeat 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.features import FeatureGates
from scheduler.model import PodSet, PodSpecInfo, ResourceFlavor, Topology, TopologyRequest
from scheduler.parse import Where, parse_node, parse_pod
from scheduler.placement import TASPodSetRequest
from scheduler.quantity import resource_value
from scheduler.snapshot import build_flavor_snapshot
from scheduler.topology_assignment import find_topology_assignment

BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"
TARGET_MS = {10_000: 20.0}  # required and preferred placements
UNCONSTRAINED_TARGET_MS = {10_000: 5.0, 100_000: 30.0}


def generate(nodes: int) -> tuple[list[dict], list[dict]]:
    node_objs, pod_objs = [], []
    for i in range(nodes):
        block, rack = i // 256, (i // 16) % 16
        name = f"b{block}-r{rack}-n{i % 16}"
        node_objs.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {BLOCK: f"b{block}", RACK: f"r{rack}", HOST: name}},
            "status": {"allocatable": {"cpu": "96", "memory": "384Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
        pod_objs.append({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"daemon-{i}", "namespace": "kube-system"},
            "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {
                "cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"},
        })
    return node_objs, pod_objs


def request(name: str, count: int, cpu: str, memory: str, tr: TopologyRequest) -> TASPodSetRequest:
    requests = {"cpu": resource_value("cpu", cpu), "memory": resource_value("memory", memory)}
    ps = PodSet(name, count, PodSpecInfo(requests=requests), topology_request=tr)
    return TASPodSetRequest(pod_set=ps, count=count, single_pod_requests=requests, flavor="tas")


def timed(fn, repeat: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()

    node_objs, pod_objs = generate(args.nodes)
    t0 = time.perf_counter()
    nodes = [parse_node(o, Where("Node")) for o in node_objs]
    pods = [parse_pod(o, Where("Pod")) for o in pod_objs]
    parse_s = time.perf_counter() - t0

    topology = Topology("default", (BLOCK, RACK, HOST))
    flavor = ResourceFlavor("tas", topology_name="default")

    def build():
        snap = build_flavor_snapshot(flavor, topology, nodes)
        snap.add_non_tas_usages((pod.node_name, pod.spec.requests) for pod in pods)
        return snap

    snapshot_s, snap = timed(build, max(3, args.repeat // 10))
    gates, best_fit = FeatureGates(), FeatureGates({"TASProfileMixed": False})
    target, unconstrained_target = TARGET_MS.get(args.nodes), UNCONSTRAINED_TARGET_MS.get(args.nodes)
    spread = request("spread", 1000, "24", "96Gi", TopologyRequest(unconstrained=True))
    cases = [
        ("required rack, 16 pods x 90 CPU", request("rack", 16, "90", "300Gi", TopologyRequest(required=RACK)),
         gates, target),
        ("preferred block, 256 pods x 90 CPU", request("block", 256, "90", "300Gi", TopologyRequest(preferred=BLOCK)),
         gates, target),
        ("unconstrained, 1000 pods x 4 CPU", request("free", 1000, "4", "16Gi", TopologyRequest(unconstrained=True)),
         gates, unconstrained_target),
        ("unconstrained, 1000 pods x 24 CPU", spread, gates, unconstrained_target),
        ("  the same, BestFit (TASProfileMixed off)", spread, best_fit, None),
    ]

    # the lower bound: how many pods of each size fit on every node, vectorised
    remaining = snap.remaining()

    def fit_per_node(req: TASPodSetRequest) -> np.ndarray:
        row = snap.vector(req.single_pod_requests, pods=1)
        cols = np.flatnonzero(row)
        return (remaining[:, cols] // row[cols]).min(axis=1)

    scan_s, _ = timed(lambda: fit_per_node(cases[0][1]).sum(), args.repeat)

    print(f"cluster: {len(nodes)} nodes, {snap.tree.leaf_count} leaves, "
          f"{len(snap.tree.levels[0])} blocks, {len(snap.tree.levels[1])} racks")
    print(f"parse objects ({len(nodes)} nodes + pods):  {parse_s * 1000:8.1f} ms (not part of the snapshot)")
    print(f"build snapshot:                       {snapshot_s * 1000:8.1f} ms   (target <= 200 ms at 10k nodes)")
    print(f"vectorised free-capacity scan:        {scan_s * 1000:8.3f} ms   (lower bound)")
    print()
    print(f"placement: find_topology_assignment on the built snapshot, median of {args.repeat} runs (ms)")
    print(f"{'placement':40} {'scratch':>8} {'x scan':>7} {'changed':>8} {'a node':>7} {'nodes':>6} {'target':>8}")
    leaf_values = snap.tree.leaves.values
    changes = iter(range(10**9))

    def from_scratch(req: TASPodSetRequest, g: FeatureGates) -> tuple:
        snap.phase1_cache.clear()
        return find_topology_assignment(snap, req, None, gates=g)

    def after_a_change(req: TASPodSetRequest, g: FeatureGates) -> tuple:
        i = next(changes)  # one node gains (then loses) a pod's usage
        snap.add_tas_usage(leaf_values[(i // 2) % len(leaf_values)], {"cpu": 1000}, 1, sign=1 - 2 * (i % 2))
        return find_topology_assignment(snap, req, None, gates=g)

    for label, req, case_gates, limit in cases:
        seconds, (assignments, reason) = timed(lambda req=req, g=case_gates: from_scratch(req, g), args.repeat)
        if reason:
            raise SystemExit(f"{label}: did not fit: {reason}")
        changed_s, _ = timed(lambda req=req, g=case_gates: after_a_change(req, g), args.repeat)
        used = len(assignments[req.name].domains)
        per_node = int(np.median(fit_per_node(req)))
        bound = f"<= {limit:g}" if limit is not None else "-"
        print(f"{label:40} {seconds * 1000:8.2f} {seconds / scan_s:7.1f} {changed_s * 1000:8.2f} {per_node:7d} "
              f"{used:6d} {bound:>8}")

if __name__ == "__main__":
    main()
