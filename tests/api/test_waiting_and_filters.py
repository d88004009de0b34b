"""The `waiting` status filter and count, status meanings in the schema, and how filters read
their values: booleans in any case, empty text as no filter, empty typed values refused."""

from __future__ import annotations

import json

import pytest

from tasweb.cluster.models import WAITING_STATUSES, Workload, WorkloadStatus
from tests.api.conftest import names, results

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def set_status(key: str, status: str) -> None:
    namespace, name = key.split("/")
    assert Workload.objects.filter(namespace=namespace, name=name).update(status=status) == 1


def test_status_waiting_lists_pending_and_inadmissible(scheduled, client):
    assert names(client.get("/api/v1/workloads/?status=Pending")) == []  # the rough edge: all are Inadmissible
    assert names(client.get("/api/v1/workloads/?status=waiting")) == ["ml/job-moe-too-big"]
    set_status("ml/job-llm-pretrain", WorkloadStatus.PENDING)
    set_status("ml/job-notebook-batch", WorkloadStatus.EVICTED)
    waiting = names(client.get("/api/v1/workloads/?status=waiting"))
    assert waiting == ["ml/job-llm-pretrain", "ml/job-moe-too-big"]
    rows = Workload.objects.filter(status__in=WAITING_STATUSES).order_by("namespace", "name")
    assert waiting == [f"{w.namespace}/{w.name}" for w in rows]
    both = names(client.get("/api/v1/workloads/?status=waiting&status=Evicted"))
    assert both == ["ml/job-llm-pretrain", "ml/job-moe-too-big", "ml/job-notebook-batch"]
    in_queue = names(client.get("/api/v1/workloads/?status=waiting&cluster_queue=cluster-queue"))
    assert in_queue == waiting


def test_queue_counts_have_a_waiting_count(scheduled, client):
    set_status("ml/job-llm-pretrain", WorkloadStatus.PENDING)
    set_status("ml/job-notebook-batch", WorkloadStatus.EVICTED)
    for url in ("/api/v1/clusterqueues/cluster-queue/", "/api/v1/localqueues/ml/team-a/"):
        counts = client.get(url).json()["counts"]
        assert counts["waitingWorkloads"] == 2, url  # Pending + Inadmissible, not the Evicted one
        assert counts["pendingWorkloads"] == 3, url  # Kueue's count includes the requeued Evicted one
    listed = results(client.get("/api/v1/clusterqueues/"))[0]["counts"]
    assert listed["waitingWorkloads"] == 2


def schema(client) -> dict:
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_the_schema_describes_every_status_and_the_waiting_filter(db, client):
    doc = schema(client)
    enum = doc["components"]["schemas"]["WorkloadStatusEnum"]
    assert set(enum["enum"]) == set(WorkloadStatus.values)
    for status in WorkloadStatus.values:
        assert f"`{status}`:" in enum["description"]
        assert len(enum["x-enumDescriptions"][status]) > 20
    status = next(p for p in doc["paths"]["/api/v1/workloads/"]["get"]["parameters"] if p["name"] == "status")
    assert "waiting" in status["schema"]["items"]["enum"]
    assert "Pending and Inadmissible" in status["description"]
    counts = doc["components"]["schemas"]["QueueCounts"]["properties"]
    assert "Pending or Inadmissible" in counts["waitingWorkloads"]["description"]


def test_readme_documents_every_status_and_waiting():
    from tests.api.conftest import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text()
    api = readme[readme.index("### REST API"):readme.index("### A real cluster")]
    for status in WorkloadStatus.values:
        assert f"| `{status}` |" in api, status
    assert "status=waiting" in api


@pytest.mark.parametrize("value,expected", [("true", 63), ("TRUE", 63), ("True", 63), ("1", 63), ("false", 1),
                                            ("False", 1), ("0", 1), ("unknown", 0), ("NONE", 0), ("none", 0)])
def test_ready_accepts_any_case_and_1_0(scheduled, client, value, expected):
    response = client.get(f"/api/v1/nodes/?ready={value}&page_size=100")
    assert response.status_code == 200, response.content
    assert response.json()["count"] == expected


