"""Start-time estimates (scheduler.eta) and the runtimes they play with (scheduler.runtimes)."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from typing import Any

import pytest

from scheduler import eta
from scheduler.clone import clone_engine
from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.eta import (
    CHAIN,
    INTERRUPTED,
    NEVER,
    NEVER_EXCEEDS_QUOTA,
    NEVER_FITS,
    NOT_WITHIN_HORIZON,
    OUT_OF_BUDGET,
    PLAY_FAILED,
    SAMPLES,
    EtaSettings,
    RecentArrivals,
    can_fork,
    estimate,
    expected_arrivals,
    planned_range,
    plays_forked,
    without_bursts,
)
from scheduler.results import ADMITTED
from scheduler.runtimes import (
    ANNOTATION,
    DEADLINE,
    DEFAULT,
    HISTORY,
    DurationError,
    RuntimeClass,
    RuntimeEstimate,
    RuntimeHistory,
    parse_duration,
    quantile,
    runtime_class,
    size_class,
    with_censored,
)

from .factories import (
    BLOCK,
    HOSTNAME,
    NOW,
    RACK,
    admitted,
    domains_json,
    gates,
    grid,
    local_queue,
    owner_reference,
    parse,
    pod_set,
    queue_with_policy,
    resource_flavor,
    tas_setup,
    timestamp,
    topology,
    workload,
)

RUNTIME = "kueue.x-k8s.io/expected-runtime"


def engine_of(objects: list[dict]) -> Engine:
    return Engine.from_parsed(parse(objects), gates())


def running(name: str, hosts: list[tuple[str, int]], *, started: float, runtime: str | None = None,
            cq: str = "cq", queue: str = "lq", **kwargs: Any) -> dict:
    """A workload admitted `started` seconds from NOW (negative: before) on `hosts`."""
    annotations = {RUNTIME: runtime} if runtime else None
    wl = workload(name, queue=queue, count=sum(c for _, c in hosts), created=started - 10,
                  annotations=annotations, **kwargs)
    out = admitted(wl, assignments={"main": domains_json([HOSTNAME], hosts)}, cluster_queue_name=cq)
    for cond in out["status"]["conditions"]:
        cond["lastTransitionTime"] = timestamp(started)
    return out


def waiting(name: str, *, runtime: str | None = None, created: float = 0, **kwargs: Any) -> dict:
    annotations = {RUNTIME: runtime} if runtime else None
    return workload(name, created=created, annotations=annotations, **kwargs)


def two_racks() -> list[dict]:
    """Two racks of two 8-CPU nodes, one ClusterQueue of 32 CPUs."""
    return [*tas_setup(quota={"cpu": "32"}), *grid(blocks=1, racks=2, nodes=2, cpu="8")]


def racks_taken_three_waiting() -> list[dict]:
    """`two_racks`, taken by r1 (ends in 2 h) and r2 (3 h); a, b and c each wait for a rack."""
    return [*two_racks(),
            running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=0, runtime="2h", cpu="8"),
            running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=0, runtime="3h", cpu="8"),
            waiting("a", count=2, cpu="8", required=RACK, runtime="1h", created=1),
            waiting("b", count=2, cpu="8", required=RACK, runtime="1h", created=2),
            waiting("c", count=2, cpu="8", required=RACK, runtime="1h", created=3)]


def state_fingerprint(engine: Engine) -> tuple:
    state = engine.state
    return (
        sorted((k, repr(w.admission), repr(w.conditions)) for k, w in state.workload_map.items()),
        sorted(w.key for w in state.holders()),
        {cq: dict(usage) for cq, usage in state.quota_usage.items()},
        {name: snap.tas_usage.tolist() for name, snap in state.tas_snapshots.items()},
        engine.queues.pending_count(),
        engine.queues.parked_count(),
        engine.passes,
    )


class TestDurations:
    @pytest.mark.parametrize(("text", "seconds"), [
        ("3600", 3600), ("90.5", 90.5), ("2h30m", 9000), ("1.5h", 5400), ("90s", 90), ("250ms", 0.25),
        ("1h0m30s", 3630), (" 45m ", 2700),
    ])
    def test_go_durations_and_seconds(self, text, seconds):
        assert parse_duration(text) == pytest.approx(seconds)

    @pytest.mark.parametrize("text", ["", "two hours", "-5", "0", "0s", "5d", "1e3", "h", "3600x", "400000h"])
    def test_bad_values_say_why(self, text):
        with pytest.raises(DurationError) as exc:
            parse_duration(text)
        assert repr(text) in str(exc.value)


class TestRuntimeSources:
    def wl(self, **kwargs: Any):
        (out,) = parse([workload("w", **kwargs)]).workloads
        return out

    def test_annotation_on_the_workload(self):
        est = RuntimeHistory().estimate(self.wl(annotations={RUNTIME: "2h"}))
        assert (est.source, est.low, est.median, est.high) == (ANNOTATION, 7200, 7200, 7200)
        assert "on the Workload" in est.detail

    def test_annotation_on_the_pod_template(self):
        ps = pod_set(count=2)
        ps["template"]["metadata"] = {"annotations": {RUNTIME: "15m"}}
        est = RuntimeHistory().estimate(self.wl(pod_sets=[ps]))
        assert (est.source, est.median) == (ANNOTATION, 900)
        assert "PodSet main" in est.detail

    def test_bad_annotation_is_reported_and_the_next_source_used(self):
        est = RuntimeHistory(default_seconds=600).estimate(self.wl(annotations={RUNTIME: "soon"}))
        assert est.source == DEFAULT and est.median == 600
        assert est.problems and "'soon' is not a duration" in est.problems[0]

    def test_active_deadline_is_the_upper_bound(self):
        est = RuntimeHistory().estimate(self.wl(active_deadline_seconds=1800))
        assert (est.source, est.low, est.median, est.high) == (DEADLINE, 1800, 1800, 1800)
        history = RuntimeHistory(min_samples=3)
        wl = self.wl(active_deadline_seconds=1800)
        for seconds in (600, 1200, 2400, 3000):
            history.add_workload(wl, seconds)
        est = history.estimate(wl)
        assert est.source == DEADLINE and est.high == 1800 and est.median == 1800 and est.low < 1800

    def test_a_deadline_binds_only_when_every_pod_set_has_one(self):
        ps = [pod_set("a", active_deadline_seconds=60), pod_set("b")]
        assert RuntimeHistory().estimate(self.wl(pod_sets=ps)).source == DEFAULT

    def test_bad_deadline_is_an_input_error(self):
        with pytest.raises(InputError, match="activeDeadlineSeconds"):
            parse([workload("w", active_deadline_seconds=0)])

    def test_history_by_class_with_coarser_fallbacks(self):
        job = [owner_reference("Job", "j", api_version="batch/v1")]
        history = RuntimeHistory(min_samples=3, quantiles=(0.25, 0.5, 0.75))
        eight = self.wl(count=8, owners=job)
        assert runtime_class(eight) == RuntimeClass("Job", "default/lq", "8-15")
        for seconds in (100, 200, 300, 400, 500):
            history.add_workload(eight, seconds)
        est = history.estimate(eight)
        assert (est.source, est.low, est.median, est.high) == (HISTORY, 200, 300, 400)
        assert "Job in default/lq of 8-15 pods (5 runs)" in est.detail
        # another size in the same queue: the (kind, queue) class
        assert "Job in default/lq (5 runs)" in history.estimate(self.wl(count=2, owners=job)).detail
        # another kind: every finished workload
        assert "every finished workload" in history.estimate(self.wl(count=2)).detail

    def test_the_basis_names_what_the_numbers_are_of_and_not_the_numbers(self):
        job = [owner_reference("Job", "j", api_version="batch/v1")]
        history = RuntimeHistory(min_samples=3)
        eight = self.wl(count=8, owners=job)
        for seconds in (100, 200, 300):
            history.add_workload(eight, seconds)
        before = history.estimate(eight)
        history.add_workload(eight, 5000)
        after = history.with_running([(runtime_class(eight), 4000.0)]).estimate(eight)
        assert (before.median, before.detail) != (after.median, after.detail)
        assert before.basis == after.basis == "history:Job/default/lq/8-15"
        assert history.estimate(self.wl(count=2, owners=job)).basis == "history:Job/default/lq/"
        assert RuntimeHistory(default_seconds=600).estimate(self.wl()).basis == "default:600"
        annotated = RuntimeHistory().estimate(self.wl(annotations={RUNTIME: "2h"}))
        assert annotated.basis == "annotation:" + annotated.detail + ":7200.0"
        bounded = history.estimate(self.wl(count=8, owners=job, active_deadline_seconds=1800))
        assert bounded.basis == "deadline:1800.0:history:Job/default/lq/8-15"

    def test_default_without_history(self):
        est = RuntimeHistory(default_seconds=1000).estimate(self.wl())
        assert (est.source, est.low, est.median, est.high) == (DEFAULT, 500, 1000, 2000)

    def test_workloads_of_a_class_share_one_estimate_and_a_problem_gets_its_own(self):
        history = RuntimeHistory(default_seconds=1000)
        first, second = self.wl(), self.wl(annotations={"team": "x"})
        assert history.estimate(first) is history.estimate(second)  # frozen: one for all of them
        bad = history.estimate(self.wl(annotations={RUNTIME: "soon"}))
        assert bad.problems and not history.estimate(first).problems
        job = [owner_reference("Job", "j", api_version="batch/v1")]
        for seconds in (100, 200, 300, 400, 500):
            history.add_workload(self.wl(owners=job), seconds)
        learned = history.estimate(self.wl(owners=job))
        assert learned.source == HISTORY and history.estimate(self.wl(owners=job)) is learned
        assert history.estimate(self.wl(owners=job)) is learned
        # a history with another default gives its own
        assert RuntimeHistory(default_seconds=10).estimate(first).median == 10
        # another shape (more pods: another size class) is estimated on its own
        eight = self.wl(owners=job, count=8)
        assert history.estimate(eight) is not learned and "of 8-15 pods" not in history.estimate(eight).detail
        # runs added later are seen: what was made before them is not kept
        for seconds in (5000, 6000, 7000, 8000, 9000, 10000):
            history.add_workload(self.wl(owners=job), seconds)
        assert history.estimate(self.wl(owners=job)).median > learned.median

    def test_window_keeps_the_latest_runs(self):
        history = RuntimeHistory(min_samples=1, window=3, quantiles=(0, 0.5, 1))
        cls = RuntimeClass("Job", "ns/q", "1")
        for seconds in (1000, 10, 20, 30):
            history.add(cls, seconds)
        est = history.learned(cls)
        assert est is not None and (est.low, est.median, est.high) == (10, 20, 30)

    @pytest.mark.parametrize(("pods", "label"), [(1, "1"), (2, "2-3"), (3, "2-3"), (8, "8-15"), (100, "64-127")])
    def test_size_classes(self, pods, label):
        assert size_class(pods) == label


class TestEstimate:
    def test_queue_played_forward_with_placements(self):
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-300, runtime="20m", cpu="8"),
                   *[waiting(f"w{i}", count=2, cpu="8", required=RACK, created=i, runtime="1h") for i in range(4)]]
        est = estimate(engine_of(objects), NOW)
        got = {k.split("/")[1]: (p.start - NOW).total_seconds() for k, p in est.predictions.items()}
        # w0 takes the free rack now, w1 the rack r1 frees at 15 min, w2 and w3 follow them an hour later
        assert got == {"w0": 0, "w1": 900, "w2": 3600, "w3": 4500}
        w1 = est.predictions["default/w1"]
        assert w1.runtime.source == ANNOTATION and w1.cluster_queue == "cq"
        (ps,) = w1.placement
        assert ps.flavors == (("cpu", "tas-flavor"),)
        assert [(d.values, d.count) for d in ps.assignment.domains] == [(("b1-r1-n1",), 1), (("b1-r1-n2",), 1)]

    def test_live_engine_untouched(self):
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-300, runtime="20m", cpu="8"),
                   *[waiting(f"w{i}", count=2, cpu="8", required=RACK, created=i) for i in range(4)]]
        engine = engine_of(objects)
        engine.run_pass(NOW - timedelta(seconds=5))
        before = state_fingerprint(engine)
        estimate(engine, NOW)
        assert state_fingerprint(engine) == before
        clone_engine(engine).run_pass(NOW + timedelta(hours=3))
        assert state_fingerprint(engine) == before

    def test_an_engine_of_its_own_saves_a_copy_and_predicts_the_same(self):
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-300, runtime="20m", cpu="8"),
                   *[waiting(f"w{i}", count=2, cpu="8", required=RACK, created=i) for i in range(4)]]
        engine = engine_of(objects)
        engine.run_pass(NOW - timedelta(seconds=5))
        shared = estimate(engine, NOW)
        own = estimate(clone_engine(engine), NOW, own=True)
        assert own.predictions == shared.predictions and own.predictions

    def test_range_from_the_runtime_quantiles(self):
        history = RuntimeHistory(min_samples=3, quantiles=(0.1, 0.5, 0.9))
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, cpu="8"),
                   running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=-60, cpu="8"),
                   waiting("w", count=2, cpu="8", required=RACK)]
        engine = engine_of(objects)
        for seconds in (600, 900, 1200, 1500, 1800):
            history.add_workload(engine.state.workload("default/r1"), seconds)
        p = estimate(engine, NOW, history).predictions["default/w"]
        assert p.runtime.source == HISTORY
        assert (p.earliest - NOW).total_seconds() == pytest.approx(720 - 60, abs=1)
        assert (p.start - NOW).total_seconds() == pytest.approx(1200 - 60, abs=1)
        assert (p.latest - NOW).total_seconds() == pytest.approx(1680 - 60, abs=1)

    def test_overrun_workload_ends_soon(self):
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-7200, runtime="1h", cpu="8"),
                   running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=-60, runtime="1h", cpu="8"),
                   waiting("w", count=2, cpu="8", required=RACK)]
        p = estimate(engine_of(objects), NOW).predictions["default/w"]
        assert (p.start - NOW).total_seconds() == 360  # 10 % of its hour from now

    def test_horizon(self):
        objects = racks_taken_three_waiting()
        est = estimate(engine_of(objects), NOW, settings=EtaSettings(horizon=timedelta(hours=2, minutes=30)))
        a, b, c = (est.predictions[f"default/{n}"] for n in "abc")
        assert (a.start - NOW) == timedelta(hours=2)
        assert b.start is None and b.reason == NOT_WITHIN_HORIZON and not b.within_horizon
        assert c.start is None and c.reason == NOT_WITHIN_HORIZON
        assert est.played_until == NOW + timedelta(hours=2, minutes=30)  # nothing was due before the horizon
        assert est.plays["median"].stopped == NOT_WITHIN_HORIZON

    def test_too_big_never_starts(self):
        objects = [*two_racks(), waiting("huge", count=4, cpu="8", required=RACK)]
        p = estimate(engine_of(objects), NOW).predictions["default/huge"]
        assert p.start is None and p.reason

    def test_one_no_rack_could_hold_is_said_so_once_a_cycle_found_it(self):
        """`huge` needs four whole nodes in a rack of two; `over` fits the racks but not the
        quota (a ClusterQueue of 32 CPUs), ever: each is said why it never starts."""
        objects = [*two_racks(), waiting("huge", count=4, cpu="8", required=RACK),
                   waiting("over", count=5, cpu="8", required=BLOCK)]
        engine = engine_of(objects)
        engine.run_pass(NOW)
        predictions = estimate(engine, NOW).predictions
        huge, over = predictions["default/huge"], predictions["default/over"]
        assert huge.start is None and huge.reason == NEVER_FITS
        assert over.start is None and over.reason == NEVER_EXCEEDS_QUOTA

    def test_one_the_quota_stops_first_is_said_never_to_fit_once_a_play_frees_the_quota(self):
        """`huge` must borrow from cq-b, whose running workload holds the quota for an hour:
        the pass stops it on the quota (Kueue does not look at the topology then). The play
        frees the quota, finds that no rack of two nodes holds its three, and says so."""
        objects = [*grid(blocks=1, racks=2, nodes=2, cpu="8"), topology(), resource_flavor(),
                   queue_with_policy("cq-a", cpu=8, cohort="co"), queue_with_policy("cq-b", cpu=24, cohort="co"),
                   local_queue("lq-a", cluster_queue_name="cq-a"), local_queue("lq-b", cluster_queue_name="cq-b"),
                   running("b-run", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, runtime="1h", cpu="8",
                           cq="cq-b", queue="lq-b"),
                   waiting("huge", count=3, cpu="8", required=RACK, queue="lq-a")]
        engine = engine_of(objects)
        engine.run_pass(NOW)
        assert not engine.decisions["default/huge"].never_fits  # what the real pass knows
        est = estimate(engine, NOW)
        assert est.plays["median"].stopped == NEVER
        huge = est.predictions["default/huge"]
        assert huge.start is None and huge.reason == NEVER_FITS

    def test_budget(self):
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=0, runtime="2h", cpu="8"),
                   running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=0, runtime="3h", cpu="8"),
                   waiting("a", count=2, cpu="8", required=RACK, runtime="1h")]
        p = estimate(engine_of(objects), NOW, settings=EtaSettings(budget_seconds=0)).predictions["default/a"]
        assert p.start is None and p.reason == OUT_OF_BUDGET

    @pytest.mark.parametrize("mode", ["plays", CHAIN, SAMPLES])
    def test_a_play_cut_short_says_how_far_it_got(self, mode, monkeypatch):
        """Every play stops, out of its budget, right after the pass that admits `a` (at 2 h,
        when r1 ends): `b` and `c` have no time, and the estimate says the queue was played
        forward to 2 h; with sampled plays, each got as far as it got, and it says nothing."""
        def halted(play) -> bool:
            if play.halt is None:
                a = play.engine.state.workload("default/a")
                if a is not None and a.has_quota_reservation:
                    play.halt = OUT_OF_BUDGET
            return play.halt is not None

        monkeypatch.setattr(eta._Play, "halted", halted)
        objects = racks_taken_three_waiting()
        est = estimate(engine_of(objects), NOW, settings=EtaSettings(range=mode, samples=3))
        a, b, c = (est.predictions[f"default/{n}"] for n in "abc")
        assert a.start == NOW + timedelta(hours=2)
        assert b.start is None and b.reason == OUT_OF_BUDGET and c.start is None and c.reason == OUT_OF_BUDGET
        assert est.played_until == (None if mode == SAMPLES else NOW + timedelta(hours=2))

    def test_a_play_that_ends_says_nothing_of_how_far_it_got(self):
        """No pass evaluated `huge` yet: the play's first does, and finds no rack holds it."""
        objects = [*two_racks(), waiting("huge", count=4, cpu="8", required=RACK)]
        est = estimate(engine_of(objects), NOW)
        assert est.plays["median"].stopped == NEVER
        assert est.predictions["default/huge"].reason == NEVER_FITS and est.played_until is None

    def test_the_budget_is_kept_between_the_cycles_of_a_pass(self):
        """After a large release one pass admits thousands, a cycle each: the play asks whether
        to stop before every cycle but a pass's first, not only between passes (here an
        interrupt that says so from its fifth question: five cycles, five workloads admitted,
        in the first pass)."""
        objects = [*two_racks(), *(waiting(f"w{i:02d}", count=1, cpu="1", runtime="1h", created=i)
                                   for i in range(12))]
        asked: list[int] = []

        def interrupt() -> bool:
            asked.append(1)
            return len(asked) > 4

        est = estimate(engine_of(objects), NOW, settings=EtaSettings(range=CHAIN, interrupt=interrupt))
        assert est.interrupted and est.plays["median"].stopped == INTERRUPTED
        started = sorted(k for k, p in est.predictions.items() if p.start is not None)
        assert started == [f"default/w{i:02d}" for i in range(5)]
        assert all(p.reason == INTERRUPTED for k, p in est.predictions.items() if k not in started)
        # unbounded, the first pass admits all twelve
        unbounded = estimate(engine_of(objects), NOW, settings=EtaSettings(range=CHAIN))
        assert all(p.start == NOW for p in unbounded.predictions.values())

    def test_a_pass_stops_before_a_cycle_when_asked(self):
        objects = [*two_racks(), *(waiting(f"w{i:02d}", count=1, cpu="1", created=i) for i in range(12))]
        engine = engine_of(objects)
        asked: list[int] = []
        outcome = engine.run_pass(NOW, stop=lambda: len(asked) > 2 or bool(asked.append(1)))
        # asked before the second cycle and on: three times no, then yes
        assert outcome.stopped and outcome.cycles == 4 and outcome.admitted == 4
        assert engine.run_pass(NOW, stop=lambda: True).admitted == 1  # a pass always runs a cycle
        rest = engine.run_pass(NOW)
        assert not rest.stopped and rest.admitted == 7

    def test_expected_arrivals_take_their_place_in_the_queue(self):
        """A large workload waits for a whole rack; small ones expected to arrive meanwhile
        (BestEffortFIFO lets them pass it) take the capacity freed first."""
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, runtime="1h", cpu="8"),
                   running("r2", [("b1-r2-n1", 1)], started=-60, runtime="30m", cpu="8"),
                   running("r3", [("b1-r2-n2", 1)], started=-60, runtime="40m", cpu="8"),
                   waiting("big", count=2, cpu="8", required=RACK, runtime="1h")]
        engine = engine_of(objects)
        alone = estimate(engine, NOW).predictions["default/big"]
        # r2 ends at 29 min, r3 at 39 min: rack r2 is whole again then
        assert alone.start - NOW == timedelta(minutes=39)
        (small,) = parse([waiting("small", count=1, cpu="8", runtime="2h", created=-60)]).workloads
        arrivals = expected_arrivals([small], NOW, timedelta(minutes=20), timedelta(hours=24))
        assert [at for at, _ in arrivals[:3]] == [1140, 2340, 3540]
        est = estimate(engine, NOW, arrivals=arrivals)
        # the small one expected at 19 min takes a node of rack r2 as r2 ends at 29 min: the big
        # one waits for rack r1 at 59 min
        assert est.predictions["default/big"].start - NOW == timedelta(minutes=59)
        assert set(est.predictions) == {"default/big"}
        assert engine.queues.pending_count() == 1

    def test_preemption_in_the_play(self):
        objects = [topology(), resource_flavor(),
                   queue_with_policy("cq", cpu=32, within="LowerPriority"), local_queue("lq", cluster_queue_name="cq"),
                   *grid(blocks=1, racks=2, nodes=2, cpu="8"),
                   running("low1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, runtime="5h", cpu="8",
                           priority=1),
                   running("low2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=-60, runtime="1h", cpu="8",
                           priority=1),
                   waiting("high", count=2, cpu="8", required=RACK, runtime="1h", priority=10),
                   waiting("next", count=2, cpu="8", required=RACK, runtime="1h", priority=1, created=5)]
        est = estimate(engine_of(objects), NOW)
        high = est.predictions["default/high"]
        # preempts a low-priority workload, whose pods stop at once in the play: admitted a
        # pass (min_step) later, as Kueue's preemptor waits for the next pass
        assert high.start == NOW + timedelta(seconds=1)
        # the preempted workload queues again ahead of `next` (older) and takes the rack low2
        # frees at 59 min: `next` gets the one `high` frees
        assert est.predictions["default/next"].start == high.start + timedelta(hours=1)


    def test_a_preempted_workload_runs_its_whole_runtime_again(self):
        """Admitted again after its preemption, a workload ends a whole runtime later, not
        at the end its first run was due."""
        objects = [topology(), resource_flavor(),
                   queue_with_policy("cq", cpu=32, within="LowerPriority"), local_queue("lq", cluster_queue_name="cq"),
                   *grid(blocks=1, racks=2, nodes=2, cpu="8"),
                   running("low", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, runtime="1h", cpu="8",
                           priority=1),
                   # the other rack stays half taken; a workload ending early is due while `low` is out
                   running("long", [("b1-r2-n1", 1)], started=-60, runtime="5h", cpu="8", priority=5),
                   running("tiny", [("b1-r2-n2", 1)], started=-60, runtime="6m", cpu="8", priority=5),
                   waiting("high", count=2, cpu="8", required=RACK, runtime="10m", priority=10),
                   waiting("next", count=2, cpu="8", required=RACK, runtime="1h", priority=1, created=5)]
        est = estimate(engine_of(objects), NOW)
        high = est.predictions["default/high"]
        assert high.start == NOW + timedelta(seconds=1)
        # `low` is back at the end of `high` (older than `next`) and runs its hour again
        assert est.predictions["default/next"].start == high.start + timedelta(minutes=10, hours=1)


