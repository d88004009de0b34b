"""The scheduler process's long-lived engine state at scale: built once, then kept current by
the mirror's change log.

    .venv/bin/python benchmarks/bench_scheduler_state.py [--nodes 50000] [--workloads 100000]
                                                         [--admitted 30000] [--admit 1000]
                                                         [--node-changes 100] [--running-pods]
                                                         [--database tas_bench_state] [--keep]
                                                         [--json FILE] [--profile] [--profile-build]
                                                         [--profile-nodes]
                                                         [--pstats PREFIX] [--verify]
                                                         [--seeded NAME]

Against a fresh database (DATABASE_URL's server, default the local test server; see
benchdb.py; with `--seeded NAME`, a copy of the database seeded by an earlier run with the
same settings and seeding code, kept as NAME, which saves the minute of seeding):

* seed (in a child process, so that its memory is not the scheduler's): the simulator's
  cluster (`simulator_seed`: 40 nodes a rack, 50 racks a block, 8 GPUs a node, a daemon on
  every node, an inference server holding 4 GPUs on every 20th node, the TAS flavor
  `tas-gpu`, ClusterQueue `cluster-queue`, LocalQueues), then `--workloads` Workloads in
  bulk through the simulator's ClusterWriter (the mirror's own row builder): `--admitted`
  of them admitted, holding quota with v1beta2 TopologyAssignments on nodes with room for
  them (8 GPUs a node, less the inference servers), the rest pending. Seven job shapes
  (required / preferred / unconstrained, at host, rack or block level, one with two
  PodSets); admitted ones at priority 500 or 1000, pending ones at 100 or 500, so that no
  pending workload can preempt (the ClusterQueue preempts LowerPriority within itself).
  The ClusterQueue's GPU quota is exactly what the admitted workloads hold; `--admit` of
  the admitted ones have the shapes of the first `--admit` pending ones in queue order, so
  once they finish, the freed quota admits exactly those. With `--running-pods` every
  admitted workload also has its pods bound and Running on its nodes.
* measure (this process), each pass a `scheduling_pass_run(now=...)` as the worker runs it:
  1. the first pass, which builds the state from PostgreSQL (`runtime_build`) -- target
     <= 10 s for the build; the process's memory after it -- target < 2 GB;
  2. a pass applying the first pass's own writes, then a pass with nothing changed;
  3. `--admit` running workloads finish (their rows updated through the mirror services,
     so the change log notes them); the measured pass applies that, admits `--admit`
     pending workloads and writes everything -- target <= 1 s;
  4. the pass after it (its own writes come back through the change log), a quiet pass;
  5. `--node-changes` nodes go NotReady, a pass; they come back Ready, a pass;
  6. the process's memory after the passes -- target < 2 GB;
  7. the scheduler restarts: its state is dropped and the next pass builds it again from the
     database, which must find nothing to write (the database is the record), then a pass.

Every pass is split into: applying changes (`runtime_for_pass`: reading the change log,
reading the changed rows, applying them to the engine -- or building the state), the
engine pass (`engine_pass_run`), writing (`PassRecorder.record`) and the rest (the pass
record, the commit); the time the interpreter's garbage collector ran within each is shown
too. `--profile` prints a cProfile of the measured pass (top 30 by cumulative time),
`--profile-build` one of the first pass, `--profile-nodes` one of the pass after nodes go
NotReady; `--verify` compares the warm state, after the
passes, with one built afresh from the database.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import gc
import hashlib
import io
import json
import math
import multiprocessing
import os
import pstats
import random
import resource
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import bench_database, python_speed_probe, seeded_copy_keep, seeded_copy_read

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
BUILD_TARGET_SECONDS = 10.0
PASS_TARGET_SECONDS = 1.0
RSS_TARGET_MIB = 2048.0
NODES_PER_RACK = 40
RACKS_PER_BLOCK = 50
GPUS_PER_NODE = 8
PASS_STEP = timedelta(seconds=10)  # simulated time between passes

# (job, owner kind, share, PodSets as (name, pods, GPUs a pod, mode, level)); GPUs a job:
# 16, 16, 32, 8, 4, 4, 8 -- about 10 on average, so 30,000 admitted jobs fill ~80 % of
# 50,000 nodes' GPUs.
SHAPES: tuple[tuple[str, str, float, tuple[tuple[str, int, int, str, str], ...]], ...] = (
    ("bert-finetune", "Job", 0.20, (("main", 2, 8, "required", "rack"),)),
    ("llm-finetune", "Job", 0.10, (("main", 4, 4, "required", "block"),)),
    ("llm-pretrain", "Job", 0.05, (("main", 4, 8, "preferred", "block"),)),
    ("embedding-train", "Job", 0.20, (("main", 2, 4, "preferred", "rack"),)),
    ("eval-suite", "Job", 0.20, (("main", 4, 1, "required", "host"),)),
    ("hpo-sweep", "Job", 0.15, (("main", 4, 1, "unconstrained", ""),)),
    ("rl-actor-learner", "JobSet", 0.10, (("learner", 1, 4, "required", "host"),
                                          ("actors", 4, 1, "preferred", "rack"))),
)
# (priority class, value, share)
ADMITTED_PRIORITIES = (("batch", 500, 0.7), ("production", 1000, 0.3))
PENDING_PRIORITIES = (("batch-low", 100, 0.6), ("batch", 500, 0.4))


# ---------------------------------------------------------------- settings of a run


@dataclass(frozen=True)
class BenchSettings:
    nodes: int = 50_000
    workloads: int = 100_000
    admitted: int = 30_000
    admit: int = 1_000
    node_changes: int = 100
    running_pods: bool = False
    seed: int = 7

    @property
    def pending(self) -> int:
        return self.workloads - self.admitted

    def simulator_shape(self) -> dict[str, int]:
        """blocks x racks_per_block x nodes_per_rack covering `nodes` (rounded up to whole racks)."""
        per_rack = min(NODES_PER_RACK, self.nodes)
        racks = math.ceil(self.nodes / per_rack)
        per_block = min(RACKS_PER_BLOCK, racks)
        return {"blocks": math.ceil(racks / per_block), "racks_per_block": per_block, "nodes_per_rack": per_rack,
                "gpus_per_node": GPUS_PER_NODE}

    def check(self) -> BenchSettings:
        if not 0 <= self.admit <= self.admitted <= self.workloads:
            raise SystemExit("need 0 <= --admit <= --admitted <= --workloads")
        if self.admit > self.pending:
            raise SystemExit("--admit is more than the pending workloads (--workloads - --admitted)")
        return self


@dataclass
class SeedInfo:
    """What the measuring needs from the seeding, and what it seeded."""

    finishing: list[tuple[str, str]]  # (namespace, name) of the running workloads that finish
    node_changes: list[str]  # nodes that go NotReady and come back
    expected_admitted: int
    gpu_quota: int
    counts: dict[str, int] = field(default_factory=dict)
    mix: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> SeedInfo:
        """From `asdict` of one, sent between processes or kept as JSON."""
        return cls(**{**payload, "finishing": [tuple(k) for k in payload["finishing"]]})


# ---------------------------------------------------------------- memory


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------- the workloads


def _draw_shape(rng: random.Random) -> int:
    pick = rng.random() * sum(s[2] for s in SHAPES)
    for i, shape in enumerate(SHAPES):
        pick -= shape[2]
        if pick < 0:
            return i
    return len(SHAPES) - 1


def _draw_priority(rng: random.Random, table: tuple[tuple[str, int, float], ...]) -> tuple[str, int]:
    pick = rng.random() * sum(share for _, _, share in table)
    for name, value, share in table:
        pick -= share
        if pick < 0:
            return name, value
    return table[-1][0], table[-1][1]


def shape_gpus(index: int) -> int:
    return sum(count * gpus for _, count, gpus, _, _ in SHAPES[index][3])


def job_shape(index: int):
    """The simulator's JobShape of one of SHAPES."""
    from scheduler.assignment import HOSTNAME_LABEL
    from tasweb.simulator import objects as k8s

    levels = {"block": k8s.BLOCK_LABEL, "rack": k8s.RACK_LABEL, "host": HOSTNAME_LABEL, "": ""}
    base, owner, _, pod_sets = SHAPES[index]
    return k8s.JobShape(base, owner, tuple(k8s.PodSetShape(name, count, gpus, mode, levels[level])
                                           for name, count, gpus, mode, level in pod_sets))


