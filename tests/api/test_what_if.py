"""What-if: one engine pass over the mirror plus posted objects, nothing stored."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.test import override_settings

from tasweb.cluster.models import Workload
from tasweb.scheduling.models import PodSetAssignment, SchedulingPass, WorkloadEvent
from tests.api.conftest import BLOCK, RACK, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

URL = "/api/v1/what-if/"


def post(client, body, content_type="application/json"):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type=content_type)


def stored_state() -> tuple:
    return (Workload.objects.count(), PodSetAssignment.objects.count(), WorkloadEvent.objects.count(),
            SchedulingPass.objects.count(), list(Workload.objects.order_by("id").values_list("status", flat=True)))


def test_a_workload_that_fits_gets_its_placement(scheduled, token_client):
    before = stored_state()
    response = post(token_client, workload_object("try-me", count=4, gpus=8))
    assert response.status_code == 200, response.content
    body = response.json()
    (wl,) = body["workloads"]
    assert (wl["namespace"], wl["name"], wl["status"]) == ("ml", "try-me", "Admitted")
    assert wl["explanation"] is None
    (placement,) = wl["placement"]
    assert placement["levels"] == [BLOCK, RACK, "kubernetes.io/hostname"]
    assert sum(d["count"] for d in placement["domains"]) == 4
    racks = {tuple(d["values"][:2]) for d in placement["domains"]}
    assert len(racks) == 1  # required: one rack
    assert all(d["node"] for d in placement["domains"])
    assert wl["podSets"][0]["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    assert body["objects"] == {"Workload": 1}
    assert any(e["reason"] == "QuotaReserved" for e in body["events"])
    assert stored_state() == before  # nothing stored


def test_a_workload_posted_without_a_creation_time_is_created_now(scheduled, token_client):
    """As the API server stamps it: it has waited 0 s, not since Go's zero time."""
    posted = workload_object("fresh", count=4, gpus=8)
    del posted["metadata"]["creationTimestamp"]
    response = post(token_client, posted)
    assert response.status_code == 200, response.content
    (wl,) = response.json()["workloads"]
    assert wl["status"] == "Admitted"
    # stamped to the second, as the API server does: up to a second before now
    assert re.search(r"wait time since queued was [01]s$", wl["message"]), wl["message"]
    reserved = [e["message"] for e in response.json()["events"] if e["reason"] == "QuotaReserved"]
    assert reserved and all("9223372037s" not in m for m in reserved)


def test_a_workload_that_does_not_fit_says_why(scheduled, token_client):
    response = post(token_client, workload_object("too-big", count=12, gpus=8))
    (wl,) = response.json()["workloads"]
    assert wl["status"] in ("Pending", "Inadmissible")
    assert "allows to fit only" in wl["message"]
    assert wl["placement"] == []
    explanation = wl["explanation"]
    assert explanation["fits"] is False
    assert explanation["podSets"][0]["level"] == RACK
    assert {s["kind"] for s in explanation["suggestions"]} >= {"higher-level"}


def test_objects_as_a_list_a_kind_list_and_yaml(scheduled, token_client):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b3-r1-n1", "labels": {
        "node-group": "tas", BLOCK: "b3", RACK: "r1", "kubernetes.io/hostname": "b3-r1-n1"}},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    wl = workload_object("needs-new-block", count=1, gpus=8)
    wl["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {BLOCK: "b3"}  # only the posted node
    as_list = post(token_client, [node, wl]).json()
    assert as_list["objects"] == {"Node": 1, "Workload": 1}
    (result,) = as_list["workloads"]
    assert result["status"] == "Admitted", result["message"]
    assert result["placement"][0]["domains"] == [{"values": ["b3", "r1", "b3-r1-n1"], "count": 1,
                                                  "node": "b3-r1-n1"}]
    as_kind_list = post(token_client, {"apiVersion": "v1", "kind": "List", "items": [node, wl]}).json()
    assert as_kind_list["workloads"][0]["status"] == "Admitted"
    as_yaml = post(token_client, yaml.safe_dump_all([node, wl]), content_type="application/yaml")
    assert as_yaml.status_code == 200 and as_yaml.json()["workloads"][0]["status"] == "Admitted"
    without_node = post(token_client, wl).json()["workloads"][0]
    assert without_node["status"] != "Admitted" and without_node["explanation"]["fits"] is False


def test_a_posted_workload_can_preempt_and_changes_are_reported(scheduled, token_client):
    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    cq["metadata"]["resourceVersion"] = "5"
    big = workload_object("urgent", count=32, gpus=8, level=BLOCK, priority=10_000)
    body = post(token_client, [cq, big]).json()
    assert body["objects"] == {"ClusterQueue": 1, "Workload": 1}
    for change in body["changes"]:
        assert change["statusBefore"] != change["status"]


@pytest.mark.parametrize(("body", "field", "obj"), [
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "x", "namespace": "ml"},
      "spec": {"podSets": [{"name": "main", "count": -1, "template": {"spec": {"containers": []}}}]}},
     "spec.podSets[0].count", "Workload/ml/x"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"namespace": "ml"}, "spec": {}},
     "metadata.name", None),
    ({"apiVersion": "v1", "metadata": {"name": "x"}}, "kind", None),
    (workload_object("typo", level="cloud.example.com/topology-rak"),
     "spec.podSets[0].topologyRequest.required", "Workload/ml/typo"),
    ([1, 2], "[0]", None),
    (workload_object("escape", namespace="../../x"), "metadata.namespace", "Workload/../../x/escape"),
    (workload_object("x" * 300), "metadata.name", None),
])
def test_malformed_objects_are_400_naming_object_and_field(scheduled, token_client, body, field, obj):
    response = post(token_client, body)
    assert response.status_code == 400, response.content
    error = response.json()["errors"][0]
    assert error["field"] == field
    assert error["file"] == "request body"
    if obj:
        assert error["object"] == obj
    assert field in response.json()["detail"]


