"""/metrics: Kueue's queue and quota gauges and the service's own, in Prometheus's formats,
read like the ClusterQueues."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from tasweb.scheduling.models import SchedulingPass
from tests.api.conftest import upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

LEADER = {"replica_role": "leader"}


def scrape(client: Client, **headers) -> dict[str, dict[tuple, float]]:
    """The text exposition parsed: metric name -> {sorted labels without replica_role: value};
    every sample must carry replica_role="leader"."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            labels = dict(sample.labels)
            assert labels.pop("replica_role") == "leader", sample
            out.setdefault(sample.name, {})[tuple(sorted(labels.items()))] = sample.value
    return out


def cpu_cores(text: str) -> float:
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def value(metrics: dict, metric: str, **labels: str) -> float:
    return metrics[metric][tuple(sorted(labels.items()))]


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_queue_gauges_match_the_api_counts(scheduled, client):
    metrics = scrape(client)
    counts = client.get("/api/v1/clusterqueues/cluster-queue/").json()["counts"]
    assert counts["inadmissibleWorkloads"] == 1 and counts["admittedWorkloads"] == 7
    assert value(metrics, "kueue_pending_workloads", cluster_queue="cluster-queue", status="inadmissible") == 1
    assert value(metrics, "kueue_pending_workloads", cluster_queue="cluster-queue", status="active") == 0
    assert value(metrics, "kueue_reserving_active_workloads", cluster_queue="cluster-queue") == 7
    assert value(metrics, "kueue_admitted_active_workloads", cluster_queue="cluster-queue") == 7
    assert value(metrics, "kueue_local_queue_pending_workloads", name="team-a", namespace="ml",
                 status="inadmissible") == 1
    assert value(metrics, "kueue_local_queue_admitted_active_workloads", name="team-a", namespace="ml") == 7

    # a new workload waits, active, in its LocalQueue; an empty LocalQueue reports zeros
    upsert(workload_object("fresh"))
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "idle", "namespace": "research"}, "spec": {"clusterQueue": "cluster-queue"}})
    metrics = scrape(client)
    assert value(metrics, "kueue_pending_workloads", cluster_queue="cluster-queue", status="active") == 1
    assert value(metrics, "kueue_local_queue_pending_workloads", name="team-a", namespace="ml", status="active") == 1
    assert value(metrics, "kueue_local_queue_pending_workloads", name="idle", namespace="research",
                 status="active") == 0
    assert value(metrics, "kueue_local_queue_reserving_active_workloads", name="idle", namespace="research") == 0


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_quota_in_kueue_units(scheduled, client):
    metrics = scrape(client)
    quota = {r["name"]: r for r in client.get("/api/v1/clusterqueues/cluster-queue/").json()[
        "resourceGroups"][0]["flavors"][0]["resources"]}
    labels = {"cohort": "", "cluster_queue": "cluster-queue", "flavor": "tas-gpu"}
    # 7 admitted workloads reserve 272 of the 512 GPUs (as the API says)
    assert quota["nvidia.com/gpu"]["nominalQuota"] == "512" and quota["nvidia.com/gpu"]["usage"] == "272"
    assert value(metrics, "kueue_cluster_queue_nominal_quota", resource="nvidia.com/gpu", **labels) == 512
    assert value(metrics, "kueue_cluster_queue_resource_reservation", resource="nvidia.com/gpu", **labels) == 272
    # CPU in cores, as Kueue reports it (the engine keeps milli-CPU)
    cpu_quota = quota["cpu"]["nominalQuota"]
    assert value(metrics, "kueue_cluster_queue_nominal_quota", resource="cpu", **labels) == float(cpu_quota)
    assert value(metrics, "kueue_cluster_queue_resource_reservation", resource="cpu", **labels) == float(
        quota["cpu"]["usage"])
    # no limits set, so no limit series
    assert not metrics.get("kueue_cluster_queue_borrowing_limit")
    assert not metrics.get("kueue_cluster_queue_lending_limit")


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_flavor_nodes_capacity_and_usage(scheduled, client):
    metrics = scrape(client)
    # the example: 2 blocks x 4 racks x 8 GPU nodes, one NotReady, one tainted
    assert value(metrics, "tas_flavor_nodes", flavor="tas-gpu") == 64
    assert value(metrics, "tas_flavor_nodes_marked", flavor="tas-gpu", condition="NotReady") == 1
    assert value(metrics, "tas_flavor_nodes_marked", flavor="tas-gpu", condition="Tainted") == 1
    assert value(metrics, "tas_flavor_nodes_marked", flavor="tas-gpu", condition="Cordoned") == 0
    assert value(metrics, "tas_flavor_capacity", flavor="tas-gpu", resource="nvidia.com/gpu") == 512
    # what the TopologyAssignments of the 7 admitted workloads take: 272 GPUs, as their quota
    assert value(metrics, "tas_flavor_tas_usage", flavor="tas-gpu", resource="nvidia.com/gpu") == 272
    # the running non-TAS pods, as the flavor tree of the API sums them over the blocks
    blocks = [d for d in client.get("/api/v1/flavors/tas-gpu/tree/").json()["domains"] if d["level"] == 0]
    non_tas = sum(int(b["nonTasUsage"].get("nvidia.com/gpu", "0")) for b in blocks)
    assert non_tas > 0
    assert value(metrics, "tas_flavor_non_tas_usage", flavor="tas-gpu", resource="nvidia.com/gpu") == non_tas
    assert value(metrics, "tas_flavor_non_tas_usage", flavor="tas-gpu", resource="cpu") == sum(
        cpu_cores(b["nonTasUsage"].get("cpu", "0")) for b in blocks)


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_last_pass(mirror, client):
    assert "tas_scheduling_pass_last_duration_seconds" not in scrape(client)  # no pass yet: no sample
    from tasweb.scheduling.services import scheduling_pass_run
    from tests.api.conftest import DEMO_NOW

    scheduling_pass_run(now=DEMO_NOW)
    last = SchedulingPass.objects.order_by("-finished_at").first()
    metrics = scrape(client)
    assert value(metrics, "tas_scheduling_pass_last_workloads", outcome="admitted") == last.admitted == 7
    assert value(metrics, "tas_scheduling_pass_last_duration_seconds") == last.duration_ms / 1000
    assert value(metrics, "tas_scheduling_pass_last_finished_timestamp_seconds") == last.finished_at.timestamp()


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_openmetrics_when_asked(scheduled, client):
    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    text = response.content.decode()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(text)}
    assert families["kueue_admitted_active_workloads"].samples[0].value == 7