def cluster_with_queues(seed: int) -> list[dict]:
    """Two ClusterQueues in a cohort, with running and waiting workloads of several shapes."""
    rng = random.Random(seed)
    objects = [topology(), resource_flavor(), *grid(blocks=2, racks=3, nodes=4, cpu="8")]
    for name in ("a", "b"):
        objects += [queue_with_policy(name, cpu=64, cohort="all", reclaim="Any", within="LowerPriority",
                                      borrowing_limit=64),
                    local_queue(f"lq-{name}", cluster_queue_name=name)]
    hosts = [f"b{b}-r{r}-n{n}" for b in (1, 2) for r in (1, 2, 3) for n in (1, 2, 3, 4)]
    rng.shuffle(hosts)
    for i in range(6):
        host = hosts.pop()
        cq = rng.choice("ab")
        objects.append(running(f"run{i}", [(host, 1)], started=-rng.randint(60, 3000), cq=cq, queue=f"lq-{cq}",
                               runtime=f"{rng.randint(10, 90)}m", cpu="8", priority=rng.choice([0, 5])))
    for i in range(20):
        cq = rng.choice("ab")
        level = rng.choice([RACK, HOSTNAME, None])
        kwargs = {"required": level} if level else {}
        objects.append(waiting(f"w{i}", queue=f"lq-{cq}", count=rng.choice([1, 2, 3, 4, 6]), cpu="8",
                               created=i, priority=rng.choice([0, 5, 10]), runtime=f"{rng.randint(10, 90)}m",
                               **kwargs))
    return objects


