"""Builders of the Kubernetes and Kueue objects the fake API server holds in these tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from scheduler.assignment import TopologyAssignment
from scheduler.codec import encode_assignment

BLOCK = "cloud.example.com/topology-block"
RACK = "cloud.example.com/topology-rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
V1BETA2 = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "ml"


def node(name: str, *, block: str, rack: str, gpus: int = 8) -> dict:
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node-group": "tas", BLOCK: block, RACK: rack, HOST: name}},
            "spec": {},
            "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastTransitionTime": "2025-05-25T12:00:00Z"}]}}


def nodes(blocks: int = 2, racks: int = 2, per_rack: int = 2) -> list[dict]:
    return [node(f"b{b}-r{r}-n{n}", block=f"b{b}", rack=f"r{r}")
            for b in range(1, blocks + 1) for r in range(1, racks + 1) for n in range(1, per_rack + 1)]


def topology(name: str = "default") -> dict:
    return {"apiVersion": V1BETA2, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in LEVELS]}}


def flavor(name: str = "tas-gpu") -> dict:
    return {"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"node-group": "tas"}, "topologyName": "default"}}


def cluster_queue(name: str = "cluster-queue", *, cohort: str = "research") -> dict:
    quota = {"cpu": "1024", "memory": "4Ti", "nvidia.com/gpu": "256"}
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "cohortName": cohort, "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": list(quota), "flavors": [
                         {"name": "tas-gpu", "resources": [{"name": r, "nominalQuota": q}
                                                           for r, q in quota.items()]}]}]}}


def local_queue(name: str = "team-a", *, namespace: str = NAMESPACE) -> dict:
    return {"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": "cluster-queue"}}


def cohort(name: str = "research") -> dict:
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": {}}


def admission_check(name: str = "prov") -> dict:
    return {"apiVersion": V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}


def namespace(name: str = NAMESPACE, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def priority_class(name: str = "high", value: int = 1000) -> dict:
    return {"apiVersion": V1BETA2, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def workload(name: str, *, namespace: str = NAMESPACE, count: int = 2, gpus: int = 8, required: str = RACK,
             queue: str = "team-a") -> dict:
    return {"apiVersion": V1BETA2, "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2025-06-01T11:30:00Z"},
            "spec": {"queueName": queue, "podSets": [{
                "name": "workers", "count": count,
                "topologyRequest": {"required": required},
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "trainer", "image": "registry.example.com/trainer:1",
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)},
                                  "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}]}}


def workload_pod(name: str, workload_name: str, *, namespace: str = NAMESPACE, gpus: int = 8,
                 other_gates: Sequence[str] = ()) -> dict:
    """A pod of the workload as Kueue's job integration creates it: gated, annotated."""
    gates = [{"name": TOPOLOGY_GATE}, *({"name": g} for g in other_gates)]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/podset": "workers"},
                         "annotations": {"kueue.x-k8s.io/workload": workload_name,
                                         "kueue.x-k8s.io/podset-required-topology": RACK}},
            "spec": {"schedulingGates": gates, "containers": [{
                "name": "trainer", "image": "registry.example.com/trainer:1",
                "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


def running_pod(name: str, node_name: str, *, namespace: str = "serving", gpus: int = 2) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node_name, "containers": [{
                "name": "main", "image": "registry.example.com/server:1",
                "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running"}}


def kueue_admission(obj: dict, hosts: Iterable[tuple[str, int]], *, message: str = "admitted") -> dict:
    """`obj` as Kueue's scheduler leaves it after admitting it on `hosts` (hostname, pods)."""
    hosts = list(hosts)
    assignment = TopologyAssignment.of([HOST], [([h], c) for h, c in hosts])
    ps = obj["spec"]["podSets"][0]
    conditions: list[dict[str, Any]] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": message,
         "lastTransitionTime": "2025-06-01T11:31:00Z"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": message,
         "lastTransitionTime": "2025-06-01T11:31:00Z"},
    ]
    obj["status"] = {"conditions": conditions, "admission": {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [{"name": ps["name"], "count": ps["count"],
                               "flavors": {"cpu": "tas-gpu", "memory": "tas-gpu", "nvidia.com/gpu": "tas-gpu"},
                               "topologyAssignment": encode_assignment(assignment)}]}}
    return obj


def kueue_eviction(obj: dict, *, message: str = "Preempted to make room") -> dict:
    """`obj` as Kueue marks it evicted: it still holds its quota while its pods stop."""
    obj["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message,
         "lastTransitionTime": "2025-06-01T11:40:00Z"})
    return obj


def kueue_requeue(obj: dict, *, message: str = "Preempted to make room") -> dict:
    """`obj` once its pods are gone: the quota reservation and the admission released."""
    obj["status"] = {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message,
         "lastTransitionTime": "2025-06-01T11:41:00Z"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": message,
         "lastTransitionTime": "2025-06-01T11:41:00Z"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message,
         "lastTransitionTime": "2025-06-01T11:40:00Z"},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": message,
         "lastTransitionTime": "2025-06-01T11:41:00Z"},
    ]}
    return obj


def small_cluster() -> list[dict]:
    """Every mirrored kind: 8 nodes in 2 blocks x 2 racks, Kueue's objects, one pending workload
    with its two gated pods, and a running non-TAS pod."""
    return [
        *nodes(),
        namespace(team="ml"), topology(), flavor(), cohort(), cluster_queue(), local_queue(), admission_check(),
        priority_class(), workload("train"),
        workload_pod("train-0", "train", other_gates=("example.com/quota",)),
        workload_pod("train-1", "train"),
        running_pod("inference-0", "b1-r1-n1"),
    ]
