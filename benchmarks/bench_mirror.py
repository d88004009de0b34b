"""Mirroring a large cluster into PostgreSQL through the mirror's services.

    .venv/bin/python benchmarks/bench_mirror.py [--nodes 10000] [--pods 50000] [--updates 5000]
                                                [--heartbeats 5000] [--database tas_bench] [--keep]

Objects look like `kubectl get nodes,pods -o json` items of a GPU cluster (labels,
annotations, conditions, addresses, node info, images; pods with owner references,
containers, tolerations, volumes and container statuses): 10,000 nodes in blocks of 16
racks of 16, one DaemonSet pod per node, the rest Job pods, about half of them Kueue TAS
pods (bound, or gated and pending). Measured, against a fresh database (DATABASE_URL's
server, default the local test server; see benchdb.py):

* list:   `objects_resync` of every node, then every pod, into the empty mirror (the
          initial list of a watch, or a re-list after 410 Gone) -- target <= 30 s in all;
* watch:  a burst of `--updates` MODIFIED events (pod phases, node conditions) applied one
          by one with `object_upsert`, then the same events replayed (stale: ignored);
* heartbeats: `--heartbeats` MODIFIED events of nodes whose kubelet reported their status
          again with nothing else changed (new resourceVersion, lastHeartbeatTime and
          managedFields time), applied as the watch applies them: none may be stored as a
          change, and their checkpoint is saved once;
* relist: `objects_resync` of the pod list again with 1% changed and 1% deleted, then of the
          node list with a new heartbeat on every node and 1% newly tainted (only those
          may be rewritten).
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import Phases, bench_database

BLOCK, RACK, HOST = "cloud.example.com/topology-block", "cloud.example.com/topology-rack", "kubernetes.io/hostname"
TARGET_SECONDS = 30.0


def uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench/{kind}/{name}"))


def node_json(i: int, rv: int) -> dict[str, Any]:
    block, rack = i // 256, (i // 16) % 16
    name = f"gpu-b{block:02d}-r{rack:02d}-n{i % 16:02d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("Node", name),
            "resourceVersion": str(rv),
            "creationTimestamp": "2025-05-01T08:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", HOST: name,
                "node.kubernetes.io/instance-type": "gpu-8x-h100", "topology.kubernetes.io/region": "eu-west",
                "topology.kubernetes.io/zone": f"eu-west-{block % 3 + 1}", "node-group": "tas",
                BLOCK: f"b{block:02d}", RACK: f"r{rack:02d}", "nvidia.com/gpu.present": "true",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{i:017x}"}}',
            },
        },
        "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24", "providerID": f"aws:///eu-west-1a/i-{i:017x}"},
        "status": {
            "capacity": {"cpu": "96", "memory": "396Gi", "pods": "110", "nvidia.com/gpu": "8",
                         "ephemeral-storage": "2Ti", "hugepages-2Mi": "0"},
            "allocatable": {"cpu": "95500m", "memory": "384Gi", "pods": "110", "nvidia.com/gpu": "8",
                            "ephemeral-storage": "1900Gi", "hugepages-2Mi": "0"},
            "conditions": [
                {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": f"kubelet has {m}",
                 "lastHeartbeatTime": "2025-06-01T11:59:30Z", "lastTransitionTime": "2025-05-01T08:01:00Z"}
                for t, r, m in (("MemoryPressure", "SufficientMemory", "sufficient memory available"),
                                ("DiskPressure", "NoDiskPressure", "no disk pressure"),
                                ("PIDPressure", "SufficientPID", "sufficient PID available"))
            ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "kubelet is posting ready status", "lastHeartbeatTime": "2025-06-01T11:59:30Z",
                  "lastTransitionTime": "2025-05-01T08:01:00Z"}],
            "addresses": [{"type": "InternalIP", "address": f"10.200.{i // 256}.{i % 256}"},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": uid("boot", name), "containerRuntimeVersion":
                         "containerd://1.7.22", "kernelVersion": "6.1.109", "kubeProxyVersion": "v1.31.2",
                         "kubeletVersion": "v1.31.2", "machineID": f"{i:032x}", "operatingSystem": "linux",
                         "osImage": "Ubuntu 22.04.5 LTS", "systemUUID": uid("system", name)},
            "images": [{"names": [f"registry.example.com/ml/trainer@sha256:{k:064x}",
                                  f"registry.example.com/ml/trainer:1.{k}"], "sizeBytes": 8_000_000_000 + k}
                       for k in range(4)],
        },
    }


def pod_json(i: int, node: dict | None, rv: int, rng: random.Random) -> dict[str, Any]:
    """Pod i: a DaemonSet pod on its node, or a Job pod (TAS or not, bound or gated)."""
    node_name = node["metadata"]["name"] if node else ""
    if i < 0:  # daemonset pod
        namespace, name, job = "kube-system", f"node-exporter-{node_name}", None
        labels = {"app.kubernetes.io/name": "node-exporter", "controller-revision-hash": "6d5f7c9b8"}
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter",
                 "uid": uid("DaemonSet", "node-exporter"), "controller": True, "blockOwnerDeletion": True}
        requests = {"cpu": "1", "memory": "1Gi"}
        annotations: dict[str, str] = {}
    else:
        job = f"train-{i // 32:05d}"
        namespace, name = f"team-{i % 7}", f"{job}-{i % 32}-{uuid.UUID(int=rng.getrandbits(128)).hex[:5]}"
        labels = {"batch.kubernetes.io/job-name": job, "job-name": job, "batch.kubernetes.io/controller-uid":
                  uid("Job", job), "kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/podset": "workers"}
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid("Job", job),
                 "controller": True, "blockOwnerDeletion": True}
        requests = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
        annotations = {"kueue.x-k8s.io/workload": f"job-{job}-{i // 32 % 99991:05x}"}
        if i % 2 == 0:
            annotations["kueue.x-k8s.io/podset-preferred-topology"] = RACK
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid("Pod", f"{namespace}/{name}"),
            "resourceVersion": str(rv), "creationTimestamp": "2025-06-01T10:00:00Z",
            "labels": labels, "annotations": annotations, "ownerReferences": [owner],
        },
        "spec": {
            "containers": [{
                "name": "main", "image": "registry.example.com/ml/trainer:1.4",
                "command": ["python", "-m", "train"], "args": ["--config", "/etc/train/config.yaml"],
                "env": [{"name": "WORLD_SIZE", "value": "32"}, {"name": "MASTER_PORT", "value": "29500"}],
                "resources": {"requests": requests, "limits": {k: v for k, v in requests.items() if k != "cpu"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/train"},
                                 {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io"}],
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Never" if job else "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "volumes": [{"name": "config", "configMap": {"name": f"{job or 'exporter'}-config"}},
                        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {
                            "expirationSeconds": 3607, "path": "token"}}]}}],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    if node is not None:
        pod["spec"]["nodeName"] = node_name
        if annotations.get("kueue.x-k8s.io/podset-preferred-topology"):
            pod["spec"]["nodeSelector"] = {HOST: node_name}
        pod["status"] = {
            "phase": "Running", "qosClass": "Burstable", "hostIP": node["status"]["addresses"][0]["address"],
            "podIP": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "startTime": "2025-06-01T10:00:05Z",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2025-06-01T10:00:07Z"}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "started": True,
                                   "image": "registry.example.com/ml/trainer:1.4",
                                   "imageID": f"registry.example.com/ml/trainer@sha256:{i % 4:064x}",
                                   "containerID": f"containerd://{uid('c', name).replace('-', '')}",
                                   "state": {"running": {"startedAt": "2025-06-01T10:00:06Z"}}}],
        }
    else:
        pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                        "message": "Scheduling is blocked due to non-empty scheduling gates",
                                        "lastTransitionTime": "2025-06-01T10:00:01Z"}]
    return pod


def generate(nodes: int, pods: int, seed: int = 1) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    rv = 1000
    node_objs = []
    for i in range(nodes):
        rv += 1
        node_objs.append(node_json(i, rv))
    pod_objs = []
    for node in node_objs:  # one DaemonSet pod a node
        rv += 1
        pod_objs.append(pod_json(-1, node, rv, rng))
    for i in range(max(pods - nodes, 0)):
        rv += 1
        bound = i % 10 != 9  # 10% of job pods still gated, waiting for the ungater
        pod_objs.append(pod_json(i, node_objs[rng.randrange(nodes)] if bound else None, rv, rng))
    return node_objs, pod_objs


def modified(obj: dict, rv: int, rng: random.Random) -> dict:
    """The object as a later MODIFIED event carries it."""
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(rv)
    if out["kind"] == "Node":
        out["status"]["conditions"][-1]["lastHeartbeatTime"] = "2025-06-01T12:00:30Z"
        if rng.random() < 0.1:
            out["spec"]["taints"] = [{"key": "nvidia.com/gpu-health", "value": "degraded", "effect": "NoSchedule"}]
    else:
        out["status"]["phase"] = rng.choice(["Running", "Succeeded", "Failed"])
    return out


def heartbeat(node: dict, rv: int) -> dict:
    """The node as the kubelet's periodic status report leaves it when nothing else changed:
    a new resourceVersion, every condition's lastHeartbeatTime and the kubelet's
    managedFields time."""
    out = copy.deepcopy(node)
    out["metadata"]["resourceVersion"] = str(rv)
    out["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                         "time": "2025-06-01T12:05:30Z", "fieldsType": "FieldsV1",
                                         "subresource": "status", "fieldsV1": {"f:status": {}}}]
    for condition in out["status"]["conditions"]:
        condition["lastHeartbeatTime"] = "2025-06-01T12:05:30Z"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pods", type=int, default=50_000)
    ap.add_argument("--updates", type=int, default=5_000, help="MODIFIED events in the watch burst")
    ap.add_argument("--heartbeats", type=int, default=5_000, help="nodes whose status report is replayed")
    ap.add_argument("--database", default="tas_bench")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = ap.parse_args()

    started = time.perf_counter()
    node_objs, pod_objs = generate(args.nodes, args.pods)
    print(f"generated {len(node_objs)} nodes and {len(pod_objs)} pods in {time.perf_counter() - started:.1f} s "
          f"(not measured)")

    with bench_database(args.database, keep=args.keep):
        from tasweb.cluster.models import Node, Pod
        from tasweb.cluster.services import object_upsert, objects_resync
        from tasweb.sources.services import mirror_bookmark_apply, mirror_event_apply

        phases = Phases()
        print("list (the initial mirror):")
        with phases.phase(f"objects_resync: {len(node_objs)} nodes"):
            nodes_result = objects_resync(kind="Node", objects=node_objs)
        with phases.phase(f"objects_resync: {len(pod_objs)} pods"):
            pods_result = objects_resync(kind="Pod", objects=pod_objs)
        assert nodes_result["created"] == len(node_objs) and pods_result["created"] == len(pod_objs)
        assert Node.objects.count() == len(node_objs) and Pod.objects.count() == len(pod_objs)

        rng = random.Random(2)
        rv = 10_000_000
        events = []
        for _ in range(args.updates):
            rv += 1
            source = node_objs if rng.random() < 0.1 else pod_objs
            events.append(("Node" if source is node_objs else "Pod", modified(rng.choice(source), rv, rng)))
        latest = {node["metadata"]["name"]: node for node in node_objs}
        latest.update((obj["metadata"]["name"], obj) for kind, obj in events if kind == "Node")
        heartbeats = []
        for name in list(latest)[:args.heartbeats]:
            rv += 1
            heartbeats.append(heartbeat(latest[name], rv))
        print(f"watch (a burst of {len(events)} MODIFIED events, one object_upsert each):")
        with phases.phase(f"apply {len(events)} events"):
            changed = sum(object_upsert(kind=kind, obj=obj).changed for kind, obj in events)
        with phases.phase(f"replay the same {len(events)} events (stale, ignored)"):
            replayed = sum(object_upsert(kind=kind, obj=obj).changed for kind, obj in events)
        assert replayed == 0, f"{replayed} replayed events were applied twice"

        print(f"heartbeats ({len(heartbeats)} nodes report their status again, nothing else changed; "
              "mirror_event_apply as the watch applies them, the checkpoint saved once at the end):")
        with phases.phase(f"apply {len(heartbeats)} heartbeat events"):
            heartbeat_changes = sum(mirror_event_apply(kind="Node", api_version="v1", event_type="MODIFIED", obj=obj,
                                                       save_unchanged=False) for obj in heartbeats)
            mirror_bookmark_apply(kind="Node", api_version="v1", resource_version=str(rv), events=len(heartbeats))
        assert heartbeat_changes == 0, f"{heartbeat_changes} heartbeats were stored as changes"

        print("relist (pods again, 1% changed, 1% deleted):")
        relist = []
        for obj in pod_objs:
            roll = rng.random()
            if roll < 0.01:
                continue
            if roll < 0.02:
                rv += 1
                obj = modified(obj, rv, rng)
            relist.append(obj)
        with phases.phase(f"objects_resync: {len(relist)} pods"):
            relist_result = objects_resync(kind="Pod", objects=relist)

        print("relist (nodes again, every one with a new heartbeat, 1% newly tainted):")
        node_relist, tainted = [], 0
        for obj in latest.values():
            rv += 1
            obj = heartbeat(obj, rv)
            if rng.random() < 0.01:
                obj["spec"]["taints"] = [{"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}]
                tainted += 1
            node_relist.append(obj)
        with phases.phase(f"objects_resync: {len(node_relist)} nodes"):
            node_relist_result = objects_resync(kind="Node", objects=node_relist)
        assert node_relist_result["updated"] == tainted, (node_relist_result, tainted)

        list_total = phases.total(*list(phases.seconds)[:2])
        print()
        print(f"list of {len(node_objs)} nodes + {len(pod_objs)} pods: {list_total:.1f} s "
              f"(target <= {TARGET_SECONDS:.0f} s: {'met' if list_total <= TARGET_SECONDS else 'MISSED'})")
        print(f"watch burst: {changed} of {len(events)} events applied, "
              f"{len(events) / phases.seconds[list(phases.seconds)[2]]:.0f} events/s; replay applied {replayed}")
        seconds = phases.seconds[f"apply {len(heartbeats)} heartbeat events"]
        print(f"heartbeats: {heartbeat_changes} of {len(heartbeats)} stored as changes, "
              f"{len(heartbeats) / seconds:.0f} events/s")
        print(f"relist: {relist_result}")
        print(f"node relist: {node_relist_result} ({tainted} newly tainted, the rest heartbeats only)")
        print(f"everything: {sum(phases.seconds.values()):.1f} s")


if __name__ == "__main__":
    main()