@dataclass
class Planned:
    shape: int
    priority_class: str
    priority: int
    created: datetime
    finishes: bool = False


def plan_workloads(settings: BenchSettings) -> tuple[list[Planned], list[Planned]]:
    """(admitted, pending): shapes, priorities and creation times. The first `admit` pending
    ones in queue order (priority, then creation) have their twins among the admitted ones,
    marked `finishes`."""
    rng = random.Random(f"{settings.seed}:plan")
    pending = []
    for i in range(settings.pending):
        name, value = _draw_priority(rng, PENDING_PRIORITIES)
        pending.append(Planned(_draw_shape(rng), name, value,
                               NOW - timedelta(seconds=2 * (settings.pending - i) + 60)))
    first = sorted(pending, key=lambda p: (-p.priority, p.created))[:settings.admit]
    admitted = []
    for p in first:
        name, value = _draw_priority(rng, ADMITTED_PRIORITIES)
        admitted.append(Planned(p.shape, name, value, NOW, finishes=True))
    for _ in range(settings.admitted - settings.admit):
        name, value = _draw_priority(rng, ADMITTED_PRIORITIES)
        admitted.append(Planned(_draw_shape(rng), name, value, NOW))
    rng.shuffle(admitted)
    start = NOW - timedelta(hours=8)
    for i, a in enumerate(admitted):
        a.created = start + timedelta(seconds=i * 6 * 3600 // max(1, len(admitted)))
    return admitted, pending


class Placer:
    """Places admitted workloads on the seeded nodes, rack after rack: every PodSet within
    one rack (which satisfies every required or preferred level), a host-level PodSet on one
    node, never more GPUs on a node than it has free."""

    def __init__(self, names: list[str], free: dict[str, int], per_rack: int) -> None:
        self.racks = [names[i:i + per_rack] for i in range(0, len(names), per_rack)]
        self.free = free
        self.rack = 0

    def place(self, pod_sets: tuple[tuple[str, int, int, str, str], ...]) -> list[list[tuple[str, int]]]:
        for _ in range(len(self.racks)):
            placed = self._try(self.racks[self.rack], pod_sets)
            if placed is not None:
                return placed
            self.rack = (self.rack + 1) % len(self.racks)
        raise SystemExit("the admitted workloads do not fit on the nodes: lower --admitted or raise --nodes")

    def _try(self, rack: list[str], pod_sets) -> list[list[tuple[str, int]]] | None:
        free = {n: self.free[n] for n in rack}
        out = []
        for _, count, gpus, _, level in pod_sets:
            domains: list[tuple[str, int]] = []
            if level == "host":
                node = next((n for n in rack if free[n] >= count * gpus), None)
                if node is None:
                    return None
                domains.append((node, count))
                free[node] -= count * gpus
            else:
                left = count
                for n in rack:
                    k = min(left, free[n] // gpus)
                    if k:
                        domains.append((n, k))
                        free[n] -= k * gpus
                        left -= k
                    if not left:
                        break
                if left:
                    return None
            out.append(domains)
        self.free.update(free)
        return out


def _unique_object(shape_index: int, planned: Planned, rng: random.Random, config, seen: set) -> dict[str, Any]:
    from tasweb.simulator import objects as k8s

    while True:
        obj = k8s.workload_object(job_shape(shape_index), rng, config, planned.created)
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key not in seen:
            seen.add(key)
            break
    obj["spec"]["priority"] = planned.priority
    obj["spec"]["priorityClassRef"]["name"] = planned.priority_class
    return obj


def _admitted_status(obj: dict[str, Any], planned: Planned, domains: list[list[tuple[str, int]]]) -> None:
    """status.admission and the conditions Kueue sets when it admits, with the v1beta2
    encoding of each PodSet's TopologyAssignment."""
    from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
    from scheduler.codec import encode_assignment
    from scheduler.quantity import format_value, resource_value
    from tasweb.simulator import objects as k8s

    admitted_at = planned.created + timedelta(seconds=30)
    assignments = []
    for (name, count, gpus, _, _), placed in zip(SHAPES[planned.shape][3], domains, strict=True):
        ta = TopologyAssignment.of([HOSTNAME_LABEL], [((node,), k) for node, k in placed])
        usage = {"cpu": str(20 * gpus * count), "memory": f"{200 * gpus * count}Gi", k8s.GPU: str(gpus * count)}
        assignments.append({
            "name": name,
            "flavors": {r: k8s.FLAVOR for r in ("cpu", "memory", k8s.GPU)},
            "count": count,
            "resourceUsage": {r: format_value(r, resource_value(r, v)) for r, v in usage.items()},
            "topologyAssignment": encode_assignment(ta),
        })
    stamp = k8s.rfc3339(admitted_at)
    obj["status"] = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": stamp,
             "message": f"Quota reserved in ClusterQueue {k8s.CLUSTER_QUEUE}, wait time since queued was 30s"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": stamp,
             "message": f"Admitted by ClusterQueue {k8s.CLUSTER_QUEUE}, wait time since reservation was 0s"},
        ],
        "admission": {"clusterQueue": k8s.CLUSTER_QUEUE, "podSetAssignments": assignments},
    }


