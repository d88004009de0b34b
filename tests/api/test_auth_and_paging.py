"""Authentication rules, tokens, pagination, the engine view cache."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tasweb.api import state
from tests.api.conftest import results, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

READS = ["/api/v1/topologies/", "/api/v1/flavors/tas-gpu/tree/", "/api/v1/nodes/", "/api/v1/workloads/",
         "/api/v1/workloads/ml/job-moe-too-big/why-pending/", "/api/v1/history/", "/api/v1/clusterqueues/",
         "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cluster-queue/pendingworkloads"]


@override_settings(TAS_API_ANONYMOUS_READ=True)
def test_anonymous_read_when_allowed(scheduled, client):
    for url in READS:
        assert client.get(url).status_code == 200, url


@override_settings(TAS_API_ANONYMOUS_READ=False)
def test_anonymous_read_refused_when_off_and_credentials_work(scheduled, client, token, user):
    for url in READS:
        response = client.get(url)
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"].startswith("Token")
    for header in (f"Token {token}", f"Bearer {token}"):
        authed = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=header)
        assert all(authed.get(url).status_code == 200 for url in READS)
    assert client.get(READS[0], HTTP_AUTHORIZATION="Token wrong").status_code == 401
    session = Client(HTTP_HOST="localhost")
    session.force_login(user)
    assert session.get(READS[0]).status_code == 200


def test_production_settings_turn_anonymous_read_off(monkeypatch):
    from tests.tasweb.conftest import clean_env, run_python

    env = clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings.production",
                    DJANGO_SECRET_KEY="k3Q9vXy7LmN2pR8sT4uW6zA1bC5dE0fG-h_J+iK=oP%qS@tU!vW#xY",
                    TAS_VAR_DIR="/tmp/tas-api-settings-test")
    code = "import django; django.setup(); from django.conf import settings; print(settings.TAS_API_ANONYMOUS_READ)"
    result = run_python(code, env=env)
    assert result.stdout.strip() == "False", result.stderr
    base = run_python(code, env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings",
                                          TAS_VAR_DIR="/tmp/tas-api-settings-test"))
    assert base.stdout.strip() == "True", base.stderr


def test_token_command(db):
    out = io.StringIO()
    with pytest.raises(CommandError, match="does not exist"):
        call_command("tas_api_token", "bob", stdout=out)
    call_command("tas_api_token", "bob", "--create", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    assert Token.objects.get(user__username="bob").key == key
    again = io.StringIO()
    call_command("tas_api_token", "bob", stdout=again)
    assert again.getvalue().strip() == key
    rotated = io.StringIO()
    call_command("tas_api_token", "bob", "--rotate", stdout=rotated)
    assert rotated.getvalue().strip() != key


def test_pagination(scheduled, client):
    first = client.get("/api/v1/nodes/", {"page_size": 10}).json()
    assert first["count"] == 64 and first["countExact"] is True and first["pageSize"] == 10
    assert first["previous"] is None and "page=2" in first["next"]
    last = client.get("/api/v1/nodes/", {"page_size": 10, "page": 7}).json()
    assert len(last["results"]) == 4 and last["next"] is None and "page=6" in last["previous"]
    beyond = client.get("/api/v1/nodes/", {"page_size": 10, "page": 99})
    assert beyond.status_code == 404 and beyond.json()["detail"] == ("page 99 is past the last page (7) of 10 "
                                                                      "items per page")
    pages = [n["name"] for p in range(1, 8) for n in results(client.get("/api/v1/nodes/", {"page_size": 10,
                                                                                            "page": p}))]
    assert len(pages) == len(set(pages)) == 64
    with override_settings(TAS_API_EXACT_COUNT_LIMIT=20):
        capped = client.get("/api/v1/nodes/", {"page_size": 5}).json()
        assert capped["count"] == 20 and capped["countExact"] is False
    with override_settings(TAS_API_MAX_PAGE_SIZE=20):
        assert client.get("/api/v1/nodes/", {"page_size": 21}).status_code == 400
    for written in ("\uff11", " 1", "+1", "1_0"):  # int() reads each; a query string should not
        refused = client.get("/api/v1/nodes/", {"page": written})
        assert refused.status_code == 400 and "must be a whole number" in str(refused.json()), written


def test_engine_view_is_reused_until_the_mirror_changes_then_brought_up_to_date(scheduled, client):
    client.get("/api/v1/flavors/tas-gpu/tree/")
    view = state.engine_view()
    client.get("/api/v1/workloads/ml/job-moe-too-big/why-pending/")
    assert state.engine_view() is view and view.memo  # nothing changed: the same view, what it remembers
    upsert(workload_object("new-one"))
    fresh = state.engine_view()
    # the same view, the change applied from the change log; what it remembered is forgotten
    assert fresh is view and view.caught_up == 1 and "ml/new-one" in fresh.workloads and not view.memo
    assert client.get("/api/v1/workloads/ml/new-one/why-pending/").json()["pending"] is True


def test_deleting_an_object_changes_the_mirror_version(scheduled):
    from tasweb.cluster.models import Pod

    before = state.mirror_version()
    Pod.objects.filter(name="llm-inference-0").delete()
    assert state.mirror_version() != before


def test_unknown_route_under_the_api_is_404(scheduled, client):
    assert client.get("/api/v1/nope/").status_code == 404
