"""`/api/v1/comparison/` and its summary: Kueue's admissions beside this engine's decisions,
filtered, paginated and documented like the other lists."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tasweb.scheduling.models import AdmissionComparison, ComparisonCategory

from .conftest import DEMO_NOW, results

pytestmark = [pytest.mark.django_db, pytest.mark.services]

LIST = "/api/v1/comparison/"
SUMMARY = "/api/v1/comparison/summary/"


def row(key: str, category: str, *, minutes: float = 0, cluster_queue: str = "cq-a", reason: str = "",
        engine: list | None = None) -> AdmissionComparison:
    namespace = key.split("/")[0]
    placement = [{"podSet": "main", "flavor": "tas-gpu", "levels": ["block", "rack", "host"], "level": "rack",
                  "domain": ["b1", "r1"], "pods": 2,
                  "domains": [{"values": ["b1", "r1", "n1"], "count": 2, "room": 2}]}]
    return AdmissionComparison.objects.create(
        workload_key=key, namespace=namespace, uid=f"uid-{key}", admission=f"{key}-{minutes}",
        cluster_queue=cluster_queue, flavor="tas-gpu", category=category, kueue=placement,
        engine=placement if engine is None else engine, pod_sets={"main": category}, reason=reason,
        admitted_at=DEMO_NOW + timedelta(minutes=minutes), compared_at=DEMO_NOW + timedelta(minutes=minutes))


@pytest.fixture
def rows(db):
    return [
        row("ml/a", ComparisonCategory.SAME_DOMAINS, minutes=0),
        row("ml/b", ComparisonCategory.SAME_LEVEL_OTHER_DOMAINS, minutes=1),
        row("ml/c", ComparisonCategory.DIFFERENT_LEVEL, minutes=61, cluster_queue="cq-b"),
        row("dev/d", ComparisonCategory.ENGINE_WOULD_NOT_ADMIT, minutes=62, engine=[], reason="topology: no rack"),
        row("dev/e", ComparisonCategory.SAME_DOMAINS, minutes=63),
    ]


def keys(response) -> list[str]:
    return [item["workload"] for item in results(response)]


def test_the_list_is_newest_first_with_both_assignments(client, rows):
    response = client.get(LIST)
    assert keys(response) == ["dev/e", "dev/d", "ml/c", "ml/b", "ml/a"]
    body = response.json()
    assert body["count"] == 5
    first = body["results"][1]
    assert first["category"] == "EngineWouldNotAdmit" and first["agrees"] is False
    assert first["engine"] == [] and first["reason"] == "topology: no rack"
    assert first["kueue"][0]["domains"] == [{"values": ["b1", "r1", "n1"], "count": 2, "room": 2}]
    assert body["results"][0]["agrees"] is True


@pytest.mark.parametrize(("query", "expected"), [
    ("category=SameDomains", ["dev/e", "ml/a"]),
    ("category=DifferentLevel&category=EngineWouldNotAdmit", ["dev/d", "ml/c"]),
    ("cluster_queue=cq-b", ["ml/c"]),
    ("namespace=dev", ["dev/e", "dev/d"]),
    ("workload=ml/b", ["ml/b"]),
    ("since=2025-06-01T13:01:00Z", ["dev/e", "dev/d", "ml/c"]),
    ("until=2025-06-01T12:01:00Z", ["ml/a"]),
    ("since=2025-06-01T12:00:30Z&until=2025-06-01T13:02:00Z", ["ml/c", "ml/b"]),
    ("ordering=category", ["ml/c", "dev/d", "ml/a", "dev/e", "ml/b"]),
    ("workload=", ["dev/e", "dev/d", "ml/c", "ml/b", "ml/a"]),
    ("page_size=2&page=2", ["ml/c", "ml/b"]),
])
def test_filters(client, rows, query, expected):
    assert keys(client.get(f"{LIST}?{query}")) == expected


@pytest.mark.parametrize(("query", "field"), [
    ("category=Nope", "category"), ("since=yesterday", "since"), ("until=", "until"),
    ("workload=no-slash", "workload"), ("category=", "category"),
])
def test_bad_filters_are_400s_naming_the_parameter(client, rows, query, field):
    response = client.get(f"{LIST}?{query}")
    assert response.status_code == 400
    assert field in {e["field"] for e in response.json()["errors"]}


def test_the_summary_gives_the_agreement_rate_overall_and_per_bucket(client, rows):
    body = client.get(SUMMARY).json()
    assert body["overall"]["total"] == 5 and body["overall"]["agreeing"] == 2
    assert body["overall"]["agreementRate"] == pytest.approx(0.4)
    assert body["overall"]["categories"]["DifferentLevel"] == 1
    assert body["overall"]["categories"]["NoCapacityForKueue"] == 0
    assert body["bucket"] == "hour"
    assert [(b["start"][:16], b["total"], b["agreeing"]) for b in body["buckets"]] == [
        ("2025-06-01T12:00", 2, 1), ("2025-06-01T13:00", 3, 1)]
    assert body["buckets"][0]["agreementRate"] == 0.5

    minutes = client.get(f"{SUMMARY}?bucket=minute&namespace=ml").json()
    assert [b["total"] for b in minutes["buckets"]] == [1, 1, 1] and minutes["overall"]["total"] == 3
    assert client.get(f"{SUMMARY}?bucket=week").status_code == 400
    empty = client.get(f"{SUMMARY}?category=NoCapacityForKueue").json()
    assert empty["overall"]["agreementRate"] is None and empty["buckets"] == []


def test_rows_from_a_real_comparison(client, scheduled):
    # the example cluster's admissions, compared as if Kueue had made them
    items = results(client.get(f"{LIST}?page_size=100"))
    assert len(items) == 7
    assert all(item["kueue"] and item["kueue"][0]["levels"] for item in items)
    assert client.get(SUMMARY).json()["overall"]["total"] == 7


def test_the_index_and_the_schema_name_the_endpoints(client):
    assert "comparison" in client.get("/api/v1/").json()["resources"]
    schema = client.get("/api/schema/?format=json").json()
    listed = schema["paths"]["/api/v1/comparison/"]["get"]
    names = {p["name"] for p in listed["parameters"]}
    assert {"category", "cluster_queue", "namespace", "since", "until", "workload", "page", "page_size"} <= names
    summary = schema["paths"]["/api/v1/comparison/summary/"]["get"]
    assert {"category", "since", "until", "bucket"} <= {p["name"] for p in summary["parameters"]}
    assert "page" not in {p["name"] for p in summary["parameters"]}
