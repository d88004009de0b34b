"""A ClusterQueue's or LocalQueue's spec.stopPolicy, as Kueue applies it: Hold admits nothing
more (its waiting workloads are Inadmissible, "ClusterQueue X is stopped"); HoldAndDrain also
evicts the admitted ones (ClusterQueueStopped / LocalQueueStopped); back to None, the queue
admits again."""

from __future__ import annotations

import copy
import dataclasses
from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.model import STOP_HOLD, STOP_HOLD_AND_DRAIN, STOP_NONE

from .factories import (
    NOW,
    RACK,
    admitted,
    domains_json,
    gates,
    local_queue,
    node,
    parse,
    parse_one,
    queue_with_policy,
    resource_flavor,
    topology,
    workload,
)

HOST_LEVELS = ["cloud.provider.com/topology-block", RACK, "kubernetes.io/hostname"]


def cluster(*, cq_policy: str | None = None, lq_policy: str | None = None) -> list[dict]:
    cq = queue_with_policy("cq", cpu=8)
    if cq_policy is not None:
        cq["spec"]["stopPolicy"] = cq_policy
    lq = local_queue("lq", cluster_queue_name="cq")
    if lq_policy is not None:
        lq["spec"]["stopPolicy"] = lq_policy
    running = admitted(workload("running", queue="lq", count=2, cpu="1", required=RACK),
                       assignments={"main": domains_json(HOST_LEVELS, [(("b1", "r1", "x1"), 2)])},
                       cluster_queue_name="cq")
    return [topology(), resource_flavor(), cq, lq, node("x1", block="b1", rack="r1", cpu="4"),
            node("x2", block="b1", rack="r1", cpu="4"), running,
            workload("waiting", queue="lq", count=2, cpu="1", required=RACK, created=10)]


def engine_of(objects) -> Engine:
    return Engine.from_parsed(parse(objects), gates())


def decided(outcome) -> dict[str, tuple[str, str]]:
    return {k.split("/")[1]: (r.status, r.message) for k, r in outcome.decided.items()}


def test_running_queue_admits():
    outcome = engine_of(cluster()).run_pass(NOW)
    assert decided(outcome)["waiting"][0] == "Admitted"


@pytest.mark.parametrize("policy", [STOP_HOLD, STOP_HOLD_AND_DRAIN])
def test_a_stopped_cluster_queue_admits_nothing(policy):
    outcome = engine_of(cluster(cq_policy=policy)).run_pass(NOW)
    assert decided(outcome)["waiting"] == ("Inadmissible", "ClusterQueue cq is stopped")


@pytest.mark.parametrize("policy", [STOP_HOLD, STOP_HOLD_AND_DRAIN])
def test_a_stopped_local_queue_admits_nothing_and_is_named_first(policy):
    outcome = engine_of(cluster(cq_policy=STOP_HOLD, lq_policy=policy)).run_pass(NOW)
    assert decided(outcome)["waiting"] == ("Inadmissible", "LocalQueue lq is stopped")


def test_hold_keeps_the_admitted_running():
    engine = engine_of(cluster(cq_policy=STOP_HOLD))
    outcome = engine.run_pass(NOW)
    assert "running" not in decided(outcome)
    assert not engine.state.workload("default/running").condition_true("Evicted")


@pytest.mark.parametrize(("cq_policy", "lq_policy", "reason", "message"), [
    (STOP_HOLD_AND_DRAIN, None, "ClusterQueueStopped", "The ClusterQueue is stopped"),
    (None, STOP_HOLD_AND_DRAIN, "LocalQueueStopped", "The LocalQueue is stopped"),
    # the LocalQueue is reconciled first: Hold there does not drain, the ClusterQueue does
    (STOP_HOLD_AND_DRAIN, STOP_HOLD, "ClusterQueueStopped", "The ClusterQueue is stopped"),
])
def test_hold_and_drain_evicts_the_admitted(cq_policy, lq_policy, reason, message):
    engine = engine_of(cluster(cq_policy=cq_policy, lq_policy=lq_policy))
    outcome = engine.run_pass(NOW)
    wl = engine.state.workload("default/running")
    evicted = wl.condition("Evicted")
    assert (evicted.status, evicted.reason, evicted.message) == ("True", reason, message)
    assert [(e.key, e.reason, e.message) for e in outcome.result.events if e.key == "default/running"] == [
        ("default/running", f"EvictedDueTo{reason}", message)]
    assert [d.trigger for d in outcome.result.decisions if d.key == "default/running"] == [reason]
    # evicted once: the next pass leaves it as it is
    again = engine.run_pass(NOW + timedelta(seconds=1))
    assert not [e for e in again.result.events if e.key == "default/running"]


def test_resumed_queue_admits_again_and_changes_are_applied_one_at_a_time():
    engine = engine_of(cluster(cq_policy=STOP_HOLD))
    assert decided(engine.run_pass(NOW))["waiting"][0] == "Inadmissible"
    cq = engine.state.cluster_queues["cq"]
    engine.upsert(dataclasses.replace(cq, stop_policy=STOP_NONE))
    assert decided(engine.run_pass(NOW + timedelta(seconds=1)))["waiting"][0] == "Admitted"

    lq = engine.state.local_queues["default/lq"]
    engine.upsert(dataclasses.replace(lq, stop_policy=STOP_HOLD_AND_DRAIN))
    outcome = engine.run_pass(NOW + timedelta(seconds=2))
    evicted = {d.key for d in outcome.result.decisions if d.kind == "WorkloadEvicted"}
    assert evicted == {"default/running", "default/waiting"}


def test_a_stopped_queue_is_rebuilt_the_same():
    objects = cluster(cq_policy=STOP_HOLD_AND_DRAIN)
    warm = engine_of(copy.deepcopy(objects))
    warm.run_pass(NOW)
    cold = engine_of(copy.deepcopy(objects))
    cold.run_pass(NOW)
    assert warm.queues.orphans.keys() == cold.queues.orphans.keys() == {"default/waiting"}


def test_an_unknown_stop_policy_is_refused():
    lq = local_queue("lq", cluster_queue_name="cq")
    lq["spec"]["stopPolicy"] = "Pause"
    with pytest.raises(InputError, match=r"spec.stopPolicy"):
        parse_one(lq)
    assert parse_one({**lq, "spec": {"clusterQueue": "cq"}}).stop_policy == STOP_NONE


@pytest.mark.parametrize(("cq_policy", "lq_policy", "summary"), [
    (STOP_HOLD, None, "ClusterQueue cq is stopped"),
    (None, STOP_HOLD_AND_DRAIN, "LocalQueue lq is stopped"),
])
def test_why_pending_says_the_queue_is_stopped_before_and_after_a_pass(cq_policy, lq_policy, summary):
    engine = engine_of(cluster(cq_policy=cq_policy, lq_policy=lq_policy))
    # before any cycle looked at it, computed afresh: there is room, but the queue admits nothing
    before = engine.explain("default/waiting", NOW)
    assert (before.fits, before.summary) == (False, summary)
    engine.run_pass(NOW)
    after = engine.explain("default/waiting", NOW)
    assert (after.fits, after.summary) == (False, summary)
