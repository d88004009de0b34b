"""Predicted start times: stored after a pass, bounded by the budget, in the API and in the
visibility list."""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from datetime import timedelta

import pytest
from django.core.cache import cache

from scheduler.eta import INTERRUPTED, NEVER_FITS, OUT_OF_BUDGET, can_fork
from scheduler.runtimes import RuntimeClass, RuntimeEstimate, size_class
from tasweb.cluster.models import Workload, WorkloadStatus
from tasweb.core.deadline import DeadlineExceeded
from tasweb.scheduling import estimates
from tasweb.scheduling.estimates import (
    calibration_read,
    estimate_after_pass,
    estimate_child_running,
    estimate_child_wait,
    estimate_source,
    outcomes_read,
    runtime_history_build,
    start_estimate_run,
)
from tasweb.scheduling.leader import scheduler_key
from tasweb.scheduling.models import PredictionRun, PredictionSnapshot, WorkloadPrediction
from tasweb.scheduling.services import scheduling_pass_run
from tests.api.test_kubernetes_auth import (  # noqa: F401 - fixtures
    ML_TOKEN,
    RESEARCH_TOKEN,
    V1BETA2,
    bearer,
    cluster_users,
    two_namespaces,
)
from tests.kubeauth import kube_auth  # noqa: F401 - a fixture

from .conftest import DEMO_NOW, example_objects, upsert

pytestmark = pytest.mark.django_db

WAITING = ("ml/job-bert-finetune", "ml/job-hpo-sweep")  # wait for the example's running jobs to end
TOO_BIG = "ml/job-moe-too-big"  # fits no rack, even with the cluster idle


def crowd(n: int = 2) -> None:
    """Copies of the example's largest job, queued ahead of the rest: two of the example's
    workloads now wait for them to end."""
    base = next(o for o in example_objects() if o["kind"] == "Workload" and o["metadata"]["name"] == "job-llm-pretrain")
    for i in range(n):
        obj = copy.deepcopy(base)
        meta = obj["metadata"]
        meta.update(name=f"job-llm-next-{i}", uid=f"00000000-0000-4000-8000-00000000000{i}")
        obj.pop("status", None)
        upsert(obj)


def stored() -> tuple:
    """The stored estimate: its run's times and each prediction's start."""
    run = PredictionRun.objects.get()
    return (run.predicted_at, run.estimated_at,
            sorted(WorkloadPrediction.objects.values_list("workload_key", "start", "earliest", "latest")))


@pytest.fixture
def crowded(mirror) -> None:
    crowd()
    scheduling_pass_run(now=DEMO_NOW)


@pytest.fixture
def predicted(crowded) -> dict[str, WorkloadPrediction]:
    assert estimate_after_pass() == "ran"
    return {r.workload_key: r for r in WorkloadPrediction.objects.all()}


def test_the_estimate_after_a_pass_stores_one_prediction_per_waiting_workload(predicted):
    waiting = {w.key for w in Workload.objects.filter(status__in=[WorkloadStatus.PENDING,
                                                                   WorkloadStatus.INADMISSIBLE])}
    assert set(predicted) == waiting == {*WAITING, TOO_BIG}
    run = PredictionRun.objects.get()
    assert run.estimated_at == DEMO_NOW and run.predictions == len(waiting) == run.inserted
    for key in WAITING:
        row = predicted[key]
        assert row.earliest <= row.start <= row.latest
        assert row.start > DEMO_NOW
        assert row.end == row.start + timedelta(seconds=run.runtimes[row.runtime_key]["median"])
        assert row.source == "default" and row.reason == ""
        assert row.cluster_queue and row.local_queue.startswith("ml/")
        placement = row.placement[0]
        assert placement["flavor"] and placement["count"] > 0
        assert sum(d["count"] for d in placement["topologyAssignment"]["domains"]) == placement["count"]
    too_big = predicted[TOO_BIG]
    assert too_big.start is None and too_big.reason == NEVER_FITS and too_big.placement == []


def test_a_new_estimate_replaces_the_rows_and_drops_workloads_no_longer_waiting(predicted):
    Workload.objects.filter(namespace="ml", name="job-hpo-sweep").update(status=WorkloadStatus.ADMITTED)
    engine = estimate_source().engine
    engine.delete("Workload", "ml/job-hpo-sweep")  # as the mirror's change would
    start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=1))
    rows = {r.workload_key: r for r in WorkloadPrediction.objects.all()}
    assert set(rows) == {"ml/job-bert-finetune", TOO_BIG}
    run = PredictionRun.objects.get()
    assert run.estimated_at == DEMO_NOW + timedelta(minutes=1)
    assert (run.predictions, run.deleted) == (2, 1)


