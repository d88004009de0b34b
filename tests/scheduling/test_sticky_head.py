"""The workload kept at the head of its BestEffortFIFO ClusterQueue while its preemptions
complete (Kueue's sticky preemptor), through the service: recorded with each pass, first in
Kueue's visibility API and the queue pages, named in the why-pending answers of those behind
it, and still at the head after the scheduler restarts."""

from __future__ import annotations

import pytest
from django.test import Client

from tasweb.api import selectors as api
from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import runtime as rt
from tasweb.scheduling import services
from tests.engine.factories import HOSTNAME, NOW, admitted, domains_json
from tests.engine.test_queues import base, cq, job

pytestmark = [pytest.mark.services, pytest.mark.django_db]

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1"


def seed(*objects: dict) -> None:
    for obj in objects:
        object_upsert(kind=obj["kind"], obj=obj)


@pytest.fixture
def preempting():
    """"preemptor" has preempted "low" and waits for it to go; "urgent", of higher priority,
    arrived after that pass, and the pass after it kept "preemptor" at the head."""
    seed(*base(cq("a", cpu=4, within="LowerPriority")),
         admitted(job("low", "a", count=1, cpu="4", priority=0),
                  assignments={"main": domains_json([HOSTNAME], [("x1", 1)])}, cluster_queue_name="a"),
         job("preemptor", "a", count=1, cpu="4", priority=10, created=10))
    record = services.scheduling_pass_run(now=NOW)
    assert cluster.Workload.objects.get(name="low").status == cluster.WorkloadStatus.PREEMPTED
    seed(job("urgent", "a", count=1, cpu="4", priority=100, created=20))
    after = services.scheduling_pass_run(now=NOW)
    assert (record.sticky_heads, after.sticky_heads) == ({"a": "default/preemptor"},) * 2
    return after


def pending_names(client: Client, url: str) -> list[tuple[str, int]]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in response.json()["items"]]


def test_each_pass_records_the_heads_it_keeps(preempting):
    assert services.scheduling_pass_run(now=NOW).sticky_heads == {"a": "default/preemptor"}
    cluster.Workload.objects.get(name="preemptor").delete()  # gone from the cluster
    # the next head needs the same preemption, already under way: it is the one kept now
    assert services.scheduling_pass_run(now=NOW).sticky_heads == {"a": "default/urgent"}
    cluster.Workload.objects.get(name="urgent").delete()
    assert services.scheduling_pass_run(now=NOW).sticky_heads == {}


def test_the_visibility_api_lists_it_first(preempting):
    client = Client(HTTP_HOST="localhost")
    # "low", evicted, is listed as queued again, after them by its priority
    everything = [("preemptor", 0), ("urgent", 1), ("low", 2)]
    assert pending_names(client, f"{VISIBILITY}/clusterqueues/a/pendingworkloads") == everything
    assert pending_names(client, f"{VISIBILITY}/clusterqueues/a/pendingworkloads?offset=1") == everything[1:]
    assert pending_names(client, f"{VISIBILITY}/clusterqueues/a/pendingworkloads?limit=1") == everything[:1]
    assert pending_names(client, f"{VISIBILITY}/namespaces/default/localqueues/lq-a/pendingworkloads") == everything


def test_why_pending_of_one_behind_it_names_it(preempting):
    row = cluster.Workload.objects.get(name="urgent")
    assert (row.status, row.cluster_queue) == (cluster.WorkloadStatus.PENDING, "")  # no pass decided on it
    stop = api.workload_stop(row)
    assert stop.blocking == ["default/preemptor"]
    assert "behind workload default/preemptor in ClusterQueue a (kept at the head until its preemptions " \
           "complete), at position 2" in stop.message
    own = api.workload_stop(cluster.Workload.objects.get(name="preemptor"))
    assert own is not None and own.blocking != ["default/urgent"]


def test_a_restarted_scheduler_keeps_it_at_the_head(preempting):
    rt.runtime_discard("the test restarts the scheduler")
    record = services.scheduling_pass_run(now=NOW)
    assert record.sticky_heads == {"a": "default/preemptor"}
    assert rt.runtime_current().engine.queues.queues["a"].sticky == "default/preemptor"
    # the head was evaluated again; the workload of higher priority was not
    assert cluster.Workload.objects.get(name="urgent").status == cluster.WorkloadStatus.PENDING
    assert not services.WorkloadStop.objects.filter(workload_key="default/urgent").exists()
