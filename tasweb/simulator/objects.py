"""The Kubernetes and Kueue objects the simulator writes, as the API server would return them.

Pure functions: settings and random numbers in, JSON out. Names, labels and annotations are
the ones Kueue and the batch/JobSet controllers put on real objects, so the engine, the
mirror and the dashboard cannot tell the simulator from a cluster.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.model import TOPOLOGY_GATE
from scheduler.parse import ANNOTATION_PREFERRED, ANNOTATION_REQUIRED, ANNOTATION_UNCONSTRAINED
from tasweb.simulator.config import SimulatorSettings

KUEUE_API = "kueue.x-k8s.io/v1beta2"
BLOCK_LABEL = "cloud.example.com/topology-block"
RACK_LABEL = "cloud.example.com/topology-rack"
GPU = "nvidia.com/gpu"

TOPOLOGY = "default"
FLAVOR = "tas-gpu"
FLAVOR_NODE_LABELS = {"node-group": "tas-gpu"}
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "gpu-jobs"
NAMESPACES = ("research", "training")
# (name, value, share of arrivals)
PRIORITY_CLASSES = (("batch-low", 100, 0.5), ("batch", 500, 0.35), ("production", 1000, 0.15))

WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
PODSET_LABEL = "kueue.x-k8s.io/podset"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# how long the simulated job runs once admitted (the simulator's stand-in for the program)
RUNTIME_ANNOTATION = "simulator.tas/runtime-seconds"
# namespaces of the pods that run outside Kueue on every node
INFRA_NAMESPACES = ("gpu-operator", "serving")

TOPOLOGY_ANNOTATIONS = {"required": ANNOTATION_REQUIRED, "preferred": ANNOTATION_PREFERRED,
                        "unconstrained": ANNOTATION_UNCONSTRAINED}
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seeded_uid(kind: str, namespace: str, name: str) -> str:
    """Stable uids for the seeded cluster: seeding twice yields the same objects."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tas-simulator/{kind}/{namespace}/{name}"))


def random_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_suffix(rng: random.Random, length: int = 5) -> str:
    return "".join(rng.choice(_NAME_ALPHABET) for _ in range(length))


# ---------------------------------------------------------------- the cluster


def node_name(block: int, rack: int, index: int) -> str:
    return f"b{block}-r{rack}-n{index}"


def node_allocatable(config: SimulatorSettings) -> dict[str, str]:
    gpus = config.gpus_per_node
    # what the kubelet leaves after system and kube reservations
    return {"cpu": f"{24 * gpus - 2}", "memory": f"{256 * gpus - 48}Gi", "pods": "110",
            "ephemeral-storage": "3200Gi", GPU: str(gpus)}


def node_object(config: SimulatorSettings, block: int, rack: int, index: int, now: datetime | str) -> dict[str, Any]:
    name = node_name(block, rack, index)
    gpus = config.gpus_per_node
    now = now if isinstance(now, str) else rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": seeded_uid("Node", "", name),
            "creationTimestamp": now,
            "labels": {
                **FLAVOR_NODE_LABELS,
                BLOCK_LABEL: f"b{block}",
                RACK_LABEL: f"r{rack}",
                HOSTNAME_LABEL: name,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": f"gpu-{gpus}x",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": str(gpus),
            },
        },
        "spec": {"providerID": f"simulator://{name}"},
        "status": {
            "capacity": {"cpu": str(24 * gpus), "memory": f"{256 * gpus}Gi", "pods": "110",
                         "ephemeral-storage": "3500Gi", GPU: str(gpus)},
            "allocatable": node_allocatable(config),
            "conditions": [ready_condition(True, now)],
            "nodeInfo": {"kubeletVersion": "v1.33.1", "containerRuntimeVersion": "containerd://2.0.5",
                         "architecture": "amd64", "operatingSystem": "linux"},
        },
    }


def ready_condition(ready: bool, now: datetime | str) -> dict[str, Any]:
    now = now if isinstance(now, str) else rfc3339(now)
    if ready:
        return {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": "container runtime network not ready: GPU Xid 79 (fallen off the bus), kubelet restarting",
            "lastHeartbeatTime": now, "lastTransitionTime": now}


