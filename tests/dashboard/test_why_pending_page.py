"""The workload page tells why a workload waits as the scheduling cycle decided it: a head held
back by another head's reservation names that head, with a link to it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tasweb.api.state import engine_view_reset
from tasweb.cluster.services import object_upsert
from tasweb.scheduling.models import WorkloadStop
from tasweb.scheduling.services import scheduling_pass_run
from tests.dashboard.browser import load
from tests.dashboard.conftest import NOW, workload_object

pytestmark = [pytest.mark.services, pytest.mark.browser]

GPU = "nvidia.com/gpu"


def cluster_queue(name: str, *, gpus: int, strategy: str = "BestEffortFIFO") -> dict:
    resources = [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1000Gi"},
                 {"name": GPU, "nominalQuota": str(gpus)}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"namespaceSelector": {}, "cohortName": "hold-demo", "queueingStrategy": strategy,
                     "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU],
                                         "flavors": [{"name": "tas-gpu", "resources": resources}]}]}}


def local_queue(name: str, cq: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": "research", "uid": f"uid-lq-{name}", "resourceVersion": "1"},
            "spec": {"clusterQueue": cq}}


def queued(name: str, queue: str, *, gpus: int, count: int = 1, priority: int = 0, minutes_ago: int = 10) -> dict:
    obj = workload_object("research", name, count=count, gpus=gpus, level=None, priority=priority,
                          minutes_ago=minutes_ago)
    obj["spec"]["queueName"] = queue
    return obj


def test_a_head_held_back_by_a_reservation_names_the_holder(live_cluster, server_url, page):
    # hold-a (StrictFIFO) runs 8 of its 16 GPUs and its head needs all 16, with no preemption allowed:
    # it stays at the front and reserves the 8 left every cycle; hold-b's head would borrow them
    for obj in (cluster_queue("hold-a", gpus=16, strategy="StrictFIFO"), cluster_queue("hold-b", gpus=0)):
        object_upsert(kind="ClusterQueue", obj=obj)
    object_upsert(kind="LocalQueue", obj=local_queue("hold-a", "hold-a"))
    object_upsert(kind="LocalQueue", obj=local_queue("hold-b", "hold-b"))
    object_upsert(kind="Workload", obj=queued("a-running", "hold-a", gpus=8, minutes_ago=20))
    scheduling_pass_run(now=NOW + timedelta(seconds=10))
    object_upsert(kind="Workload", obj=queued("a-big", "hold-a", gpus=8, count=2, priority=50, minutes_ago=9))
    object_upsert(kind="Workload", obj=queued("b-small", "hold-b", gpus=8, minutes_ago=8))
    scheduling_pass_run(now=NOW + timedelta(seconds=20))
    engine_view_reset()
    stop = WorkloadStop.objects.get(workload_key="research/b-small")
    assert stop.step == "quota-held" and stop.record["blocking"] == ["research/a-big"]

    load(page, f"{server_url}/workloads/research/b-small/")
    page.wait_for_selector("#workload-why .why-stop")
    why = page.inner_text("#workload-why")
    assert "held by research/a-big's reservation" in why and "fits now" not in why
    assert "short by 8 of nvidia.com/gpu" in why
    link = page.locator("#workload-why a.why-blocking")
    assert link.inner_text() == "research/a-big" and link.get_attribute("href") == "/workloads/research/a-big/"
    assert page.locator("#workload-why .why-stop").get_attribute("data-verdict") == "waits"
    # when the cycle decided, in the pages' own format (not the record's ISO string)
    decided = page.inner_text("#workload-why .why-stop")
    assert f"at {NOW + timedelta(seconds=20):%Y-%m-%d %H:%M:%S} UTC." in decided, decided