@pytest.mark.parametrize("seed", range(4))
def test_first_pass_decides_as_the_live_pass(seed):
    """Everything predicted to start at `now` is what the next live pass admits, on the same domains."""
    engine = engine_of(cluster_with_queues(seed))
    est = estimate(engine, NOW)
    outcome = engine.run_pass(NOW)
    live = {k: r for k, r in outcome.decided.items() if r.status == ADMITTED}
    predicted_now = {k: p for k, p in est.predictions.items() if p.start == NOW}
    assert set(predicted_now) == set(live)
    for key, p in predicted_now.items():
        got = [(ps.name, ps.count, dict(ps.flavors), ps.assignment) for ps in p.placement]
        want = [(ps.name, ps.count, ps.flavors, ps.assignment) for ps in live[key].pod_sets]
        assert got == want, key
    assert live, "the scenario admits something"
    assert len(predicted_now) < len(est.predictions), "and leaves something waiting"


@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
class TestForkedPlays:
    """The low and high plays run in child processes, on the copy-on-write image of the engine."""

    @pytest.mark.parametrize("seed", range(3))
    def test_same_predictions_as_in_one_process(self, seed):
        def history(wl):  # a spread of runtimes, so that the three plays differ
            minutes = 10 + sum(map(ord, wl.name)) % 80
            return RuntimeEstimate(minutes * 30, minutes * 60, minutes * 150, HISTORY)

        engine = engine_of(cluster_with_queues(seed))
        alone = estimate(engine, NOW, history)
        forked = estimate(clone_engine(engine), NOW, history, own=True, fork_plays=True)
        assert forked.predictions == alone.predictions
        assert list(forked.plays) == ["low", "median", "high"]
        assert {level: p.passes for level, p in forked.plays.items()} == \
            {level: p.passes for level, p in alone.plays.items()}
        assert any(p.earliest != p.latest for p in forked.predictions.values()), "the plays differ"
        assert forked.clone_seconds < 0.05  # no copy: the children have the fork's image, the median the engine

    def test_live_engine_untouched(self):
        engine = engine_of(cluster_with_queues(1))
        before = state_fingerprint(engine)
        estimate(engine, NOW, fork_plays=True)
        assert state_fingerprint(engine) == before

    def test_a_failed_play_is_left_out_of_the_range(self, monkeypatch):
        """A child that dies sends nothing: its play is reported failed, the others stand."""

        engine = engine_of(cluster_with_queues(2))
        alone = estimate(engine, NOW)
        play_breaks(monkeypatch, "low")
        forked = estimate(engine, NOW, fork_plays=True)
        assert forked.plays["low"].stopped == PLAY_FAILED
        assert forked.plays["median"].stopped == alone.plays["median"].stopped
        for key, p in forked.predictions.items():
            want = alone.predictions[key]
            assert (p.start, p.placement, p.latest) == (want.start, want.placement, want.latest)
            times = [t for t in (want.start, want.latest) if t is not None]
            assert p.earliest == (min(times) if want.start is not None else p.earliest)


