"""Topologies, ResourceFlavors and the capacity tree of a TAS flavor."""

from __future__ import annotations

import pytest

from tests.api.conftest import BLOCK, HOSTNAME, RACK, names, results, upsert

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_topology_list_and_detail(scheduled, client):
    items = results(client.get("/api/v1/topologies/"))
    assert items == [{"name": "default", "levels": [BLOCK, RACK, HOSTNAME], "flavors": ["tas-gpu"],
                      "invalidReason": None}]
    assert client.get("/api/v1/topologies/default/").json() == items[0]


def test_unknown_topology_is_404_json(scheduled, client):
    response = client.get("/api/v1/topologies/nope/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert "nope" in response.json()["detail"]


def test_flavor_list_and_detail(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "plain"},
            "spec": {"nodeLabels": {"node-group": "cpu"}}})
    assert names(client.get("/api/v1/flavors/")) == ["plain", "tas-gpu"]
    tas = client.get("/api/v1/flavors/tas-gpu/").json()
    assert tas == {"name": "tas-gpu", "nodeLabels": {"node-group": "tas"}, "topologyName": "default", "tas": True,
                   "nodeTaints": [], "tolerations": [], "invalidReason": None}
    plain = client.get("/api/v1/flavors/plain/").json()
    assert plain["tas"] is False and plain["topologyName"] is None
    assert client.get("/api/v1/flavors/nope/").status_code == 404


def test_tree_has_every_domain_with_capacity_usage_and_workloads(scheduled, client):
    response = client.get("/api/v1/flavors/tas-gpu/tree/")
    assert response.status_code == 200
    tree = response.json()
    assert tree["flavor"] == "tas-gpu" and tree["topology"] == "default"
    assert tree["levels"] == [BLOCK, RACK, HOSTNAME]
    domains = {d["id"]: d for d in tree["domains"]}
    # 2 blocks, 8 racks, 63 usable nodes (b1-r2-n8 is NotReady)
    assert [sum(1 for d in tree["domains"] if d["level"] == lvl) for lvl in range(3)] == [2, 8, 63]
    assert tree["nodes"] == 63
    rack = domains["b1/r3"]
    assert rack["parent"] == "b1" and rack["levelKey"] == RACK and rack["name"] == "r3"
    assert rack["nodes"] == 8
    assert rack["allocatable"]["nvidia.com/gpu"] == "64"
    # job-llm-pretrain runs 16 pods of 8 GPUs on racks b1/r3 and b1/r4: r3 is full
    assert rack["workloads"] == ["ml/job-llm-pretrain"] and rack["workloadCount"] == 1
    assert rack["tasUsage"]["nvidia.com/gpu"] == "64"
    assert rack["free"]["nvidia.com/gpu"] == "0"
    # non-TAS serving pods run on b1-r1-n1..: their usage shows as non-TAS usage
    assert domains["b1/r1/b1-r1-n1"]["nonTasUsage"]["nvidia.com/gpu"] == "4"
    # a parent's figures are the sums of its children's
    for parent in ("b1", "b2"):
        children = [d for d in tree["domains"] if d["parent"] == parent]
        assert sum(d["nodes"] for d in children) == domains[parent]["nodes"]
        assert set().union(*(set(d["workloads"]) for d in children)) == set(domains[parent]["workloads"])


def test_tree_depth_and_subtree(scheduled, client):
    top = client.get("/api/v1/flavors/tas-gpu/tree/", {"depth": 1}).json()
    assert [d["id"] for d in top["domains"]] == ["b1", "b2"]
    sub = client.get("/api/v1/flavors/tas-gpu/tree/", {"domain": "b2/r3"}).json()
    assert sub["domains"][0]["id"] == "b2/r3"
    assert all(d["id"].startswith("b2/r3") for d in sub["domains"])
    assert len(sub["domains"]) == 1 + 8  # the rack and its nodes (b2-r3-n1 is tainted, still in the tree)


@pytest.mark.parametrize(("query", "field"), [({"depth": "x"}, "depth"), ({"depth": 0}, "depth"),
                                               ({"depth": 99}, "depth"), ({"domain": "b1//r3"}, "domain"),
                                               ({"domain": "/"}, "domain")])
def test_tree_bad_parameters_are_400_naming_the_field(scheduled, client, query, field):
    response = client.get("/api/v1/flavors/tas-gpu/tree/", query)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_tree_of_a_flavor_without_topology_is_404(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "plain"},
            "spec": {}})
    assert client.get("/api/v1/flavors/plain/tree/").status_code == 404
    assert client.get("/api/v1/flavors/nope/tree/").status_code == 404


def test_topology_and_flavor_lists_order_and_refuse_unknown_orderings(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "plain"},
            "spec": {"nodeLabels": {"node-group": "cpu"}}})
    assert names(client.get("/api/v1/flavors/", {"ordering": "-name"})) == ["tas-gpu", "plain"]
    assert names(client.get("/api/v1/flavors/", {"ordering": "-topology"})) == ["tas-gpu", "plain"]
    assert names(client.get("/api/v1/flavors/", {"ordering": "topology"})) == ["plain", "tas-gpu"]
    assert names(client.get("/api/v1/topologies/", {"ordering": "-name"})) == ["default"]
    for path in ("flavors", "topologies"):
        response = client.get(f"/api/v1/{path}/", {"ordering": "levels"})
        assert response.status_code == 400 and "ordering" in response.json()["detail"], path


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_shallow_tree_is_the_whole_tree_cut_at_its_depth(scheduled, client, depth):
    """A tree asked for with a depth is made only that deep, and says what the whole tree,
    cut at that depth, says (with a subtree asked for too)."""
    from tasweb.api.state import engine_view

    shallow = client.get("/api/v1/flavors/tas-gpu/tree/", {"depth": depth}).json()
    shallow_sub = client.get("/api/v1/flavors/tas-gpu/tree/", {"depth": depth, "domain": "b2"}).json()
    whole_made = ("tree", "tas-gpu") in engine_view().memo
    assert whole_made == (depth == 3)  # the flavor's Topology has three levels
    for domain, status in (("b9", 404), ("b2/r3/b2-r3-n1", 200), ("b1/r3/b2-r3-n1", 404), ("b2/r3/b2-r3-n1/x", 404)):
        assert client.get("/api/v1/flavors/tas-gpu/tree/", {"depth": depth, "domain": domain}).status_code == status
    whole = client.get("/api/v1/flavors/tas-gpu/tree/").json()
    assert shallow == {**whole, "domains": [d for d in whole["domains"] if d["level"] < depth]}
    assert shallow_sub == {**whole, "domains": [d for d in whole["domains"] if d["level"] < depth
                                                and d["values"][:1] == ["b2"]]}
    assert client.get("/api/v1/flavors/tas-gpu/tree/", {"depth": 1}).json()["domains"] == [
        d for d in whole["domains"] if d["level"] < 1]  # and once the whole tree is made, it serves
