"""The API's fast read paths give the same answers as the plain ones: the capacity tree's
JSON kept per mirror version, the mirror version without table scans, workload filters that
let the database walk an index, and the why-pending search for workloads to free."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.renderers import JSONRenderer

from scheduler import explain
from scheduler.model import Workload as EngineWorkload
from scheduler.placement import TASPodSetRequest
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.topology_assignment import prepare_placement
from tasweb.api import selectors, state
from tasweb.cluster.models import Node, Workload
from tests.api.conftest import BLOCK, RACK, names, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

TREE = "/api/v1/flavors/tas-gpu/tree/"


def plain_tree_json(**query) -> bytes:
    """The tree as the view rendered it before it kept the bytes: the selector's dict through
    DRF's JSONRenderer."""
    return JSONRenderer().render(selectors.flavor_tree(flavor="tas-gpu", **query), "application/json", {})


# ---------------------------------------------------------------- the capacity tree's JSON


def test_kept_tree_json_is_what_the_renderer_makes(scheduled, client):
    first = client.get(TREE)
    assert first.status_code == 200 and first["Content-Type"] == "application/json"
    assert first.content == plain_tree_json()
    again = client.get(TREE)
    assert again.content == first.content
    for query, kwargs in (({"depth": 2}, {"depth": 2}), ({"domain": "b1/r3"}, {"root": ["b1", "r3"]}),
                          ({"depth": 2, "domain": "b2"}, {"depth": 2, "root": ["b2"]})):
        assert client.get(TREE, query).content == plain_tree_json(**kwargs), query
    # an indent asked for in Accept is another rendering, kept apart from the compact one
    indented = client.get(TREE, HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b"{\n  ") and json.loads(indented.content) == json.loads(first.content)
    assert client.get(TREE).content == first.content
    # the browsable API still gets its HTML page
    html = client.get(TREE, HTTP_ACCEPT="text/html")
    assert html.status_code == 200 and html["Content-Type"].startswith("text/html")


def test_kept_tree_json_is_replaced_when_the_mirror_changes(scheduled, client):
    before = client.get(TREE).content
    version = state.engine_view().version
    node = next(obj for obj in scheduled if obj["kind"] == "Node" and obj["metadata"]["name"] == "b2-r4-n1")
    node = {**node, "spec": {"unschedulable": True}}  # cordoned: out of the topology
    upsert(node)
    after = client.get(TREE)
    assert state.engine_view().version != version
    assert after.content != before and after.content == plain_tree_json()
    assert "b2/r4/b2-r4-n1" not in {d["id"] for d in after.json()["domains"]}
    assert after.json()["nodes"] == json.loads(before)["nodes"] - 1
    # a deleted node too: the deletion changes the mirror version, and the tree with it
    Node.objects.filter(name="b2-r4-n2").delete()
    gone = client.get(TREE)
    assert gone.json()["nodes"] == json.loads(before)["nodes"] - 2 and gone.content == plain_tree_json()


def test_unknown_flavor_tree_is_still_404(scheduled, client):
    assert client.get("/api/v1/flavors/nope/tree/").status_code == 404


# ---------------------------------------------------------------- the mirror version


