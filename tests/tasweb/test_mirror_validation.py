"""The mirror stores an object the engine must not trust with its `invalid_reason`: such a
row is kept (the API shows why) but never read by a scheduling pass."""

from __future__ import annotations

import pytest

from scheduler.limits import HugeInt
from tasweb.cluster import models as cluster
from tasweb.cluster.services import extract_fields, object_upsert
from tasweb.scheduling import selectors
from tests.sources import objects

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def store(kind: str, obj: dict) -> None:
    object_upsert(kind=kind, obj=obj)


def admitted_workload(name: str, hosts: list[tuple[str, int]], *, count: int = 2) -> dict:
    return objects.kueue_admission(objects.workload(name, count=count), hosts)


def reason(model, name: str) -> str:
    return model.objects.get(name=name).invalid_reason


def test_an_assignment_placing_more_pods_than_the_pod_set_has_is_invalid():
    store("Topology", objects.topology())
    store("ResourceFlavor", objects.flavor())
    wl = admitted_workload("huge", [("b1-r1-n1", 1000)])
    wl["status"]["admission"]["podSetAssignments"][0]["count"] = 2
    store("Workload", wl)
    why = reason(cluster.Workload, "huge")
    assert "status.admission.podSetAssignments[0].topologyAssignment" in why
    assert "places 1000 pods" in why
    row = cluster.Workload.objects.get(name="huge")
    assert row.pod_count == 0  # no number of it is trusted
    assert not selectors.active_workload_rows().filter(name="huge").exists()


def test_a_matching_assignment_is_valid():
    store("Topology", objects.topology())
    store("ResourceFlavor", objects.flavor())
    store("Workload", admitted_workload("fits", [("b1-r1-n1", 2)]))
    assert reason(cluster.Workload, "fits") == ""


def test_an_assignment_in_levels_the_flavors_topology_lacks_is_invalid():
    store("Topology", objects.topology())
    store("ResourceFlavor", objects.flavor())
    wl = admitted_workload("elsewhere", [("b1-r1-n1", 2)])
    ta = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    ta["levels"] = ["example.com/zone"]
    store("Workload", wl)
    why = reason(cluster.Workload, "elsewhere")
    assert "topologyAssignment.levels" in why and "example.com/zone" in why


def test_negative_allocatable_makes_a_node_invalid():
    n = objects.node("x1", block="b1", rack="r1")
    n["status"]["allocatable"]["cpu"] = "-4"
    store("Node", n)
    assert "status.allocatable.cpu: must not be negative" in reason(cluster.Node, "x1")


@pytest.mark.parametrize(("label", "value", "fragment"), [
    ("example.com/rack", "rack 1", "metadata.labels.example.com/rack: 'rack 1' is not a valid label value"),
    ("bad key!", "x", "metadata.labels.bad key!: 'bad key!' is not a valid label key"),
])
def test_a_label_the_api_server_refuses_makes_a_node_invalid(label, value, fragment):
    n = objects.node("x1", block="b1", rack="r1")
    n["metadata"]["labels"][label] = value
    store("Node", n)
    assert fragment in reason(cluster.Node, "x1")
    assert selectors.engine_nodes() == []  # no pass places a pod on it


def test_cohorts_forming_a_cycle_are_kept_for_the_engine():
    """Kueue keeps them and holds the ClusterQueues under the cycle inactive (the engine does the
    same: tests/engine/test_cohort_cycle.py), so the mirror stores them valid."""
    for name, parent in (("a", "b"), ("b", "c"), ("c", "a"), ("s", "s")):
        c = objects.cohort(name)
        c["spec"]["parentName"] = parent
        store("Cohort", c)
    for name in "abcs":
        assert reason(cluster.Cohort, name) == ""
    parents = {c.name: c.parent for c in selectors.engine_inputs().cohorts}
    assert parents == {"a": "b", "b": "c", "c": "a", "s": "s"}


