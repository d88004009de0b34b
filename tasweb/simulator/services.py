"""Writes of the simulator: seeding the cluster of the embedded default and advancing it.

The simulator plays every part of a cluster except Kueue's TAS, which the engine plays: the
API server (objects with uids and increasing resourceVersions, written to the mirror only
through tasweb.cluster.services), ML users (jobs arrive, and leave when they wait too long),
the Job controllers (pods created gated once a workload is admitted, replaced when they
fail, stopped on eviction), the kube-scheduler and kubelets (ungated pods bound to the node
their selector names and started; jobs finish after their runtime) and the hardware (nodes
fail and recover, operators drain and uncordon them).

A tick is one transaction: a crash mid-tick leaves the previous state.
"""

from __future__ import annotations

import copy
import itertools
import logging
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max, QuerySet
from django.utils import timezone

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.errors import InputError
from scheduler.model import STOP_NONE
from tasweb.cluster import models as cluster
from tasweb.cluster.models import KINDS, WAITING_STATUSES, WorkloadStatus
from tasweb.cluster.services import (
    _row_values,
    flavor_levels_cached,
    object_delete,
    object_uid,
    object_upsert,
    rows_insert,
    stop_policy_of,
)
from tasweb.core.queries import json_key
from tasweb.scheduling.services import kueue_configuration, workload_deleted, workload_observed
from tasweb.simulator import objects as k8s
from tasweb.simulator.config import SimulatorSettings, simulator_settings, stand_in_kueue
from tasweb.simulator.models import SimulatorState

logger = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
WAITING = WAITING_STATUSES
REQUEUED_AT_ONCE = frozenset({"Preempted", "NodeFailures"})  # evictions whose Requeued is True at once
BACKOFF_REASONS = frozenset({"PodsReadyTimeout", "AdmissionCheck"})  # requeued when their backoff is over
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"  # Kueue's ProvisioningRequest checks
# What a drain leaves on a node: `kubectl drain` cordons it, and the node lifecycle
# controller turns the cordon into this taint.
DRAIN_TAINT_KEY = "node.kubernetes.io/unschedulable"
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
STATE_ID = 1
# objects a bulk write holds and sends at once: bounded memory, few statements
WRITE_BATCH = 5_000
# Random nodes a fault looks at when no node running jobs qualifies: every node of a small
# cluster, and plenty on a large one (most of its nodes are in service).
FALLBACK_DRAWS = 256
# nodes whose health one query checks while picking where a fault strikes
HEALTH_CHECK_BATCH = 32


# ---------------------------------------------------------------- helpers


def _duration(seconds: float) -> str:
    """A wait as people say it: 45 s, 15 min, 2 h 5 min."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    return status.setdefault("conditions", [])


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(status: dict[str, Any], kind: str, value: str, reason: str, message: str, now: datetime) -> None:
    """Kubernetes' SetStatusCondition: lastTransitionTime moves only when the status changes."""
    existing = _condition(status, kind)
    if existing is None:
        _conditions(status).append({"type": kind, "status": value, "reason": reason, "message": message,
                                    "lastTransitionTime": k8s.rfc3339(now)})
        return
    if existing.get("status") != value:
        existing["lastTransitionTime"] = k8s.rfc3339(now)
    existing.update({"status": value, "reason": reason, "message": message})


def poisson(rng: random.Random, mean: float) -> int:
    """How many events of a Poisson process with this mean happen in one tick."""
    if mean <= 0:
        return 0
    if mean > 30:  # the normal approximation is plenty for large means, and O(1)
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def _initial_resource_version() -> int:
    """Start above anything already in the mirror (e.g. objects imported from files)."""
    highest = 0
    for model in KINDS.values():
        value = model.objects.aggregate(top=Max("rv_number"))["top"]
        highest = max(highest, value or 0)
    return highest


def _state_for_update(config: SimulatorSettings) -> SimulatorState:
    """The simulator's row, locked for this transaction (two ticks never interleave)."""
    state = SimulatorState.objects.select_for_update().filter(pk=STATE_ID).first()
    if state is None:
        SimulatorState.objects.get_or_create(
            pk=STATE_ID, defaults={"seed": config.seed, "resource_version": _initial_resource_version()})
        state = SimulatorState.objects.select_for_update().get(pk=STATE_ID)
    return state


