"""The dashboard's pages through Django's test client: status codes, bad input as 400/404
pages (never a 500), empty states, the live JSON a page polls, access, static files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from django.test import Client

from tasweb.cluster.services import object_upsert
from tasweb.dashboard.staticfiles import (
    PLOTLY_CSS_PATH,
    PLOTLY_GZ_PATH,
    PLOTLY_PATH,
    PlotlyCssError,
    PlotlyFinder,
    plotly_css,
    plotly_source,
)
from tests.dashboard.conftest import TOO_BIG

pytestmark = [pytest.mark.services, pytest.mark.django_db]


@pytest.fixture
def client() -> Client:
    return Client(HTTP_HOST="localhost")


@pytest.mark.parametrize("url", ["/topology/", "/topology/?domain=b1", "/topology/?domain=b2/r1&metric=free_units",
                                 "/topology/?resource=cpu&metric=free", "/workloads/", "/workloads/?status=Admitted",
                                 "/workloads/research/train-rack/", f"/workloads/{TOO_BIG}/",
                                 f"/workloads/{TOO_BIG}/why-pending/", "/history/", "/history/?kind=Evicted",
                                 "/queues/", "/queues/?cluster_queue=cluster-queue"])
def test_pages_render(cluster, client, url):
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize(("url", "status", "text"), [
    ("/topology/?flavor=nope", 404, "is not a TAS flavor"),
    ("/topology/?resource=example.com/fpga", 400, "no node of flavor tas-gpu offers it"),
    ("/topology/?metric=hot", 400, "metric"),
    ("/topology/?metric=free-units", 400, "metric &#x27;free-units&#x27; (did you mean free_units?)"),
    ("/topology/?resource=nvidia.com/GPU", 400, "(did you mean nvidia.com/gpu?)"),
    ("/topology/?domain=b7", 404, "is not in the topology"),
    ("/topology/?domain=b1//r1", 400, "level values"),
    ("/workloads/research/ghost/", 404, "Workload research/ghost not found"),
    ("/workloads/research/ghost/why-pending/", 404, "not found"),
    ("/workloads/?status=Sleeping", 400, "status"),
    ("/workloads/?status=admitted", 400, "(did you mean Admitted?)"),
    ("/history/?kind=Exploded", 400, "kind"),
    ("/history/?since=yesterday", 400, "since"),
    ("/history/?workload=no-slash", 400, "NAMESPACE/NAME"),
    ("/queues/?cluster_queue=nope", 404, "ClusterQueue &#x27;nope&#x27; not found"),
])
def test_bad_input_is_a_clear_page(cluster, client, url, status, text):
    response = client.get(url)
    assert response.status_code == status
    body = response.content.decode()
    assert text in body
    if "why-pending" not in url:
        assert "<h1>" in body and "Traceback" not in body


def test_empty_states_say_what_to_do(db, client):
    body = client.get("/topology/").content.decode()
    assert "No nodes mirrored yet" in body and "make run" in body and "TAS_CLUSTER_SOURCE=kubernetes" in body
    assert "No events recorded yet" in client.get("/history/").content.decode()
    assert "No ClusterQueue mirrored yet" in client.get("/queues/").content.decode()
    assert "No Workloads mirrored yet" in client.get("/workloads/").content.decode()


def test_history_filter_without_match_offers_to_clear(cluster, client):
    body = client.get("/history/?node=nowhere").content.decode()
    assert "No event matches these filters" in body


def test_the_waiting_filter_finds_inadmissible_workloads_too(cluster, client):
    # the only waiting workload is Inadmissible, like nearly every waiting one: a Pending-only
    # filter finds nothing, the waiting filter finds it
    assert TOO_BIG not in client.get("/workloads/?status=Pending").content.decode()
    body = client.get("/workloads/?status=waiting&cluster_queue=cluster-queue").content.decode()
    assert f"{TOO_BIG}/" in body and "research/train-rack" not in body
    assert '<option value="waiting" selected>' in body


def test_live_json_and_unchanged_versions(cluster, client):
    first = client.get("/topology/", {"format": "live"}).json()
    assert set(first["fragments"]) == {"topology-summary", "topology-breadcrumbs", "topology-nodes"}
    assert set(first["figures"]) == {"fig-hierarchy", "fig-grid"}
    again = client.get("/topology/", {"format": "live", "v": first["version"]}).json()
    assert again == {"version": first["version"], "unchanged": True}
    # a change in the mirror gives a new version
    from tests.dashboard.conftest import cordon, node_update

    node_update("b1-r1-n1", cordon)
    changed = client.get("/topology/", {"format": "live", "v": first["version"]}).json()
    assert changed["version"] != first["version"] and "fragments" in changed
    error = client.get("/topology/", {"format": "live", "flavor": "nope"})
    assert error.status_code == 404 and "nope" in error.json()["error"]


def test_pages_are_gzipped_and_embed_their_figures(cluster, client):
    response = client.get("/topology/", HTTP_ACCEPT_ENCODING="gzip")
    assert response["Content-Encoding"] == "gzip"
    html = gzip.decompress(response.content).decode()
    start = html.index('<script type="application/json" id="dashboard-figures">') + len(
        '<script type="application/json" id="dashboard-figures">')
    figs = json.loads(html[start:html.index("</script>", start)])
    assert set(figs) == {"fig-hierarchy", "fig-grid"}
    assert "dashboard/vendor/plotly.min.js" in html and "cdn" not in html.lower()


def test_reads_follow_the_apis_access_rule(cluster, client, settings, django_user_model):
    settings.TAS_API_ANONYMOUS_READ = False
    # a visitor is sent to the sign-in page and back; a poll gets a JSON 403
    response = client.get("/topology/?resource=cpu")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/topology/%3Fresource%3Dcpu"
    live = client.get("/topology/?format=live")
    assert live.status_code == 403 and live.json()["status"] == 403
    login_page = client.get(response["Location"]).content.decode()
    assert "TAS_API_ANONYMOUS_READ" in login_page and 'name="next" value="/topology/?resource=cpu"' in login_page

    django_user_model.objects.create_user("ops", password="s3cret-pass")
    signed_in = client.post("/accounts/login/", {"username": "ops", "password": "s3cret-pass",
                                                 "next": "/topology/?resource=cpu"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/topology/?resource=cpu"
    page = client.get("/topology/?resource=cpu")
    assert page.status_code == 200 and "Sign out" in page.content.decode()
    client.post("/accounts/logout/")
    assert client.get("/topology/").status_code == 302


def test_a_wrong_password_is_said_on_the_sign_in_page(client, django_user_model):
    django_user_model.objects.create_user("ops", password="s3cret-pass")
    response = client.post("/accounts/login/", {"username": "ops", "password": "wrong"})
    assert response.status_code == 200 and "didn't match" in response.content.decode()


def test_plotly_comes_from_the_installed_package_with_a_gzip_beside_it(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    finder = PlotlyFinder()
    assert [path for path, _ in finder.list(None)] == [PLOTLY_PATH, PLOTLY_GZ_PATH, PLOTLY_CSS_PATH]
    found = finder.find(PLOTLY_PATH)
    assert Path(found).read_bytes() == plotly_source().read_bytes()
    assert gzip.decompress(Path(finder.find(PLOTLY_GZ_PATH)).read_bytes()) == plotly_source().read_bytes()
    assert finder.find("other.js") is None and finder.find("other.js", find_all=True) == []
    assert Path(finder.find(PLOTLY_CSS_PATH)).read_text() == plotly_css(plotly_source().read_text())


def test_plotly_css_holds_the_bundles_rules_in_the_order_that_makes_them_win_as_plotly_inserts_them():
    bundle = ("var a=1;var KE={\"X,X div\":'direction:ltr;font-family:\"Open Sans\";',"
              "\"X .modebar\":\"position:absolute;\",Y:'position:fixed;',\"X a\":\"fill:#447adb;\"};")
    css = plotly_css(bundle).splitlines()[1:]
    # Plotly inserts each rule at index 0, so its first rule ends up last in the sheet
    assert css == [".js-plotly-plot .plotly a{fill:#447adb;}",
                   ".plotly-notifier{position:fixed;}",
                   ".js-plotly-plot .plotly .modebar{position:absolute;}",
                   '.js-plotly-plot .plotly,.js-plotly-plot .plotly div{direction:ltr;font-family:"Open Sans";}']
    real = plotly_css(plotly_source().read_text())
    assert ".js-plotly-plot .plotly .main-svg{position:absolute;top:0;left:0;pointer-events:none;}" in real


@pytest.mark.parametrize(("bundle", "said"), [
    ("no rules here", "style rules"),
    ('x={"X,X div":1}', "unreadable style of"),
    ('x={"X,X div":"a";}', "unexpected ';'"),
])
def test_a_bundle_without_plotly_css_rules_is_an_error_naming_the_file(bundle, said):
    with pytest.raises(PlotlyCssError, match=said) as caught:
        plotly_css(bundle)
    assert plotly_source().name in str(caught.value)


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def test_why_pending_opened_in_a_browser_goes_to_the_workload_page(cluster, client):
    response = client.get(f"/workloads/{TOO_BIG}/why-pending/", HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 302
    assert response["Location"] == f"/workloads/{TOO_BIG}/#workload-why"
    page = client.get(response["Location"], HTTP_ACCEPT=BROWSER_ACCEPT).content.decode()
    assert 'id="workload-why"' in page and "Why pending" in page


@pytest.mark.parametrize("accept", ["application/json", "*/*", ""])
def test_why_pending_fetched_as_json_is_the_fragment(cluster, client, accept):
    response = client.get(f"/workloads/{TOO_BIG}/why-pending/", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "Why pending" not in response.json()["html"]  # the compact fragment, not the page


def test_why_pending_of_a_missing_workload_in_a_browser_is_a_404_page(cluster, client):
    response = client.get("/workloads/research/ghost/why-pending/", HTTP_ACCEPT=BROWSER_ACCEPT, follow=True)
    assert response.status_code == 404
    assert "Workload research/ghost not found" in response.content.decode()


def test_a_queue_under_a_cycle_of_cohorts_says_so(cluster, client):
    for name, parent in (("a", "b"), ("b", "a")):
        object_upsert(kind="Cohort", obj={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                                          "metadata": {"name": name}, "spec": {"parentName": parent}})
    object_upsert(kind="ClusterQueue", obj={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cyclic"},
        "spec": {"cohortName": "a", "namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "tas-gpu", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    body = client.get("/queues/?cluster_queue=cyclic").content.decode()
    assert 'data-cohort-cycle="a -&gt; b -&gt; a"' in body
    assert "Under a cycle of Cohorts (a -&gt; b -&gt; a)" in body
    assert "data-cohort-cycle" not in client.get("/queues/?cluster_queue=cluster-queue").content.decode()


def test_a_queue_card_names_a_namespace_selector_that_restricts_it(cluster, client):
    """The card of a ClusterQueue whose namespaceSelector leaves namespaces out shows the
    selector, and says it is not checked while the mirror holds no Namespaces."""
    object_upsert(kind="ClusterQueue", obj={
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "selective"},
        "spec": {"namespaceSelector": {"matchLabels": {"team": "research"},
                                       "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                 "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                     {"name": "tas-gpu", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    body = client.get("/queues/?cluster_queue=selective").content.decode()
    assert 'data-namespace-selector="team=research,tier in (a,b)"' in body
    assert "Not checked here: the mirror holds no Namespaces." in body
    object_upsert(kind="Namespace", obj={"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": "research", "labels": {"team": "research"}}})
    assert "Not checked here" not in client.get("/queues/?cluster_queue=selective").content.decode()
    # a ClusterQueue selecting every namespace says nothing of it
    assert "data-namespace-selector" not in client.get("/queues/?cluster_queue=cluster-queue").content.decode()
