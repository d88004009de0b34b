"""Control mode: the engine's decisions (ClusterWrite rows) go to the cluster as PATCH requests."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.codec import decode_assignment
from tasweb.scheduling.models import AssignmentDomain, ClusterWrite
from tasweb.scheduling.services import scheduling_pass_run
from tasweb.sources.kubeapi import KubeApi
from tasweb.sources.models import ClusterWriteRetry
from tasweb.sources.patches import workload_status_patch
from tasweb.sources.services import cluster_writes_send
from tasweb.sources.tasks import send_cluster_writes

from . import objects
from .conftest import in_sync, running_mirror, wait_until
from .fakekube import FakeKube

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

STATUS_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/train/status"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture
def control(settings, kubeconfig):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MODE = "control"


@pytest.fixture
def api(kubeconfig):
    client = KubeApi.from_settings()
    yield client
    client.close()


def mirror_once(kube: FakeKube) -> None:
    for obj in objects.small_cluster():
        kube.create(obj)
    with running_mirror(observe=False):
        wait_until(lambda: in_sync(kube), what="the mirror")


def engine_pass() -> list[ClusterWrite]:
    scheduling_pass_run(send_to_cluster=True, observe=False)
    return list(ClusterWrite.objects.order_by("id"))


def pod_path(name: str, namespace: str = "ml") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def test_a_pass_is_sent_as_exactly_the_expected_patches(kube: FakeKube, control):
    mirror_once(kube)
    writes = engine_pass()
    assert [(w.kind, w.name) for w in writes] == [
        ("WorkloadStatus", "train"), ("PodUngate", "train-0"), ("PodUngate", "train-1")]

    summary = send_cluster_writes()
    assert summary["sent"] == 3 and summary["failed"] == summary["deferred"] == 0

    patches = kube.requests_to("PATCH")
    assert [(p.path, p.content_type) for p in patches] == [
        (STATUS_PATH, MERGE), (pod_path("train-0"), STRATEGIC), (pod_path("train-1"), STRATEGIC)]
    assert all(p.query == {"fieldManager": "tas-service"} and p.status == 200 for p in patches)

    # the Workload status: the admission with a v1beta2 topologyAssignment, Kueue's conditions
    status = patches[0].body["status"]
    assert set(status) == {"conditions", "admission", "unhealthyNodes"}
    assert status["unhealthyNodes"] is None
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["QuotaReserved"]["status"] == conditions["Admitted"]["status"] == "True"
    assert all(c["lastTransitionTime"] for c in status["conditions"])
    admission = status["admission"]
    assert admission["clusterQueue"] == "cluster-queue"
    (psa,) = admission["podSetAssignments"]
    assert psa["name"] == "workers" and psa["count"] == 2 and psa["flavors"]["nvidia.com/gpu"] == "tas-gpu"
    encoded = psa["topologyAssignment"]
    assert "slices" in encoded and "domains" not in encoded  # the v1beta2 form
    decoded = decode_assignment(encoded)
    assert decoded.levels == (objects.HOST,)
    hosts = Counter({d.values[-1]: d.count for d in decoded.domains})
    assert sum(hosts.values()) == 2
    stored = AssignmentDomain.objects.filter(workload__name="train")
    assert Counter({row.node: row.count for row in stored}) == hosts
    assert len({tuple(row.values[:2]) for row in stored}) == 1  # the required rack: one rack

    # each pod: only the topology gate removed, the hostname selector of its domain set
    ungated = Counter()
    for patch in patches[1:]:
        (host,) = patch.body["spec"]["nodeSelector"].values()
        assert patch.body == {"spec": {
            "schedulingGates": [{"$patch": "delete", "name": objects.TOPOLOGY_GATE}],
            "nodeSelector": {objects.HOST: host}}}
        ungated[host] += 1
    assert ungated == hosts

    # what the cluster holds afterwards
    assert kube.get("Workload", "train", namespace="ml")["status"]["admission"] == admission
    pod0, pod1 = kube.get("Pod", "train-0", namespace="ml"), kube.get("Pod", "train-1", namespace="ml")
    assert pod0["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert "schedulingGates" not in pod1["spec"]
    assert pod0["spec"]["nodeSelector"][objects.HOST] in hosts

    rows = ClusterWrite.objects.order_by("id")
    assert all(w.sent_at is not None and w.attempts == 1 and w.last_error == "" for w in rows)
    # nothing left: a second run sends nothing
    assert send_cluster_writes()["sent"] == 0
    assert len(kube.requests_to("PATCH")) == 3


def test_a_failing_patch_is_retried_later_and_sent_once(kube: FakeKube, control, api):
    mirror_once(kube)
    engine_pass()
    kube.fail_patches(STATUS_PATH, 500)
    kube.fail_patches(pod_path("train-1"), 409)
    now = timezone.now()

    first = cluster_writes_send(api=api, now=now)
    assert (first.sent, first.failed, first.deferred) == (0, 1, 2)  # the pods wait for their workload
    status_write = ClusterWrite.objects.get(kind="WorkloadStatus")
    assert status_write.sent_at is None and status_write.attempts == 1 and "500" in status_write.last_error
    retry_at = ClusterWriteRetry.objects.get(write=status_write).next_attempt_at
    assert now < retry_at <= now + timedelta(seconds=2)
    assert [p.path for p in kube.requests_to("PATCH")] == [STATUS_PATH]

    # backing off: nothing is sent before the retry time
    assert cluster_writes_send(api=api, now=now).deferred == 3
    assert len(kube.requests_to("PATCH")) == 1

    later = cluster_writes_send(api=api, now=now + timedelta(minutes=1))
    assert (later.sent, later.failed, later.deferred) == (3, 0, 0)
    assert cluster_writes_send(api=api, now=now + timedelta(minutes=2)).sent == 0

    sent = Counter(p.path for p in kube.requests_to("PATCH"))
    # the status twice (the failure, then the success), the 409 retried at once, nothing duplicated
    assert sent == {STATUS_PATH: 2, pod_path("train-0"): 1, pod_path("train-1"): 2}
    assert [p.status for p in kube.requests_to("PATCH", STATUS_PATH)] == [500, 200]
    status_write.refresh_from_db()
    assert status_write.sent_at is not None and status_write.attempts == 2 and status_write.last_error == ""
    assert not ClusterWriteRetry.objects.exists()


def test_sending_again_changes_nothing(kube: FakeKube, control, api):
    mirror_once(kube)
    engine_pass()
    cluster_writes_send(api=api)
    after_first = {kind: {o["metadata"]["name"]: o for o in kube.objects(kind)} for kind in ("Workload", "Pod")}
    # a crash between sending and recording: every write goes out a second time
    ClusterWrite.objects.update(sent_at=None)
    assert cluster_writes_send(api=api).sent == 3

    def without_version(obj: dict) -> dict:
        return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}

    for kind, by_name in after_first.items():
        for obj in kube.objects(kind):
            assert without_version(obj) == without_version(by_name[obj["metadata"]["name"]])


def test_a_write_to_an_object_that_is_gone_is_done_with_the_error(kube: FakeKube, control, api):
    mirror_once(kube)
    ClusterWrite.objects.create(kind=ClusterWrite.Kind.POD_UNGATE, namespace="ml", name="ghost",
                                payload={"nodeSelector": {objects.HOST: "b1-r1-n1"}})
    summary = cluster_writes_send(api=api)
    assert summary.gone == 1
    write = ClusterWrite.objects.get(name="ghost")
    assert write.sent_at is not None and write.last_error.startswith("not sent: the object is gone (404")
    assert cluster_writes_send(api=api, now=timezone.now() + timedelta(hours=1)).gone == 0
    assert len(kube.requests_to("PATCH", pod_path("ghost"))) == 1


def test_an_invalid_write_is_given_up_and_holds_back_its_pods(kube: FakeKube, control, api):
    mirror_once(kube)
    engine_pass()
    kube.fail_patches(STATUS_PATH, 422)
    summary = cluster_writes_send(api=api)
    assert (summary.abandoned, summary.deferred) == (1, 2)
    assert ClusterWriteRetry.objects.get(write__kind="WorkloadStatus").abandoned
    later = cluster_writes_send(api=api, now=timezone.now() + timedelta(hours=1))
    assert (later.sent, later.deferred) == (0, 2)  # never ungated without the admission
    assert [p.path for p in kube.requests_to("PATCH")] == [STATUS_PATH]


def test_pod_failure_patches_the_pod_status(kube: FakeKube, control, api):
    mirror_once(kube)
    condition = {"type": "TerminatedByKueue", "status": "True", "reason": "NodeFailure",
                 "message": "node b1-r1-n1 is unhealthy", "lastTransitionTime": "2025-06-01T12:00:00Z"}
    ClusterWrite.objects.create(kind=ClusterWrite.Kind.POD_FAIL, namespace="serving", name="inference-0",
                                payload={"status": {"phase": "Failed", "conditions": [condition]}})
    assert cluster_writes_send(api=api).sent == 1
    (patch,) = kube.requests_to("PATCH")
    assert patch.path == pod_path("inference-0", "serving") + "/status"
    assert patch.content_type == STRATEGIC
    assert patch.body == {"status": {"phase": "Failed", "conditions": [condition]}}
    assert kube.get("Pod", "inference-0", namespace="serving")["status"]["phase"] == "Failed"


def test_nothing_is_written_in_observe_mode(kube: FakeKube, settings, kubeconfig):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MODE = "observe"
    ClusterWrite.objects.create(kind=ClusterWrite.Kind.POD_UNGATE, namespace="ml", name="train-0",
                                payload={"nodeSelector": {}})
    assert "skipped" in send_cluster_writes()
    assert kube.requests_to("PATCH") == []


def test_status_patch_for_a_v1beta1_server_uses_the_domains_form():
    encoded = {"levels": [objects.HOST], "slices": [
        {"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "b1-r1-n", "roots": ["1", "2"]}}],
         "podCounts": {"universal": 1}}]}
    payload = {"status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                                          "message": ""}],
                          "admission": {"clusterQueue": "cq", "podSetAssignments": [
                              {"name": "main", "count": 2, "flavors": {}, "topologyAssignment": encoded}]}}}
    decided = timezone.now()
    v1beta1 = workload_status_patch(payload, version="v1beta1", decided_at=decided)
    ta = v1beta1["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta == {"levels": [objects.HOST], "domains": [{"values": ["b1-r1-n1"], "count": 1},
                                                          {"values": ["b1-r1-n2"], "count": 1}]}
    assert v1beta1["status"]["conditions"][0]["lastTransitionTime"] == decided.strftime("%Y-%m-%dT%H:%M:%SZ")
    v1beta2 = workload_status_patch(payload, version="v1beta2", decided_at=decided)
    assert v1beta2["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == encoded
    assert payload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == encoded  # not changed
