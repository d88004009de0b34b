"""Admission fair sharing in the service: a pass orders a ClusterQueue by its LocalQueues'
usage, writes the usage it sampled to the LocalQueues' status (rows, and the cluster in control
mode), a state built again from the database carries on from it, and the API shows it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.test import Client

from tasweb.api.state import engine_view_reset
from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import runtime as rt
from tasweb.scheduling import services
from tasweb.scheduling.models import ClusterWrite
from tests.engine.factories import NAMESPACE, NOW
from tests.engine.test_admission_fair_sharing import cluster as afs_cluster
from tests.engine.test_admission_fair_sharing import job, lq

pytestmark = [pytest.mark.services, pytest.mark.django_db]

SECTION = {"usageHalfLifeTime": "5m", "usageSamplingInterval": "5m"}
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1"


def write_config(path: Path, settings, section: dict) -> None:
    path.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                    "admissionFairSharing": section}))
    settings.TAS_KUEUE_CONFIG = str(path)
    services._configurations.clear()
    engine_view_reset()


@pytest.fixture
def afs(tmp_path: Path, settings) -> Iterator[None]:
    write_config(tmp_path / "kueue-config.yaml", settings, SECTION)
    yield
    services._configurations.clear()
    engine_view_reset()


def seed(*objects: dict) -> None:
    for obj in objects:
        object_upsert(kind=obj["kind"], obj=obj)


def seeded() -> None:
    """ "a" used 10 CPUs, "b" 1: b's workload goes first though it came later."""
    seed(*afs_cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"})),
         job("older", "a", created=-60), job("newer", "b"), job("later", "b", created=30))


def status_of(name: str) -> dict | None:
    raw = cluster.LocalQueue.objects.get(namespace=NAMESPACE, name=name).raw
    return ((raw.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")


def test_the_pass_orders_by_usage_and_writes_what_it_sampled(afs):
    seeded()
    services.scheduling_pass_run(now=NOW, send_to_cluster=True, observe=False)
    statuses = dict(cluster.Workload.objects.values_list("name", "status"))
    assert statuses["newer"] == cluster.WorkloadStatus.ADMITTED
    assert statuses["older"] != cluster.WorkloadStatus.ADMITTED
    # b's admission: its penalty (half of 2 CPUs), taken in by the sample at the end of the pass
    assert status_of("b") == {"consumedResources": {"cpu": "2"}, "lastUpdate": "2025-06-01T12:00:00Z"}
    assert status_of("a") == {"consumedResources": {"cpu": "10"}, "lastUpdate": "2025-06-01T12:00:00Z"}
    writes = ClusterWrite.objects.filter(kind=ClusterWrite.Kind.LOCAL_QUEUE_STATUS)
    assert [(w.namespace, w.name, w.payload) for w in writes] == [
        (NAMESPACE, "b", {"status": {"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": {"cpu": "2"}, "lastUpdate": "2025-06-01T12:00:00Z"}}}})]


def test_a_state_built_again_carries_on_from_the_written_usage(afs):
    seeded()
    services.scheduling_pass_run(now=NOW, observe=False)
    assert not ClusterWrite.objects.exists()  # the simulator's mirror is the cluster: nothing to send
    warm = rt.runtime_current()
    assert warm is not None
    fresh = rt.runtime_build(gates_text=services.engine_settings_key(), gates=services.feature_gates(),
                             config=services.kueue_configuration()[1])
    for name in ("a", "b"):
        key = f"{NAMESPACE}/{name}"
        assert fresh.engine.state.lq_usage[key].consumed == pytest.approx(warm.engine.state.lq_usage[key].consumed)
        assert fresh.engine.state.local_queue_usage(key) == pytest.approx(warm.engine.state.local_queue_usage(key))