def test_an_estimate_writes_only_the_predictions_that_changed(predicted):
    """The same estimate again rewrites nothing; then a prediction gone, two changed (one only
    in its JSON) and one new are exactly what is written, and the table holds the new rows."""
    engine = estimate_source().engine
    start_estimate_run(engine=engine, now=DEMO_NOW)
    ids = dict(WorkloadPrediction.objects.values_list("workload_key", "id"))
    start_estimate_run(engine=engine, now=DEMO_NOW)
    run = PredictionRun.objects.get()
    assert (run.predictions, run.inserted, run.updated, run.deleted) == (len(ids), 0, 0, 0)
    assert dict(WorkloadPrediction.objects.values_list("workload_key", "id")) == ids  # not one row rewritten

    fields = [f.name for f in WorkloadPrediction._meta.concrete_fields if not f.primary_key]
    rows = {r["workload_key"]: r for r in WorkloadPrediction.objects.values(*fields)}
    gone, retimed, kept = sorted(rows)
    del rows[gone]
    rows[retimed] = {**rows[retimed], "runtime_key": "history:Job/ml/1"}
    rows["ml/newcomer"] = {**rows[kept], "workload_key": "ml/newcomer"}

    def replace(minutes: int) -> tuple[int, int, int, int]:
        at = DEMO_NOW + timedelta(minutes=minutes)
        run = estimates.predictions_replace(rows.values(), estimated_at=at, predicted_at=at)
        assert {r["workload_key"]: r for r in WorkloadPrediction.objects.values(*fields)} == rows
        assert PredictionRun.objects.get() == run and run.estimated_at == at
        return run.predictions, run.inserted, run.updated, run.deleted

    assert replace(2) == (3, 1, 1, 1)
    after = dict(WorkloadPrediction.objects.values_list("workload_key", "id"))
    assert after[kept] == ids[kept] and gone not in after
    rows["ml/newcomer"] = {**rows["ml/newcomer"], "start": DEMO_NOW + timedelta(hours=3), "reason": ""}
    assert replace(3) == (3, 0, 1, 0)


def test_predictions_name_their_runtime_by_what_it_is_of():
    """A class's runtimes are stored once per estimate, under a key that stays while they move;
    problems are part of the key, and two estimates of one basis are told apart."""
    learned = RuntimeEstimate(10, 20, 30, "history", "Job in ml/lq (5 runs)", basis="history:Job/ml/lq/")
    later = dataclasses.replace(learned, median=25, detail="Job in ml/lq (6 runs)")
    first, second = estimates.RunRuntimes(), estimates.RunRuntimes()
    assert first.key_of(learned) == second.key_of(later) == "history:Job/ml/lq/"
    assert first["history:Job/ml/lq/"]["median"] == 20 and second["history:Job/ml/lq/"]["median"] == 25
    flawed = dataclasses.replace(learned, problems=("'soon' is not a duration",))
    assert first.key_of(flawed) == "history:Job/ml/lq/|'soon' is not a duration"
    other = first.key_of(later)  # the same basis with other numbers in one estimate
    assert other.startswith("history:Job/ml/lq/#") and first[other]["median"] == 25
    assert first.key_of(learned) == "history:Job/ml/lq/" and len(first) == 3


def test_an_estimate_older_than_the_stored_one_is_dropped(predicted):
    """An estimate's child that outlived its worker must not overwrite a newer estimate."""
    engine = estimate_source().engine
    before = stored()
    start_estimate_run(engine=engine, now=DEMO_NOW - timedelta(minutes=1))
    assert stored() == before
    start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=1))
    assert PredictionRun.objects.get().estimated_at == DEMO_NOW + timedelta(minutes=1)


def test_a_tiny_budget_gives_a_partial_but_valid_result(crowded, client):
    engine = estimate_source().engine
    before = {key: (wl.admission, [c.type for c in wl.conditions]) for key, wl in engine.state.workload_map.items()}
    result = start_estimate_run(engine=engine, now=DEMO_NOW, budget=0.0)
    assert any(play.stopped == OUT_OF_BUDGET for play in result.plays.values())
    rows = {r.workload_key: r for r in WorkloadPrediction.objects.all()}
    assert set(rows) == {*WAITING, TOO_BIG}
    # the play stopped after its first pass, at DEMO_NOW: the run says how far it got
    assert result.played_until == PredictionRun.objects.get().played_until == DEMO_NOW
    for key in WAITING:
        assert rows[key].start is None and rows[key].reason == OUT_OF_BUDGET
        start = client.get(f"/api/v1/workloads/{key}/").json()["predictedStart"]
        assert start["reason"] == OUT_OF_BUDGET and start["playedUntil"] == DEMO_NOW.isoformat().replace("+00:00", "Z")
    # no play would ever admit it, however far it went: it says so, and not how far they went
    too_big = client.get(f"/api/v1/workloads/{TOO_BIG}/").json()["predictedStart"]
    assert too_big["reason"] == NEVER_FITS and too_big["playedUntil"] is None
    # the live engine is left as it was
    assert before == {key: (wl.admission, [c.type for c in wl.conditions])
                      for key, wl in engine.state.workload_map.items()}


