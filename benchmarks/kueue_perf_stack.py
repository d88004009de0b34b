"""Stack mode of kueue_perf_tas.py: the same replay against the running service.

    .venv/bin/python benchmarks/kueue_perf_tas.py --mode stack [--scale F] [--json FILE]
        [--database kueue_perf_stack] [--redis-url redis://127.0.0.1:6379/9] [--keep]
        [--poll-ms 25] [--per-object-writes] [--profile]

The replay plays the cluster (the API server and Kueue's test runner); the service does the
scheduling. What runs, from one command:

* A throwaway PostgreSQL database `--database` on DATABASE_URL's server (default the local
  one, postgres://postgres@127.0.0.1:5432), created and migrated as benchdb.py does it and
  dropped at the end (`--keep` keeps it); Redis database `--redis-url` (default db 9 of the
  local server), whose keys of this database's scheduler are cleared first.
* One Celery worker, started as `celery -A tasweb worker --pool solo` is (`manage.py
  tas_run`), consuming the scheduler queue only (named after the database, so that no other
  worker on the same Redis takes its passes), with TAS_CLUSTER_SOURCE=none (no simulator
  ticks: this replay is the cluster), TAS_SCHEDULER_DEBOUNCE=0 (a pass follows every burst
  of changes at once, instead of 1 s later), TAS_FEATURE_GATES=TASBalancedPlacement=true and
  DJANGO_DEBUG=false (as a deployment runs; DEBUG would keep every query in memory). Nothing
  else is started: no beat (every change asks for a pass, so no pass is waited for), no web
  server, no worker for the default queue (no task goes there). Its log (every pass, with
  its duration) is kept in a temporary folder, printed at the end. It is stopped at the
  end, on error and on Ctrl-C.
* This process, with Django on the same database and Redis, writes through the mirror's
  services (`tasweb.cluster.services`, via the simulator's `ClusterWriter`: JSON objects,
  uids, increasing resourceVersions) and asks for a pass after each burst of writes
  (`request_pass`), as the simulator's tick does:
  - setup: the nodes, the Topology, the flavor, the ClusterQueues and the LocalQueues of
    engine mode, in one transaction; then it waits for the first pass to commit (the
    worker's cold start: it builds its engine state from the mirror);
  - each Workload at its arrival time (those due together in one transaction);
  - polling the database every `--poll-ms` ms for what the passes committed: the latest
    SchedulingPass id (a primary-key lookup; a pass's row commits with its results), and when
    a newer pass is visible, one indexed query on `status` (the rows now Admitted,
    QuotaReserved, Preempted or Evicted). A workload seen Admitted starts its runtime then:
    the admission time is this observation time, not the `admitted_at` the pass wrote,
    because `admitted_at` is the pass's start, before it decided anything and before its
    results could be seen (the runner, and Kueue's recorder, count from when they see the
    Admitted event); the difference (the pass, its commit and the polling delay) is printed
    as the admission lag;
  - `runtimeMs` after that, the runner's Finished condition (reason ByTest) on the row as it
    is then (read and locked, so that a pass preempting it meanwhile is not overwritten);
  - a workload seen Preempted (or Evicted) is released at once as Kueue's runner does
    (QuotaReserved False "Evicted by the test runner", Admitted False, no admission,
    Evicted/Preempted left True): the service's status is then Pending again and the next
    pass requeues it; it runs its full runtime again once readmitted.
  New Workloads go in with the ClusterWriter's bulk insert (`create_all`). The finishes (or
  releases) due together are one bulk update of their rows (`rows_update`, with the columns
  `extract_fields` derives from each object: what `object_upsert` would store, as
  `objects_resync` updates listed objects); `--per-object-writes` writes each with
  `object_upsert` instead, as the simulator's `ClusterWriter.put` does: two statements and a
  parse an object, which takes this one process 2-5 ms a finish on a loaded machine, so that
  a pass admitting 500 small workloads stalls the replay (its polls, its finishes) for seconds.
  Like the Kubernetes source in control mode, the replay writes no history entries of its own
  (the service's history has what the passes decided).
* Measures: exactly engine mode's (its Recorder), from what this process observes and writes;
  ClusterQueue usage is the cpu of the workloads seen admitted (from when seen) and not yet
  finished or released (until that write committed). Wall time: from the first write of the
  setup to the last finish, i.e. the setup (objects written, the worker's cold start) plus the
  replay. Not included: creating and migrating the database and starting the worker process
  (printed apart; Kueue's wall also counts its process start).

Printed beside the table: the passes (count, durations from `SchedulingPass.duration_ms`,
the worker's busy share, the gaps between passes), the admission lag, and this process's
time per kind of write. `engine_s` in the JSON holds the worker's pass time ("worker pass",
"worker cold start") and this process's ("replay arrivals", "replay finishes", ...).
`--profile` profiles the worker's tasks (cProfile, from the first task to the worker's exit)
and prints the top costs; the profiler slows the passes.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import ctypes.util
import heapq
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kueue_perf_tas as perf
from benchdb import server_url

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE = "kueue_perf_stack"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/9"
DEFAULT_POLL_MS = 25.0
WORKER_READY_TIMEOUT_S = 120.0
COLD_START_TIMEOUT_S = 300.0
STALL_TIMEOUT_S = 120.0  # no admission, finish or write for this long while workloads wait
HOLDING = ("Admitted", "QuotaReserved")
RELEASED = ("Preempted", "Evicted")
# what object_upsert stores of an updated Workload (tasweb.cluster.services._row_values), less
# the columns a new version never changes (uid, namespace, name, created_at)
UPDATED_FIELDS = ("raw", "resource_version", "rv_number", "invalid_reason", "queue_name", "cluster_queue", "status",
                  "message", "priority", "pod_count", "unhealthy_nodes", "admitted_at", "finished_at", "updated_at")

# The worker with a profiler around its tasks (--profile): `celery -A tasweb worker` otherwise.
PROFILED_WORKER = r"""
import cProfile, os, sys
import django
django.setup()
from celery import signals
from tasweb.celery import app
profiler = cProfile.Profile()
signals.task_prerun.connect(lambda **_: profiler.enable(), weak=False)
signals.task_postrun.connect(lambda **_: profiler.disable(), weak=False)
signals.worker_shutdown.connect(lambda **_: profiler.dump_stats(os.environ["KUEUE_PERF_WORKER_PROFILE"]),
                                weak=False)
