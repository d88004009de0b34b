"""Prometheus metrics of the cluster as the service sees it, read when scraped.

The queue and quota gauges carry the names and labels of Kueue's own (`kueue_pending_workloads`,
`kueue_cluster_queue_nominal_quota`, ...), so that dashboards and alerts written for Kueue read
this service too. They describe the state the scheduler leader has recorded (the mirror and the
engine view of it), hence `replica_role="leader"` on every series, whichever web process answers.
Kueue's counters and histograms (admission attempts, wait times) are left out: the service
keeps history as events, not as counters that a process restart would reset. The `tas_` gauges
are the service's own: its last scheduling pass, and the nodes, capacity and usage of each TAS
flavor.

Values are in Kueue's units: CPU in cores, every other resource in its base unit (bytes,
devices, pods)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from scheduler.quantity import CPU
from scheduler.queue_status import TERMINATING
from tasweb.api import selectors
from tasweb.api.state import engine_view
from tasweb.cluster import models as cluster
from tasweb.dashboard.selectors import CORDONED, NOT_READY, TAINTED, flavor_capacity, tas_flavors
from tasweb.scheduling.models import SchedulingPass

REPLICA_ROLE = "leader"
MARKED_NODE_FLAGS = ((NOT_READY, "NotReady"), (CORDONED, "Cordoned"), (TAINTED, "Tainted"))


def metric_value(resource: str, stored: float) -> float:
    """A resource amount as Kueue's metrics give it: CPU in cores (the engine keeps milli-CPU),
    anything else as stored."""
    return stored / 1000 if resource == CPU else float(stored)


def gauge(name: str, documentation: str, labels: Iterable[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=[*labels, "replica_role"])


def add(family: GaugeMetricFamily, labels: Iterable[str], value: float) -> None:
    family.add_metric([*labels, REPLICA_ROLE], value)


@dataclass(frozen=True)
class QueueFamilies:
    """Kueue's per-queue Workload gauges, for ClusterQueues or for LocalQueues."""

    pending: GaugeMetricFamily
    reserving: GaugeMetricFamily
    admitted: GaugeMetricFamily

    @classmethod
    def named(cls, prefix: str, what: str, labels: tuple[str, ...]) -> QueueFamilies:
        return cls(
            pending=gauge(f"{prefix}pending_workloads",
                          f"The number of pending workloads, per '{what}' and 'status': 'active' ones are in the "
                          f"admission queue, 'inadmissible' ones failed an admission attempt and wait for a change "
                          f"of the cluster that could let them in", (*labels, "status")),
            reserving=gauge(f"{prefix}reserving_active_workloads",
                            f"The number of Workloads that are reserving quota, per '{what}'", labels),
            admitted=gauge(f"{prefix}admitted_active_workloads",
                           f"The number of admitted Workloads that are active, per '{what}'", labels))

    def add(self, labels: tuple[str, ...], counts: selectors.QueueCounts) -> None:
        add(self.pending, (*labels, "active"), counts.pending)
        add(self.pending, (*labels, "inadmissible"), counts.inadmissible)
        add(self.reserving, labels, counts.reserving)
        add(self.admitted, labels, counts.admitted)

    def __iter__(self) -> Iterator[Metric]:
        return iter((self.pending, self.reserving, self.admitted))


def queue_metrics() -> Iterator[Metric]:
    """Workloads per ClusterQueue and LocalQueue (every queue the mirror holds, at 0 when empty)."""
    waiting = selectors.waiting_counts_by_local_queue()  # counted once for both kinds of queue
    by_cq = QueueFamilies.named("kueue_", "cluster_queue", ("cluster_queue",))
    counts = selectors.cluster_queue_counts(waiting)
    for name in cluster.ClusterQueue.objects.order_by("name").values_list("name", flat=True):
        by_cq.add((name,), counts.get(name, selectors.QueueCounts()))
    yield from by_cq
    by_lq = QueueFamilies.named("kueue_local_queue_", "local_queue", ("name", "namespace"))
    lq_counts = selectors.local_queue_counts(waiting)
    for namespace, name in cluster.LocalQueue.objects.order_by("namespace", "name").values_list("namespace", "name"):
        by_lq.add((name, namespace), lq_counts.get((namespace, name), selectors.QueueCounts()))
    yield from by_lq


CLUSTER_QUEUE_STATUSES = ("pending", "active", "terminating")
LOCAL_QUEUE_STATUSES = ("True", "False", "Unknown")


def status_metrics() -> Iterator[Metric]:
    """Kueue's kueue_cluster_queue_status and kueue_local_queue_status: 1 for the status each
    queue is in, 0 for the others; "terminating" is a ClusterQueue being deleted (kept by Kueue's
    finalizer while workloads hold quota in it), "pending" one otherwise inactive (stopped, or
    lacking a flavor, check or Topology), and a LocalQueue is "False" while it or its ClusterQueue cannot
    take workloads."""
    family = gauge("kueue_cluster_queue_status", "Reports 'cluster_queue' with its 'status' (with possible values "
                   "'pending', 'active' or 'terminated').\nFor a ClusterQueue, the metric only reports a value of 1 "
                   "for one of the statuses.", ("cluster_queue", "status"))
    for name, active in sorted(selectors.cluster_queue_activity().items()):
        current = "active" if active["status"] == "True" else \
            "terminating" if active["reason"] == TERMINATING else "pending"
        for status in CLUSTER_QUEUE_STATUSES:
            add(family, (name, status), 1 if status == current else 0)
    yield family
    local = gauge("kueue_local_queue_status", "Reports 'localQueue' with its 'active' status (with possible values "
                  "'True', 'False', or 'Unknown').\nFor a LocalQueue, the metric only reports a value of 1 for one of "
                  "the statuses.", ("name", "namespace", "active"))
    for (namespace, name), active in sorted(selectors.local_queue_activity().items()):
        for status in LOCAL_QUEUE_STATUSES:
            add(local, (name, namespace, status), 1 if status == active["status"] else 0)
    yield local


