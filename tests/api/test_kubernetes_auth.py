"""TAS_AUTH=kubernetes: the API takes a cluster's bearer tokens (TokenReview) and shows each
reader the namespaces RBAC lets them list workloads in (SubjectAccessReview); cluster-wide
objects need list nodes; nothing is granted when the API server cannot answer."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.checks import Error
from django.test import Client

from tasweb.api import kubeauth
from tasweb.api.checks import auth_settings_check
from tasweb.cluster.models import Workload
from tasweb.scheduling.models import EventKind
from tests.api.conftest import BLOCK, event, upsert, workload_object
from tests.kubeauth import NODES, WORKLOADS, closed_port_url, kube_auth, point_at  # noqa: F401
from tests.sources.fakekube import ACCESS_REVIEWS, TOKEN_REVIEWS

pytestmark = [pytest.mark.services, pytest.mark.django_db]

V1BETA2 = "/apis/visibility.kueue.x-k8s.io/v1beta2"
ML_TOKEN, OPS_TOKEN, NODES_TOKEN, NOBODY_TOKEN, OLD_TOKEN = (
    "eyJ.ml-reader.sig", "eyJ.ops.sig", "eyJ.node-reader.sig", "eyJ.nobody.sig", "eyJ.expired.sig")
RESEARCH_TOKEN = "eyJ.research-reader.sig"


@pytest.fixture
def two_namespaces(scheduled):
    """The example cluster (namespace ml) and a second team in namespace research, waiting
    in the same ClusterQueue; history in both."""
    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "team-b", "namespace": "research"}, "spec": {"clusterQueue": "cluster-queue"}})
    # a block could hold it once the ml workloads there finish: its explanation names them
    upsert(workload_object("r-high", namespace="research", queue="team-b", priority=900,
                           created="2025-06-01T11:00:00Z", count=30, gpus=8, level=BLOCK))
    upsert(workload_object("r-low", namespace="research", queue="team-b", priority=0,
                           created="2025-06-01T11:01:00Z", count=200, gpus=8))
    upsert(workload_object("m-waits", namespace="ml", queue="team-a", priority=0,
                           created="2025-06-01T11:02:00Z", count=200, gpus=8))
    event("ml/job-llm-pretrain", EventKind.NODE_UNHEALTHY, node="n1")
    event("research/r-high", EventKind.REQUEUED)
    event("research/deleted-long-ago", EventKind.EVICTED)
    return scheduled


@pytest.fixture
def cluster_users(request):
    kube = request.getfixturevalue("kube_auth")
    kube.add_token(ML_TOKEN, "system:serviceaccount:ml:reader")
    kube.add_token(OPS_TOKEN, "ops@example.com", groups=("ops-team",))
    kube.add_token(NODES_TOKEN, "node-reader")
    kube.add_token(NOBODY_TOKEN, "nobody")
    kube.expire_token(OLD_TOKEN)
    kube.add_token(RESEARCH_TOKEN, "research-reader")
    kube.allow("research-reader", "list", *WORKLOADS, namespace="research")
    kube.allow("system:serviceaccount:ml:reader", "list", *WORKLOADS, namespace="ml")
    kube.allow("ops-team", "list", *WORKLOADS)  # every namespace, as a ClusterRoleBinding
    kube.allow("ops-team", "list", *NODES)
    kube.allow("node-reader", "list", *NODES)
    kube.allow("nobody", "get", *WORKLOADS, namespace="ml")  # get is not list
    return kube


def bearer(token: str) -> Client:
    return Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")


def keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [f"{item['namespace']}/{item['name']}" for item in response.json()["results"]]


def namespaces_of(response) -> set[str]:
    return {key.split("/")[0] for key in keys(response)}


# ---------------------------------------------------------------- namespaces


def test_a_reader_sees_the_workloads_of_their_namespaces_only(two_namespaces, cluster_users):
    ml = bearer(ML_TOKEN).get("/api/v1/workloads/", {"page_size": 500})
    assert namespaces_of(ml) == {"ml"}
    assert ml.json()["count"] == Workload.objects.filter(namespace="ml").count() == len(keys(ml))
    everything = bearer(OPS_TOKEN).get("/api/v1/workloads/", {"page_size": 500})
    assert namespaces_of(everything) == {"ml", "research"}
    assert everything.json()["count"] == Workload.objects.count()
    # a filter on a namespace the reader may not read finds nothing, as if it were empty
    assert keys(bearer(ML_TOKEN).get("/api/v1/workloads/", {"namespace": "research"})) == []
    # pages count only what the reader sees
    first = bearer(ML_TOKEN).get("/api/v1/workloads/", {"page_size": 2})
    assert first.json()["count"] == ml.json()["count"] and len(keys(first)) == 2


def test_details_in_other_namespaces_are_not_found(two_namespaces, cluster_users):
    reader = bearer(ML_TOKEN)
    for path in ("", "assignment/", "why-pending/", "history/"):
        forbidden = reader.get(f"/api/v1/workloads/research/r-high/{path}")
        missing = reader.get(f"/api/v1/workloads/research/no-such-workload/{path}")
        assert forbidden.status_code == 404, (path, forbidden.content)
        if path != "history/":  # a workload's history is kept after it is deleted: empty, not 404
            assert forbidden.json()["detail"] == missing.json()["detail"].replace("no-such-workload", "r-high")
        assert reader.get(f"/api/v1/workloads/ml/job-llm-pretrain/{path}").status_code == 200
        assert bearer(OPS_TOKEN).get(f"/api/v1/workloads/research/r-high/{path}").status_code == 200
    why = reader.get("/api/v1/workloads/ml/m-waits/why-pending/").json()
    assert why["pending"] is True


def test_history_and_local_queues_are_scoped(two_namespaces, cluster_users):
    history = bearer(ML_TOKEN).get("/api/v1/history/", {"page_size": 500})
    assert history.status_code == 200
    assert {e["workload"].split("/")[0] for e in history.json()["results"]} == {"ml"}
    assert history.json()["count"] == len(history.json()["results"])
    everything = bearer(OPS_TOKEN).get("/api/v1/history/", {"page_size": 500}).json()["results"]
    assert "research/r-high" in {e["workload"] for e in everything}
    queues = bearer(ML_TOKEN).get("/api/v1/localqueues/")
    assert [(q["namespace"], q["name"]) for q in queues.json()["results"]] == [("ml", "team-a")]
    assert bearer(ML_TOKEN).get("/api/v1/localqueues/research/team-b/").status_code == 404
    assert bearer(OPS_TOKEN).get("/api/v1/localqueues/research/team-b/").status_code == 200


def test_visibility_lists_follow_the_same_rules(two_namespaces, cluster_users):
    path = f"{V1BETA2}/clusterqueues/cluster-queue/pendingworkloads"
    full = bearer(OPS_TOKEN).get(path).json()["items"]
    assert {i["metadata"]["namespace"] for i in full} == {"ml", "research"}
    mine = bearer(ML_TOKEN).get(path).json()["items"]
    assert mine == [i for i in full if i["metadata"]["namespace"] == "ml"]  # positions in the whole queue
    assert [i["positionInClusterQueue"] for i in mine] != list(range(len(mine)))  # research's are ahead
    # offset and limit count the entries shown
    assert bearer(ML_TOKEN).get(path, {"offset": 1, "limit": 1}).json()["items"] == mine[1:2]
    local = bearer(ML_TOKEN).get(f"{V1BETA2}/namespaces/research/localqueues/team-b/pendingworkloads")
    assert local.status_code == 404
    assert local.json()["kind"] == "Status" and local.json()["reason"] == "NotFound"
    own = bearer(ML_TOKEN).get(f"{V1BETA2}/namespaces/ml/localqueues/team-a/pendingworkloads")
    assert own.status_code == 200 and own.json()["items"]


# ---------------------------------------------------------------- cluster-wide views


CLUSTER_WIDE = ["/api/v1/nodes/", "/api/v1/topologies/", "/api/v1/flavors/", "/api/v1/clusterqueues/",
                "/api/v1/clusterqueues/cluster-queue/", "/api/v1/cohorts/", "/api/v1/comparison/",
                "/api/v1/comparison/summary/"]


def test_cluster_wide_views_need_list_nodes(two_namespaces, cluster_users):
    flavor = bearer(OPS_TOKEN).get("/api/v1/flavors/").json()["results"][0]["name"]
    node = bearer(OPS_TOKEN).get("/api/v1/nodes/").json()["results"][0]["name"]
    paths = [*CLUSTER_WIDE, f"/api/v1/flavors/{flavor}/", f"/api/v1/flavors/{flavor}/tree/", f"/api/v1/nodes/{node}/"]
    for path in paths:
        denied = bearer(ML_TOKEN).get(path)
        assert denied.status_code == 403, (path, denied.content)
        assert "may not list nodes" in denied.json()["detail"]
        assert bearer(NODES_TOKEN).get(path).status_code == 200, path
        assert bearer(OPS_TOKEN).get(path).status_code == 200, path


def test_cluster_wide_views_name_only_readable_workloads(two_namespaces, cluster_users):
    cq = bearer(NODES_TOKEN).get("/api/v1/clusterqueues/cluster-queue/").json()
    assert cq["localQueues"] == []
    assert set(bearer(OPS_TOKEN).get("/api/v1/clusterqueues/cluster-queue/").json()["localQueues"]) == {
        "ml/team-a", "research/team-b"}
    flavor = next(f["name"] for f in bearer(OPS_TOKEN).get("/api/v1/flavors/").json()["results"] if f["tas"])
    full = bearer(OPS_TOKEN).get(f"/api/v1/flavors/{flavor}/tree/").json()
    assert any(d["workloads"] for d in full["domains"])
    blind = bearer(NODES_TOKEN).get(f"/api/v1/flavors/{flavor}/tree/").json()
    assert [d["id"] for d in blind["domains"]] == [d["id"] for d in full["domains"]]
    assert all(d["workloads"] == [] and d["workloadCount"] == 0 for d in blind["domains"])


def test_a_user_without_rights_sees_nothing(two_namespaces, cluster_users):
    client = bearer(NOBODY_TOKEN)
    response = client.get("/api/v1/workloads/")
    assert response.status_code == 200 and response.json()["count"] == 0 and keys(response) == []
    assert client.get("/api/v1/history/").json()["count"] == 0
    assert client.get("/api/v1/workloads/ml/job-llm-pretrain/").status_code == 404
    assert client.get("/api/v1/nodes/").status_code == 403
    assert client.get(f"{V1BETA2}/clusterqueues/cluster-queue/pendingworkloads").json()["items"] == []
    # reviews asked what RBAC decides: the user, uid and groups the TokenReview named
    review = next(r.body for r in cluster_users.reviews(ACCESS_REVIEWS) if r.body["spec"]["user"] == "nobody")
    assert review["spec"]["uid"] == "uid-nobody"
    assert review["spec"]["groups"] == ["system:authenticated"]
    attributes = [r.body["spec"]["resourceAttributes"] for r in cluster_users.reviews(ACCESS_REVIEWS)
                  if r.body["spec"]["user"] == "nobody"]
    assert {"verb": "list", "group": "kueue.x-k8s.io", "resource": "workloads", "namespace": "ml"} in attributes
    assert {"verb": "list", "group": "", "resource": "nodes"} in attributes


# ---------------------------------------------------------------- tokens


def test_expired_and_unknown_tokens_are_401(two_namespaces, cluster_users):
    for token in (OLD_TOKEN, "not-a-token-of-this-cluster"):
        response = bearer(token).get("/api/v1/workloads/")
        assert response.status_code == 401, response.content
        assert "did not accept the token" in response.json()["detail"]
        status = bearer(token).get(f"{V1BETA2}/clusterqueues/cluster-queue/pendingworkloads")
        assert status.status_code == 401 and status.json()["reason"] == "Unauthorized"
    assert Client(HTTP_HOST="localhost").get("/api/v1/workloads/").status_code in (401, 403)


def test_anonymous_reads_are_off_with_kubernetes_sign_in(two_namespaces, cluster_users, settings):
    settings.TAS_API_ANONYMOUS_READ = True
    assert Client(HTTP_HOST="localhost").get("/api/v1/workloads/").status_code == 401


@pytest.mark.parametrize("failure", [503, 500, "drop"])
def test_an_unavailable_api_server_is_503_never_open(two_namespaces, cluster_users, failure):
    cluster_users.fail_reviews(failure)
    response = bearer(OPS_TOKEN).get("/api/v1/workloads/")
    assert response.status_code == 503, response.content
    assert response.json()["detail"].startswith("cannot verify the token: the Kubernetes API server is unavailable")
    assert response.json()["code"] == "auth_unavailable"
    status = bearer(OPS_TOKEN).get(f"{V1BETA2}/clusterqueues/cluster-queue/pendingworkloads")
    assert status.status_code == 503 and status.json()["reason"] == "ServiceUnavailable"


def test_a_refused_connection_is_503(two_namespaces, cluster_users, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(point_at(closed_port_url(), "t", tmp_path / "refused")))
    kubeauth.kube_client_reset()
    response = bearer(OPS_TOKEN).get("/api/v1/workloads/")
    assert response.status_code == 503
    assert "API server is unavailable" in response.json()["detail"]


def test_a_token_verified_then_the_namespace_review_fails_is_503(two_namespaces, cluster_users):
    bearer(ML_TOKEN).get("/api/v1/workloads/")  # token and namespaces reviewed, cached
    cluster_users.fail_reviews(503)
    # cached answers still serve ...
    assert bearer(ML_TOKEN).get("/api/v1/workloads/").status_code == 200
    # ... a question not asked yet cannot be answered: not granted, 503
    assert bearer(ML_TOKEN).get("/api/v1/nodes/").status_code == 503


def test_answers_are_cached_for_the_ttl_by_a_hash_of_the_token(two_namespaces, cluster_users):
    client = bearer(ML_TOKEN)
    assert client.get("/api/v1/workloads/").status_code == 200
    tokens, accesses = len(cluster_users.reviews(TOKEN_REVIEWS)), len(cluster_users.reviews(ACCESS_REVIEWS))
    assert tokens == 1 and accesses >= 2  # ml and research
    for _ in range(3):
        assert client.get("/api/v1/workloads/").status_code == 200
        assert client.get("/api/v1/workloads/ml/job-llm-pretrain/").status_code == 200
    assert len(cluster_users.reviews(TOKEN_REVIEWS)) == tokens
    assert len(cluster_users.reviews(ACCESS_REVIEWS)) == accesses
    # the cache holds a digest of the token, never the token
    redis = cache._cache.get_client()
    assert list(redis.scan_iter(match=f"*{ML_TOKEN}*")) == []
    assert list(redis.scan_iter(match=f"*{kubeauth.CACHE_PREFIX}:token:*"))


def test_without_a_cache_every_request_is_reviewed(two_namespaces, cluster_users, settings):
    settings.TAS_AUTH_CACHE_SECONDS = 0
    client = bearer(ML_TOKEN)
    for _ in range(3):
        assert namespaces_of(client.get("/api/v1/workloads/")) == {"ml"}
    assert len(cluster_users.reviews(TOKEN_REVIEWS)) == 3


def test_a_token_revoked_is_refused_once_its_answer_expires(two_namespaces, cluster_users, settings):
    settings.TAS_AUTH_CACHE_SECONDS = 0
    assert bearer(ML_TOKEN).get("/api/v1/workloads/").status_code == 200
    cluster_users.expire_token(ML_TOKEN)
    assert bearer(ML_TOKEN).get("/api/v1/workloads/").status_code == 401


# ---------------------------------------------------------------- the service's own tokens


@pytest.mark.parametrize("keyword", ["Token", "Bearer"])
def test_the_services_own_tokens_keep_full_access(two_namespaces, cluster_users, token, keyword):
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"{keyword} {token}")
    assert namespaces_of(client.get("/api/v1/workloads/", {"page_size": 500})) == {"ml", "research"}
    assert client.get("/api/v1/nodes/").status_code == 200
    assert client.get("/api/v1/workloads/research/r-high/").status_code == 200
    assert cluster_users.reviews(TOKEN_REVIEWS) == [] and cluster_users.reviews(ACCESS_REVIEWS) == []


def test_what_if_needs_a_token_of_the_service(two_namespaces, cluster_users, token):
    body = workload_object("try-me")
    response = bearer(OPS_TOKEN).post("/api/v1/what-if/", body, content_type="application/json")
    assert response.status_code == 403
    assert "a Kubernetes token is not enough" in response.json()["detail"]
    allowed = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/what-if/", body, content_type="application/json")
    assert allowed.status_code == 200, allowed.content


# ---------------------------------------------------------------- TAS_AUTH=local


def test_local_mode_is_unchanged(two_namespaces, cluster_users, settings, token):
    settings.TAS_AUTH = "local"
    settings.TAS_API_ANONYMOUS_READ = True
    anonymous = Client(HTTP_HOST="localhost").get("/api/v1/workloads/", {"page_size": 500})
    assert namespaces_of(anonymous) == {"ml", "research"}
    assert Client(HTTP_HOST="localhost").get("/api/v1/nodes/").status_code == 200
    refused = bearer(ML_TOKEN).get("/api/v1/workloads/")  # not one of the service's tokens
    assert refused.status_code == 401 and refused.json()["detail"] == "Invalid token."
    assert namespaces_of(bearer(token).get("/api/v1/workloads/", {"page_size": 500})) == {"ml", "research"}
    assert cluster_users.requests_to("POST") == []


def test_the_setting_is_checked():
    from django.test import override_settings

    with override_settings(TAS_AUTH="kubernets"):
        errors = auth_settings_check(None)
    assert [e.id for e in errors] == ["api.E001"]
    assert isinstance(errors[0], Error) and "'kubernets'" in errors[0].msg
    with override_settings(TAS_AUTH="kubernetes", TAS_AUTH_CACHE_SECONDS=-1):
        assert [e.id for e in auth_settings_check(None)] == ["api.E002"]
    cookies = "django.contrib.sessions.backends.signed_cookies"
    with override_settings(TAS_AUTH="kubernetes", SESSION_ENGINE=cookies):
        assert [e.id for e in auth_settings_check(None)] == ["api.E003"]
    for mode in ("local", "kubernetes"):
        with override_settings(TAS_AUTH=mode):
            assert auth_settings_check(None) == []


def test_explanations_and_events_name_no_workload_of_another_namespace(two_namespaces, cluster_users):
    event("research/r-high", EventKind.PREEMPTED, message="preempted to admit ml/job-llm-pretrain")
    # r-high cannot fit: its explanation names the ml workloads that hold the capacity
    url = "/api/v1/workloads/research/r-high/why-pending/"
    assert "ml/job-" in bearer(OPS_TOKEN).get(url).content.decode()
    why = bearer(RESEARCH_TOKEN).get(url)
    assert why.status_code == 200
    text = why.content.decode()
    assert "ml/" not in text and kubeauth.HIDDEN_WORKLOAD in text
    for path in ("/api/v1/history/", "/api/v1/workloads/research/r-high/history/"):
        messages = [e["message"] for e in bearer(RESEARCH_TOKEN).get(path).json()["results"]]
        assert f"preempted to admit {kubeauth.HIDDEN_WORKLOAD}" in messages
        assert not any("ml/" in m for m in messages)


def test_a_request_reads_the_mirrors_namespaces_once(two_namespaces, cluster_users):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    upsert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "idle", "namespace": "queues-only"}, "spec": {"clusterQueue": "cluster-queue"}})
    assert kubeauth.candidate_namespaces() == ["ml", "queues-only", "research"]
    url = "/api/v1/workloads/research/r-high/why-pending/"
    with CaptureQueriesContext(connection) as queries:
        why = bearer(RESEARCH_TOKEN).get(url)  # the scope's namespaces, then the names to hide
    assert why.status_code == 200 and kubeauth.HIDDEN_WORKLOAD in why.content.decode()
    reads = [q["sql"] for q in queries.captured_queries if "UNION" in q["sql"] and "namespace" in q["sql"]]
    assert len(reads) == 1, reads