app.worker_main(sys.argv[1:])
"""


class StackError(RuntimeError):
    """The stack could not be set up or stopped working (the message says which part)."""


@dataclass(frozen=True)
class StackOptions:
    database: str = DEFAULT_DATABASE
    redis_url: str = DEFAULT_REDIS_URL
    keep: bool = False
    poll_s: float = DEFAULT_POLL_MS / 1e3
    profile: bool = False
    bulk_writes: bool = True  # a burst of finishes (or releases) in one statement, else object_upsert each


# ---------------------------------------------------------------- the services


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook: Linux sends the child SIGTERM if this process dies (even killed)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if not name:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return hook


@dataclass
class Worker:
    """The scheduler queue's Celery worker, in its own process group."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise StackError(f"the worker exited ({code}); the end of {self.log_path}:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while " ready." not in self.log():
            self.check_alive()
            if time.monotonic() > deadline:
                raise StackError(f"the worker was not ready after {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Warm shutdown (SIGTERM: the running pass finishes), then whatever is left of the group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@dataclass
class Stack:
    options: StackOptions
    folder: Path
    worker: Worker
    queue: str
    migrate_s: float = 0.0
    worker_start_s: float = 0.0

    @property
    def profile_path(self) -> Path:
        return self.folder / "worker.prof"


def _service_env(options: StackOptions, folder: Path, queue: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "tasweb.settings",
        "DATABASE_URL": server_url(options.database),
        "REDIS_URL": options.redis_url,
        "TAS_VAR_DIR": str(folder / "var"),
        "TAS_CLUSTER_SOURCE": "none",
        "TAS_SCHEDULER_DEBOUNCE": "0",
        "TAS_SCHEDULER_QUEUE": queue,
        "TAS_FEATURE_GATES": perf.GATES,
        "DJANGO_DEBUG": "false",
    }


def _clear_scheduler_keys() -> None:
    """Keys a stopped run on a database of the same name may have left (a "scheduled" flag
    would hold back passes for a minute)."""
    import redis
    from django.conf import settings
    from django.core.cache import cache

    from tasweb.scheduling.leader import scheduler_key

    cache.delete_many([scheduler_key(k) for k in ("changed", "done", "scheduled")])
    redis.Redis.from_url(settings.REDIS_URL).delete(scheduler_key("leader"))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def running_stack(options: StackOptions) -> Iterator[Stack]:
    """The database (created, migrated; dropped afterwards unless kept), Django set up on it
    in this process, and the worker (stopped afterwards, whatever happens)."""
    if not options.database.replace("_", "").isalnum():
        raise StackError(f"--database {options.database!r}: letters, digits and underscores only")
    folder = Path(tempfile.mkdtemp(prefix=f"{options.database}-"))
    queue = f"{options.database}-scheduler"
    env = _service_env(options, folder, queue)
    os.environ.update({**env, "DJANGO_LOG_LEVEL": os.environ.get("DJANGO_LOG_LEVEL") or "WARNING"})
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    celery = ["worker", "--pool", "solo", "--concurrency", "1", "--loglevel", "INFO",
              "--hostname", f"{options.database}@%h", "--without-mingle", "--without-gossip", "--without-heartbeat",
              "--queues", queue]
    # Celery's per-task "succeeded in" lines, which the service logs at DEBUG, are read for the
    # task times: that one logger at DEBUG, the rest at INFO
    worker_env = {**os.environ, **env, "DJANGO_LOG_LEVEL": "INFO", "TAS_LOG_LEVELS": "celery.app.trace=DEBUG"}
    if options.profile:
        argv = [sys.executable, "-c", PROFILED_WORKER, *celery]
        worker_env["KUEUE_PERF_WORKER_PROFILE"] = str(folder / "worker.prof")
    else:
        argv = [sys.executable, "-m", "celery", "-A", "tasweb", *celery]
    stack = Stack(options, folder, Worker(argv, worker_env, folder / "worker.log"), queue)
    created = False
    # SIGTERM (e.g. from a test's timeout) stops the stack as Ctrl-C does
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        started = time.perf_counter()
        _admin(f'DROP DATABASE IF EXISTS "{options.database}" WITH (FORCE)')
        _admin(f'CREATE DATABASE "{options.database}"')
        created = True
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        _clear_scheduler_keys()
        stack.migrate_s = time.perf_counter() - started
        started = time.perf_counter()
        stack.worker.start()
        stack.worker.wait_ready(WORKER_READY_TIMEOUT_S)
        stack.worker_start_s = time.perf_counter() - started
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"stack: database {options.database} created and migrated in {stack.migrate_s:.1f} s, worker ready "
              f"in {stack.worker_start_s:.1f} s (neither is in the wall time); {os.cpu_count()} CPUs, load average "
              f"{load:.1f}", flush=True)
        yield stack
    finally:
        signal.signal(signal.SIGTERM, previous)
        stack.worker.stop()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if created:
            if options.keep:
                print(f"stack: kept database {options.database}")
            else:
                _admin(f'DROP DATABASE IF EXISTS "{options.database}" WITH (FORCE)')
        print(f"stack: worker log {stack.worker.log_path}", flush=True)