@pytest.mark.parametrize(("data", "content_type", "status"), [
    ("{not json", "application/json", 400),
    ("[]", "application/json", 400),
    ('"a string"', "application/json", 400),
    ("key: [unclosed", "application/yaml", 400),
    ("<xml/>", "application/xml", 415),
])
def test_bad_bodies_are_4xx_json(scheduled, token_client, data, content_type, status):
    response = post(token_client, data, content_type=content_type)
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"]


@override_settings(TAS_API_MAX_BODY_BYTES=1000)
def test_huge_payload_is_413(scheduled, token_client):
    body = workload_object("big")
    body["metadata"]["annotations"] = {"padding": "x" * 2000}
    response = post(token_client, body)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert "1000" in response.json()["detail"]


def test_what_if_needs_a_token(scheduled, client, user):
    anonymous = post(client, workload_object("x"))
    assert anonymous.status_code == 401
    client.force_login(user)
    with_session = client.post(URL, data=json.dumps(workload_object("x")), content_type="application/json")
    assert with_session.status_code in (401, 403)
    bad_token = client.post(URL, data="{}", content_type="application/json", HTTP_AUTHORIZATION="Token nope")
    assert bad_token.status_code == 401


def test_what_if_is_throttled(scheduled, token_client, settings):
    original = settings.REST_FRAMEWORK
    settings.REST_FRAMEWORK = {**original, "DEFAULT_THROTTLE_RATES": {"what-if": "2/min"}}
    from rest_framework.settings import api_settings
    from rest_framework.throttling import ScopedRateThrottle

    api_settings.reload()
    ScopedRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    try:
        codes = [post(token_client, workload_object(f"t{i}")).status_code for i in range(3)]
        assert codes == [200, 200, 429]
        throttled = post(token_client, workload_object("t4"))
        assert throttled.json()["code"] == "throttled" and "Retry-After" in throttled
    finally:  # the rates the other tests run with (the class keeps its own copy)
        settings.REST_FRAMEWORK = original
        api_settings.reload()
        ScopedRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES


@pytest.mark.parametrize(("body", "field", "obj"), [
    ({k: v for k, v in workload_object("no-version").items() if k != "apiVersion"}, "apiVersion",
     "Workload/ml/no-version"),
    ({k: v for k, v in workload_object("no-kind").items() if k != "kind"}, "kind", "object/ml/no-kind"),
    ({**workload_object("blank-kind"), "kind": " "}, "kind", "object/ml/blank-kind"),
    ([workload_object("fine"), {k: v for k, v in workload_object("second").items() if k != "apiVersion"}],
     "[1].apiVersion", "Workload/ml/second"),
    ({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Workload", "metadata": {"name": "in-list"}}]},
     "items[0].apiVersion", "Workload/in-list"),
])
def test_an_object_without_api_version_or_kind_is_a_400_naming_it(scheduled, token_client, body, field, obj):
    response = post(token_client, body)
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert (error["field"], error["object"], error["file"]) == (field, obj, "request body")
    assert "every object needs apiVersion and kind" in error["message"]


@pytest.mark.parametrize(("data", "says"), [
    ("[" * 100_000 + "]" * 100_000, "nest deeper than"),
    ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nest deeper than"),
    ('{"apiVersion": "v1", "kind": "Node", "n": ' + "9" * 5000 + "}", "5000 digits"),
    ('{"n": -' + "1" * 5000 + "}", "5000 digits"),
    ('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "name": "b"}}', "'name' appears twice"),
])
def test_deep_or_huge_number_bodies_are_400_json(scheduled, token_client, data, says):
    response = post(token_client, data)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert says in response.json()["detail"]


def test_brackets_inside_strings_do_not_count_as_nesting(scheduled, token_client):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "[" * 1000, "labels": {"x": "{" * 1000}}}
    response = post(token_client, node)
    assert response.status_code != 400 or "nest deeper" not in response.json()["detail"]


