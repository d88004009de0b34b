"""benchmarks/bench_scheduler_state.py: its seeding and its passes, run tiny.

No timing is asserted (the machine is shared); what must hold at any size: the mirror holds
what was asked for, the admitted workloads' TopologyAssignments respect the nodes' GPUs,
the measured pass admits exactly the workloads the finished ones made room for, a pass
with nothing changed writes nothing, and the warm state equals one built afresh.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scheduler_state as bench  # noqa: E402

pytestmark = [pytest.mark.services, pytest.mark.django_db]

TINY = bench.BenchSettings(nodes=200, workloads=1_000, admitted=100, admit=20, node_changes=10)


def quiet(_message: str) -> None:
    pass


def test_plan_gives_the_finishing_ones_the_shapes_the_pass_admits() -> None:
    admitted, pending = bench.plan_workloads(TINY)
    assert len(admitted) == TINY.admitted and len(pending) == TINY.pending
    first = sorted(pending, key=lambda p: (-p.priority, p.created))[:TINY.admit]
    assert Counter(p.shape for p in first) == Counter(a.shape for a in admitted if a.finishes)
    # no pending workload may preempt an admitted one (LowerPriority within the ClusterQueue)
    assert max(p.priority for p in pending) <= min(a.priority for a in admitted)


def test_seed_and_measure() -> None:
    from scheduler.codec import decode_assignment
    from tasweb.cluster import models as cluster
    from tasweb.simulator import objects as k8s

    info = bench.seed(TINY, log=quiet)
    assert info.counts["nodes"] == 200
    assert info.counts["workloads"] == 1_000
    assert info.counts["workloads_admitted"] == 100
    assert info.counts["workloads_pending"] == 900
    assert len(info.finishing) == 20 and len(info.node_changes) == 10

    # every admitted workload's pods are on existing nodes, within their GPUs
    gpus: Counter[str] = Counter()
    for raw in cluster.Workload.objects.filter(status="Admitted").values_list("raw", flat=True):
        requests = {ps["name"]: int(ps["template"]["spec"]["containers"][0]["resources"]["requests"][k8s.GPU])
                    for ps in raw["spec"]["podSets"]}
        for psa in raw["status"]["admission"]["podSetAssignments"]:
            ta = decode_assignment(psa["topologyAssignment"])
            assert ta.pod_count == psa["count"]
            for domain in ta.domains:
                gpus[domain.values[-1]] += domain.count * requests[psa["name"]]
    serving = set(cluster.Pod.objects.filter(namespace=k8s.SERVING[0]).values_list("node_name", flat=True))
    assert set(gpus) <= set(cluster.Node.objects.values_list("name", flat=True))
    for node, used in gpus.items():
        assert used <= bench.GPUS_PER_NODE - (4 if node in serving else 0), node
    assert sum(gpus.values()) == info.gpu_quota

    figures = bench.measure(info, verify=True)
    passes = figures["passes"]
    assert passes["first"]["counts"]["admitted"] == 0  # the quota is full
    assert passes["admit"]["counts"]["admitted"] == TINY.admit == info.expected_admitted
    assert passes["admit"]["counts"]["changes"] >= TINY.admit  # the finished ones came through the change log
    assert passes["quiet"]["counts"]["rows_written"] == 0
    assert passes["quiet"]["counts"]["changes"] == 0
    assert figures["rebuilt_in"] == []
    # a restart builds the state again from the database, which already says all it decides
    assert "build" in passes["restart"]["parts"] and passes["restart"]["counts"]["rows_written"] == 0
    assert passes["after_restart"]["counts"]["rows_written"] == 0
    assert figures["differences_from_rebuild"] == []
    assert figures["build"]["engine"] == {"nodes": 200, "workloads": 1_000, "pods": info.counts["pods"]}
    assert [v[-1] for v in bench.verdicts(figures)][2:] == [True, True]  # memory, at this size


@pytest.mark.services
def test_a_kept_seeded_copy_is_started_from_only_with_the_settings_it_was_seeded_with() -> None:
    import json
    import os
    import re
    import subprocess

    import psycopg
    from benchdb import server_url
    from psycopg import sql

    suffix = os.getpid()
    database, copy = f"tas_test_seeded_{suffix}", f"tas_test_seeded_copy_{suffix}"
    tiny = ["--nodes", "200", "--workloads", "1000", "--admitted", "100", "--admit", "20", "--node-changes", "10"]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}

    def run(*argv: str) -> str:
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scheduler_state.py"), *argv,
                               "--database", database, "--seeded", copy], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        assert re.search(r"workloads admitted by the measured pass +(\d+) +expected +\1 +PASS", proc.stdout)
        speed = re.search(r"machine speed: a fixed Python loop \(benchdb.python_speed_probe\) took "
                          r"(\d+\.\d+) s before the passes and (\d+\.\d+) s after", proc.stdout)
        assert speed and all(float(seconds) > 0 for seconds in speed.groups()), proc.stdout[-2000:]
        units = re.search(r"in units of that loop \(the mean of the two\): the measured pass (\d+\.\d), the build "
                          r"(\d+)", proc.stdout)
        measured = re.search(r"pass admitting \d+ \(scheduling_pass_run\) +(\d+\.\d+)", proc.stdout)
        assert units and measured, proc.stdout[-2000:]
        mean = (float(speed.group(1)) + float(speed.group(2))) / 2
        assert float(units.group(1)) == pytest.approx(float(measured.group(1)) / mean, abs=0.15, rel=0.01)
        return proc.stdout

    try:
        first = run(*tiny)
        assert f"kept a copy of the seeded database as {copy}" in first and "started from" not in first
        second = run(*tiny)
        assert f"started from {copy}, seeded as asked earlier" in second and "seeded in" not in second
        other = run(*[v if v != "20" else "10" for v in tiny])  # another --admit: another seed
        assert f"{copy} was seeded with other settings: seeding again" in other and "seeded in" in other
        # a copy whose seeding code was another (an older version of the seeder) is not used either
        kept = json.loads(bench.seeded_copy_read(copy))
        with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(copy), sql.Literal(json.dumps({**kept, "code": "an older seeder"}))))
        older = run(*[v if v != "20" else "10" for v in tiny])
        assert f"{copy} was seeded by other code: seeding again" in older and "seeded in" in older
    finally:
        with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
            for name in (database, copy):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
