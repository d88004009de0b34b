"""A query parameter an endpoint does not take is a 400 that names it and lists what the
endpoint takes: ignored, a misspelt filter would answer with every row as if it had
filtered them. What each endpoint takes is what the OpenAPI schema documents for it."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import resolve

from tests.api.conftest import RACK

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def schema_operations(client: Client) -> list[tuple[str, str, set[str]]]:
    """(path, method, documented query parameters) of every operation under /api/v1/."""
    schema = client.get("/api/schema/?format=json").json()
    out = []
    for path, item in schema["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in item.items():
            if method in ("get", "post"):
                names = {p["name"] for p in [*item.get("parameters", []), *operation.get("parameters", [])]
                         if p["in"] == "query"}
                out.append((path, method, names))
    return out


def test_every_endpoint_takes_exactly_the_query_parameters_its_schema_documents(client):
    operations = schema_operations(client)
    assert len(operations) >= 18
    for path, _method, documented in operations:
        view = resolve(re.sub(r"\{[^}]+\}", "x", path)).func.view_class
        taken = set(view.accepted_parameters()) - {"format"}
        assert taken == documented, (path, sorted(taken ^ documented))


@pytest.mark.parametrize(("query", "name", "hint"), [
    ("pageSize=10", "pageSize", "page_size"),
    ("clusterQueue=cluster-queue", "clusterQueue", "cluster_queue"),
    ("cluster-queue=cluster-queue", "cluster-queue", "cluster_queue"),
    ("statu=Admitted", "statu", "status"),
    ("colour=blue", "colour", None),
])
def test_an_unknown_parameter_is_a_400_naming_it_and_what_the_endpoint_takes(scheduled, client, query, name, hint):
    response = client.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    [error] = body["errors"]
    assert error["field"] == name
    message = error["message"]
    assert message.startswith("is not a parameter of this endpoint")
    assert (f"(did you mean {hint}?)" in message) if hint else "did you mean" not in message
    assert "it takes cluster_queue, " in message and ", page, page_size, " in message
    assert message.endswith(", level.KEY")
    assert body["detail"] == f"{name}: {message}"


def test_the_parameters_an_endpoint_takes_are_still_taken(scheduled, client):
    admitted = client.get("/api/v1/workloads/?status=Admitted").json()["count"]
    assert admitted > 0
    for query in ("status=Admitted&format=json&_=1733400000", "status=Admitted&page=1&page_size=5"):
        response = client.get(f"/api/v1/workloads/?{query}")
        assert response.status_code == 200, (query, response.content[:300])
        assert response.json()["count"] == admitted
    # the level shorthand: any level.KEY
    response = client.get(f"/api/v1/workloads/?level.{RACK}=r1")
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize(("path", "takes"), [
    ("/api/v1/workloads/{key}/", "it takes format"),
    ("/api/v1/workloads/{key}/why-pending/", "it takes format"),
    ("/api/v1/flavors/{flavor}/tree/", "it takes depth, domain, format"),
])
def test_an_endpoint_without_filters_refuses_them_too(scheduled, client, path, takes):
    key = client.get("/api/v1/workloads/?page_size=1").json()["results"][0]
    flavor = client.get("/api/v1/flavors/?page_size=1").json()["results"][0]["name"]
    url = path.format(key=f"{key['namespace']}/{key['name']}", flavor=flavor)
    assert client.get(url).status_code == 200
    response = client.get(f"{url}?levle=2")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["errors"][0]["message"].endswith(takes)
