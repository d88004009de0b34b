"""Nodes: every filter (level values, labels, readiness, taints, flavor, name), ordering, detail."""

from __future__ import annotations

import pytest

from tests.api.conftest import RACK, names, results, upsert

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_node_filters(scheduled, client):
    upsert({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1", "labels": {"node-group": "cpu"}},
            "spec": {"unschedulable": True}, "status": {"allocatable": {"cpu": "4"}}})

    def node_names(**query) -> list[str]:
        return names(client.get("/api/v1/nodes/", {"page_size": 500, **query}))

    rack_r3 = node_names(**{f"level.{RACK}": "r3"})
    assert len(rack_r3) == 16 and all("-r3-" in n for n in rack_r3)
    assert node_names(level=f"{RACK}=r3") == rack_r3
    assert node_names(level=[f"{RACK}=r3", "cloud.example.com/topology-block=b2"]) == [
        f"b2-r3-n{i}" for i in range(1, 9)]
    assert node_names(label="node-group=cpu") == ["cpu-1"]
    assert len(node_names(label="node-group")) == 65
    assert node_names(label=["node-group", "node-group=cpu"]) == ["cpu-1"]
    assert node_names(ready="False") == ["b1-r2-n8"]
    assert node_names(ready="none") == ["cpu-1"]
    assert len(node_names(ready="True")) == 63
    assert node_names(tainted="true") == ["b2-r3-n1"]
    assert len(node_names(tainted="false")) == 64
    assert node_names(taint="nvidia.com/gpu-health") == ["b2-r3-n1"]
    assert node_names(taint="nvidia.com/gpu-health=degraded:NoSchedule") == ["b2-r3-n1"]
    assert node_names(taint="nvidia.com/gpu-health:NoExecute") == []
    assert node_names(unschedulable="true") == ["cpu-1"]
    assert len(node_names(flavor="tas-gpu")) == 64
    assert node_names(name="b2-r4-n") == [f"b2-r4-n{i}" for i in range(1, 9)]
    assert node_names(ordering="-name")[0] == "cpu-1"
    assert node_names(ordering="ready")[0] == "cpu-1"  # "" (no Ready condition) sorts first


def test_node_item_shape(scheduled, client):
    node = results(client.get("/api/v1/nodes/", {"name": "b2-r3-n1"}))[0]
    assert node["hostname"] == "b2-r3-n1"
    assert node["levels"] == {"cloud.example.com/topology-block": "b2", RACK: "r3",
                              "kubernetes.io/hostname": "b2-r3-n1"}
    assert node["allocatable"]["nvidia.com/gpu"] == "8" and node["allocatable"]["memory"] == "128Gi"
    assert node["taints"][0]["key"] == "nvidia.com/gpu-health"
    assert node["taints"][0]["effect"] == "NoSchedule"
    assert node["ready"] == "True" and node["unschedulable"] is False


def test_node_detail_lists_its_workloads(scheduled, client):
    detail = client.get("/api/v1/nodes/b1-r3-n1/").json()
    assert detail["workloads"] == ["ml/job-llm-pretrain"]
    assert client.get("/api/v1/nodes/b2-r4-n8/").json()["workloads"] == []
    assert client.get("/api/v1/nodes/nope/").status_code == 404


@pytest.mark.parametrize(("query", "field"), [
    ({"level": "nope=r3"}, "level"),
    ({"level": "no-value"}, "level"),
    ({"level.nope": "r3"}, "level.nope"),
    ({"ready": "Maybe"}, "ready"),
    ({"tainted": "perhaps"}, "tainted"),
    ({"taint": "key=v:Sometimes"}, "taint"),
    ({"taint": "=v"}, "taint"),
    ({"label": "=x"}, "label"),
    ({"flavor": "nope"}, "flavor"),
    ({"ordering": "labels"}, "ordering"),
])
def test_bad_node_filters_are_400_naming_the_parameter(scheduled, client, query, field):
    response = client.get("/api/v1/nodes/", query)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert body["errors"][0]["field"] == field
    assert field in body["detail"]