@override_settings(TAS_API_ANONYMOUS_READ=False)
def test_needs_credentials_when_anonymous_reading_is_off(scheduled, client, token):
    refused = client.get("/metrics", HTTP_ACCEPT="text/plain")
    assert refused.status_code == 401
    assert refused["Content-Type"].startswith("text/plain")
    assert b"credentials" in refused.content
    metrics = scrape(client, HTTP_AUTHORIZATION=f"Token {token}")
    assert value(metrics, "kueue_admitted_active_workloads", cluster_queue="cluster-queue") == 7


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_unknown_parameter_is_refused(scheduled, client):
    response = client.get("/metrics", {"cluster_queue": "x"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert "cluster_queue" in response.json()["detail"]


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_cluster_queue_status_follows_its_active_condition(scheduled, client):
    """kueue_cluster_queue_status is 1 for "active" until the ClusterQueue names a flavor the
    cluster lacks; the API's Active condition says why, as Kueue's status does."""
    metrics = scrape(client)
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="active") == 1
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="pending") == 0
    assert client.get("/api/v1/clusterqueues/cluster-queue/").json()["active"] == {
        "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
    assert value(metrics, "kueue_local_queue_status", name="team-a", namespace="ml", active="True") == 1
    assert value(metrics, "kueue_local_queue_status", name="team-a", namespace="ml", active="False") == 0

    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    group = cq["spec"]["resourceGroups"][0]
    group["flavors"].append({"name": "spare-gpu", "resources": [
        {"name": r["name"], "nominalQuota": "0"} for r in group["flavors"][0]["resources"]]})
    cq["metadata"]["resourceVersion"] = "9"
    upsert(cq)
    metrics = scrape(client)
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="active") == 0
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="pending") == 1
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="terminating") == 0
    active = client.get("/api/v1/clusterqueues/cluster-queue/").json()["active"]
    assert active == {"status": "False", "reason": "FlavorNotFound",
                      "message": "Can't admit new workloads: references missing ResourceFlavor(s): spare-gpu."}
    assert client.get("/api/v1/clusterqueues/").json()["results"][0]["active"] == active
    assert value(metrics, "kueue_local_queue_status", name="team-a", namespace="ml", active="False") == 1
    assert client.get("/api/v1/localqueues/ml/team-a/").json()["active"] == {
        "status": "False", "reason": "ClusterQueueIsInactive", "message": "Can't submit new workloads to clusterQueue"}
    page = client.get("/queues/").content.decode()
    assert 'data-inactive="FlavorNotFound"' in page and "references missing ResourceFlavor(s): spare-gpu" in page


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_a_cluster_queue_being_deleted_is_terminating(scheduled, client):
    """A ClusterQueue the mirror holds with a deletionTimestamp (Kueue's finalizer keeps it while
    workloads hold quota in it) is `terminating`, with Kueue's Terminating condition."""
    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    cq["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    cq["metadata"]["resourceVersion"] = "9"
    upsert(cq)
    metrics = scrape(client)
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="terminating") == 1
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="pending") == 0
    assert value(metrics, "kueue_cluster_queue_status", cluster_queue="cluster-queue", status="active") == 0
    assert client.get("/api/v1/clusterqueues/cluster-queue/").json()["active"] == {
        "status": "False", "reason": "Terminating", "message": "Can't admit new workloads; clusterQueue is terminating"}
    assert value(metrics, "kueue_local_queue_status", name="team-a", namespace="ml", active="False") == 1