def test_an_interrupted_estimate_stores_nothing_and_leaves_the_engine(predicted):
    engine = estimate_source().engine
    before = {key: (wl.admission, [c.type for c in wl.conditions]) for key, wl in engine.state.workload_map.items()}
    rows = stored()
    result = start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=5), interrupt=lambda: True)
    assert result.interrupted and [p.stopped for p in result.plays.values()] == [INTERRUPTED]  # the rest not played
    assert stored() == rows
    assert before == {key: (wl.admission, [c.type for c in wl.conditions])
                      for key, wl in engine.state.workload_map.items()}


def test_a_pass_queued_while_the_plays_run_stops_them(predicted, monkeypatch):
    """While the stored predictions are fresh, a pass queued during the plays stops them: the
    scheduler's worker runs one task at a time, so the pass would otherwise wait for them."""
    asked: list[bool] = []

    def pass_waiting() -> bool:
        asked.append(True)
        return len(asked) > 1  # not when the task starts; queued once the plays run

    monkeypatch.setattr(estimates, "_pass_waiting", pass_waiting)
    monkeypatch.setattr(estimates, "INTERRUPT_CHECK_SECONDS", 0.0)
    before = stored()
    assert estimate_after_pass() == "interrupted"
    assert stored() == before
    # stale predictions are replaced whatever waits: back-to-back passes never starve them
    monkeypatch.setattr(estimates, "_max_age", lambda: 0.0)
    asked.clear()
    assert estimate_after_pass() == "ran"
    assert stored() != before



def test_an_estimate_past_the_pass_time_limit_is_stopped_and_stores_nothing(crowded, settings, monkeypatch):
    settings.TAS_SCHEDULER_PASS_TIME_LIMIT = 1
    run = estimates.start_estimate_run

    def slow_run(**kwargs):
        time.sleep(5)  # plays stuck past their own budget
        return run(**kwargs)

    monkeypatch.setattr(estimates, "start_estimate_run", slow_run)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="the start-time estimate ran past its time limit of 1 s"):
        estimate_after_pass()
    assert time.monotonic() - started < 4
    assert not WorkloadPrediction.objects.exists()
    monkeypatch.setattr(estimates, "start_estimate_run", run)
    assert estimate_after_pass() == "ran"
    assert WorkloadPrediction.objects.exists()

@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
def test_a_forked_child_estimates_while_the_worker_goes_on(mirror, settings, monkeypatch):
    """With TAS_ETA_FORK the task forks and returns at once: the child plays on the engine's
    copy-on-write image and stores the predictions over its own database connection; the
    worker's engine and connection are left as they were, and an estimate asked for while
    the child runs is queued again for after it."""
    settings.TAS_ETA_FORK = True
    crowd()
    scheduling_pass_run(now=DEMO_NOW)
    engine = estimate_source().engine
    before = {key: (wl.admission, [c.type for c in wl.conditions]) for key, wl in engine.state.workload_map.items()}
    real_run = estimates.start_estimate_run

    def slow_run(**kwargs):  # runs in the child: long enough to be seen running
        assert kwargs["fork_plays"] and kwargs["own"]
        time.sleep(1.0)
        return real_run(**kwargs)

    requeued: list[float | None] = []
    monkeypatch.setattr(estimates, "start_estimate_run", slow_run)
    monkeypatch.setattr(estimates, "estimate_schedule", lambda countdown=None: requeued.append(countdown) or True)
    started = time.monotonic()
    assert estimate_after_pass() == "forked"
    assert time.monotonic() - started < 1.0  # the worker does not wait for the child, which sleeps 1 s first
    assert estimate_after_pass() == "running" and requeued == [estimates.REQUEUE_SECONDS]
    assert not WorkloadPrediction.objects.exists()  # this process's connection works across the fork
    assert estimate_child_wait(60)
    rows = {r.workload_key: r for r in WorkloadPrediction.objects.all()}
    assert set(rows) == {*WAITING, TOO_BIG} and PredictionRun.objects.get().estimated_at == DEMO_NOW
    for key in WAITING:
        assert rows[key].earliest <= rows[key].start <= rows[key].latest
    assert before == {key: (wl.admission, [c.type for c in wl.conditions])
                      for key, wl in engine.state.workload_map.items()}
    assert not estimate_child_running()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
