"""Requests at the edges of HTTP get the API's own answers, never an HTML page or a 500:
too many query parameters, writes to paths no endpoint serves (no CSRF page), formats no
renderer serves, methods an endpoint does not have, and the discovery paths of /apis."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.api.conftest import RACK as RACK_LEVEL

pytestmark = [pytest.mark.services, pytest.mark.django_db]

GROUP = "visibility.kueue.x-k8s.io"
PENDING = f"/apis/{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads"


@pytest.fixture
def csrf_client(token) -> Client:
    """A client that gets the CSRF checks a browser would, with the API's token."""
    return Client(enforce_csrf_checks=True, HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token}")


def assert_status(response, code: int, reason: str) -> dict:
    assert response.status_code == code, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", code, reason)
    return body


@pytest.mark.parametrize("path", ["/api/v1/workloads/", PENDING, "/api/v1/what-if/"])
def test_more_query_parameters_than_django_reads_is_a_400_naming_the_limit(scheduled, client, path, settings):
    query = "&".join(f"x{i}=1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 100))
    response = client.get(f"{path}?{query}")
    assert response.status_code == 400
    body = response.json()
    message = body["message"] if path.startswith("/apis/") else body["detail"]
    assert f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} parameters" in message


@pytest.mark.parametrize("path", ["/api/v1/what-if", "/api/v1/nope/", "/api/nope"])
def test_a_write_to_no_endpoint_is_a_json_404_not_a_csrf_page(scheduled, csrf_client, path):
    response = csrf_client.post(path, data="{}", content_type="application/json")
    assert response.status_code == 404, response.content[:300]
    body = response.json()
    assert body["code"] == "not_found"
    if path == "/api/v1/what-if":
        assert "/api/v1/what-if/ (with the trailing slash)" in body["detail"]


@pytest.mark.parametrize("path", ["/apis/foo", f"/apis/{GROUP}/v9/x", f"{PENDING}/", "/apis/authentication.k8s.io/v1"])
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_any_other_path_under_apis_is_a_status_404(scheduled, csrf_client, path, method):
    assert_status(getattr(csrf_client, method)(path), 404, "NotFound")


def test_apis_lists_the_visibility_group_and_the_group_its_versions(scheduled, client):
    for path in ("/apis", "/apis/"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.json() == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
            "name": GROUP,
            "versions": [{"groupVersion": f"{GROUP}/v1beta2", "version": "v1beta2"},
                         {"groupVersion": f"{GROUP}/v1beta1", "version": "v1beta1"}],
            "preferredVersion": {"groupVersion": f"{GROUP}/v1beta2", "version": "v1beta2"}}]}
    group = client.get(f"/apis/{GROUP}").json()
    assert group["kind"] == "APIGroup" and group["name"] == GROUP
    assert group["preferredVersion"]["version"] == "v1beta2"
    # each version the group lists is served
    for version in group["versions"]:
        assert client.get(f"/apis/{version['groupVersion']}").json()["kind"] == "APIResourceList"


@pytest.mark.parametrize("path", ["/apis", f"/apis/{GROUP}"])
def test_a_write_to_the_discovery_paths_is_a_status_405(scheduled, csrf_client, path):
    assert_status(csrf_client.post(path, data="{}", content_type="application/json"), 405, "MethodNotAllowed")


@pytest.mark.parametrize("path", ["/api/v1/workloads/", "/api/v1/flavors/tas-gpu/tree/"])
def test_a_format_no_renderer_serves_is_a_406_naming_those_there_are(scheduled, client, path):
    response = client.get(f"{path}?format=yaml")
    assert response.status_code == 406, response.content[:300]
    body = response.json()
    assert "format 'yaml' is not served here" in body["detail"] and "json" in body["detail"]
    assert body["code"] == "not_acceptable"


def test_the_visibility_api_answers_an_accept_it_cannot_serve_with_not_acceptable(scheduled, client):
    assert_status(client.get(PENDING, HTTP_ACCEPT="text/html"), 406, "NotAcceptable")
    assert_status(client.get(f"{PENDING}?format=yaml"), 406, "NotAcceptable")


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "POST", "LIST", "DISPATCH"])
def test_a_method_an_endpoint_does_not_have_is_a_405_before_any_credentials(scheduled, client, method):
    # LIST and DISPATCH: methods of no endpoint, though the views have functions of those names
    response = client.generic(method, "/api/v1/workloads/", "{}", content_type="application/json")
    assert response.status_code == 405, response.content[:300]
    assert client.get("/api/v1/what-if/").status_code == 405
    assert client.post("/api/v1/what-if/", data="{}", content_type="application/json").status_code == 401


def test_a_tree_of_a_domain_the_topology_does_not_have_is_a_404(scheduled, client):
    response = client.get("/api/v1/flavors/tas-gpu/tree/?domain=nope")
    assert response.status_code == 404
    assert "has no domain 'nope'" in response.json()["detail"]
    known = client.get("/api/v1/flavors/tas-gpu/tree/?depth=1").json()["domains"][0]["values"]
    assert client.get(f"/api/v1/flavors/tas-gpu/tree/?domain={'/'.join(known)}").status_code == 200


def test_a_time_out_of_range_says_so_in_words(scheduled, client):
    response = client.get("/api/v1/workloads/?created_after=0001-01-01T00:00:00%2B01:00")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "outside the years 1 to 9999" in detail and "datetime.datetime" not in detail
    unencoded = client.get("/api/v1/workloads/?created_after=2024-01-01T00:00:00+01:00").json()["detail"]
    assert "%2B" in unencoded


@pytest.mark.parametrize("query", ["page=2&page=1", "page_size=5&page_size=10", "ordering=name&ordering=-name",
                                   "created_after=2025-01-01T00:00:00Z&created_after=2025-06-01T00:00:00Z",
                                   "namespace=ml&namespace=other"])
def test_a_parameter_that_takes_one_value_given_twice_is_a_400(scheduled, client, query):
    name = query.partition("=")[0]
    response = client.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["detail"] == f"{name}: is given 2 times; it takes one value"


def test_parameters_that_take_several_values_still_do(scheduled, client):
    both = client.get("/api/v1/workloads/?status=Admitted&status=Inadmissible&page_size=500").json()
    statuses = {w["status"] for w in both["results"]}
    assert statuses == {"Admitted", "Inadmissible"}
    assert client.get(f"/api/v1/nodes/?level={RACK_LEVEL}=r1&level={RACK_LEVEL}=r2").status_code == 200


@pytest.mark.parametrize("url", ["/api/v1/flavors/tas-gpu/tree/?depth=1&depth=2",
                                 f"{PENDING}?limit=1&limit=2",
                                 "/api/v1/comparison/summary/?bucket=day&bucket=hour",
                                 "/api/v1/localqueues/?namespace=ml&namespace=x"])
def test_single_value_parameters_outside_the_filters_refuse_repeats_too(scheduled, client, url):
    response = client.get(url)
    assert response.status_code == 400, response.content[:300]