def test_usage_decays_and_a_resource_no_longer_consumed_is_patched_away(afs, tmp_path, settings):
    seed(*afs_cluster(2, lq("a", {"cpu": "1", "memory": "5"}, sampled=-600)))
    services.scheduling_pass_run(now=NOW, send_to_cluster=True, observe=False)
    (write,) = ClusterWrite.objects.filter(kind=ClusterWrite.Kind.LOCAL_QUEUE_STATUS)
    consumed = write.payload["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]
    # two half-lives towards nothing held: a quarter left, in milli-units
    assert consumed == {"cpu": "250m", "memory": "1250m"}
    assert status_of("a")["consumedResources"] == consumed
    # a half-life of 0 keeps nothing: the sample empties the usage, and the patch names what goes
    write_config(tmp_path / "zero.yaml", settings, {**SECTION, "usageHalfLifeTime": "0s"})
    services.scheduling_pass_run(now=NOW + timedelta(minutes=5), send_to_cluster=True, observe=False)
    last = ClusterWrite.objects.filter(kind=ClusterWrite.Kind.LOCAL_QUEUE_STATUS).order_by("id").last()
    assert last.payload["status"]["fairSharing"]["admissionFairSharingStatus"] == {
        "consumedResources": {"cpu": None, "memory": None}, "lastUpdate": "2025-06-01T12:05:00Z"}
    assert status_of("a") == {"consumedResources": {}, "lastUpdate": "2025-06-01T12:05:00Z"}


def test_the_api_shows_the_usage_and_the_order(afs):
    seeded()
    services.scheduling_pass_run(now=NOW, observe=False)
    client = Client(HTTP_HOST="localhost")
    queues = {q["name"]: q for q in client.get("/api/v1/localqueues/").json()["results"]}
    assert queues["a"]["fairSharing"] == {
        "weight": 1.0, "usage": 10.0, "ordersByUsage": True,
        "admissionFairSharingStatus": {"consumedResources": {"cpu": "10"}, "lastUpdate": "2025-06-01T12:00:00Z"}}
    assert queues["b"]["fairSharing"]["usage"] == 2.0
    cq = client.get("/api/v1/clusterqueues/cq/").json()
    assert (cq["admissionMode"], cq["ordersByLocalQueueUsage"]) == ("UsageBasedAdmissionFairSharing", True)
    # Kueue's visibility API lists the queue in the order the scheduler takes it: "b" (2) before "a" (10)
    body = client.get(f"{VISIBILITY}/clusterqueues/cq/pendingworkloads").json()
    assert [(i["metadata"]["name"], i["localQueueName"], i["positionInClusterQueue"]) for i in body["items"]] == [
        ("later", "b", 0), ("older", "a", 1)]
    body = client.get(f"{VISIBILITY}/namespaces/{NAMESPACE}/localqueues/a/pendingworkloads").json()
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in body["items"]] == [("older", 1, 0)]


def test_without_admission_fair_sharing_the_api_says_so(settings):
    settings.TAS_KUEUE_CONFIG = ""
    services._configurations.clear()
    engine_view_reset()
    seeded()
    services.scheduling_pass_run(now=NOW, observe=False)
    client = Client(HTTP_HOST="localhost")
    queues = {q["name"]: q for q in client.get("/api/v1/localqueues/").json()["results"]}
    assert queues["a"]["fairSharing"]["usage"] is None
    assert queues["a"]["fairSharing"]["ordersByUsage"] is False
    assert client.get("/api/v1/clusterqueues/cq/").json()["ordersByLocalQueueUsage"] is False
    body = client.get(f"{VISIBILITY}/clusterqueues/cq/pendingworkloads").json()
    # queue order: a's "older" was admitted, b's two wait by their creation time
    assert [i["metadata"]["name"] for i in body["items"]] == ["newer", "later"]
    engine_view_reset()


def test_the_queues_page_shows_the_local_queues_usage_in_order(afs):
    seeded()
    services.scheduling_pass_run(now=NOW, observe=False)
    html = Client(HTTP_HOST="localhost").get("/queues/").content.decode()
    assert "its workloads are ordered by their LocalQueue's usage first" in html
    assert "in queue order (LocalQueue usage, then priority, then age)" in html
    rows = re.findall(r'<tr data-local-queue="([^"]+)"><td>[^<]*</td><td data-usage>([^<]*)</td>', html)
    assert rows == [(f"{NAMESPACE}/b", "2"), (f"{NAMESPACE}/a", "10")]
    # the waiting workloads in the order the scheduler takes them
    listed = re.findall(r'<li data-workload="([^"]+)">', html)
    assert listed == [f"{NAMESPACE}/later", f"{NAMESPACE}/older"]