def test_a_failed_child_is_reaped_and_logged(mirror, settings, monkeypatch, caplog):
    settings.TAS_ETA_FORK = True
    caplog.set_level("WARNING", logger="tasweb.scheduling.estimates")
    scheduling_pass_run(now=DEMO_NOW)

    def broken(**_kwargs):
        raise RuntimeError("no luck")

    monkeypatch.setattr(estimates, "start_estimate_run", broken)
    assert estimate_after_pass() == "forked"
    assert estimate_child_wait(60)
    assert "ended with 1" in caplog.text
    assert not WorkloadPrediction.objects.exists()


def test_inside_a_transaction_the_estimate_runs_in_this_process(crowded, settings):
    """No connection may be shared with a child, and one in a transaction cannot be closed."""
    settings.TAS_ETA_FORK = True
    assert estimate_after_pass() == "ran"
    assert WorkloadPrediction.objects.count() == 3


def test_recent_submissions_are_expected_again(crowded, settings, caplog):
    """The workloads created in the window before the pass (finished ones too) arrive again
    one window after their creation, and again, within the horizon; the estimate plays them."""
    for i, minutes in enumerate((50, 20)):
        obj = copy.deepcopy(next(o for o in example_objects() if o["kind"] == "Workload"
                                 and o["metadata"]["name"] == "job-eval-suite"))
        obj["metadata"].update(name=f"job-recent-{i}", uid=f"00000000-0000-4000-8000-1000000000{i}",
                               creationTimestamp=(DEMO_NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        obj.pop("status", None)
        upsert(obj)
    Workload.objects.filter(name="job-recent-0").update(status=WorkloadStatus.FINISHED)
    assert len(estimates.expected_arrivals_read(DEMO_NOW)) == 0  # off unless asked for
    settings.TAS_ETA_HORIZON_SECONDS = 3 * 3600
    settings.TAS_ETA_ARRIVALS_WINDOW_SECONDS = 3600
    recent = estimates.expected_arrivals_read(DEMO_NOW)
    arrivals = recent.replayed(timedelta(hours=3))
    assert [(at, wl.name) for at, wl in arrivals if wl.name.startswith("job-recent")] == [
        (600.0, "job-recent-0"), (2400.0, "job-recent-1"), (4200.0, "job-recent-0"), (6000.0, "job-recent-1"),
        (7800.0, "job-recent-0"), (9600.0, "job-recent-1")]
    assert all(0 < at <= 3 * 3600 for at, _ in arrivals)
    caplog.set_level("INFO", logger="tasweb.scheduling.estimates")
    for range_ in ("plays", "samples"):  # played as they came, or drawn at their rate
        settings.TAS_ETA_RANGE = range_
        start_estimate_run(engine=estimate_source().engine, now=DEMO_NOW)
        assert f"{len(recent)} recent submissions expected again" in caplog.text
    settings.TAS_ETA_ARRIVALS_WINDOW_SECONDS = 0
    assert len(estimates.expected_arrivals_read(DEMO_NOW)) == 0


def test_the_range_along_the_median_plays_chain(crowded, settings):
    """TAS_ETA_RANGE=chain: the median play only, the range worked out along it."""
    settings.TAS_ETA_RANGE = "chain"
    result = start_estimate_run(engine=estimate_source().engine, now=DEMO_NOW)
    assert result.plays["median"].seconds > 0 and result.plays["low"].seconds == result.plays["high"].seconds == 0
    rows = {r.workload_key: r for r in WorkloadPrediction.objects.all()}
    for key in WAITING:
        assert rows[key].earliest <= rows[key].start <= rows[key].latest and rows[key].earliest < rows[key].latest


def test_auto_plans_the_next_estimate_with_what_the_last_ones_plays_took(crowded, settings):
    """TAS_ETA_RANGE=auto (the default): the chain while the cost is unknown, then the richest
    estimate the last one's plays say fits TAS_ETA_TARGET_SECONDS."""
    assert settings.TAS_ETA_RANGE == "auto"
    engine = estimate_source().engine
    first = start_estimate_run(engine=engine, now=DEMO_NOW)
    assert first.plays["median"].seconds > 0 and first.plays["low"].seconds == 0  # the chain
    took = cache.get(scheduler_key(estimates.PLAY_SECONDS_KEY))
    assert took == first.plays["median"].seconds
    settings.TAS_ETA_TARGET_SECONDS = took * 100  # the example is small: plenty of room
    second = start_estimate_run(engine=engine, now=DEMO_NOW)
    assert list(second.plays) == [f"sample-{i}" for i in range(1, settings.TAS_ETA_SAMPLES + 1)]
    rows = {r.workload_key: r for r in WorkloadPrediction.objects.all()}
    for key in WAITING:
        assert rows[key].earliest <= rows[key].start <= rows[key].latest
    cache.set(scheduler_key(estimates.PLAY_SECONDS_KEY), settings.TAS_ETA_TARGET_SECONDS * 2)  # too slow for any
    assert estimates.eta_settings().range == "chain"


def test_a_bad_range_mode_is_reported_at_start_up(settings):
    from django.core.checks import run_checks

    settings.TAS_ETA_RANGE = "both"
    (error,) = [e for e in run_checks() if e.id == "scheduling.E003"]
    assert error.msg == "TAS_ETA_RANGE: 'both' is not a range mode; expected one of auto, plays, chain, samples"
    settings.TAS_ETA_SAMPLES = 0
    settings.TAS_ETA_TARGET_SECONDS = "soon"
    errors = {e.id: e.msg for e in run_checks() if e.id in ("scheduling.E004", "scheduling.E005")}
    assert errors == {"scheduling.E004": "TAS_ETA_SAMPLES: must be a whole number of at least 1, got 0",
                      "scheduling.E005": "TAS_ETA_TARGET_SECONDS: must be a number of seconds above 0, got 'soon'"}


def test_runtimes_are_learned_from_finished_workloads(crowded):
    Workload.objects.filter(namespace="ml", name="job-eval-suite").update(
        status=WorkloadStatus.FINISHED, admitted_at=DEMO_NOW - timedelta(minutes=30), finished_at=DEMO_NOW)
    history = runtime_history_build()
    row = Workload.objects.get(namespace="ml", name="job-eval-suite")
    owner = row.raw["metadata"]["ownerReferences"][0]["kind"]
    assert history.samples(RuntimeClass(owner, f"ml/{row.queue_name}", size_class(row.pod_count))) == 1
    assert history.samples(RuntimeClass("RayJob", f"ml/{row.queue_name}", size_class(row.pod_count))) == 0


def test_disabled_estimates_do_nothing(scheduled, settings):
    settings.TAS_ETA_ENABLED = False
    assert estimate_after_pass() == "disabled"
    assert not WorkloadPrediction.objects.exists()


def test_no_engine_no_estimate(db):
    assert estimate_after_pass() == "no engine"


def test_an_observe_pass_leaves_its_engine_for_the_estimate(mirror):
    crowd()
    record = scheduling_pass_run(now=DEMO_NOW, observe=True)
    source = estimate_source()
    assert source is not None and source.scheduling_pass == record.id
    assert estimate_after_pass() == "ran"
    assert set(WorkloadPrediction.objects.values_list("workload_key", flat=True)) >= set(WAITING)


# ---------------------------------------------------------------- the API


def test_workload_detail_and_list_carry_the_predicted_start(predicted, client):
    row = predicted["ml/job-bert-finetune"]
    body = client.get("/api/v1/workloads/ml/job-bert-finetune/").json()
    start = body["predictedStart"]
    assert set(start) == {"time", "earliest", "latest", "playsEarliest", "playsLatest", "calibration", "end",
                          "source", "runtime", "placement", "reason", "playedUntil", "estimatedAt"}
    assert start["calibration"] is None  # no outcomes yet: the plays' own range
    assert (start["earliest"], start["latest"]) == (start["playsEarliest"], start["playsLatest"])
    assert start["time"] == row.start.isoformat().replace("+00:00", "Z")
    assert start["source"] == "default" and start["reason"] is None and start["playedUntil"] is None
    assert start["placement"][0]["topologyAssignment"]["domains"]
    assert start["runtime"]["median"] == 3600.0
    # no time, and why
    too_big = client.get("/api/v1/workloads/ml/job-moe-too-big/").json()["predictedStart"]
    assert too_big["time"] is None and too_big["reason"] == NEVER_FITS
    # a running workload has none
    assert client.get("/api/v1/workloads/ml/job-llm-pretrain/").json()["predictedStart"] is None
    items = {i["name"]: i for i in client.get("/api/v1/workloads/", {"page_size": 500}).json()["results"]}
    assert items["job-bert-finetune"]["predictedStart"] == start
    assert items["job-llm-pretrain"]["predictedStart"] is None


def test_predictions_are_kept_to_be_checked_once_every_period(predicted, settings):
    snapshots = sorted(PredictionSnapshot.objects.values_list("namespace", "name", "made_at"))
    assert snapshots == [(*key.split("/"), DEMO_NOW) for key in sorted(WAITING)]  # not TOO_BIG: no start
    engine = estimate_source().engine
    start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=5))
    assert PredictionSnapshot.objects.count() == 2  # within TAS_ETA_SNAPSHOT_SECONDS (10 min) of the last
    start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=11))
    assert PredictionSnapshot.objects.count() == 4
    settings.TAS_ETA_SNAPSHOT_RETENTION_SECONDS = 700
    start_estimate_run(engine=engine, now=DEMO_NOW + timedelta(minutes=22))
    assert set(PredictionSnapshot.objects.values_list("made_at", flat=True)) == {
        DEMO_NOW + timedelta(minutes=22), DEMO_NOW + timedelta(minutes=11)}  # older than 700 s: gone