class ClusterWriter:
    """Writes objects to the mirror as the API server would: each write gets the next resourceVersion."""

    def __init__(self, state: SimulatorState) -> None:
        self.state = state
        self.writes = 0

    def stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.state.resource_version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.state.resource_version)
        return obj

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        object_upsert(kind=kind, obj=self.stamp(obj))
        self.writes += 1

    def delete(self, kind: str, obj: dict[str, Any]) -> None:
        if object_delete(kind=kind, obj=obj):
            self.writes += 1

    def create_all(self, kind: str, objects: Iterable[dict[str, Any]]) -> int:
        """Create many objects, `WRITE_BATCH` at a time: the new ones in one bulk insert (COPY
        on PostgreSQL) a batch, any that exist already one by one, as updates. `objects` may
        be a generator: only one batch of them is held at once. Returns how many were written."""
        model = KINDS[kind]
        written = 0
        for batch in _batches(objects, WRITE_BATCH):
            stamped = {object_uid(kind, obj): self.stamp(obj) for obj in batch}
            existing = set(model.objects.filter(uid__in=stamped).values_list("uid", flat=True))
            # _row_values is the mirror's own row builder, so rows written here are the rows
            # object_upsert would write; the mirror has no public bulk insert of objects
            with flavor_levels_cached():  # every row built (and checked) before the COPY starts
                rows = [{"uid": uid, **_row_values(kind, obj)} for uid, obj in stamped.items() if uid not in existing]
            rows_insert(model=model, rows=rows)
            for uid in existing:
                object_upsert(kind=kind, obj=stamped[uid])
            written += len(stamped)
        self.writes += written
        return written

    def delete_all(self, kind: str, uids: Iterable[str]) -> int:
        """Delete objects by uid, `WRITE_BATCH` a statement; returns how many were there."""
        model = KINDS[kind]
        deleted = 0
        for batch in _batches(uids, WRITE_BATCH):
            deleted += model.objects.filter(uid__in=batch).delete()[0]
        self.writes += deleted
        return deleted


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


# ---------------------------------------------------------------- seeding


@dataclass
class SeedReport:
    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    nodes: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def summary(self) -> str:
        def part(label: str, counts: dict[str, int]) -> str:
            return f"{label} " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))

        parts = [part(label, counts) for label, counts in
                 (("created", self.created), ("updated", self.updated), ("deleted", self.deleted)) if counts]
        return f"{self.nodes} nodes; " + ("; ".join(parts) if parts else "already seeded, nothing changed")


