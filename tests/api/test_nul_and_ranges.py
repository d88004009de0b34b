"""A NUL character anywhere in a path or a query, and numbers beyond any column's range, are
400s (or 404s) naming where, on the API, the visibility API and the dashboard: never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1"


@pytest.fixture
def any_client(db) -> Client:
    return Client(HTTP_HOST="localhost", raise_request_exception=False)


@pytest.mark.parametrize("url", [
    "/api/v1/nodes/%00/",
    "/api/v1/workloads/%00/x/",
    "/api/v1/workloads/ns/x%00/assignment/",
    "/api/v1/workloads/?namespace=%00",
    "/api/v1/workloads/?%00=1",
    "/api/v1/flavors/%00/tree/",
])
def test_nul_in_api_paths_and_queries_is_400_json(scheduled, any_client, url):
    response = any_client.get(url)
    assert response.status_code == 400, response.content
    body = response.json()
    assert "NUL" in body["detail"]
    assert body["errors"][0]["field"]


@pytest.mark.parametrize("url", [
    f"{VISIBILITY}/clusterqueues/%00/pendingworkloads",
    f"{VISIBILITY}/namespaces/%00/localqueues/q/pendingworkloads",
    f"{VISIBILITY}/clusterqueues/cq/pendingworkloads?limit=%00",
])
def test_nul_in_visibility_is_a_400_status(scheduled, any_client, url):
    response = any_client.get(url)
    assert response.status_code == 400
    assert response.json()["reason"] == "BadRequest"


@pytest.mark.parametrize("parameter", ["limit", "offset"])
@pytest.mark.parametrize("value", ["9223372036854775808", "99999999999999999999999999", "-9223372036854775809"])
def test_visibility_numbers_beyond_int64_are_400(scheduled, any_client, parameter, value):
    response = any_client.get(f"{VISIBILITY}/clusterqueues/cq/pendingworkloads?{parameter}={value}")
    assert response.status_code == 400
    assert parameter in response.json()["message"]


@pytest.mark.parametrize("url", [
    "/workloads/%00/x/",
    "/workloads/ns/x%00/why-pending/",
    "/workloads/?namespace=%00",
    "/workloads/?search=a%00b",
    "/history/?node=%00",
    "/topology/?flavor=%00",
    "/queues/?%00=x",
    "/%00/",
])
def test_nul_on_dashboard_pages_is_400_text(scheduled, any_client, url):
    response = any_client.get(url)
    assert response.status_code == 400, response.content[:200]
    assert b"NUL" in response.content


@pytest.mark.parametrize("url", [
    "/workloads/?page=99999999999999999999999",
    "/history/?page=9223372036854775808",
    "/workloads/ns/" + "9" * 30 + "/",
])
def test_dashboard_out_of_range_numbers_are_not_500(scheduled, any_client, url):
    assert any_client.get(url).status_code in {200, 400, 404}
