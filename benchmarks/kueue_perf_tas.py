"""Kueue's TAS scheduler performance test, replayed in real time against the engine or the service.

    .venv/bin/python benchmarks/kueue_perf_tas.py [--config FILE] [--rangespec FILE] [--scale F]
                                                  [--json FILE] [--mode engine|stack]
                                                  [--timestamps second|ms] [--timeout S] [--profile]
                                                  [--database NAME] [--keep] [--redis-url URL] [--poll-ms MS]
                                                  [--per-object-writes]

A replay of Kueue's scheduler performance runner (kubernetes-sigs/kueue,
`test/performance/scheduler/runner`: `generator/`, `controller/`, `recorder/`, `main.go`, and
`checker/checker_test.go`; Apache-2.0), with its TAS configuration
(`test/performance/scheduler/configs/tas/generator.yaml` and `rangespec.yaml`, kept in
`../shared/anchors/kueue-perf-tas/`). What the runner does, and what this replay does for it:

* Objects (`generator/topology_generator.go`, `generator/generator.go`): nodes for every
  combination of the topology levels, named `node-b0-r2-n15` after their level values, labelled
  `tas-node-group=tas`, each level's label (`block-0`, `rack-2`) and the hostname = the node
  name, allocatable the last level's capacity (default 96 CPU / 256Gi) and 110 pods, Ready; the
  Topology; the ResourceFlavor (`<nodeLabel>=tas`, the topology); per cohort set `count`
  cohorts `<className>-<i>`, each with every queues set's `count` ClusterQueues
  `<className>-<setIdx>-<i>-<cohort>` (cpu nominal quota and borrowing limit, the preemption
  policies), a namespace and a LocalQueue of the same name. No Cohort objects.
* Arrivals (`generateWlSet`): every ClusterQueue runs each of its workloads sets at once, all
  ClusterQueues together; a set waits `creationIntervalMs` *before* each creation, so its k-th
  workload (k = 1, 2, ...) arrives at k x interval; it is named `<className>-<setIdx>-<i>-<j>`
  and labelled with its class and its runtime.
* Execution (`controller/controller.go`): the runner's controller notes when it sees a
  workload Admitted and marks it `Finished` (reason ByTest) `runtimeMs` later. A workload it
  sees Evicted (here: preempted) gets its quota reservation unset at once
  (`UnsetQuotaReservationWithCondition(wl, "Pending", "Evicted by the test runner")`: no
  admission, QuotaReserved and Admitted False, Evicted/Preempted left True until Kueue
  readmits it), so it waits in its queue again, in its creation-timestamp place (Kueue orders
  preempted workloads by creation time), and runs its full runtime again once readmitted.
* Measures (`recorder/recorder.go`, `checker/checker_test.go`): per workload, the time from
  its first event (creation) to the *last* time it was seen becoming Admitted (a preempted and
  readmitted workload counts once, with its last admission); per class the average of those,
  in whole milliseconds. Evictions: each time a workload is seen becoming Evicted. ClusterQueue
  usage: per ClusterQueue, the time integral of its cpu usage (`status.flavorsUsage`, admitted
  workloads, borrowed included) between its status events; for the class, the sum of the
  integrals x 100 / (sum of the nominal quotas x (last ClusterQueue event - first)). The
  window opens when the ClusterQueues are created (here: when the replay starts, right after
  the engine's cold start) and closes with the last status change, when the last workload
  finishes and the runner stops. Wall time: Kueue's is the whole minimalkueue process
  (`runner/main.go` runCommand), so here it is the engine's cold start plus the replay.

Engine mode: one process, the engine driven directly. Wall clock drives everything: a loop
applies what is due (arrivals, finishes), runs one scheduling cycle (`run_pass(now, cycles=1)`),
then reads what the cycle did as the runner would see it, at the time the cycle returned: an
admission starts the workload's runtime, a preemption is released at once. It does not sleep
while the queues have heads; with nothing to do it sleeps until the next due event. Each
workload is built and parsed when it arrives, as Kueue's runner creates it through the API
server during the run (so its creation timestamp is its arrival time, and the ingest is timed
with the run). Kubernetes stores creation timestamps to the second, and Kueue orders its
queues by them: `--timestamps second` (the default) does the same, `ms` keeps milliseconds.
Workloads of one priority created in the same second (or millisecond) are then tied: the
engine takes them by namespace and name, Kueue's heap in no set order. TASBalancedPlacement
is on for the whole run (the balanced classes need it). Nothing is random.

Stack mode (`kueue_perf_stack.py`): the running service instead of the engine. The replay
creates a throwaway PostgreSQL database (`--database`, dropped unless `--keep`), uses a Redis
database of its own (`--redis-url`), starts a Celery worker for the scheduler queue (solo
pool, TAS_SCHEDULER_DEBOUNCE=0, no simulator) and plays the cluster: it writes the same
objects through the mirror's services, polls the database every `--poll-ms` for what the
passes committed, writes Finished and releases preempted workloads as the runner does, and
asks for a pass after each burst of writes. Same measures, same table, same JSON keys
(`mode` "stack"; `engine_s` then holds the worker's pass time and this process's time per
kind of write), plus the service's side: pass durations, the worker's busy share, the
admission lag. Wall time: the setup (objects written, the worker's first pass) plus the
replay; creating the database and starting the worker are printed apart.

Printed: each measure beside Kueue's mean (from the `# mean / stddev / CV%` comments of
rangespec.yaml) and the ratio, and beside what no scheduler can beat (wall time: the cohorts'
cpu-seconds of work over their quota) or what a scheduler taking no time would get on the same
arrivals (per class: `instant_reference_ms`). `--json FILE` writes `wall_s`, `cq_usage_pct`,
`avg_time_to_admission_ms` (per class), `evictions`, `mode`, and the details (`setup_s`,
`replay_s`, `physical_bound_s`, `instant_reference_ms`, `evictions_by_class`, `passes`,
`admissions`, `engine_s` per kind of engine call, `slowest_pass_ms`, `scale`, `workloads`).

`--scale F` multiplies every workloads set's count by F (rounded, at least 1); intervals,
runtimes, queues and nodes stay as configured. `--profile` profiles the engine calls (parsing,
upserts, passes) with cProfile and prints the top costs (the profiler slows the engine, so the
measures of a profiled run are not the engine's).
"""