def outcomes_seen(count: int, *, late_by: timedelta) -> None:
    """`count` earlier predictions of workloads admitted `late_by` after their range ended."""
    made = DEMO_NOW - timedelta(hours=3)
    for i in range(count):
        name = f"done-{i}"
        Workload.objects.create(uid=f"u-{name}", namespace="ml", name=name, raw={}, status=WorkloadStatus.ADMITTED,
                                admitted_at=made + timedelta(minutes=70) + late_by)
        PredictionSnapshot.objects.create(namespace="ml", name=name, made_at=made, start=made + timedelta(hours=1),
                                          earliest=made + timedelta(minutes=50), latest=made + timedelta(minutes=70))
    # one not admitted yet, and one admitted before its prediction (an earlier run of it): no outcome
    PredictionSnapshot.objects.create(namespace="ml", name="job-bert-finetune", made_at=made,
                                      start=made + timedelta(hours=1), earliest=made, latest=made)
    Workload.objects.create(uid="u-before", namespace="ml", name="before", raw={}, status=WorkloadStatus.ADMITTED,
                            admitted_at=made - timedelta(minutes=1))
    PredictionSnapshot.objects.create(namespace="ml", name="before", made_at=made, start=made + timedelta(hours=1),
                                      earliest=made, latest=made)


