"""benchmarks/kueue_perf_tas.py --mode stack: the replay against the running service, run tiny.

The stack run makes its own database and starts its own worker, so it runs as a separate
process (this test uses no test database of pytest-django's); it keeps its database, which
the test reads and then drops. No timing is asserted: what must hold is that every workload
finished in the service's database, was admitted by its passes, and that the measures have
engine mode's keys.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kueue_perf_stack as stack  # noqa: E402
import kueue_perf_tas as perf  # noqa: E402
from benchdb import server_url  # noqa: E402

DATABASE = "kueue_perf_stack_test"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

def engine_mode_keys() -> set[str]:
    result = perf.ReplayResult(mode="engine", scale=1, workloads=0, wall_s=0, setup_s=0, replay_s=0, cq_usage_pct=0,
                               avg_time_to_admission_ms={}, evictions=0, evictions_by_class={}, physical_bound_s=0,
                               instant_reference_ms={}, passes=0, admissions=0, engine_seconds={},
                               slowest_pass_ms=0)
    return set(result.to_json())


def drop_database() -> None:
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


@pytest.mark.services
def test_stack_mode_runs_every_workload_through_the_service(tmp_path: Path, kueue_files: tuple[Path, Path]) -> None:
    generator, rangespec = kueue_files
    out = tmp_path / "stack.json"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    redis_url = os.environ.get("REDIS_URL") or stack.DEFAULT_REDIS_URL
    argv = [sys.executable, str(ROOT / "benchmarks" / "kueue_perf_tas.py"), "--mode", "stack", "--scale", "0.01",
            "--config", str(generator), "--rangespec", str(rangespec),
            "--json", str(out), "--database", DATABASE, "--redis-url", redis_url, "--keep", "--timeout", "120"]
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        data = json.loads(out.read_text())
        assert set(data) == engine_mode_keys()
        assert data["mode"] == "stack"
        assert data["workloads"] == 270  # 30 ClusterQueues x 9 workloads sets of 1 at this scale
        assert data["admissions"] >= data["workloads"]
        assert data["passes"] > 0 and data["wall_s"] > data["replay_s"] > 0
        assert 0 < data["cq_usage_pct"] <= 100
        assert set(data["avg_time_to_admission_ms"]) == set(perf.read_rangespec(rangespec).avg_time_to_admission_ms)
        assert all(isinstance(ms, int) and ms >= 0 for ms in data["avg_time_to_admission_ms"].values())
        assert "this stack" in proc.stdout and "wall time (s)" in proc.stdout and "worker log" in proc.stdout
        # the worker's per-task lines were read: its task time stands beside its pass time
        tasks = re.search(r"Celery tasks ([\d.]+) s \((\d+) tasks, so -?[\d.]+ s outside the pass", proc.stdout)
        assert tasks is not None, proc.stdout[-4000:]
        assert int(tasks[2]) > 0
        with psycopg.connect(server_url(DATABASE)) as conn:
            statuses = dict(conn.execute("SELECT status, count(*) FROM cluster_workload GROUP BY status").fetchall())
            admitted = conn.execute("SELECT count(DISTINCT workload_key) FROM scheduling_workloadevent "
                                    "WHERE kind = 'Admitted' AND scheduling_pass_id IS NOT NULL").fetchone()[0]
            passes = conn.execute("SELECT count(*) FROM scheduling_schedulingpass "
                                  "WHERE finished_at IS NOT NULL").fetchone()[0]
        # every workload finished in the service's own database, each admitted by a pass
        assert statuses == {"Finished": data["workloads"]}
        assert admitted == data["workloads"]
        assert passes > data["passes"]  # the replay's passes and the worker's cold start before them
    finally:
        with contextlib.suppress(psycopg.Error):
            drop_database()


# ---------------------------------------------------------------- what the runner writes


def admitted_object() -> dict:
    return {
        "apiVersion": perf.V1B2, "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "uid": "ns/w", "resourceVersion": "7",
                     "creationTimestamp": "2025-06-01T11:59:00Z"},
        "spec": {"queueName": "ns", "priority": 50, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1,
                                                                      "flavors": {"cpu": "f"}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved",
                 "lastTransitionTime": "2025-06-01T11:59:30Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted",
                 "lastTransitionTime": "2025-06-01T11:59:30Z"},
                {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "preempted",
                 "lastTransitionTime": "2025-06-01T11:59:40Z"},
                {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": "preempted",
                 "lastTransitionTime": "2025-06-01T11:59:40Z"},
            ],
        },
    }


def test_a_released_workload_waits_again() -> None:
    """The runner's release reads, in the service's mirror, as a workload waiting in its queue
    (not Preempted any more), with Evicted and Preempted kept True as Kueue's runner leaves them."""
    from tasweb.cluster.services import workload_status

    preempted = admitted_object()
    assert workload_status(preempted)[0] == "Preempted"
    released = stack.released_raw(preempted, NOW)
    status, message = workload_status(released)
    assert status == "Pending" and message == "Evicted by the test runner"
    assert "admission" not in released["status"]
    conditions = {c["type"]: c for c in released["status"]["conditions"]}
    assert conditions["Evicted"]["status"] == conditions["Preempted"]["status"] == "True"
    assert conditions["QuotaReserved"]["status"] == conditions["Admitted"]["status"] == "False"
    assert conditions["QuotaReserved"]["lastTransitionTime"] == "2025-06-01T12:00:00Z"
    assert workload_status(preempted)[0] == "Preempted", "the row read is not changed"


def test_a_finished_workload_is_finished() -> None:
    from tasweb.cluster.services import workload_status

    running = admitted_object()
    running["status"]["conditions"] = running["status"]["conditions"][:2]
    assert workload_status(running)[0] == "Admitted"
    finished = stack.finished_raw(running, NOW)
    assert workload_status(finished)[0] == "Finished"
    assert finished["status"]["admission"] == running["status"]["admission"]
    condition = finished["status"]["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Finished", "True", "ByTest")