class TestChainedRange:
    """`range="chain"`: the median play only; the low and high times along its chain of finishes."""

    @pytest.mark.parametrize("seed", range(4))
    def test_the_chain_at_the_median_gives_back_the_median_play(self, seed):
        """The bookkeeping is exact: timed again with the median runtimes, every admission
        lands where the play put it."""
        import scheduler.eta as eta

        engine = engine_of(cluster_with_queues(seed))
        played: list[tuple[dict, eta._Chain]] = []
        real_play = eta._play

        def keep(*args):
            out = real_play(*args)
            played.append(out)
            return out

        settings = EtaSettings(levels=("median",), range="chain")
        runner_play, eta._play = eta._play, keep
        try:
            estimate(engine, NOW, spread_runtimes, settings)
        finally:
            eta._play = runner_play
        (admitted, chain), = played
        times = chain.times("median", lambda key, level: spread_runtimes(engine.state.workload(key)).at(level), 1.0)
        assert admitted and all(times[a.pass_index] == pytest.approx(a.at) for a in admitted.values())

    @pytest.mark.parametrize("seed", range(4))
    def test_one_play_with_a_range_around_it(self, seed):
        engine = engine_of(cluster_with_queues(seed))
        plays = estimate(engine, NOW, spread_runtimes)
        chained = estimate(engine, NOW, spread_runtimes, EtaSettings(range="chain"))
        assert chained.plays["median"].passes == plays.plays["median"].passes
        assert chained.plays["low"].seconds == 0.0  # not played
        for key, p in chained.predictions.items():
            want = plays.predictions[key]
            assert (p.start, p.placement) == (want.start, want.placement)  # the median play is the same
            if p.start is not None:
                assert p.earliest <= p.start and (p.latest is None or p.start <= p.latest)
        assert any(p.earliest < p.start for p in chained.predictions.values() if p.start and p.start > NOW)

    def test_a_queue_behind_running_workloads_gets_the_plays_range(self):
        """With one rack to wait for, the chain is what the low and high plays do."""
        history = RuntimeHistory(min_samples=3, quantiles=(0.1, 0.5, 0.9))
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-60, cpu="8"),
                   running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=-60, cpu="8"),
                   *[waiting(f"w{i}", count=2, cpu="8", required=RACK, created=i) for i in range(4)]]
        engine = engine_of(objects)
        for seconds in (600, 900, 1200, 1500, 1800):
            history.add_workload(engine.state.workload("default/r1"), seconds)
        plays = estimate(engine, NOW, history).predictions
        chained = estimate(engine, NOW, history, EtaSettings(range="chain")).predictions
        assert {k: (p.earliest, p.start, p.latest) for k, p in chained.items()} == \
            {k: (p.earliest, p.start, p.latest) for k, p in plays.items()}