def test_ranges_are_widened_by_what_earlier_predictions_missed_by(predicted, client):
    outcomes_seen(40, late_by=timedelta(minutes=30))  # every one 30 min past its latest: half its expected wait
    calibration = calibration_read()
    assert calibration is not None and calibration.outcomes == 40
    assert [(b.below, b.above) for b in calibration.bands] == [(0, pytest.approx(0.5))]  # one band: 40 // 30
    engine = estimate_source().engine
    now = DEMO_NOW + timedelta(minutes=1)
    start_estimate_run(engine=engine, now=now)
    row = WorkloadPrediction.objects.get(workload_key="ml/job-bert-finetune")
    assert row.earliest == row.plays_earliest
    expected = row.plays_latest + 0.5 * max(row.start - now, timedelta(minutes=1))
    assert abs(row.latest - expected) < timedelta(milliseconds=1)
    assert row.calibration == {"coverage": 0.8, "outcomes": 40, "below": 0.0, "above": pytest.approx(0.5),
                               "waitFrom": 0.0, "waitTo": None}
    shown = client.get("/api/v1/workloads/ml/job-bert-finetune/").json()["predictedStart"]
    assert shown["calibration"]["outcomes"] == 40
    assert shown["latest"] > shown["playsLatest"] and shown["earliest"] == shown["playsEarliest"]
    page = client.get("/workloads/ml/job-bert-finetune/").content.decode()
    assert "widened to hold the start 80 % of the time, from how far 40 earlier predictions missed" in page


@pytest.mark.django_db(transaction=True)
def test_the_outcomes_are_read_beside_the_plays_and_calibrate_the_same(mirror, monkeypatch):
    # outside a transaction (as in the estimate's own process) the outcomes are read on a
    # connection of their own while the plays run; the ranges are what reading them after gives
    crowd()
    scheduling_pass_run(now=DEMO_NOW)
    outcomes_seen(40, late_by=timedelta(minutes=30))
    read_on: list[str] = []

    def calibration_noting_its_thread():
        read_on.append(threading.current_thread().name)
        return calibration_read()

    monkeypatch.setattr(estimates, "calibration_read", calibration_noting_its_thread)
    now = DEMO_NOW + timedelta(minutes=1)
    start_estimate_run(engine=estimate_source().engine, now=now)
    assert read_on and read_on[0] != threading.current_thread().name
    row = WorkloadPrediction.objects.get(workload_key="ml/job-bert-finetune")
    assert row.calibration["outcomes"] == 40 and row.calibration["above"] == pytest.approx(0.5)
    assert abs(row.latest - (row.plays_latest + 0.5 * max(row.start - now, timedelta(minutes=1)))) < \
        timedelta(milliseconds=1)