def resources(cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        out["requests"][GPU] = str(gpus)
        out["limits"] = {GPU: str(gpus)}
    return out


def infra_pod(namespace: str, name: str, node: str, app: str, image: str, res: dict[str, Any],
              now: datetime | str, *, owner_kind: str = "DaemonSet") -> dict[str, Any]:
    """A pod Kueue does not manage, running on a node: its requests come off the node's capacity."""
    now = now if isinstance(now, str) else rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": seeded_uid("Pod", namespace, name),
            "creationTimestamp": now,
            "labels": {"app.kubernetes.io/name": app},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": app,
                                 "uid": seeded_uid(owner_kind, namespace, app), "controller": True}],
        },
        "spec": {"nodeName": node, "containers": [{"name": app, "image": image, "resources": res}]},
        "status": {"phase": "Running", "startTime": now,
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]},
    }


# (namespace, pod name prefix): one daemon on every node, one inference server on some
DAEMON = ("gpu-operator", "nvidia-dcgm-exporter-")
SERVING = ("serving", "llm-inference-")


def node_names(config: SimulatorSettings) -> list[str]:
    return [node_name(b, r, n)
            for b in range(1, config.blocks + 1)
            for r in range(1, config.racks_per_block + 1)
            for n in range(1, config.nodes_per_rack + 1)]


def node_from_name(config: SimulatorSettings, name: str, now: datetime | str) -> dict[str, Any]:
    block, rack, index = (int(part[1:]) for part in name.split("-"))
    return node_object(config, block, rack, index, now)


def serving_nodes(config: SimulatorSettings, names: list[str]) -> set[str]:
    """Nodes that also run an inference server: every k-th node, spread over the racks."""
    if config.serving_node_fraction <= 0:
        return set()
    step = max(1, round(1 / config.serving_node_fraction))
    return set(names[step // 2::step])


def infra_pod_keys(config: SimulatorSettings, names: list[str]) -> dict[tuple[str, str], str]:
    """(namespace, pod name) -> node of every pod the seeded cluster runs outside Kueue."""
    keys = {(DAEMON[0], DAEMON[1] + name): name for name in names}
    keys.update({(SERVING[0], SERVING[1] + name): name for name in sorted(serving_nodes(config, names))})
    return keys


def infra_pod_object(config: SimulatorSettings, namespace: str, name: str, node: str,
                     now: datetime | str) -> dict[str, Any]:
    if namespace == SERVING[0]:
        gpus = max(1, config.gpus_per_node // 2)
        return infra_pod(namespace, name, node, "llm-inference", "registry.example.com/serving/llm:2.3",
                         resources(str(20 * gpus), f"{200 * gpus}Gi", gpus), now, owner_kind="ReplicaSet")
    return infra_pod(namespace, name, node, "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3",
                     resources("500m", "512Mi"), now)


def kueue_objects(config: SimulatorSettings, now: datetime) -> dict[str, list[dict[str, Any]]]:
    """Topology, ResourceFlavor, priority classes, the ClusterQueue (quota = the whole
    cluster's allocatable) and one LocalQueue per namespace."""
    def obj(kind: str, name: str, spec: dict[str, Any] | None, namespace: str = "", **extra: Any) -> dict:
        meta: dict[str, Any] = {"name": name, "uid": seeded_uid(kind, namespace, name),
                                "creationTimestamp": rfc3339(now)}
        if namespace:
            meta["namespace"] = namespace
        out: dict[str, Any] = {"apiVersion": KUEUE_API, "kind": kind, "metadata": meta}
        if spec is not None:
            out["spec"] = spec
        out.update(extra)
        return out

    nodes = config.node_count
    gpus = config.gpus_per_node
    quota = [
        {"name": "cpu", "nominalQuota": str(nodes * (24 * gpus - 2))},
        {"name": "memory", "nominalQuota": f"{nodes * (256 * gpus - 48)}Gi"},
        {"name": GPU, "nominalQuota": str(nodes * gpus)},
    ]
    return {
        "Topology": [obj("Topology", TOPOLOGY, {"levels": [{"nodeLabel": level} for level in
                                                           (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)]})],
        "ResourceFlavor": [obj("ResourceFlavor", FLAVOR, {"nodeLabels": dict(FLAVOR_NODE_LABELS),
                                                          "topologyName": TOPOLOGY})],
        "WorkloadPriorityClass": [
            obj("WorkloadPriorityClass", name, None, value=value, description=f"{name} jobs")
            for name, value, _ in PRIORITY_CLASSES],
        "ClusterQueue": [obj("ClusterQueue", CLUSTER_QUEUE, {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU],
                                "flavors": [{"name": FLAVOR, "resources": quota}]}],
        })],
        "LocalQueue": [obj("LocalQueue", LOCAL_QUEUE, {"clusterQueue": CLUSTER_QUEUE}, namespace)
                       for namespace in NAMESPACES],
    }


