"""status.reclaimablePods (Kueue's ReclaimablePods, on by default): pods of a PodSet that
completed give their quota back while the rest run, a PodSet whose pods all completed frees
its topology domains, and a pending workload asks only for the pods it still needs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.errors import InputError

from .factories import (
    HOSTNAME,
    NOW,
    admitted,
    domains_json,
    gates,
    node,
    parse,
    parse_one,
    pod_set,
    result_of,
    run,
    tas_setup,
    workload,
)


def reclaiming(wl: dict, **counts: int) -> dict:
    """`wl` with `status.reclaimablePods` (PodSet name -> completed pods)."""
    status = dict(wl.get("status") or {})
    status["reclaimablePods"] = [{"name": name, "count": c} for name, c in counts.items()]
    return {**wl, "status": status}


def running(name: str, workers: int, *, node_name: str = "x1", cpu: str = "1") -> dict:
    """An admitted workload: a PodSet `workers` of `workers` pods on one node."""
    wl = workload(name, pod_sets=[pod_set("workers", count=workers, cpu=cpu, required=HOSTNAME)])
    return admitted(wl, assignments={"workers": domains_json([HOSTNAME], [(node_name, workers)])})


def quota_cluster(*extra: dict) -> list[dict]:
    return [*tas_setup(levels=(HOSTNAME,), quota={"cpu": "4"}), node("x1", cpu="8"), *extra]


def test_completed_pods_give_their_quota_back():
    waiting = workload("next", count=2, cpu="1", unconstrained=True, created=10)
    held = run(quota_cluster(running("batch", 4), waiting))
    assert result_of(held, "next").status != "Admitted"

    result = run(quota_cluster(reclaiming(running("batch", 4), workers=2), waiting))
    assert result_of(result, "next").status == "Admitted"


def test_the_gate_off_keeps_the_quota_held():
    waiting = workload("next", count=2, cpu="1", unconstrained=True, created=10)
    result = run(quota_cluster(reclaiming(running("batch", 4), workers=2), waiting),
                 feature_gates=gates(ReclaimablePods=False))
    assert result_of(result, "next").status != "Admitted"


def test_only_the_completed_pods_are_given_back():
    # 4 pods, 1 completed: 3 CPU still held of 4, so 2 more do not fit but 1 does
    two = workload("two", count=2, cpu="1", unconstrained=True, created=10)
    one = workload("one", count=1, cpu="1", unconstrained=True, created=20)
    result = run(quota_cluster(reclaiming(running("batch", 4), workers=1), two, one))
    assert result_of(result, "two").status != "Admitted"
    assert result_of(result, "one").status == "Admitted"


def two_single_cpu_nodes(*extra: dict) -> list[dict]:
    return [*tas_setup(levels=(HOSTNAME,)), node("x1", cpu="1"), node("x2", cpu="1"), *extra]


def driver_and_workers(workers: int = 1) -> dict:
    wl = workload("job", pod_sets=[pod_set("driver", count=1, cpu="1", required=HOSTNAME),
                                   pod_set("workers", count=workers, cpu=str(1 / workers), required=HOSTNAME)])
    return admitted(wl, assignments={"driver": domains_json([HOSTNAME], [("x1", 1)]),
                                     "workers": domains_json([HOSTNAME], [("x2", workers)])})


def test_a_podset_whose_pods_all_completed_frees_its_domains():
    waiting = workload("next", count=1, cpu="1", required=HOSTNAME, created=10)
    assert result_of(run(two_single_cpu_nodes(driver_and_workers(), waiting)), "next").status != "Admitted"

    result = run(two_single_cpu_nodes(reclaiming(driver_and_workers(), workers=1), waiting))
    placed = result_of(result, "next")
    assert placed.status == "Admitted"
    assert [(d.values, d.count) for d in placed.pod_sets[0].assignment.domains] == [(("x2",), 1)]


def test_a_podset_with_pods_still_running_keeps_its_domains():
    # two workers of half a CPU on x2, one completed: the other still runs there
    waiting = workload("next", count=1, cpu="1", required=HOSTNAME, created=10)
    result = run(two_single_cpu_nodes(reclaiming(driver_and_workers(2), workers=1), waiting))
    assert result_of(result, "next").status != "Admitted"


def test_a_pending_workload_asks_only_for_the_pods_it_still_needs():
    # requeued after 3 of its 4 pods completed: one pod is left to run, and 1 CPU is free
    requeued = reclaiming(workload("rerun", count=4, cpu="1", unconstrained=True), main=3)
    result = run(quota_cluster(running("batch", 3), requeued))
    rerun = result_of(result, "rerun")
    assert rerun.status == "Admitted"
    assert rerun.pod_sets[0].count == 1
    assert sum(d.count for d in rerun.pod_sets[0].assignment.domains) == 1

    held = run(quota_cluster(running("batch", 3), requeued), feature_gates=gates(ReclaimablePods=False))
    assert result_of(held, "rerun").status != "Admitted"


def test_pods_completing_in_a_running_engine_requeue_the_parked():
    waiting = workload("next", count=2, cpu="1", unconstrained=True, created=10)
    engine = Engine.from_parsed(parse(quota_cluster(running("batch", 4), waiting)), gates())
    first = engine.run_pass(NOW)
    assert first.admitted == 0

    engine.upsert(parse_one(reclaiming(running("batch", 4), workers=2)))
    second = engine.run_pass(NOW + timedelta(seconds=1))
    assert second.admitted == 1
    assert engine.state.workload_map["default/next"].has_quota_reservation


@pytest.mark.parametrize(("entries", "field", "reason"), [
    ([{"name": "nope", "count": 1}], "status.reclaimablePods[0].name", "names no PodSet of the workload: 'nope'"),
    ([{"name": "main", "count": 5}], "status.reclaimablePods[0].count", "should be less or equal to 4"),
    ([{"name": "main", "count": -1}], "status.reclaimablePods[0].count", ">= 0"),
    (["main"], "status.reclaimablePods[0]", "must be a mapping, got a string"),
    ([{"name": "main", "count": 1}, {"name": "main", "count": 2}], "status.reclaimablePods[1].name",
     "PodSet 'main' is listed twice"),
    ({"main": 1}, "status.reclaimablePods", "must be a list"),
])
def test_bad_reclaimable_pods_are_a_clear_error(entries, field, reason):
    wl = workload("bad", count=4)
    wl["status"] = {"reclaimablePods": entries}
    with pytest.raises(InputError) as caught:
        parse([wl])
    assert caught.value.field == field, caught.value.render()
    assert reason in caught.value.reason, caught.value.render()
    assert "Workload/default/bad" in caught.value.render() or "default/bad" in caught.value.render()
