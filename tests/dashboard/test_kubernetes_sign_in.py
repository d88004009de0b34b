"""TAS_AUTH=kubernetes on the dashboard: signing in with a Kubernetes token on the sign-in
page (or sending it as a bearer header), and pages that show the namespaces RBAC allows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client

from tasweb.api.kubeauth import HIDDEN_WORKLOAD, SESSION_KEY
from tasweb.cluster.models import Workload
from tasweb.core.login import failure_keys
from tasweb.scheduling.models import EventKind, WorkloadEvent
from tests.dashboard.browser import screenshot_dir
from tests.dashboard.conftest import TOO_BIG
from tests.kubeauth import NODES, WORKLOADS, kube_auth  # noqa: F401
from tests.sources.fakekube import TOKEN_REVIEWS

pytestmark = [pytest.mark.services]

RESEARCHER, OPERATOR, OLD = "eyJ.researcher.sig", "eyJ.operator.sig", "eyJ.old.sig"
RESEARCH_LEAD = "eyJ.research-lead.sig"  # research's workloads, and the nodes
LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def _no_failures_left_over() -> Iterator[None]:
    """Rejected tokens count against the test client's address, in the shared cache: no test
    may find another's count (a lock-out), nor leave its own."""
    keys = failure_keys(username=None, address="127.0.0.1")
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


@pytest.fixture
def rbac(request):
    """A researcher who may list the workloads of namespace research only, and an operator
    (by group) who may list every namespace's workloads and the nodes."""
    kube = request.getfixturevalue("kube_auth")
    kube.add_token(RESEARCHER, "system:serviceaccount:research:dashboard")
    kube.add_token(OPERATOR, "operator@example.com", groups=("platform",))
    kube.expire_token(OLD)
    kube.add_token(RESEARCH_LEAD, "research-lead")
    kube.allow("research-lead", "list", *WORKLOADS, namespace="research")
    kube.allow("research-lead", "list", *NODES)
    kube.allow("system:serviceaccount:research:dashboard", "list", *WORKLOADS, namespace="research")
    kube.allow("platform", "list", *WORKLOADS)
    kube.allow("platform", "list", *NODES)
    return kube


def signed_in(token: str) -> Client:
    client = Client(HTTP_HOST="localhost")
    response = client.post("/accounts/login/token/", {"token": token, "next": "/topology/"})
    assert response.status_code == 302, response.content[:500]
    return client


def listed(response) -> set[str]:
    assert response.status_code == 200, response.content[:500]
    text = response.content.decode()
    return {key for key in ("research/train-rack", "research/train-block", "training/serve-small", TOO_BIG)
            if f'href="/workloads/{key}/"' in text}


@pytest.mark.django_db
def test_the_sign_in_page_offers_a_token_form_only_with_kubernetes_sign_in(settings):
    client = Client(HTTP_HOST="localhost")
    settings.TAS_AUTH = "local"
    assert b"Sign in with a Kubernetes token" not in client.get(LOGIN).content
    settings.TAS_AUTH = "kubernetes"
    page = client.get(LOGIN).content.decode()
    assert "Sign in with a Kubernetes token" in page
    assert 'type="password" name="token"' in page


def test_a_token_sign_in_shows_only_the_allowed_namespaces(cluster, rbac):
    client = signed_in(RESEARCHER)
    # the token is kept server-side in the session; the cookie holds only the session key
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    assert RESEARCHER not in cookie.value and cookie["httponly"]
    session = Session.objects.get(session_key=cookie.value).get_decoded()
    assert session[SESSION_KEY]["username"] == "system:serviceaccount:research:dashboard"
    assert "_auth_user_id" not in session  # no database user for a cluster user
    # the default destination (the topology) needs list nodes: the workloads page instead
    assert client.get(LOGIN).status_code == 302
    assert listed(client.get("/workloads/")) == {"research/train-rack", "research/train-block"}
    assert b"system:serviceaccount:research:dashboard" in client.get("/workloads/").content
    assert client.get("/workloads/research/train-rack/").status_code == 200
    assert client.get(f"/workloads/{TOO_BIG}/").status_code == 404
    assert client.get(f"/workloads/{TOO_BIG}/why-pending/").status_code == 404
    for page in ("/topology/", "/comparison/"):
        denied = client.get(page)
        assert denied.status_code == 403 and b"may not list nodes" in denied.content, page
    queues = client.get("/queues/").content.decode()
    assert TOO_BIG not in queues
    history = client.get("/history/").content.decode()
    assert "training/serve-small" not in history  # its evictions are training's business
    rack = Workload.objects.get(namespace="research", name="train-rack")
    WorkloadEvent.objects.create(workload=rack, workload_key=rack.key, kind=EventKind.PREEMPTED,
                                 at=rack.created_at, message=f"preempted to admit {TOO_BIG}")
    for url in ("/history/", "/workloads/research/train-rack/"):
        text = client.get(url).content.decode()
        assert TOO_BIG not in text and f"preempted to admit {HIDDEN_WORKLOAD}" in text, url
    live = client.get("/workloads/", {"format": "live"})
    assert live.status_code == 200 and TOO_BIG.encode() not in live.content


