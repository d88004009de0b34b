"""Topology ungater speed: the 1,024 pods of one admitted workload on a 10,000-node cluster.

    .venv/bin/python benchmarks/bench_ungater.py [--nodes 10000] [--pods 1024] [--repeat 25]

Cluster: 16 nodes a rack, 16 racks a block, each node running one non-TAS pod. The
workload is admitted on one node per rack-slot (1,024 hostname domains of one pod each).
Measured, median of `--repeat` runs of `ungate_pods` over the whole state (indexing every
pod included):

* ranks: every pod gated, each with its Job completion index;
* sub-groups: the same as a JobSet of 8 Jobs x 128 pods (job index x completion index);
* greedy: every pod gated, no pod index label;
* replacement: all but one pod running, the last one replaced and gated, its rank's node
  taken by a survivor (rank order rejected, greedy fallback over the live state).

The budget (issue 4) is 50 ms for each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.assignment import TopologyAssignment
from scheduler.cluster import ClusterState
from scheduler.features import DEFAULT_GATES
from scheduler.model import (
    TOPOLOGY_GATE,
    Admission,
    Condition,
    Node,
    Pod,
    PodSet,
    PodSetAssignment,
    PodSpecInfo,
    TopologyRequest,
    Workload,
)
from scheduler.parse import ParsedObjects
from scheduler.ungater import ungate_pods

BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
BUDGET_MS = 50.0


def cluster_nodes(count: int) -> tuple[list[Node], list[Pod]]:
    nodes, daemons = [], []
    for i in range(count):
        block, rack = i // 256, (i // 16) % 16
        name = f"b{block}-r{rack}-n{i % 16}"
        nodes.append(Node(name, {BLOCK: f"b{block}", RACK: f"r{rack}", HOST: name},
                          {"cpu": 96_000, "memory": 384 << 30, "pods": 110}, ready="True"))
        daemons.append(Pod("kube-system", f"daemon-{i}", node_name=name, phase="Running",
                           spec=PodSpecInfo(requests={"cpu": 1000, "memory": 1 << 30})))
    return nodes, daemons


def admitted_workload(hosts: list[str], request: TopologyRequest) -> Workload:
    count = len(hosts)
    ta = TopologyAssignment.of([HOST], (([h], 1) for h in hosts))
    ps = PodSet("main", count, PodSpecInfo(requests={"cpu": 1000}), topology_request=request)
    psa = PodSetAssignment("main", {"cpu": "tas"}, count, {"cpu": 1000 * count}, ta)
    return Workload("ml", "train", [ps], queue_name="lq", admission=Admission("cq", [psa]),
                    conditions=[Condition("QuotaReserved", "True"), Condition("Admitted", "True")])


def workload_pod(rank: int, labels: dict[str, str], *, host: str | None = None) -> Pod:
    """Pod `rank` of the workload: gated, or running on `host` with the selector the ungater gave it."""
    return Pod("ml", f"train-{rank:05d}", uid=f"uid-{rank}",
               labels={"kueue.x-k8s.io/podset": "main", **labels},
               annotations={"kueue.x-k8s.io/workload": "train"},
               node_name=host or "",
               spec=PodSpecInfo(requests={"cpu": 1000}, node_selector={HOST: host} if host else {}),
               scheduling_gates=() if host else (TOPOLOGY_GATE,),
               phase="Running" if host else "Pending")


def state_of(nodes: list[Node], pods: list[Pod], wl: Workload) -> ClusterState:
    return ClusterState(ParsedObjects(nodes=nodes, pods=pods, workloads=[wl]), DEFAULT_GATES, lambda _msg: None)


def scenarios(node_count: int, pod_count: int) -> dict[str, tuple[ClusterState, int]]:
    """name -> (state, pods the ungater must release)."""
    nodes, daemons = cluster_nodes(node_count)
    step = max(node_count // pod_count, 1)
    hosts = [nodes[i * step].name for i in range(pod_count)]
    ranked = TopologyRequest(required=HOST, pod_index_label=JOB_INDEX)
    jobs = 8
    per_job = pod_count // jobs
    sub_grouped = TopologyRequest(required=HOST, pod_index_label=JOB_INDEX,
                                  sub_group_index_label=JOBSET_JOB_INDEX, sub_group_count=jobs)

    def rank_labels(r: int) -> dict[str, str]:
        return {JOB_INDEX: str(r)}

    def job_labels(r: int) -> dict[str, str]:
        return {JOB_INDEX: str(r % per_job), JOBSET_JOB_INDEX: str(r // per_job)}

    # replacement: the survivor of rank 1 runs on rank 0's node, rank 0 waits at the gate
    survivors = [workload_pod(r, rank_labels(r), host=hosts[0] if r == 1 else hosts[r])
                 for r in range(1, pod_count)]
    return {
        "ranks": (state_of(nodes, daemons + [workload_pod(r, rank_labels(r)) for r in range(pod_count)],
                           admitted_workload(hosts, ranked)), pod_count),
        "sub-groups": (state_of(nodes, daemons + [workload_pod(r, job_labels(r)) for r in range(pod_count)],
                                admitted_workload(hosts, sub_grouped)), pod_count),
        "greedy": (state_of(nodes, daemons + [workload_pod(r, {}) for r in range(pod_count)],
                            admitted_workload(hosts, TopologyRequest(required=HOST))), pod_count),
        "replacement": (state_of(nodes, [*daemons, *survivors, workload_pod(0, rank_labels(0))],
                                 admitted_workload(hosts, ranked)), 1),
    }


def timings_ms(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and fastest wall time of `repeat` calls (the fastest shows the cost without
    interference from other processes)."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pods", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=25)
    args = ap.parse_args()

    ok = True
    print(f"{args.nodes} nodes, {args.nodes} non-TAS pods, one workload of {args.pods} pods; "
          f"median of {args.repeat} runs")
    for name, (state, expected) in scenarios(args.nodes, args.pods).items():
        released = len(ungate_pods(state))
        if released != expected:
            print(f"{name}: ungated {released} pods, expected {expected}")
            return 1
        median, fastest = timings_ms(lambda state=state: ungate_pods(state), args.repeat)
        within = median <= BUDGET_MS
        ok &= within
        print(f"  {name:12} {released:5} pods ungated  median {median:6.2f} ms  (fastest {fastest:6.2f} ms)  "
              f"{'ok' if within else 'OVER BUDGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