from __future__ import annotations

import argparse
import bisect
import cProfile
import dataclasses
import heapq
import io
import json
import pstats
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scheduler.codec import decode_assignment  # noqa: E402
from scheduler.engine import Engine, PassOutcome  # noqa: E402
from scheduler.errors import InputError  # noqa: E402
from scheduler.features import FeatureGates  # noqa: E402
from scheduler.model import Condition, Workload  # noqa: E402
from scheduler.parse import ParsedObjects, parse_objects  # noqa: E402
from scheduler.quantity import CPU, QuantityError, resource_value  # noqa: E402
from scheduler.results import ADMITTED, PREEMPTED, QUOTA_RESERVED  # noqa: E402

ANCHOR = Path("../shared/anchors/kueue-perf-tas")
DEFAULT_CONFIG = ANCHOR / "generator.yaml"
DEFAULT_RANGESPEC = ANCHOR / "rangespec.yaml"
MODES = ("engine", "stack")
GATES = "TASBalancedPlacement=true"

V1B2 = "kueue.x-k8s.io/v1beta2"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TAS_NODE_GROUP_LABEL = "tas-node-group"  # topology_generator.go: every node is tas-node-group=tas
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
CONSTRAINTS = ("required", "preferred", "balanced")
# the runner's `--timeout` for the TAS runs (Makefile-test.mk: --timeout=20m)
DEFAULT_TIMEOUT_S = 20 * 60.0


class ConfigError(InputError):
    """A generator or range file that cannot be replayed; the message names the file and the field."""


# ---------------------------------------------------------------- the generator config


@dataclass(frozen=True)
class WorkloadTemplate:
    class_name: str
    runtime_ms: int
    priority: int
    request: str
    pod_count: int
    tas_constraint: str
    tas_level: str
    slice_size: int

    @property
    def cpu_m(self) -> int:
        """Milli-CPU of the whole workload (each pod requests `request`)."""
        return resource_value(CPU, self.request) * self.pod_count


@dataclass(frozen=True)
class WorkloadsSet:
    count: int
    creation_interval_ms: int
    workloads: tuple[WorkloadTemplate, ...]


@dataclass(frozen=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_quota: str
    borrowing_limit: str | None
    reclaim_within_cohort: str | None
    within_cluster_queue: str | None
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True)
class CohortSet:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]


@dataclass(frozen=True)
class TopologyLevel:
    name: str
    count: int
    node_label: str


@dataclass(frozen=True)
class GeneratorConfig:
    file: str
    topology_name: str
    levels: tuple[TopologyLevel, ...]
    node_cpu: str
    node_memory: str
    flavor_name: str
    flavor_node_label: str
    cohorts: tuple[CohortSet, ...]


class _Fields:
    """Typed access to one YAML mapping, with errors naming the file and the field path."""

    def __init__(self, file: str, data: Any, path: str) -> None:
        self.file, self.path = file, path
        if not isinstance(data, dict):
            raise self.error("", f"must be a mapping, got {type(data).__name__}")
        self.data = data

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, reason: str) -> ConfigError:
        return ConfigError(reason, field=self.where(key) if key else self.path, file=self.file)

    def string(self, key: str, *, required: bool = True, default: str = "") -> str:
        value = self.data.get(key)
        if value is None or value == "":
            if required:
                raise self.error(key, "is required")
            return default
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}")
        return value

    def integer(self, key: str, *, default: int | None = None, minimum: int = 0) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.error(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def quantity(self, key: str, *, required: bool = True) -> str | None:
        value = self.data.get(key)
        if value is None or value == "":
            if required:
                raise self.error(key, "is required")
            return None
        text = str(value)
        try:
            resource_value(CPU, text)
        except QuantityError as exc:
            raise self.error(key, str(exc)) from None
        return text

    def mapping(self, key: str, *, required: bool = True) -> _Fields | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "is required")
            return None
        return _Fields(self.file, value, self.where(key))

    def items(self, key: str, *, non_empty: bool = True) -> list[_Fields]:
        value = self.data.get(key)
        if value is None or value == []:
            if non_empty:
                raise self.error(key, "must list at least one entry")
            return []
        if not isinstance(value, list):
            raise self.error(key, f"must be a list, got {type(value).__name__}")
        return [_Fields(self.file, item, f"{self.where(key)}[{i}]") for i, item in enumerate(value)]


def read_template(f: _Fields) -> WorkloadTemplate:
    if f.data.get("devices"):
        raise f.error("devices", "DRA devices are not replayed (the tas-dra configuration is not supported)")
    level = f.string("tasLevel", required=False)
    constraint = f.string("tasConstraint", required=bool(level))
    if level and constraint not in CONSTRAINTS:
        raise f.error("tasConstraint", f"must be one of {', '.join(CONSTRAINTS)}, got {constraint!r}")
    request = f.quantity("request")
    assert request is not None
    return WorkloadTemplate(
        class_name=f.string("className"),
        runtime_ms=f.integer("runtimeMs", default=0),
        priority=f.integer("priority", default=0, minimum=-(2**31)),
        request=request,
        # generator.go: podCount 0 means 1; without a tasLevel the workload is one pod
        pod_count=(f.integer("podCount", default=0) or 1) if level else 1,
        tas_constraint=constraint,
        tas_level=level,
        slice_size=f.integer("sliceSize", default=0),
    )