def test_an_operator_sees_everything(cluster, rbac):
    client = signed_in(OPERATOR)
    assert listed(client.get("/workloads/")) == {"research/train-rack", "research/train-block",
                                                 "training/serve-small", TOO_BIG}
    assert client.get("/topology/").status_code == 200
    assert TOO_BIG in client.get("/queues/").content.decode()
    assert "training/serve-small" in client.get("/history/").content.decode()


def test_a_reader_of_the_nodes_sees_the_topology_with_their_workloads_only(cluster, rbac):
    client = signed_in(RESEARCH_LEAD)
    assert 'id="fig-placement"' in client.get("/workloads/research/train-rack/").content.decode()
    for url in ("/topology/", "/topology/?domain=b1", "/topology/?domain=b2", "/topology/?domain=b1/r1"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert "training/" not in page.content.decode(), url
    assert 'id="fig-placement"' not in signed_in(RESEARCHER).get("/workloads/research/train-rack/").content.decode()


def test_pages_are_not_shared_between_readers(cluster, rbac):
    """A rendered page is kept for the next reader of the same namespaces, not for others."""
    assert len(listed(signed_in(OPERATOR).get("/workloads/"))) == 4
    assert len(listed(signed_in(RESEARCHER).get("/workloads/"))) == 2


def test_a_rejected_token_signs_nobody_in(cluster, rbac):
    client = Client(HTTP_HOST="localhost")
    for token in (OLD, "not-a-token"):
        response = client.post("/accounts/login/token/", {"token": token})
        assert response.status_code == 200
        assert b"did not accept the token" in response.content
        assert SESSION_KEY not in client.session
    assert client.get("/workloads/").status_code == 302  # to the sign-in page


def test_a_bearer_header_reads_pages(cluster, rbac):
    reader = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {RESEARCHER}")
    assert listed(reader.get("/workloads/")) == {"research/train-rack", "research/train-block"}
    assert reader.get(f"/workloads/{TOO_BIG}/").status_code == 404
    assert Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {OLD}").get("/workloads/").status_code == 401


def test_the_session_ends_when_the_cluster_stops_accepting_the_token(cluster, rbac, settings):
    settings.TAS_AUTH_CACHE_SECONDS = 0
    client = signed_in(RESEARCHER)
    assert client.get("/workloads/").status_code == 200
    rbac.expire_token(RESEARCHER)
    response = client.get("/workloads/")
    assert response.status_code == 302 and response["Location"].startswith(LOGIN)
    assert SESSION_KEY not in client.session


def test_an_unavailable_api_server_is_a_503_page(cluster, rbac, settings):
    settings.TAS_AUTH_CACHE_SECONDS = 0
    client = signed_in(RESEARCHER)
    rbac.fail_reviews(503)
    response = client.get("/workloads/")
    assert response.status_code == 503
    assert b"cannot verify the token: the Kubernetes API server is unavailable" in response.content
    signing_in = Client(HTTP_HOST="localhost").post("/accounts/login/token/", {"token": RESEARCHER})
    assert signing_in.status_code == 503 and SESSION_KEY not in signing_in.wsgi_request.session
    # signing out needs no answer from the API server
    assert client.post("/accounts/logout/").status_code == 302
    assert SESSION_KEY not in client.session


def test_reviews_are_cached_between_pages(cluster, rbac):
    client = signed_in(RESEARCHER)
    for url in ("/workloads/", "/queues/", "/history/", "/workloads/research/train-rack/"):
        assert client.get(url).status_code == 200
    assert len(rbac.reviews(TOKEN_REVIEWS)) == 1


def test_browser_sign_in_with_a_token(live_cluster, rbac, server_url, page):
    page.goto(f"{server_url}/workloads/")
    assert page.url.startswith(f"{server_url}{LOGIN}")
    page.fill("#id_token", RESEARCHER)
    with page.expect_navigation():
        page.click("#kubernetes-sign-in button[type=submit]")
    assert page.url.startswith(f"{server_url}/workloads/"), page.url
    page.screenshot(path=str(screenshot_dir() / "kubernetes-sign-in-workloads.png"), full_page=True)
    rows = page.locator("table.workloads tbody tr td:first-child a")
    assert sorted(rows.all_inner_texts()) == ["research/train-block", "research/train-rack"]
    assert page.locator(".sign-out .muted").inner_text() == "system:serviceaccount:research:dashboard"
    # the token is nowhere a script could read it
    assert RESEARCHER not in page.evaluate("document.cookie")
    response = page.goto(f"{server_url}/workloads/{TOO_BIG}/")
    assert response.status == 404


def test_rejected_tokens_count_against_the_address(cluster, rbac, settings):
    settings.TAS_LOGIN_MAX_FAILURES = 3
    client = Client(HTTP_HOST="localhost")
    for _ in range(3):
        assert b"did not accept the token" in client.post("/accounts/login/token/", {"token": "guess"}).content
    refused = client.post("/accounts/login/token/", {"token": RESEARCHER})
    assert b"Too many rejected tokens" in refused.content
    assert SESSION_KEY not in client.session