def outcomes_expecting(count: int, *, wait: timedelta, late_by: float, prefix: str) -> None:
    """`count` earlier predictions expecting `wait`, admitted `late_by` of it after their latest."""
    made = DEMO_NOW - timedelta(hours=12)
    for i in range(count):
        name = f"{prefix}-{i}"
        Workload.objects.create(uid=f"u-{name}", namespace="ml", name=name, raw={}, status=WorkloadStatus.ADMITTED,
                                admitted_at=made + wait * (1 + late_by))
        PredictionSnapshot.objects.create(namespace="ml", name=name, made_at=made, start=made + wait,
                                          earliest=made + wait, latest=made + wait)


def test_each_range_is_calibrated_on_the_predictions_that_expected_a_wait_like_its_own(predicted, client):
    outcomes_expecting(30, wait=timedelta(minutes=10), late_by=1.0, prefix="short")
    outcomes_expecting(30, wait=timedelta(hours=5), late_by=0.1, prefix="long")
    calibration = calibration_read()
    short, long = calibration.bands
    assert (short.outcomes, short.above, long.outcomes, long.above) == (30, pytest.approx(1.0), 30,
                                                                         pytest.approx(0.1))
    assert short.high == long.low == 5 * 3600
    now = DEMO_NOW + timedelta(minutes=1)
    start_estimate_run(engine=estimate_source().engine, now=now)
    rows = list(WorkloadPrediction.objects.exclude(start=None))
    assert rows
    for row in rows:
        wait = max(row.start - now, timedelta(minutes=1))
        band = short if wait.total_seconds() < long.low else long
        assert abs(row.latest - (row.plays_latest + band.above * wait)) < timedelta(milliseconds=1)
        assert (row.calibration["outcomes"], row.calibration["waitFrom"], row.calibration["waitTo"]) == (
            30, band.low, None if band is long else band.high)
    row = rows[0]
    shown = client.get(f"/api/v1/workloads/{row.workload_key}/").json()["predictedStart"]["calibration"]
    assert (shown["waitFrom"], shown["waitTo"]) == (row.calibration["waitFrom"], row.calibration["waitTo"])
    page = client.get(f"/workloads/{row.workload_key}/").content.decode()
    said = "under 5 h" if row.calibration["waitTo"] else "of 5 h or more"
    assert f"from how far 30 earlier predictions that expected a wait {said} missed" in page


def test_a_range_stored_before_the_bands_shows_one_band_for_every_wait(predicted, client):
    row = WorkloadPrediction.objects.exclude(start=None).first()
    row.calibration = {"coverage": 0.8, "outcomes": 40, "below": 0.0, "above": 0.5}
    row.save(update_fields=["calibration"])
    shown = client.get(f"/api/v1/workloads/{row.workload_key}/").json()["predictedStart"]["calibration"]
    assert shown == {"coverage": 0.8, "outcomes": 40, "below": 0.0, "above": 0.5, "waitFrom": 0.0, "waitTo": None}


@pytest.mark.django_db
def test_the_outcomes_are_those_of_the_latest_admissions_and_of_predictions_made_before_them():
    t = DEMO_NOW - timedelta(hours=10)

    def kept(name: str, *made: timedelta, admitted: timedelta | None) -> None:
        Workload.objects.create(uid=f"u-{name}", namespace="ml", name=name, raw={}, status=WorkloadStatus.ADMITTED,
                                admitted_at=None if admitted is None else t + admitted)
        for m in made:
            PredictionSnapshot.objects.create(namespace="ml", name=name, made_at=t + m,
                                              start=t + m + timedelta(hours=1), earliest=t + m,
                                              latest=t + m + timedelta(hours=2))

    kept("late", timedelta(0), timedelta(minutes=10), admitted=timedelta(hours=3))
    kept("early", timedelta(hours=1), admitted=timedelta(hours=2))  # predicted later, admitted earlier
    # waited again after its admission: the prediction made then is not an outcome (yet)
    kept("again", timedelta(hours=4), admitted=timedelta(hours=1))
    kept("waiting", timedelta(hours=5), admitted=None)
    Workload.objects.create(uid="u-late-2", namespace="other", name="late", raw={}, status=WorkloadStatus.ADMITTED,
                            admitted_at=t + timedelta(hours=9))  # another namespace's workload of that name
    outcomes = outcomes_read(10)
    assert [(o.made_at - t, o.actual - t) for o in outcomes] == [
        (timedelta(minutes=10), timedelta(hours=3)), (timedelta(0), timedelta(hours=3)),
        (timedelta(hours=1), timedelta(hours=2))]
    assert all(o.start - o.made_at == timedelta(hours=1) and o.latest - o.earliest == timedelta(hours=2)
               for o in outcomes)
    assert outcomes_read(2) == outcomes[:2]  # the latest admission's, though predicted before the other


