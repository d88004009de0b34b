"""Ticks: arrivals, faults and recoveries at the configured rates, reproducible from the seed."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db import transaction

from scheduler.assignment import HOSTNAME_LABEL
from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.scheduling.models import EventKind, WorkloadEvent
from tasweb.simulator import objects as k8s
from tasweb.simulator.models import SimulatorState
from tasweb.simulator.services import DRAIN_TAINT_KEY, poisson, simulator_seed, simulator_tick

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]


class Rollback(Exception):
    pass


def test_poisson_counts_have_the_requested_mean():
    rng = random.Random(1)
    for mean in (0.05, 0.5, 3.0, 80.0):
        draws = [poisson(rng, mean) for _ in range(4000)]
        assert abs(sum(draws) / len(draws) - mean) < max(0.05, mean * 0.05)
    assert poisson(rng, 0) == 0


def test_jobs_arrive_at_the_configured_rate_with_every_kind_of_topology_request(run_ticks):
    config = quiet(arrivals_per_minute=30, max_waiting=10_000, too_big_fraction=0.1, two_pod_sets_fraction=0.2)
    simulator_seed(config=config, now=START)

    reports = run_ticks(100, config=config, scheduler=False)  # 200 s at 30/min: 100 expected

    arrivals = sum(r.arrivals for r in reports)
    assert 70 <= arrivals <= 130
    workloads = list(cluster.Workload.objects.all())
    assert len(workloads) == arrivals
    assert WorkloadEvent.objects.filter(kind=EventKind.QUEUED).count() == arrivals
    assert all(not w.invalid_reason and w.status == WorkloadStatus.PENDING for w in workloads)
    assert {w.namespace for w in workloads} == {"research", "training"}
    assert {w.queue_name for w in workloads} == {"gpu-jobs"}
    assert {w.priority for w in workloads} == {100, 500, 1000}

    modes: Counter[str] = Counter()
    two_pod_sets = too_big = 0
    for wl in workloads:
        pod_sets = wl.raw["spec"]["podSets"]
        two_pod_sets += len(pod_sets) == 2
        for ps in pod_sets:
            request = ps["topologyRequest"]
            assert request["podIndexLabel"] == k8s.INDEX_LABEL
            mode = next(m for m in ("required", "preferred", "unconstrained") if m in request)
            modes[mode] += 1
            if mode == "required" and request["required"] == k8s.RACK_LABEL and ps["count"] > config.nodes_per_rack:
                too_big += 1
            gpus = int(ps["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
            assert 1 <= gpus <= config.gpus_per_node
    assert min(modes.values()) >= 5 and len(modes) == 3
    assert two_pod_sets >= 5
    assert too_big >= 3


def test_the_same_seed_replays_the_same_ticks():
    config = quiet(arrivals_per_minute=30, node_failures_per_minute=10, drains_per_minute=5)
    simulator_seed(config=config, now=START)

    def replay() -> list:
        try:
            with transaction.atomic():
                reports = [simulator_tick(now=START + timedelta(seconds=2 * i), rng=random.Random(f"3:{i}"),
                                          config=config) for i in range(1, 16)]
                names = sorted(cluster.Workload.objects.values_list("name", flat=True))
                raise Rollback([(r.arrivals, r.failures, r.drains) for r in reports], names)
        except Rollback as done:
            return list(done.args)

    first = replay()
    assert first == replay()
    assert first[1]  # something happened


def test_the_first_tick_submits_the_initial_workloads_and_waiting_is_capped(clock):
    config = quiet(initial_workloads=9, arrivals_per_minute=600, max_waiting=12)
    simulator_seed(config=config, now=START)

    assert simulator_tick(now=clock.advance(2), config=config).arrivals == 12  # 9 + ~20, capped at 12
    assert simulator_tick(now=clock.advance(2), config=config).arrivals == 0
    assert cluster.Workload.objects.count() == 12


def test_nodes_fail_drain_and_recover_at_the_configured_rates(run_ticks, clock):
    config = quiet(node_failures_per_minute=6, drains_per_minute=3, failure_min_seconds=20, failure_max_seconds=40,
                   drain_min_seconds=20, drain_max_seconds=40)
    simulator_seed(config=config, now=START)
    failures, drains, recoveries = Counter(), Counter(), Counter()

    for _ in range(150):  # 300 s: 30 failures and 15 drains expected
        out_before = set(SimulatorState.objects.get().outages)
        (report,) = run_ticks(1, config=config, scheduler=False)
        # a node out of service is not hit again
        assert not set(report.failures + report.drains) & (out_before - set(report.recoveries))
        for name in report.failures:
            node = cluster.Node.objects.get(name=name)
            assert (node.ready, node.ready_since) == ("False", clock.now)
            failures[name] += 1
        for name in report.drains:
            node = cluster.Node.objects.get(name=name)
            assert node.unschedulable
            assert [t["key"] for t in node.taints] == [DRAIN_TAINT_KEY]
            assert node.taints[0]["effect"] == "NoSchedule"
            drains[name] += 1
        for name in report.recoveries:
            node = cluster.Node.objects.get(name=name)
            assert node.ready == "True" and not node.taints and not node.unschedulable
            recoveries[name] += 1
        # the bookkeeping matches the nodes
        out = SimulatorState.objects.get().outages
        unhealthy = set(cluster.Node.objects.exclude(ready="True").values_list("name", flat=True))
        cordoned = set(cluster.Node.objects.filter(unschedulable=True).values_list("name", flat=True))
        assert unhealthy | cordoned == set(out)

    assert 15 <= sum(failures.values()) <= 45
    assert 6 <= sum(drains.values()) <= 26
    assert sum(recoveries.values()) >= sum(failures.values()) + sum(drains.values()) - len(
        SimulatorState.objects.get().outages)
    totals = SimulatorState.objects.get().totals
    assert totals["failures"] == sum(failures.values())
    assert totals["drains"] == sum(drains.values())


def admitted_and_running(run_ticks, config, *, ticks: int = 6) -> cluster.Workload:
    simulator_seed(config=config, now=START)
    run_ticks(ticks, config=config)
    running = cluster.Pod.objects.filter(tas=True, phase="Running")
    assert running.exists(), "no pod of a TAS workload runs"
    return cluster.Workload.objects.get(namespace=running[0].namespace, name=running[0].workload_name)


def test_admitted_workloads_get_gated_pods_once_which_are_bound_where_the_ungater_sends_them(run_ticks):
    config = quiet(initial_workloads=6)
    simulator_seed(config=config, now=START)
    run_ticks(1, config=config)  # arrivals, then the pass admits some

    admitted = list(cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED))
    assert admitted
    assert not cluster.Pod.objects.filter(tas=True).exists()

    (report,) = run_ticks(1, config=config, scheduler=False)  # the Job controllers create the pods
    pods = list(cluster.Pod.objects.filter(tas=True))
    assert report.pods_created == len(pods) == sum(w.pod_count for w in admitted)
    for pod in pods:
        assert pod.gated and pod.phase == "Pending" and not pod.node_name
        meta = pod.raw["metadata"]
        assert meta["annotations"][k8s.WORKLOAD_ANNOTATION] == pod.workload_name
        assert meta["labels"][k8s.PODSET_LABEL] == pod.pod_set
        assert k8s.INDEX_LABEL in meta["labels"]
        assert pod.raw["spec"]["nodeSelector"] == k8s.FLAVOR_NODE_LABELS
    for wl in admitted:
        indexes = Counter((p.pod_set, p.raw["metadata"]["labels"][k8s.INDEX_LABEL]) for p in pods
                          if p.workload_name == wl.name)
        assert set(indexes.values()) == {1}
        assert len(indexes) == wl.pod_count

    (report,) = run_ticks(1, config=config, scheduler=False)
    assert report.pods_created == 0  # once

    from tasweb.scheduling.services import scheduling_pass_run

    record = scheduling_pass_run(now=START.replace(hour=13))
    assert record.pods_ungated == len(pods)
    (report,) = run_ticks(1, config=config, scheduler=False)  # kube-scheduler and kubelets
    assert report.pods_bound == len(pods)
    for pod in cluster.Pod.objects.filter(tas=True):
        assert pod.phase == "Running" and not pod.gated
        assert pod.node_name == pod.raw["spec"]["nodeSelector"][HOSTNAME_LABEL]
        assert pod.raw["status"]["startTime"]


def test_a_failed_node_takes_the_pods_of_tas_workloads_with_it(run_ticks):
    config = quiet(initial_workloads=6)
    admitted_and_running(run_ticks, config)
    busy = set(cluster.Pod.objects.filter(tas=True, phase="Running").values_list("node_name", flat=True))

    (report,) = run_ticks(1, config=config.with_overrides(node_failures_per_minute=30), scheduler=False)

    assert report.failures and set(report.failures) <= busy  # faults strike where jobs run
    for name in report.failures:
        for pod in cluster.Pod.objects.filter(node_name=name):
            if pod.tas:
                assert (pod.phase, pod.raw["status"]["reason"]) == ("Failed", "NodeLost")
            else:
                assert pod.phase == "Running"  # the daemon set's pod stays as it was
    assert report.pods_failed == cluster.Pod.objects.filter(tas=True, phase="Failed").count() > 0
    # the Job controller replaces every failed pod with a new gated one of the same index
    assert report.pods_created == report.pods_failed
    for failed in cluster.Pod.objects.filter(tas=True, phase="Failed"):
        index = failed.raw["metadata"]["labels"][k8s.INDEX_LABEL]
        twins = cluster.Pod.objects.filter(namespace=failed.namespace, workload_name=failed.workload_name,
                                           pod_set=failed.pod_set, gated=True, phase="Pending")
        assert index in {p.raw["metadata"]["labels"][k8s.INDEX_LABEL] for p in twins}


def test_a_drained_node_stops_the_pods_of_tas_workloads(run_ticks):
    config = quiet(initial_workloads=6)
    admitted_and_running(run_ticks, config)

    (report,) = run_ticks(1, config=config.with_overrides(drains_per_minute=30), scheduler=False)

    assert report.drains
    for name in report.drains:
        stopped = cluster.Pod.objects.filter(node_name=name, tas=True)
        assert stopped.exists()
        for pod in stopped:
            assert pod.phase == "Failed"
            conditions = {c["type"]: c for c in pod.raw["status"]["conditions"]}
            assert conditions["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"


def test_terminated_pods_are_collected_after_a_while(run_ticks):
    config = quiet(initial_workloads=6, pod_gc_seconds=10)
    admitted_and_running(run_ticks, config)
    run_ticks(1, config=config.with_overrides(node_failures_per_minute=30))
    failed = set(cluster.Pod.objects.filter(tas=True, phase="Failed").values_list("uid", flat=True))
    assert failed

    run_ticks(3, config=config)  # 6 s: kept
    assert failed <= set(cluster.Pod.objects.values_list("uid", flat=True))
    run_ticks(3, config=config)  # 12 s: gone
    assert not failed & set(cluster.Pod.objects.values_list("uid", flat=True))


def test_waiting_workloads_are_withdrawn_after_the_users_patience(run_ticks):
    config = quiet(initial_workloads=1, too_big_fraction=1.0, give_up_seconds=20)
    simulator_seed(config=config, now=START)
    run_ticks(1, config=config)
    wl = cluster.Workload.objects.get()
    assert wl.status in (WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE)
    assert "rack" in wl.raw["spec"]["podSets"][0]["topologyRequest"]["required"]

    run_ticks(8, config=config)
    assert cluster.Workload.objects.exists()
    reports = run_ticks(4, config=config)
    assert sum(r.gave_up for r in reports) == 1
    assert not cluster.Workload.objects.exists()
    # its history stays, and ends with the withdrawal, not with "Pending"
    history = list(WorkloadEvent.objects.filter(workload_key=wl.key).order_by("at", "id"))
    assert history[0].kind == EventKind.QUEUED
    last = history[-1]
    assert last.kind == EventKind.DELETED and last.at > history[-2].at and last.workload is None
    assert last.message.startswith("withdrawn: its owner gave up after waiting 2") and " s; it was " in last.message
    assert last.details["status"] in (WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE)


def test_every_write_takes_the_next_resource_version(run_ticks):
    config = quiet(initial_workloads=8, node_failures_per_minute=20)
    simulator_seed(config=config, now=START)
    last = SimulatorState.objects.get().resource_version

    for _ in range(6):
        (report,) = run_ticks(1, config=config)
        state = SimulatorState.objects.get()
        assert state.resource_version == last + report.writes - report.pods_deleted - report.workloads_deleted
        last = state.resource_version
        top = max(model.objects.order_by("-rv_number").values_list("rv_number", flat=True).first() or 0
                  for model in cluster.KINDS.values())
        assert top <= state.resource_version
