"""Workloads: every filter, ordering, one workload in full, the assignment encoded (Kueue's
bytes) and decoded, why-pending."""

from __future__ import annotations

import json
import re

import pytest

from scheduler.codec import decode_assignment, encode_assignment
from tasweb.api.selectors import encoded_json_text
from tasweb.scheduling.models import PodSetAssignment
from tests.api.conftest import BLOCK, RACK, names, results, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

ADMITTED = ["ml/job-bert-finetune", "ml/job-eval-suite", "ml/job-hpo-sweep", "ml/job-llm-pretrain",
            "ml/job-notebook-batch", "ml/job-rl-actor-learner", "ml/job-vision-train"]


def test_workload_filters(scheduled, client):
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "cluster-queue"}})
    upsert(workload_object("probe", namespace="research", queue="team-b", created="2025-06-01T11:59:30Z"))

    def workload_names(**query) -> list[str]:
        return names(client.get("/api/v1/workloads/", {"page_size": 500, **query}))

    everything = workload_names()
    assert len(everything) == 9
    assert workload_names(namespace="research") == ["research/probe"]
    assert workload_names(queue="team-b") == ["research/probe"]
    assert workload_names(cluster_queue="cluster-queue") == everything  # admitted to it or waiting in its queues
    assert workload_names(cluster_queue="nope") == []
    assert workload_names(status="Admitted") == ADMITTED
    assert workload_names(status=["Inadmissible", "Pending"]) == ["ml/job-moe-too-big", "research/probe"]
    assert workload_names(flavor="tas-gpu") == ADMITTED
    # "everything on rack r3": by full path from the root, and by the rack's value in any block
    assert workload_names(domain="b1/r3") == ["ml/job-llm-pretrain"]
    assert workload_names(domain="b1/r3", flavor="tas-gpu") == ["ml/job-llm-pretrain"]
    assert workload_names(domain="b2") == ["ml/job-vision-train"]
    assert workload_names(**{f"level.{RACK}": "r1"}) == ["ml/job-bert-finetune", "ml/job-eval-suite",
                                                        "ml/job-rl-actor-learner", "ml/job-vision-train"]
    assert workload_names(level=f"{RACK}=r1", namespace="ml", status="Admitted") == workload_names(
        **{f"level.{RACK}": "r1"})
    assert workload_names(node="b1-r2-n4") == ["ml/job-hpo-sweep", "ml/job-notebook-batch"]
    assert workload_names(search="LLM") == ["ml/job-llm-pretrain"]
    assert workload_names(created_after="2025-06-01T11:55:00Z") == ["ml/job-notebook-batch", "research/probe"]
    assert workload_names(created_before="2025-06-01T11:32:00Z") == ["ml/job-llm-pretrain"]
    assert workload_names(ordering="-created")[:2] == ["research/probe", "ml/job-notebook-batch"]
    assert workload_names(ordering="-priority,name")[0] == "ml/job-llm-pretrain"
    assert workload_names(ordering="-pod_count")[0] == "ml/job-hpo-sweep"
    assert workload_names(ordering="queue,-name")[-1] == "research/probe"


def test_workload_list_item(scheduled, client):
    item = results(client.get("/api/v1/workloads/", {"search": "moe"}))[0]
    assert item["status"] == "Inadmissible" and item["clusterQueue"] == "cluster-queue"
    assert item["queueName"] == "team-a" and item["podCount"] == 12
    assert "allows to fit only 8 out of 12" in item["message"]
    assert item["admittedAt"] is None and item["createdAt"] == "2025-06-01T11:38:00Z"


@pytest.mark.parametrize(("query", "field"), [
    ({"status": "Running"}, "status"),
    ({"flavor": "nope"}, "flavor"),
    ({"ordering": "raw"}, "ordering"),
    ({"ordering": "name,-bogus"}, "ordering"),
    ({"domain": "b1//r3"}, "domain"),
    ({"domain": "/".join(["x"] * 9)}, "domain"),
    ({"level.unknown/level": "r3"}, "level.unknown/level"),
    ({"level": "=r3"}, "level"),
    ({"created_after": "yesterday"}, "created_after"),
    ({"page_size": 501}, "page_size"),
    ({"page_size": 0}, "page_size"),
    ({"page": "two"}, "page"),
])
def test_bad_workload_filters_are_400_naming_the_parameter(scheduled, client, query, field):
    response = client.get("/api/v1/workloads/", query)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field