def read_workloads_set(f: _Fields) -> WorkloadsSet:
    return WorkloadsSet(
        count=f.integer("count"),
        creation_interval_ms=f.integer("creationIntervalMs", default=0),
        workloads=tuple(read_template(t) for t in f.items("workloads")),
    )


def read_queues_set(f: _Fields) -> QueuesSet:
    nominal = f.quantity("nominalQuota")
    assert nominal is not None
    if f.data.get("deviceNominalQuota"):
        raise f.error("deviceNominalQuota", "DRA devices are not replayed")
    return QueuesSet(
        class_name=f.string("className"),
        count=f.integer("count"),
        nominal_quota=nominal,
        borrowing_limit=f.quantity("borrowingLimit", required=False),
        reclaim_within_cohort=f.string("reclaimWithinCohort", required=False) or None,
        within_cluster_queue=f.string("withinClusterQueue", required=False) or None,
        workloads_sets=tuple(read_workloads_set(w) for w in f.items("workloadsSets")),
    )


def read_cohort_set(f: _Fields) -> CohortSet:
    return CohortSet(
        class_name=f.string("className"),
        count=f.integer("count"),
        queues_sets=tuple(read_queues_set(q) for q in f.items("queuesSets")),
    )


def parse_config(data: Any, file: str) -> GeneratorConfig:
    """A generator.yaml document in Kueue's schema (`generator.go` Config), TAS part required."""
    top = _Fields(file, data, "")
    if top.data.get("dra") is not None:
        raise top.error("dra", "DRA devices are not replayed (the tas-dra configuration is not supported)")
    topo = top.mapping("topology")
    flavor = top.mapping("resourceFlavor")
    assert topo is not None and flavor is not None
    levels_f = topo.items("levels")
    if len(levels_f) < 2:
        raise topo.error("levels", f"must have at least 2 levels, got {len(levels_f)}")
    levels = tuple(TopologyLevel(lv.string("name"), lv.integer("count", minimum=1), lv.string("nodeLabel"))
                   for lv in levels_f)
    capacity = levels_f[-1].mapping("capacity", required=False)
    cpu = (capacity.quantity("cpu", required=False) if capacity else None) or "96"
    memory = str((capacity.data.get("memory") if capacity else None) or "256Gi")
    topology_name = topo.string("name")
    if flavor.string("topologyName") != topology_name:
        raise flavor.error("topologyName", f"must name the topology {topology_name!r}")
    return GeneratorConfig(
        file=file,
        topology_name=topology_name,
        levels=levels,
        node_cpu=cpu,
        node_memory=memory,
        flavor_name=flavor.string("name"),
        flavor_node_label=flavor.string("nodeLabel"),
        cohorts=tuple(read_cohort_set(c) for c in top.items("cohorts")),
    )


def load_config(path: Path) -> GeneratorConfig:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not YAML: {' '.join(str(exc).split())}", file=str(path)) from None
    return parse_config(data, str(path))


def scaled(config: GeneratorConfig, factor: float) -> GeneratorConfig:
    """The same config with every workloads set's count x `factor` (rounded, at least 1)."""
    if factor == 1:
        return config

    def one(ws: WorkloadsSet) -> WorkloadsSet:
        return dataclasses.replace(ws, count=max(1, round(ws.count * factor)) if ws.count else 0)

    cohorts = tuple(
        dataclasses.replace(cs, queues_sets=tuple(
            dataclasses.replace(qs, workloads_sets=tuple(one(ws) for ws in qs.workloads_sets))
            for qs in cs.queues_sets))
        for cs in config.cohorts)
    return dataclasses.replace(config, cohorts=cohorts)


# ---------------------------------------------------------------- the objects the runner creates


@dataclass(frozen=True)
class QueueSpec:
    """One generated ClusterQueue (its namespace and LocalQueue share its name)."""

    name: str
    cohort: str
    class_name: str
    queues_set: QueuesSet

    @property
    def nominal_m(self) -> int:
        return resource_value(CPU, self.queues_set.nominal_quota)


@dataclass(frozen=True)
class Arrival:
    """One workload creation, `at_ms` after the replay starts."""

    at_ms: int
    namespace: str
    name: str
    template: WorkloadTemplate

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def node_name(values: list[str]) -> str:
    """topology_generator.go buildNodeName: `block-0, rack-2, node-15` -> `node-b0-r2-n15`."""
    return "node" + "".join(f"-{v[0]}{v.split('-')[1]}" for v in values)


def node_objects(config: GeneratorConfig) -> Iterator[dict]:
    levels = config.levels
    capacity = {"cpu": config.node_cpu, "memory": config.node_memory, "pods": "110"}

    def walk(depth: int, values: list[str]) -> Iterator[dict]:
        if depth == len(levels):
            name = node_name(values)
            labels = {TAS_NODE_GROUP_LABEL: "tas"}
            labels.update({lv.node_label: v for lv, v in zip(levels, values, strict=True)})
            labels[HOSTNAME_LABEL] = name  # unique: the per-level value repeats across racks
            yield {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                   "status": {"allocatable": dict(capacity), "capacity": dict(capacity),
                              "conditions": [{"type": "Ready", "status": "True"}]}}
            return
        for i in range(levels[depth].count):
            yield from walk(depth + 1, [*values, f"{levels[depth].name}-{i}"])

    yield from walk(0, [])


def definition_objects(config: GeneratorConfig) -> list[dict]:
    return [
        {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": config.topology_name},
         "spec": {"levels": [{"nodeLabel": lv.node_label} for lv in config.levels]}},
        {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": config.flavor_name},
         "spec": {"nodeLabels": {config.flavor_node_label: "tas"}, "topologyName": config.topology_name}},
    ]


