"""Seeding: the requested shape, as Kubernetes/Kueue objects in the mirror, and idempotent."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from scheduler.assignment import HOSTNAME_LABEL
from tasweb.cluster import models as cluster
from tasweb.simulator import objects as k8s
from tasweb.simulator.config import SimulatorSettings
from tasweb.simulator.models import SimulatorState
from tasweb.simulator.services import simulator_seed, simulator_tick

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def mirror_snapshot() -> dict[tuple[str, str], tuple[int, dict]]:
    """Every mirrored object by kind and uid, with its resourceVersion and JSON."""
    return {(kind, uid): (rv, raw) for kind, model in cluster.KINDS.items()
            for uid, rv, raw in model.objects.values_list("uid", "rv_number", "raw")}


def test_seed_builds_the_default_shape():
    report = simulator_seed(config=SimulatorSettings(), now=START)

    assert report.created["Node"] == 64
    topology = cluster.Topology.objects.get()
    assert topology.levels == [k8s.BLOCK_LABEL, k8s.RACK_LABEL, HOSTNAME_LABEL]
    assert topology.raw["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    flavor = cluster.ResourceFlavor.objects.get()
    assert (flavor.name, flavor.topology_name, flavor.node_labels) == ("tas-gpu", "default", {"node-group": "tas-gpu"})

    nodes = list(cluster.Node.objects.all())
    assert len(nodes) == 64
    assert all(n.ready == "True" and not n.taints and not n.invalid_reason for n in nodes)
    assert all(n.allocatable["nvidia.com/gpu"] == 8 for n in nodes)
    assert all(flavor.node_labels.items() <= n.labels.items() for n in nodes)
    racks = Counter((n.labels[k8s.BLOCK_LABEL], n.labels[k8s.RACK_LABEL]) for n in nodes)
    assert sorted(racks) == [(f"b{b}", f"r{r}") for b in (1, 2) for r in (1, 2, 3, 4)]
    assert set(racks.values()) == {8}
    assert len({n.hostname for n in nodes}) == 64

    # quota sized to the cluster: every GPU, all allocatable CPU and memory
    cq = cluster.ClusterQueue.objects.get()
    quota = {r["name"]: r["nominalQuota"] for r in cq.raw["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == {"cpu": str(64 * 190), "memory": f"{64 * 2000}Gi", "nvidia.com/gpu": "512"}
    queues = {(q.namespace, q.name, q.cluster_queue) for q in cluster.LocalQueue.objects.all()}
    assert queues == {("research", "gpu-jobs", "cluster-queue"), ("training", "gpu-jobs", "cluster-queue")}
    assert sorted(cluster.WorkloadPriorityClass.objects.values_list("value", flat=True)) == [100, 500, 1000]

    # pods outside Kueue: a daemon on every node and an inference server on a few
    pods = list(cluster.Pod.objects.all())
    assert all(p.phase == "Running" and p.node_name and not p.tas and not p.workload_name for p in pods)
    daemons = [p for p in pods if p.namespace == "gpu-operator"]
    assert sorted(p.node_name for p in daemons) == sorted(n.name for n in nodes)
    serving = [p for p in pods if p.namespace == "serving"]
    assert 1 <= len(serving) <= 8
    assert all(p.requests["nvidia.com/gpu"] == 4 for p in serving)


def test_every_object_has_a_stable_uid_and_its_own_increasing_resource_version():
    simulator_seed(config=SimulatorSettings(), now=START)

    snapshot = mirror_snapshot()
    versions = [rv for rv, _ in snapshot.values()]
    assert len(set(versions)) == len(versions)
    assert min(versions) >= 1
    assert SimulatorState.objects.get().resource_version == max(versions)
    node = cluster.Node.objects.get(name="b1-r1-n1")
    assert node.uid == k8s.seeded_uid("Node", "", "b1-r1-n1")


def test_seeding_twice_changes_nothing():
    simulator_seed(config=SimulatorSettings(), now=START)
    before = mirror_snapshot()
    state_before = SimulatorState.objects.values().get()

    report = simulator_seed(config=SimulatorSettings(), now=START.replace(hour=13))

    assert not report.changed
    assert "nothing changed" in report.summary()
    assert mirror_snapshot() == before
    assert SimulatorState.objects.values().get() == state_before


def test_seeding_again_keeps_what_the_simulation_did(clock):
    config = quiet(node_failures_per_minute=60)
    simulator_seed(config=config, now=START)
    report = simulator_tick(now=clock.advance(2), config=config)
    assert report.failures
    failed = report.failures[0]

    assert not simulator_seed(config=config).changed
    assert cluster.Node.objects.get(name=failed).ready == "False"


def test_seeding_another_shape_adds_and_removes_nodes_and_resizes_the_quota():
    simulator_seed(config=SimulatorSettings(), now=START)

    report = simulator_seed(config=SimulatorSettings(nodes_per_rack=4), now=START)
    assert report.deleted["Node"] == 32
    assert cluster.Node.objects.count() == 32
    nodes = set(cluster.Node.objects.values_list("name", flat=True))
    assert set(cluster.Pod.objects.values_list("node_name", flat=True)) <= nodes
    assert cluster.Pod.objects.filter(namespace="gpu-operator").count() == 32
    assert cluster.ClusterQueue.objects.count() == 1
    quota = cluster.ClusterQueue.objects.get().raw["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": "256"} in quota
    assert report.updated == {"ClusterQueue": 1}

    report = simulator_seed(config=SimulatorSettings(blocks=3), now=START)
    assert report.created["Node"] == 96 - 32
    assert cluster.Node.objects.count() == 96
    assert set(cluster.Node.objects.values_list("labels__" + k8s.BLOCK_LABEL, flat=True)) == {"b1", "b2", "b3"}


def test_seeding_adopts_kueue_objects_of_the_same_name():
    """A ClusterQueue imported from a file (another uid) is updated, not duplicated."""
    from tasweb.cluster.services import object_upsert

    object_upsert(kind="ClusterQueue", obj={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                            "metadata": {"name": "cluster-queue", "uid": "imported"},
                                            "spec": {"resourceGroups": []}})
    simulator_seed(config=SimulatorSettings(), now=START)

    cq = cluster.ClusterQueue.objects.get()
    assert cq.uid == "imported"
    assert cq.raw["spec"]["resourceGroups"]


def test_a_ten_thousand_node_cluster_seeds_quickly_and_ticks_fast(clock):
    config = quiet(blocks=10, racks_per_block=25, nodes_per_rack=40, node_failures_per_minute=30,
                   drains_per_minute=30, arrivals_per_minute=60)

    started = time.perf_counter()
    report = simulator_seed(config=config, now=START)
    seeded_in = time.perf_counter() - started

    assert report.created["Node"] == 10_000
    assert cluster.Node.objects.count() == 10_000
    assert cluster.Node.objects.filter(labels__contains={k8s.BLOCK_LABEL: "b10", k8s.RACK_LABEL: "r25"}).count() == 40
    # generous for a loaded CI machine; a few seconds on an idle one
    assert seeded_in < 90, f"seeding 10,000 nodes took {seeded_in:.1f}s"

    started = time.perf_counter()
    assert not simulator_seed(config=config, now=START).changed
    assert time.perf_counter() - started < 10

    # a tick's cost follows what happens in it, not the size of the cluster
    durations = []
    for _ in range(3):
        started = time.perf_counter()
        tick = simulator_tick(now=clock.advance(config.tick_seconds), config=config)
        durations.append(time.perf_counter() - started)
        assert tick.failures or tick.drains or tick.arrivals
    assert sorted(durations)[1] < 1.0, f"ticks on 10,000 nodes took {durations}"