@pytest.mark.parametrize(("path", "query", "message"), [
    ("workloads", {"status": "Running"}, "'Running' is not one of the choices: Pending, Inadmissible, QuotaReserved, "
     "Admitted, Evicted, Preempted, Finished, waiting"),
    ("workloads", {"flavor": "nope"}, "'nope' is not one of the choices: tas-gpu"),
    ("workloads", {"ordering": "name,-bogus"}, "'-bogus' is not one of the choices: namespace, name, created, "),
    ("history", {"kind": "Started"}, "'Started' is not one of the choices: Queued, Pending, Admitted, "),
    # spelt nearly right: the choice meant is named first
    ("workloads", {"status": "pending"}, "'pending' is not one of the choices (did you mean Pending?): Pending, "),
    ("workloads", {"status": "QUOTARESERVED"},
     "'QUOTARESERVED' is not one of the choices (did you mean QuotaReserved?): "),
    ("workloads", {"status": "Admited"}, "'Admited' is not one of the choices (did you mean Admitted?): "),
    ("workloads", {"ordering": "-Created"},
     "'-Created' is not one of the choices (did you mean -created?): namespace, "),
    ("history", {"kind": "evicted"}, "'evicted' is not one of the choices (did you mean Evicted?): Queued, "),
])
def test_a_value_that_is_not_a_choice_is_answered_with_the_choices(scheduled, client, path, query, message):
    """A client that guessed a value learns the ones there are, not only that it guessed wrong."""
    response = client.get(f"/api/v1/{path}/", query)
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert error["message"].startswith(message), error
    if "ordering" in query:
        assert error["message"].endswith("(each with a leading - for descending order)"), error
        assert "-name" not in error["message"]


def test_workload_detail(scheduled, client):
    response = client.get("/api/v1/workloads/ml/job-rl-actor-learner/")
    assert response.status_code == 200
    wl = response.json()
    assert wl["status"] == "Admitted" and wl["clusterQueue"] == "cluster-queue"
    assert [ps["name"] for ps in wl["podSets"]] == ["learner", "actors"]
    assert wl["podSets"][0]["requests"]["nvidia.com/gpu"]
    assert {c["type"] for c in wl["conditions"]} >= {"QuotaReserved", "Admitted"}
    assert wl["unhealthyNodes"] == []
    assert wl["object"]["kind"] == "Workload"
    assignments = {psa["name"]: psa for psa in wl["admission"]["podSetAssignments"]}
    actors = assignments["actors"]
    assert actors["flavor"] == "tas-gpu" and actors["count"] == 8
    assert actors["decoded"]["levels"] == ["cloud.example.com/topology-block", RACK, "kubernetes.io/hostname"]
    assert actors["decoded"]["domains"] == [
        {"values": ["b1", "r1", "b1-r1-n1"], "count": 4, "node": "b1-r1-n1"},
        {"values": ["b1", "r1", "b1-r1-n2"], "count": 4, "node": "b1-r1-n2"},
    ]
    pending = client.get("/api/v1/workloads/ml/job-moe-too-big/").json()
    assert pending["admission"] is None
    assert pending["podSets"][0]["topologyRequest"] == {"required": RACK}
    assert client.get("/api/v1/workloads/ml/nope/").status_code == 404


