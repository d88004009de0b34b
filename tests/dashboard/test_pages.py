"""The dashboard in headless Chromium against a live server of the project: every page loads
with no console error, its figures hold the fixture's data, drill-down, filters and live
updates work; a screenshot of each page goes to var/test-artifacts/screenshots/ (or
TAS_SCREENSHOT_DIR)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from tasweb.cluster.models import Workload, WorkloadStatus
from tasweb.scheduling.models import AssignmentDomain, EventKind, PodSetAssignment, WorkloadEvent
from tasweb.simulator.config import SimulatorSettings
from tasweb.simulator.services import simulator_seed
from tests.dashboard.browser import load, screenshot_dir, wait_drawn
from tests.dashboard.conftest import NODES, NOT_READY_NODE, NOW, TOO_BIG, node_update, not_ready

pytestmark = [pytest.mark.services, pytest.mark.browser]

FIGURE_SUMMARY = """(id) => {
  const el = document.getElementById(id);
  const flat = (z) => Array.from(z || []).flatMap((row) => (row && row.length !== undefined ? Array.from(row) : [row]));
  return el.data.map((t, i) => ({
    type: t.type, name: t.name || "", meta: t.meta || null,
    points: t.type === "heatmap" ? flat(el.calcdata[i][0].z).filter((v) => v !== null && !Number.isNaN(v)).length
          : (t.x ? t.x.length : 0),
    x: t.type === "bar" ? Array.from(t.x) : null, y: t.type === "bar" ? Array.from(t.y) : null,
  }));
}"""

CELL_POSITION = """([id, trace, row, col]) => {
  const el = document.getElementById(id);
  const t = el._fullData[trace];
  const axis = (name, letter) => el._fullLayout[letter + "axis" + name.slice(1)];
  const xa = axis(t.xaxis, "x"), ya = axis(t.yaxis, "y");
  const box = el.getBoundingClientRect();
  return {x: box.left + xa._offset + xa.l2p(col + 1), y: box.top + ya._offset + ya.l2p(row)};
}"""

HIERARCHY_DOMAINS = """(id) => new Set(
  document.getElementById(id).data.flatMap((t) => Array.from(t.customdata[0]))).size"""

BAR_POSITION = """([id, domain]) => {
  const el = document.getElementById(id);
  for (const t of el._fullData) {
    const i = Array.from(t.customdata[0]).indexOf(domain);
    if (i < 0) continue;
    const xa = el._fullLayout[t.xaxis.replace("x", "xaxis")], ya = el._fullLayout[t.yaxis.replace("y", "yaxis")];
    const box = el.getBoundingClientRect();
    return {x: box.left + xa._offset + xa.l2p((t.x[i] + t.x[i + 1]) / 2), y: box.top + ya._offset + ya.l2p(t.y[0])};
  }
  return null;
}"""

COLOURBAR_TITLE = "() => document.getElementById('fig-grid').layout.coloraxis.colorbar.title.text"


def figure(page, fig_id: str) -> list[dict]:
    return page.evaluate(FIGURE_SUMMARY, fig_id)


def open_page(page, url: str, name: str):
    loaded = load(page, url)
    assert loaded.console == [], loaded.console
    page.screenshot(path=str(screenshot_dir() / f"{name}.png"), full_page=True)
    return loaded


def click_cell(page, fig_id: str, trace: int, row: int, col: int) -> None:
    point = page.evaluate(CELL_POSITION, [fig_id, trace, row, col])
    page.mouse.move(point["x"], point["y"])
    page.wait_for_timeout(200)  # Plotly finds the hovered cell on mouse move, then a click uses it
    page.mouse.click(point["x"], point["y"])


def click_bar(page, fig_id: str, domain: str) -> None:
    point = page.evaluate(BAR_POSITION, [fig_id, domain])
    assert point is not None, f"no bar for {domain} in {fig_id}"
    page.mouse.move(point["x"], point["y"])
    page.wait_for_timeout(200)
    page.mouse.click(point["x"], point["y"])


def domain_of(page) -> str:
    return parse_qs(urlsplit(page.url).query).get("domain", [""])[0]


def test_topology_page_draws_every_node_and_marks_conditions(live_cluster, server_url, page):
    open_page(page, f"{server_url}/topology/", "topology")
    traces = figure(page, "fig-grid")
    assert sum(t["points"] for t in traces if t["type"] == "heatmap") == NODES
    assert [t["name"] for t in traces if t["type"] == "heatmap"] == ["b1", "b2"]
    marks = {t["name"]: t["points"] for t in traces if t["type"] == "scatter"}
    assert marks == {"NotReady": 1, "cordoned (unschedulable)": 1, "tainted": 1}
    assert page.evaluate(HIERARCHY_DOMAINS, "fig-hierarchy") == 1 + 2 + 4 + NODES
    assert page.inner_text("[data-summary=nodes]") == str(NODES)
    assert page.inner_text("[data-summary=not-ready]") == "1"
    assert page.inner_text("[data-summary=workloads]") == "3"
    # the legend of the colours says what they mean, with the unit
    assert "used % of" in page.evaluate(COLOURBAR_TITLE)


HIERARCHY_LABELS = """(id) => Array.from(document.querySelectorAll('#' + id + ' g.heatmap-label text'))
  .filter((t) => getComputedStyle(t).display !== 'none')
  .map((t) => { const b = t.getBoundingClientRect();
                return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom}; })"""


def overlapping(labels: list[dict]) -> list[tuple[str, str]]:
    return [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:]
            if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]]


def test_hierarchy_names_only_the_domains_whose_names_fit(transactional_db, server_url, page):
    # the simulator's default shape: 2 blocks x 4 racks x 8 nodes, 64 hostnames in one row
    simulator_seed(config=SimulatorSettings(blocks=2, racks_per_block=4, nodes_per_rack=8,
                                            serving_node_fraction=0.0), now=NOW)
    open_page(page, f"{server_url}/topology/", "topology-64-nodes")
    labels = page.evaluate(HIERARCHY_LABELS, "fig-hierarchy")
    assert overlapping(labels) == []
    shown = sorted(label["text"] for label in labels)
    # the flavor, its blocks and racks are named; the hostnames, 15 px apart, only on hover
    assert shown == sorted(["tas-gpu", "b1", "b2"] + ["r1", "r2", "r3", "r4"] * 2)
    # a phone's width redraws the figure: the racks' names no longer fit and are hidden too
    page.set_viewport_size({"width": 360, "height": 800})
    page.wait_for_function("() => document.getElementById('fig-hierarchy').getBoundingClientRect().width < 360")
    page.wait_for_function("() => document.getElementById('fig-hierarchy').dataset.labelsHidden === '8'")
    narrow = page.evaluate(HIERARCHY_LABELS, "fig-hierarchy")
    assert overlapping(narrow) == [] and sorted(label["text"] for label in narrow) == ["b1", "b2", "tas-gpu"]
    # in one rack, 8 nodes side by side: their names fit and are shown
    page.set_viewport_size({"width": 1400, "height": 900})
    open_page(page, f"{server_url}/topology/?domain=b1/r2", "topology-64-nodes-rack")
    rack = page.evaluate(HIERARCHY_LABELS, "fig-hierarchy")
    assert overlapping(rack) == []
    assert {f"b1-r2-n{i}" for i in range(1, 9)} <= {label["text"] for label in rack}


def test_topology_drill_down_by_click(live_cluster, server_url, page):
    open_page(page, f"{server_url}/topology/", "topology-drill-start")
    # a node of block b2 in the whole-flavor grid: opens the block
    click_cell(page, "fig-grid", 1, 0, 0)
    page.wait_for_selector(".breadcrumbs .current[data-domain='b2']")
    assert domain_of(page) == "b2"
    wait_drawn(page)
    traces = figure(page, "fig-grid")
    assert [t["name"] for t in traces if t["type"] == "heatmap"] == ["b2"]
    page.wait_for_function("() => document.getElementById('fig-hierarchy').data[0].customdata[0][0] === 'b2'")
    # a rack in the hierarchy: opens the rack, whose nodes are listed
    click_bar(page, "fig-hierarchy", "b2/r2")
    page.wait_for_selector(".breadcrumbs .current[data-domain='b2/r2']")
    assert domain_of(page) == "b2/r2"
    rows = page.locator("#topology-nodes tbody tr")
    rows.first.wait_for()
    assert rows.count() == 3
    assert page.locator(f"#topology-nodes tr[data-node='{NOT_READY_NODE}'] .badge.bad").inner_text() == "NotReady"
    page.screenshot(path=str(screenshot_dir() / "topology-rack.png"), full_page=True)
    # the breadcrumb goes back to the whole flavor; the browser's back button to the block
    page.go_back()
    page.wait_for_selector(".breadcrumbs .current[data-domain='b2']")
    page.locator(".breadcrumbs a.crumb").first.click()
    page.wait_for_selector(".breadcrumbs .current[data-domain='']")
    page.wait_for_function(
        "() => document.getElementById('fig-grid').data.filter(t => t.type === 'heatmap').length === 2")


def test_topology_controls_change_the_resource_and_metric(live_cluster, server_url, page):
    open_page(page, f"{server_url}/topology/", "topology-controls")
    with page.expect_navigation():
        page.select_option("select[name=metric]", "free_units")
    wait_drawn(page)
    assert parse_qs(urlsplit(page.url).query)["metric"] == ["free_units"]
    assert page.evaluate(COLOURBAR_TITLE) == "free nvidia.com/gpu"
    with page.expect_navigation():
        page.select_option("select[name=resource]", "cpu")
    wait_drawn(page)
    assert page.evaluate(COLOURBAR_TITLE) == "free cores"


def test_bad_input_pages(live_cluster, server_url, page):
    response = page.goto(f"{server_url}/topology/?flavor=nope")
    assert response.status == 404
    assert "is not a TAS flavor" in page.inner_text(".error-message")
    response = page.goto(f"{server_url}/topology/?resource=example.com/fpga")
    assert response.status == 400
    response = page.goto(f"{server_url}/workloads/research/ghost/")
    assert response.status == 404 and "not found" in page.inner_text(".error-message")
    page.screenshot(path=str(screenshot_dir() / "not-found.png"), full_page=True)


def test_workload_page_highlights_its_pods(live_cluster, server_url, page):
    key = "research/train-block"
    open_page(page, f"{server_url}/workloads/{key}/", "workload")
    nodes = live_cluster.nodes_of(key)
    highlight = [t for t in figure(page, "fig-placement") if t["meta"] and "highlight" in t["meta"]]
    assert sum(t["points"] for t in highlight) == len(nodes)
    # the decoded domains, one row per domain, and the encoded TopologyAssignment as Kueue stores it
    rows = page.locator("table.domains tbody tr")
    assert rows.count() == AssignmentDomain.objects.filter(workload__namespace="research",
                                                           workload__name="train-block").count()
    assert {rows.nth(i).locator("td").nth(2).inner_text() for i in range(rows.count())} == nodes
    page.locator("details.encoded summary").click()
    encoded = json.loads(page.inner_text("pre[data-encoded=main]"))
    stored = PodSetAssignment.objects.get(workload__namespace="research", workload__name="train-block").encoded
    assert encoded == stored and list(encoded) == ["levels", "slices"]
    assert "required" in page.inner_text("table.pod-sets") and "topology-block" in page.inner_text("table.pod-sets")
    [timeline] = figure(page, "fig-timeline")
    assert timeline["points"] == 1 and timeline["name"].startswith("Admitted")


def test_pending_workload_explains_why(live_cluster, server_url, page):
    open_page(page, f"{server_url}/workloads/{TOO_BIG}/", "workload-pending")
    assert "Inadmissible" in page.inner_text("#workload-header")
    why = page.inner_text("#workload-why")
    assert "topology-rack" in why and "4 needed" in why
    bars = [t for t in figure(page, "fig-why-training-too-big-0") if t["type"] == "bar"]
    needed, best = bars
    assert needed["y"] == [4, 4, 4] and best["y"] == [3, 2, 1]


def test_history_timeline_and_filters(live_cluster, server_url, page):
    open_page(page, f"{server_url}/history/", "history")
    traces = figure(page, "fig-history")
    assert sum(t["points"] for t in traces) == live_cluster.events
    assert page.locator("#history-events table.events tbody tr").count() == live_cluster.events
    # by kind
    page.locator("input[name=kind][value=Evicted]").check()
    with page.expect_navigation():
        page.locator("#history-filters button[type=submit]").click()
    wait_drawn(page)
    assert [t["name"] for t in figure(page, "fig-history")] == ["Evicted (1)"]
    assert "no replacement fits" in page.inner_text("table.events")
    # by node and time
    node = page.locator("#history-events table.events tbody tr td").nth(3).locator("a").inner_text()
    page.goto(f"{server_url}/history/?node={node}&since=2025-06-01T12:03:00Z")
    wait_drawn(page)
    assert sorted(t["name"] for t in figure(page, "fig-history")) == ["Evicted (1)", "Requeued (1)"]
    # by domain and ClusterQueue
    page.goto(f"{server_url}/history/?domain=b2")
    wait_drawn(page)
    assert "No event matches these filters" in page.inner_text("#history-results")
    page.goto(f"{server_url}/history/?cluster_queue=cluster-queue&kind=Admitted")
    wait_drawn(page)
    assert sum(t["points"] for t in figure(page, "fig-history")) == 3
    page.screenshot(path=str(screenshot_dir() / "history-filtered.png"), full_page=True)


def pending_flips(workload: Workload, count: int, start: datetime) -> None:
    """What a waiting workload's history looks like after a while: the same reason, with other
    numbers, every time a pass looks at it again."""
    WorkloadEvent.objects.bulk_create([
        WorkloadEvent(workload=workload, workload_key=workload.key, cluster_queue="cluster-queue",
                      kind=EventKind.PENDING, at=start + timedelta(seconds=10 * i),
                      message=f"couldn't assign flavors to pod set main: {i + 1} more nvidia.com/gpu needed")
        for i in range(count)])


def test_history_leads_with_evictions_collapses_repeats_and_pages(live_cluster, server_url, page):
    too_big = Workload.objects.get(namespace="training", name="too-big")
    pending_flips(too_big, 40, NOW + timedelta(minutes=10))
    # a run broken by another of its events is two runs; other workloads' events do not break it
    WorkloadEvent.objects.create(workload=too_big, workload_key=too_big.key, kind=EventKind.REQUEUED,
                                 at=NOW + timedelta(minutes=30), message="requeued")
    pending_flips(too_big, 3, NOW + timedelta(minutes=31))
    other = Workload.objects.get(namespace="research", name="train-rack")
    for i in range(120):  # events that are not repeats: more rows than one page holds
        WorkloadEvent.objects.create(workload=other, workload_key=other.key,
                                     kind=EventKind.PODS_UNGATED if i % 2 else EventKind.POD_TERMINATED,
                                     at=NOW - timedelta(minutes=30) + timedelta(seconds=10 * i), message=f"pod {i}")
    total = WorkloadEvent.objects.count()
    open_page(page, f"{server_url}/history/", "history-grouped")

    # evictions and failures first, before the timeline and the table, with their counts
    headings = page.locator("#history-results h2").all_inner_texts()
    assert headings[0].startswith("Evictions and failures")
    assert page.inner_text("[data-problem=Evicted]") == "1"
    assert page.inner_text("[data-problem=NodeMarkedUnhealthy]") == "1"
    assert page.locator("#history-problems tbody tr").count() == 2
    assert "no replacement fits" in page.inner_text("#history-problems")

    # the 40 Pending events in a row are one row, with the time they span
    rows = page.locator("#history-events table.events tbody tr")
    assert rows.count() == 50  # a page of rows, not every event
    run = page.locator("#history-events tr[data-kind=Pending][data-count='40']")
    assert run.count() == 1
    text = run.inner_text()
    assert "\u00d740" in text and "from 2025-06-01 12:10:00" in text and "to 2025-06-01 12:16:30" in text
    assert "40 more nvidia.com/gpu needed" in text  # the newest of them
    assert page.locator("#history-events tr[data-kind=Pending][data-count='3']").count() == 1
    assert f"{total} events" in headings[1]

    # every row is on some page, none twice
    seen = 0
    pages = 0
    url = f"{server_url}/history/"
    while url:
        page.goto(url)
        wait_drawn(page)
        pages += 1
        seen += sum(int(c) for c in page.locator("#history-events tbody tr").evaluate_all(
            "(rows) => rows.map((r) => r.dataset.count)"))
        older = page.locator("#history-events nav.pager a", has_text="older")
        url = f"{server_url}/history/{older.get_attribute('href')}" if older.count() else ""
    assert seen == total and pages == 3
    # a filter that leaves out every eviction and failure leaves out their summary
    page.goto(f"{server_url}/history/?kind=Pending")
    wait_drawn(page)
    assert page.locator("#history-problems").count() == 0


def test_queues_page_lists_pending_with_explanations(live_cluster, server_url, page):
    open_page(page, f"{server_url}/queues/", "queues")
    card = page.locator("article[data-cluster-queue=cluster-queue]")
    assert card.locator("[data-count=admitted]").inner_text() == "3"
    items = card.locator("ol.pending > li")
    assert items.count() == 1 and items.first.get_attribute("data-workload") == TOO_BIG
    # the first pending workloads' explanations open at once, with their figure
    page.wait_for_selector("#fig-why-training-too-big-0 .main-svg")
    assert "4 needed" in items.first.inner_text()
    bars = figure(page, "fig-quota-cluster-queue")[0]
    assert bars["y"] == ["tas-gpu · cpu", "tas-gpu · memory", "tas-gpu · nvidia.com/gpu"]
    page.screenshot(path=str(screenshot_dir() / "queues.png"), full_page=True)


def test_queues_page_counts_every_waiting_workload_and_lists_them(live_cluster, server_url, page):
    open_page(page, f"{server_url}/queues/", "queues-waiting")
    card = page.locator("article[data-cluster-queue=cluster-queue]")
    # Pending and Inadmissible are both waiting; the fixture's one waiting workload is Inadmissible
    assert card.locator("[data-count=waiting]").inner_text() == "1"
    assert card.locator("[data-count=inadmissible]").inner_text() == "1"
    assert card.locator("[data-count=pending]").inner_text() == "0"
    with page.expect_navigation():
        card.locator("a[data-count=waiting]").click()
    wait_drawn(page)
    assert page.locator("select[name=status]").input_value() == "waiting"
    rows = page.locator("table.workloads tbody tr")
    assert rows.count() == 1 and TOO_BIG in rows.first.inner_text()


def test_queue_entry_badge_and_explanation_come_from_the_same_read(live_cluster, server_url, page, settings):
    """The page lists a workload as Inadmissible; the scheduler admits it before the page asks
    for its explanation. The entry must not say Inadmissible above "the Workload is Admitted"."""
    settings.TAS_DASHBOARD_POLL_MS = 0  # no poll redraws the list meanwhile
    namespace, name = TOO_BIG.split("/")

    def admitted_meanwhile(route):
        Workload.objects.filter(namespace=namespace, name=name).update(
            status=WorkloadStatus.ADMITTED, message="Admitted by ClusterQueue cluster-queue")
        route.continue_()

    page.route(f"**/workloads/{TOO_BIG}/why-pending/", admitted_meanwhile)
    open_page(page, f"{server_url}/queues/", "queues-admitted-meanwhile")
    entry = page.locator(f"li[data-workload='{TOO_BIG}']")
    entry.locator(".why-body .why").wait_for()
    body = entry.locator(".why-body").inner_text()
    badge = entry.locator("summary .badge")
    assert "the Workload is Admitted" in body
    assert badge.inner_text() == badge.get_attribute("data-status") == "Admitted"
    assert "status-admitted" in badge.get_attribute("class")
    assert entry.locator("summary .reason").inner_text() == "Admitted by ClusterQueue cluster-queue"


def test_workload_list_links_to_placements(live_cluster, server_url, page):
    open_page(page, f"{server_url}/workloads/?status=Admitted", "workloads")
    assert page.locator("table.workloads tbody tr").count() == 3
    with page.expect_navigation():
        page.locator("table.workloads a", has_text="research/train-rack").click()
    wait_drawn(page)
    assert urlsplit(page.url).path == "/workloads/research/train-rack/"


def test_pages_update_without_reloading(live_cluster, server_url, page, settings):
    settings.TAS_DASHBOARD_POLL_MS = 400
    open_page(page, f"{server_url}/topology/", "topology-live-before")
    page.evaluate("() => { window.__sameDocument = true; }")
    node_update("b1-r1-n2", not_ready)  # the cluster changes while the page is open
    page.wait_for_function("() => document.querySelector('[data-summary=not-ready]').textContent.trim() === '2'",
                           timeout=15_000)
    page.wait_for_function("""() => document.getElementById('fig-grid').data
        .filter(t => t.name === 'NotReady').reduce((n, t) => n + t.x.length, 0) === 2""", timeout=15_000)
    assert page.evaluate("() => window.__sameDocument === true")  # no reload happened
    assert page.evaluate("() => window.tasDashboard.updates") >= 1
    page.screenshot(path=str(screenshot_dir() / "topology-live-after.png"), full_page=True)
