"""Fixtures for the API tests: the example cluster imported into the mirror (real
PostgreSQL), one engine pass over it, users with tokens, and factories for objects."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache.backends.locmem import LocMemCache
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.throttling import SimpleRateThrottle

from scheduler.loader import read_objects
from tasweb.api.state import engine_view_reset
from tasweb.cluster.services import object_upsert, objects_resync
from tasweb.scheduling.models import EventKind, WorkloadEvent
from tasweb.scheduling.services import scheduling_pass_run

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = PROJECT_ROOT / "examples" / "cluster.yaml"
# The example's timestamps are relative to this instant (the Makefile's DEMO_NOW).
DEMO_NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
RACK = "cloud.example.com/topology-rack"
BLOCK = "cloud.example.com/topology-block"
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(autouse=True)
def _fresh_api_state(monkeypatch) -> Iterator[None]:
    """Every test starts with no cached engine view and no throttle history (kept in a
    cache of the test's own, not the shared Redis)."""
    engine_view_reset()
    monkeypatch.setattr(SimpleRateThrottle, "cache", LocMemCache(f"throttle-{id(monkeypatch)}", {}))
    yield
    engine_view_reset()


def example_objects() -> list[dict]:
    return [copy.deepcopy(obj) for obj in read_objects(str(EXAMPLE))]


def upsert(obj: dict) -> None:
    object_upsert(kind=obj["kind"], obj=obj)


@pytest.fixture
def mirror(db) -> list[dict]:
    """The example cluster in the mirror, before any pass."""
    objects = example_objects()
    by_kind: dict[str, list[dict]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, items in by_kind.items():
        objects_resync(kind=kind, objects=items)
    return objects


@pytest.fixture
def scheduled(mirror) -> list[dict]:
    """The example cluster after one engine pass: 7 workloads admitted, 1 inadmissible; and
    their admissions compared as if Kueue had made them (so the comparison endpoints have rows)."""
    record = scheduling_pass_run(now=DEMO_NOW)
    compare_as_kueue(record)
    return mirror


def compare_as_kueue(record=None, *, now: datetime = DEMO_NOW) -> int:
    """Compare every admission in the mirror with this engine's decision, as an observe pass
    does for Kueue's, and store the rows."""
    from scheduler.compare import compare_admissions
    from scheduler.engine import Engine
    from tasweb.cluster.models import Workload
    from tasweb.scheduling.selectors import engine_inputs
    from tasweb.scheduling.services import comparisons_record, feature_gates

    engine = Engine.from_parsed(engine_inputs(), feature_gates())
    keys = [row.key for row in Workload.objects.filter(admitted_at__isnull=False)]
    comparisons = compare_admissions(engine, keys, now)
    marks = [(0, c.key, now) for c in comparisons]
    return comparisons_record(scheduling_pass=record, comparisons=comparisons, marks=marks, now=now)


@pytest.fixture
def queued(scheduled):
    """Four more waiting workloads over two LocalQueues of the ClusterQueue."""
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "cluster-queue"}})
    upsert(workload_object("a-low", priority=0, created="2025-06-01T11:00:00Z", count=200, gpus=8))
    upsert(workload_object("b-high", priority=500, created="2025-06-01T11:58:00Z", count=200, gpus=8))
    upsert(workload_object("c-research", namespace="research", queue="team-b", priority=500,
                           created="2025-06-01T11:59:00Z", count=200, gpus=8))
    upsert(workload_object("d-research", namespace="research", queue="team-b", priority=0,
                           created="2025-06-01T11:01:00Z", count=200, gpus=8))
    return scheduled


@pytest.fixture
def client() -> Client:
    return Client(HTTP_HOST="localhost")


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="alice", password="secret-password")


@pytest.fixture
def token(user) -> str:
    return Token.objects.create(user=user).key


@pytest.fixture
def token_client(token) -> Client:
    return Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token}")


# ---------------------------------------------------------------- factories


def workload_object(name: str, *, namespace: str = "ml", queue: str = "team-a", count: int = 2,
                    gpus: int = 1, level: str | None = RACK, mode: str = "required", priority: int = 0,
                    created: str = "2025-06-01T11:59:00Z", pod_set: str = "workers") -> dict[str, Any]:
    pod_set_obj: dict[str, Any] = {
        "name": pod_set,
        "count": count,
        "template": {"spec": {"containers": [{"name": "main", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}},
    }
    if level is not None:
        pod_set_obj["topologyRequest"] = {mode: level}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created,
                     "uid": f"uid-{namespace}-{name}"},
        "spec": {"queueName": queue, "priority": priority, "podSets": [pod_set_obj]},
    }


def event(workload: str, kind: str = EventKind.NODE_UNHEALTHY, *, node: str = "", domain: str = "",
          at: datetime = DEMO_NOW, cluster_queue: str = "cluster-queue", message: str = "") -> WorkloadEvent:
    from tasweb.cluster.models import Workload

    namespace, name = workload.split("/")
    return WorkloadEvent.objects.create(
        workload=Workload.objects.filter(namespace=namespace, name=name).first(), workload_key=workload,
        cluster_queue=cluster_queue, kind=kind, at=at, node=node, domain=domain, message=message,
        details={"test": True})


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def names(response) -> list[str]:
    return [f"{item['namespace']}/{item['name']}" if "namespace" in item else item["name"]
            for item in results(response)]