def queue_specs(config: GeneratorConfig) -> list[QueueSpec]:
    out = []
    for cs in config.cohorts:
        for ci in range(cs.count):
            cohort = f"{cs.class_name}-{ci}"
            for qsi, qs in enumerate(cs.queues_sets):
                out += [QueueSpec(f"{qs.class_name}-{qsi}-{qi}-{cohort}", cohort, qs.class_name, qs)
                        for qi in range(qs.count)]
    return out


def queue_objects(q: QueueSpec, flavor: str) -> list[dict]:
    qs = q.queues_set
    cpu: dict[str, Any] = {"name": "cpu", "nominalQuota": qs.nominal_quota}
    if qs.borrowing_limit is not None:
        cpu["borrowingLimit"] = qs.borrowing_limit
    preemption = {k: v for k, v in (("reclaimWithinCohort", qs.reclaim_within_cohort),
                                    ("withinClusterQueue", qs.within_cluster_queue)) if v}
    return [
        {"apiVersion": V1B2, "kind": "ClusterQueue",
         "metadata": {"name": q.name, "labels": {CLASS_LABEL: q.class_name}},
         "spec": {"cohortName": q.cohort, "namespaceSelector": {}, "preemption": preemption,
                  "resourceGroups": [{"coveredResources": ["cpu"],
                                      "flavors": [{"name": flavor, "resources": [cpu]}]}]}},
        {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": q.name, "namespace": q.name},
         "spec": {"clusterQueue": q.name}},
    ]


def arrivals(queues: list[QueueSpec]) -> list[Arrival]:
    """Every creation of the run, in time order (generateWlSet: wait, then create)."""
    out: list[Arrival] = []
    for q in queues:
        for set_idx, ws in enumerate(q.queues_set.workloads_sets):
            k = 0
            for si in range(ws.count):
                for i, t in enumerate(ws.workloads):
                    k += 1
                    out.append(Arrival(k * ws.creation_interval_ms, q.name, f"{t.class_name}-{set_idx}-{si}-{i}", t))
    out.sort(key=lambda a: a.at_ms)  # stable: simultaneous ones in the generator's order
    return out


def topology_request(t: WorkloadTemplate) -> dict[str, Any]:
    if t.tas_constraint == "required":
        return {"required": t.tas_level}
    if t.tas_constraint == "preferred":
        return {"preferred": t.tas_level}
    request: dict[str, Any] = {"podSetSliceRequiredTopology": t.tas_level}
    if t.slice_size > 0:
        request["podSetSliceSize"] = t.slice_size
    return request