def test_encoded_assignment_is_the_stored_v1beta2_json_byte_for_byte(scheduled, client):
    for row in PodSetAssignment.objects.select_related("workload").exclude(encoded=None):
        w = row.workload
        response = client.get(f"/api/v1/workloads/{w.namespace}/{w.name}/")
        psa = next(p for p in response.json()["admission"]["podSetAssignments"] if p["name"] == row.pod_set)
        # what Kueue stores: the encoder's output, compact JSON, keys in its struct order
        kueue_bytes = json.dumps(encode_assignment(decode_assignment(row.encoded)), separators=(",", ":"))
        assert encoded_json_text(row.encoded) == kueue_bytes
        assert psa["encoded"] == row.encoded
        assert json.dumps(psa["encoded"], separators=(",", ":")) == kueue_bytes
        assert kueue_bytes.encode() in response.content  # the very bytes, in the response
        # and it decodes to the decoded rows (their lowest-level values)
        decoded = decode_assignment(psa["encoded"])
        assert [(list(d.values), d.count) for d in decoded.domains] == [
            (d["values"][-len(decoded.levels):], d["count"]) for d in psa["decoded"]["domains"]]


def test_assignment_endpoint(scheduled, client):
    body = client.get("/api/v1/workloads/ml/job-hpo-sweep/assignment/").json()
    assert body["status"] == "Admitted"
    (trials,) = body["podSetAssignments"]
    assert [d["count"] for d in trials["decoded"]["domains"]] == [8, 8, 4]
    assert trials["encoded"]["slices"][0]["podCounts"] == {"individual": [8, 8, 4]}
    assert client.get("/api/v1/workloads/ml/job-moe-too-big/assignment/").json()["podSetAssignments"] == []
    assert client.get("/api/v1/workloads/ml/nope/assignment/").status_code == 404


def test_why_pending_explains_the_engine_reason(scheduled, client):
    body = client.get("/api/v1/workloads/ml/job-moe-too-big/why-pending/").json()
    assert body["pending"] is True
    explanation = body["explanation"]
    assert explanation["fits"] is False and explanation["clusterQueue"] == "cluster-queue"
    (workers,) = explanation["podSets"]
    assert workers["mode"] == "required" and workers["level"] == RACK
    rack = next(level for level in workers["levels"] if level["level"] == RACK)
    assert rack["needed"] == 12 and rack["bestFits"] < 12 and rack["domainsThatFit"] == 0
    assert "the best domain" in rack["message"]
    exclusions = workers["exclusions"]
    assert exclusions["notReady"] == 1
    assert exclusions["taints"] == {"nvidia.com/gpu-health=degraded:NoSchedule": 1}
    assert "1 node not Ready" in exclusions["messages"]
    kinds = {s["kind"] for s in explanation["suggestions"]}
    assert "higher-level" in kinds and "fewer-pods" in kinds
    assert all(line["fits"] for line in explanation["quota"])
    assert "quota" not in workers["message"] and workers["message"].startswith("pod set workers asks for 12 pods")


def test_why_pending_for_a_workload_that_does_not_wait(scheduled, client):
    body = client.get("/api/v1/workloads/ml/job-llm-pretrain/why-pending/").json()
    assert body["pending"] is False and body["explanation"] is None
    assert "Admitted" in body["summary"]
    assert client.get("/api/v1/workloads/ml/nope/why-pending/").status_code == 404


def test_why_pending_names_workloads_that_would_free_capacity(scheduled, client):
    # 25 whole nodes in one block: block b2 has 23 usable free nodes (job-vision-train holds rack
    # b2/r1, b2-r3-n1 is tainted); once job-vision-train finishes it has 31
    upsert(workload_object("whole-block", count=25, gpus=8, level=BLOCK))
    body = client.get("/api/v1/workloads/ml/whole-block/why-pending/").json()
    assert body["pending"] is True
    suggestions = body["explanation"]["suggestions"]
    freeing = [s for s in suggestions if s["kind"] == "free-capacity"]
    assert freeing[0]["details"]["workloads"] == ["ml/job-vision-train"]
    assert "ml/job-vision-train" in freeing[0]["message"]


def test_why_pending_quota(scheduled, client):
    upsert(workload_object("too-many-gpus", count=300, gpus=1, level=None))
    body = client.get("/api/v1/workloads/ml/too-many-gpus/why-pending/").json()
    assert body["pending"] is True
    gpu = next(line for line in body["explanation"]["quota"] if line["resource"] == "nvidia.com/gpu")
    assert gpu["fits"] is False and gpu["requested"] == "300"
    assert "does not fit" in gpu["message"]


