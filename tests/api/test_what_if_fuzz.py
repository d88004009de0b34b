"""What-if takes objects from any client: mutated objects get a 200 with the pass's answer or
a 400 that names what is wrong, never a 500 or a body that is not JSON."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import BLOCK, RACK, workload_object
from tests.mutations import mutated, render

pytestmark = [pytest.mark.services, pytest.mark.django_db]

URL = "/api/v1/what-if/"


def _posted() -> list[dict]:
    sliced = workload_object("sliced", count=4, level=BLOCK)
    sliced["spec"]["podSets"][0]["topologyRequest"]["podsetSliceRequiredTopologyConstraints"] = [
        {"topology": RACK, "size": 2}, {"topology": "kubernetes.io/hostname", "size": 1}]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b3-r1-n1", "labels": {
        "node-group": "tas", BLOCK: "b3", RACK: "r1", "kubernetes.io/hostname": "b3-r1-n1"}},
        "spec": {"taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    return [workload_object("fuzzed", count=2, mode="preferred"), sliced, node]


POSTED = _posted()

FUZZ = settings(max_examples=int(os.environ.get("TAS_FUZZ_EXAMPLES", "40")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def test_the_objects_the_mutations_start_from_are_taken(scheduled, token_client):
    response = token_client.post(URL, data=render(POSTED, False), content_type="application/json")
    assert response.status_code == 200, response.content
    assert {w["name"] for w in response.json()["workloads"]} >= {"fuzzed", "sliced"}


@pytest.fixture
def unthrottled(monkeypatch):
    """What-if's rate limit (30 a minute) lifted for the many requests of one test."""
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"what-if": "100000/min"})


@FUZZ
@given(data=st.data(), as_yaml=st.booleans())
def test_mutated_objects_get_an_answer_or_a_400_naming_the_field(scheduled, token_client, unthrottled, data,
                                                                  as_yaml):
    posted = mutated(data, POSTED)
    response = token_client.post(URL, data=render(posted, as_yaml),
                                 content_type="application/yaml" if as_yaml else "application/json")
    assert response.status_code in (200, 400, 413), response.content[:2000]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    if response.status_code == 200:
        assert isinstance(body["workloads"], list)
    else:
        assert body["detail"]
