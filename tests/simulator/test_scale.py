"""A large simulated cluster: seeded in bulk batches, and ticks that read what changes, not the cluster."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasweb.cluster import models as cluster
from tasweb.simulator import objects as k8s
from tasweb.simulator import services
from tasweb.simulator.models import SimulatorState
from tasweb.simulator.services import simulator_seed

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]

# 4 x 25 x 40: big enough that reading every node or pod would show, small enough to seed in a second
LARGE = {"blocks": 4, "racks_per_block": 25, "nodes_per_rack": 40}
NODES = 4_000
SERVING = NODES // 20


@pytest.fixture
def inserts(monkeypatch) -> list[int]:
    """The size of every bulk insert the simulator makes, in batches of 1,000."""
    sizes: list[int] = []
    real = services.rows_insert

    def counted(*, model, rows):
        rows = list(rows)
        sizes.append(len(rows))
        real(model=model, rows=rows)

    monkeypatch.setattr(services, "WRITE_BATCH", 1_000)
    monkeypatch.setattr(services, "rows_insert", counted)
    return sizes


def sequential_reads() -> dict[str, int]:
    """Rows of the node and pod tables read by sequential scans so far in this transaction."""
    tables = {cluster.Node._meta.db_table: "Node", cluster.Pod._meta.db_table: "Pod"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, COALESCE(seq_tup_read, 0) FROM pg_stat_xact_user_tables "
                       "WHERE relname = ANY(%s)", [list(tables)])
        return {tables[name]: rows for name, rows in cursor.fetchall()}


def test_a_large_cluster_is_seeded_in_bulk_batches(inserts):
    config = quiet(**LARGE)

    with CaptureQueriesContext(connection) as queries:
        report = simulator_seed(config=config, now=START)

    assert report.created == {"Node": NODES, "Pod": NODES + SERVING, "ClusterQueue": 1, "LocalQueue": 2,
                              "ResourceFlavor": 1, "Topology": 1, "WorkloadPriorityClass": 3}
    assert cluster.Node.objects.count() == NODES
    pods = Counter(cluster.Pod.objects.values_list("namespace", flat=True))
    assert pods == {"gpu-operator": NODES, "serving": SERVING}
    assert cluster.Pod.objects.filter(namespace="gpu-operator").values("node_name").distinct().count() == NODES
    # a batch of at most 1,000 objects a statement, never one statement an object
    assert sum(inserts) == NODES + NODES + SERVING
    assert max(inserts) == 1_000 and len(inserts) == 4 + 5
    assert len(queries) < 60, f"{len(queries)} statements"
    # every object took the next resourceVersion, in bulk as one by one
    versions = sorted(rv for model in (cluster.Node, cluster.Pod) for rv in
                      model.objects.values_list("rv_number", flat=True))
    assert versions == list(range(versions[0], versions[0] + len(versions)))
    assert SimulatorState.objects.get().resource_version == versions[-1]


def test_reseeding_a_large_cluster_removes_and_adds_nodes_in_batches(inserts):
    simulator_seed(config=quiet(**LARGE), now=START)
    inserts.clear()

    with CaptureQueriesContext(connection) as queries:
        report = simulator_seed(config=quiet(**{**LARGE, "nodes_per_rack": 30}), now=START)
    assert report.deleted["Node"] == 1_000
    assert len(queries) < 40, f"{len(queries)} statements"
    assert cluster.Node.objects.count() == cluster.Pod.objects.filter(namespace="gpu-operator").count() == 3_000
    assert cluster.Pod.objects.filter(namespace="serving").count() == 3_000 // 20

    report = simulator_seed(config=quiet(**LARGE), now=START)
    assert report.created["Node"] == 1_000
    assert cluster.Node.objects.count() == cluster.Pod.objects.filter(namespace="gpu-operator").count() == NODES
    assert cluster.Pod.objects.filter(namespace="serving").count() == SERVING


def test_ticks_on_a_large_busy_cluster_read_no_table_sequentially(run_ticks):
    config = quiet(**LARGE, initial_workloads=12, max_waiting=100)
    simulator_seed(config=config, now=START)
    run_ticks(3, config=config)  # arrivals and admissions; pods created and ungated; pods bound
    busy = set(cluster.Pod.objects.filter(tas=True, phase="Running").values_list("node_name", flat=True))
    assert len(busy) >= 20
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # what autovacuum does to a table that grew: the planner knows its sizes
    before = sequential_reads()

    reports = run_ticks(3, config=config.with_overrides(node_failures_per_minute=60, drains_per_minute=30,
                                                        arrivals_per_minute=60), scheduler=False)

    failed = [name for r in reports for name in r.failures + r.drains]
    assert len(failed) >= 3 and set(failed) <= busy  # faults strike where jobs run
    assert sum(r.pods_failed for r in reports) > 0
    after = sequential_reads()
    # the daemon pod on every node and the idle nodes are never read
    assert {kind: after.get(kind, 0) - before.get(kind, 0) for kind in ("Node", "Pod")} == {"Node": 0, "Pod": 0}


def test_faults_on_a_large_idle_cluster_sample_nodes_without_reading_them_all(clock):
    config = quiet(**LARGE, node_failures_per_minute=90, drains_per_minute=60)
    simulator_seed(config=config, now=START)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    before = sequential_reads()

    reports = [services.simulator_tick(now=clock.advance(2), config=config) for _ in range(3)]

    struck = [name for r in reports for name in r.failures + r.drains]
    assert len(struck) >= 4 and len(set(struck)) == len(struck)
    assert set(struck) <= set(cluster.Node.objects.filter(name__in=struck).values_list("name", flat=True))
    after = sequential_reads()
    assert {kind: after.get(kind, 0) - before.get(kind, 0) for kind in ("Node", "Pod")} == {"Node": 0, "Pod": 0}


def test_on_a_small_cluster_faults_find_the_last_healthy_nodes(clock):
    config = quiet(blocks=1, racks_per_block=2, nodes_per_rack=4, node_failures_per_minute=600,
                   failure_min_seconds=600, failure_max_seconds=600)
    simulator_seed(config=config, now=START)

    first = services.simulator_tick(now=clock.advance(2), config=config)
    second = services.simulator_tick(now=clock.advance(2), config=config)

    # about 20 failures wanted a tick: every node fails at once, none is left to fail after
    assert sorted(first.failures) == sorted(k8s.node_names(config))
    assert second.failures == []


def test_a_tick_reads_the_flavors_topology_levels_once(run_ticks, monkeypatch):
    from tasweb.cluster import services as mirror

    config = quiet(initial_workloads=12, max_waiting=100, runtime_min_seconds=4, runtime_max_seconds=8)
    simulator_seed(config=config, now=START)
    run_ticks(4, config=config)  # admissions; pods created, ungated, bound and running
    reads, admitted_checks = [], []
    read, check = mirror._read_flavor_levels, mirror._check_assignment_levels

    def counted_read(flavors):
        reads.append(flavors)
        return read(flavors)

    def counted_check(wl):
        if wl.admission is not None:
            admitted_checks.append(wl.key)
        return check(wl)

    monkeypatch.setattr(mirror, "_read_flavor_levels", counted_read)
    monkeypatch.setattr(mirror, "_check_assignment_levels", counted_check)
    # on until admitted Workloads are written (pods ready, jobs finished), with passes between
    reports = run_ticks(40, config=config, until=lambda: len(admitted_checks) >= 4)
    assert len(admitted_checks) >= 4
    assert len(reads) <= len(reports)  # once a tick at most, whatever the number of workloads written
