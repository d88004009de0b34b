"""The side-by-side page (`/comparison/`): the agreement rate over time, the disagreements, and
for one of them both assignments on the topology heatmap. The comparisons are real ones: the
simulator's stand-in Kueue admits with BestFit everywhere, the service observes and compares."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from tasweb.scheduling.models import AdmissionComparison, ComparisonCategory
from tasweb.scheduling.services import scheduling_pass_run
from tasweb.simulator.config import SimulatorSettings
from tasweb.simulator.services import simulator_seed, simulator_tick
from tests.dashboard.browser import screenshot_dir, wait_drawn
from tests.dashboard.test_content_security_policy import open_watched, violations

pytestmark = [pytest.mark.services]

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
FIGURES = re.compile(r'<script type="application/json" id="dashboard-figures">(.*?)</script>', re.S)


def build(settings) -> AdmissionComparison:
    """A few ticks of the simulator with its stand-in Kueue; the newest disagreement where this
    engine would have placed the workload elsewhere."""
    settings.TAS_SIMULATOR = {"kueue_profile": "BestFit"}
    settings.TAS_MODE = "observe"
    config = SimulatorSettings().with_overrides(initial_workloads=14, arrivals_per_minute=0,
                                                node_failures_per_minute=0, drains_per_minute=0,
                                                kueue_profile="BestFit")
    simulator_seed(config=config, now=NOW)
    for i in range(2):
        at = NOW + timedelta(seconds=2 * (i + 1))
        simulator_tick(now=at, rng=random.Random(f"7:{i}"), config=config)
        scheduling_pass_run(now=at)
    elsewhere = AdmissionComparison.objects.filter(category__in=[ComparisonCategory.SAME_LEVEL_OTHER_DOMAINS,
                                                                 ComparisonCategory.DIFFERENT_LEVEL])
    row = elsewhere.exclude(engine=[]).order_by("-admitted_at", "-id").first()
    assert row is not None, list(AdmissionComparison.objects.values_list("category", flat=True))
    return row


@pytest.fixture
def compared(db, settings) -> AdmissionComparison:
    return build(settings)


@pytest.fixture
def live_compared(transactional_db, settings) -> AdmissionComparison:
    return build(settings)


def figures_of(response) -> dict:
    return json.loads(FIGURES.search(response.content.decode()).group(1))


def test_the_page_shows_the_rate_the_disagreements_and_both_assignments(compared):
    response = Client().get(f"/comparison/?selected={compared.id}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'aria-current="page">Kueue side by side</a>' in html
    assert f'data-comparison="{compared.id}" data-category="{compared.category}"' in html
    assert "Kueue's assignment" in html and "This engine's assignment" in html
    for placement in (compared.kueue[0], compared.engine[0]):
        assert "/".join(placement["domains"][0]["values"]) in html
    figs = figures_of(response)
    assert set(figs) == {"fig-agreement", "fig-comparison"}
    rate = [t for t in figs["fig-agreement"]["data"] if (t.get("meta") or {}).get("rate")]
    assert len(rate) == 1 and rate[0]["yaxis"] == "y2"
    sides = {(t.get("meta") or {}).get("side") for t in figs["fig-comparison"]["data"]}
    assert {"kueue", "engine"} <= sides
    # the disagreements table lists only disagreements, each a link that selects it
    rows = re.findall(r'<tr data-comparison="(\d+)" data-category="(\w+)"', html)
    assert rows and all(category != "SameDomains" for _, category in rows)


def test_without_a_selection_the_newest_disagreement_is_shown(compared):
    html = Client().get("/comparison/").content.decode()
    newest = AdmissionComparison.objects.exclude(category="SameDomains").order_by("-admitted_at", "-id").first()
    assert f'id="comparison-selected" data-comparison="{newest.id}"' in html


def test_filters_and_bad_input(compared):
    client = Client()
    only = client.get("/comparison/?category=SameDomains").content.decode()
    assert "No disagreement among these comparisons" in only
    assert client.get("/comparison/?category=Nope").status_code == 400
    assert client.get("/comparison/?selected=abc").status_code == 400
    assert client.get("/comparison/?selected=999999").status_code == 404
    live = client.get("/comparison/?format=live").json()
    assert "comparison-results" in live["fragments"] and "fig-agreement" in live["figures"]


def test_the_page_before_any_comparison(db):
    html = Client().get("/comparison/").content.decode()
    assert "No admission compared yet" in html and "TAS_SIM_KUEUE_PROFILE=BestFit" in html


@pytest.mark.browser
def test_the_page_draws_both_assignments_with_no_violation(live_compared, server_url, browser):
    context, page, console = open_watched(browser, f"{server_url}/comparison/?selected={live_compared.id}")
    try:
        wait_drawn(page)
        drawn = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                              ".map((el) => [el.id, el.querySelectorAll('svg.main-svg').length])")
        assert dict(drawn).keys() == {"fig-agreement", "fig-comparison"} and all(n > 0 for _, n in drawn), drawn
        sides = page.evaluate("() => document.getElementById('fig-comparison').data"
                              ".map((t) => (t.meta || {}).side).filter(Boolean)")
        assert {"kueue", "engine"} <= set(sides)
        # both kinds of markers are on the heatmap
        points = page.evaluate("() => document.querySelectorAll('#fig-comparison .scatterlayer .point').length")
        assert points >= len(live_compared.kueue[0]["domains"])
        assert page.locator("#comparison-kueue td.mono").count() >= 1
        assert page.locator("#comparison-engine td.mono").count() >= 1
        page.screenshot(path=str(screenshot_dir() / "comparison.png"), full_page=True)
        page.wait_for_timeout(300)
        assert violations(page, console) == []
    finally:
        context.close()