def test_mirror_version_reads_no_table_in_full(scheduled):
    with CaptureQueriesContext(connection) as queries:
        state.mirror_version()
    (query,) = queries.captured_queries
    assert "COUNT(" not in query["sql"].upper()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + query["sql"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    for table in ("cluster_workload", "cluster_node", "cluster_pod"):
        assert not re.search(rf"Seq Scan on {table}\s", plan), plan


def test_mirror_version_moves_on_insert_update_and_delete_only(scheduled):
    before = state.mirror_version()
    Workload.objects.filter(name="no-such-workload").delete()  # a DELETE that removes nothing
    assert state.mirror_version() == before
    upsert(workload_object("new-one"))
    inserted = state.mirror_version()
    assert inserted != before
    Workload.objects.filter(namespace="ml", name="new-one").delete()
    deleted = state.mirror_version()
    assert deleted != inserted
    with connection.cursor() as cursor:  # a raw DELETE, past the ORM, is seen too
        cursor.execute("DELETE FROM cluster_pod WHERE name = %s", ["llm-inference-0"])
    assert state.mirror_version() != deleted


def test_a_pass_moves_the_mirror_version_only_by_what_it_writes(scheduled):
    """A pass that changes nothing (most, in a quiet cluster) keeps the web's view: rebuilding
    it costs seconds on a large cluster. One that admits a workload moves the version."""
    from tasweb.scheduling.services import scheduling_pass_run
    from tests.api.conftest import DEMO_NOW

    view = state.engine_view()
    before = view.version
    scheduling_pass_run(now=DEMO_NOW)
    assert state.mirror_version() == before
    assert state.engine_view() is view and view.caught_up == 0
    upsert(workload_object("fits", count=1, gpus=1))
    scheduling_pass_run(now=DEMO_NOW)  # admits it: its row is written
    assert Workload.objects.get(name="fits").status == "Admitted"
    after = state.engine_view()
    assert after.version != before and after.workloads["ml/fits"].is_admitted


def test_deletion_log_keeps_only_its_last_rows(scheduled):
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO cluster_mirror_deletion (id) SELECT generate_series(1850, 1950)")
        cursor.execute("SELECT setval('cluster_mirror_deletion_id_seq', 1999)")
        Node.objects.filter(name="b2-r4-n1").delete()  # the 2,000th note prunes what is 100 older
        cursor.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM cluster_mirror_deletion")
        assert cursor.fetchone() == (1900, 2000, 52)
        Node.objects.filter(name="b2-r4-n2").delete()  # the next ones do not
        cursor.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM cluster_mirror_deletion")
        assert cursor.fetchone() == (1900, 2001, 53)


def test_name_search_has_a_trigram_index():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'cluster_wor_name_trgm_idx'")
        (definition,) = cursor.fetchone()
    assert "gin" in definition and "gin_trgm_ops" in definition and "upper" in definition.lower()


# ---------------------------------------------------------------- workload filters


def test_status_filters_need_no_distinct(scheduled, client):
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/v1/workloads/", {"status": ["Admitted", "Pending"], "cluster_queue": "cluster-queue"})
        client.get("/api/v1/history/", {"kind": ["Admitted", "NodeUnhealthy"]})
    assert not [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"]]


def test_cluster_queue_with_status_is_the_intersection(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "cluster-queue"}})
    upsert(workload_object("probe", namespace="research", queue="team-b"))

    def workload_names(**query) -> list[str]:
        return names(client.get("/api/v1/workloads/", {"page_size": 500, **query}))

    in_queue = set(workload_names(cluster_queue="cluster-queue"))
    for statuses in (["Admitted"], ["Pending"], ["Inadmissible"], ["Pending", "Admitted"], ["Finished"],
                     ["Inadmissible", "QuotaReserved"]):
        expected = [n for n in workload_names(status=statuses) if n in in_queue]
        assert workload_names(status=statuses, cluster_queue="cluster-queue") == expected, statuses
        assert workload_names(status=statuses, cluster_queue="nope") == []
    assert workload_names(status=["Pending"], cluster_queue="cluster-queue") == ["research/probe"]


def test_orderings_end_with_a_tiebreaker(scheduled, client):
    rows = [(w["status"], f"{w['namespace']}/{w['name']}")
            for w in client.get("/api/v1/workloads/", {"ordering": "status", "page_size": 500}).json()["results"]]
    assert rows == sorted(rows)
    descending = [(w["status"], f"{w['namespace']}/{w['name']}") for w in
                  client.get("/api/v1/workloads/", {"ordering": "-status", "page_size": 500}).json()["results"]]
    statuses = [status for status, _ in descending]
    assert statuses == sorted(statuses, reverse=True)
    for status in set(statuses):  # ties: by namespace and name, whatever the direction asked
        group = [name for s, name in descending if s == status]
        assert group == sorted(group)
    nodes = client.get("/api/v1/nodes/", {"ordering": "ready", "page_size": 500}).json()["results"]
    assert [(n["ready"], n["name"]) for n in nodes] == sorted((n["ready"], n["name"]) for n in nodes)


