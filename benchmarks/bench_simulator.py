"""Seeding and ticking the simulated cluster at scale, on PostgreSQL.

    .venv/bin/python benchmarks/bench_simulator.py [--blocks 25] [--racks-per-block 125] [--nodes-per-rack 32]
                                                   [--workloads 300] [--ticks 10] [--no-passes]
                                                   [--database tas_bench_sim] [--keep] [--profile]

Against a fresh database (DATABASE_URL's server, default the local test server; see
benchdb.py), through the simulator's services exactly as `tas_seed` and the worker call them:

* seed:    `simulator_seed` of the whole shape into the empty mirror (nodes, a daemon pod on
           every node, inference servers, the Kueue objects) -- target <= 60 s at 100,000
           nodes; the client's peak memory is printed alongside;
* reseed:  the same shape again (nothing to do), then a shape with fewer nodes per rack
           (nodes and their pods removed, the quota resized) and back (they return);
* fill:    a first tick submits `--workloads` jobs, and ticks with scheduling passes follow
           until their pods run (the passes are timed apart: they are not the simulator's);
* ticks:   `--ticks` ticks with node failures, drains and arrivals at the rates below, each
           followed by a scheduling pass unless `--no-passes` -- target <= 2 s a tick.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import Phases, bench_database

START = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
SEED_TARGET_SECONDS = 60.0
TICK_TARGET_SECONDS = 2.0


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=25)
    ap.add_argument("--racks-per-block", type=int, default=125)
    ap.add_argument("--nodes-per-rack", type=int, default=32)
    ap.add_argument("--workloads", type=int, default=300, help="jobs submitted by the first tick")
    ap.add_argument("--fill-ticks", type=int, default=6, help="most ticks (with passes) spent filling the cluster")
    ap.add_argument("--ticks", type=int, default=10, help="ticks measured")
    ap.add_argument("--failures-per-minute", type=float, default=30.0)
    ap.add_argument("--drains-per-minute", type=float, default=15.0)
    ap.add_argument("--arrivals-per-minute", type=float, default=30.0)
    ap.add_argument("--no-passes", action="store_true", help="no scheduling pass after the measured ticks")
    ap.add_argument("--no-reseed", action="store_true", help="skip reseeding another shape")
    ap.add_argument("--database", default="tas_bench_sim")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the seed and of the ticks")
    args = ap.parse_args()

    with bench_database(args.database, keep=args.keep):
        from tasweb.cluster import models as cluster
        from tasweb.cluster.models import WorkloadStatus
        from tasweb.scheduling.services import scheduling_pass_run
        from tasweb.simulator.config import SimulatorSettings
        from tasweb.simulator.services import simulator_seed, simulator_tick

        config = SimulatorSettings().with_overrides(
            blocks=args.blocks, racks_per_block=args.racks_per_block, nodes_per_rack=args.nodes_per_rack,
            initial_workloads=args.workloads, max_waiting=args.workloads + 100, arrivals_per_minute=0,
            node_failures_per_minute=0, drains_per_minute=0)
        phases = Phases()
        clock = {"now": START}

        def advance() -> datetime:
            clock["now"] += timedelta(seconds=config.tick_seconds)
            return clock["now"]

        print(f"{config.node_count} nodes ({config.blocks} blocks x {config.racks_per_block} racks x "
              f"{config.nodes_per_rack} nodes):")
        rss_before = peak_rss_mib()
        profile = cProfile.Profile() if args.profile else None
        with phases.phase("seed into the empty mirror"):
            if profile:
                profile.enable()
            report = simulator_seed(config=config, now=START)
            if profile:
                profile.disable()
        print(f"    {report.summary()}")
        print(f"    client peak memory {peak_rss_mib():.0f} MiB (+{peak_rss_mib() - rss_before:.0f} MiB while seeding)")
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        seeded_in = phases.seconds["seed into the empty mirror"]
        with phases.phase("seed the same shape again"):
            assert not simulator_seed(config=config, now=START).changed

        if not args.no_reseed:
            smaller = config.with_overrides(nodes_per_rack=max(1, config.nodes_per_rack * 3 // 4))
            for shape in (smaller, config):
                with phases.phase(f"reseed with {shape.node_count} nodes"):
                    report = simulator_seed(config=shape, now=START)
                print(f"    {report.summary()}")

        print(f"fill: {args.workloads} jobs, ticks and scheduling passes until their pods run:")
        passes = []
        for _ in range(args.fill_ticks):
            moment = advance()
            with phases.phase(f"fill tick at +{(moment - START).seconds} s"):
                tick = simulator_tick(now=moment, config=config)
            print(f"    {tick.summary().split(': ', 1)[1][:110]}")
            started = time.perf_counter()
            record = scheduling_pass_run(now=moment)
            passes.append(time.perf_counter() - started)
            print(f"    pass: {passes[-1]:.2f} s, {record.admitted} admitted, {record.pods_ungated} ungated, "
                  f"{record.pending} pending")
            running = cluster.Pod.objects.filter(tas=True, phase="Running").count()
            if running and not cluster.Pod.objects.filter(tas=True, phase="Pending").exists():
                break
        admitted = cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED).count()
        print(f"    {admitted} workloads admitted, {cluster.Pod.objects.filter(tas=True, phase='Running').count()} "
              f"of their pods running; {cluster.Pod.objects.count()} pods in all")

        busy = config.with_overrides(node_failures_per_minute=args.failures_per_minute,
                                     drains_per_minute=args.drains_per_minute,
                                     arrivals_per_minute=args.arrivals_per_minute)
        print(f"{args.ticks} ticks ({args.failures_per_minute:g} failures, {args.drains_per_minute:g} drains, "
              f"{args.arrivals_per_minute:g} arrivals a minute){'' if args.no_passes else ', each then a pass'}:")
        durations = []
        profile = cProfile.Profile() if args.profile else None
        for _ in range(args.ticks):
            moment = advance()
            started, cpu = time.perf_counter(), time.process_time()
            if profile:
                profile.enable()
            tick = simulator_tick(now=moment, config=busy)
            if profile:
                profile.disable()
            durations.append(time.perf_counter() - started)
            print(f"  tick {tick.tick:3}: {durations[-1]:6.2f} s  (client CPU {time.process_time() - cpu:5.2f} s)  "
                  f"{tick.summary().split(': ', 1)[1][:110]}", flush=True)
            if not args.no_passes:
                started = time.perf_counter()
                scheduling_pass_run(now=moment)
                passes.append(time.perf_counter() - started)
        if profile and durations:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)

        print()
        if passes:
            print(f"scheduling passes (not the simulator's): median {statistics.median(passes):.2f} s, "
                  f"max {max(passes):.2f} s over {len(passes)}")
        print(f"seed of {config.node_count} nodes: {seeded_in:.1f} s (target <= {SEED_TARGET_SECONDS:.0f} s: "
              f"{'met' if seeded_in <= SEED_TARGET_SECONDS else 'MISSED'})")
        if durations:
            median = statistics.median(durations)
            print(f"tick on {config.node_count} nodes with {admitted} running workloads: median {median:.2f} s, "
                  f"max {max(durations):.2f} s (target <= {TICK_TARGET_SECONDS:.0f} s: "
                  f"{'met' if median <= TICK_TARGET_SECONDS else 'MISSED'})")


if __name__ == "__main__":
    main()