def test_a_pod_set_suggestion_among_the_workloads_says_which_pod_set_it_is_for():
    from scheduler.explain import PodSetExplanation, Suggestion, WorkloadExplanation
    from tasweb.api.selectors import explanation_json

    freeing = Suggestion("free-capacity", "would fit once ml/x finish(es)", {"workloads": ["ml/x"]})
    quota = Suggestion("quota-only", "only the quota holds it back: the topology has room for pod set work (2 "
                       "pod(s)) now", {"podSet": "work"})

    def answer(*pod_sets: PodSetExplanation) -> list[dict]:
        return explanation_json(WorkloadExplanation("ml/w", "cq", False, "", pod_sets=list(pod_sets)))["suggestions"]

    lead = PodSetExplanation("lead", 1, suggestions=[freeing])
    work = PodSetExplanation("work", 2, suggestions=[quota])
    told = answer(lead, work)
    assert told[0] == {"kind": "free-capacity", "message": "pod set lead: would fit once ml/x finish(es)",
                       "details": {"workloads": ["ml/x"], "podSet": "lead"}}
    assert told[1]["message"] == quota.message  # it names its PodSet already
    # one PodSet: as it is
    assert answer(PodSetExplanation("main", 1, suggestions=[freeing]))[0]["message"] == freeing.message
    assert freeing.details == {"workloads": ["ml/x"]}  # the engine's answer is left as it was


def reserved_workload(name: str, check_state: str, message: str) -> dict:
    """A Workload holding a reservation in cluster-queue, not admitted: its check `prov` is in
    `check_state`."""
    obj = workload_object(name, count=1, gpus=1, level=None)
    obj["status"] = {
        "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [{
            "name": "workers", "flavors": {"cpu": "gpu-h100", "memory": "gpu-h100", "nvidia.com/gpu": "gpu-h100"},
            "count": 1, "resourceUsage": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue cluster-queue",
                        "lastTransitionTime": "2025-06-01T11:58:00Z"},
                       {"type": "Admitted", "status": "False", "reason": "UnsatisfiedChecks",
                        "message": "The workload has not all checks ready",
                        "lastTransitionTime": "2025-06-01T11:58:00Z"}],
        "admissionChecks": [{"name": "prov", "state": check_state, "message": message,
                             "lastTransitionTime": "2025-06-01T11:58:00Z"}],
    }
    return obj


def test_why_pending_of_a_reservation_names_the_checks_it_waits_for(scheduled, client):
    """A QuotaReserved Workload is not admitted until its ClusterQueue's admission checks are Ready:
    why-pending says which, with their controllers' messages (the API and the page)."""
    cq = next(o for o in scheduled if o["kind"] == "ClusterQueue")
    cq["spec"]["admissionChecks"] = ["prov"]
    cq["metadata"]["resourceVersion"] = "9"
    upsert(cq)
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
            "status": {"conditions": [{"type": "Active", "status": "True"}]}})
    upsert(reserved_workload("job-provisioning", "Pending", "Provisioning Request was created"))
    body = client.get("/api/v1/workloads/ml/job-provisioning/why-pending/").json()
    assert (body["status"], body["pending"], body["explanation"]) == ("QuotaReserved", False, None)
    assert body["summary"] == ("quota reserved in ClusterQueue cluster-queue; admitted once every admission check "
                               "is Ready: waiting for prov (Pending: Provisioning Request was created)")
    wait = body["admissionWait"]
    assert wait["step"] == "admission-checks" and wait["clusterQueue"] == "cluster-queue"
    assert wait["reservedSince"].startswith("2025-06-01T11:58:00")
    assert wait["admissionChecks"] == [{"name": "prov", "state": "Pending",
                                        "message": "Provisioning Request was created", "retryCount": None,
                                        "requeueAfterSeconds": None}]
    page = client.get("/workloads/ml/job-provisioning/").content.decode()
    assert "Why not admitted yet" in page and 'data-admission-wait="admission-checks"' in page
    assert 'data-check="prov" data-state="Pending"' in page and "Provisioning Request was created" in page
    queues = client.get("/queues/").content.decode()
    assert ('<a data-count="awaiting-checks" href="/workloads/?status=QuotaReserved&amp;cluster_queue=cluster-queue"'
            in queues)
    assert re.search(r'data-count="awaiting-checks"[^>]*>1</a>', queues)
    listed = client.get("/workloads/", {"status": "QuotaReserved", "cluster_queue": "cluster-queue"}).content.decode()
    assert "job-provisioning" in listed and "job-llm-pretrain" not in listed

    retry = reserved_workload("job-provisioning", "Retry", "capacity not available")
    retry["status"]["admissionChecks"][0].update(retryCount=2, requeueAfterSeconds=300)
    upsert({**retry, "metadata": {**retry["metadata"], "resourceVersion": "2"}})
    body = client.get("/api/v1/workloads/ml/job-provisioning/why-pending/").json()
    assert body["admissionWait"]["step"] == "evicted-by-check"
    assert "prov (Retry: capacity not available) asked to retry" in body["summary"]
    (check,) = body["admissionWait"]["admissionChecks"]
    assert (check["retryCount"], check["requeueAfterSeconds"]) == (2, 300)
    page = client.get("/workloads/ml/job-provisioning/").content.decode()
    assert re.search(r'data-check="prov" data-state="Retry">.*?<td>2</td><td>300 s</td>', page)