@pytest.mark.parametrize("listed", [True, False])
def test_level_filter_reads_the_domains_once(scheduled, client, monkeypatch, listed):
    if not listed:  # more workloads than it lists: the subquery, as before
        monkeypatch.setattr(selectors, "MAX_LISTED_IDS", 1)
    query = {f"level.{RACK}": "r1", "page_size": 2}
    with CaptureQueriesContext(connection) as queries:
        body = client.get("/api/v1/workloads/", query).json()
    assert body["count"] == 4 and body["countExact"] is True and len(body["results"]) == 2
    domain_reads = [q for q in queries.captured_queries if "scheduling_assignmentdomain" in q["sql"]]
    assert len(domain_reads) == (1 if listed else 3)  # else: the look, then the page's and the count's
    everything = names(client.get("/api/v1/workloads/", {f"level.{RACK}": "r1", "page_size": 500}))
    assert everything == ["ml/job-bert-finetune", "ml/job-eval-suite", "ml/job-rl-actor-learner",
                          "ml/job-vision-train"]
    assert names(client.get("/api/v1/workloads/", {f"level.{BLOCK}": "b2", "search": "VISION"})) == [
        "ml/job-vision-train"]
    assert names(client.get("/api/v1/workloads/", {f"level.{RACK}": "r9"})) == []


# ---------------------------------------------------------------- why-pending: workloads to free


def reference_freeing_workloads(st, snap: TASFlavorSnapshot, req, path, assumed) -> list[EngineWorkload] | None:
    """The search as first written: every workload's leaves counted per domain, usage taken
    out and put back with the ClusterState's own methods."""
    def pods_inside(wl):
        tree, pods = snap.tree, 0
        for psa in wl.admission.pod_set_assignments if wl.admission else ():
            if psa.topology_assignment is None or st.tas_flavor_of(psa) != snap.name:
                continue
            for dom in psa.topology_assignment.domains:
                leaf = tree.leaf_for_values(dom.values)
                if leaf is not None and tree.leaves.values[leaf][: len(path)] == path:
                    pods += dom.count
        return pods

    running = [(w, pods_inside(w)) for w in st.workloads if w.has_quota_reservation and not w.is_finished]
    running = sorted([(w, n) for w, n in running if n > 0], key=lambda wn: (-wn[1], st.priority_of(wn[0])))
    removed = []
    try:
        for wl, _ in running[:explain.MAX_FREEING_CANDIDATES]:
            st.add_workload_tas_usage(wl, sign=-1)
            removed.append(wl)
            if explain._fits(snap, req, st, assumed):
                return list(removed)
        return None
    finally:
        for wl in removed:
            st.add_workload_tas_usage(wl, sign=1)


@pytest.mark.parametrize(("count", "gpus", "level"), [(25, 8, BLOCK), (9, 8, RACK), (3, 8, RACK), (40, 8, BLOCK),
                                                       (70, 8, BLOCK)])
def test_freeing_search_matches_the_reference(scheduled, count, gpus, level):
    upsert(workload_object("asks", count=count, gpus=gpus, level=level))
    view = state.engine_view()
    st, wl = view.state, view.workloads["ml/asks"]
    snap = st.tas_snapshots["tas-gpu"]
    ps = wl.pod_sets[0]
    req = TASPodSetRequest(pod_set=ps, count=ps.count, single_pod_requests=ps.spec.requests,
                                   flavor="tas-gpu", implied=False)
    placer, params, reason = prepare_placement(snap, req, None, gates=st.gates, assumed_usage={})
    assert placer is not None and params is not None, reason
    usage = snap.tas_usage.copy()
    running = explain._RunningWorkloads(st, snap)
    found = 0
    for lvl in range(snap.tree.depth):
        for d in snap.tree.level_domains(lvl):
            path = snap.tree.values_of[d]
            expected = reference_freeing_workloads(st, snap, req, path, {})
            assert np.array_equal(snap.tas_usage, usage)
            assert explain.freeing_workloads(st, snap, req, path, {}, running=running) == expected, path
            assert explain.freeing_workloads(st, snap, req, path, {}) == expected, path
            assert np.array_equal(snap.tas_usage, usage), path
            found += expected is not None
    if (count, level) == (25, BLOCK):
        assert found > 0  # the case the why-pending test describes: finishing job-vision-train helps