def _same_definition(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    keys = ("spec", "value", "description")
    return all(stored.get(k) == wanted.get(k) for k in keys)


def simulator_seed(*, config: SimulatorSettings | None = None, now: datetime | None = None) -> SeedReport:
    """Make the mirror hold the generated cluster: the Topology, the TAS ResourceFlavor, the
    ClusterQueue sized to the cluster, LocalQueues, priority classes, the nodes and the pods
    that run outside Kueue on them.

    Idempotent: what exists is left as it is (a node the simulation failed stays failed);
    what is missing is created; nodes beyond the configured shape are removed.
    """
    config = config or simulator_settings()
    now = now or timezone.now()
    report = SeedReport(nodes=config.node_count)
    with transaction.atomic():
        state = _state_for_update(config)
        writer = ClusterWriter(state)
        _seed_kueue_objects(writer, report, config, now)
        names, stamp = k8s.node_names(config), k8s.rfc3339(now)
        _seed_nodes(writer, report, config, names, stamp)
        _seed_infra_pods(writer, report, config, names, stamp)

        state.shape = {"blocks": config.blocks, "racks_per_block": config.racks_per_block,
                       "nodes_per_rack": config.nodes_per_rack, "gpus_per_node": config.gpus_per_node}
        state.seeded_at = state.seeded_at or now
        in_shape = set(names)
        state.outages = {name: outage for name, outage in state.outages.items() if name in in_shape}
        state.save()
    # DEBUG: the commands that seed (tas_seed, tas_run) print the summary themselves
    logger.debug("simulator seed: %s", report.summary())
    return report


def _count(counts: dict[str, int], kind: str, n: int) -> None:
    if n:
        counts[kind] = counts.get(kind, 0) + n


def _seed_kueue_objects(writer: ClusterWriter, report: SeedReport, config: SimulatorSettings,
                        now: datetime) -> None:
    for kind, wanted in k8s.kueue_objects(config, now).items():
        # by name: an object of that name from elsewhere (e.g. a file import) is adopted
        stored = {(row.namespace, row.name): row for row in
                  KINDS[kind].objects.filter(name__in=[o["metadata"]["name"] for o in wanted])}
        for obj in wanted:
            row = stored.get((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
            if row is None:
                writer.put(kind, obj)
                _count(report.created, kind, 1)
            elif not _same_definition(row.raw, obj):
                updated = {**row.raw, **{k: v for k, v in obj.items() if k != "metadata"}}
                writer.put(kind, updated)
                _count(report.updated, kind, 1)


# Nodes and the pods outside Kueue are compared by name, and only the missing ones are built,
# one batch at a time as they are written: reseeding a 100,000-node cluster reads a few
# columns and writes nothing, and seeding it never holds more than a batch of objects.


def _seed_nodes(writer: ClusterWriter, report: SeedReport, config: SimulatorSettings, names: list[str],
                stamp: str) -> None:
    stored = dict(cluster.Node.objects.values_list("name", "uid"))
    wanted = set(names)
    _count(report.deleted, "Node", writer.delete_all("Node", (stored[name] for name in sorted(stored)
                                                              if name not in wanted)))
    missing = (k8s.node_from_name(config, name, stamp) for name in names if name not in stored)
    _count(report.created, "Node", writer.create_all("Node", missing))


def _seed_infra_pods(writer: ClusterWriter, report: SeedReport, config: SimulatorSettings, names: list[str],
                     stamp: str) -> None:
    wanted = k8s.infra_pod_keys(config, names)
    stored = {(ns, name): uid for ns, name, uid in cluster.Pod.objects.filter(
        namespace__in=k8s.INFRA_NAMESPACES, workload_name="").values_list("namespace", "name", "uid")}
    _count(report.deleted, "Pod", writer.delete_all("Pod", (stored[key] for key in sorted(stored)
                                                            if key not in wanted)))
    missing = (k8s.infra_pod_object(config, ns, name, node, stamp)
               for (ns, name), node in wanted.items() if (ns, name) not in stored)
    _count(report.created, "Pod", writer.create_all("Pod", missing))


# ---------------------------------------------------------------- ticks


@dataclass
class TickReport:
    tick: int
    at: datetime
    seconds: float  # simulated time since the previous tick
    arrivals: int = 0
    pods_created: int = 0
    pods_bound: int = 0
    pods_failed: int = 0
    pods_deleted: int = 0
    completions: int = 0
    requeued: int = 0
    gave_up: int = 0
    workloads_deleted: int = 0
    kueue_admitted: int = 0  # admissions of the stand-in Kueue (TAS_SIM_KUEUE_PROFILE)
    checks_provisioned: int = 0  # ProvisioningRequest checks turned Ready
    checks_retried: int = 0  # ... turned Retry (the request failed)
    checks_rejected: int = 0  # ... turned Rejected (it failed past the retry limit)
    failures: list[str] = field(default_factory=list)
    drains: list[str] = field(default_factory=list)
    recoveries: list[str] = field(default_factory=list)
    writes: int = 0

    COUNTED = ("arrivals", "pods_created", "pods_bound", "pods_failed", "pods_deleted", "completions",
               "requeued", "gave_up", "workloads_deleted", "kueue_admitted", "checks_provisioned", "checks_retried",
               "checks_rejected")

    def counts(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in self.COUNTED}
        out.update(failures=len(self.failures), drains=len(self.drains), recoveries=len(self.recoveries))
        return out

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["at"] = self.at.isoformat()
        return data

    def summary(self) -> str:
        parts = [f"{n} {name.replace('_', ' ')}" for name, n in self.counts().items()
                 if n and name not in ("failures", "drains", "recoveries")]
        for label, nodes in (("failed", self.failures), ("drained", self.drains), ("recovered", self.recoveries)):
            if nodes:
                parts.append(f"{label} {', '.join(nodes)}")
        return f"tick {self.tick}: " + (", ".join(parts) if parts else "quiet")


def admitted_pods(wl: cluster.Workload) -> int:
    """The pods the workload's admission counts (0 without one)."""
    admission = (wl.raw.get("status") or {}).get("admission") or {}
    return sum(int(psa.get("count") or 0) for psa in admission.get("podSetAssignments") or [])


class Tick:
    """One step of the simulated cluster. Each method plays one actor of a real cluster."""

    def __init__(self, state: SimulatorState, config: SimulatorSettings, now: datetime, rng: random.Random,
                 report: TickReport) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.rng = rng
        self.report = report
        self.writer = ClusterWriter(state)
        self.minutes = report.seconds / 60
        self._namespaces: list[str] | None = None
        self._busy: list[str] | None = None

    def run(self) -> None:
        self.recover_nodes()
        self.requeue_evicted()
        self.reconcile_requeued()
        self.provision()
        self.bind_ungated_pods()
        self.track_pods_ready()
        self.finish_completed()
        self.fail_nodes()
        self.drain_nodes()
        self.create_pods()
        self.collect_garbage()
        self.submit_jobs()
        self.kueue_admits()
        self.report.writes = self.writer.writes

    # ------------------------------------------------------------ the cluster autoscaler

    def provision(self) -> None:
        """The cluster autoscaler behind Kueue's ProvisioningRequest admission checks: the
        Pending check of a workload holding a reservation turns Ready once its request has taken
        `provisioning_seconds`; `provisioning_failure_fraction` of the requests fail instead, and
        the check goes to Retry with the delay Kueue's retry strategy asks for
        (requeueAfterSeconds: the base doubled per retry the check counts, at most the maximum),
        or to Rejected once it has been retried `provisioning_retry_limit` times. Checks of other
        controllers are left as they are (no controller of theirs runs here)."""
        names = set(cluster.AdmissionCheck.objects.filter(controller_name=PROVISIONING_CONTROLLER)
                    .values_list("name", flat=True))
        if not names:
            return
        for wl in cluster.Workload.objects.filter(status=WorkloadStatus.QUOTA_RESERVED).order_by("namespace", "name"):
            raw = copy.deepcopy(wl.raw)
            checks = (raw.get("status") or {}).get("admissionChecks") or []
            due = [c for c in checks if c.get("name") in names and (c.get("state") or "Pending") == "Pending"
                   and self.provisioned_by(c)]
            for check in due:
                self.provision_one(check)
            if due:
                self.put_workload(wl, raw)

    def provisioned_by(self, check: dict[str, Any]) -> bool:
        """Whether the check's request has run its time (counted from the check's last transition)."""
        since = _parse_time(check.get("lastTransitionTime"))
        return since is not None and (self.now - since).total_seconds() >= self.config.provisioning_seconds

    def provision_one(self, check: dict[str, Any]) -> None:
        config = self.config
        retries = int(check.get("retryCount") or 0)
        check["lastTransitionTime"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.rng.random() >= config.provisioning_failure_fraction:
            check.update(state="Ready", message="the ProvisioningRequest is provisioned (simulated autoscaler)")
            self.report.checks_provisioned += 1
        elif retries >= config.provisioning_retry_limit:
            check.update(state="Rejected", message=f"the ProvisioningRequest failed after {retries} retries "
                                                   "(simulated autoscaler)")
            self.report.checks_rejected += 1
        else:
            delay = min(config.provisioning_backoff_base_seconds * 2 ** retries,
                        config.provisioning_backoff_max_seconds)
            check.update(state="Retry", message="the ProvisioningRequest failed (simulated autoscaler)",
                         requeueAfterSeconds=int(delay))
            self.report.checks_retried += 1

    # ------------------------------------------------------------ Kueue, when the simulator has one

    def kueue_admits(self) -> None:
        """The stand-in Kueue's pass (`tasweb.simulator.kueue`), when the settings give the
        cluster one; otherwise the service's engine admits, in its scheduling passes."""
        if not stand_in_kueue(self.config):
            return
        from tasweb.simulator.kueue import stand_in_kueue_run

        kueue = stand_in_kueue_run(writer=self.writer, config=self.config, now=self.now)
        self.report.kueue_admitted += kueue.admitted
        self.report.pods_failed += kueue.pods_failed

    # ------------------------------------------------------------ hardware and operators

    def recover_nodes(self) -> None:
        due = sorted(name for name, outage in self.state.outages.items()
                     if (_parse_time(outage.get("until")) or self.now) <= self.now)
        rows = {row.name: row for row in cluster.Node.objects.filter(name__in=due)}
        for name in due:
            outage = self.state.outages.pop(name)
            row = rows.get(name)
            if row is None:
                continue
            raw = copy.deepcopy(row.raw)
            if outage.get("kind") == "drain":
                spec = raw.setdefault("spec", {})
                spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") != DRAIN_TAINT_KEY]
                if not spec["taints"]:
                    spec.pop("taints")
                spec.pop("unschedulable", None)
            else:
                status = raw.setdefault("status", {})
                status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
                status["conditions"].append(k8s.ready_condition(True, self.now))
            self.writer.put("Node", raw)
            self.report.recoveries.append(name)

    def job_namespaces(self) -> list[str]:
        """Where pods of workloads are: the simulator's namespaces and those of any workload.
        Filtering pods on these goes through the (namespace, workload) index and never reads
        the pods that run outside Kueue on every node."""
        if self._namespaces is None:
            stored = cluster.Workload.objects.order_by("namespace").values_list("namespace", flat=True).distinct()
            self._namespaces = sorted(set(k8s.NAMESPACES) | set(stored))
        return self._namespaces

    def busy_nodes(self) -> list[str]:
        """Nodes running pods of TAS workloads, read once per tick."""
        if self._busy is None:
            pods = cluster.Pod.objects.filter(namespace__in=self.job_namespaces(), tas=True, phase="Running")
            self._busy = sorted(set(pods.exclude(node_name="").values_list("node_name", flat=True)))
        return self._busy

    def pick_nodes(self, rate: float) -> list[str]:
        """Ready, schedulable nodes in service, preferring those that run pods of TAS
        workloads (a GPU fault shows under load, and an idle node's failure would have
        nothing to show). Candidates are drawn at random and checked as they are drawn, so a
        pick reads a few nodes, not the cluster."""
        count = poisson(self.rng, rate * self.minutes)
        if not count:
            return []
        # out of service (those picked earlier in this tick too), or back in service only just now
        excluded = set(self.state.outages) | set(self.report.recoveries)
        busy = [name for name in self.busy_nodes() if name not in excluded]
        picked = self.first_healthy(self.rng.sample(busy, len(busy)), count)
        if not picked:
            drawn = self.random_node_names(FALLBACK_DRAWS)
            picked = self.first_healthy([name for name in drawn if name not in excluded], count)
        return picked

    def random_node_names(self, draws: int) -> list[str]:
        """Up to `draws` distinct nodes of the seeded shape, uniformly at random: every node
        of a small cluster, in random order."""
        shape = {key: int(self.state.shape.get(key) or getattr(self.config, key))
                 for key in ("blocks", "racks_per_block", "nodes_per_rack")}
        racks, per_rack = shape["racks_per_block"], shape["nodes_per_rack"]
        total = shape["blocks"] * racks * per_rack
        return [k8s.node_name(k // (racks * per_rack) + 1, k // per_rack % racks + 1, k % per_rack + 1)
                for k in self.rng.sample(range(total), min(total, draws))]

    def first_healthy(self, names: list[str], count: int) -> list[str]:
        """The first `count` of `names` that are ready, schedulable and untainted, read a
        few at a time by name."""
        picked: list[str] = []
        for start in range(0, len(names), HEALTH_CHECK_BATCH):
            chunk = names[start:start + HEALTH_CHECK_BATCH]
            healthy = set(cluster.Node.objects.filter(name__in=chunk, ready="True", unschedulable=False, taints=[])
                          .values_list("name", flat=True))
            picked.extend(name for name in chunk if name in healthy)
            if len(picked) >= count:
                break
        return picked[:count]

    def outage_until(self, low: float, high: float) -> str:
        return k8s.rfc3339(self.now + timedelta(seconds=self.rng.uniform(low, high)))

    def fail_nodes(self) -> None:
        for name in self.pick_nodes(self.config.node_failures_per_minute):
            row = cluster.Node.objects.get(name=name)
            raw = copy.deepcopy(row.raw)
            status = raw.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
            status["conditions"].append(k8s.ready_condition(False, self.now))
            self.writer.put("Node", raw)
            self.state.outages[name] = {"kind": "failure", "since": k8s.rfc3339(self.now),
                                        "until": self.outage_until(self.config.failure_min_seconds,
                                                                   self.config.failure_max_seconds)}
            self.report.failures.append(name)
            # the pods of TAS workloads there die with it, which is what Kueue's
            # TASReplaceNodeOnPodTermination waits for
            self.stop_pods_on(name, reason="NodeLost", message=f"Node {name} which was running the pod is "
                                                                f"not ready")

    def drain_nodes(self) -> None:
        for name in self.pick_nodes(self.config.drains_per_minute):
            row = cluster.Node.objects.get(name=name)
            raw = copy.deepcopy(row.raw)
            spec = raw.setdefault("spec", {})
            spec["unschedulable"] = True
            spec["taints"] = [*(t for t in spec.get("taints") or [] if t.get("key") != DRAIN_TAINT_KEY),
                              {"key": DRAIN_TAINT_KEY, "effect": "NoSchedule", "timeAdded": k8s.rfc3339(self.now)}]
            self.writer.put("Node", raw)
            self.state.outages[name] = {"kind": "drain", "since": k8s.rfc3339(self.now),
                                        "until": self.outage_until(self.config.drain_min_seconds,
                                                                   self.config.drain_max_seconds)}
            self.report.drains.append(name)
            self.stop_pods_on(name, reason="Evicted", message=f"The node {name} was drained for maintenance",
                              disruption="EvictionByEvictionAPI")

    def stop_pods_on(self, node: str, *, reason: str, message: str, disruption: str = "") -> None:
        rows = cluster.Pod.objects.filter(node_name=node, tas=True).exclude(phase__in=TERMINAL_PHASES)
        for row in rows.order_by("namespace", "name"):
            self.set_pod_terminal(row.raw, "Failed", reason, message, disruption=disruption)

    def set_pod_terminal(self, raw: dict[str, Any], phase: str, reason: str, message: str, *,
                         disruption: str = "") -> None:
        pod = copy.deepcopy(raw)
        status = pod.setdefault("status", {})
        status.update(phase=phase, reason=reason, message=message)
        set_condition(status, "Ready", "False", "PodCompleted" if phase == "Succeeded" else "PodFailed", message,
                      self.now)
        if disruption:
            set_condition(status, "DisruptionTarget", "True", disruption, message, self.now)
        self.writer.put("Pod", pod)
        if phase == "Failed":
            self.report.pods_failed += 1

    # ------------------------------------------------------------ kube-scheduler and kubelets

    def bind_ungated_pods(self) -> None:
        """Pods the ungater released go to the node their hostname selector names and start;
        a pod whose node is gone or not ready fails (its replacement gets a new place)."""
        rows = list(cluster.Pod.objects.filter(tas=True, gated=False, node_name="", phase="Pending",
                                               deleting=False).order_by("namespace", "name"))
        if not rows:
            return
        selectors = {row.id: dict((row.raw.get("spec") or {}).get("nodeSelector") or {}) for row in rows}
        hosts = {s.get(HOSTNAME_LABEL) for s in selectors.values()} - {None}
        nodes = {n.hostname: n for n in cluster.Node.objects.filter(hostname__in=hosts)}
        for row in rows:
            selector = selectors[row.id]
            node = nodes.get(selector.get(HOSTNAME_LABEL, "")) if HOSTNAME_LABEL in selector else \
                self.node_matching(selector)
            if node is None or node.ready != "True":
                target = selector.get(HOSTNAME_LABEL, "a node matching its selector")
                self.set_pod_terminal(row.raw, "Failed", "NodeNotReady", f"{target} is not ready to run the pod")
                continue
            if node.unschedulable or any(t.get("effect") in SCHEDULING_EFFECTS for t in node.taints):
                continue  # stays Pending: Kueue's node-failure handling terminates it and moves its slot
            pod = copy.deepcopy(row.raw)
            pod.setdefault("spec", {})["nodeName"] = node.name
            started = k8s.rfc3339(self.now)
            pod["status"] = {
                "phase": "Running", "hostIP": f"10.0.{node.id // 250 % 250}.{node.id % 250}",
                "startTime": started,
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": started}
                               for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            }
            self.writer.put("Pod", pod)
            self.report.pods_bound += 1

    def node_matching(self, selector: dict[str, str]) -> cluster.Node | None:
        """A ready, schedulable node with every label of the selector (assignments above the host level)."""
        query = cluster.Node.objects.filter(ready="True", unschedulable=False, taints=[])
        for key, value in selector.items():
            query = query.filter(**{f"labels__{key}": value})
        return query.order_by("name").first()

    # ------------------------------------------------------------ Job controllers

    def admitted_workloads(self) -> list[cluster.Workload]:
        return list(cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED, invalid_reason="")
                    .order_by("namespace", "name"))

    def pods_of(self, workloads: list[cluster.Workload]) -> QuerySet[cluster.Pod]:
        """The pods of these workloads, found through the (namespace, workload) index. The
        filter also lets through a namesake's pods in another of their namespaces: callers
        key what they read by (namespace, workload)."""
        return cluster.Pod.objects.filter(namespace__in={w.namespace for w in workloads},
                                          workload_name__in={w.name for w in workloads})

    def create_pods(self) -> None:
        """Every admitted workload has one live pod per index of each PodSet: the Job controller
        creates them (and replacements for failed ones), Kueue's webhook gates them."""
        workloads = self.admitted_workloads()
        if not workloads:
            return
        live: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        pods = (self.pods_of(workloads).exclude(phase__in=TERMINAL_PHASES)
                .annotate(index=json_key("raw", "metadata", "labels", k8s.INDEX_LABEL))
                .values_list("namespace", "workload_name", "pod_set", "index"))
        for namespace, workload, pod_set, index in pods:
            live[(namespace, workload, pod_set)].add(str(index))
        flavors = dict(cluster.ResourceFlavor.objects.values_list("name", "node_labels"))
        created: list[dict[str, Any]] = []
        for wl in workloads:
            admission = (wl.raw.get("status") or {}).get("admission") or {}
            spec_sets = {ps.get("name"): ps for ps in (wl.raw.get("spec") or {}).get("podSets") or []}
            for psa in admission.get("podSetAssignments") or []:
                pod_set = spec_sets.get(psa.get("name"))
                if pod_set is None:
                    continue
                count = int(psa.get("count") if psa.get("count") is not None else pod_set.get("count", 1))
                node_labels: dict[str, str] = {}
                for flavor in sorted(set((psa.get("flavors") or {}).values())):
                    node_labels.update(flavors.get(flavor) or {})
                have = live[(wl.namespace, wl.name, pod_set["name"])]
                created.extend(k8s.workload_pod(wl.raw, pod_set, index, node_labels, self.rng, self.now)
                               for index in range(count) if str(index) not in have)
        # in bulk: a burst of admissions brings thousands of pods in one tick
        self.report.pods_created += self.writer.create_all("Pod", created)

    def running_pods(self, workloads: list[cluster.Workload]) -> dict[tuple[str, str], int]:
        """Running pods per (namespace, workload)."""
        return {(row["namespace"], row["workload_name"]): row["n"] for row in
                self.pods_of(workloads).filter(phase="Running")
                .values("namespace", "workload_name").annotate(n=Count("id"))}

    def track_pods_ready(self) -> None:
        """The job controller's PodsReady condition: True once every pod of an admitted workload
        runs, False while they start or after one failed. Written only when Kueue's
        Configuration has waitForPodsReady, the one thing that reads it (it costs a write a
        workload otherwise)."""
        try:
            enabled = kueue_configuration()[1].wait_for_pods_ready is not None
        except InputError:
            enabled = False  # reported at start-up; the scheduling pass fails on it
        workloads = self.admitted_workloads() if enabled else []
        if not workloads:
            return
        running = self.running_pods(workloads)
        for wl in workloads:
            status = wl.raw.get("status") or {}
            expected = admitted_pods(wl)
            current = _condition(status, "PodsReady")
            if expected and running.get((wl.namespace, wl.name), 0) >= expected:
                wanted = ("True", "PodsReady", "All pods reached readiness and the workload is running")
            elif current is not None and current.get("status") == "True":
                wanted = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
            elif current is None:
                wanted = ("False", "WaitForStart", "Not all pods are ready or succeeded")
            else:
                continue
            if current is not None and (current.get("status"), current.get("reason")) == wanted[:2]:
                continue
            raw = copy.deepcopy(wl.raw)
            set_condition(raw.setdefault("status", {}), "PodsReady", *wanted, self.now)
            self.put_workload(wl, raw)

    def finish_completed(self) -> None:
        """A workload whose pods all run and whose runtime has passed since admission finishes:
        its pods succeed and Kueue marks it Finished (its quota and capacity are free again)."""
        workloads = self.admitted_workloads()
        if not workloads:
            return
        running = self.running_pods(workloads)
        for wl in workloads:
            expected = admitted_pods(wl)
            if not expected or running.get((wl.namespace, wl.name), 0) < expected or wl.admitted_at is None:
                continue
            runtime = float(((wl.raw.get("metadata") or {}).get("annotations") or {})
                            .get(k8s.RUNTIME_ANNOTATION) or self.config.runtime_min_seconds)
            if (self.now - wl.admitted_at).total_seconds() < runtime:
                continue
            for pod in cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name).exclude(
                    phase__in=TERMINAL_PHASES).order_by("name"):
                self.set_pod_terminal(pod.raw, "Succeeded", "Completed", "The job's program exited with 0")
            raw = copy.deepcopy(wl.raw)
            set_condition(raw.setdefault("status", {}), "Finished", "True", "Succeeded", "Job finished successfully",
                          self.now)
            self.put_workload(wl, raw)
            self.report.completions += 1

    def requeue_evicted(self) -> None:
        """Kueue's side of an eviction once the job has stopped: the pods are gone, the
        admission is cleared and the workload waits in its queue again."""
        rows = cluster.Workload.objects.filter(status__in=(WorkloadStatus.EVICTED, WorkloadStatus.PREEMPTED),
                                               invalid_reason="").order_by("namespace", "name")
        for wl in rows:
            if not (wl.raw.get("status") or {}).get("admission"):
                continue  # nothing to give back: a deactivated workload keeps Evicted while it waits
            for pod in cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name).order_by("name"):
                self.writer.delete("Pod", pod.raw)
                self.report.pods_deleted += 1
            raw = copy.deepcopy(wl.raw)
            status = raw.setdefault("status", {})
            cause = next((c for c in (_condition(status, "Evicted"), _condition(status, "Preempted"))
                          if c and c.get("status") == "True"), {})
            message = cause.get("message") or "The workload was evicted"
            set_condition(status, "QuotaReserved", "False", "Pending", message, self.now)
            set_condition(status, "Admitted", "False", "NoReservation", "The workload has no reservation", self.now)
            # Kueue's job reconciler: Requeued=True only after a preemption or node failures;
            # otherwise False until its workload controller finds the cause gone (reconcile_requeued)
            reason = cause.get("reason") or "Evicted"
            set_condition(status, "Requeued", "True" if reason in REQUEUED_AT_ONCE else "False", reason, message,
                          self.now)
            # Kueue keeps Evicted=True until it reserves quota again and resets it then; the
            # engine's admission leaves conditions it does not own alone, so the reset happens here,
            # except for a deactivated workload, which keeps its Evicted (Deactivated...) as in Kueue
            # until it is active again and admitted
            inactive = (raw.get("spec") or {}).get("active", True) is False
            for kind in () if inactive else ("Evicted", "Preempted"):
                condition = _condition(status, kind)
                if condition and condition.get("status") == "True":
                    set_condition(status, kind, "False", "Requeued", f"Previously: {condition.get('message', '')}",
                                  self.now)
            if _condition(status, "PodsReady") is not None:  # its pods are gone
                set_condition(status, "PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded",
                              self.now)
            status.pop("admission", None)
            status.pop("unhealthyNodes", None)
            self.put_workload(wl, raw)
            self.report.requeued += 1

    def reconcile_requeued(self) -> None:
        """Kueue's workload controller on a waiting workload whose Requeued condition is False:
        True again once its cause is gone: the backoff of a PodsReady timeout or admission
        check over (its requeueAt cleared), the workload active again, its ClusterQueue or
        LocalQueue running again (stopPolicy None)."""
        rows = cluster.Workload.objects.filter(status__in=WAITING)
        if connection.features.supports_json_field_contains:  # PostgreSQL: the server picks them
            rows = rows.filter(raw__status__conditions__contains=[{"type": "Requeued", "status": "False"}])
        rows = list(rows.order_by("namespace", "name"))
        if not rows:
            return
        queues = {(q.namespace, q.name): q for q in cluster.LocalQueue.objects.only("namespace", "name", "raw",
                                                                                     "cluster_queue")}
        policies = {q.name: stop_policy_of(q.raw) for q in cluster.ClusterQueue.objects.only("name", "raw")}
        for wl in rows:
            raw = copy.deepcopy(wl.raw)
            status = raw.setdefault("status", {})
            requeued = _condition(status, "Requeued") or {}
            if requeued.get("status") != "False":
                continue
            reason = requeued.get("reason") or ""
            lq = queues.get((wl.namespace, wl.queue_name))
            restarted = None
            if reason in BACKOFF_REASONS:
                state = status.get("requeueState") or {}
                due = _parse_time(state.get("requeueAt"))
                if due is None or due <= self.now:
                    state.pop("requeueAt", None)
                    restarted = ("BackoffFinished", "The workload backoff was finished")
            elif reason.startswith("Deactivated") and (raw.get("spec") or {}).get("active", True) is not False:
                restarted = ("Reactivated", "The workload was reactivated")
            elif reason == "ClusterQueueStopped" and lq is not None and policies.get(lq.cluster_queue) == STOP_NONE:
                restarted = ("ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped")
            elif reason == "LocalQueueStopped" and lq is not None and stop_policy_of(lq.raw) == STOP_NONE:
                restarted = ("LocalQueueRestarted", "The LocalQueue was restarted after being stopped")
            if restarted is not None:
                set_condition(status, "Requeued", "True", *restarted, self.now)
                self.put_workload(wl, raw)

    def put_workload(self, row: cluster.Workload, raw: dict[str, Any]) -> None:
        old_status, old_admission = row.status, (row.raw.get("status") or {}).get("admission")
        self.writer.put("Workload", raw)
        fresh = cluster.Workload.objects.get(uid=row.uid)
        workload_observed(workload=fresh, old_status=old_status, old_admission=old_admission, at=self.now)

    # ------------------------------------------------------------ garbage collection and users

    def collect_garbage(self) -> None:
        """Terminated pods go after a while (their replacements exist); finished workloads
        after their retention; waiting workloads whose owners gave up, with their pods."""
        gc_before = self.now - timedelta(seconds=self.config.pod_gc_seconds)
        terminated = cluster.Pod.objects.filter(namespace__in=self.job_namespaces(), phase__in=TERMINAL_PHASES)
        for row in terminated.exclude(workload_name="").order_by("id"):
            stopped = max((t for t in (_parse_time(c.get("lastTransitionTime"))
                                       for c in (row.raw.get("status") or {}).get("conditions") or []) if t),
                          default=None)
            if stopped is None or stopped <= gc_before:
                self.writer.delete("Pod", row.raw)
                self.report.pods_deleted += 1

        retention = self.now - timedelta(seconds=self.config.finished_retention_seconds)
        finished = cluster.Workload.objects.filter(status=WorkloadStatus.FINISHED, finished_at__lte=retention)
        self.delete_workloads(finished)

        patience = self.now - timedelta(seconds=self.config.give_up_seconds)
        waiting = cluster.Workload.objects.filter(status__in=WAITING, created_at__lte=patience)
        gave_up = {}
        for wl in waiting:
            requeued = _condition(wl.raw.get("status") or {}, "Requeued") or {}
            since = max(filter(None, (wl.created_at, _parse_time(requeued.get("lastTransitionTime")))))
            if since <= patience:
                waited = (self.now - since).total_seconds()
                gave_up[wl] = f"withdrawn: its owner gave up after waiting {_duration(waited)}"
        self.report.gave_up += len(gave_up)
        self.delete_workloads(gave_up, reasons=gave_up)

    def delete_workloads(self, rows: Iterable[cluster.Workload], *,
                         reasons: Mapping[cluster.Workload, str] | None = None) -> None:
        """Delete workloads with their pods; one that had not finished gets a closing event
        (`reasons`: why each went)."""
        for wl in sorted(rows, key=lambda w: (w.namespace, w.name)):
            workload_deleted(workload=wl, reason=(reasons or {}).get(wl, ""), at=self.now)
            for pod in cluster.Pod.objects.filter(namespace=wl.namespace, workload_name=wl.name).order_by("name"):
                self.writer.delete("Pod", pod.raw)
                self.report.pods_deleted += 1
            self.writer.delete("Workload", wl.raw)
            self.report.workloads_deleted += 1

    def submit_jobs(self) -> None:
        count = poisson(self.rng, self.config.arrivals_per_minute * self.minutes)
        if self.state.ticks == 0:
            count += self.config.initial_workloads
        waiting = cluster.Workload.objects.filter(status__in=WAITING).count()
        count = min(count, max(0, self.config.max_waiting - waiting))
        for _ in range(count):
            shape = k8s.job_shape(self.rng, self.config)
            if _submit(self.writer, shape, rng=self.rng, config=self.config, now=self.now) is not None:
                self.report.arrivals += 1


def _submit(writer: ClusterWriter, shape: k8s.JobShape, *, rng: random.Random, config: SimulatorSettings,
            now: datetime) -> cluster.Workload | None:
    obj = k8s.workload_object(shape, rng, config, now)
    meta = obj["metadata"]
    if cluster.Workload.objects.filter(namespace=meta["namespace"], name=meta["name"]).exists():
        return None  # a name clash in a million: the user submits again later
    writer.put("Workload", obj)
    row = cluster.Workload.objects.get(uid=meta["uid"])
    workload_observed(workload=row, old_status=None, old_admission=None, at=now)
    return row


def simulator_submit(*, shape: k8s.JobShape, now: datetime | None = None, rng: random.Random | None = None,
                     config: SimulatorSettings | None = None) -> cluster.Workload | None:
    """Submit one job of the given shape, as a user would (its Workload waits in a LocalQueue)."""
    config = config or simulator_settings()
    now = now or timezone.now()
    with transaction.atomic():
        state = _state_for_update(config)
        writer = ClusterWriter(state)
        row = _submit(writer, shape, rng=rng or random.Random(), config=config, now=now)
        state.save(update_fields=["resource_version"])
    return row


def _elapsed_seconds(state: SimulatorState, now: datetime, config: SimulatorSettings) -> float:
    """Simulated time since the previous tick; missed ticks are not made up for all at once."""
    if state.last_tick_at is None:
        return config.tick_seconds
    elapsed = (now - state.last_tick_at).total_seconds()
    return min(max(elapsed, 0.0), 5 * config.tick_seconds)


def simulator_tick(*, now: datetime | None = None, rng: random.Random | None = None,
                   config: SimulatorSettings | None = None) -> TickReport:
    """Advance the simulated cluster by one step, in one transaction.

    `rng` defaults to Random(f"{seed}:{tick number}"), so a run is reproducible tick by tick.
    """
    config = config or simulator_settings()
    now = now or timezone.now()
    with transaction.atomic():
        state = _state_for_update(config)
        rng = rng or random.Random(f"{state.seed}:{state.ticks}")
        report = TickReport(tick=state.ticks + 1, at=now, seconds=_elapsed_seconds(state, now, config))
        # a tick writes no Topology or flavor: each admitted Workload it writes is checked against
        # its flavor's Topology levels read once for the tick, not once an object
        with flavor_levels_cached():
            Tick(state, config, now, rng, report).run()
        state.ticks += 1
        state.last_tick_at = now
        totals = dict(state.totals)
        for name, n in report.counts().items():
            totals[name] = totals.get(name, 0) + n
        state.totals = totals
        state.save()
    logger.info("simulator %s", report.summary())
    return report


__all__ = ["ClusterWriter", "SeedReport", "TickReport", "poisson", "set_condition", "simulator_seed",
           "simulator_submit", "simulator_tick"]