def test_why_pending_of_an_evicted_workload_holding_its_quota_says_what_comes_next(scheduled, client):
    obj = reserved_workload("job-evicted", "Pending", "Reset to Pending after eviction. Previously: Retry")
    obj["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved",
         "lastTransitionTime": "2025-06-01T11:58:00Z"},
        {"type": "Evicted", "status": "True", "reason": "AdmissionCheck",
         "message": "At least one admission check is false", "lastTransitionTime": "2025-06-01T11:59:00Z"}]
    upsert(obj)
    body = client.get("/api/v1/workloads/ml/job-evicted/why-pending/").json()
    assert (body["status"], body["pending"]) == ("Evicted", False)
    assert body["summary"] == ("evicted (AdmissionCheck: At least one admission check is false): it holds its quota "
                               "until its pods are gone; then it waits in its queue again")


def test_a_pod_sets_slices_are_told_whole_and_partial(mirror, client):
    """TASPartialSlices: 10 pods in slices of 4 on racks are 2 whole slices and a partial slice
    of 2; the API says so, and so does the workload page."""
    obj = workload_object("sliced", count=10)
    obj["spec"]["podSets"][0]["topologyRequest"] = {
        "required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4}
    upsert(obj)
    detail = client.get("/api/v1/workloads/ml/sliced/").json()
    assert detail["podSets"][0]["slices"] == {"topology": RACK, "size": 4, "whole": 2, "partial": 2, "layers": 1}
    page = client.get("/workloads/ml/sliced/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "2 slices of 4 pods and a partial slice of 2 pods, each in one" in text
    unsliced = client.get("/api/v1/workloads/ml/job-moe-too-big/").json()
    assert unsliced["podSets"][0]["slices"] is None


def test_the_leader_of_a_group_has_no_slices(mirror, client):
    """A leader-and-workers group shares one sliced request; the one-pod leader is placed as one
    pod, so only the workers are cut into slices."""
    obj = workload_object("grouped", count=6)
    request = {"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4, "podSetGroupName": "g"}
    workers = obj["spec"]["podSets"][0]
    workers["topologyRequest"] = dict(request)
    leader = {**workers, "name": "leader", "count": 1, "topologyRequest": dict(request)}
    obj["spec"]["podSets"] = [leader, workers]
    upsert(obj)
    pod_sets = {ps["name"]: ps for ps in client.get("/api/v1/workloads/ml/grouped/").json()["podSets"]}
    assert pod_sets["leader"]["slices"] is None
    assert pod_sets["workers"]["slices"] == {"topology": RACK, "size": 4, "whole": 1, "partial": 2, "layers": 1}
