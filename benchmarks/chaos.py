"""A chaos run: the production stack on the simulator, with faults injected at random.

Runs what docker-compose runs (web under gunicorn, a Celery worker for the `celery` queue,
the scheduler worker for the `scheduler` queue, Celery beat) with the production settings
on a PostgreSQL and a Redis of its own (by default the disposable ones on ports 5441 and
6391: this run stops and restarts them, never point it at shared servers), for a set time.
A restart policy brings back a process that exits, as docker-compose's does; a process that
exits without having been killed by the run counts as a failure (a manual action in a
deployment without a restart policy).

Faults, one at a time at random intervals:
  kill-scheduler, kill-worker, kill-beat, kill-web   SIGKILL of the process and its children
  redis-down      Redis stopped for 30 s (restarted empty)
  postgres-restart  PostgreSQL restarted (pg_ctl restart -m fast)
  second-scheduler  a second scheduler worker runs for 30 s

A consistency checker runs throughout: no node over-committed by the stored assignments, each
stored assignment decodes to its stored domains, no workload admitted twice in a row without
leaving in between, no workload row disappears without a Deleted event. At the end it prints
the faults survived, the data lost, the longest gap between passes after a fault ends, and
whether a manual action was needed.

    python benchmarks/chaos.py --duration 180 --min-faults 6 \\
        --pg-ctl "/usr/lib/postgresql/15/bin/pg_ctl -D /tmp/pg -o '-p 5441 -k /tmp'"
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("kill-scheduler", "kill-worker", "kill-beat", "kill-web", "redis-down", "postgres-restart",
          "second-scheduler")


def log(message: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {message}", flush=True)


@dataclass
class Program:
    name: str
    args: list[str]
    env: dict[str, str]
    logdir: Path
    proc: subprocess.Popen | None = None
    killed: bool = False  # the run killed it on purpose
    starts: int = 0
    unexpected_exits: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        out = open(self.logdir / f"{self.name}.log", "ab")  # noqa: SIM115 (kept open by the child)
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        out.close()
        self.killed = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is None:
            return
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


class Stack:
    def __init__(self, args: argparse.Namespace, env: dict[str, str], logdir: Path) -> None:
        python = sys.executable
        celery = [python, "-m", "celery", "-A", "tasweb"]
        self.programs = {
            "web": Program("web", [python, "-m", "gunicorn", "tasweb.wsgi", "--bind", f"127.0.0.1:{args.web_port}",
                                   "--workers", "2", "--timeout", "30"], env, logdir),
            "worker": Program("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2",
                                         "--queues", "celery", "--hostname", "worker@%h"], env, logdir),
            "scheduler": Program("scheduler", [*celery, "worker", "--loglevel", "INFO", "--pool", "solo",
                                               "--queues", "scheduler", "--hostname", "scheduler@%h"], env, logdir),
            "beat": Program("beat", [*celery, "beat", "--loglevel", "INFO", "--schedule",
                                     str(logdir / "celerybeat-schedule")], env, logdir),
        }
        self.extra = Program("scheduler2", [*celery, "worker", "--loglevel", "INFO", "--pool", "solo", "--queues",
                                            "scheduler", "--hostname", "scheduler2@%h"], env, logdir)
        self.restart_delay = args.restart_delay
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep_running, daemon=True)

    def start(self) -> None:
        for program in self.programs.values():
            program.start()
        self._thread.start()

    def _keep_running(self) -> None:
        """The restart policy: a program that exited is started again after a short delay."""
        while not self._stop.wait(0.5):
            for program in self.programs.values():
                if program.proc is not None and program.proc.poll() is not None:
                    if not program.killed:
                        reason = f"exit code {program.proc.returncode}"
                        program.unexpected_exits.append(reason)
                        log(f"!! {program.name} exited on its own ({reason}); see its log")
                    time.sleep(self.restart_delay)
                    program.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for program in [*self.programs.values(), self.extra]:
            program.stop()


# ---------------------------------------------------------------- servers


class Servers:
    def __init__(self, args: argparse.Namespace) -> None:
        self.redis_port = args.redis_port
        self.pg_ctl = shlex.split(args.pg_ctl) if args.pg_ctl else None
        self.pg_user = args.pg_ctl_user
        self.pg_log: Path | None = None  # where the restarted server writes (set with the run's logdir)

    def redis_up(self) -> bool:
        result = subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True, text=True,
                                timeout=5, check=False)
        return result.stdout.strip() == "PONG"

    def redis_stop(self) -> None:
        subprocess.run(["redis-cli", "-p", str(self.redis_port), "shutdown", "nosave"], capture_output=True,
                       timeout=10, check=False)

    def redis_start(self) -> None:
        subprocess.run(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--daemonize", "yes"], capture_output=True, timeout=10, check=True)
        for _ in range(100):
            if self.redis_up():
                return
            time.sleep(0.1)

    def pg_restart(self) -> None:
        assert self.pg_ctl is not None
        command = [*self.pg_ctl, "-m", "fast", "-w", "restart"]
        if self.pg_user:
            command = ["su", self.pg_user, "-c", shlex.join(command)]
        # The restarted server inherits pg_ctl's output: a pipe would stay open as long as the
        # server runs (and `run` would wait for it), so it goes to a file.
        log = open(self.pg_log, "ab") if self.pg_log else subprocess.DEVNULL  # noqa: SIM115
        try:
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120,
                           check=True)
        finally:
            if log is not subprocess.DEVNULL:
                log.close()


# ---------------------------------------------------------------- the consistency checker


@dataclass
class Findings:
    checks: int = 0
    skipped: int = 0  # the database was unreachable
    problems: list[str] = field(default_factory=list)
    lost_workloads: set[str] = field(default_factory=set)


class Checker:
    """Reads the database through Django's ORM, every few seconds, from this process."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.findings = Findings()
        self.seen: dict[int, str] = {}  # workload id -> key, every workload seen so far
        self.ended: set[str] = set()  # keys whose history was closed (Finished, Deleted)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        from django.db import connection

        while not self._stop.wait(self.interval):
            self.check_once()
            connection.close()
        self.check_once()

    def problem(self, text: str) -> None:
        if text not in self.findings.problems:
            self.findings.problems.append(text)
            log(f"!! inconsistency: {text}")

    def check_once(self) -> None:
        from django.db import DatabaseError, InterfaceError, connection, transaction

        try:
            with transaction.atomic():
                connection.cursor().execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                self._check()
            self.findings.checks += 1
        except (DatabaseError, InterfaceError):
            self.findings.skipped += 1
            with contextlib.suppress(Exception):
                connection.close()

    def _check(self) -> None:
        from scheduler.codec import decode_assignment
        from scheduler.quantity import resource_value
        from tasweb.cluster.models import Node, Pod, Workload, WorkloadStatus
        from tasweb.scheduling.models import AssignmentDomain, EventKind, PodSetAssignment, WorkloadEvent

        admitted_statuses = [WorkloadStatus.ADMITTED, WorkloadStatus.QUOTA_RESERVED]
        workloads = {w.id: w for w in Workload.objects.only("id", "namespace", "name", "status", "raw")}
        # no workload disappears: a row seen before is still there, or was deleted on the record
        gone = {self.seen[wid] for wid in set(self.seen) - set(workloads)} - self.ended
        if gone:
            # a row leaves the mirror only with its history closed: Finished, or Deleted
            self.ended |= set(WorkloadEvent.objects.filter(
                kind__in=[EventKind.DELETED, EventKind.FINISHED], workload_key__in=list(gone),
            ).values_list("workload_key", flat=True))
            for key in gone - self.ended:
                self.findings.lost_workloads.add(key)
                self.problem(f"workload {key} disappeared without a Finished or Deleted event")
        for wid, w in workloads.items():
            self.seen[wid] = f"{w.namespace}/{w.name}"

        admitted = {wid: w for wid, w in workloads.items() if w.status in admitted_statuses}
        rows = defaultdict(dict)
        for row in PodSetAssignment.objects.filter(workload_id__in=list(admitted)):
            rows[row.workload_id][row.pod_set] = row
        domains = defaultdict(list)
        for d in AssignmentDomain.objects.filter(workload_id__in=list(admitted)).order_by("assignment_id", "position"):
            domains[d.assignment_id].append(d)
        node_usage: dict[str, Counter] = defaultdict(Counter)
        for wid, w in admitted.items():
            key = self.seen[wid]
            admission = ((w.raw.get("status") or {}).get("admission") or {})
            for ps in admission.get("podSetAssignments") or []:
                row = rows[wid].get(ps["name"])
                if row is None:
                    self.problem(f"{key}/{ps['name']}: admitted without a stored assignment")
                    continue
                if row.encoded != ps.get("topologyAssignment"):
                    self.problem(f"{key}/{ps['name']}: stored assignment differs from the admission")
                if row.encoded is None:
                    continue
                decoded = decode_assignment(row.encoded)
                stored = [(tuple(d.values[-len(decoded.levels):]), d.count) for d in domains[row.id]]
                expected = [(tuple(d.values), d.count) for d in decoded.domains]
                if stored != expected:
                    self.problem(f"{key}/{ps['name']}: decoded domains differ from the stored ones")
                count = max(int(ps.get("count") or 1), 1)
                per_pod = {r: resource_value(r, q) / count for r, q in (ps.get("resourceUsage") or {}).items()}
                for d in domains[row.id]:
                    if d.node:
                        for r, v in per_pod.items():
                            node_usage[d.node][r] += v * d.count
        # pods outside Kueue (the simulator's inference servers) take capacity too
        for pod in Pod.objects.filter(workload_name="").exclude(node_name="").exclude(
                phase__in=["Succeeded", "Failed"]).only("node_name", "requests"):
            for r, v in (pod.requests or {}).items():
                node_usage[pod.node_name][r] += v
        for node in Node.objects.filter(hostname__in=list(node_usage)).only("hostname", "allocatable"):
            for r, used in node_usage[node.hostname].items():
                capacity = (node.allocatable or {}).get(r)
                if capacity is not None and used > capacity + 1e-6:
                    self.problem(f"node {node.hostname} over-committed in {r}: {used:g} > {capacity}")
        # no admission doubled: between two Admitted events a workload must have left
        # (evicted, preempted, requeued, finished)
        left = {EventKind.EVICTED, EventKind.PREEMPTED, EventKind.REQUEUED, EventKind.FINISHED}
        last: dict[str, str] = {}
        events = WorkloadEvent.objects.filter(kind__in=[EventKind.ADMITTED, *left]).order_by("workload_key", "id")
        for key, kind in events.values_list("workload_key", "kind"):
            if kind == EventKind.ADMITTED and last.get(key) == EventKind.ADMITTED:
                self.problem(f"workload {key} admitted twice in a row")
            last[key] = kind


