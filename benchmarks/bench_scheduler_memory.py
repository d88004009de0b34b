"""The scheduler process's memory at scale with the start-time estimates running: what its
container's limit must hold (deploy/base/scheduler.yaml gives it 3 GiB).

    .venv/bin/python benchmarks/bench_scheduler_memory.py [--seeded NAME] [--database tas_bench_memory]
                                                          [--repeat 2] [--finish 100] [--json FILE]

On the cluster `bench_scheduler_state.py` seeds (50,000 nodes, 100,000 workloads, 30,000
running; `--seeded NAME` starts from its kept copy, seeding it if there is none), as the
scheduler's worker runs: a pass builds the state, a pass applies its own writes, 1,000
running workloads finish and a pass admits 1,000 others. After that pass, and `--repeat`
times more, each after a pass a minute later in which `--finish` more running workloads
finished, the start-time estimate runs as the service runs it (`estimate_after_pass`): forked
off the process that holds the engine, its plays forked again where they fit. While it runs,
a thread reads /proc every 20 ms for the process and all its descendants and sums their
proportional set sizes (Pss: a page shared by n processes counts 1/n in each, so the sum is
the memory they hold together, what a container's memory cgroup charges, page cache aside).

It prints, per estimate, the wall time from the fork to the child's exit, the peak of the
tree's summed Pss, the process's own Pss before it, the most children seen at once, and
what the estimate wrote to the database: the predictions it covered (and how many of them
the plays reached within the budget, with a start), the rows it inserted,
updated and deleted (the others were the same already), and the bytes of PostgreSQL's
write-ahead log meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler_state import NOW, PASS_STEP, BenchSettings, add_seeded_arguments, finish_workloads, seeded_database
from benchdb import python_speed_probe

SAMPLE_SECONDS = 0.02
LIMIT_MIB = 3 * 1024  # deploy/base/scheduler.yaml


def pss_mib(pid: int) -> float | None:
    """The process's proportional set size, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (OSError, ProcessLookupError):
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return None


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                out.append(child)
                todo.append(child)
    return out


class TreeSampler:
    """The peak, over its samples, of the summed Pss of a process (this one by default) and
    its descendants."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root or os.getpid()
        self.peak_mib = 0.0
        self.most_children = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            children = descendants(self.root)
            total = sum(mib for mib in map(pss_mib, [self.root, *children]) if mib is not None)
            self.peak_mib = max(self.peak_mib, total)
            self.most_children = max(self.most_children, len(children))
            self.samples += 1
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wal_position() -> str:
    """Where PostgreSQL's write-ahead log is: the bytes written between two positions are what
    the server wrote for the changes made between them (this benchmark runs alone)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return cursor.fetchone()[0]


def wal_mib_since(position: str) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [position])
        return float(cursor.fetchone()[0]) / 2**20


def one_estimate(label: str) -> dict[str, Any]:
    from tasweb.scheduling.estimates import estimate_after_pass, estimate_child_wait
    from tasweb.scheduling.models import WorkloadPrediction
    from tasweb.scheduling.selectors import prediction_run

    before = pss_mib(os.getpid()) or 0.0
    wal = wal_position()
    started = time.perf_counter()
    with TreeSampler() as sampler:
        outcome = estimate_after_pass()
        if outcome == "forked" and not estimate_child_wait(600):
            raise SystemExit("the estimate's child ran for more than 10 minutes")
    seconds = time.perf_counter() - started
    written, run = wal_mib_since(wal), prediction_run()
    rows = {"predictions": run.predictions, "inserted": run.inserted, "updated": run.updated,
            "deleted": run.deleted} if run is not None else {}
    rows["with_start"] = WorkloadPrediction.objects.filter(start__isnull=False).count()
    print(f"  {label:<34} {outcome:<8} {seconds:6.2f} s; Pss of the process {before:6.0f} MiB, of the tree at "
          f"its peak {sampler.peak_mib:6.0f} MiB (limit {LIMIT_MIB}), {sampler.most_children} children at most "
          f"({sampler.samples} samples); {rows.get('predictions', 0)} predictions, "
          f"{rows['with_start']} with a start: "
          f"{rows.get('inserted', 0)} rows inserted, {rows.get('updated', 0)} updated, "
          f"{rows.get('deleted', 0)} deleted, {written:.0f} MiB of WAL", flush=True)
    return {"label": label, "outcome": outcome, "seconds": seconds, "process_pss_mib": before,
            "tree_peak_pss_mib": sampler.peak_mib, "most_children": sampler.most_children,
            "rows": rows, "wal_mib": written}


def running_workloads(count: int) -> list[tuple[str, str]]:
    """(namespace, name) of `count` admitted workloads, by name."""
    from tasweb.cluster.models import Workload, WorkloadStatus

    found = list(Workload.objects.filter(status=WorkloadStatus.ADMITTED).order_by("name")
                 .values_list("namespace", "name")[:count])
    if len(found) < count:
        raise SystemExit(f"only {len(found)} running workloads are left to finish")
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_seeded_arguments(ap, "tas_bench_memory")
    ap.add_argument("--repeat", type=int, default=2, help="estimates after the first, each after a pass")
    ap.add_argument("--finish", type=int, default=100, help="running workloads that finish before each of those")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args()
    if args.repeat < 0 or args.finish < 0:
        raise SystemExit("need --repeat >= 0 and --finish >= 0")
    if not Path("/proc/self/smaps_rollup").exists():
        raise SystemExit("this benchmark reads /proc/PID/smaps_rollup (Linux 4.14 or later)")
    settings = BenchSettings().check()
    with seeded_database(args.database, args.seeded, settings) as info:
        from django.conf import settings as django_settings

        from tasweb.scheduling.services import scheduling_pass_run

        if not django_settings.TAS_ETA_ENABLED or not django_settings.TAS_ETA_FORK:
            raise SystemExit("TAS_ETA_ENABLED and TAS_ETA_FORK must be on: this measures the forked estimate")
        started = time.perf_counter()
        scheduling_pass_run(now=NOW)
        scheduling_pass_run(now=NOW)
        finish_workloads(info.finishing[:settings.admit], NOW + PASS_STEP)
        record = scheduling_pass_run(now=NOW + PASS_STEP)
        print(f"  the state built, {record.admitted} admitted by the last pass: {time.perf_counter() - started:.1f} s")
        probe = python_speed_probe()
        print("the start-time estimate after a pass, on 50,000 nodes and 100,000 workloads:")
        runs = [one_estimate("after the pass")]
        finishing = running_workloads(args.repeat * args.finish)
        for i in range(args.repeat):
            now = NOW + PASS_STEP * (i + 2)
            finish_workloads(finishing[i * args.finish:(i + 1) * args.finish], now - PASS_STEP / 2)
            record = scheduling_pass_run(now=now)
            runs.append(one_estimate(f"after the next pass ({record.admitted} admitted)"))
        print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe:.3f} s")
        if args.json:
            Path(args.json).write_text(json.dumps({"runs": runs, "python_probe_s": probe, "limit_mib": LIMIT_MIB},
                                                  indent=2))
            print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
