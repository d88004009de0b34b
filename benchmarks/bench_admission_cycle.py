"""One admission cycle of the service over a large mirrored cluster, results stored.

    .venv/bin/python benchmarks/bench_admission_cycle.py [--nodes 10000] [--workloads 500]
                                                         [--database tas_bench] [--keep] [--profile]

Cluster (like bench_placement.py): 16 nodes a rack, 16 racks a block; each node 96 CPU,
384Gi, 110 pods, with one running non-TAS pod of 1 CPU / 1Gi. A Topology (block, rack,
hostname), a TAS ResourceFlavor, a ClusterQueue with quota for everything, a LocalQueue,
and `--workloads` pending Workloads of mixed sizes (1 to 64 pods of 2 to 90 CPU) asking for
required rack or block, preferred rack or block, or unconstrained placement; together
they fit. Everything is mirrored through the cluster services into a fresh database
(DATABASE_URL's server, default the local test server; see benchdb.py), then one
`scheduling_pass_run` must admit every workload and store the results (encoded and
decoded assignments, history) in its one transaction -- target <= 5 s.

Printed: the pass's phases (building the scheduler's engine state from the mirror, the
engine's pass, writing its results). `--profile` adds a cProfile of the pass, by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import Phases, bench_database

BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"
KUEUE = "kueue.x-k8s.io/v1beta2"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
TARGET_SECONDS = 5.0


def uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-cycle/{kind}/{name}"))


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def nodes_and_pods(count: int) -> tuple[list[dict], list[dict]]:
    nodes, pods = [], []
    for i in range(count):
        block, rack = i // 256, (i // 16) % 16
        name = f"b{block}-r{rack}-n{i % 16}"
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid("Node", name), "resourceVersion": str(10 + i),
                         "labels": {BLOCK: f"b{block}", RACK: f"r{rack}", HOST: name, "node-group": "tas"}},
            "status": {"allocatable": {"cpu": "96", "memory": "384Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": stamp(NOW - timedelta(days=3))}]},
        })
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"daemon-{i}", "namespace": "kube-system", "uid": uid("Pod", f"daemon-{i}"),
                         "resourceVersion": str(100_000 + i)},
            "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {
                "cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"},
        })
    return nodes, pods


def queues() -> list[tuple[str, dict]]:
    return [
        ("Topology", {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "default"},
                      "spec": {"levels": [{"nodeLabel": level} for level in (BLOCK, RACK, HOST)]}}),
        ("ResourceFlavor", {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
                            "spec": {"nodeLabels": {"node-group": "tas"}, "topologyName": "default"}}),
        ("ClusterQueue", {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "tas", "resources": [
                {"name": "cpu", "nominalQuota": "10000000"}, {"name": "memory", "nominalQuota": "100000Ti"}]}]}]}}),
        ("LocalQueue", {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ml"},
                        "spec": {"clusterQueue": "cq"}}),
    ]


# (weight, topology request, pods, CPU a pod): each fits its domain with room to spare
# (a rack: 16 nodes x 95 free CPU; a block: 16 racks).
SHAPES = [
    (4, {"required": RACK}, (4, 8, 16), ("8", "16", "45", "90")),
    (2, {"required": BLOCK}, (16, 32, 64), ("16", "45")),
    (3, {"preferred": RACK}, (8, 16, 32), ("8", "16", "90")),
    (2, {"preferred": BLOCK}, (32, 64), ("16", "45")),
    (3, {"unconstrained": True}, (1, 2, 4, 8, 16), ("2", "4", "8")),
]


def workloads(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    shapes = [shape for shape in SHAPES for _ in range(shape[0])]
    out = []
    for i in range(count):
        _, request, sizes, cpus = rng.choice(shapes)
        pods, cpu = rng.choice(sizes), rng.choice(cpus)
        memory = f"{int(float(cpu) * 3)}Gi"
        name = f"job-{i:04d}"
        out.append({
            "apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": "ml", "uid": uid("Workload", name), "resourceVersion": str(
                200_000 + i), "creationTimestamp": stamp(NOW - timedelta(seconds=count - i))},
            "spec": {"queueName": "lq", "priority": rng.choice((0, 0, 0, 100)), "podSets": [{
                "name": "workers", "count": pods, "topologyRequest": dict(request),
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "registry.example.com/ml/trainer:1.4",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}},
            }]},
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--workloads", type=int, default=500)
    ap.add_argument("--database", default="tas_bench")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the pass")
    args = ap.parse_args()

    node_objs, pod_objs = nodes_and_pods(args.nodes)
    workload_objs = workloads(args.workloads)
    pods_wanted = sum(w["spec"]["podSets"][0]["count"] for w in workload_objs)

    with bench_database(args.database, keep=args.keep):
        from tasweb.cluster.models import Workload, WorkloadStatus
        from tasweb.cluster.services import object_upsert, objects_resync
        from tasweb.scheduling import services
        from tasweb.scheduling.models import AssignmentDomain, EventKind, PodSetAssignment, WorkloadEvent

        phases = Phases()
        print(f"mirror {len(node_objs)} nodes, {len(pod_objs)} pods, {len(workload_objs)} workloads "
              f"({pods_wanted} pods):")
        with phases.phase("mirror the cluster (not part of the cycle)"):
            for kind, obj in queues():
                object_upsert(kind=kind, obj=obj)
            objects_resync(kind="Node", objects=node_objs)
            objects_resync(kind="Pod", objects=pod_objs)
            objects_resync(kind="Workload", objects=workload_objs)

        # The pass's phases, timed around the calls it makes (wall clock, and this process's CPU).
        timings: dict[str, float] = {}
        cpu: dict[str, float] = {}

        def timed(name, fn):
            def wrapper(*a, **kw):
                started, started_cpu = time.perf_counter(), time.process_time()
                try:
                    return fn(*a, **kw)
                finally:
                    timings[name] = time.perf_counter() - started
                    cpu[name] = time.process_time() - started_cpu
            return wrapper

        # the scheduler process's first pass: it builds its engine state from the mirror
        services.runtime_for_pass = timed("read", services.runtime_for_pass)
        services.engine_pass_run = timed("engine", services.engine_pass_run)
        services.PassRecorder.record = timed("write", services.PassRecorder.record)

        print("one scheduling pass:")
        profile = cProfile.Profile() if args.profile else None
        started, started_cpu = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        record = services.scheduling_pass_run(now=NOW, trigger="manual")
        if profile:
            profile.disable()
        total, total_cpu = time.perf_counter() - started, time.process_time() - started_cpu
        timings["rest"] = total - timings["read"] - timings["engine"] - timings["write"]
        cpu["rest"] = total_cpu - cpu["read"] - cpu["engine"] - cpu["write"]
        for key, label in (("read", "build the engine state from the mirror (runtime_for_pass)"),
                           ("engine", "engine pass (engine_pass_run)"),
                           ("write", "write results (PassRecorder.record)"),
                           ("rest", "the pass record, commit")):
            print(f"  {label:58} {timings[key]:8.2f} s  (client CPU {cpu[key]:6.2f} s)")
        print(f"  {'scheduling_pass_run, in all':58} {total:8.2f} s  (client CPU {total_cpu:6.2f} s)")

        admitted = Workload.objects.filter(status__in=[WorkloadStatus.ADMITTED, WorkloadStatus.QUOTA_RESERVED])
        print()
        print(f"admitted {record.admitted} of {len(workload_objs)} workloads ({record.pending} pending); stored: "
              f"{PodSetAssignment.objects.count()} pod-set assignments, {AssignmentDomain.objects.count()} "
              f"decoded domains, {WorkloadEvent.objects.filter(kind=EventKind.ADMITTED).count()} Admitted events")
        assert record.admitted == admitted.count() == len(workload_objs), "not every workload was admitted"
        print(f"one admission cycle, {len(workload_objs)} workloads on {len(node_objs)} nodes: {total:.2f} s "
              f"(target <= {TARGET_SECONDS:.0f} s: {'met' if total <= TARGET_SECONDS else 'MISSED'})")
        if profile:
            print()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
