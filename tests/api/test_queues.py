"""ClusterQueues (quota, usage, counts), LocalQueues and Cohorts."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.api.conftest import names, results, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_cluster_queue_quota_usage_and_counts(scheduled, client):
    items = results(client.get("/api/v1/clusterqueues/"))
    assert [cq["name"] for cq in items] == ["cluster-queue"]
    cq = client.get("/api/v1/clusterqueues/cluster-queue/").json()
    assert cq == items[0]
    assert cq["flavors"] == ["tas-gpu"] and cq["queueingStrategy"] == "BestEffortFIFO"
    assert cq["localQueues"] == ["ml/team-a"]
    gpu = next(r for r in cq["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    # 7 admitted workloads hold 272 GPUs (the engine's count, as in why-pending's quota lines)
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "512", "borrowingLimit": None, "lendingLimit": None,
                   "usage": "272", "available": "240"}
    assert cq["counts"] == {"waitingWorkloads": 1, "pendingWorkloads": 1, "activePendingWorkloads": 0,
                            "inadmissibleWorkloads": 1,
                            "reservingWorkloads": 7, "admittedWorkloads": 7}
    assert client.get("/api/v1/clusterqueues/nope/").status_code == 404


def test_local_queues_with_filters(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "other"}})
    upsert(workload_object("waiting", namespace="research", queue="team-b"))
    assert names(client.get("/api/v1/localqueues/")) == ["ml/team-a", "research/team-b"]
    assert names(client.get("/api/v1/localqueues/", {"namespace": "research"})) == ["research/team-b"]
    assert names(client.get("/api/v1/localqueues/", {"cluster_queue": "cluster-queue"})) == ["ml/team-a"]
    team_b = client.get("/api/v1/localqueues/research/team-b/").json()
    assert team_b["clusterQueue"] == "other"
    assert team_b["counts"]["pendingWorkloads"] == 1 and team_b["counts"]["activePendingWorkloads"] == 1
    team_a = client.get("/api/v1/localqueues/ml/team-a/").json()
    assert team_a["counts"]["admittedWorkloads"] == 7
    assert client.get("/api/v1/localqueues/ml/nope/").status_code == 404


def test_cohorts(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "root"}, "spec": {}})
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "research"},
            "spec": {"parentName": "root", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "tas-gpu", "resources": [{"name": "cpu", "nominalQuota": "10"}]}]}]}})
    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    cq["spec"]["cohortName"] = "research"
    cq["metadata"]["resourceVersion"] = "2"
    upsert(cq)
    assert names(client.get("/api/v1/cohorts/")) == ["research", "root"]
    research = client.get("/api/v1/cohorts/research/").json()
    assert research["parent"] == "root" and research["clusterQueues"] == ["cluster-queue"]
    assert research["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "10"
    root = client.get("/api/v1/cohorts/root/").json()
    assert root["children"] == ["research"] and root["parent"] is None
    assert client.get("/api/v1/clusterqueues/cluster-queue/").json()["cohort"] == "research"
    assert client.get("/api/v1/cohorts/nope/").status_code == 404
    assert research["cycle"] is None and root["cycle"] is None


def test_a_cohort_under_a_cycle_says_so(scheduled, client):
    for name, parent in (("a", "b"), ("b", "a"), ("leaf", "a"), ("root", None)):
        upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                "spec": {"parentName": parent} if parent else {}})
    cycles = {c["name"]: c["cycle"] for c in client.get("/api/v1/cohorts/").json()["results"]}
    assert cycles == {"a": ["a", "b", "a"], "b": ["b", "a", "b"], "leaf": ["leaf", "a", "b", "a"], "root": None}
    assert client.get("/api/v1/cohorts/leaf/").json()["invalidReason"] is None
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cyclic"},
            "spec": {"cohortName": "leaf", "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "tas-gpu", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    assert client.get("/api/v1/clusterqueues/cyclic/").json()["cohortCycle"] == ["leaf", "a", "b", "a"]
    listed = {q["name"]: q["cohortCycle"] for q in results(client.get("/api/v1/clusterqueues/"))}
    assert listed == {"cluster-queue": None, "cyclic": ["leaf", "a", "b", "a"]}


def test_queue_lists_order_and_refuse_unknown_orderings(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "another"}})
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-c", "namespace": "ml"}, "spec": {"clusterQueue": "other"}})
    for name, parent in (("root", ""), ("alpha", "root"), ("zeta", "")):
        upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                "spec": {"parentName": parent} if parent else {}})
    assert names(client.get("/api/v1/localqueues/", {"ordering": "-name"})) == [
        "ml/team-c", "research/team-b", "ml/team-a"]
    assert names(client.get("/api/v1/localqueues/", {"ordering": "cluster_queue"})) == [
        "research/team-b", "ml/team-a", "ml/team-c"]
    assert names(client.get("/api/v1/localqueues/", {"ordering": "-namespace", "namespace": "ml"})) == [
        "ml/team-a", "ml/team-c"]  # ties on namespace keep namespace,name
    assert names(client.get("/api/v1/cohorts/", {"ordering": "-name"})) == ["zeta", "root", "alpha"]
    assert names(client.get("/api/v1/cohorts/", {"ordering": "-parent"})) == ["alpha", "root", "zeta"]
    assert names(client.get("/api/v1/clusterqueues/", {"ordering": "-name"})) == ["cluster-queue"]
    for path in ("localqueues", "cohorts", "clusterqueues"):
        response = client.get(f"/api/v1/{path}/", {"ordering": "created"})
        assert response.status_code == 400, path
        assert "ordering" in response.json()["detail"], response.json()
        assert client.get(f"/api/v1/{path}/", {"ordering": ["name", "-name"]}).status_code == 400
    twice = client.get("/api/v1/localqueues/", {"namespace": ["ml", "research"]})
    assert twice.status_code == 400 and "namespace" in twice.json()["detail"]


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_a_stopped_cluster_queue_in_the_service(scheduled, client):
    """stopPolicy read from the mirror: Hold leaves a new workload Inadmissible with Kueue's
    reason (why-pending too); HoldAndDrain evicts the admitted ones, in the history."""
    from datetime import timedelta

    from tasweb.scheduling.services import scheduling_pass_run
    from tests.api.conftest import DEMO_NOW

    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    cq["spec"]["stopPolicy"] = "Hold"
    cq["metadata"]["resourceVersion"] = "2"
    upsert(cq)
    upsert(workload_object("while-held"))
    scheduling_pass_run(now=DEMO_NOW + timedelta(minutes=1))
    held = client.get("/api/v1/workloads/ml/while-held/").json()
    assert (held["status"], held["message"]) == ("Inadmissible", "ClusterQueue cluster-queue is inactive")
    why = client.get("/api/v1/workloads/ml/while-held/why-pending/").json()
    assert why["pending"] is True
    assert "ClusterQueue cluster-queue is inactive: it is stopped (stopPolicy Hold)" in why["summary"]
    held_cq = client.get("/api/v1/clusterqueues/cluster-queue/").json()
    assert held_cq["counts"]["admittedWorkloads"] == 7 and held_cq["stopPolicy"] == "Hold"
    assert client.get("/api/v1/localqueues/ml/team-a/").json()["stopPolicy"] == "None"
    page = client.get("/queues/").content.decode()
    assert "Stopped (stopPolicy Hold): it admits no workload." in page

    lq = next(o for o in scheduled if o["kind"] == "LocalQueue" and o["metadata"]["name"] == "team-a")
    lq["spec"]["stopPolicy"] = "Hold"
    lq["metadata"]["resourceVersion"] = "2"
    upsert(lq)
    page = client.get("/queues/").content.decode()
    assert ('data-inactive-local-queue="ml/team-a">LocalQueue ml/team-a takes no workloads (Stopped): LocalQueue '
            "is stopped.") in page
    lq["spec"]["stopPolicy"] = "None"
    lq["metadata"]["resourceVersion"] = "3"
    upsert(lq)
    assert "data-inactive-local-queue" not in client.get("/queues/").content.decode()

    cq["spec"]["stopPolicy"] = "HoldAndDrain"
    cq["metadata"]["resourceVersion"] = "3"
    upsert(cq)
    scheduling_pass_run(now=DEMO_NOW + timedelta(minutes=2))
    evicted = results(client.get("/api/v1/history/", {"kind": "Evicted"}))
    assert len(evicted) == 7 and {e["message"] for e in evicted} == {"The ClusterQueue is stopped"}
    assert "and its admitted workloads are evicted" in client.get("/queues/").content.decode()


def test_a_cluster_queue_names_its_namespace_selector_and_why_pending_reads_the_mirrored_namespaces(
        scheduled, client):
    """The mirrored Namespaces are what the namespaceSelector is matched against: a workload of a
    namespace the ClusterQueue does not select waits, and why-pending says why."""
    from tasweb.cluster.models import ClusterQueue
    from tasweb.scheduling.services import scheduling_pass_run

    assert client.get("/api/v1/clusterqueues/cluster-queue/").json()["namespaceSelector"] == {}
    upsert({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ml", "uid": "ns-ml", "resourceVersion": "1", "labels": {"team": "sales"}}})
    cq = ClusterQueue.objects.get(name="cluster-queue").raw
    cq["spec"]["namespaceSelector"] = {"matchLabels": {"team": "research"}}
    cq["metadata"]["resourceVersion"] = "2"
    upsert(cq)
    assert client.get("/api/v1/clusterqueues/cluster-queue/").json()["namespaceSelector"] == {
        "matchLabels": {"team": "research"}}
    upsert(workload_object("outsider", gpus=1, count=1))
    scheduling_pass_run()
    body = client.get("/api/v1/workloads/ml/outsider/why-pending/").json()
    assert body["pending"] is True
    assert "workload namespace doesn't match ClusterQueue selector" in str(body)
    assert "the namespaceSelector of ClusterQueue cluster-queue does not select its Namespace ml" in str(body)
