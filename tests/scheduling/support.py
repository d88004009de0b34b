"""Helpers of the scheduler's fault tests: real Celery worker processes on the test
settings' PostgreSQL and Redis, the example cluster mirrored through the cluster services,
checks that what a pass stored is whole, and stopping and starting the local Redis."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import redis
from django.conf import settings
from django.db import connection

from scheduler.loader import read_objects
from tasweb.cluster.models import KINDS, Workload, WorkloadStatus
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import runtime as rt
from tasweb.scheduling.models import AssignmentDomain, EventKind, PodSetAssignment, SchedulingPass, WorkloadEvent

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CLUSTER = PROJECT_ROOT / "examples" / "cluster.yaml"
# The example cluster's workloads that fit (one of its eight never does: see generate_cluster.py).
EXAMPLE_ADMISSIBLE = 7

# A real worker, started the way `celery -A tasweb worker` starts one, with one test-only
# addition: broker transport options from the environment (a short visibility timeout lets
# a test see a dead worker's unacknowledged task come back within seconds, not an hour).
WORKER_MAIN = r"""
import json, os, sys
import django
django.setup()
from tasweb.celery import app
extra = json.loads(os.environ.get("TEST_BROKER_TRANSPORT_OPTIONS") or "{}")
if extra:
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, **extra}
app.worker_main(sys.argv[1:])
"""


def wait_for(condition: Callable[[], object], *, timeout: float, interval: float = 0.1, what: str,
             workers: tuple[WorkerProcess, ...] = ()) -> object:
    """Poll `condition` until it returns something truthy; fail the test after `timeout` seconds
    (with the end of the `workers`' logs, to show what they were doing)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            logs = "".join(f"\n--- worker {w.name} ---\n{w.log()[-4000:]}" for w in workers)
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{logs}")
        time.sleep(interval)


def workers_database_url() -> str:
    """DATABASE_URL of the test database pytest-django created (other processes must use it)."""
    db = connection.settings_dict
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


class WorkerProcess:
    """One `celery worker` process (and its pool children) in its own process group."""

    def __init__(self, name: str, *, tmp_path: Path, pool: str = "solo", env: dict[str, str] | None = None,
                 broker_options: dict | None = None, production_flags: bool = False) -> None:
        self.name = name
        self.pool = pool
        # as deployed (docker-compose, tas_run): gossip, mingle and heartbeats on
        self.production_flags = production_flags
        self.log_path = tmp_path / f"{name}.log"
        self.trace_path = tmp_path / f"{name}.trace"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tasweb.settings.test",
            "DATABASE_URL": workers_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "TAS_SCHEDULER_LOCK_TTL": "3",
            "TAS_SCHEDULER_LOCK_WAIT": "2",
            "TAS_SCHEDULER_DEBOUNCE": "1",
            "TAS_TEST_PASS_TRACE": str(self.trace_path),
            "TEST_BROKER_TRANSPORT_OPTIONS": json.dumps(broker_options or {}),
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        args = ["worker", "--pool", self.pool, "--concurrency", "1", "--hostname", f"{self.name}@%h",
                "--loglevel", "INFO"]
        if not self.production_flags:
            args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", WORKER_MAIN, *args], cwd=PROJECT_ROOT, env=self.env,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"worker {self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            return " ready." in self.log()

        wait_for(ready, timeout=timeout, what=f"worker {self.name} to be ready")

    def trace(self) -> list[dict]:
        """The passes this worker's processes reached the commit of (see _test_only_hold)."""
        if not self.trace_path.exists():
            return []
        return [json.loads(line) for line in self.trace_path.read_text().splitlines() if line.strip()]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker and every process of its group: no shutdown, no ack, no release."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def request_stop(self) -> None:
        """Ask for a warm shutdown: the running task finishes, unacknowledged ones go back."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.request_stop()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        # pool children left behind, if any
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


# ---------------------------------------------------------------- the mirrored cluster


def alive_when_state_is_read(monkeypatch: pytest.MonkeyPatch, old: weakref.ref) -> list[bool]:
    """Whether `old` was still alive each time an engine state was read from the mirror
    afterwards (`runtime.engine_inputs`): a state built while the one it replaces lives would
    double the process's memory."""
    alive: list[bool] = []
    real = rt.engine_inputs

    def reading(*args, **kwargs):
        alive.append(old() is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(rt, "engine_inputs", reading)
    return alive


def import_example_cluster() -> None:
    """examples/cluster.yaml into the mirror, through the services every source uses."""
    for obj in read_objects(str(EXAMPLE_CLUSTER)):
        if obj.get("kind") in KINDS:
            object_upsert(kind=obj["kind"], obj=obj)


def small_workload(name: str, *, gpus: int = 1) -> dict:
    """A pending Workload on the example cluster's LocalQueue that always fits."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "uid": f"test-{name}",
                     "creationTimestamp": "2025-06-01T12:00:00Z"},
        "spec": {"queueName": "team-a", "podSets": [{
            "name": "main", "count": 1, "topologyRequest": {"unconstrained": True},
            "template": {"spec": {"containers": [{"name": "main", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                "limits": {"nvidia.com/gpu": str(gpus)}}}]}},
        }]},
    }


def admitted_count() -> int:
    return Workload.objects.filter(status__in=[WorkloadStatus.ADMITTED, WorkloadStatus.QUOTA_RESERVED]).count()


def assert_results_whole() -> None:
    """Everything a pass stores, stored together or not at all:

    * every pass that is visible finished (a pass row only ever appears with its results);
    * every admitted workload has one PodSetAssignment per PodSet of its admission, each with
      its decoded domains, whose pod counts add up to the PodSet's count;
    * no workload was admitted twice (one Admitted event each, from a finished pass), and the
      passes' admitted counters add up to the admitted workloads;
    * nothing is stored for a workload that is not admitted.
    """
    assert not SchedulingPass.objects.filter(finished_at__isnull=True).exists()
    admitted = list(Workload.objects.filter(status__in=[WorkloadStatus.ADMITTED, WorkloadStatus.QUOTA_RESERVED]))
    for wl in admitted:
        pod_sets = wl.raw["status"]["admission"]["podSetAssignments"]
        rows = {row.pod_set: row for row in PodSetAssignment.objects.filter(workload=wl)}
        assert set(rows) == {ps["name"] for ps in pod_sets}, f"{wl.key}: assignments {sorted(rows)}"
        for ps in pod_sets:
            row = rows[ps["name"]]
            assert row.count == ps["count"]
            assert row.encoded == ps.get("topologyAssignment")
            if row.encoded is not None:
                domains = list(AssignmentDomain.objects.filter(assignment=row))
                assert domains, f"{wl.key}/{row.pod_set}: no decoded domains"
                assert sum(d.count for d in domains) == row.count
        events = WorkloadEvent.objects.filter(workload=wl, kind=EventKind.ADMITTED)
        assert events.count() == 1, f"{wl.key} admitted {events.count()} times"
        assert events.get().scheduling_pass.finished_at is not None
    others = Workload.objects.exclude(id__in=[wl.id for wl in admitted])
    assert not PodSetAssignment.objects.filter(workload__in=others).exists()
    assert sum(SchedulingPass.objects.values_list("admitted", flat=True)) == len(admitted)


# ---------------------------------------------------------------- the local Redis server


def _redis_address() -> tuple[str, int]:
    url = urlsplit(settings.REDIS_URL)
    return url.hostname or "127.0.0.1", url.port or 6379


def redis_up() -> bool:
    host, port = _redis_address()
    try:
        return bool(redis.Redis(host=host, port=port, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.exceptions.RedisError:
        return False


def redis_stop() -> None:
    host, port = _redis_address()
    subprocess.run(["redis-cli", "-h", host, "-p", str(port), "shutdown", "nosave"], capture_output=True,
                   timeout=10, check=False)
    wait_for(lambda: not redis_up(), timeout=10, what="Redis to stop")


def redis_start() -> None:
    """Start the local server as scripts/ensure-services.sh does, and wait for it."""
    host, port = _redis_address()
    if host not in {"127.0.0.1", "localhost", "::1"}:
        pytest.fail(f"REDIS_URL points at {host}: only a local Redis can be restarted by the tests")
    for folder in ("/var/lib/redis", "/var/log/redis"):
        Path(folder).mkdir(parents=True, exist_ok=True)
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", str(port),
                    "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
                    "--logfile", "/var/log/redis/ci.log"], check=True, timeout=10)
    wait_for(redis_up, timeout=30, what="Redis to start")


def redis_ensure_up() -> None:
    if not redis_up():
        redis_start()