def test_a_pod_set_count_over_int32_is_invalid():
    store("Workload", objects.workload("big", count=10**30))
    assert "spec.podSets[0].count: must be at most 2147483647" in reason(cluster.Workload, "big")


def test_a_5000_digit_count_is_invalid_not_a_crash():
    # a literal the loader keeps as HugeInt (a file import refuses the file before that)
    wl = objects.workload("digits")
    wl["spec"]["podSets"][0]["count"] = HugeInt("9" * 5000)
    fields, why = extract_fields("Workload", wl)
    assert fields == {} and "spec.podSets[0].count" in why and "an integer of 5000 digits" in why


def test_levels_of_a_topology_stored_invalid_are_not_held_against_a_workload():
    # "not known" is no error: the flavor's Topology may be mended, and the workload read then
    bad = objects.topology()
    bad["spec"]["levels"] = []
    store("Topology", bad)
    store("ResourceFlavor", objects.flavor())
    assert reason(cluster.Topology, bad["metadata"]["name"]) != ""
    wl = admitted_workload("elsewhere", [("b1-r1-n1", 2)])
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["levels"] = ["example.com/zone"]
    store("Workload", wl)
    assert reason(cluster.Workload, "elsewhere") == ""


def flavor_queries(queries) -> list[str]:
    return [q["sql"] for q in queries if "cluster_resourceflavor" in q["sql"] or "cluster_topology" in q["sql"]]


def test_an_admitted_workload_is_checked_against_its_flavors_topology_in_one_query():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    store("Topology", objects.topology())
    store("ResourceFlavor", objects.flavor())
    with CaptureQueriesContext(connection) as queries:
        store("Workload", admitted_workload("fits", [("b1-r1-n1", 2)]))
    (query,) = flavor_queries(queries.captured_queries)
    assert "cluster_topology" in query
    assert reason(cluster.Workload, "fits") == ""


def test_a_listing_reads_the_flavors_topology_levels_once():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tasweb.cluster.services import objects_resync

    store("Topology", objects.topology())
    store("ResourceFlavor", objects.flavor())
    stored = [admitted_workload(f"w{i}", [("b1-r1-n1", 2)]) for i in range(4)]
    for wl in stored:
        store("Workload", wl)
    listing = [admitted_workload(f"w{i}", [("b1-r1-n1", 2)]) for i in range(8)]
    for i, wl in enumerate(listing):
        wl["metadata"]["resourceVersion"] = str(1000 + i)  # newer than what is stored
    listing[5]["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["levels"] = ["example.com/zone"]
    with CaptureQueriesContext(connection) as queries:
        counts = objects_resync(kind="Workload", objects=listing)
    assert (counts["created"], counts["updated"]) == (4, 4)
    assert len(flavor_queries(queries.captured_queries)) == 1
    assert [reason(cluster.Workload, f"w{i}") == "" for i in range(8)] == [True] * 5 + [False] + [True] * 2


def test_an_object_the_engine_fails_to_read_is_kept_out_of_the_passes_and_logged(monkeypatch, caplog):
    """A failure the engine's reading does not foresee (a bug) marks that one object invalid and
    logs it whole; the mirror goes on with the objects after it."""
    from tasweb.cluster import services

    real = services.EXTRACTORS["Workload"]

    def failing(obj):
        if obj["metadata"]["name"] == "odd":
            raise ZeroDivisionError("integer modulo by zero")
        return real(obj)

    monkeypatch.setitem(services.EXTRACTORS, "Workload", failing)
    with caplog.at_level("ERROR", logger="tasweb.cluster.services"):
        store("Workload", objects.workload("odd"))
    store("Workload", objects.workload("plain"))
    why = reason(cluster.Workload, "odd")
    assert "the engine failed to read this object (ZeroDivisionError: integer modulo by zero)" in why
    assert any("Workload 'odd'" in r.getMessage() and r.exc_info for r in caplog.records)
    assert reason(cluster.Workload, "plain") == ""
    assert not selectors.active_workload_rows().filter(name="odd").exists()
    assert selectors.active_workload_rows().filter(name="plain").exists()