# ---------------------------------------------------------------- jobs


@dataclass(frozen=True)
class PodSetShape:
    name: str
    count: int
    gpus: int  # per pod
    mode: str  # "required" | "preferred" | "unconstrained"
    level: str = ""


@dataclass(frozen=True)
class JobShape:
    base: str  # what the job is, e.g. "bert-finetune"
    owner_kind: str  # "Job" | "JobSet"
    pod_sets: tuple[PodSetShape, ...]


def job_shape(rng: random.Random, config: SimulatorSettings) -> JobShape:
    """A job as ML users submit them: mostly topology-constrained, of varied sizes, some with
    two PodSets, a few too big for the constraint they ask for."""
    g = config.gpus_per_node
    half = max(1, g // 2)
    per_rack = config.nodes_per_rack
    per_block = per_rack * config.racks_per_block
    if rng.random() < config.too_big_fraction:
        # more whole-node pods than any rack has nodes: stays pending with TAS's reason
        count = per_rack + rng.randint(1, max(2, per_rack // 2))
        return JobShape("moe-train-xl", "Job", (PodSetShape("main", count, g, "required", RACK_LABEL),))
    if rng.random() < config.two_pod_sets_fraction:
        actors = rng.randint(4, max(4, 2 * per_rack))
        return JobShape("rl-actor-learner", "JobSet", (
            PodSetShape("learner", 1, g, "required", HOSTNAME_LABEL),
            PodSetShape("actors", actors, 1, "preferred", RACK_LABEL),
        ))
    kinds = [
        (0.25, lambda: JobShape("bert-finetune", "Job",
                                (PodSetShape("main", rng.randint(2, per_rack), g, "required", RACK_LABEL),))),
        (0.15, lambda: JobShape("llm-finetune", "Job",
                                (PodSetShape("main", rng.randint(4, 2 * per_rack), half, "required",
                                             BLOCK_LABEL),))),
        (0.2, lambda: JobShape("llm-pretrain", "Job",
                               (PodSetShape("main", rng.randint(max(2, per_rack // 2), min(2 * per_rack, per_block)),
                                            g, "preferred", BLOCK_LABEL),))),
        (0.15, lambda: JobShape("embedding-train", "Job",
                                (PodSetShape("main", rng.randint(2, per_rack), half, "preferred", RACK_LABEL),))),
        (0.1, lambda: JobShape("eval-suite", "Job",
                               (PodSetShape("main", rng.randint(2, g), 1, "required", HOSTNAME_LABEL),))),
        (0.15, lambda: JobShape("hpo-sweep", "Job",
                                (PodSetShape("main", rng.randint(4, 3 * per_rack), rng.choice((1, 2)),
                                             "unconstrained"),))),
    ]
    pick = rng.random() * sum(weight for weight, _ in kinds)
    for weight, build in kinds:
        pick -= weight
        if pick < 0:
            return build()
    return kinds[-1][1]()


def priority_class(rng: random.Random) -> tuple[str, int]:
    pick = rng.random()
    for name, value, share in PRIORITY_CLASSES:
        pick -= share
        if pick < 0:
            return name, value
    name, value, _ = PRIORITY_CLASSES[-1]
    return name, value


def topology_request(ps: PodSetShape, owner_kind: str) -> dict[str, Any]:
    request: dict[str, Any] = {"unconstrained": True} if ps.mode == "unconstrained" else {ps.mode: ps.level}
    # what Kueue's batch/JobSet integrations record, so the ungater can place pods by rank
    request["podIndexLabel"] = INDEX_LABEL
    if owner_kind == "JobSet":
        request["subGroupIndexLabel"] = JOB_INDEX_LABEL
        request["subGroupCount"] = 1
    return request


def pod_set_object(ps: PodSetShape, owner_kind: str, image: str) -> dict[str, Any]:
    annotation = TOPOLOGY_ANNOTATIONS[ps.mode]
    return {
        "name": ps.name,
        "count": ps.count,
        "template": {
            "metadata": {"annotations": {annotation: "true" if ps.mode == "unconstrained" else ps.level}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": ps.name, "image": image,
                                "resources": resources(str(20 * ps.gpus), f"{200 * ps.gpus}Gi", ps.gpus)}],
            },
        },
        "topologyRequest": topology_request(ps, owner_kind),
    }


def workload_object(shape: JobShape, rng: random.Random, config: SimulatorSettings, now: datetime) -> dict[str, Any]:
    """A Workload as Kueue creates it for a freshly submitted (suspended) Job or JobSet."""
    namespace = rng.choice(NAMESPACES)
    job = f"{shape.base}-{random_suffix(rng)}"
    job_uid = random_uid(rng)
    prefix = "job" if shape.owner_kind == "Job" else "jobset"
    api = "batch/v1" if shape.owner_kind == "Job" else "jobset.x-k8s.io/v1alpha2"
    class_name, priority = priority_class(rng)
    runtime = round(rng.uniform(config.runtime_min_seconds, config.runtime_max_seconds))
    image = f"registry.example.com/ml/{shape.base}:1.{rng.randint(0, 9)}"
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": f"{prefix}-{job}-{random_suffix(rng)}",
            "namespace": namespace,
            "uid": random_uid(rng),
            "creationTimestamp": rfc3339(now),
            "labels": {"kueue.x-k8s.io/job-uid": job_uid, "kueue.x-k8s.io/queue-name": LOCAL_QUEUE},
            "annotations": {RUNTIME_ANNOTATION: str(runtime)},
            "ownerReferences": [{"apiVersion": api, "kind": shape.owner_kind, "name": job, "uid": job_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "queueName": LOCAL_QUEUE,
            "priority": priority,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": class_name},
            "active": True,
            "podSets": [pod_set_object(ps, shape.owner_kind, image) for ps in shape.pod_sets],
        },
    }


def workload_pod(workload: dict[str, Any], pod_set: dict[str, Any], index: int, node_labels: dict[str, str],
                 rng: random.Random, now: datetime) -> dict[str, Any]:
    """Pod `index` of a PodSet of an admitted workload, as its Job controller creates it and
    Kueue's webhook gates it: the topology gate, the flavor's node labels, the PodSet label
    and the workload annotation."""
    meta = workload["metadata"]
    owner = (meta.get("ownerReferences") or [{}])[0]
    jobset = owner.get("kind") == "JobSet"
    parent = owner.get("name", meta["name"])
    template = pod_set.get("template") or {}
    template_meta = template.get("metadata") or {}
    spec = dict(template.get("spec") or {})
    labels = {
        **(template_meta.get("labels") or {}),
        PODSET_LABEL: pod_set["name"],
        INDEX_LABEL: str(index),
        "kueue.x-k8s.io/managed": "true",
        "kueue.x-k8s.io/tas": "true",
        "kueue.x-k8s.io/queue-name": (workload.get("spec") or {}).get("queueName", ""),
    }
    if jobset:
        job = f"{parent}-{pod_set['name']}-0"
        labels.update({"jobset.sigs.k8s.io/jobset-name": parent, JOB_INDEX_LABEL: "0"})
        job_uid = seeded_uid("Job", meta.get("namespace", ""), job)
    else:
        job, job_uid = parent, owner.get("uid", "")
    labels["batch.kubernetes.io/job-name"] = job
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **node_labels}
    spec["schedulingGates"] = [{"name": TOPOLOGY_GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}-{random_suffix(rng)}",
            "namespace": meta.get("namespace", "default"),
            "uid": random_uid(rng),
            "creationTimestamp": rfc3339(now),
            "labels": labels,
            "annotations": {**(template_meta.get("annotations") or {}), WORKLOAD_ANNOTATION: meta["name"],
                            INDEX_LABEL: str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "message": "Scheduling is blocked due to non-empty scheduling gates",
             "lastTransitionTime": rfc3339(now)}]},
    }
