"""Kueue's visibility API: PendingWorkloadsSummary for ClusterQueues and LocalQueues."""

from __future__ import annotations

import pytest

from tests.api.conftest import upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

V1BETA1 = "/apis/visibility.kueue.x-k8s.io/v1beta1"


def summary_items(response) -> list[tuple]:
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["metadata"] == {"creationTimestamp": None}
    return [(i["metadata"]["namespace"], i["metadata"]["name"], i["localQueueName"], i["priority"],
             i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in body["items"]]


def test_cluster_queue_pending_workloads_in_queue_order(queued, client):
    response = client.get(f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads")
    assert response.json()["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    # higher priority first, then older; job-moe-too-big (priority 200?) sits by its own priority
    items = summary_items(response)
    keys = [(ns, name) for ns, name, *_ in items]
    assert keys.index(("ml", "b-high")) < keys.index(("ml", "a-low"))
    assert keys.index(("research", "c-research")) < keys.index(("research", "d-research"))
    assert [pos for *_, pos, _ in items] == list(range(len(items)))  # positionInClusterQueue
    by_queue: dict[str, list[int]] = {}
    for _, _, queue, _, _, in_lq in items:
        by_queue.setdefault(queue, []).append(in_lq)
    assert by_queue == {queue: list(range(len(p))) for queue, p in by_queue.items()}
    first = response.json()["items"][0]
    # Kueue's fields, and this service's start-time estimate as one extra field
    assert set(first) == {"metadata", "priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue",
                          "predictedStart"}
    assert first["metadata"]["creationTimestamp"].endswith("Z")


def test_limit_and_offset(queued, client):
    url = f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads"
    everything = summary_items(client.get(url))
    assert summary_items(client.get(url, {"limit": 2})) == everything[:2]
    assert summary_items(client.get(url, {"offset": 1, "limit": 2})) == everything[1:3]
    assert summary_items(client.get(url, {"offset": 100})) == []
    assert summary_items(client.get(url, {"limit": 0})) == everything  # 0 means Kueue's default, 1000


def test_local_queue_pending_workloads(queued, client):
    cq_items = summary_items(client.get(f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads"))
    lq_items = summary_items(client.get(f"{V1BETA1}/namespaces/research/localqueues/team-b/pendingworkloads"))
    assert [name for _, name, *_ in lq_items] == ["c-research", "d-research"]
    assert [in_lq for *_, in_lq in lq_items] == [0, 1]
    cq_positions = {name: pos for _, name, _, _, pos, _ in cq_items}
    assert [pos for _, name, _, _, pos, _ in lq_items] == [cq_positions["c-research"], cq_positions["d-research"]]
    page = summary_items(client.get(f"{V1BETA1}/namespaces/research/localqueues/team-b/pendingworkloads",
                                    {"offset": 1}))
    assert [(name, in_lq) for _, name, _, _, _, in_lq in page] == [("d-research", 1)]
    v1beta2 = client.get("/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ml/localqueues/team-a/pendingworkloads")
    assert v1beta2.json()["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert "ml" in {ns for ns, *_ in summary_items(v1beta2)}


def test_errors_are_kubernetes_status_objects(queued, client):
    missing = client.get(f"{V1BETA1}/clusterqueues/nope/pendingworkloads")
    assert missing.status_code == 404
    assert missing.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found',
                              "reason": "NotFound", "code": 404,
                              "details": {"name": "nope", "group": "visibility.kueue.x-k8s.io",
                                          "kind": "clusterqueue"}}
    assert client.get(f"{V1BETA1}/namespaces/ml/localqueues/nope/pendingworkloads").json()["reason"] == "NotFound"
    bad = client.get(f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads", {"limit": "-1"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest" and "limit" in bad.json()["message"]
    for written in ("\uff11", " 1", "+1", "1_0"):  # int() reads each; a query string should not
        bad = client.get(f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads", {"offset": written})
        assert bad.status_code == 400 and "offset" in bad.json()["message"], written
    assert client.get("/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/x/pendingworkloads").status_code == 404
    for path in ("clusterqueues//pendingworkloads", "namespaces/ml/localqueues//pendingworkloads", "nodes"):
        unserved = client.get(f"{V1BETA1}/{path}")
        assert unserved.status_code == 404 and unserved.json()["kind"] == "Status", path
        assert unserved.json()["reason"] == "NotFound"


def test_discovery(queued, client):
    body = client.get(V1BETA1).json()
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert {r["name"] for r in body["resources"]} >= {"clusterqueues/pendingworkloads",
                                                      "localqueues/pendingworkloads"}


def test_bearer_token_as_kubernetes_clients_send_it(queued, client, token, settings):
    settings.TAS_API_ANONYMOUS_READ = False
    url = f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads"
    denied = client.get(url)
    assert denied.status_code == 401 and denied.json()["reason"] == "Unauthorized"
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


@pytest.mark.parametrize("gates, boosted_first", [("PriorityBoost=true", True), ("", False)])
def test_priority_boost_orders_the_queue_as_the_scheduler_does(queued, client, settings, gates, boosted_first):
    """a-low (priority 0) boosted by 1000 comes before b-high (500) while the gate is on, as in
    the scheduler's own order; the listing still reports the workload's spec.priority."""
    settings.TAS_FEATURE_GATES = gates
    boosted = workload_object("a-low", priority=0, created="2025-06-01T11:00:00Z", count=200, gpus=8)
    boosted["metadata"]["annotations"] = {"kueue.x-k8s.io/priority-boost": "1000"}
    upsert(boosted)
    items = summary_items(client.get(f"{V1BETA1}/clusterqueues/cluster-queue/pendingworkloads"))
    keys = [(ns, name) for ns, name, *_ in items]
    assert (keys.index(("ml", "a-low")) < keys.index(("ml", "b-high"))) == boosted_first
    assert next(priority for _, name, _, priority, *_ in items if name == "a-low") == 0
