"""The API's entry points and its errors: `/api/` and `/api/v1/` list the resources, and every
error under `/api/` (404, 405, 500, 503, a page past the last) is JSON in the API's shape."""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError
from django.test import Client, override_settings

from tasweb.api import selectors

pytestmark = [pytest.mark.services, pytest.mark.django_db]

ERROR_KEYS = {"detail", "code", "errors"}


def error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == ERROR_KEYS, body
    return body


def test_api_root_lists_versions_and_documents(client):
    response = client.get("/api/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["versions"]["v1"]["href"] == "http://localhost/api/v1/"
    assert body["schema"] == "http://localhost/api/schema/"
    assert body["docs"] == "http://localhost/api/docs/"


def test_api_v1_lists_its_collections_with_links_that_answer(scheduled, client):
    response = client.get("/api/v1/")
    assert response.status_code == 200, response.content
    resources = response.json()["resources"]
    assert {"topologies", "flavors", "nodes", "clusterqueues", "localqueues", "cohorts", "workloads", "history",
            "what-if"} <= set(resources)
    for name, link in resources.items():
        assert link["href"].startswith("http://localhost/api/v1/") and link["description"]
        if name != "what-if":
            assert client.get(link["href"]).status_code == 200, link


@pytest.mark.parametrize("path", ["/api/nope", "/api/v1/nope/", "/api/v1/workloads/ml/a/b/c/d/", "/api/v2/"])
def test_unknown_api_paths_are_json_404s(client, path):
    body = error(client.get(path), 404)
    assert body["code"] == "not_found" and path in body["detail"]


def test_an_endpoint_without_its_trailing_slash_redirects_rather_than_404(client):
    response = client.get("/api/v1/nodes?name=b1")
    assert response.status_code == 301 and response["Location"] == "/api/v1/nodes/?name=b1"


def test_a_method_the_endpoint_does_not_serve_is_a_json_405(db, token_client):
    body = error(token_client.delete("/api/v1/nodes/"), 405)
    assert body["code"] == "method_not_allowed"


def test_a_missing_object_is_a_json_404(db, client):
    assert error(client.get("/api/v1/nodes/no-such-node/"), 404)["detail"] == "Node 'no-such-node' not found"


def test_an_unexpected_error_is_a_json_500_and_is_logged(db, client, monkeypatch, caplog):
    def broken():
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "workload_list", broken)
    quiet = Client(HTTP_HOST="localhost", raise_request_exception=False)
    body = error(quiet.get("/api/v1/workloads/"), 500)
    assert body["code"] == "server_error" and "a bug" not in body["detail"]
    assert any("a bug" in (record.exc_text or "") or record.exc_info for record in caplog.records)


@pytest.mark.parametrize("exc", [OperationalError("could not connect to server: Connection refused"),
                                 InterfaceError("connection already closed")])
def test_an_unreachable_database_is_a_json_503(db, monkeypatch, exc):
    def down():
        raise exc

    monkeypatch.setattr(selectors, "workload_list", down)
    quiet = Client(HTTP_HOST="localhost", raise_request_exception=False)
    body = error(quiet.get("/api/v1/workloads/"), 503)
    assert body["code"] == "database_unavailable"


@override_settings(TAS_API_ANONYMOUS_READ=False)
def test_an_unreachable_database_during_authentication_is_a_json_503(db, monkeypatch):
    from rest_framework.authtoken.models import Token

    class Down:
        def select_related(self, *args):
            raise OperationalError("connection refused")

    monkeypatch.setattr(Token, "objects", Down())
    quiet = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION="Token abc", raise_request_exception=False)
    assert error(quiet.get("/api/v1/nodes/"), 503)["code"] == "database_unavailable"


def test_a_page_past_the_last_is_a_json_404(scheduled, client):
    assert client.get("/api/v1/nodes/?page_size=50&page=2").status_code == 200
    body = error(client.get("/api/v1/nodes/?page_size=50&page=3"), 404)
    assert body["detail"] == "page 3 is past the last page (2) of 50 items per page"
    body = error(client.get("/api/v1/workloads/?namespace=nowhere&page=2"), 404)
    assert "past the last page (1)" in body["detail"]
    assert client.get("/api/v1/workloads/?namespace=nowhere").json()["results"] == []  # page 1 may be empty


def test_the_unknown_visibility_version_is_a_status_404(db, client):
    response = client.get("/apis/visibility.kueue.x-k8s.io/v9/clusterqueues/cq/pendingworkloads")
    assert response.status_code == 404
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and "v9" in body["message"]