def test_a_waiting_workload_the_pass_did_not_get_to_is_not_a_change(scheduled, token_client, monkeypatch):
    from scheduler.engine import Engine

    waiting = Workload.objects.get(status="Inadmissible")
    real = Engine.run_pass

    def not_evaluated(engine, now, **kwargs):
        # as when the pass stops before it: no decision, its result restates it (Pending)
        outcome = real(engine, now, **kwargs)
        outcome.decided.pop(waiting.key, None)
        return outcome

    monkeypatch.setattr(Engine, "run_pass", not_evaluated)
    posted = workload_object("elsewhere", count=1, gpus=1)
    posted["metadata"]["namespace"] = "nobody"
    body = post(token_client, posted).json()
    assert body["workloads"][0]["status"] == "Inadmissible"  # no LocalQueue there: nothing else moves
    assert body["changes"] == []


def test_a_body_without_a_content_length_is_a_411_and_a_bad_length_a_400(scheduled, token_client):
    body = json.dumps(workload_object("chunked", count=1, gpus=1))
    chunked = token_client.generic("POST", URL, body, content_type="application/json", CONTENT_LENGTH="",
                                   HTTP_TRANSFER_ENCODING="chunked")
    assert chunked.status_code == 411, chunked.content
    assert "Content-Length" in chunked.json()["detail"]
    for bad in ("abc", "-1"):
        response = token_client.generic("POST", URL, body, content_type="application/json", CONTENT_LENGTH=bad)
        assert response.status_code == 400, (bad, response.content)
        assert f"Content-Length must be a number of bytes, got {bad!r}" in response.json()["detail"]


def test_what_if_admits_what_the_next_pass_admits(scheduled, token_client):
    """Two waiting workloads equal in priority and creation time, quota for one: the what-if
    says the next scheduling pass admits the one it does (Kueue's order, ties by namespace and
    name), whatever order the database returns the rows in."""
    from tasweb.scheduling.services import scheduling_pass_run
    from tests.api.conftest import DEMO_NOW, upsert

    for name in ("b-first", "a-second"):
        upsert(workload_object(name, count=25, gpus=8, level=None, created="2025-06-01T11:59:30Z"))
    Workload.objects.filter(name="a-second").update(updated_at=DEMO_NOW)  # a new row version: read last
    posted = workload_object("elsewhere", count=1, gpus=1)
    posted["metadata"]["namespace"] = "nobody"
    changes = {c["name"]: c["status"] for c in post(token_client, posted).json()["changes"]}
    assert changes.get("a-second") == "Admitted" and changes.get("b-first") == "Inadmissible", changes
    scheduling_pass_run(now=DEMO_NOW)
    assert dict(Workload.objects.filter(name__in=changes).values_list("name", "status")) == {
        "a-second": "Admitted", "b-first": "Inadmissible"}


def test_a_level_typo_is_refused_before_the_mirror_is_read(scheduled, token_client, monkeypatch):
    import tasweb.api.whatif as whatif

    def not_now(**_kwargs):
        raise AssertionError("the mirror's workloads were read for a what-if refused anyway")

    monkeypatch.setattr(whatif, "engine_workloads", not_now)
    response = post(token_client, workload_object("typo", level="cloud.example.com/topology-rak"))
    assert response.status_code == 400
    assert "topology-rak" in response.json()["detail"] and "Workload/ml/typo" in response.json()["detail"]
    # a posted Topology with that level makes it a level: the what-if goes on
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "other"},
                "spec": {"levels": [{"nodeLabel": "cloud.example.com/topology-rak"}]}}
    monkeypatch.undo()
    body = post(token_client, [topology, workload_object("typo", level="cloud.example.com/topology-rak")]).json()
    assert body["workloads"][0]["name"] == "typo"