def play_breaks(monkeypatch, name: str) -> None:
    """The play called `name` raises: in a child process, the child dies and sends nothing."""
    import scheduler.eta as eta

    real_play = eta._play

    def play(engine, run, spec, *args):
        if spec.name == name:
            raise RuntimeError("the child's play breaks")
        return real_play(engine, run, spec, *args)

    monkeypatch.setattr(eta, "_play", play)


def spread_runtimes(wl) -> RuntimeEstimate:
    minutes = 10 + sum(map(ord, wl.name)) % 80
    return RuntimeEstimate(minutes * 30, minutes * 60, minutes * 150, HISTORY)


class TestBurstsAreNotExpectedAgain:
    """The forecast of arrivals replays the last window, less its bursts: a part of the window
    holding more than a steady stream would keeps only that many."""

    @staticmethod
    def submitted(minutes_ago: list[float], prefix: str = "w") -> list:
        return parse([waiting(f"{prefix}{i}", created=-60 * m) for i, m in enumerate(minutes_ago)]).workloads

    def test_a_steady_stream_is_kept_whole(self):
        steady = self.submitted([5 * i + 2 for i in range(12)] + [5 * i + 3 for i in range(0, 12, 2)])
        assert without_bursts(steady, NOW, 3600, 12) == sorted(steady, key=lambda w: (w.creation_timestamp, w.key))
        arrivals = expected_arrivals(steady, NOW, timedelta(hours=1), timedelta(hours=2))
        assert len(arrivals) == 2 * len(steady)

    def test_a_burst_keeps_what_a_steady_stream_would_hold(self):
        steady = self.submitted([5 * i + 2 for i in range(12)])  # one in every 5 minutes
        burst = self.submitted([31 + i / 100 for i in range(60)], prefix="b")  # 60 within a minute
        kept = [wl.name for wl in without_bursts([*steady, *burst], NOW, 3600, 12)]
        # the median part holds 1: a part holding more than 1 + 3 + 1 = 5 is a burst; the one
        # 30-35 minutes ago (the burst and w6, 32 minutes ago) keeps 5 of its 61, spread over it
        assert len(kept) == 11 + 5
        assert {wl.name for wl in steady} - {"w6"} <= set(kept)
        assert sum(name.startswith("b") or name == "w6" for name in kept) == 5
        once = expected_arrivals([*steady, *burst], NOW, timedelta(hours=1), timedelta(hours=1))
        assert len(once) == 16

    def test_the_kinds_a_burst_held_keep_their_shares(self):
        objects = [waiting(f"{'large' if i % 3 == 0 else 'tiny'}{i}", created=-60 * 10 - i / 10, count=1)
                   for i in range(90)]
        kept = without_bursts(parse(objects).workloads, NOW, 3600, 12)
        assert len(kept) == 1  # every other part is empty: the median is 0, the cap 1
        objects += [waiting(f"steady{i}", created=-60 * (5 * i + 1)) for i in range(12)]
        kept = without_bursts(parse(objects).workloads, NOW, 3600, 12)
        burst = [wl.name for wl in kept if wl.name.startswith(("large", "tiny"))]
        assert len(kept) == 11 + 5 and 4 <= len(burst) <= 5
        assert 1 <= sum(name.startswith("large") for name in burst) <= 2


