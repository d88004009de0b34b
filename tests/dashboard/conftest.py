"""Fixtures of the dashboard's tests: a small known cluster in the mirror (2 blocks x 2 racks
x 3 nodes of the simulator's shape, one node NotReady, one cordoned, one tainted), workloads
admitted by a real engine pass, one that can never fit its rack, and history; a live server
of the project and headless Chromium for the browser tests."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tasweb.api.state import engine_view_reset
from tasweb.cluster.models import Node, Workload
from tasweb.cluster.services import object_upsert
from tasweb.dashboard import views
from tasweb.scheduling.models import AssignmentDomain, EventKind, WorkloadEvent
from tasweb.scheduling.services import scheduling_pass_run
from tasweb.simulator.config import SimulatorSettings
from tasweb.simulator.objects import RACK_LABEL
from tasweb.simulator.services import simulator_seed
from tests.dashboard.browser import live_server

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
SHAPE = SimulatorSettings(blocks=2, racks_per_block=2, nodes_per_rack=3, serving_node_fraction=0.0)
NODES = 12
NOT_READY_NODE, CORDONED_NODE, TAINTED_NODE = "b2-r2-n3", "b2-r2-n2", "b2-r1-n1"
TOO_BIG = "training/too-big"


def workload_object(namespace: str, name: str, *, count: int, gpus: int, level: str | None = RACK_LABEL,
                    mode: str = "required", priority: int = 0, minutes_ago: int = 10) -> dict[str, Any]:
    pod_set: dict[str, Any] = {
        "name": "main", "count": count,
        "template": {"spec": {"containers": [{"name": "main", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}},
    }
    if level is not None:
        pod_set["topologyRequest"] = {mode: level}
    created = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "creationTimestamp": created, "resourceVersion": "1"},
            "spec": {"queueName": "gpu-jobs", "priority": priority, "podSets": [pod_set]}}


def node_update(name: str, change) -> None:
    """Change a mirrored node as its next watch event would (a newer resourceVersion)."""
    raw = copy.deepcopy(Node.objects.get(name=name).raw)
    change(raw)
    raw["metadata"]["resourceVersion"] = str(int(raw["metadata"].get("resourceVersion") or 0) + 1000)
    object_upsert(kind="Node", obj=raw)


def not_ready(raw: dict) -> None:
    for condition in raw["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition.update(status="False", reason="KubeletNotReady", message="GPU fallen off the bus")


def cordon(raw: dict) -> None:
    raw["spec"]["unschedulable"] = True


def taint(raw: dict) -> None:
    raw["spec"]["taints"] = [{"key": "nvidia.com/gpu-health", "value": "degraded", "effect": "NoSchedule"}]


@dataclass
class Cluster:
    admitted: list[str]  # workload keys
    pending: str
    events: int

    def nodes_of(self, key: str) -> set[str]:
        namespace, name = key.split("/")
        return set(AssignmentDomain.objects.filter(workload__namespace=namespace, workload__name=name)
                   .values_list("node", flat=True))


def build_cluster() -> Cluster:
    simulator_seed(config=SHAPE, now=NOW)
    for obj in (
        workload_object("research", "train-rack", count=3, gpus=8, priority=100, minutes_ago=30),
        workload_object("research", "train-block", count=4, gpus=4, level="cloud.example.com/topology-block",
                        minutes_ago=20),
        workload_object("training", "serve-small", count=1, gpus=2, mode="preferred", minutes_ago=15),
        # 4 pods of 8 GPUs in one rack of 3 nodes: never fits, whatever runs
        workload_object("training", "too-big", count=4, gpus=8, priority=1000, minutes_ago=5),
    ):
        object_upsert(kind="Workload", obj=obj)
    scheduling_pass_run(now=NOW)
    node_update(NOT_READY_NODE, not_ready)
    node_update(CORDONED_NODE, cordon)
    node_update(TAINTED_NODE, taint)
    admitted = sorted(w.key for w in Workload.objects.filter(status="Admitted"))
    # what the node-failure handling and the simulator's operators would have recorded
    victim = Workload.objects.get(namespace="training", name="serve-small")
    node = sorted(Cluster(admitted, TOO_BIG, 0).nodes_of(victim.key))[0]
    block, rack = node.split("-")[:2]
    for minutes, kind, message in (
        (2, EventKind.NODE_UNHEALTHY, f"node {node} is not Ready: pods of the workload on it are lost"),
        (3, EventKind.EVICTED, f"evicted: node {node} failed and no replacement fits the rack"),
        (4, EventKind.REQUEUED, "requeued after eviction, waits for capacity"),
    ):
        WorkloadEvent.objects.create(workload=victim, workload_key=victim.key, cluster_queue="cluster-queue", kind=kind,
                                     at=NOW + timedelta(minutes=minutes), node=node, domain=f"{block}/{rack}/{node}",
                                     message=message)
    return Cluster(admitted=admitted, pending=TOO_BIG, events=WorkloadEvent.objects.count())


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    engine_view_reset()
    views.rendered.bodies.clear()
    yield
    engine_view_reset()
    views.rendered.bodies.clear()


@pytest.fixture
def cluster(db) -> Cluster:
    return build_cluster()


@pytest.fixture
def live_cluster(transactional_db) -> Cluster:
    """The cluster, committed, for a server thread to read."""
    return build_cluster()


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker) -> Iterator[str]:
    with django_db_blocker.unblock(), live_server() as url:
        yield url


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    yield tab
    context.close()