# ---------------------------------------------------------------- the run


def pass_times() -> list[datetime]:
    from tasweb.scheduling.models import SchedulingPass

    return list(SchedulingPass.objects.filter(finished_at__isnull=False).order_by("finished_at")
                .values_list("finished_at", flat=True))


@dataclass
class FaultRecord:
    kind: str
    started: datetime
    ended: datetime
    resumed_after: float | None = None  # seconds from the fault's end to the next finished pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=180, help="seconds of faults (default 180)")
    parser.add_argument("--min-faults", type=int, default=6)
    parser.add_argument("--redis-port", type=int, default=6391)
    parser.add_argument("--pg-port", type=int, default=5441)
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-ctl", default=os.environ.get("CHAOS_PG_CTL", ""),
                        help="command that controls the PostgreSQL (without the action), e.g. "
                             "\"pg_ctl -D /tmp/pg -o '-p 5441 -k /tmp'\"; postgres-restart is skipped without it")
    parser.add_argument("--pg-ctl-user", default=os.environ.get("CHAOS_PG_CTL_USER", ""),
                        help="run pg_ctl as this user (when the data directory belongs to it)")
    parser.add_argument("--database", default="tas_chaos")
    parser.add_argument("--web-port", type=int, default=8797)
    parser.add_argument("--nodes", type=int, default=512, help="simulated nodes (multiple of 128)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--redis-outage", type=float, default=30)
    parser.add_argument("--restart-delay", type=float, default=2, help="the restart policy's delay")
    parser.add_argument("--resume-target", type=float, default=15)
    parser.add_argument("--logdir", default=None)
    args = parser.parse_args()
    if args.redis_port == 6379 or args.pg_port == 5432:
        parser.error("this run stops its servers: give it private ones (not 6379 / 5432)")

    rng = random.Random(args.seed)
    logdir = Path(args.logdir or tempfile.mkdtemp(prefix="tas-chaos-"))
    logdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tasweb.settings.production",
        "DJANGO_SECRET_KEY": "chaos-run-" + "x" * 50,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_SECURE_COOKIES": "false",
        "DATABASE_URL": f"postgres://postgres@{args.pg_host}:{args.pg_port}/{args.database}",
        "REDIS_URL": f"redis://127.0.0.1:{args.redis_port}/0",
        "TAS_VAR_DIR": str(logdir / "var"),
        "TAS_SIM_BLOCKS": str(max(args.nodes // 128, 1)),
        "TAS_SIM_RACKS_PER_BLOCK": "8",
        "TAS_SIM_NODES_PER_RACK": "16",
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    servers = Servers(args)
    servers.pg_log = logdir / "postgres.log"
    if not servers.redis_up():
        servers.redis_start()
    subprocess.run(["redis-cli", "-p", str(args.redis_port), "flushall"], capture_output=True, check=True)
    admin = f"postgres://postgres@{args.pg_host}:{args.pg_port}/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {args.database}"], check=True)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True, capture_output=True)
    subprocess.run([*manage, "tas_seed"], env=env, check=True)

    import django

    django.setup()
    from django.db import connection

    stack = Stack(args, env, logdir)
    checker = Checker(interval=5)
    log(f"stack starting; logs in {logdir}")
    stack.start()
    checker.start()
    time.sleep(20)  # warm-up: the first passes, the simulator's first arrivals

    kinds = [k for k in FAULTS if k != "postgres-restart" or servers.pg_ctl]
    records: list[FaultRecord] = []
    started = time.monotonic()
    queue: list[str] = []
    try:
        while time.monotonic() - started < args.duration or len(records) < args.min_faults:
            if not queue:
                queue = rng.sample(kinds, len(kinds))  # every kind once per round, in random order
            kind = queue.pop()
            begin = datetime.now(UTC)
            log(f"fault {len(records) + 1}: {kind}")
            if kind.startswith("kill-"):
                stack.programs[kind.removeprefix("kill-")].kill()  # the restart policy brings it back
            elif kind == "redis-down":
                servers.redis_stop()
                time.sleep(args.redis_outage)
                servers.redis_start()
            elif kind == "postgres-restart":
                servers.pg_restart()
            elif kind == "second-scheduler":
                stack.extra.start()
                time.sleep(30)
                stack.extra.stop()
            records.append(FaultRecord(kind, begin, datetime.now(UTC)))
            # the next fault once scheduling had its chance to resume from this one
            time.sleep(rng.uniform(args.resume_target + 1, args.resume_target + 7))
        time.sleep(5)
    finally:
        # also on Ctrl-C: the programs run in sessions of their own and would outlive the run
        checker.stop()
        stack.stop()
        if not servers.redis_up():
            servers.redis_start()

    # scheduling after each fault: the first pass to finish after the fault ended
    for _attempt in range(30):
        try:
            passes = pass_times()
            break
        except Exception:  # the database restarting at the very end
            connection.close()
            time.sleep(1)
    else:
        passes = []
    for record in records:
        after = [t for t in passes if t > record.ended]
        record.resumed_after = (after[0] - record.ended).total_seconds() if after else None
    longest_gap = 0.0
    for record, following in zip(records, [*records[1:], None], strict=True):
        # from the fault's end through the next minute (or the next fault): the longest
        # stretch without a pass
        until = record.ended + timedelta(seconds=60)
        if following is not None:
            until = min(until, following.started)
        window = [record.ended, *(t for t in passes if record.ended < t <= until)]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(window)]
        longest_gap = max([longest_gap, *gaps])
    overall = max(((b - a).total_seconds() for a, b in itertools.pairwise(passes)), default=0.0)

    unexpected = {p.name: p.unexpected_exits for p in stack.programs.values() if p.unexpected_exits}
    findings = checker.findings
    print()
    print(f"chaos run: {len(records)} faults in {time.monotonic() - started:.0f} s; logs in {logdir}")
    print(f"  {'fault':<18} {'ended':>9} {'scheduling resumed after':>26}")
    for r in records:
        resumed = f"{r.resumed_after:.1f} s" if r.resumed_after is not None else "never"
        print(f"  {r.kind:<18} {r.ended:%H:%M:%S} {resumed:>26}")
    survived = sum(1 for r in records if r.resumed_after is not None and r.resumed_after <= args.resume_target)
    worst = max((r.resumed_after for r in records if r.resumed_after is not None), default=float("nan"))
    print(f"faults survived (scheduling back within {args.resume_target:.0f} s): {survived}/{len(records)}")
    print(f"slowest resumption after a fault ended: {worst:.1f} s")
    print(f"longest gap between passes in the minute after a fault ended: {longest_gap:.1f} s "
          f"(over the whole run, faults included: {overall:.1f} s)")
    print(f"passes: {len(passes)}; consistency checks: {findings.checks} (skipped while the database was down: "
          f"{findings.skipped}); inconsistencies: {len(findings.problems)}")
    for problem in findings.problems[:20]:
        print(f"  - {problem}")
    print(f"data lost (workloads gone without a record): {len(findings.lost_workloads)}")
    print(f"processes that exited on their own: {unexpected or 'none'}")
    manual = bool(unexpected) or any(r.resumed_after is None for r in records)
    print(f"manual action needed: {'YES' if manual else 'none'}")
    ok = not manual and not findings.problems and not findings.lost_workloads and survived == len(records)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
