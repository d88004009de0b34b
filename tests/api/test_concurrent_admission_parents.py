"""With the ConcurrentAdmission gate on, a parent Workload is not in a queue (its variants
are): the visibility API, the queue counts and why-pending's positions leave it out, and
why-pending tells the parent's own story (its variants) instead of a place in the queue."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tasweb.api import selectors as api
from tasweb.cluster import models as cluster
from tests.engine.test_queues import base, cq, job
from tests.scheduling.test_sticky_head import seed

pytestmark = [pytest.mark.services, pytest.mark.django_db]

PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/a/pendingworkloads"


def labelled(obj: dict, labels: dict[str, str]) -> dict:
    obj["metadata"]["labels"] = labels
    return obj


def variant_of(name: str, parent: str, *, created: float) -> dict:
    obj = job(name, "a", cpu="1", created=created)
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                           "name": parent, "uid": f"uid-{parent}", "controller": True}]
    return obj


@pytest.fixture
def waiting():
    """"first" came before the parent "job", whose variant came after both. No pass has run:
    all are Pending."""
    seed(*base(cq("a", cpu=4)),
         job("first", "a", cpu="1", created=0),
         labelled(job("job", "a", cpu="1", created=10), {PARENT_LABEL: "true"}),
         variant_of("job-variant", "job", created=20))


def listed(client) -> list[tuple[str, int]]:
    response = client.get(VISIBILITY)
    assert response.status_code == 200, response.content
    return [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in response.json()["items"]]


def stop_of(name: str):
    return api.workload_stop(cluster.Workload.objects.get(name=name))


def test_the_parent_label_is_stored(waiting):
    assert cluster.Workload.objects.get(name="job").concurrent_admission_parent
    assert not cluster.Workload.objects.get(name="job-variant").concurrent_admission_parent


def test_with_the_gate_on_the_parent_is_not_in_the_queue(waiting, settings, client):
    settings.TAS_FEATURE_GATES = "ConcurrentAdmission=true"
    assert listed(client) == [("first", 0), ("job-variant", 1)]
    assert "at position 2" in stop_of("job-variant").message  # not 3: the parent is not ahead of it
    assert api.local_queue_counts()[("default", "lq-a")].pending == 2


def test_with_the_gate_off_the_label_means_nothing(waiting, settings, client):
    settings.TAS_FEATURE_GATES = ""
    assert listed(client) == [("first", 0), ("job", 1), ("job-variant", 2)]
    assert "at position 3" in stop_of("job-variant").message
    assert api.local_queue_counts()[("default", "lq-a")].pending == 3


def test_why_the_parent_waits_names_its_variant(waiting, settings, client):
    settings.TAS_FEATURE_GATES = "ConcurrentAdmission=true"
    assert stop_of("job") is None  # no place in a queue: the engine answers
    body = client.get("/api/v1/workloads/default/job/why-pending/").json()
    assert body["pending"] is True
    assert body["summary"] == ("a ConcurrentAdmission parent: the scheduler admits one of its variants, not the "
                               "parent itself; its variants: default/job-variant (Pending)")
    assert body["explanation"]["fits"] is False


@pytest.mark.parametrize("value, parent", [("true", True), ("sample-job", False)])
def test_the_migration_marks_rows_mirrored_before(waiting, value, parent):
    migration = importlib.import_module("tasweb.cluster.migrations.0007_workload_concurrent_admission_parent")
    row = cluster.Workload.objects.get(name="first")
    row.raw["metadata"]["labels"] = {PARENT_LABEL: value}
    cluster.Workload.objects.filter(pk=row.pk).update(raw=row.raw, concurrent_admission_parent=False)
    migration.mark_parents(apps, None)
    assert cluster.Workload.objects.get(name="first").concurrent_admission_parent is parent


def test_the_workload_page_lists_the_variants(waiting, settings, client):
    settings.TAS_FEATURE_GATES = "ConcurrentAdmission=true"
    html = client.get("/workloads/default/job/").content.decode()
    assert "Its variants:" in html and "Stopped by:" not in html
    assert 'href="/workloads/default/job-variant/"' in html