def quota_metrics() -> Iterator[Metric]:
    """Each ClusterQueue's quota per flavor and resource, and what its workloads reserve of it,
    as the engine counts them."""
    labels = ("cohort", "cluster_queue", "flavor", "resource")
    nominal = gauge("kueue_cluster_queue_nominal_quota", "Reports the cluster_queue's resource nominal quota "
                    "within all the flavors", labels)
    borrowing = gauge("kueue_cluster_queue_borrowing_limit", "Reports the cluster_queue's resource borrowing "
                      "limit within all the flavors", labels)
    lending = gauge("kueue_cluster_queue_lending_limit", "Reports the cluster_queue's resource lending limit "
                    "within all the flavors", labels)
    reserved = gauge("kueue_cluster_queue_resource_reservation", "Reports the cluster_queue's total resource "
                     "reservation within all the flavors", labels)
    view = engine_view()
    with view.lock:
        for name, cq in sorted(view.state.cluster_queues.items()):
            usage = view.state.quota_usage.get(name, {})
            used = {(fr.flavor, fr.resource): value for fr, value in usage.items()}
            for rg in cq.resource_groups:
                for fq in rg.flavors:
                    for quota in fq.resources:
                        key = (cq.cohort or "", name, fq.name, quota.name)
                        add(nominal, key, metric_value(quota.name, quota.nominal))
                        if quota.borrowing_limit is not None:
                            add(borrowing, key, metric_value(quota.name, quota.borrowing_limit))
                        if quota.lending_limit is not None:
                            add(lending, key, metric_value(quota.name, quota.lending_limit))
                        add(reserved, key, metric_value(quota.name, used.get((fq.name, quota.name), 0)))
    yield from (nominal, borrowing, lending, reserved)


def flavor_metrics() -> Iterator[Metric]:
    """Per TAS flavor: its nodes, those NotReady, cordoned or tainted, and the capacity of its
    nodes with what TAS workloads and other pods use of it."""
    nodes = gauge("tas_flavor_nodes", "The nodes of a TAS flavor (its Topology's domains hold them)", ("flavor",))
    marked = gauge("tas_flavor_nodes_marked", "The nodes of a TAS flavor per 'condition', as the topology page "
                   "marks them: NotReady (or gone), Cordoned (unschedulable), Tainted (any taint); a node may count "
                   "under several, and where the Topology's lowest level is not the hostname, a lowest-level "
                   "domain counts once", ("flavor", "condition"))
    labels = ("flavor", "resource")
    capacity = gauge("tas_flavor_capacity", "The allocatable resources of a TAS flavor's nodes", labels)
    tas_usage = gauge("tas_flavor_tas_usage", "What the TopologyAssignments of admitted workloads take of a "
                      "TAS flavor's nodes", labels)
    other_usage = gauge("tas_flavor_non_tas_usage", "What pods outside TAS take of a TAS flavor's nodes", labels)
    for flavor in tas_flavors():
        fc = flavor_capacity(flavor=flavor)
        if fc is None:
            continue
        add(nodes, (flavor,), sum(len(leaf) for leaf in fc.tree.leaf_nodes))
        for bit, condition in MARKED_NODE_FLAGS:
            add(marked, (flavor, condition), int(((fc.leaf_flags & bit) != 0).sum()))
        for column, resource in enumerate(fc.resources):
            if not fc.depth:
                continue
            add(capacity, (flavor, resource), metric_value(resource, fc.allocatable[0][:, column].sum()))
            add(tas_usage, (flavor, resource), metric_value(resource, fc.tas_usage[0][:, column].sum()))
            add(other_usage, (flavor, resource), metric_value(resource, fc.other_usage[0][:, column].sum()))
    yield from (nodes, marked, capacity, tas_usage, other_usage)


def pass_metrics() -> Iterator[Metric]:
    """The last scheduling pass that finished."""
    last = SchedulingPass.objects.filter(finished_at__isnull=False).order_by("-finished_at", "-id").first()
    finished = gauge("tas_scheduling_pass_last_finished_timestamp_seconds",
                     "When the last scheduling pass finished (Unix time)", ())
    duration = gauge("tas_scheduling_pass_last_duration_seconds", "How long the last scheduling pass took", ())
    decided = gauge("tas_scheduling_pass_last_workloads", "What the last scheduling pass did: workloads "
                    "'admitted', 'evicted', left 'pending'", ("outcome",))
    if last is not None:
        add(finished, (), last.finished_at.timestamp())
        add(duration, (), last.duration_ms / 1000)
        for outcome, value in (("admitted", last.admitted), ("evicted", last.evicted), ("pending", last.pending)):
            add(decided, (outcome,), value)
    yield from (finished, duration, decided)


class ServiceCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from queue_metrics()
        yield from status_metrics()
        yield from quota_metrics()
        yield from flavor_metrics()
        yield from pass_metrics()


def metrics_registry() -> CollectorRegistry:
    """A registry holding only the service's metrics, read afresh at each scrape (no process
    state: any web process answers the same)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector())
    return registry
