"""How good are the start-time estimates (scheduler.eta)? Predictions checked against what happens.

    .venv/bin/python benchmarks/eta_accuracy.py [--mode exact|learned|both] [--hours H] [--load L]
                                                [--seed N | --seeds N,N,...] [--every MINUTES]
                                                [--json FILE]
    .venv/bin/python benchmarks/eta_accuracy.py --timing [--nodes N] [--pending N]

Accuracy: the engine is driven directly in simulated time (no Django), as
`kueue_perf_tas.py` drives it: a cluster of `--blocks` x `--racks` x `--nodes-per-rack` nodes of
8 CPUs, one ClusterQueue holding all of it, LocalQueues `team-a` and `team-b`. Jobs (owned by a
`Job`) arrive at random (Poisson, at a rate that asks for `--load` of the cluster), of three
size classes, each with its runtime drawn from a log-normal distribution:

| class | pods x CPU | topology | runtime median, sigma |
|---|---|---|---|
| small | 1 x 4 | unconstrained | 20 min, 0.5 |
| medium | 4 x 8 | required rack | 45 min, 0.5 |
| large | 16 x 8 | required block | 90 min, 0.4 |

At every event (an arrival, a finish) a pass runs at that time; admitted jobs finish after
their runtime. Predictions: right after each arrival's pass, for every waiting workload (so
each workload is predicted at its queueing time and again at every later arrival), and every
`--every` minutes. Each prediction is kept with the time it was made; once the workload is
admitted, its error is |predicted start - actual start| / (actual start - time of the
prediction), for waits of at least a minute. Printed: median and p90 of that error per size
class and per lead time (how long before its start the prediction was made), for the
estimator and for a naive baseline (position in the queue / admissions per second over the
last hour), how often the actual start fell within [earliest, latest], and how often after
it (the range too early) or before it (too late); the predictions at queueing again, by the
hour of the day they were made in (a class's runtimes are learned from fewer runs early on).

Modes: `exact`, every job carries `kueue.x-k8s.io/expected-runtime` = its true runtime (the
target: median <= 10 % and p90 <= 25 % for predictions made at queueing time); `learned`, no
annotation, runtimes learned from finished jobs (`RuntimeHistory`, per owner kind,
LocalQueue and size class; target: error at least 2x smaller than the baseline's).
Ranges: each prediction's range is calibrated (`scheduler.calibration`, as the service does)
on the outcomes of the latest `--calibration-outcomes` earlier predictions whose workloads
were admitted since, to hold the actual start `--coverage` (0.8) of the time, each in the
band of expected waits its own is in (up to `--calibration-bands`, 3; 1: one band for all);
`--coverage 0` scores the plays' own ranges. Predictions made in the first `--warmup` hours
are not scored. `--arrivals recent` (the default) passes the estimator the last `--window`
hour's submissions as the arrivals to expect (`scheduler.eta.expected_arrivals`);
`--arrivals none` plays no arrivals, as Slurm.

Timing (`--timing`): `--nodes` nodes (default 10,000) in racks of 40 and blocks of 1,000, as
many running jobs as fill them, `--pending` (default 1,000) waiting, of varied sizes; the time
of one estimate (clone and plays), of the median play alone, of a plain deepcopy, and of the
estimate as the service runs it: in a process forked from the one holding the engine, its
low and high plays in processes of their own (`fork_plays`), from the fork until the
predictions are back.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import math
import os
import pickle
import random
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scheduler.calibration import DEFAULT_BANDS, DEFAULT_COVERAGE, Outcome, calibrated_range, calibration_of  # noqa: E402
from scheduler.clone import clone_engine  # noqa: E402
from scheduler.cluster import holds_quota  # noqa: E402
from scheduler.codec import decode_assignment  # noqa: E402
from scheduler.engine import Engine  # noqa: E402
from scheduler.eta import (  # noqa: E402
    MEDIAN,
    RANGES,
    SAMPLES,
    EtaSettings,
    RecentArrivals,
    can_fork,
    estimate,
    planned_range,
    play_seconds,
)
from scheduler.features import FeatureGates  # noqa: E402
from scheduler.model import Condition, Workload  # noqa: E402
from scheduler.parse import EXPECTED_RUNTIME, parse_objects  # noqa: E402
from scheduler.results import ADMITTED, QUOTA_RESERVED  # noqa: E402
from scheduler.runtimes import RuntimeHistory  # noqa: E402

EPOCH = datetime(2025, 6, 1, tzinfo=UTC)
V1B2 = "kueue.x-k8s.io/v1beta2"
BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
CPU_PER_NODE = 8
QUEUES = ("team-a", "team-b")
LEAD_BUCKETS = ((0, 600, "< 10 min"), (600, 1800, "10-30 min"), (1800, 3600, "30-60 min"),
                (3600, 7200, "1-2 h"), (7200, math.inf, ">= 2 h"))
MIN_WAIT = 60.0
DAY_BUCKETS = ((0, 8 * 3600, "hours 0-8"), (8 * 3600, 16 * 3600, "hours 8-16"), (16 * 3600, math.inf, "hours 16-"))
AUTO_TARGET_SECONDS = 1.0  # the service's TAS_ETA_TARGET_SECONDS


@dataclass(frozen=True)
class SizeClass:
    name: str
    pods: int
    cpu: int
    topology: dict[str, Any]
    median_s: float
    sigma: float
    share: float

    def runtime(self, rng: random.Random) -> float:
        return round(self.median_s * math.exp(rng.gauss(0, self.sigma)))

    @property
    def mean_cpu_s(self) -> float:
        return self.pods * self.cpu * self.median_s * math.exp(self.sigma ** 2 / 2)


CLASSES = (
    SizeClass("small", 1, 4, {"unconstrained": True}, 20 * 60, 0.5, 0.5),
    SizeClass("medium", 4, 8, {"required": RACK}, 45 * 60, 0.5, 0.35),
    SizeClass("large", 16, 8, {"required": BLOCK}, 90 * 60, 0.4, 0.15),
)


# ---------------------------------------------------------------- objects


def node_objects(blocks: int, racks: int, per_rack: int) -> list[dict]:
    out = []
    for b in range(blocks):
        for r in range(racks):
            for n in range(per_rack):
                name = f"b{b}-r{r}-n{n}"
                alloc = {"cpu": str(CPU_PER_NODE), "memory": "64Gi", "pods": "110"}
                out.append({"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "labels": {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name}},
                            "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


def definitions(cpu: int) -> list[dict]:
    out = [
        {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "default"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
        {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
         "spec": {"topologyName": "default"}},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "tas", "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}]}},
    ]
    out += [{"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": q, "namespace": "ml"},
             "spec": {"clusterQueue": "cq"}} for q in QUEUES]
    return out


def workload_object(name: str, cls: SizeClass, queue: str, created: datetime, runtime: float | None) -> dict:
    annotations = {EXPECTED_RUNTIME: f"{runtime:g}s"} if runtime is not None else {}
    return {
        "apiVersion": V1B2, "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "uid": name, "annotations": annotations,
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": name,
                                          "controller": True}]},
        "spec": {"queueName": queue, "podSets": [{
            "name": "main", "count": cls.pods, "topologyRequest": cls.topology,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cls.cpu)}}}]}},
        }]},
    }


def parse(objs: list[dict]):
    return parse_objects([("bench", o) for o in objs], decode_assignment=decode_assignment, warn=lambda _m: None)


def finished(wl: Workload, at: datetime) -> Workload:
    return dataclasses.replace(wl, conditions=[*wl.conditions, Condition("Finished", "True", "Succeeded", "", at)])


# ---------------------------------------------------------------- the run


@dataclass
class Job:
    name: str
    cls: SizeClass
    queue: str
    arrival: float
    runtime: float
    admitted: float | None = None


@dataclass
class Made:
    """One prediction: when it was made, the predicted start, range, and the baseline's."""

    job: str
    at: float
    start: float | None
    earliest: float | None
    latest: float | None
    baseline: float | None
    source: str
    plays: tuple[float, float] | None = None  # the plays' own range, before calibration


