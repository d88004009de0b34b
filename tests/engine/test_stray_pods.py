"""Stray and late pods: pending TAS pods pinned by their hostname node selector to a node
their workload has no topology assignment on are moved to Failed, as Kueue's TAS node
controller does.

The cluster of these tests: rack b1/r1 holds x1, x2 and x3, every node 4 CPU. The
workload `train` requires a rack and runs 2 pods of 2 CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from scheduler.cluster import ClusterState
from scheduler.engine import Engine
from scheduler.model import TOPOLOGY_GATE
from scheduler.output import result_json
from scheduler.results import NODE_REPLACED, POD_TERMINATED, PassResult
from scheduler.stray_pods import NO_ADMISSION, OFF_ASSIGNMENT

from .factories import (
    HOSTNAME,
    NAMESPACE,
    NOW,
    RACK,
    admitted,
    domains,
    domains_json,
    gates,
    node,
    parse,
    parse_one,
    result_of,
    run,
    run_passes,
    tas_setup,
    workload,
    workload_pod,
)

CONDITION = {"type": "TerminatedByKueue", "status": "True", "reason": "UnschedulableOnAssignedNode",
             "message": "Pod terminated by Kueue NodeController due to node taint"}


def rack(**x1: Any) -> list[dict]:
    return [node("x1", block="b1", rack="r1", cpu="4", **x1), node("x2", block="b1", rack="r1", cpu="4"),
            node("x3", block="b1", rack="r1", cpu="4")]


def train(assignment: Sequence[tuple[str, int]] | None = (("x1", 1), ("x2", 1)), **admitted_kwargs: Any) -> dict:
    """`train`, admitted on `assignment` (hostname level), or pending when it is None."""
    wl = workload("train", count=2, cpu="2", required=RACK)
    if assignment is None:
        return wl
    return admitted(wl, assignments={"main": domains_json([HOSTNAME], assignment)}, **admitted_kwargs)


def pinned(name: str, host: str = "x1", **kwargs: Any) -> dict:
    """A pending pod of `train` pinned to `host` by its hostname node selector."""
    kwargs.setdefault("phase", "Pending")
    return workload_pod(name, "train", node_selector={HOSTNAME: host}, cpu="2", **kwargs)


def failed_pods(result: PassResult) -> dict[str, dict]:
    return {p["name"]: p for p in result_json(result)["pods"] if p.get("phase") == "Failed"}


def terminations(result: PassResult) -> list[tuple[str, str, str]]:
    return [(d.key, d.node, d.trigger) for d in result.decisions if d.kind == POD_TERMINATED]


class TestStrayPods:
    """A workload without admission: every pending pod pinned to a node is stray."""

    def test_a_pinned_pending_pod_is_failed_with_kueues_condition(self):
        result = run([*tas_setup(), *rack(), train(None), pinned("stray")])
        out = failed_pods(result)
        assert list(out) == ["stray"]
        assert out["stray"]["namespace"] == NAMESPACE
        assert out["stray"]["nodeName"] == "x1"
        assert out["stray"]["conditions"] == [CONDITION]
        assert terminations(result) == [(f"{NAMESPACE}/train", "x1", NO_ADMISSION)]
        (decision,) = [d for d in result.decisions if d.kind == POD_TERMINATED]
        assert decision.message == (f"pod {NAMESPACE}/stray was pending on x1 while the workload has no "
                                    "admission and was moved to Failed")
        events = [(e.key, e.type, e.reason, e.message) for e in result.events if e.reason == "PodTerminatedByKueue"]
        assert events == [(f"{NAMESPACE}/stray", "Normal", "PodTerminatedByKueue", CONDITION["message"])]

    def test_the_termination_reaches_the_result(self):
        (t,) = run([*tas_setup(), *rack(), train(None), pinned("stray")]).terminated_pods
        assert (t.namespace, t.name, t.node, t.reason, t.message) == (
            NAMESPACE, "stray", "x1", CONDITION["reason"], CONDITION["message"])

    @pytest.mark.parametrize("pod_kwargs", [
        {"phase": "Running"},
        {"phase": "Succeeded"},
        {"node": "x1"},  # bound already: the kubelet owns it
        {"gates": [TOPOLOGY_GATE]},  # the ungater's to pin
        {"topology_annotations": {"example.com/team": "a"}},  # not a TAS pod
    ], ids=["running", "succeeded", "bound", "topology-gated", "non-tas"])
    def test_left_alone(self, pod_kwargs):
        result = run([*tas_setup(), *rack(), train(None), pinned("p", **pod_kwargs)])
        assert failed_pods(result) == {}
        assert terminations(result) == []

    def test_another_scheduling_gate_does_not_protect_it(self):
        # Kueue looks only for its own topology gate
        result = run([*tas_setup(), *rack(), train(None), pinned("p", gates=["example.com/quota-check"])])
        assert list(failed_pods(result)) == ["p"]

    def test_a_pod_without_a_workload_is_left_alone(self):
        result = run([*tas_setup(), *rack(), pinned("orphan")])
        assert failed_pods(result) == {}

    def test_finished_or_evicted_workloads_are_left_alone(self):
        finished = train((("x2", 1), ("x3", 1)), finished=True)
        result = run([*tas_setup(), *rack(), finished, pinned("late")])
        assert failed_pods(result) == {}
        evicted = train((("x2", 1), ("x3", 1)))
        evicted["status"]["conditions"].append(
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "preempted"})
        result = run([*tas_setup(), *rack(), evicted, pinned("late")])
        assert failed_pods(result) == {}

    @pytest.mark.parametrize("x1", [None, {"ready": None}], ids=["node-missing", "no-ready-condition"])
    def test_only_on_a_node_the_controller_reconciles(self, x1):
        nodes = rack(**x1) if x1 is not None else rack()[1:]
        result = run([*tas_setup(), *nodes, train(None), pinned("stray")])
        assert failed_pods(result) == {}

    def test_the_feature_gates(self):
        objects = [*tas_setup(), *rack(), train(None), pinned("stray")]
        assert failed_pods(run(objects, feature_gates=gates(TASFailedNodeReplacement=False))) == {}


class TestLatePods:
    def test_a_pod_on_an_assigned_node_is_left_alone(self):
        result = run([*tas_setup(), *rack(), train(), pinned("on-x1"), pinned("on-x2", "x2")])
        assert failed_pods(result) == {}
        assert terminations(result) == []

    def test_a_pod_on_a_node_outside_the_assignment_is_failed(self):
        result = run([*tas_setup(), *rack(), train((("x2", 1), ("x3", 1))), pinned("late"), pinned("ok", "x2")])
        out = failed_pods(result)
        assert list(out) == ["late"]
        assert out["late"]["conditions"] == [CONDITION]
        assert terminations(result) == [(f"{NAMESPACE}/train", "x1", OFF_ASSIGNMENT)]
        (decision,) = [d for d in result.decisions if d.kind == POD_TERMINATED]
        assert decision.message == (f"pod {NAMESPACE}/late was pending on x1 outside the workload's topology "
                                    "assignment and was moved to Failed")

    def test_an_assignment_above_the_hostname_level_pins_no_node(self):
        wl = admitted(workload("train", count=2, cpu="2", required=RACK),
                      assignments={"main": domains_json([RACK], [("r1", 2)])})
        result = run([*tas_setup(), *rack(), wl, pinned("p")])
        assert list(failed_pods(result)) == ["p"]

    def test_a_not_ready_node_waits_for_the_delay_without_pod_termination(self):
        # Kueue's reconciler returns early for a NotReady node until NodeFailureDelay ran out
        objects = [*tas_setup(), *rack(ready="False", ready_since=-10), train((("x2", 1), ("x3", 1))),
                   pinned("late")]
        feature_gates = gates(TASReplaceNodeOnPodTermination=False)
        engine = Engine.from_parsed(parse(objects), feature_gates)
        assert engine.run_pass(NOW).result.terminated_pods == []
        later = engine.run_pass(NOW + timedelta(seconds=25)).result
        assert [t.name for t in later.terminated_pods] == ["late"]
        # with pod termination on, at once
        assert [t.name for t in run(objects).terminated_pods] == ["late"]

    def test_after_a_node_replacement(self):
        # x1 fails with its pod stopped; train moves from x1 to x2, and the pod the job
        # controller had already created for x1 is failed, so that its replacement is made
        objects = [*tas_setup(), *rack(ready="False", ready_since=-60), train(),
                   workload_pod("train-0", "train", node="x1", cpu="2", phase="Failed"),
                   workload_pod("train-1", "train", node="x2", cpu="2"),
                   pinned("train-0-again")]
        result = run_passes(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))
        assert [d.node for d in result.decisions if d.kind == NODE_REPLACED] == ["x1"]
        assert domains(result_of(result, "train").pod_sets[0].assignment) == [("x2", 2)]
        assert [t.name for t in result.terminated_pods] == ["train-0-again"]
        assert terminations(result) == [(f"{NAMESPACE}/train", "x1", OFF_ASSIGNMENT)]


# ---------------------------------------------------------------- the index the pass starts from


def pinned_view(state: ClusterState) -> tuple[dict, dict]:
    return ({h: set(p) for h, p in state.pinned_by_host.items()},
            {k: set(p) for k, p in state.pinned_by_workload.items()})


class TestIncrementalIndex:
    def test_changes_one_at_a_time_agree_with_a_fresh_build(self):
        objects = [*tas_setup(), *rack(), train((("x2", 1), ("x3", 1)))]
        engine = Engine.from_parsed(parse(objects), gates())
        engine.run_pass(NOW)
        pods = [parse_one(pinned("a")), parse_one(pinned("b", "x2")),
                parse_one(pinned("c", gates=[TOPOLOGY_GATE])), parse_one(pinned("d", phase="Running"))]
        for p in pods:
            engine.upsert(p)
        state = engine.state
        assert pinned_view(state) == ({"x1": {f"{NAMESPACE}/a"}, "x2": {f"{NAMESPACE}/b"}},
                                      {f"{NAMESPACE}/train": {f"{NAMESPACE}/a", f"{NAMESPACE}/b"}})
        fresh = ClusterState(parse([*objects, pinned("a"), pinned("b", "x2"), pinned("c", gates=[TOPOLOGY_GATE]),
                                    pinned("d", phase="Running")]), gates())
        assert pinned_view(state) == pinned_view(fresh)

        # b binds and a is failed by the pass: both leave the index; the ungater pins c to x3
        engine.upsert(dataclasses.replace(state.pod_map()[f"{NAMESPACE}/b"], node_name="x2", phase="Running"))
        assert [t.name for t in engine.run_pass(NOW).result.terminated_pods] == ["a"]
        assert pinned_view(state) == ({"x3": {f"{NAMESPACE}/c"}}, {f"{NAMESPACE}/train": {f"{NAMESPACE}/c"}})
        fresh = ClusterState(None, gates())
        for p in state.pods:
            fresh.upsert_pod(p)
        assert pinned_view(state) == pinned_view(fresh)
        assert state.pinned_to_check == {f"{NAMESPACE}/c"}  # looked at in the next pass

    def test_a_pass_looks_only_at_what_changed(self):
        objects = [*tas_setup(), *rack(), train(), pinned("on-x1")]
        engine = Engine.from_parsed(parse(objects), gates())
        assert engine.state.pinned_to_check == {f"{NAMESPACE}/on-x1"}
        assert engine.run_pass(NOW).result.terminated_pods == []
        assert engine.state.pinned_to_check == set()
        # the assignment moves away from x1 (as a replacement does): the pod is looked at again
        moved = parse_one(train((("x2", 1), ("x3", 1))))
        engine.upsert(moved)
        assert engine.state.pinned_to_check == {f"{NAMESPACE}/on-x1"}
        assert [t.name for t in engine.run_pass(NOW).result.terminated_pods] == ["on-x1"]

    def test_a_node_change_rechecks_the_pods_pinned_to_it(self):
        objects = [*tas_setup(), *rack()[1:], train(None), pinned("stray")]
        engine = Engine.from_parsed(parse(objects), gates())
        assert engine.run_pass(NOW).result.terminated_pods == []  # x1 does not exist
        engine.upsert(parse_one(rack()[0]))
        assert [t.name for t in engine.run_pass(NOW).result.terminated_pods] == ["stray"]