# ---------------------------------------------------------------- the replay


def finished_raw(raw: dict[str, Any], at: datetime) -> dict[str, Any]:
    """The runner's controller: Finished True, reason ByTest (engine mode's finished_copy)."""
    from tasweb.simulator.services import set_condition

    obj = copy.deepcopy(raw)
    set_condition(obj.setdefault("status", {}), "Finished", "True", "ByTest", "By test runner", at)
    return obj


def released_raw(raw: dict[str, Any], at: datetime) -> dict[str, Any]:
    """The runner's controller on an evicted workload (engine mode's released_copy): no
    admission, QuotaReserved False (Pending), Admitted False (NoReservation); Evicted and
    Preempted stay True until the scheduler readmits it."""
    from tasweb.simulator.services import set_condition

    obj = copy.deepcopy(raw)
    status = obj.setdefault("status", {})
    status.pop("admission", None)
    set_condition(status, "QuotaReserved", "False", "Pending", "Evicted by the test runner", at)
    set_condition(status, "Admitted", "False", "NoReservation", "The workload has no reservation", at)
    return obj


@dataclass
class PassStats:
    """The service's passes over the replay, from SchedulingPass and the worker's log."""

    count: int = 0
    durations_ms: list[int] = field(default_factory=list)
    admitted: int = 0
    evicted: int = 0
    busy_s: float = 0.0  # sum of durations
    gaps_ms: list[float] = field(default_factory=list)  # from a pass's end to the next one's start
    task_s: list[float] = field(default_factory=list)  # Celery's "succeeded in" of the replay's tasks
    rebuilds: list[str] = field(default_factory=list)
    cold_start_ms: int = 0
    seen_after_ms: list[float] = field(default_factory=list)  # from a pass's finished_at to this process seeing it


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# "2026-01-01 12:00:00,123 INFO celery.app.trace: Task tasweb.scheduling.tasks.run_pass[id] succeeded in 0.1s"
_TASK_LINE = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}).*run_pass\[[^\]]+\] succeeded in ([\d.e-]+)s")