def rfc3339(moment: datetime, resolution: str) -> str:
    if resolution == "second":
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def workload_object(a: Arrival, created: datetime, resolution: str) -> dict:
    t = a.template
    pod_set: dict[str, Any] = {
        "name": "main", "count": t.pod_count,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": t.request}}}]}}}
    if t.tas_level:
        pod_set["topologyRequest"] = topology_request(t)
    return {
        "apiVersion": V1B2, "kind": "Workload",
        "metadata": {"name": a.name, "namespace": a.namespace, "uid": a.key,
                     "creationTimestamp": rfc3339(created, resolution),
                     "labels": {RUNTIME_LABEL: str(t.runtime_ms), CLASS_LABEL: t.class_name}},
        "spec": {"queueName": a.namespace, "priority": t.priority, "podSets": [pod_set]},
    }


def parse(objs: list[dict], source: str) -> ParsedObjects:
    return parse_objects([(source, o) for o in objs], decode_assignment=decode_assignment, warn=lambda _m: None)


# ---------------------------------------------------------------- Kueue's published results


@dataclass(frozen=True)
class KueueMeans:
    """Means of Kueue's CI runs, from the `# mean / stddev / CV%` comments of rangespec.yaml."""

    wall_ms: float
    usage_pct: dict[str, float]
    avg_time_to_admission_ms: dict[str, float]


_RANGE_LINE = re.compile(r"^\s+([\w.-]+):\s*[\d_.]+\s*#\s*([\d_.]+)\s*/")


def read_rangespec(path: Path) -> KueueMeans:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None
    sections: dict[str, dict[str, float]] = defaultdict(dict)
    section = ""
    for line in lines:
        if re.match(r"^[A-Za-z]\w*:\s*(#.*)?$", line):
            section = line.split(":")[0]
        elif (m := _RANGE_LINE.match(line)) is not None:
            sections[section][m[1]] = float(m[2].replace("_", ""))
    wall = sections["cmd"].get("maxWallMs")
    if wall is None:
        raise ConfigError("no '# mean / stddev' comment on maxWallMs", field="cmd.maxWallMs", file=str(path))
    return KueueMeans(wall, dict(sections["clusterQueueClassesMinUsage"]),
                      dict(sections["wlClassesMaxAvgTimeToAdmissionMs"]))


def physical_bound_s(config: GeneratorConfig) -> float:
    """No scheduler can do better: per cohort, its cpu-seconds of work over its quota (every
    ClusterQueue's nominal quota), and no workload finishes before it arrives and runs."""
    work: dict[str, float] = defaultdict(float)
    quota: dict[str, int] = defaultdict(int)
    last = 0.0
    for q in queue_specs(config):
        quota[q.cohort] += q.nominal_m
        for ws in q.queues_set.workloads_sets:
            for k, t in enumerate((t for _ in range(ws.count) for t in ws.workloads), start=1):
                work[q.cohort] += t.cpu_m * t.runtime_ms / 1e6
                last = max(last, (k * ws.creation_interval_ms + t.runtime_ms) / 1e3)
    by_quota = max((work[c] * 1000 / quota[c] for c in work if quota[c]), default=0.0)
    return max(by_quota, last)


@dataclass
class _InstantCohort:
    """One cohort under a scheduler that takes no time: one pool of its quota."""

    capacity_m: int
    used_m: int = 0
    pending: list[tuple[int, float, int]] = field(default_factory=list)  # (-priority, arrival s, job), sorted
    running: dict[int, tuple[int, float]] = field(default_factory=dict)  # job -> (priority, start s)


def instant_reference_ms(config: GeneratorConfig) -> dict[str, int]:
    """Per class, the average time to admission of a scheduler that takes no time, on the same
    arrivals, runtimes and priorities: per cohort one pool of its ClusterQueues' nominal quotas
    (their borrowing limits are ignored), workloads admitted by priority then arrival, smaller
    ones passing a blocked one, and a workload that does not fit preempting lower-priority ones
    (the latest started first), which start over when readmitted, as Kueue's LowerPriority and
    reclaimWithinCohort policies allow. For the top-priority class no scheduler can do better;
    for the others it is what respecting the priorities costs."""
    queues = queue_specs(config)
    jobs = arrivals(queues)
    cohort_of = {q.name: q.cohort for q in queues}
    cohorts: dict[str, _InstantCohort] = {}
    for q in queues:
        cohorts.setdefault(q.cohort, _InstantCohort(0)).capacity_m += q.nominal_m
    events = [(a.at_ms / 1e3, 1, i, 0) for i, a in enumerate(jobs)]  # (time, 0 finish | 1 arrival, job, run)
    heapq.heapify(events)
    runs = [0] * len(jobs)  # a finish is for the job's latest run only
    admitted_at = [0.0] * len(jobs)
    dirty: set[str] = set()
    while events:
        now, kind, i, run = heapq.heappop(events)
        cohort = cohort_of[jobs[i].namespace]
        c = cohorts[cohort]
        t = jobs[i].template
        if kind == 1:
            bisect.insort(c.pending, (-t.priority, now, i))
        elif run == runs[i] and i in c.running:
            del c.running[i]
            c.used_m -= t.cpu_m
        else:
            continue  # that run was preempted
        dirty.add(cohort)
        if events and events[0][0] == now:
            continue  # schedule once everything due now is in
        for name in sorted(dirty):
            _instant_schedule(cohorts[name], jobs, now, runs, admitted_at, events)
        dirty.clear()
    waits: dict[str, list[float]] = defaultdict(list)
    for a, at in zip(jobs, admitted_at, strict=True):
        waits[a.template.class_name].append(at - a.at_ms / 1e3)
    return {c: int(sum(w) * 1000) // len(w) for c, w in sorted(waits.items())}


def _instant_schedule(c: _InstantCohort, jobs: list[Arrival], now: float, runs: list[int],
                      admitted_at: list[float], events: list[tuple[float, int, int, int]]) -> None:
    k = 0
    while k < len(c.pending):
        neg_priority, _, i = c.pending[k]
        t = jobs[i].template
        if c.capacity_m - c.used_m < t.cpu_m:
            victims = sorted((j for j, (p, _) in c.running.items() if p < -neg_priority),
                             key=lambda j: (c.running[j][0], -c.running[j][1]))
            if not victims and c.used_m == c.capacity_m:
                return  # nothing after it fits or may preempt
            chosen, free = [], c.capacity_m - c.used_m
            for j in victims:
                if free >= t.cpu_m:
                    break
                chosen.append(j)
                free += jobs[j].template.cpu_m
            if free < t.cpu_m:
                k += 1
                continue
            for j in chosen:
                del c.running[j]
                c.used_m -= jobs[j].template.cpu_m
                bisect.insort(c.pending, (-jobs[j].template.priority, jobs[j].at_ms / 1e3, j))
        c.pending.pop(k)
        c.used_m += t.cpu_m
        c.running[i] = (t.priority, now)
        runs[i] += 1
        admitted_at[i] = now
        heapq.heappush(events, (now + t.runtime_ms / 1e3, 0, i, runs[i]))


# ---------------------------------------------------------------- the recorder


@dataclass
class WorkloadRecord:
    class_name: str
    cluster_queue: str
    runtime_s: float
    created_s: float
    admissions: int = 0  # a finish scheduled for an earlier admission is stale
    admitted: bool = False
    time_to_admit_ms: int = 0
    finished_s: float | None = None
    evictions: int = 0


@dataclass
class QueueUsage:
    nominal_m: int
    usage_m: int = 0
    since_s: float = 0.0
    integral: float = 0.0  # milli-CPU x seconds

    def sample(self, usage_m: int, at_s: float) -> None:
        self.integral += self.usage_m * (at_s - self.since_s)
        self.usage_m, self.since_s = usage_m, at_s


class Recorder:
    """What Kueue's recorder keeps: workload transitions and ClusterQueue usage over time."""

    def __init__(self, queues: list[QueueSpec]) -> None:
        self.workloads: dict[str, WorkloadRecord] = {}
        self.queues = {q.name: QueueUsage(q.nominal_m) for q in queues}
        self.first_s = 0.0
        self.last_s = 0.0

    def created(self, key: str, t: WorkloadTemplate, cq: str, at_s: float) -> None:
        self.workloads[key] = WorkloadRecord(t.class_name, cq, t.runtime_ms / 1e3, at_s)

    def admitted(self, key: str, at_s: float) -> WorkloadRecord:
        rec = self.workloads[key]
        if not rec.admitted:  # the last time it was seen becoming Admitted
            rec.time_to_admit_ms = int((at_s - rec.created_s) * 1000)
        rec.admitted = True
        rec.admissions += 1
        return rec

    def evicted(self, key: str) -> None:
        rec = self.workloads[key]
        rec.evictions += 1
        rec.admitted = False

    def finished(self, key: str, at_s: float) -> None:
        self.workloads[key].finished_s = at_s

    def usage(self, cq: str, usage_m: int, at_s: float) -> None:
        q = self.queues[cq]
        if q.usage_m != usage_m:
            q.sample(usage_m, at_s)
            self.last_s = max(self.last_s, at_s)

    def close(self, at_s: float) -> None:
        for q in self.queues.values():
            q.sample(q.usage_m, at_s)
        self.last_s = at_s

    def usage_pct(self) -> float:
        window = self.last_s - self.first_s
        nominal = sum(q.nominal_m for q in self.queues.values())
        if window <= 0 or nominal == 0:
            return 0.0
        return sum(q.integral for q in self.queues.values()) * 100 / (nominal * window)

    def by_class(self) -> dict[str, list[WorkloadRecord]]:
        out: dict[str, list[WorkloadRecord]] = defaultdict(list)
        for rec in self.workloads.values():
            out[rec.class_name].append(rec)
        return dict(sorted(out.items()))

    def avg_time_to_admission_ms(self) -> dict[str, int]:
        """recorder.go WriteSummary: the sum of whole milliseconds // the count."""
        return {c: sum(r.time_to_admit_ms for r in recs) // len(recs) for c, recs in self.by_class().items()}

    def evictions_by_class(self) -> dict[str, int]:
        return {c: sum(r.evictions for r in recs) for c, recs in self.by_class().items()}


# ---------------------------------------------------------------- the replay


@dataclass
class EngineCalls:
    """Time spent in the engine, per kind of call; a cProfile of them when asked for."""

    profiler: cProfile.Profile | None = None
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    slowest_pass_s: float = 0.0

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        if self.profiler is not None:
            self.profiler.enable()
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            if self.profiler is not None:
                self.profiler.disable()
            self.seconds[what] += spent
            self.counts[what] += 1
            if what == "pass":
                self.slowest_pass_s = max(self.slowest_pass_s, spent)


class ReplayTimeout(RuntimeError):
    """The run did not finish in time, or can never finish (workloads no event will admit)."""


@dataclass
class ReplayResult:
    mode: str
    scale: float
    workloads: int
    wall_s: float
    setup_s: float
    replay_s: float
    cq_usage_pct: float
    avg_time_to_admission_ms: dict[str, int]
    evictions: int
    evictions_by_class: dict[str, int]
    physical_bound_s: float
    instant_reference_ms: dict[str, int]
    passes: int
    admissions: int
    engine_seconds: dict[str, float]
    slowest_pass_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall_s, 3), "cq_usage_pct": round(self.cq_usage_pct, 2),
            "avg_time_to_admission_ms": self.avg_time_to_admission_ms, "evictions": self.evictions,
            "mode": self.mode, "scale": self.scale, "workloads": self.workloads,
            "setup_s": round(self.setup_s, 3), "replay_s": round(self.replay_s, 3),
            "physical_bound_s": round(self.physical_bound_s, 3), "instant_reference_ms": self.instant_reference_ms,
            "evictions_by_class": self.evictions_by_class,
            "passes": self.passes, "admissions": self.admissions,
            "engine_s": {k: round(v, 3) for k, v in self.engine_seconds.items()},
            "slowest_pass_ms": round(self.slowest_pass_ms, 1),
        }


def finished_copy(wl: Workload, now: datetime) -> Workload:
    """The runner's controller: Finished True, reason ByTest."""
    return dataclasses.replace(wl, conditions=[*wl.conditions, Condition("Finished", "True", "ByTest",
                                                                          "By test runner", now)])


def released_copy(wl: Workload, now: datetime) -> Workload:
    """The runner's controller on an evicted workload (UnsetQuotaReservationWithCondition and
    SyncAdmittedCondition): no admission, QuotaReserved False (Pending), Admitted False
    (NoReservation); Evicted and Preempted stay True until Kueue readmits it."""
    kept = [c for c in wl.conditions if c.type not in ("QuotaReserved", "Admitted")]
    return dataclasses.replace(wl, admission=None, conditions=[
        *kept,
        Condition("QuotaReserved", "False", "Pending", "Evicted by the test runner", now),
        Condition("Admitted", "False", "NoReservation", "The workload has no reservation", now),
    ])


class Replay:
    mode = "engine"

    def __init__(self, config: GeneratorConfig, *, scale: float = 1.0, timestamps: str = "second",
                 timeout_s: float = DEFAULT_TIMEOUT_S, profile: bool = False) -> None:
        self.config = scaled(config, scale)
        self.scale = scale
        self.timestamps = timestamps
        self.timeout_s = timeout_s
        self.queues = queue_specs(self.config)
        self.arrivals = arrivals(self.queues)
        self.recorder = Recorder(self.queues)
        self.calls = EngineCalls(cProfile.Profile() if profile else None)
        self.finishes: list[tuple[float, int, str, int]] = []  # (due s, seq, key, admission number)
        self.next_arrival = 0
        self.finished = 0
        self.admissions = 0
        self.engine: Engine | None = None
        self.origin = 0.0  # perf_counter at the replay's start
        self.origin_dt = datetime.now(UTC)

    # ------------------------------------------------------------ clock

    def clock(self) -> float:
        return time.perf_counter() - self.origin

    def stamp(self, at_s: float) -> datetime:
        return self.origin_dt + timedelta(seconds=at_s)

    # ------------------------------------------------------------ setup

    def cold_start(self) -> Engine:
        """Nodes, Topology, flavor, ClusterQueues and LocalQueues, then one pass so that the
        engine's caches are built before the first workload arrives (as Kueue's are)."""
        objs = [*node_objects(self.config), *definition_objects(self.config)]
        for q in self.queues:
            objs += queue_objects(q, self.config.flavor_name)
        with self.calls.timed("cold start"):
            engine = Engine.from_parsed(parse(objs, self.config.file), FeatureGates.parse(GATES))
            engine.run_pass(datetime.now(UTC), cycles=1, bulk_results=False)
        return engine

    # ------------------------------------------------------------ events

    def next_due(self) -> float | None:
        times = []
        if self.next_arrival < len(self.arrivals):
            times.append(self.arrivals[self.next_arrival].at_ms / 1e3)
        if self.finishes:
            times.append(self.finishes[0][0])
        return min(times, default=None)

    def apply_due(self, engine: Engine, now_s: float) -> None:
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].at_ms / 1e3 <= now_s:
            self.arrive(engine, self.arrivals[self.next_arrival], self.clock())
            self.next_arrival += 1
        while self.finishes and self.finishes[0][0] <= now_s:
            _, _, key, admission = heapq.heappop(self.finishes)
            self.finish(engine, key, admission, self.clock())

    def arrive(self, engine: Engine, a: Arrival, at_s: float) -> None:
        obj = workload_object(a, self.stamp(at_s), self.timestamps)
        with self.calls.timed("parse"):
            wl = parse([obj], a.namespace).workloads[0]
        with self.calls.timed("upsert"):
            engine.upsert(wl)
        self.recorder.created(a.key, a.template, a.namespace, at_s)

    def finish(self, engine: Engine, key: str, admission: int, at_s: float) -> None:
        rec = self.recorder.workloads[key]
        if rec.admissions != admission or not rec.admitted:
            return  # preempted since: this run of it never completes
        wl = engine.state.workload(key)
        assert wl is not None and wl.is_admitted, f"{key}: due to finish but not admitted in the engine"
        with self.calls.timed("upsert"):
            engine.upsert(finished_copy(wl, self.stamp(at_s)))
        self.recorder.finished(key, at_s)
        rec.admitted = False
        self.finished += 1

    def observe(self, engine: Engine, outcome: PassOutcome, at_s: float) -> None:
        """What the runner sees of a cycle: admissions start runtimes, preemptions are released."""
        for key, result in outcome.decided.items():
            if result.status in (ADMITTED, QUOTA_RESERVED):
                rec = self.recorder.admitted(key, at_s)
                self.admissions += 1
                heapq.heappush(self.finishes, (at_s + rec.runtime_s, self.admissions, key, rec.admissions))
            elif result.status == PREEMPTED:
                self.recorder.evicted(key)
                wl = engine.state.workload(key)
                assert wl is not None
                with self.calls.timed("upsert"):
                    engine.upsert(released_copy(wl, self.stamp(at_s)))

    def sample_usage(self, engine: Engine, at_s: float) -> None:
        for name, node in engine.state.quota.queues.items():
            self.recorder.usage(name, sum(v for fr, v in node.usage.items() if fr.resource == CPU), at_s)

    # ------------------------------------------------------------ the loop

    def run(self) -> ReplayResult:
        start = time.perf_counter()
        engine = self.engine = self.cold_start()
        self.origin = time.perf_counter()
        self.origin_dt = datetime.now(UTC)
        setup_s = self.origin - start
        total = len(self.arrivals)
        while self.finished < total:
            now_s = self.clock()
            if now_s > self.timeout_s:
                raise ReplayTimeout(f"{self.finished} of {total} workloads finished after {self.timeout_s:.0f} s")
            self.apply_due(engine, now_s)
            self.sample_usage(engine, self.clock())
            with self.calls.timed("pass"):
                outcome = engine.run_pass(self.stamp(self.clock()), cycles=1, bulk_results=False)
            seen_s = self.clock()
            self.observe(engine, outcome, seen_s)
            self.sample_usage(engine, seen_s)
            if not outcome.decided and self.finished < total:  # no heads: nothing to do until something is due
                self.wait_for_next_event(total)
        end_s = self.recorder.last_s  # the usage drop of the last finish: Kueue's last ClusterQueue event
        self.recorder.close(end_s)
        return self.result(setup_s, end_s)

    def wait_for_next_event(self, total: int) -> None:
        due = self.next_due()
        if due is None:
            pending = total - self.finished
            raise ReplayTimeout(f"{pending} workloads can never finish: nothing is due and no cycle admits them")
        delay = due - self.clock()
        if delay > 0:
            time.sleep(delay)

    def result(self, setup_s: float, end_s: float) -> ReplayResult:
        rec = self.recorder
        evictions = rec.evictions_by_class()
        return ReplayResult(
            mode=self.mode, scale=self.scale, workloads=len(self.arrivals), wall_s=setup_s + end_s, setup_s=setup_s,
            replay_s=end_s, cq_usage_pct=rec.usage_pct(), avg_time_to_admission_ms=rec.avg_time_to_admission_ms(),
            evictions=sum(evictions.values()), evictions_by_class=evictions,
            physical_bound_s=physical_bound_s(self.config), instant_reference_ms=instant_reference_ms(self.config),
            passes=self.calls.counts["pass"],
            admissions=self.admissions, engine_seconds=dict(self.calls.seconds),
            slowest_pass_ms=self.calls.slowest_pass_s * 1e3)