def _running_pods(obj: dict[str, Any], domains: list[list[tuple[str, int]]], rng: random.Random) -> list[dict]:
    """The admitted workload's pods as the Job controller, the ungater and the kubelet
    leave them: bound to their node and Running."""
    from scheduler.assignment import HOSTNAME_LABEL
    from tasweb.simulator import objects as k8s

    pods = []
    started = obj["status"]["conditions"][-1]["lastTransitionTime"]
    created = datetime.fromisoformat(started.replace("Z", "+00:00"))
    for pod_set, placed in zip(obj["spec"]["podSets"], domains, strict=True):
        index = 0
        for node, count in placed:
            for _ in range(count):
                pod = k8s.workload_pod(obj, pod_set, index, dict(k8s.FLAVOR_NODE_LABELS), rng, created)
                spec = pod["spec"]
                spec.pop("schedulingGates", None)
                spec["nodeSelector"] = {**spec["nodeSelector"], HOSTNAME_LABEL: node}
                spec["nodeName"] = node
                pod["status"] = {"phase": "Running", "startTime": started, "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": started}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}
                pods.append(pod)
                index += 1
    return pods


# ---------------------------------------------------------------- seeding


def seed(settings: BenchSettings, *, log: Callable[[str], None] = print) -> SeedInfo:
    """Fill the (empty, migrated) mirror with the cluster and the workloads of `settings`."""
    from django.db import connection, transaction

    from tasweb.cluster import models as cluster
    from tasweb.scheduling.services import DomainPaths, assignments_replace
    from tasweb.simulator import objects as k8s
    from tasweb.simulator.config import SimulatorSettings
    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import STATE_ID, ClusterWriter, simulator_seed

    settings.check()
    seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def step(name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        seconds[name] = time.perf_counter() - started
        log(f"  {name:58} {seconds[name]:8.2f} s")

    config = SimulatorSettings(**settings.simulator_shape()).validate()
    with step(f"simulator_seed: {config.node_count} nodes, their pods, the Kueue objects"):
        simulator_seed(config=config, now=NOW - timedelta(days=1))

    names = k8s.node_names(config)
    serving = k8s.serving_nodes(config, names)
    free = {n: GPUS_PER_NODE - (max(1, GPUS_PER_NODE // 2) if n in serving else 0) for n in names}
    admitted_plan, pending_plan = plan_workloads(settings)
    placer = Placer(names, free, config.nodes_per_rack)
    rng = random.Random(f"{settings.seed}:objects")
    seen: set[tuple[str, str]] = set()
    finishing: list[tuple[str, str]] = []
    gpu_used = 0
    admitted_uids: list[str] = []
    pods: list[dict[str, Any]] = []

    def admitted_objects() -> Iterator[dict[str, Any]]:
        nonlocal gpu_used
        for planned in admitted_plan:
            obj = _unique_object(planned.shape, planned, rng, config, seen)
            domains = placer.place(SHAPES[planned.shape][3])
            _admitted_status(obj, planned, domains)
            gpu_used += shape_gpus(planned.shape)
            admitted_uids.append(obj["metadata"]["uid"])
            if planned.finishes:
                finishing.append((obj["metadata"]["namespace"], obj["metadata"]["name"]))
            if settings.running_pods:
                pods.extend(_running_pods(obj, domains, rng))
            yield obj

    def pending_objects() -> Iterator[dict[str, Any]]:
        for planned in pending_plan:
            yield _unique_object(planned.shape, planned, rng, config, seen)

    with transaction.atomic():
        state = SimulatorState.objects.select_for_update().get(pk=STATE_ID)
        writer = ClusterWriter(state)
        with step(f"{settings.admitted} admitted Workloads"):
            writer.create_all("Workload", admitted_objects())
        if pods:
            with step(f"{len(pods)} Running pods of the admitted workloads"):
                writer.create_all("Pod", pods)
            pods.clear()
        with step(f"{settings.pending} pending Workloads"):
            writer.create_all("Workload", pending_objects())
        with step("ClusterQueue: GPU quota = what the admitted workloads hold"):
            cq = k8s.kueue_objects(config, NOW - timedelta(days=1))["ClusterQueue"][0]
            for flavor in cq["spec"]["resourceGroups"][0]["flavors"]:
                for res in flavor["resources"]:
                    if res["name"] == k8s.GPU:
                        res["nominalQuota"] = str(gpu_used)
            stored = cluster.ClusterQueue.objects.get(name=k8s.CLUSTER_QUEUE)
            writer.put("ClusterQueue", {**cq, "metadata": {**stored.raw["metadata"]}})
        state.save()

    with step("decoded assignments of the admitted workloads (the dashboard's)"):
        paths = DomainPaths()
        for start in range(0, len(admitted_uids), 2000):
            rows = list(cluster.Workload.objects.filter(uid__in=admitted_uids[start:start + 2000]))
            assignments_replace(admissions=[(row, list(row.raw["status"]["admission"]["podSetAssignments"]))
                                            for row in rows], paths=paths)
    with step("ANALYZE"), connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    step_nodes = max(1, len(names) // max(1, settings.node_changes))
    node_changes = names[step_nodes // 2::step_nodes][:settings.node_changes]
    counts = {
        "nodes": cluster.Node.objects.count(),
        "pods": cluster.Pod.objects.count(),
        "workload_pods": cluster.Pod.objects.exclude(workload_name="").count(),
        "workloads": cluster.Workload.objects.count(),
        **{f"workloads_{status.lower()}": n for status, n in
           Counter(cluster.Workload.objects.values_list("status", flat=True)).items()},
        "change_log_rows": cluster.MirrorChange.objects.count(),
    }
    mix = {
        "admitted": _mix(admitted_plan),
        "pending": _mix(pending_plan),
        "gpus": {"cluster": sum(GPUS_PER_NODE for _ in names), "inference_servers": len(serving) * 4,
                 "admitted": gpu_used, "quota": gpu_used,
                 "freed_by_finishing": sum(shape_gpus(p.shape) for p in admitted_plan if p.finishes)},
    }
    return SeedInfo(finishing=finishing, node_changes=node_changes, expected_admitted=settings.admit,
                    gpu_quota=gpu_used, counts=counts, mix=mix, seconds=seconds)


def _mix(plan: list[Planned]) -> dict[str, Any]:
    shapes = Counter(SHAPES[p.shape][0] for p in plan)
    priorities = Counter(p.priority for p in plan)
    return {"shapes": dict(sorted(shapes.items())), "priorities": dict(sorted(priorities.items()))}


def describe_mix(info: SeedInfo) -> list[str]:
    lines = []
    for label in ("admitted", "pending"):
        part = info.mix[label]
        total = sum(part["shapes"].values())
        shapes = ", ".join(f"{name} {n}" for name, n in part["shapes"].items())
        prios = ", ".join(f"{value}: {n}" for value, n in part["priorities"].items())
        lines.append(f"  {label:8} {total:7d}: {shapes}; priorities {prios}")
    lines.append("  shapes (pods x GPUs, topology): " + "; ".join(
        f"{base} " + " + ".join(f"{c}x{g} {mode}{'@' + level if level else ''}" for _, c, g, mode, level in sets)
        for base, _, _, sets in SHAPES))
    gpus = info.mix["gpus"]
    lines.append(f"  GPUs: {gpus['cluster']} in the cluster, {gpus['inference_servers']} held by inference "
                 f"servers, {gpus['admitted']} by admitted workloads (= the ClusterQueue's GPU quota); "
                 f"{gpus['freed_by_finishing']} freed by the {len(info.finishing)} that finish")
    return lines


def seeding_code_digest() -> str:
    """A digest of the code that seeds (this script, the simulator, the mirror's models and
    row builders): a copy seeded by other code is not started from."""
    root = Path(__file__).resolve().parents[1]
    files = [Path(__file__).resolve(), *sorted((root / "tasweb" / "simulator").glob("*.py")),
             root / "tasweb" / "cluster" / "models.py", root / "tasweb" / "cluster" / "services.py"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def seeded_copy_description(settings: BenchSettings, info: SeedInfo) -> str:
    return json.dumps({"settings": asdict(settings), "code": seeding_code_digest(), "seed": asdict(info)})


def seeded_copy_info(template: str, settings: BenchSettings) -> SeedInfo | None:
    """What was seeded into the kept copy `template`, if it was seeded with `settings` by
    this code."""
    description = seeded_copy_read(template)
    if not description:
        return None
    kept = json.loads(description)
    if kept.get("settings") != json.loads(json.dumps(asdict(settings))):
        print(f"  {template} was seeded with other settings: seeding again")
        return None
    if kept.get("code") != seeding_code_digest():
        print(f"  {template} was seeded by other code: seeding again")
        return None
    return SeedInfo.from_json(kept["seed"])


def seed_in_child(settings: BenchSettings) -> SeedInfo:
    """Seed in a forked process: the scheduler's memory (this process's) is measured alone."""
    from django.db import connections

    connections.close_all()
    receive, send = multiprocessing.Pipe(duplex=False)

    def run() -> None:
        try:
            info = seed(settings)
            send.send(("ok", asdict(info), peak_rss_mib()))
        except BaseException:
            send.send(("error", traceback.format_exc(), 0.0))
        finally:
            connections.close_all()

    child = multiprocessing.get_context("fork").Process(target=run)
    child.start()
    outcome, payload, peak = receive.recv()
    child.join()
    if outcome != "ok":
        raise SystemExit(f"seeding failed:\n{payload}")
    print(f"  (seeding process peak RSS {peak:.0f} MiB)")
    return SeedInfo.from_json(payload)


def add_seeded_arguments(ap: argparse.ArgumentParser, database: str) -> None:
    """--seeded and --database, for a benchmark run on this script's cluster (`seeded_database`)."""
    ap.add_argument("--seeded", metavar="NAME", help="start from this kept seeded copy (made, and kept, if missing)")
    ap.add_argument("--database", default=database)


@contextlib.contextmanager
def seeded_database(database: str, seeded: str | None, settings: BenchSettings, *, keep: bool = False
                    ) -> Iterator[SeedInfo]:
    """`database`, set up for Django, holding the cluster `settings` describe: a copy of the
    kept database `seeded` when this code seeded it with these settings, else seeded now
    (and a copy kept as `seeded`, when named); dropped afterwards unless `keep`."""
    kept = seeded_copy_info(seeded, settings) if seeded else None
    with bench_database(database, keep=keep, template=seeded if kept else None):
        if kept is not None:
            print(f"  started from {seeded}, seeded as asked earlier: {kept.counts}")
            yield kept
            return
        print(f"seed {settings.simulator_shape()} and {settings.workloads} workloads "
              f"({settings.admitted} admitted):", flush=True)
        started = time.perf_counter()
        info = seed_in_child(settings)
        print(f"  seeded in {time.perf_counter() - started:.1f} s: {info.counts}")
        if seeded:
            seeded_copy_keep(database, seeded, seeded_copy_description(settings, info))
            print(f"  kept a copy of the seeded database as {seeded}")
        yield info


# ---------------------------------------------------------------- changes between passes


def finish_workloads(keys: list[tuple[str, str]], now: datetime) -> int:
    """The running workloads finish as the simulator finishes them: their pods succeed, the
    Finished condition is set, the row is written through the mirror's services."""
    from django.db import transaction

    from tasweb.cluster import models as cluster
    from tasweb.scheduling.services import workload_observed
    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import STATE_ID, TERMINAL_PHASES, ClusterWriter, set_condition

    wanted = set(keys)
    with transaction.atomic():
        state = SimulatorState.objects.select_for_update().get(pk=STATE_ID)
        writer = ClusterWriter(state)
        rows = [row for row in cluster.Workload.objects.filter(name__in=[name for _, name in keys])
                if (row.namespace, row.name) in wanted]
        pods = cluster.Pod.objects.filter(namespace__in={ns for ns, _ in keys},
                                          workload_name__in={name for _, name in keys}).exclude(
            phase__in=TERMINAL_PHASES)
        for pod in pods:
            if (pod.namespace, pod.workload_name) not in wanted:
                continue
            raw = copy.deepcopy(pod.raw)
            status = raw.setdefault("status", {})
            status.update(phase="Succeeded", reason="Completed", message="The job's program exited with 0")
            set_condition(status, "Ready", "False", "PodCompleted", status["message"], now)
            writer.put("Pod", raw)
        for row in rows:
            raw = copy.deepcopy(row.raw)
            set_condition(raw.setdefault("status", {}), "Finished", "True", "Succeeded", "Job finished successfully",
                          now)
            old_status, old_admission = row.status, (row.raw.get("status") or {}).get("admission")
            writer.put("Workload", raw)
            fresh = cluster.Workload.objects.get(uid=row.uid)
            workload_observed(workload=fresh, old_status=old_status, old_admission=old_admission, at=now)
        state.save(update_fields=["resource_version"])
    return len(rows)


def set_nodes_ready(names: list[str], ready: bool, now: datetime) -> int:
    """Nodes' Ready condition flips (a kubelet stops posting status, or comes back), as the
    simulator's faults and recoveries write it."""
    from django.db import transaction

    from tasweb.cluster import models as cluster
    from tasweb.simulator import objects as k8s
    from tasweb.simulator.models import SimulatorState
    from tasweb.simulator.services import STATE_ID, ClusterWriter

    with transaction.atomic():
        state = SimulatorState.objects.select_for_update().get(pk=STATE_ID)
        writer = ClusterWriter(state)
        rows = list(cluster.Node.objects.filter(name__in=names).order_by("name"))
        for row in rows:
            raw = copy.deepcopy(row.raw)
            status = raw.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
            status["conditions"].append(k8s.ready_condition(ready, now))
            writer.put("Node", raw)
        state.save(update_fields=["resource_version"])
    return len(rows)


def timed_change(label: str, fn: Callable[[], int]) -> float:
    started = time.perf_counter()
    n = fn()
    elapsed = time.perf_counter() - started
    print(f"  {label} ({n} rows, not part of any pass): {elapsed:.2f} s")
    return elapsed


# ---------------------------------------------------------------- passes, timed


@dataclass
class PassFigures:
    label: str
    total: float = 0.0
    cpu: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    rss_mib: float = 0.0
    peak_rss_mib: float = 0.0

    def line(self) -> str:
        p = self.parts
        split = (f"apply {p.get('apply', 0):6.2f} (log {p.get('change_log', 0):.2f}, rows "
                 f"{p.get('read_changed', 0):.2f}, engine {p.get('engine_apply', 0):.2f}"
                 + (f", build {p['build']:.2f}" if "build" in p else "") + f"), engine pass {p.get('engine', 0):6.2f}, "
                 f"write {p.get('write', 0):6.2f}, rest {p.get('rest', 0):5.2f}")
        gc_note = (f"; garbage collector {p.get('gc', 0):.2f} s in it ({self.counts.get('gc_gen2', 0)} full "
                   f"collections; build {p.get('build_gc', 0):.2f}, engine {p.get('engine_gc', 0):.2f}, "
                   f"write {p.get('write_gc', 0):.2f})")
        c = self.counts
        what = (f"{c.get('changes', 0)} changes applied, {c.get('results', 0)} results, {c.get('rows_written', 0)} "
                f"rows written, {c.get('admitted', 0)} admitted, {c.get('evicted', 0)} evicted, "
                f"{c.get('pending', 0)} pending{gc_note}")
        return f"  {self.label:44} {self.total:7.2f} s = {split}\n  {'':44} {what}"


class Instrument:
    """Times the parts of `scheduling_pass_run` by wrapping the functions it calls (the
    same functions, called the same way)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.rss_after_build: tuple[float, float] | None = None
        self._gc_started = 0.0

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        """The interpreter's cyclic garbage collections, timed: with millions of long-lived
        objects in the engine state, a full collection is not free."""
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        self.seconds["gc"] = self.seconds.get("gc", 0.0) + time.perf_counter() - self._gc_started
        key = f"gc_gen{info.get('generation', 0)}"
        self.counts[key] = self.counts.get(key, 0) + 1

    def _wrap(self, name: str, fn: Callable, after: Callable[[Any, tuple], None] | None = None) -> Callable:
        def wrapper(*args, **kwargs):
            started, collecting = time.perf_counter(), self.seconds.get("gc", 0.0)
            try:
                out = fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
                self.seconds[f"{name}_gc"] = (self.seconds.get(f"{name}_gc", 0.0) + self.seconds.get("gc", 0.0)
                                              - collecting)
            if after is not None:
                after(out, args)
            return out
        return wrapper

    @contextlib.contextmanager
    def installed(self) -> Iterator[Instrument]:
        from tasweb.scheduling import runtime as rt
        from tasweb.scheduling import services

        def built(_out, _args) -> None:
            self.rss_after_build = (current_rss_mib(), peak_rss_mib())

        def read(out, _args) -> None:
            self.counts["changed_upserts"] = self.counts.get("changed_upserts", 0) + len(out.upserts)
            self.counts["changed_deletes"] = self.counts.get("changed_deletes", 0) + len(out.deletes)

        def engine(out, _args) -> None:
            self.counts["results"] = len(out.workloads)

        def recorded(_out, args) -> None:
            recorder = args[0]
            self.counts["rows_written"] = len(recorder.updates.rows)
            self.counts["events"] = len(recorder.events)
            self.counts["stale"] = len(recorder.stale)

        saved = [(services, "runtime_for_pass"), (services, "engine_pass_run"), (services.PassRecorder, "record"),
                 (rt, "runtime_build"), (rt, "engine_inputs"), (rt, "_pending_changes"), (rt, "changed_objects"),
                 (rt, "runtime_apply")]
        originals = [(owner, name, getattr(owner, name)) for owner, name in saved]
        services.runtime_for_pass = self._wrap("apply", services.runtime_for_pass)
        services.engine_pass_run = self._wrap("engine", services.engine_pass_run, engine)
        services.PassRecorder.record = self._wrap("write", services.PassRecorder.record, recorded)
        rt.runtime_build = self._wrap("build", rt.runtime_build, built)
        rt.engine_inputs = self._wrap("build_read", rt.engine_inputs)
        rt._pending_changes = self._wrap("change_log", rt._pending_changes)
        rt.changed_objects = self._wrap("read_changed", rt.changed_objects, read)
        rt.runtime_apply = self._wrap("engine_apply", rt.runtime_apply)
        gc.callbacks.append(self._gc)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._gc)
            for owner, name, original in originals:
                setattr(owner, name, original)

    def reset(self) -> None:
        self.seconds, self.counts, self.rss_after_build = {}, {}, None


def run_pass(label: str, now: datetime, instrument: Instrument, *,
             profile: cProfile.Profile | None = None) -> PassFigures:
    from tasweb.scheduling import runtime as rt
    from tasweb.scheduling import services

    before = rt.runtime_current()
    applied_before = before.changes_applied if before is not None else 0
    instrument.reset()
    started, started_cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    record = services.scheduling_pass_run(now=now)
    if profile is not None:
        profile.disable()
    figures = PassFigures(label, time.perf_counter() - started, time.process_time() - started_cpu)
    parts = dict(instrument.seconds)
    parts["rest"] = figures.total - sum(parts.get(k, 0.0) for k in ("apply", "engine", "write"))
    parts = {k: v for k, v in parts.items() if not (k.endswith("_gc") and k[:-3] not in parts)}
    figures.parts = parts
    runtime = rt.runtime_current()
    applied = runtime.changes_applied - (applied_before if runtime is before else 0) if runtime else 0
    figures.counts = {**instrument.counts, "changes": applied, "admitted": record.admitted, "evicted": record.evicted,
                      "pending": record.pending, "nodes_replaced": record.nodes_replaced,
                      "pods_ungated": record.pods_ungated}
    figures.rss_mib, figures.peak_rss_mib = current_rss_mib(), peak_rss_mib()
    print(figures.line(), flush=True)
    return figures


def profile_text(profile: cProfile.Profile, top: int = 30, dump: str | None = None) -> str:
    if dump:
        profile.dump_stats(dump)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def measure(info: SeedInfo, *, profile: bool = False, profile_build: bool = False,
            profile_nodes: bool = False, verify: bool = False, pstats_prefix: str | None = None
            ) -> dict[str, Any]:
    """The passes of the module docstring, on the seeded mirror; returns the figures."""
    from tasweb.scheduling.runtime import runtime_current, runtime_discard

    runtime_discard("the benchmark starts without one")
    instrument = Instrument()
    passes: dict[str, PassFigures] = {}
    changes: dict[str, float] = {}
    profiles: dict[str, str] = {}
    moment = NOW
    rss_start = current_rss_mib()

    def step() -> datetime:
        nonlocal moment
        moment += PASS_STEP
        return moment

    with instrument.installed():
        build_profile = cProfile.Profile() if profile_build else None
        passes["first"] = run_pass("first pass (builds the state)", step(), instrument, profile=build_profile)
        build_parts = dict(passes["first"].parts)
        rss_build, peak_build = instrument.rss_after_build or (float("nan"), float("nan"))
        if build_profile is not None:
            profiles["first"] = profile_text(build_profile, dump=pstats_prefix and f"{pstats_prefix}-first.pstats")
        runtime = runtime_current()
        state = runtime.engine.state if runtime is not None else None
        engine_size = {"nodes": len(state.nodes), "workloads": len(state.workload_map),
                       "pods": len(state.pod_map())} if state is not None else {}

        passes["settle"] = run_pass("next pass (the first's writes come back)", step(), instrument)
        passes["quiet_1"] = run_pass("pass, nothing changed", step(), instrument)

        changes["finish"] = timed_change(f"{len(info.finishing)} running workloads finish",
                                         lambda: finish_workloads(info.finishing, moment + PASS_STEP / 2))
        admit_profile = cProfile.Profile() if profile else None
        passes["admit"] = run_pass(f"MEASURED: {len(info.finishing)} finished, admit", step(), instrument,
                                   profile=admit_profile)
        if admit_profile is not None:
            profiles["admit"] = profile_text(admit_profile, dump=pstats_prefix and f"{pstats_prefix}-admit.pstats")
        passes["after_admit"] = run_pass("next pass (the admissions come back)", step(), instrument)
        passes["quiet"] = run_pass("pass, nothing changed", step(), instrument)

        changes["nodes_down"] = timed_change(f"{len(info.node_changes)} nodes go NotReady",
                                             lambda: set_nodes_ready(info.node_changes, False, moment + PASS_STEP / 2))
        nodes_profile = cProfile.Profile() if profile_nodes else None
        passes["nodes_down"] = run_pass(f"{len(info.node_changes)} nodes NotReady", step(), instrument,
                                        profile=nodes_profile)
        if nodes_profile is not None:
            profiles["nodes_down"] = profile_text(nodes_profile,
                                                  dump=pstats_prefix and f"{pstats_prefix}-nodes.pstats")
        passes["after_nodes_down"] = run_pass("next pass", step(), instrument)
        changes["nodes_up"] = timed_change(f"{len(info.node_changes)} nodes Ready again",
                                           lambda: set_nodes_ready(info.node_changes, True, moment + PASS_STEP / 2))
        passes["nodes_up"] = run_pass(f"{len(info.node_changes)} nodes Ready again", step(), instrument)
        passes["after_nodes_up"] = run_pass("next pass", step(), instrument)
        passes["quiet_end"] = run_pass("pass, nothing changed", step(), instrument)
        rss_end, peak_end = current_rss_mib(), peak_rss_mib()
        differences = None
        if verify:
            started = time.perf_counter()
            differences = verify_against_rebuild()
            print(f"  warm state against a rebuild from the database ({time.perf_counter() - started:.1f} s): "
                  + ("the same" if not differences else "DIFFERENT"))
            for line in differences:
                print(f"    {line}")
        del runtime, state  # the old state goes, as in a process that restarts
        runtime_discard("the benchmark restarts the scheduler")
        passes["restart"] = run_pass("pass after a restart (builds the state again)", step(), instrument)
        passes["after_restart"] = run_pass("next pass", step(), instrument)

    runtime = runtime_current()
    rss_restart = current_rss_mib()
    return {
        "build": {"seconds": build_parts.get("build", float("nan")),
                  "gc_seconds": build_parts.get("build_gc", float("nan")),
                  "read_seconds": build_parts.get("build_read", float("nan")),
                  "engine_seconds": build_parts.get("build", float("nan")) - build_parts.get("build_read", 0.0),
                  "rss_mib": rss_build, "peak_rss_mib": peak_build, "engine": engine_size},
        "rss_start_mib": rss_start,
        "rss_end_mib": rss_end,
        "peak_rss_mib": peak_end,
        "rss_after_restart_mib": rss_restart,
        "differences_from_rebuild": differences,
        "passes": {name: asdict(p) for name, p in passes.items()},
        "changes_seconds": changes,
        "expected_admitted": info.expected_admitted,
        "rebuilt_in": [name for name, p in passes.items() if name not in ("first", "restart") and "build" in p.parts],
        "changes_applied_in_all": runtime.changes_applied if runtime is not None else 0,
        "profiles": profiles,
    }


# ---------------------------------------------------------------- warm state against a rebuild


def state_view(engine) -> dict[str, Any]:
    """What the engine state holds, comparable between two engines: workloads (admission,
    condition statuses, unhealthy nodes), quota usage, TAS usage per node, the indexes and
    which workloads wait in which ClusterQueue."""
    state = engine.state
    workloads = {}
    for key, wl in state.workload_map.items():
        admission = None
        if wl.admission is not None:
            admission = (wl.admission.cluster_queue, tuple(
                (p.name, p.count, tuple(sorted(p.flavors.items())), p.topology_assignment)
                for p in wl.admission.pod_set_assignments))
        workloads[key] = (admission, tuple(sorted((c.type, c.status) for c in wl.conditions)),
                          tuple(wl.unhealthy_nodes))
    snapshots = {}
    for name, snap in state.tas_snapshots.items():
        ids = list(snap.tree.leaves.ids) if snap.tree.levels else []
        snapshots[name] = {res: (dict(zip(ids, snap.tas_usage[:, col].tolist(), strict=True)),
                                 dict(zip(ids, snap.non_tas_usage[:, col].tolist(), strict=True)))
                           for col, res in enumerate(snap.resources.names)}
    return {
        "workloads": workloads,
        "quota": {cq: {(fr.flavor, fr.resource): v for fr, v in node.usage.items() if v}
                  for cq, node in state.quota.queues.items()},
        "tas_usage": snapshots,
        "holding": {cq: set(h) for cq, h in state.holding.items() if h},
        "by_node": {h: set(k) for h, k in state.by_node.items() if k},
        "waiting": dict(engine.queues.assigned),
        "pods": set(state.pod_map()),
    }


def verify_against_rebuild() -> list[str]:
    """Differences between the warm runtime and a state built afresh from the database."""
    from tasweb.scheduling import services
    from tasweb.scheduling.runtime import runtime_build, runtime_current

    runtime = runtime_current()
    if runtime is None:
        return ["no runtime to compare"]
    fresh = runtime_build(gates_text=runtime.gates, gates=services.feature_gates())
    ours, theirs = state_view(runtime.engine), state_view(fresh.engine)
    problems = []
    for part in ours:
        a, b = ours[part], theirs[part]
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(set(a) | set(b), key=str)
            differing = [k for k in keys if a.get(k) != b.get(k)]
            sample = "; ".join(f"{k}: warm {a.get(k)!r:.200} / rebuilt {b.get(k)!r:.200}" for k in differing[:3])
            problems.append(f"{part}: {len(differing)} differ -- {sample}")
        else:
            problems.append(f"{part}: warm {len(a)} / rebuilt {len(b)}: only warm {sorted(a - b)[:5]}, "
                            f"only rebuilt {sorted(b - a)[:5]}")
    if runtime.versions != fresh.versions:
        differing = [k for k in set(runtime.versions) | set(fresh.versions)
                     if runtime.versions.get(k) != fresh.versions.get(k)]
        problems.append(f"resourceVersions read: {len(differing)} differ, e.g. {sorted(differing)[:3]}")
    return problems


# ---------------------------------------------------------------- report


def verdicts(figures: dict[str, Any]) -> list[tuple[str, float, str, bool]]:
    admit = figures["passes"]["admit"]
    return [
        ("state built from PostgreSQL (runtime_build)", figures["build"]["seconds"],
         f"<= {BUILD_TARGET_SECONDS:.0f} s", figures["build"]["seconds"] <= BUILD_TARGET_SECONDS),
        (f"pass admitting {admit['counts'].get('admitted', 0)} (scheduling_pass_run)", admit["total"],
         f"<= {PASS_TARGET_SECONDS:.0f} s", admit["total"] <= PASS_TARGET_SECONDS),
        ("RSS after building (MiB, VmRSS)", figures["build"]["rss_mib"], f"< {RSS_TARGET_MIB:.0f}",
         figures["build"]["rss_mib"] < RSS_TARGET_MIB),
        ("peak RSS after the passes (MiB, ru_maxrss)", figures["peak_rss_mib"], f"< {RSS_TARGET_MIB:.0f}",
         figures["peak_rss_mib"] < RSS_TARGET_MIB),
    ]


def print_report(settings: BenchSettings, info: SeedInfo, figures: dict[str, Any]) -> None:
    passes = figures["passes"]
    build = figures["build"]
    print()
    print(f"state built: {build['seconds']:.2f} s (reading the mirror {build['read_seconds']:.2f} s, the engine "
          f"{build['engine_seconds']:.2f} s; the garbage collector ran {build['gc_seconds']:.2f} s of it): "
          f"{build['engine']}")
    print(f"RSS: {figures['rss_start_mib']:.0f} MiB before, {build['rss_mib']:.0f} MiB after building (peak "
          f"{build['peak_rss_mib']:.0f}), {figures['rss_end_mib']:.0f} MiB after the passes (peak "
          f"{figures['peak_rss_mib']:.0f})")
    for name, label in (("quiet", "pass, nothing changed"), ("nodes_down", f"{settings.node_changes} nodes NotReady"),
                        ("nodes_up", f"{settings.node_changes} nodes Ready again")):
        print(f"{label}: {passes[name]['total']:.2f} s")
    print()
    for name, value, target, ok in verdicts(figures):
        print(f"  {name:52} {value:9.2f}   target {target:8}  {'PASS' if ok else 'MISS'}")
    admitted = passes["admit"]["counts"].get("admitted", 0)
    print(f"  {'workloads admitted by the measured pass':52} {admitted:9d}   expected {info.expected_admitted:8d}  "
          f"{'PASS' if admitted == info.expected_admitted else 'MISS'}")
    written = passes["restart"]["counts"].get("rows_written", 0)
    print(f"  {'rows written by the pass after a restart':52} {written:9d}   expected {0:8d}  "
          f"{'PASS' if written == 0 else 'MISS'}")
    print(f"after the restart: the state built again in {passes['restart']['parts'].get('build', 0):.2f} s, the pass "
          f"{passes['restart']['total']:.2f} s; RSS {figures['rss_after_restart_mib']:.0f} MiB")
    for name, text in figures["profiles"].items():
        print()
        print(f"cProfile of the {'measured' if name == 'admit' else 'first'} pass, top 30 by cumulative time:")
        print(text)


def in_probe_units(figures: dict[str, Any], probe_before: float, probe_after: float) -> dict[str, float]:
    """The measured pass and the build in units of the speed probe (the mean of the runs before
    and after the passes): figures that compare across machines of different speeds, as far as
    a loop of plain Python tells a machine's speed."""
    unit = (probe_before + probe_after) / 2
    return {"pass": figures["passes"]["admit"]["total"] / unit, "build": figures["build"]["seconds"] / unit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--workloads", type=int, default=100_000)
    ap.add_argument("--admitted", type=int, default=30_000, help="of --workloads, admitted and running")
    ap.add_argument("--admit", type=int, default=1_000, help="running ones that finish, and pending ones the "
                                                             "measured pass can admit")
    ap.add_argument("--node-changes", type=int, default=100, help="nodes that go NotReady and come back")
    ap.add_argument("--running-pods", action="store_true", help="admitted workloads have their pods, Running")
    ap.add_argument("--database", default="tas_bench_state")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    ap.add_argument("--json", metavar="FILE", help="write the measured figures to FILE")
    ap.add_argument("--profile", action="store_true", help="cProfile of the measured pass")
    ap.add_argument("--profile-build", action="store_true", help="cProfile of the first pass (the build)")
    ap.add_argument("--profile-nodes", action="store_true", help="cProfile of the pass after nodes go NotReady")
    ap.add_argument("--pstats", metavar="PREFIX", help="with the --profile options, also write the raw profiles "
                                                       "to PREFIX-admit / -first / -nodes.pstats")
    ap.add_argument("--verify", action="store_true", help="after the passes, compare the warm state with one "
                                                          "built afresh from the database")
    ap.add_argument("--seeded", metavar="NAME", help="start from the database NAME if an earlier run with these "
                                                      "settings kept it; otherwise seed and keep a copy as NAME")
    args = ap.parse_args()
    settings = BenchSettings(nodes=args.nodes, workloads=args.workloads, admitted=args.admitted, admit=args.admit,
                             node_changes=args.node_changes, running_pods=args.running_pods).check()

    os.environ["TAS_CLUSTER_SOURCE"] = "simulator"  # we decide (control mode), as with the simulator
    with seeded_database(args.database, args.seeded, settings, keep=args.keep) as info:
        for line in describe_mix(info):
            print(line)
        probe_before = python_speed_probe()
        print("passes (scheduling_pass_run, in this process):", flush=True)
        figures = measure(info, profile=args.profile, profile_build=args.profile_build,
                          profile_nodes=args.profile_nodes, verify=args.verify,
                          pstats_prefix=args.pstats)
        probe_after = python_speed_probe()
        print_report(settings, info, figures)
        print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe_before:.3f} s "
              f"before the passes and {probe_after:.3f} s after")
        in_probes = in_probe_units(figures, probe_before, probe_after)
        print(f"in units of that loop (the mean of the two): the measured pass {in_probes['pass']:.1f}, the build "
              f"{in_probes['build']:.0f}")
        if args.json:
            out = {"settings": asdict(settings), "seed": asdict(info) | {"finishing": len(info.finishing)},
                   "figures": figures,
                   "verdicts": [{"figure": n, "value": v, "target": t, "met": ok} for n, v, t, ok in verdicts(figures)],
                   "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                               "python_probe_s": {"before": probe_before, "after": probe_after},
                               "in_probe_units": in_probes}}
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
            print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
