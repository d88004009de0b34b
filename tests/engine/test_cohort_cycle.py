"""Cohorts whose parents form a cycle, as Kueue treats them: the objects are kept (no input
error), every ClusterQueue under the cycle admits nothing ("ClusterQueue X is inactive", Kueue's
snapshot leaves it out as inactive) while the rest of the cluster schedules as usual, and the
ClusterQueues admit again as soon as the cycle is broken. Kueue's API: "If a cycle is created,
we disable all members of the Cohort, including ClusterQueues, until the cycle is removed."
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.engine import Engine
from scheduler.eta import estimate
from scheduler.quota import cohort_cycles
from scheduler.second_pass import second_pass_blocked

from .factories import (
    HOSTNAME,
    NOW,
    RACK,
    admitted,
    domains_json,
    gates,
    grid,
    local_queue,
    parse,
    parse_one,
    queue_with_policy,
    resource_flavor,
    run,
    topology,
    workload,
)


def cohort(name: str, parent: str | None = None) -> dict:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def queue(name: str, cohort_name: str | None) -> list[dict]:
    """A ClusterQueue of 8 CPUs in `cohort_name`, its LocalQueue lq-NAME and a waiting workload
    wl-NAME of 2 pods that fits it."""
    return [queue_with_policy(name, cpu=8, cohort=cohort_name), local_queue(f"lq-{name}", cluster_queue_name=name),
            workload(f"wl-{name}", queue=f"lq-{name}", count=2, cpu="1", required=RACK)]


def cluster(*cohorts: dict, queues: dict[str, str | None]) -> list[dict]:
    objects = [topology(), resource_flavor(), *grid(cpu="4"), *cohorts]
    for name, cohort_name in queues.items():
        objects += queue(name, cohort_name)
    return objects


def statuses(result) -> dict[str, tuple[str, str]]:
    return {w.workload.name: (w.status, w.message) for w in result.workloads}


# ---------------------------------------------------------------- which Cohorts have a cycle


@pytest.mark.parametrize(("parents", "want"), [
    ({"a": None, "b": "a"}, {}),
    ({"a": "b", "b": "a"}, {"a": ("a", "b", "a"), "b": ("b", "a", "b")}),
    ({"s": "s"}, {"s": ("s", "s")}),
    # a Cohort whose parent chain only runs into a cycle has one too (Kueue's HasCycle)
    ({"d": "a", "a": "b", "b": "c", "c": "a"},
     {"d": ("d", "a", "b", "c", "a"), "a": ("a", "b", "c", "a"), "b": ("b", "c", "a", "b"),
      "c": ("c", "a", "b", "c")}),
    ({"e": "d", "d": "a", "a": "b", "b": "a"},
     {"e": ("e", "d", "a", "b", "a"), "d": ("d", "a", "b", "a"), "a": ("a", "b", "a"), "b": ("b", "a", "b")}),
    # a parent that is no Cohort object is a root
    ({"m": "implicit", "x": "m"}, {}),
])
def test_cohort_cycles(parents, want):
    assert cohort_cycles(parents) == want


# ---------------------------------------------------------------- one pass


def test_the_cluster_queues_under_a_cycle_admit_nothing_and_the_rest_schedules():
    objects = cluster(cohort("a", "b"), cohort("b", "a"), cohort("d", "a"), cohort("r"),
                      queues={"in-cycle": "a", "leads-in": "d", "in-tree": "r", "alone": None, "implicit": "nowhere"})
    warnings: list[str] = []
    result = run(objects, warnings=warnings)
    got = statuses(result)
    assert got["wl-in-cycle"] == ("Inadmissible", "ClusterQueue in-cycle is inactive")
    assert got["wl-leads-in"] == ("Inadmissible", "ClusterQueue leads-in is inactive")
    for name in ("in-tree", "alone", "implicit"):
        assert got[f"wl-{name}"][0] == "Admitted"
    (warning,) = [w for w in warnings if "cycle" in w]
    assert warning.startswith("Cohort/a: Cohorts form a cycle (a -> b -> a)")
    assert "(here: in-cycle, leads-in)" in warning


def test_a_cohort_that_is_its_own_parent_is_a_cycle():
    result = run(cluster(cohort("s", "s"), queues={"cq": "s"}))
    assert statuses(result)["wl-cq"] == ("Inadmissible", "ClusterQueue cq is inactive")


def test_the_condition_and_why_pending_say_why():
    engine = Engine.from_parsed(parse(cluster(cohort("a", "b"), cohort("b", "a"), queues={"cq": "a"})), gates())
    outcome = engine.run_pass(NOW)
    result = outcome.decided["default/wl-cq"]
    reserved = next(c for c in result.conditions if c.type == "QuotaReserved")
    assert (reserved.status, reserved.message) == ("False", "ClusterQueue cq is inactive")
    why = engine.explain("default/wl-cq", NOW)
    assert why.fits is False
    assert why.summary == ("ClusterQueue cq is inactive: its Cohort a is in a cycle of Cohorts (a -> b -> a), and "
                           "Kueue admits nothing in the ClusterQueues under a cycle until it is broken; parked as "
                           "inadmissible since pass 1, cycle 1, 2025-06-01T12:00:00Z, requeued by the next change to "
                           "ClusterQueue cq or to Cohort(s) a, b that breaks the cycle")


def test_the_command_line_reads_a_cycle_and_warns(tmp_path: Path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(cluster(cohort("a", "b"), cohort("b", "a"), queues={"cq": "a"})))
    code = main(["simulate", str(path), "--now", NOW.isoformat().replace("+00:00", "Z"), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 0
    assert "warning: Cohort/a: Cohorts form a cycle (a -> b -> a)" in captured.err
    assert "ClusterQueue cq is inactive" in captured.out


# ---------------------------------------------------------------- a long-lived engine


def test_breaking_the_cycle_lets_the_queue_admit_and_closing_one_stops_it():
    engine = Engine.from_parsed(parse(cluster(cohort("a", "b"), cohort("b", "a"), queues={"cq": "a"})), gates())
    assert engine.run_pass(NOW).decided["default/wl-cq"].status == "Inadmissible"

    engine.upsert(parse_one(cohort("b")))  # b becomes a root
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert outcome.decided["default/wl-cq"].status == "Admitted"

    engine.upsert(parse_one(cohort("b", "a")))  # the cycle again
    engine.upsert(parse_one(workload("later", queue="lq-cq", count=2, cpu="1", required=RACK, created=5)))
    outcome = engine.run_pass(NOW + timedelta(seconds=2))
    assert (outcome.decided["default/later"].status, outcome.decided["default/later"].message) == (
        "Inadmissible", "ClusterQueue cq is inactive")
    # what it admitted goes on running
    assert engine.state.workload("default/wl-cq").is_admitted


def test_a_workload_waiting_for_a_second_pass_under_a_cycle_is_turned_away():
    running = admitted(workload("held", queue="lq-cq", count=1, cpu="1", required=RACK),
                       assignments={"main": domains_json([HOSTNAME], [("x1", 1)])}, cluster_queue_name="cq")
    state = Engine.from_parsed(parse([*cluster(cohort("a", "b"), cohort("b", "a"), queues={"cq": "a"}), running]),
                               gates()).state
    assert second_pass_blocked(state, state.workload("default/held")) == "ClusterQueue cq is inactive"


def test_the_start_estimate_names_the_cycle_instead_of_a_start():
    engine = Engine.from_parsed(parse(cluster(cohort("a", "b"), cohort("b", "a"), queues={"cq": "a", "free": None})),
                                gates())
    engine.run_pass(NOW)
    predictions = estimate(engine, NOW).predictions
    assert predictions["default/wl-cq"].start is None
    assert predictions["default/wl-cq"].reason == (
        "not while ClusterQueue cq is inactive: its Cohort a is in a cycle of Cohorts (a -> b -> a), and Kueue "
        "admits nothing in the ClusterQueues under a cycle until it is broken")
    # once the cycle is broken, the estimate predicts a start again
    engine.upsert(parse_one(cohort("b")))
    engine.sync(NOW)
    assert estimate(engine, NOW).predictions["default/wl-cq"].start is not None