def task_time(stats: PassStats) -> str:
    """The worker's Celery task time beside its pass time: what a task costs outside the pass."""
    if not stats.task_s:
        return "Celery tasks: no task lines in the worker's log"
    return (f"Celery tasks {sum(stats.task_s):.1f} s ({len(stats.task_s)} tasks, so "
            f"{sum(stats.task_s) - stats.busy_s:.1f} s outside the pass: lock, commit, messages)")


class StackReplay(perf.Replay):
    mode = "stack"

    def __init__(self, config: perf.GeneratorConfig, stack: Stack, *, scale: float = 1.0,
                 timestamps: str = "second", timeout_s: float = perf.DEFAULT_TIMEOUT_S) -> None:
        super().__init__(config, scale=scale, timestamps=timestamps, timeout_s=timeout_s)
        from tasweb.simulator.models import SimulatorState
        from tasweb.simulator.services import ClusterWriter

        self.stack = stack
        self.poll_s = stack.options.poll_s
        # the simulator's writer: every write takes the next resourceVersion (an unsaved state row
        # holds the counter; the mirror is empty, so counting starts at 0)
        self.writer = ClusterWriter(SimulatorState(resource_version=0))
        self.templates = {a.key: a.template for a in self.arrivals}
        self.ids: dict[str, int] = {}  # workload key -> row id, learnt by polling
        self.usage_m: dict[str, int] = defaultdict(int)
        self.finishes_stack: list[tuple[float, int, str, int]] = []
        self.lags_ms: list[float] = []
        self.unseen_admissions = 0  # seen Preempted without having been seen Admitted
        self.skipped_finishes = 0  # due to finish, but preempted by then
        self.polls = 0
        self.status_reads = 0  # polls that found a new pass and read the workloads
        self.last_pass_read = 0
        self.passes_seen: list[tuple[int, float]] = []  # (pass id, when this process first saw it)
        self.releases = 0
        self.last_progress = 0.0
        self.pass_stats = PassStats()

    # ------------------------------------------------------------ writes

    def request_pass(self) -> None:
        from tasweb.scheduling.services import request_pass

        with self.calls.timed("replay request_pass"):
            request_pass()

    def setup(self) -> None:
        from django.db import transaction

        objs = [*perf.definition_objects(self.config)]
        for q in self.queues:
            objs += perf.queue_objects(q, self.config.flavor_name)
        with transaction.atomic():
            self.writer.create_all("Node", perf.node_objects(self.config))
            for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"):
                self.writer.create_all(kind, (o for o in objs if o["kind"] == kind))
        self.request_pass()

    def wait_for_first_pass(self) -> None:
        from tasweb.scheduling.models import SchedulingPass

        deadline = time.monotonic() + COLD_START_TIMEOUT_S
        while True:
            first = SchedulingPass.objects.filter(finished_at__isnull=False).order_by("id").first()
            if first is not None:
                self.pass_stats.cold_start_ms = first.duration_ms
                return
            self.stack.worker.check_alive()
            if time.monotonic() > deadline:
                raise StackError(f"no pass committed {COLD_START_TIMEOUT_S:.0f} s after the setup; see "
                                 f"{self.stack.worker.log_path}")
            time.sleep(0.02)

    def arrive_due(self, now_s: float) -> bool:
        from django.db import transaction

        due = []
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].at_ms / 1e3 <= now_s:
            due.append(self.arrivals[self.next_arrival])
            self.next_arrival += 1
        if not due:
            return False
        at_s = self.clock()
        created = self.stamp(at_s)
        with self.calls.timed("replay arrivals"), transaction.atomic():
            self.writer.create_all("Workload", (perf.workload_object(a, created, self.timestamps) for a in due))
        for a in due:
            self.recorder.created(a.key, a.template, a.namespace, at_s)
        return True

    def update_workloads(self, objects: list[dict[str, Any]], rows: list[Any]) -> None:
        """Write new versions of stored Workloads (their rows locked by this transaction), each
        with the next resourceVersion. Bulk (the default): the mirror's columns of each object
        (`extract_fields`, as object_upsert stores them) in one `rows_update` of the burst, as
        `objects_resync` updates listed objects; per object: `object_upsert` each, as the
        simulator's ClusterWriter.put does (two statements and a parse an object)."""
        from tasweb.cluster.services import (
            extract_fields,
            flavor_levels_cached,
            resource_version_number,
            rows_update,
        )

        if not self.stack.options.bulk_writes:
            for obj in objects:
                self.writer.put("Workload", obj)
            return
        with flavor_levels_cached():  # the flavors' Topology levels read once for the burst, as objects_resync does
            for row, obj in zip(rows, objects, strict=True):
                self.writer.stamp(obj)
                fields, invalid = extract_fields("Workload", obj)
                fields.setdefault("cluster_queue", "")
                row.raw = obj
                row.resource_version = obj["metadata"]["resourceVersion"]
                row.rv_number = resource_version_number(row.resource_version)
                row.invalid_reason = invalid
                for name, value in fields.items():
                    setattr(row, name, value)
        rows_update(rows=rows, fields=UPDATED_FIELDS)
        self.writer.writes += len(rows)

    def finish_due(self, now_s: float) -> bool:
        from django.db import transaction

        from tasweb.cluster.models import Workload

        due: dict[int, str] = {}
        while self.finishes_stack and self.finishes_stack[0][0] <= now_s:
            _, _, key, admission = heapq.heappop(self.finishes_stack)
            rec = self.recorder.workloads[key]
            if rec.admissions == admission and rec.admitted:
                due[self.ids[key]] = key
        if not due:
            return False
        done: list[str] = []
        with self.calls.timed("replay finishes"), transaction.atomic():
            # locked in the order the passes lock them (Workload's ordering): no deadlock with a pass
            rows, objects = [], []
            at = self.stamp(self.clock())
            for row in Workload.objects.select_for_update().filter(id__in=list(due)):
                if row.status not in HOLDING:
                    self.skipped_finishes += 1  # preempted since the last poll: the next poll releases it
                    continue
                rows.append(row)
                objects.append(finished_raw(row.raw, at))
                done.append(due[row.id])
            self.update_workloads(objects, rows)
        at_s = self.clock()  # committed: the service can see it
        for key in done:
            rec = self.recorder.workloads[key]
            self.recorder.finished(key, at_s)
            rec.admitted = False
            self.finished += 1
            self.use(rec.cluster_queue, -self.cpu_m(key), at_s)
        return True

    def release(self, keys: list[str]) -> None:
        from django.db import transaction

        from tasweb.cluster.models import Workload

        with self.calls.timed("replay releases"), transaction.atomic():
            rows = [row for row in Workload.objects.select_for_update().filter(id__in=[self.ids[k] for k in keys])
                    if row.status in RELEASED]
            at = self.stamp(self.clock())
            self.update_workloads([released_raw(row.raw, at) for row in rows], rows)
            self.releases += len(rows)

    # ------------------------------------------------------------ what the passes did

    def cpu_m(self, key: str) -> int:
        return self.templates[key].cpu_m

    def use(self, cq: str, delta_m: int, at_s: float) -> None:
        self.usage_m[cq] += delta_m
        self.recorder.usage(cq, self.usage_m[cq], at_s)

    def poll(self) -> bool:
        """Read what the passes committed: admissions start runtimes, preemptions are released
        at once. True when something was written.

        Only passes write these statuses, and a pass's SchedulingPass row commits with its
        results: the workloads are read only when a pass newer than the last one read is
        visible (the latest pass id is one primary-key lookup)."""
        from tasweb.cluster.models import Workload
        from tasweb.scheduling.models import SchedulingPass

        with self.calls.timed("replay poll"):
            self.polls += 1
            latest = SchedulingPass.objects.order_by("-id").values_list("id", flat=True).first() or 0
            if latest == self.last_pass_read:
                return False
            self.last_pass_read = latest
            self.status_reads += 1
            self.passes_seen.append((latest, self.clock()))
            rows = list(Workload.objects.filter(status__in=(*HOLDING, *RELEASED)).order_by()
                        .values_list("id", "namespace", "name", "status", "admitted_at"))
        seen_s = self.clock()
        seen = self.stamp(seen_s)
        to_release: list[str] = []
        for row_id, namespace, name, status, admitted_at in rows:
            key = f"{namespace}/{name}"
            rec = self.recorder.workloads[key]
            self.ids[key] = row_id
            if status in HOLDING:
                if not rec.admitted:
                    self.admit(key, seen_s)
                    if admitted_at is not None:
                        self.lags_ms.append((seen - admitted_at).total_seconds() * 1e3)
            elif status in RELEASED:
                if not rec.admitted:  # admitted and preempted between two polls
                    self.unseen_admissions += 1
                    self.admit(key, seen_s)
                self.recorder.evicted(key)
                self.use(rec.cluster_queue, -self.cpu_m(key), seen_s)
                to_release.append(key)
        if to_release:
            self.release(to_release)
        return bool(to_release)

    def admit(self, key: str, seen_s: float) -> None:
        rec = self.recorder.admitted(key, seen_s)
        self.admissions += 1
        self.last_progress = seen_s
        heapq.heappush(self.finishes_stack, (seen_s + rec.runtime_s, self.admissions, key, rec.admissions))
        self.use(rec.cluster_queue, self.cpu_m(key), seen_s)

    # ------------------------------------------------------------ the loop

    def next_due_stack(self) -> float | None:
        times = []
        if self.next_arrival < len(self.arrivals):
            times.append(self.arrivals[self.next_arrival].at_ms / 1e3)
        if self.finishes_stack:
            times.append(self.finishes_stack[0][0])
        return min(times, default=None)

    def run(self) -> perf.ReplayResult:
        start = time.perf_counter()
        self.setup()
        self.wait_for_first_pass()
        self.origin = time.perf_counter()
        self.origin_dt = datetime.now(UTC)
        setup_s = self.origin - start
        total = len(self.arrivals)
        next_poll = 0.0
        while self.finished < total:
            now_s = self.clock()
            if now_s > self.timeout_s:
                raise perf.ReplayTimeout(f"{self.finished} of {total} workloads finished after "
                                         f"{self.timeout_s:.0f} s")
            wrote = self.arrive_due(now_s)
            wrote = self.finish_due(now_s) or wrote
            if now_s >= next_poll or wrote:
                next_poll = now_s + self.poll_s
                wrote = self.poll() or wrote
            if wrote:
                self.last_progress = self.clock()
                self.request_pass()
            if self.finished >= total:
                break
            self.stack.worker.check_alive()
            self.check_stalled(now_s, total)
            due = self.next_due_stack()
            wake = next_poll if due is None else min(due, next_poll)
            delay = wake - self.clock()
            if delay > 0:
                time.sleep(delay)
        end_s = self.recorder.last_s  # the usage drop of the last finish
        self.recorder.close(end_s)
        self.collect_pass_stats(end_s)
        return self.result(setup_s, end_s)

    def check_stalled(self, now_s: float, total: int) -> None:
        if now_s - self.last_progress < STALL_TIMEOUT_S:
            return
        self.stack.worker.check_alive()
        if self.next_due_stack() is None:
            raise perf.ReplayTimeout(f"{total - self.finished} workloads never admitted: nothing happened for "
                                     f"{STALL_TIMEOUT_S:.0f} s; see {self.stack.worker.log_path}")

    # ------------------------------------------------------------ the service's side

    def collect_pass_stats(self, end_s: float) -> None:
        from tasweb.scheduling.models import SchedulingPass

        stats = self.pass_stats
        end = self.stamp(end_s)
        passes = list(SchedulingPass.objects.filter(started_at__gte=self.origin_dt, started_at__lte=end,
                                                    finished_at__isnull=False).order_by("started_at")
                      .values_list("started_at", "finished_at", "duration_ms", "admitted", "evicted"))
        stats.count = len(passes)
        stats.durations_ms = [p[2] for p in passes]
        stats.admitted = sum(p[3] for p in passes)
        stats.evicted = sum(p[4] for p in passes)
        stats.busy_s = sum(stats.durations_ms) / 1e3
        stats.gaps_ms = [(b[0] - a[1]).total_seconds() * 1e3 for a, b in itertools.pairwise(passes)]
        finished = dict(SchedulingPass.objects.filter(id__in=[i for i, _ in self.passes_seen])
                        .values_list("id", "finished_at"))
        stats.seen_after_ms = [(self.stamp(seen_s) - finished[i]).total_seconds() * 1e3
                               for i, seen_s in self.passes_seen if finished.get(i) is not None]
        log = self.stack.worker.log()
        for line in log.splitlines():
            m = _TASK_LINE.match(line)
            if m is None:
                continue
            logged = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").astimezone(UTC)
            if self.origin_dt <= logged <= end + timedelta(seconds=1):
                stats.task_s.append(float(m[2]))
        stats.rebuilds = re.findall(r"scheduler state: building it from the mirror \(([^)]*)\)", log)

    def result(self, setup_s: float, end_s: float) -> perf.ReplayResult:
        rec = self.recorder
        evictions = rec.evictions_by_class()
        stats = self.pass_stats
        seconds = {"worker cold start": stats.cold_start_ms / 1e3, "worker pass": stats.busy_s,
                   "worker task": sum(stats.task_s)}
        seconds.update(self.calls.seconds)
        return perf.ReplayResult(
            mode=self.mode, scale=self.scale, workloads=len(self.arrivals), wall_s=setup_s + end_s, setup_s=setup_s,
            replay_s=end_s, cq_usage_pct=rec.usage_pct(), avg_time_to_admission_ms=rec.avg_time_to_admission_ms(),
            evictions=sum(evictions.values()), evictions_by_class=evictions,
            physical_bound_s=perf.physical_bound_s(self.config),
            instant_reference_ms=perf.instant_reference_ms(self.config),
            passes=stats.count, admissions=self.admissions, engine_seconds=seconds,
            slowest_pass_ms=float(max(stats.durations_ms, default=0)))

    def details(self, result: perf.ReplayResult) -> str:
        """Where the time went in the service, and the replay's own work."""
        stats = self.pass_stats
        d = stats.durations_ms
        lines = [
            f"passes: {stats.count} during the replay, {stats.admitted} admitted and {stats.evicted} evicted by them; "
            f"duration (SchedulingPass.duration_ms) mean {statistics.fmean(d) if d else 0:.0f} ms, median "
            f"{_percentile(d, 0.5):.0f}, p95 {_percentile(d, 0.95):.0f}, max {max(d, default=0)}; cold start "
            f"{stats.cold_start_ms} ms",
            f"worker: passes {stats.busy_s:.1f} s of the {result.replay_s:.1f} s replay "
            f"({100 * stats.busy_s / result.replay_s if result.replay_s else 0:.0f} % busy); {task_time(stats)}; "
            f"gap from one pass's end to the next's start: median "
            f"{_percentile(stats.gaps_ms, 0.5):.0f} ms, p95 {_percentile(stats.gaps_ms, 0.95):.0f} ms",
            f"state rebuilds during the run: {len(stats.rebuilds)}"
            + (f" ({', '.join(sorted(set(stats.rebuilds)))})" if stats.rebuilds else ""),
            f"admission lag (seen Admitted - admitted_at, the pass's start): mean "
            f"{statistics.fmean(self.lags_ms) if self.lags_ms else 0:.0f} ms, p95 "
            f"{_percentile(self.lags_ms, 0.95):.0f} ms, max {max(self.lags_ms, default=0):.0f} ms; polls every "
            f"{self.poll_s * 1e3:.0f} ms: {self.polls}, {self.status_reads} of which found a new pass and read the "
            f"workloads; a pass seen {_percentile(stats.seen_after_ms, 0.5):.0f} ms (median), "
            f"{_percentile(stats.seen_after_ms, 0.95):.0f} ms (p95) after its finished_at (its commit, the polling)",
            f"replay writes: {self.releases} releases, {self.skipped_finishes} finishes found preempted, "
            f"{self.unseen_admissions} preemptions of admissions not seen; resourceVersion "
            f"{self.writer.state.resource_version}",
        ]
        return "\n".join(lines)


def worker_profile_report(path: Path, top: int = 40) -> str:
    import io
    import pstats

    if not path.exists():
        return f"no worker profile at {path}"
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return f"worker profile ({path}):\n{out.getvalue()}"


def run(config: perf.GeneratorConfig, options: StackOptions, *, scale: float, timestamps: str,
        timeout_s: float) -> tuple[perf.ReplayResult, StackReplay, str]:
    """Start the stack, replay, stop it: the result, the replay, and the text on the service's side."""
    with running_stack(options) as stack:
        replay = StackReplay(config, stack, scale=scale, timestamps=timestamps, timeout_s=timeout_s)
        result = replay.run()
        text = replay.details(result)
    if options.profile:
        text += "\n\n" + worker_profile_report(stack.profile_path)
    return result, replay, text