@pytest.mark.parametrize("value", [0, -1, 2.5, "3", True])
def test_a_bad_band_count_is_reported_at_start_up(settings, value):
    from tasweb.scheduling.checks import scheduling_settings_check

    settings.TAS_ETA_CALIBRATION_BANDS = value
    errors = [e for e in scheduling_settings_check(None) if e.id == "scheduling.E007"]
    assert len(errors) == 1 and "TAS_ETA_CALIBRATION_BANDS" in errors[0].msg


def test_too_few_outcomes_or_calibration_off_leave_the_plays_range(predicted, settings):
    outcomes_seen(29, late_by=timedelta(minutes=30))
    assert calibration_read() is None
    outcomes_seen_more = 5
    made = DEMO_NOW - timedelta(hours=2)
    for i in range(outcomes_seen_more):
        Workload.objects.create(uid=f"u-more-{i}", namespace="ml", name=f"more-{i}", raw={},
                                status=WorkloadStatus.ADMITTED, admitted_at=made + timedelta(hours=2))
        PredictionSnapshot.objects.create(namespace="ml", name=f"more-{i}", made_at=made,
                                          start=made + timedelta(hours=1), earliest=made, latest=made)
    assert calibration_read().outcomes == 34
    assert calibration_read(limit=31).outcomes == 31  # the latest ones
    settings.TAS_ETA_COVERAGE = 0
    assert calibration_read() is None
    start_estimate_run(engine=estimate_source().engine, now=DEMO_NOW + timedelta(minutes=1))
    row = WorkloadPrediction.objects.get(workload_key="ml/job-bert-finetune")
    assert (row.earliest, row.latest, row.calibration) == (row.plays_earliest, row.plays_latest, {})


@pytest.mark.parametrize("value", [1, 1.5, -0.1, "0.8", True])
def test_a_bad_coverage_is_reported_at_start_up(settings, value):
    from tasweb.scheduling.checks import scheduling_settings_check

    settings.TAS_ETA_COVERAGE = value
    errors = [e for e in scheduling_settings_check(None) if e.id == "scheduling.E006"]
    assert len(errors) == 1 and "TAS_ETA_COVERAGE" in errors[0].msg


def test_a_workload_not_estimated_yet_has_none(crowded, client):
    assert client.get("/api/v1/workloads/ml/job-bert-finetune/").json()["predictedStart"] is None


def test_the_schema_documents_the_field(client):
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    for name in ("WorkloadSummary", "WorkloadDetail", "PendingWorkload"):
        field = schema[name]["properties"]["predictedStart"]
        assert "PredictedStart" in str(field)
    calibration = schema["Calibration"]["properties"]
    assert {"coverage", "outcomes", "below", "above", "waitFrom", "waitTo"} <= set(calibration)
    assert calibration["waitTo"].get("nullable") is True
    predicted_start = schema["PredictedStart"]["properties"]
    assert {"time", "earliest", "latest", "source", "placement", "estimatedAt"} <= set(predicted_start)


def test_visibility_items_carry_the_prediction_as_an_extra_field(predicted, client):
    body = client.get("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads").json()
    items = {i["metadata"]["name"]: i for i in body["items"]}
    item = items["job-bert-finetune"]
    assert set(item) == {"metadata", "priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue",
                         "predictedStart"}
    detail = client.get("/api/v1/workloads/ml/job-bert-finetune/").json()["predictedStart"]
    assert item["predictedStart"] == detail
    lq = client.get("/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ml/localqueues/team-a/pendingworkloads")
    assert all("predictedStart" in i for i in lq.json()["items"])


@pytest.mark.usefixtures("two_namespaces", "cluster_users")
def test_predictions_follow_the_workloads_visibility():
    scheduling_pass_run(now=DEMO_NOW)  # the research workloads join the queue
    assert estimate_after_pass() == "ran"
    keys = set(WorkloadPrediction.objects.values_list("workload_key", flat=True))
    assert {"research/r-high", "ml/m-waits"} <= keys
    ml = bearer(ML_TOKEN)
    listed = ml.get("/api/v1/workloads/", {"page_size": 500}).json()["results"]
    assert {w["namespace"] for w in listed} == {"ml"}
    assert next(w for w in listed if w["name"] == "m-waits")["predictedStart"] is not None
    assert ml.get("/api/v1/workloads/research/r-high/").status_code == 404
    items = ml.get(f"{V1BETA2}/clusterqueues/cluster-queue/pendingworkloads").json()["items"]
    assert {i["metadata"]["namespace"] for i in items} == {"ml"}
    assert all(i["predictedStart"] is not None for i in items)
    research = bearer(RESEARCH_TOKEN).get("/api/v1/workloads/research/r-high/").json()
    assert research["predictedStart"]["estimatedAt"] is not None