class TestRuntimeSamples:
    """`RuntimeEstimate.sample`: the runtime at a quantile, as the sampled plays draw them."""

    def test_an_exact_runtime_is_itself(self):
        est = RuntimeEstimate(600, 600, 600, ANNOTATION)
        assert {est.sample(u, elapsed) for u in (0.0, 0.3, 1.0) for elapsed in (0, 300, 900)} == {600}

    def test_learned_runs_give_their_quantiles(self):
        runs = tuple(float(s) for s in range(100, 1100, 100))  # 100 .. 1000
        est = RuntimeEstimate(190, 550, 910, HISTORY, samples=runs)
        assert (est.sample(0.0), est.sample(0.5), est.sample(1.0)) == (100, 550, 1000)
        # having run 650 s, of the runs longer than that (700 .. 1000)
        assert (est.sample(0.0, 650), est.sample(1.0, 650)) == (700, 1000)
        # fewer than 3 longer runs: every run
        assert est.sample(0.5, 850) == 550

    @pytest.mark.parametrize("seed", range(20))
    def test_the_runs_longer_than_what_has_run_are_read_in_place(self, seed):
        """`sample` and `total_given` read the quantile of the runs past `elapsed` without
        copying them: the same as the quantile of the copy."""
        rng = random.Random(seed)
        runs = tuple(sorted(rng.uniform(10, 1000) for _ in range(rng.randint(1, 40))))
        est = RuntimeEstimate(runs[0], runs[len(runs) // 2], runs[-1], HISTORY, samples=runs)
        for elapsed in (0.0, rng.uniform(0, 1000), runs[0], runs[-1], 2000.0):
            longer = [r for r in runs if r > elapsed]
            for level, q in zip(("low", "median", "high"), est.quantiles, strict=True):
                want = quantile(longer, q) if len(longer) >= 3 else None
                assert est.total_given(level, elapsed) == (pytest.approx(want) if want is not None else None)
            u = rng.random()
            want = quantile(longer if len(longer) >= 3 else runs, u)
            assert est.sample(u, elapsed) == pytest.approx(want)
        with pytest.raises(ValueError):
            quantile(runs, 0.5, len(runs))

    def test_a_deadline_caps_what_a_running_workload_is_expected_to_run(self):
        runs = tuple(float(s) for s in range(100, 1100, 100))
        est = RuntimeEstimate(190, 550, 800, DEADLINE, samples=runs)  # the job is stopped at 800 s
        assert est.total_given("median", 650) == 800  # not 850, the median of the runs longer
        assert est.total_given("low", 650) == 730  # below the deadline: as it was
        assert est.sample(0.9, 650) == 800

    def test_without_runs_a_log_normal_through_low_median_and_high(self):
        est = RuntimeHistory(default_seconds=3600).default()  # 1800, 3600, 7200
        assert est.sample(0.5) == pytest.approx(3600)
        assert est.sample(0.1) == pytest.approx(1800, rel=1e-6)
        assert est.sample(0.9) == pytest.approx(7200, rel=1e-6)
        draws = [est.sample(u / 100) for u in range(1, 100)]
        assert draws == sorted(draws)
        # having run longer than most of them: still later than that
        assert all(est.sample(u / 10, 9000) > 9000 for u in range(1, 10))

    def test_never_past_a_deadline(self):
        est = RuntimeEstimate(900, 1500, 1800, DEADLINE)
        assert max(est.sample(u / 20) for u in range(21)) == 1800

    def test_a_resample_draws_as_many_runs_from_the_learned_ones(self):
        runs = (100.0, 200.0, 400.0, 800.0, 1600.0)
        est = RuntimeEstimate(140, 400, 1120, HISTORY, samples=runs)
        drawn = [est.resampled(random.Random(seed)) for seed in range(20)]
        assert all(len(d) == 5 and list(d) == sorted(d) and set(d) <= set(runs) for d in drawn)
        assert est.resampled(random.Random(3)) == drawn[3]
        assert len(set(drawn)) > 10

    def test_a_play_samples_from_the_runs_it_is_given(self):
        est = RuntimeEstimate(190, 550, 910, HISTORY, samples=tuple(float(s) for s in range(100, 1100, 100)))
        assert est.sample(0.5, runs=(300.0, 300.0, 700.0)) == 300
        assert est.sample(1.0, 450, runs=(300.0, 500.0, 600.0, 700.0)) == 700  # of the longer ones still
        assert RuntimeEstimate(600, 600, 600, ANNOTATION).sample(0.5, runs=(1.0,)) == 600


class TestSampledPlays:
    """`range="samples"`: plays with drawn runtimes and arrivals; the prediction is their median."""

    def test_with_nothing_to_draw_the_samples_are_the_median_play(self):
        engine = engine_of(cluster_with_queues(2))  # every runtime annotated: nothing drawn
        median = estimate(engine, NOW, settings=EtaSettings(levels=("median",)))
        sampled = estimate(engine, NOW, settings=EtaSettings(range=SAMPLES, samples=3))
        assert list(sampled.plays) == ["sample-1", "sample-2", "sample-3"]
        for key, p in sampled.predictions.items():
            want = median.predictions[key]
            assert (p.start, p.earliest, p.latest, p.placement, p.reason) == \
                (want.start, want.start, want.start, want.placement, want.reason), key

    @pytest.mark.parametrize("seed", range(3))
    def test_the_median_of_the_plays_with_the_placement_of_the_median_one(self, seed):
        import scheduler.eta as eta

        engine = engine_of(cluster_with_queues(seed))
        played: list[dict] = []
        real_play = eta._play

        def keep(*args):
            out = real_play(*args)
            played.append(out[0])
            return out

        eta._play, real = keep, eta._play
        try:
            est = estimate(engine, NOW, spread_runtimes, EtaSettings(range=SAMPLES, samples=5))
        finally:
            eta._play = real
        assert len(played) == 5
        spread = False
        for key, p in est.predictions.items():
            times = sorted(play[key].at if key in play else float("inf") for play in played)
            spread |= times[0] != times[-1]
            if times[2] == float("inf"):
                assert p.start is None and p.reason
                continue
            assert p.start == NOW + timedelta(seconds=times[2])
            assert p.earliest == NOW + timedelta(seconds=times[0])
            assert p.latest == (None if times[4] == float("inf") else NOW + timedelta(seconds=times[4]))
            assert p.placement in [play[key].placement for play in played if key in play and play[key].at == times[2]]
        assert spread, "the drawn runtimes make the plays differ"

    def test_the_same_state_and_time_give_the_same_answer(self):
        engine = engine_of(cluster_with_queues(1))
        settings = EtaSettings(range=SAMPLES, samples=3)
        first = estimate(engine, NOW, spread_runtimes, settings)
        assert estimate(engine, NOW, spread_runtimes, settings).predictions == first.predictions
        other = estimate(engine, NOW, spread_runtimes, dataclasses.replace(settings, seed=12345))
        assert other.predictions != first.predictions

    @pytest.mark.parametrize("seed", range(3))
    def test_first_pass_decides_as_the_live_pass(self, seed):
        engine = engine_of(cluster_with_queues(seed))
        est = estimate(engine, NOW, spread_runtimes, EtaSettings(range=SAMPLES, samples=3))
        live = {k for k, r in engine.run_pass(NOW).decided.items() if r.status == ADMITTED}
        assert live and {k for k, p in est.predictions.items() if p.start == NOW} == live

    def test_a_play_out_of_budget_is_left_out(self, monkeypatch):
        """What a play cut short did not reach is not known to come late: the whole plays decide."""
        import scheduler.eta as eta

        engine = engine_of(cluster_with_queues(3))
        played: dict[str, dict] = {}
        real_play = eta._play

        def third_runs_out(engine, run, spec, stats, *args):
            out = real_play(engine, run, spec, stats, *args)
            played[spec.name] = out[0]
            if spec.name == "sample-3":
                stats.stopped = OUT_OF_BUDGET
            return out

        monkeypatch.setattr(eta, "_play", third_runs_out)
        cut = estimate(engine, NOW, spread_runtimes, EtaSettings(range=SAMPLES, samples=3))
        assert cut.plays["sample-3"].stopped == OUT_OF_BUDGET
        inf = float("inf")
        for key, p in cut.predictions.items():
            # of two plays, the lower of their times; the range, both
            low, high = sorted(played[name][key].at if key in played[name] else inf
                               for name in ("sample-1", "sample-2"))
            assert p.start == (None if low == inf else NOW + timedelta(seconds=low))
            assert p.latest == (None if high == inf else NOW + timedelta(seconds=high))

    def test_expected_arrivals_are_drawn_anew_for_every_play(self):
        objects = [*two_racks(), *[waiting(f"w{i}", count=2, cpu="8", required=RACK, created=i, runtime="30m")
                                   for i in range(3)]]
        recent = parse([waiting(f"r{i}", count=1, cpu="8", created=-300 * i - 60, runtime="20m")
                        for i in range(6)]).workloads
        arrivals = RecentArrivals.of(recent, NOW, timedelta(hours=1))
        assert len(arrivals) == 6
        runner = eta_runner(engine_of(objects), EtaSettings(range=SAMPLES, samples=2), arrivals)
        draws = [runner.arrivals_for(eta_spec(f"s{i}", random.Random(i))) for i in range(2)]
        assert draws[0] != draws[1]
        assert all(wl in recent for draw in draws for _, wl in draw)
        # a play per runtime level plays the window again as it came
        assert runner.arrivals_for(eta_spec("median")) == arrivals.replayed(timedelta(hours=24))
        est = estimate(engine_of(objects), NOW, settings=EtaSettings(range=SAMPLES, samples=3), arrivals=arrivals)
        assert all(p.start is not None for p in est.predictions.values())

    @pytest.mark.parametrize("seed", range(3))
    def test_a_class_known_from_few_runs_spreads_the_plays(self, seed):
        """Sixteen running workloads of one class free the cluster when the last one ends. Five
        past runs, 600 s to 1800 s, leave the class's runtimes open: each play draws from its
        own resample of them, and the range shows it. 201 runs spread evenly over the same
        span (the same quantiles, known far better) leave the plays close together."""
        hosts = [f"b1-r{rack}-n{node}" for rack in (1, 2) for node in (1, 2)]
        objects = [*two_racks(), *[running(f"r{i}", [(hosts[i % 4], 1)], started=-60, cpu="2") for i in range(16)],
                   waiting("w", count=4, cpu="8")]
        spread = {}
        for runs in (5, 201):
            engine = engine_of(objects)
            history = RuntimeHistory(min_samples=3)
            for i in range(runs):
                history.add_workload(engine.state.workload("default/r1"), 600 + 1200 * i / (runs - 1))
            settings = EtaSettings(range=SAMPLES, samples=11, seed=seed)
            p = estimate(engine, NOW, history, settings).predictions["default/w"]
            spread[runs] = (p.latest - p.earliest).total_seconds()
            assert p.start <= NOW + timedelta(seconds=1740)
        assert spread[201] * 2 < spread[5]

    def test_a_play_keeps_its_resample_of_a_class_from_one_estimate_to_the_next(self):
        import scheduler.eta as eta

        est = RuntimeEstimate(140, 400, 1120, HISTORY, "Job in default/lq (5 runs)",
                              samples=(100.0, 200.0, 400.0, 800.0, 1600.0))
        engine = engine_of(two_racks())

        def play(name: str):
            return eta._Play(engine, NOW, {}, eta_spec(name, random.Random(0)), EtaSettings(range=SAMPLES), None)

        first = play("sample-1")
        assert first.runs_of(est) is first.runs_of(est)
        assert play("sample-1").runs_of(est) == first.runs_of(est)
        assert len({play(f"sample-{i}").runs_of(est) for i in range(11)}) > 5

    def test_a_poisson_stream_at_the_windows_rate(self):
        recent = parse([waiting(f"r{i}", created=-60 * (i + 1)) for i in range(30)]).workloads  # 30 an hour
        arrivals = RecentArrivals.of(recent, NOW, timedelta(hours=1))
        drawn = arrivals.sampled(random.Random(7), timedelta(hours=100))
        assert 2700 < len(drawn) < 3300
        assert [at for at, _ in drawn] == sorted(at for at, _ in drawn)
        assert RecentArrivals.of([], NOW, timedelta(hours=1)).sampled(random.Random(1), timedelta(hours=1)) == []


@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
class TestForkedSampledPlays:
    @pytest.mark.parametrize("processes", [1, 2, 3])
    def test_same_predictions_as_in_one_process(self, processes):
        engine = engine_of(cluster_with_queues(0))
        settings = EtaSettings(range=SAMPLES, samples=5, processes=processes)
        alone = estimate(engine, NOW, spread_runtimes, settings)
        before = state_fingerprint(engine)
        forked = estimate(engine, NOW, spread_runtimes, settings, fork_plays=True)
        assert state_fingerprint(engine) == before
        assert forked.predictions == alone.predictions
        assert {n: p.passes for n, p in forked.plays.items()} == {n: p.passes for n, p in alone.plays.items()}
        assert forked.clone_seconds == 0.0

    def test_a_failed_play_is_left_out(self, monkeypatch):
        engine = engine_of(cluster_with_queues(1))
        play_breaks(monkeypatch, "sample-2")
        forked = estimate(engine, NOW, spread_runtimes, EtaSettings(range=SAMPLES, samples=3), fork_plays=True)
        assert forked.plays["sample-2"].stopped == PLAY_FAILED
        assert {n for n, p in forked.plays.items() if p.stopped != PLAY_FAILED} == {"sample-1", "sample-3"}
        assert any(p.start is not None for p in forked.predictions.values())


def eta_runner(engine: Engine, settings: EtaSettings, arrivals):
    import scheduler.eta as eta

    return eta._Runner(engine, NOW, [], {}, {}, settings, None, RuntimeHistory().estimate, arrivals)


def eta_spec(name: str, rng: random.Random | None = None):
    import scheduler.eta as eta

    return eta._PlaySpec(name, rng)


@pytest.mark.parametrize(("seconds", "processes", "want"), [
    (None, 2, ("chain", 7)),  # not known yet: the cheapest
    (0.04, 2, ("samples", 7)),
    (0.3, 2, ("samples", 5)),  # 3 rounds of 2
    (0.4, 2, ("plays", 7)),  # 2 rounds of 2 hold 3 samples, too few; the three plays take 1.5 rounds
    (0.9, 2, ("chain", 7)),
    (0.1, 1, ("samples", 7)),
    (0.25, 1, ("plays", 7)),  # one at a time: 4 plays fit, too few samples; the three plays do
])
def test_the_plan_is_the_richest_estimate_that_fits(seconds, processes, want):
    assert planned_range(seconds, 1.0, processes, 7) == want


class TestRunsStillGoing:
    """The runs still going count as lower bounds of their class's runtime (Kaplan-Meier)."""

    def test_the_product_limit(self):
        # 20 of 80 runs end at 10 s (S = 3/4); 40 are still going at 20 s; the other 20 end at
        # 30 s, and with them the 3/4 left: one value per ended run, 10 of them at 10 s
        values = with_censored([10] * 20 + [30] * 20, [20] * 40)
        assert len(values) == 40 and values.count(10) == 10 and values.count(30) == 30
        # without the runs going, half would be at 10 s
        assert with_censored([10] * 20 + [30] * 20, []).count(10) == 20

    def test_bounds_below_every_end_change_nothing(self):
        assert with_censored([600, 900, 1200], [60, 120]) == (600, 900, 1200)
        assert with_censored([600, 900, 1200], []) == (600, 900, 1200)

    def test_runs_going_longer_than_every_end_stand_for_themselves(self):
        assert with_censored([40, 50, 60], [10, 100, 130, 170]) == (40, 50, 60, 100, 130, 170)

    def test_a_class_whose_long_runs_have_not_ended_learns_longer_runtimes(self):
        history = RuntimeHistory(min_samples=3)
        cls = RuntimeClass("Job", "default/lq", "1")
        for seconds in (600, 700, 800):  # the short runs ended first
            history.add(cls, seconds)
        view = history.with_running([(cls, 3600)] * 5 + [(cls, 60)])
        assert history.learned(cls).median == 700  # the history itself is left as it was
        learned = view.learned(cls)
        # the three ended runs, then the five still going past them, each taken to end now
        assert learned.samples == (600, 700, 800, 3600, 3600, 3600, 3600, 3600)
        assert learned.median == 3600 and "(3 runs, 6 running)" in learned.detail
        assert view.learned(RuntimeClass("Job", "default/other", "1")).median == 3600  # coarser classes too

    def test_the_estimate_counts_what_runs_now(self):
        history = RuntimeHistory(min_samples=3)
        objects = [*two_racks(),
                   running("r1", [("b1-r1-n1", 1), ("b1-r1-n2", 1)], started=-5000, cpu="8"),
                   running("r2", [("b1-r2-n1", 1), ("b1-r2-n2", 1)], started=-5000, cpu="8"),
                   waiting("w", count=2, cpu="8", required=RACK)]
        engine = engine_of(objects)
        for seconds in (600, 900, 1200):
            history.add_workload(engine.state.workload("default/r1"), seconds)
        p = estimate(engine, NOW, history).predictions["default/w"]
        assert "2 running" in p.runtime.detail
        # the two runs going, each a lower bound past every ended run: without them the median is 900
        assert p.runtime.samples == (600, 900, 1200, 5000, 5000) and p.runtime.median == 1200


def test_runs_still_going_make_a_class_of_its_own_once_one_has_ended():
    """Two finished runs are too few for the class; with three going, it has its five."""
    history = RuntimeHistory(min_samples=5)
    large = RuntimeClass("Job", "default/lq", "16-31")
    small = RuntimeClass("Job", "default/lq", "1")
    for seconds in (5400, 6000):
        history.add(large, seconds)
    for seconds in (600, 700, 800, 900, 1000):
        history.add(small, seconds)
    assert "of 16-31 pods" not in history.learned(large).detail  # a coarser class: mostly the small runs
    view = history.with_running([(large, 3000), (large, 4000), (large, 7000)])
    learned = view.learned(large)
    assert "of 16-31 pods (2 runs, 3 running)" in learned.detail
    assert learned.median >= 5400
    # runs going but none ended: nothing of the class's own is known yet
    alone = RuntimeClass("Job", "default/other", "64-127")
    assert "64-127" not in history.with_running([(alone, 9000)] * 5).learned(alone).detail


@pytest.mark.skipif(not can_fork(), reason="the OS cannot fork")
def test_plays_forked_says_when_an_estimate_forks_its_plays():
    from scheduler.eta import CHAIN, MEDIAN, PLAYS

    assert plays_forked(EtaSettings(range=SAMPLES), True)
    assert plays_forked(EtaSettings(range=PLAYS), True)  # the low and high plays beside the median
    assert not plays_forked(EtaSettings(range=PLAYS, levels=(MEDIAN,)), True)  # one level: played here
    assert not plays_forked(EtaSettings(range=CHAIN), True)  # the median play, the rest along its chain
    assert not plays_forked(EtaSettings(range=SAMPLES), False)