@dataclass
class Run:
    mode: str
    jobs: dict[str, Job] = field(default_factory=dict)
    made: list[Made] = field(default_factory=list)
    estimates: int = 0
    estimate_s: float = 0.0
    # the predictions of the workloads still waiting, and what those admitted turned out to be
    open: dict[str, list[Made]] = field(default_factory=lambda: defaultdict(list))
    outcomes: list[Outcome] = field(default_factory=list)

    def admitted(self, job: Job, at: float) -> None:
        job.admitted = at
        for m in self.open.pop(job.name, []):
            if m.start is not None and m.plays is not None:
                self.outcomes.append(Outcome(stamp(m.at), stamp(m.start), stamp(m.plays[0]), stamp(m.plays[1]),
                                             stamp(at)))


def stamp(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def arrivals(rng: random.Random, hours: float, capacity_cpu: int, load: float) -> list[Job]:
    mean_work = sum(c.share * c.mean_cpu_s for c in CLASSES)
    rate = load * capacity_cpu / mean_work  # arrivals per second
    out, t, i = [], 0.0, 0
    while True:
        t += rng.expovariate(rate)
        if t > hours * 3600:
            return out
        cls = rng.choices(CLASSES, weights=[c.share for c in CLASSES])[0]
        out.append(Job(f"job-{i:05d}", cls, rng.choice(QUEUES), round(t), cls.runtime(rng)))
        i += 1


def simulate(args: argparse.Namespace, mode: str) -> Run:
    rng = random.Random(args.seed)
    capacity = args.blocks * args.racks * args.nodes_per_rack * CPU_PER_NODE
    jobs = arrivals(rng, args.hours, capacity, args.load)
    engine = Engine.from_parsed(parse([*definitions(capacity), *node_objects(args.blocks, args.racks,
                                                                               args.nodes_per_rack)]),
                                FeatureGates())
    history = RuntimeHistory() if mode == "learned" else None
    run = Run(mode, {j.name: j for j in jobs})
    finishes: list[tuple[float, str]] = []
    admissions: list[float] = []
    submitted: list[Workload] = []
    settings = EtaSettings(levels=("low", "median", "high"), range=args.range, samples=args.samples)
    next_arrival, next_tick = 0, 0.0
    every = args.every * 60
    while next_arrival < len(jobs) or finishes:
        due = [t for t in (jobs[next_arrival].arrival if next_arrival < len(jobs) else None,
                           min(finishes)[0] if finishes else None) if t is not None]
        now_s = min(due)
        arrived = False
        while next_arrival < len(jobs) and jobs[next_arrival].arrival <= now_s:
            j = jobs[next_arrival]
            obj = workload_object(j.name, j.cls, j.queue, EPOCH + timedelta(seconds=j.arrival),
                                  j.runtime if mode == "exact" else None)
            wl = parse([obj]).workloads[0]
            engine.upsert(wl)
            submitted.append(wl)
            next_arrival += 1
            arrived = True
        finishes.sort()
        while finishes and finishes[0][0] <= now_s:
            _, name = finishes.pop(0)
            wl = engine.state.workload(f"ml/{name}")
            assert wl is not None and holds_quota(wl)
            engine.upsert(finished(wl, EPOCH + timedelta(seconds=now_s)))
            if history is not None:
                history.add_workload(wl, run.jobs[name].runtime)
        outcome = engine.run_pass(EPOCH + timedelta(seconds=now_s), bulk_results=False)
        for key, result in outcome.decided.items():
            if result.status in (ADMITTED, QUOTA_RESERVED):
                job = run.jobs[key.split("/", 1)[1]]
                run.admitted(job, now_s)
                admissions.append(now_s)
                finishes.append((now_s + job.runtime, job.name))
        if arrived or now_s >= next_tick:
            if now_s >= args.warmup * 3600:
                recent = submitted[-200:] if args.arrivals == "recent" else []
                predict(run, engine, now_s, history, settings, admissions, recent, args)
            while next_tick <= now_s:
                next_tick += every
    return run


def predict(run: Run, engine: Engine, now_s: float, history: RuntimeHistory | None, settings: EtaSettings,
            admissions: list[float], recent: list[Workload], args: argparse.Namespace) -> None:
    started = time.perf_counter()
    now = EPOCH + timedelta(seconds=now_s)
    future = RecentArrivals.of(recent, now, timedelta(hours=args.window))
    est = estimate(engine, now, history, settings, future)
    calibration = calibration_of(run.outcomes[-args.calibration_outcomes:], coverage=args.coverage,
                                 bands=args.calibration_bands) if args.coverage else None
    run.estimate_s += time.perf_counter() - started
    run.estimates += 1
    recent = [t for t in admissions if t > now_s - 3600]
    rate = len(recent) / 3600 if recent else (len(admissions) / now_s if admissions and now_s else 0.0)
    waiting = sorted((run.jobs[k.split("/", 1)[1]] for k in est.predictions), key=lambda j: (j.arrival, j.name))

    def secs(at: datetime | None) -> float | None:
        return None if at is None else (at - EPOCH).total_seconds()

    for position, job in enumerate(waiting, start=1):
        p = est.predictions[f"ml/{job.name}"]
        baseline = now_s + position / rate if rate else None
        earliest, latest = calibrated_range(calibration, now, p.start, p.earliest, p.latest) or (p.earliest, p.latest)
        plays = (secs(p.earliest), secs(p.latest)) if p.earliest is not None and p.latest is not None else None
        made = Made(job.name, now_s, secs(p.start), secs(earliest), secs(latest), baseline, p.runtime.source, plays)
        run.made.append(made)
        run.open[job.name].append(made)


# ---------------------------------------------------------------- scoring


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Errors:
    eta: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    inside: int = 0
    after: int = 0  # the actual start after `latest`: the range was too early
    before: int = 0  # the actual start before `earliest`: the range was too late
    unpredicted: int = 0
    widths: list[float] = field(default_factory=list)  # (latest - earliest) / actual wait

    def add(self, m: Made, actual: float) -> None:
        wait = actual - m.at
        if m.start is None:
            self.unpredicted += 1
            self.eta.append(math.inf)
        else:
            self.eta.append(abs(m.start - actual) / wait)
            if m.earliest is not None and actual < m.earliest - 1:
                self.before += 1
            elif m.latest is not None and actual > m.latest + 1:
                self.after += 1
            elif m.earliest is not None and m.latest is not None:
                self.inside += 1
            if m.earliest is not None and m.latest is not None:
                self.widths.append((m.latest - m.earliest) / wait)
        self.base.append(abs(m.baseline - actual) / wait if m.baseline is not None else math.inf)

    def row(self, label: str) -> dict[str, Any]:
        n = len(self.eta)
        return {"group": label, "n": n,
                "median": quantile(self.eta, 0.5), "p90": quantile(self.eta, 0.9),
                "baseline_median": quantile(self.base, 0.5), "baseline_p90": quantile(self.base, 0.9),
                "in_range": self.inside / n, "range_too_early": self.after / n, "range_too_late": self.before / n,
                "range_width": quantile(self.widths, 0.5) if self.widths else math.inf,
                "unpredicted": self.unpredicted}


def bucket(buckets: tuple[tuple[float, float, str], ...], value: float) -> str:
    """The label of the bucket [low, high) holding `value`."""
    return next(label for low, high, label in buckets if low <= value < high)


def score(run: Run) -> dict[str, list[dict[str, Any]]]:
    at_queueing: dict[str, Errors] = defaultdict(Errors)
    by_lead: dict[str, Errors] = defaultdict(Errors)
    by_hour: dict[str, Errors] = defaultdict(Errors)
    first: dict[str, Made] = {}
    for m in run.made:
        first.setdefault(m.job, m)
    for m in run.made:
        job = run.jobs[m.job]
        if job.admitted is None or job.admitted - m.at < MIN_WAIT:
            continue
        lead = job.admitted - m.at
        label = bucket(LEAD_BUCKETS, lead)
        by_lead[label].add(m, job.admitted)
        by_lead["all"].add(m, job.admitted)
        if first[m.job] is m and m.at == job.arrival:
            at_queueing[job.cls.name].add(m, job.admitted)
            at_queueing["all"].add(m, job.admitted)
            by_hour[bucket(DAY_BUCKETS, m.at)].add(m, job.admitted)
    order = [c.name for c in CLASSES] + ["all"]
    leads = [lbl for _, _, lbl in LEAD_BUCKETS] + ["all"]
    return {"at_queueing_by_class": [at_queueing[c].row(c) for c in order if at_queueing[c].eta],
            "by_lead_time": [by_lead[lbl].row(lbl) for lbl in leads if by_lead[lbl].eta],
            "at_queueing_by_hour": [by_hour[lbl].row(lbl) for _, _, lbl in DAY_BUCKETS if by_hour[lbl].eta]}


def table(title: str, rows: list[dict[str, Any]]) -> str:
    def pct(x: float) -> str:
        return "   -  " if math.isinf(x) else f"{x * 100:5.1f}%"

    lines = [title, f"  {'group':<10} {'n':>5}  {'median':>7} {'p90':>7}   {'baseline median':>15} {'p90':>7}"
                    f"   {'in range':>8} {'too early':>9} {'too late':>8} {'width':>7}"]
    for r in rows:
        lines.append(f"  {r['group']:<10} {r['n']:>5}  {pct(r['median']):>7} {pct(r['p90']):>7}   "
                     f"{pct(r['baseline_median']):>15} {pct(r['baseline_p90']):>7}   {pct(r['in_range']):>8} "
                     f"{pct(r['range_too_early']):>9} {pct(r['range_too_late']):>8} {pct(r['range_width']):>7}")
    return "\n".join(lines)


def pooled(runs: dict[int, Run]) -> Run:
    """The runs of several seeds as one: their jobs and predictions, told apart by seed."""
    out = Run(next(iter(runs.values())).mode)
    for seed, run in runs.items():
        for name, job in run.jobs.items():
            out.jobs[f"{seed}:{name}"] = job
        out.made += [dataclasses.replace(m, job=f"{seed}:{m.job}") for m in run.made]
        out.estimates += run.estimates
        out.estimate_s += run.estimate_s
    return out


def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    modes = ("exact", "learned") if args.mode == "both" else (args.mode,)
    seeds = args.seeds or [args.seed]
    for mode in modes:
        started = time.perf_counter()
        run = pooled({seed: simulate(argparse.Namespace(**{**vars(args), "seed": seed}), mode) for seed in seeds})
        scored = score(run)
        waits = [j.admitted - j.arrival for j in run.jobs.values() if j.admitted is not None]
        out[mode] = {**scored, "seeds": seeds, "coverage": args.coverage,
                     "calibration_bands": args.calibration_bands, "jobs": len(run.jobs),
                     "predictions": len(run.made),
                     "estimates": run.estimates, "estimate_ms_mean": run.estimate_s / max(run.estimates, 1) * 1000,
                     "mean_wait_s": statistics.fmean(waits) if waits else 0.0,
                     "wall_s": time.perf_counter() - started}
        days = f"{len(seeds)} x {args.hours:g} h (seeds {', '.join(map(str, seeds))})" if len(seeds) > 1 \
            else f"{args.hours:g} h"
        print(f"\n== {mode}: {len(run.jobs)} jobs over {days} at load {args.load:g}, "
              f"mean wait {out[mode]['mean_wait_s'] / 60:.1f} min; {run.estimates} estimates "
              f"({out[mode]['estimate_ms_mean']:.0f} ms each), {len(run.made)} predictions")
        plays = f"{args.samples} sampled plays" if args.range == SAMPLES else f"range {args.range}"
        arrived = f"arrivals from the last {args.window:g} h" if args.arrivals == "recent" else "no arrivals played"
        calibrated = (f"ranges calibrated to {args.coverage:.0%} on the last {args.calibration_outcomes} outcomes "
                      f"in up to {args.calibration_bands} band(s) of expected waits"
                      if args.coverage else "the plays' own ranges")
        print(f"   estimator: {plays}, {arrived}, {calibrated}")
        print(table("error at queueing time, per size class (|predicted - actual| / actual wait)",
                    scored["at_queueing_by_class"]))
        print(table("error of every prediction, per lead time", scored["by_lead_time"]))
        print(table("error at queueing time, per hour of the day it was made", scored["at_queueing_by_hour"]))
        allq = next((r for r in scored["at_queueing_by_class"] if r["group"] == "all"), None)
        if allq is not None:
            if mode == "exact":
                ok = allq["median"] <= 0.10 and allq["p90"] <= 0.25
                print(f"target (median <= 10 %, p90 <= 25 % at queueing): {'met' if ok else 'NOT met'}")
            else:
                ratio = allq["baseline_median"] / allq["median"] if allq["median"] else math.inf
                print(f"target (2x better than the baseline): median {ratio:.1f}x better, "
                      f"{'met' if ratio >= 2 else 'NOT met'}")
    return out


# ---------------------------------------------------------------- timing


def timing(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    per_rack, racks_per_block = 40, 25
    blocks = max(1, args.nodes // (per_rack * racks_per_block))
    nodes = node_objects(blocks, racks_per_block, per_rack)
    capacity = len(nodes) * CPU_PER_NODE
    objs: list[dict] = [*definitions(capacity), *nodes]
    engine = Engine.from_parsed(parse(objs), FeatureGates())
    now = EPOCH + timedelta(hours=1)
    n = 0
    while engine.queues.pending_count() < args.pending:  # fill the cluster, then leave `pending` waiting
        for _ in range(50):
            cls = rng.choices(CLASSES, weights=[c.share for c in CLASSES])[0]
            j = Job(f"job-{n:05d}", cls, rng.choice(QUEUES), n, cls.runtime(rng))
            engine.upsert(parse([workload_object(j.name, j.cls, j.queue, EPOCH + timedelta(seconds=j.arrival),
                                                 j.runtime)]).workloads[0])
            n += 1
        engine.run_pass(now, bulk_results=False)
    engine.run_pass(now, bulk_results=False)
    running = sum(1 for _ in engine.state.holders())
    pending = engine.queues.pending_count()
    figures: dict[str, Any] = {"nodes": len(nodes), "running": running, "pending": pending}
    started = time.perf_counter()
    clone_engine(engine)
    figures["clone_s"] = time.perf_counter() - started
    started = time.perf_counter()
    try:
        copy.deepcopy(engine)
        figures["deepcopy_s"] = time.perf_counter() - started
    except TypeError as exc:
        figures["deepcopy_s"] = None
        figures["deepcopy_error"] = str(exc)
    median = estimate(engine, now, None, EtaSettings(levels=(MEDIAN,)))
    figures["median_play_s"] = median.seconds
    figures["median_passes"] = median.plays[MEDIAN].passes
    full = estimate(engine, now, None, EtaSettings())
    figures["estimate_s"] = full.seconds
    figures["predicted"] = sum(p.start is not None for p in full.predictions.values())
    chained = estimate(engine, now, None, EtaSettings(range="chain"))
    figures["chain_s"] = chained.seconds
    if can_fork():
        figures.update(forked_estimate(engine, now, "plays"))
        figures.update(forked_estimate(engine, now, "chain"))
        figures.update(forked_estimate(engine, now, SAMPLES, args.samples))
        figures["auto_plan"] = planned_range(figures["forked_play_s_chain"], AUTO_TARGET_SECONDS,
                                             os.cpu_count() or 1, args.samples)
    print(f"{figures['nodes']} nodes, {running} running, {pending} waiting")
    plain = figures["deepcopy_s"]
    plain_text = f"{plain:.3f} s" if plain is not None else f"fails: {figures['deepcopy_error']}"
    print(f"  clone of the engine                 {figures['clone_s']:.3f} s (plain deepcopy: {plain_text})")
    print(f"  median play alone (clone included)  {figures['median_play_s']:.3f} s, "
          f"{figures['median_passes']} passes   (target 1 s)")
    print(f"  estimate: low, median, high plays   {figures['estimate_s']:.3f} s, "
          f"{figures['predicted']} of {pending} predicted within 24 h")
    print(f"  estimate: median play, range along its chain   {figures['chain_s']:.3f} s (clone included)")
    if "forked_s" in figures:
        print(f"  as the service runs it: forked      {figures['forked_s']:.3f} s from the fork to the predictions "
              f"(the plays in parallel, no copy; target 1 s), {figures['forked_predicted']} predicted; "
              f"the forking process busy {figures['fork_ms']:.1f} ms")
        print(f"  as the service runs it, range along the chain: {figures['forked_s_chain']:.3f} s from the fork "
              f"(the median play only; target 1 s), the child holding {figures['forked_private_mib_chain'] or 0:.0f} "
              "MiB of its own")
        print(f"  as the service runs it, {args.samples} sampled plays, {os.cpu_count()} at a time: "
              f"{figures['forked_s_samples']:.3f} s from the fork")
        auto, samples = figures["auto_plan"]
        print(f"  TAS_ETA_RANGE=auto would plan {f'{samples} sampled plays' if auto == SAMPLES else auto} "
              f"for a {AUTO_TARGET_SECONDS:g} s target, a play taking {figures['forked_play_s_chain']:.3f} s")
        if figures.get("forked_private_mib") is not None:
            print(f"  memory: the engine's process {figures['engine_process_mib']:.0f} MiB; the estimate's child "
                  f"{figures['forked_private_mib']:.0f} MiB of its own (copied on write)")
    return figures


def forked_estimate(engine: Engine, now: datetime, range_: str, samples: int = 11) -> dict[str, Any]:
    """The estimate as the service runs it (tasweb.scheduling.estimates): a child process forked
    from the one holding the engine plays on its copy-on-write image, its low and high plays
    in children of its own (`range_` "plays"), or the median play alone ("chain"). Timed from
    the fork to the predictions being back here; the figures' names end in "_chain" for the
    latter."""
    read_end, write_end = os.pipe()
    gc.freeze()  # as the scheduler process keeps its engine after every pass (runtime.settle_memory)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            est = estimate(engine, now, None, EtaSettings(range=range_, samples=samples), own=True, fork_plays=True)
            predicted = sum(p.start is not None for p in est.predictions.values())
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(pickle.dumps((predicted, private_mib(), play_seconds(est))))
            code = 0
        finally:
            os._exit(code)
    fork_ms = (time.perf_counter() - started) * 1000
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    os.waitpid(pid, 0)
    predicted, private, play = pickle.loads(payload) if payload else (None, None, None)
    suffix = "" if range_ == "plays" else f"_{range_}"
    return {f"forked_s{suffix}": time.perf_counter() - started, f"fork_ms{suffix}": fork_ms,
            f"forked_predicted{suffix}": predicted, f"forked_private_mib{suffix}": private,
            f"forked_play_s{suffix}": play, "engine_process_mib": private_mib()}


def private_mib() -> float | None:
    """This process's memory of its own (not shared with its parent after a fork), MiB."""
    try:
        text = Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return None
    kib = sum(int(line.split()[1]) for line in text.splitlines()
              if line.startswith(("Private_Clean:", "Private_Dirty:")))
    return kib / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("exact", "learned", "both"), default="both")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--warmup", type=float, default=2.0, help="hours of predictions not scored")
    ap.add_argument("--load", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", type=lambda text: [int(v) for v in text.split(",")], default=None,
                    help="several seeds, comma-separated: their runs pooled (one run of --hours each)")
    ap.add_argument("--every", type=float, default=15.0, help="minutes between periodic predictions")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--racks", type=int, default=4)
    ap.add_argument("--nodes-per-rack", type=int, default=8)
    ap.add_argument("--arrivals", choices=("recent", "none"), default="recent",
                    help="play the last --window hours of submissions again as the expected arrivals, or none")
    ap.add_argument("--window", type=float, default=None,
                    help="hours of submissions the arrivals are expected from (default: 2 for --range samples, "
                         "where they give a rate, 1 for the others, which play them again as they came)")
    ap.add_argument("--samples", type=int, default=11, help="plays of --range samples")
    ap.add_argument("--coverage", type=float, default=DEFAULT_COVERAGE,
                    help="calibrate each range on the outcomes of earlier predictions to hold the start this "
                         "share of the time (scheduler.calibration); 0: the plays' own range")
    ap.add_argument("--calibration-outcomes", type=int, default=500, help="the latest outcomes calibrated on")
    ap.add_argument("--calibration-bands", type=int, default=DEFAULT_BANDS,
                    help="bands of expected waits calibrated each on its own (1: one calibration for all)")
    ap.add_argument("--range", choices=RANGES, default=SAMPLES,
                    help="the prediction and its range from --samples plays of drawn runtimes and arrivals "
                         "(their median), from a play per runtime level, or from the median play and its chain")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=1_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not 0.0 <= args.coverage < 1.0:
        ap.error(f"--coverage must be at least 0 and below 1, not {args.coverage:g}")
    if args.calibration_outcomes < 1:
        ap.error(f"--calibration-outcomes must be at least 1, not {args.calibration_outcomes}")
    if args.calibration_bands < 1:
        ap.error(f"--calibration-bands must be at least 1, not {args.calibration_bands}")
    if args.window is None:
        args.window = 2.0 if args.range == SAMPLES else 1.0
    figures = timing(args) if args.timing else accuracy(args)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
