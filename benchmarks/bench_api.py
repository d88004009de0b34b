"""Benchmark of the REST API on a large mirror: 10,000 nodes and 100,000 stored workloads in
a throwaway PostgreSQL database (created, migrated and dropped by this script).

The cluster: one TAS flavor over 10 blocks x 25 racks x 40 nodes (8 GPUs each); a
10,000-pod workload admitted with one pod on every node; 4,000 more admitted workloads of
2 pods; 1,000 pending ones; 95,000 finished ones. Each figure is the median of several
requests through Django's test client (the whole stack: URL routing, authentication,
filters, queries, JSON rendering).

    .venv/bin/python benchmarks/bench_api.py            # the full dataset
    .venv/bin/python benchmarks/bench_api.py --quick    # a smaller one, for a smoke run

The server is DATABASE_URL's (default postgres://postgres@127.0.0.1:5432); the database is
`--database` (default tas_bench_api).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchdb import bench_database  # noqa: E402

RACK = "cloud.example.com/topology-rack"
BLOCK = "cloud.example.com/topology-block"
HOSTNAME = "kubernetes.io/hostname"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
TARGETS_MS = {"workloads page": 50, "topology tree": 300, "assignment": 300, "why-pending": 200}


# ---------------------------------------------------------------- the dataset


def node_object(block: int, rack: int, index: int) -> dict:
    name = f"b{block}-r{rack}-n{index}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-{name}", "labels": {
                "node-group": "tas", BLOCK: f"b{block}", RACK: f"r{rack}", HOSTNAME: name}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2025-05-01T00:00:00Z"}]}}


def workload_object(namespace: str, name: str, count: int, created: datetime, *, priority: int = 0,
                    level: str = RACK) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "uid": f"wl-{namespace}-{name}",
                         "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"queueName": "team", "priority": priority, "podSets": [{
                "name": "main", "count": count, "topologyRequest": {"required": level},
                "template": {"spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]}}}]}}


def admitted(obj: dict, hosts: list[str], encoded: dict, at: datetime) -> dict:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    count = obj["spec"]["podSets"][0]["count"]
    obj["status"] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": stamp},
                       {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                        "lastTransitionTime": stamp}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{
            "name": "main", "count": count,
            "flavors": {"cpu": "tas-gpu", "memory": "tas-gpu", "nvidia.com/gpu": "tas-gpu"},
            "resourceUsage": {"cpu": str(count), "memory": f"{count}Gi", "nvidia.com/gpu": str(count)},
            "topologyAssignment": encoded}]},
    }
    return obj


def finished(obj: dict, at: datetime) -> dict:
    obj["status"] = {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                                     "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}]}
    return obj


def build(*, blocks: int, racks: int, nodes_per_rack: int, workloads: int, log: Callable[[str], None]) -> dict:
    from scheduler.assignment import TopologyAssignment
    from scheduler.codec import encode_assignment
    from tasweb.cluster import models as cluster
    from tasweb.cluster.services import _row_values as row_values
    from tasweb.cluster.services import object_upsert, objects_resync
    from tasweb.scheduling.models import AssignmentDomain, PodSetAssignment, WorkloadEvent

    rng = random.Random(7)
    started = time.perf_counter()
    for obj in (
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas-gpu"},
         "spec": {"nodeLabels": {"node-group": "tas"}, "topologyName": "default"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "tas-gpu", "resources": [
                 {"name": "cpu", "nominalQuota": "1000000"}, {"name": "memory", "nominalQuota": "1000Ti"},
                 {"name": "nvidia.com/gpu", "nominalQuota": "1000000"}]}]}]}},
    ):
        object_upsert(kind=obj["kind"], obj=obj)
    namespaces = [f"ns-{i}" for i in range(20)]
    for namespace in namespaces:
        object_upsert(kind="LocalQueue", obj={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": namespace}, "spec": {"clusterQueue": "cq"}})
    paths = [(b, r, n) for b in range(1, blocks + 1) for r in range(1, racks + 1)
             for n in range(1, nodes_per_rack + 1)]
    objects_resync(kind="Node", objects=[node_object(*p) for p in paths])
    hosts = [f"b{b}-r{r}-n{n}" for b, r, n in paths]
    log(f"{len(hosts)} nodes in {time.perf_counter() - started:.1f} s")

    # the big one: one pod on every node
    big_count = len(hosts)
    big_ta = TopologyAssignment.of([HOSTNAME], [((h,), 1) for h in sorted(hosts)])
    big = admitted(workload_object("ml", "big", big_count, NOW - timedelta(days=2), level=BLOCK),
                   hosts, encode_assignment(big_ta), NOW - timedelta(days=1))
    rows, assignment_of = [], {}
    rows.append(cluster.Workload(uid="wl-ml-big", **row_values("Workload", big)))
    assignment_of["wl-ml-big"] = [(h, 1) for h in sorted(hosts)]
    n_admitted, n_pending = workloads // 25, workloads // 100
    pending_keys = []
    for i in range(workloads - 1):
        namespace = namespaces[i % len(namespaces)]
        created = NOW - timedelta(minutes=workloads - i)
        obj = workload_object(namespace, f"job-{i:06d}", 2, created, priority=rng.choice([0, 100, 1000]))
        if i < n_admitted:
            rack_hosts = hosts[rng.randrange(len(hosts) // nodes_per_rack) * nodes_per_rack:][:nodes_per_rack]
            chosen = sorted(rng.sample(rack_hosts, 2))
            ta = TopologyAssignment.of([HOSTNAME], [((h,), 1) for h in chosen])
            obj = admitted(obj, chosen, encode_assignment(ta), created + timedelta(seconds=30))
            assignment_of[obj["metadata"]["uid"]] = [(h, 1) for h in chosen]
        elif i < n_admitted + n_pending:
            if rng.random() < 0.5:  # half of them can never fit in one rack
                obj["spec"]["podSets"][0]["count"] = nodes_per_rack * 8 + 1
            pending_keys.append((namespace, obj["metadata"]["name"]))
        else:
            obj = finished(obj, created + timedelta(minutes=30))
        rows.append(cluster.Workload(uid=obj["metadata"]["uid"], **row_values("Workload", obj)))
        if len(rows) >= 5000:
            cluster.Workload.objects.bulk_create(rows, batch_size=1000)
            rows = []
    cluster.Workload.objects.bulk_create(rows, batch_size=1000)
    log(f"{workloads} workloads in {time.perf_counter() - started:.1f} s")

    # decoded assignments, one row per domain (what the scheduling app stores on admission)
    ids = dict(cluster.Workload.objects.filter(uid__in=list(assignment_of)).values_list("uid", "id"))
    levels = [BLOCK, RACK, HOSTNAME]
    psas = [PodSetAssignment(workload_id=ids[uid], pod_set="main", flavor="tas-gpu",
                             flavors={"cpu": "tas-gpu", "memory": "tas-gpu", "nvidia.com/gpu": "tas-gpu"},
                             count=sum(c for _, c in doms), levels=[HOSTNAME], topology_levels=levels,
                             encoded=encode_assignment(TopologyAssignment.of([HOSTNAME],
                                                                             [((h,), c) for h, c in doms])))
            for uid, doms in assignment_of.items()]
    PodSetAssignment.objects.bulk_create(psas, batch_size=1000)
    domains = []
    for psa, doms in zip(psas, assignment_of.values(), strict=True):
        for position, (host, count) in enumerate(doms):
            block, rack, _ = host.split("-")
            domains.append(AssignmentDomain(assignment=psa, workload_id=psa.workload_id, flavor="tas-gpu",
                                            position=position, count=count, values=[block, rack, host],
                                            node=host, level_0=block, level_1=rack, level_2=host))
    AssignmentDomain.objects.bulk_create(domains, batch_size=5000)
    WorkloadEvent.objects.bulk_create([
        WorkloadEvent(workload_key=f"ns-{i % 20}/job-{i:06d}", cluster_queue="cq", kind="Admitted",
                      at=NOW - timedelta(minutes=i)) for i in range(20_000)], batch_size=5000)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    log(f"assignments ({len(domains)} domains) and history in {time.perf_counter() - started:.1f} s")
    return {"pending": pending_keys, "nodes": len(hosts), "big_count": big_count}


# ---------------------------------------------------------------- measuring


def measure(client, url: str, runs: int) -> tuple[float, float, int]:
    """(first request ms, median ms of the next `runs`, response bytes)."""
    times = []
    size = 0
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
        size = len(response.content)
    return times[0], statistics.median(times[1:]), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 nodes and 10,000 workloads")
    parser.add_argument("--runs", type=int, default=15, help="requests per figure (after the first)")
    parser.add_argument("--database", default="tas_bench_api")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    shape = dict(blocks=10, racks=25, nodes_per_rack=40, workloads=100_000)
    if args.quick:
        shape = dict(blocks=5, racks=10, nodes_per_rack=20, workloads=10_000)

    with bench_database(args.database, keep=args.keep):
        from django.test import Client

        from tasweb.api.state import engine_view

        info = build(**shape, log=lambda m: print(f"  built {m}", flush=True))
        client = Client(HTTP_HOST="localhost")
        results: list[tuple[str, str, float, float, int]] = []

        def record(label: str, target: str, url: str) -> None:
            first, median, size = measure(client, url, args.runs)
            results.append((label, target, first, median, size))
            print(f"  {label:<58} first {first:8.1f} ms   median {median:7.1f} ms   {size / 1024:8.0f} KiB",
                  flush=True)

        t0 = time.perf_counter()
        engine_view()
        print(f"engine view of the mirror built in {time.perf_counter() - t0:.1f} s (once per mirror version)")
        print("figures (median of the requests after the first):")
        record("workloads page: namespace + status + ordering", "workloads page",
               "/api/v1/workloads/?namespace=ns-3&status=Finished&ordering=-created&page_size=50")
        record("workloads page: status + cluster_queue, queue order", "workloads page",
               "/api/v1/workloads/?status=Admitted&cluster_queue=cq&ordering=-priority,created&page_size=50")
        record("workloads page: domain b3/r7 (everything on the rack)", "workloads page",
               "/api/v1/workloads/?domain=b3/r7&page_size=50")
        record("workloads page: rack r7 in any block + search", "workloads page",
               f"/api/v1/workloads/?level.{RACK}=r7&search=job-00&page_size=50")
        record("workloads page: no filter", "workloads page", "/api/v1/workloads/?page_size=50")
        record(f"topology tree of the {info['nodes']}-node flavor", "topology tree", "/api/v1/flavors/tas-gpu/tree/")
        record(f"assignment of the {info['big_count']}-pod workload, decoded", "assignment",
               "/api/v1/workloads/ml/big/assignment/")
        record(f"the {info['big_count']}-pod workload in full", "assignment", "/api/v1/workloads/ml/big/")
        # why-pending: a different workload each time, so no answer is reused
        times = []
        for namespace, name in info["pending"][: args.runs + 1]:
            t1 = time.perf_counter()
            response = client.get(f"/api/v1/workloads/{namespace}/{name}/why-pending/")
            times.append((time.perf_counter() - t1) * 1000)
            assert response.status_code == 200 and response.json()["pending"], response.content[:300]
        results.append(("why-pending (a different pending workload each time)", "why-pending", times[0],
                        statistics.median(times[1:]), 0))
        print(f"  {'why-pending (a different pending workload each time)':<58} first {times[0]:8.1f} ms   "
              f"median {statistics.median(times[1:]):7.1f} ms")
        record("visibility: ClusterQueue pendingworkloads (limit 50)", "workloads page",
               "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads?limit=50")
        record("history page: kind + since", "workloads page",
               f"/api/v1/history/?kind=Admitted&since={(NOW - timedelta(days=3)).isoformat()}&page_size=50"
               .replace("+", "%2B"))
        print("against the targets (median):")
        worst: dict[str, float] = {}
        for _, target, _, median, _ in results:
            worst[target] = max(worst.get(target, 0.0), median)
        for target, limit in TARGETS_MS.items():
            verdict = "ok" if worst[target] <= limit else "OVER"
            print(f"  {target:<16} worst median {worst[target]:7.1f} ms   target {limit} ms   {verdict}")
        print(json.dumps({"results": [{"figure": label, "first_ms": round(first, 1), "median_ms": round(median, 1)}
                                      for label, _, first, median, _ in results]}))


if __name__ == "__main__":
    main()