@pytest.mark.parametrize("param", ["tainted", "unschedulable"])
def test_boolean_filters_accept_any_case(scheduled, client, param):
    counts = {value: client.get(f"/api/v1/nodes/?{param}={value}").json()["count"]
              for value in ("true", "TRUE", "True", "1", "false", "FALSE", "0")}
    assert counts["true"] == counts["TRUE"] == counts["True"] == counts["1"]
    assert counts["false"] == counts["FALSE"] == counts["0"]
    assert counts["true"] + counts["false"] == 64


def test_a_bad_boolean_names_the_parameter(db, client):
    response = client.get("/api/v1/nodes/?ready=maybe")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "ready", "message": "expected true, false, unknown or none, "
                                          "got 'maybe'"}]


@pytest.mark.parametrize("url", ["/api/v1/nodes/?level=", "/api/v1/workloads/?level=&domain=",
                                 "/api/v1/history/?domain=", "/api/v1/flavors/tas-gpu/tree/?domain="])
def test_an_empty_text_parameter_is_no_filter(scheduled, client, url):
    response = client.get(url)
    assert response.status_code == 200, response.content
    unfiltered = client.get(url.split("?")[0]).json()
    assert response.json().get("count") == unfiltered.get("count")


@pytest.mark.parametrize("url,field", [("/api/v1/history/?until=", "until"), ("/api/v1/history/?since=", "since"),
                                       ("/api/v1/workloads/?status=", "status"), ("/api/v1/nodes/?ready=", "ready"),
                                       ("/api/v1/nodes/?tainted=", "tainted"), ("/api/v1/nodes/?page=", "page"),
                                       ("/api/v1/flavors/tas-gpu/tree/?depth=", "depth"),
                                       ("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/"
                                        "pendingworkloads?limit=", "limit")])
def test_an_empty_typed_parameter_is_a_400_that_names_it(scheduled, client, url, field):
    response = client.get(url)
    assert response.status_code == 400, response.content
    body = response.json()
    text = json.dumps(body)
    assert field in text and "must not be empty" in text


def test_the_schema_states_the_limits_the_code_enforces(db, client):
    doc = schema(client)
    params = {p["name"]: p["schema"] for p in doc["paths"]["/api/v1/nodes/"]["get"]["parameters"]}
    assert params["page"] == {"type": "integer", "minimum": 1, "maximum": 10_000_000}
    assert "[Tt][Rr][Uu][Ee]" in json.dumps(params["ready"])
    visibility = doc["paths"]["/apis/visibility.kueue.x-k8s.io/{api_version}/clusterqueues/{name}/pendingworkloads"]
    params = {p["name"]: p["schema"] for p in visibility["get"]["parameters"]}
    assert params["limit"]["minimum"] == 0 and params["offset"]["minimum"] == 0
    assert params["api_version"]["enum"] == ["v1beta1", "v1beta2"]
    body = doc["paths"]["/api/v1/what-if/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    obj, array = body["oneOf"]
    assert obj["required"] == ["apiVersion", "kind"] and array["minItems"] == 1
    assert client.get("/api/v1/nodes/?page=10000001").status_code == 400


@pytest.mark.parametrize("url,field", [("/api/v1/localqueues/?namespace=a%00", "namespace"),
                                       ("/api/v1/nodes/?taint=a%00", "taint"),
                                       ("/api/v1/workloads/?cluster_queue=%00", "cluster_queue"),
                                       ("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/"
                                        "pendingworkloads?offset=36112247778855161430016", "offset")])
def test_nul_characters_and_huge_offsets_are_a_400_that_names_the_parameter(scheduled, client, url, field):
    response = client.get(url)
    assert response.status_code == 400, response.content
    assert field in json.dumps(response.json())


def test_the_schema_excludes_nul_from_string_parameters(db, client):
    doc = schema(client)
    params = {p["name"]: p["schema"] for p in doc["paths"]["/api/v1/localqueues/"]["get"]["parameters"]}
    assert params["namespace"]["pattern"] == "^[^\\u0000]*$"
    params = {p["name"]: p["schema"] for p in doc["paths"]["/api/v1/history/"]["get"]["parameters"]}
    assert {"pattern": "^[^\\u0000]*$"} in params["workload"]["allOf"]
