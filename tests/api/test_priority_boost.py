"""With the PriorityBoost gate on, the service's queue listings (why-pending's position, the
visibility API) order as the scheduler does: by priority plus the priority-boost annotation.
Workloads mirrored before the boost was stored get it from the migration."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tasweb.api import selectors as api
from tasweb.cluster import models as cluster
from tests.engine.test_queues import base, cq, job
from tests.scheduling.test_sticky_head import seed

pytestmark = [pytest.mark.services, pytest.mark.django_db]

BOOST = "kueue.x-k8s.io/priority-boost"


@pytest.fixture
def waiting():
    """"plain" (priority 10) came first; "boosted" (priority 0, boost 100) after it. No pass has
    run: both are Pending, and why-pending places them by queue order."""
    seed(*base(cq("a", cpu=4)),
         job("plain", "a", cpu="1", priority=10, created=0),
         job("boosted", "a", cpu="1", priority=0, created=10, annotations={BOOST: "100"}))


def stop_of(name: str):
    return api.workload_stop(cluster.Workload.objects.get(name=name))


def test_the_boost_is_stored(waiting):
    assert cluster.Workload.objects.get(name="boosted").priority_boost == 100
    assert cluster.Workload.objects.get(name="plain").priority_boost == 0


def test_with_the_gate_on_the_boosted_workload_is_ahead(waiting, settings):
    settings.TAS_FEATURE_GATES = "PriorityBoost=true"
    stop = stop_of("plain")
    assert stop is not None and stop.blocking == ["default/boosted"]
    assert "behind workload default/boosted in ClusterQueue a, at position 2" in stop.message
    assert stop_of("boosted") is None  # the head: no pass has decided on it yet


def test_with_the_gate_off_the_boost_counts_for_nothing(waiting, settings):
    settings.TAS_FEATURE_GATES = ""
    stop = stop_of("boosted")
    assert stop is not None and stop.blocking == ["default/plain"]
    assert "at position 2" in stop.message


@pytest.mark.parametrize("text, stored", [("100", 100), ("-5", -5), ("lots", 0), ("4294967296", 0)])
def test_the_migration_fills_the_boost_of_rows_mirrored_before(waiting, text, stored):
    migration = importlib.import_module("tasweb.cluster.migrations.0006_workload_priority_boost")
    row = cluster.Workload.objects.get(name="plain")
    row.raw["metadata"]["annotations"] = {BOOST: text}
    cluster.Workload.objects.filter(pk=row.pk).update(raw=row.raw, priority_boost=0)
    migration.fill_boosts(apps, None)
    assert cluster.Workload.objects.get(name="plain").priority_boost == stored