def replay(config: GeneratorConfig, *, scale: float = 1.0, timestamps: str = "second",
           timeout_s: float = DEFAULT_TIMEOUT_S, profile: bool = False) -> tuple[ReplayResult, Replay]:
    """Run the replay of `config` with its counts x `scale`; the result and the replay (its recorder,
    its profile)."""
    run = Replay(config, scale=scale, timestamps=timestamps, timeout_s=timeout_s, profile=profile)
    return run.run(), run


# ---------------------------------------------------------------- output


def resolve(path: Path) -> Path:
    """A path as given if it exists from here, else relative to the repository root."""
    if path.is_absolute() or path.exists():
        return path
    return (ROOT / path).resolve()


def ratio(ours: float, theirs: float | None) -> str:
    if not theirs:
        return "-"
    return f"{ours / theirs:.3f}"


def report(result: ReplayResult, means: KueueMeans) -> str:
    """The measures beside Kueue's means, and beside what no scheduler can beat (the physical
    bound) or what an instant one would get (`instant_reference_ms`)."""
    rows = [("measure", f"this {result.mode}", "Kueue mean", "ratio", "bound / instant")]
    rows.append(("wall time (s)", f"{result.wall_s:.1f}", f"{means.wall_ms / 1e3:.1f}",
                 ratio(result.wall_s, means.wall_ms / 1e3), f"{result.physical_bound_s:.1f}"))
    kueue_usage = next(iter(means.usage_pct.values()), None)
    rows.append(("ClusterQueue usage (%)", f"{result.cq_usage_pct:.1f}",
                 f"{kueue_usage:.1f}" if kueue_usage is not None else "-", ratio(result.cq_usage_pct, kueue_usage),
                 ""))
    for cls, ms in result.avg_time_to_admission_ms.items():
        theirs = means.avg_time_to_admission_ms.get(cls)
        rows.append((f"avg time to admission, {cls} (ms)", str(ms), f"{theirs:.0f}" if theirs else "-",
                     ratio(ms, theirs), str(result.instant_reference_ms.get(cls, "-"))))
    rows.append(("evictions", str(result.evictions), "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join([r[0].ljust(widths[0]), *(v.rjust(w) for v, w in zip(r[1:], widths[1:], strict=True))])
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    engine = ", ".join(f"{k} {v:.1f} s" for k, v in result.engine_seconds.items())
    lines += [
        "",
        "bound: total cpu-seconds of work / total quota (no scheduler finishes sooner); instant: a scheduler",
        "that takes no time, same arrivals, quotas and priorities (see instant_reference_ms)",
        f"{result.workloads} workloads (scale {result.scale:g}), {result.admissions} admissions, "
        f"{result.passes} passes (slowest {result.slowest_pass_ms:.0f} ms); setup {result.setup_s:.1f} s, "
        f"replay {result.replay_s:.1f} s",
        f"{'engine' if result.mode == 'engine' else 'time spent'}: {engine}",
    ]
    return "\n".join(lines)


def profile_report(profiler: cProfile.Profile, top: int = 30) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="Kueue generator.yaml")
    ap.add_argument("--rangespec", type=Path, default=DEFAULT_RANGESPEC, help="Kueue rangespec.yaml (means)")
    ap.add_argument("--scale", type=float, default=1.0, help="workloads set counts x F (intervals kept)")
    ap.add_argument("--json", type=Path, help="write the measures here")
    ap.add_argument("--mode", choices=MODES, default="engine")
    ap.add_argument("--timestamps", choices=("second", "ms"), default="second",
                    help="creation timestamp resolution (Kubernetes stores seconds)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="give up after S seconds of replay")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the engine calls (stack mode: the worker's tasks) and print the top costs")
    stack = ap.add_argument_group("stack mode (see kueue_perf_stack.py)")
    stack.add_argument("--database", default="kueue_perf_stack",
                       help="the throwaway PostgreSQL database, on DATABASE_URL's server")
    stack.add_argument("--keep", action="store_true", help="keep the database afterwards")
    stack.add_argument("--redis-url", default="redis://127.0.0.1:6379/9", help="the Redis database of the run")
    stack.add_argument("--poll-ms", type=float, default=25.0, help="how often the database is polled for admissions")
    stack.add_argument("--per-object-writes", action="store_true",
                       help="write each finish and release with object_upsert (default: one bulk update a burst)")
    args = ap.parse_args(argv)
    if args.scale <= 0:
        ap.error("--scale must be > 0")
    if args.poll_ms <= 0:
        ap.error("--poll-ms must be > 0")
    try:
        config = load_config(resolve(args.config))
        means = read_rangespec(resolve(args.rangespec))
    except ConfigError as exc:
        print(f"kueue_perf_tas: {exc}", file=sys.stderr)
        return 2
    if args.mode == "stack":
        return stack_main(args, config, means)
    try:
        result, run = replay(config, scale=args.scale, timestamps=args.timestamps, timeout_s=args.timeout,
                             profile=args.profile)
    except ReplayTimeout as exc:
        print(f"kueue_perf_tas: {exc}", file=sys.stderr)
        return 1
    print(report(result, means))
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    if run.calls.profiler is not None:
        print(profile_report(run.calls.profiler))
    return 0


def stack_main(args: argparse.Namespace, config: GeneratorConfig, means: KueueMeans) -> int:
    """--mode stack: the replay against the running service (kueue_perf_stack.py)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    # run as a script, this module is __main__: the stack module uses this very module
    this = sys.modules.get(__name__)
    if this is not None and getattr(this, "stack_main", None) is stack_main:
        sys.modules.setdefault("kueue_perf_tas", this)
    import kueue_perf_stack as stack

    options = stack.StackOptions(database=args.database, redis_url=args.redis_url, keep=args.keep,
                                 poll_s=args.poll_ms / 1e3, profile=args.profile,
                                 bulk_writes=not args.per_object_writes)
    try:
        result, _, details = stack.run(config, options, scale=args.scale, timestamps=args.timestamps,
                                       timeout_s=args.timeout)
    except (ReplayTimeout, stack.perf.ReplayTimeout, stack.StackError) as exc:
        print(f"kueue_perf_tas: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kueue_perf_tas: interrupted", file=sys.stderr)
        return 130
    print(report(result, means))
    print(details)
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
