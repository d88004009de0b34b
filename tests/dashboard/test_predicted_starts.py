"""Predicted start times on the dashboard: the workload page says when a waiting workload is
expected to start (or why it cannot say), and the queues page draws the predicted
admissions as a timeline, under the Content-Security-Policy."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import escape

import pytest
from django.test import Client

from scheduler.eta import NEVER_FITS, OUT_OF_BUDGET
from tasweb.cluster.services import object_upsert
from tasweb.dashboard import figures, views
from tasweb.scheduling.estimates import estimate_after_pass, predictions_clear
from tasweb.scheduling.models import PredictionRun, WorkloadPrediction
from tasweb.scheduling.services import scheduling_pass_run
from tests.dashboard.browser import wait_drawn
from tests.dashboard.conftest import NOW, TOO_BIG, workload_object
from tests.dashboard.test_content_security_policy import open_watched, violations

pytestmark = [pytest.mark.services]

NEXT = "research/next-rack"  # a rack's worth of GPUs: waits for the rack job to end


def predict() -> dict[str, WorkloadPrediction]:
    obj = workload_object("research", "next-rack", count=3, gpus=8, minutes_ago=1)
    obj["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/expected-runtime"] = "45m"
    object_upsert(kind="Workload", obj=obj)
    scheduling_pass_run(now=NOW + timedelta(minutes=1))
    assert estimate_after_pass() == "ran"
    return {r.workload_key: r for r in WorkloadPrediction.objects.all()}


@pytest.fixture
def predicted(cluster) -> dict[str, WorkloadPrediction]:
    return predict()


@pytest.fixture
def live_predicted(live_cluster) -> dict[str, WorkloadPrediction]:
    return predict()


def test_the_fixture_has_a_prediction_with_a_time_and_one_without(predicted):
    assert predicted[NEXT].start is not None and predicted[NEXT].source == "annotation"
    assert predicted[TOO_BIG].start is None and predicted[TOO_BIG].reason


def test_workload_page_says_when_it_is_expected_to_start(predicted):
    row = predicted[NEXT]
    html = Client().get(f"/workloads/{NEXT}/").content.decode()
    assert f"Expected to start around <time datetime=\"{row.start.isoformat()}\">{row.start:%H:%M}</time>" in html
    assert f"between {row.earliest:%H:%M} and {row.latest:%H:%M}" in html
    assert "kueue.x-k8s.io/expected-runtime annotation" in html and "about 45 min" in html
    flavor = row.placement[0]["flavor"]
    assert f"<td>{flavor}</td>" in html
    first = row.placement[0]["topologyAssignment"]["domains"][0]
    assert f"{'/'.join(first['values'])} \u00d7 {first['count']}" in html


def test_workload_page_says_why_there_is_no_time(predicted, settings):
    html = Client().get(f"/workloads/{TOO_BIG}/").content.decode()
    assert f"No predicted start:</strong> {escape(NEVER_FITS)}." in html
    predictions_clear()
    html = Client().get(f"/workloads/{TOO_BIG}/").content.decode()
    assert "No predicted start:</strong> not estimated yet." in html
    settings.TAS_ETA_ENABLED = False
    views.rendered.bodies.clear()  # a page is kept while the data it shows is unchanged
    html = Client().get(f"/workloads/{TOO_BIG}/").content.decode()
    assert "No predicted start:</strong> start-time estimates are turned off." in html


def test_a_workload_the_play_stopped_short_of_says_how_far_it_got(predicted):
    """An estimate whose play stopped out of its budget before starting a workload: the page
    and the list say not before when."""
    reached = NOW + timedelta(hours=3, minutes=5)
    WorkloadPrediction.objects.filter(workload_key=NEXT).update(start=None, end=None, earliest=None, latest=None,
                                                                placement=[], reason=OUT_OF_BUDGET)
    PredictionRun.objects.update(played_until=reached)
    views.rendered.bodies.clear()
    html = Client().get(f"/workloads/{NEXT}/").content.decode()
    assert (f"No predicted start:</strong> {OUT_OF_BUDGET}.\n    Not before "
            f'<time datetime="{reached.isoformat()}">{reached:%H:%M}</time> ({reached:%Y-%m-%d} UTC): the queue was '
            "played forward to then without starting it.") in html
    listing = Client().get("/workloads/").content.decode()
    cells = dict(re.findall(r'<a href="/workloads/([^"]+)/">.*?<td class="nowrap expected-start">(.*?)</td>',
                            listing, re.S))
    assert cells[NEXT] == (f'<span class="muted" title="{OUT_OF_BUDGET}; the queue was played forward to then '
                           f'without starting it">not before {reached:%Y-%m-%d %H:%M}</span>')
    # a workload no play would admit says why, and not how far they got
    assert "Not before" not in Client().get(f"/workloads/{TOO_BIG}/").content.decode()
    assert cells[TOO_BIG] == f'<span class="muted" title="{escape(NEVER_FITS)}">{escape(NEVER_FITS)}</span>'


def test_workload_list_has_an_expected_start_column(predicted):
    """Queued workloads show their predicted start (the range in the cell's title) or why
    there is none; the others a dash."""
    row = predicted[NEXT]
    html = Client().get("/workloads/").content.decode()
    assert "Expected start (UTC)" in html
    cells = re.findall(r'<a href="/workloads/([^"]+)/">.*?<td class="nowrap expected-start">(.*?)</td>', html, re.S)
    by_key = dict(cells)
    assert by_key[NEXT] == (f'<span title="between {row.earliest:%Y-%m-%d %H:%M} and {row.latest:%Y-%m-%d %H:%M}">'
                            f"{row.start:%Y-%m-%d %H:%M}</span>")
    assert by_key[TOO_BIG] == f'<span class="muted" title="{escape(NEVER_FITS)}">{escape(NEVER_FITS)}</span>'
    assert by_key["research/train-rack"] == "-"


def test_an_admitted_workload_page_has_no_prediction(predicted):
    html = Client().get("/workloads/research/train-rack/").content.decode()
    assert 'id="predicted-start"' not in html


def test_the_timeline_figure_has_a_bar_per_prediction_and_a_range(predicted):
    from tasweb.dashboard.selectors import predicted_admissions

    rows = predicted_admissions(cluster_queue="cluster-queue")
    assert [r["key"] for r in rows] == [NEXT]
    fig = figures.start_timeline(rows)
    bars = [t for t in fig.data if t.name != "earliest to latest start"]
    assert [list(t.y) for t in bars] == [[NEXT]]
    assert bars[0].name == "research/gpu-jobs"
    assert bars[0].x[0] == pytest.approx(45 * 60 * 1000)
    assert figures.start_timeline([]) is None


@pytest.mark.browser
def test_queue_timeline_is_drawn_with_no_violation(live_predicted, server_url, browser):
    context, page, console = open_watched(browser, server_url + "/queues/")
    try:
        wait_drawn(page)
        drawn = page.evaluate("""() => {
          const el = document.querySelector("[data-figure='eta']");
          return el ? {svg: el.querySelectorAll('svg.main-svg').length,
                       bars: el.querySelectorAll('.bars .point').length,
                       ys: el.data.flatMap((t) => Array.from(t.y))} : null;
        }""")
        assert drawn is not None and drawn["svg"] > 0 and drawn["bars"] >= 2, drawn
        assert NEXT in drawn["ys"]
        page.wait_for_timeout(300)
        assert violations(page, console) == []
    finally:
        context.close()


@pytest.mark.browser
def test_workload_page_shows_the_prediction_with_no_violation(live_predicted, server_url, browser):
    row = live_predicted[NEXT]
    context, page, console = open_watched(browser, server_url + f"/workloads/{NEXT}/")
    try:
        wait_drawn(page)
        text = page.inner_text("#predicted-start")
        assert f"Expected to start around {row.start:%H:%M}" in text
        assert f"between {row.earliest:%H:%M} and {row.latest:%H:%M}" in text
        page.wait_for_timeout(300)
        assert violations(page, console) == []
    finally:
        context.close()


def test_long_workload_keys_are_shortened_in_the_middle_and_the_legend_stays_clear_of_the_axis():
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    long_key = "research/jobset-rl-actor-learner-with-a-long-name-jj8xs-w2fxf"
    rows = [{"key": key, "start": start, "end": start + timedelta(hours=1), "earliest": None, "latest": None,
             "local_queue": "research/gpu-jobs", "source": "the default", "estimated_at": start}
            for key in (long_key, "ml/short")]
    fig = figures.start_timeline(rows)
    assert list(fig.layout.yaxis.tickvals) == [long_key, "ml/short"]
    label, short = fig.layout.yaxis.ticktext
    assert short == "ml/short"
    assert len(label) == figures.GANTT_LABEL_CHARS and label.startswith("research/jobset") \
        and label.endswith("jj8xs-w2fxf") and "…" in label
    assert fig.layout.yaxis.automargin
    # above the plot whatever its height: a legend below it lands on the time axis' title
    assert fig.layout.legend.yanchor == "bottom" and fig.layout.legend.y >= 1


def test_middle_ellipsis_keeps_short_text_whole():
    assert figures.middle_ellipsis("abc", 3) == "abc"
    assert figures.middle_ellipsis("abcdefgh", 5) == "ab…gh"
    assert figures.middle_ellipsis("abcdefghi", 6) == "ab…ghi"
