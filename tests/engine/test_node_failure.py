"""Node-failure handling, step 1 of the pass: which nodes become unhealthy for a running workload.

The cluster of these tests: rack b1/r1 holds x1 and x2, rack b1/r2 holds y1, every node
4 CPU. The workload `train` requires a rack and runs 4 pods of 2 CPU, two on x1 and two on
x2, so a failed x1 has no replacement inside r1. With TASFailedNodeReplacementFailFast off
the workload then stays admitted and keeps the node in `status.unhealthyNodes`, which is
what these tests read, together with the decision that explains the marking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from scheduler.model import TOPOLOGY_GATE
from scheduler.output import result_json
from scheduler.results import NODE_UNHEALTHY, POD_TERMINATED, PassResult

from .factories import (
    HOSTNAME,
    NAMESPACE,
    RACK,
    admitted,
    domains,
    domains_json,
    gates,
    node,
    pod,
    result_of,
    run,
    taint,
    tas_setup,
    toleration,
    workload,
    workload_pod,
)

ASSIGNMENT = [("x1", 2), ("x2", 2)]
STOPPED = ("Failed", "Succeeded", "Terminating")


def x1(**kwargs: Any) -> dict:
    return node("x1", block="b1", rack="r1", cpu="4", **kwargs)


def pods_on_x1(states: Sequence[str]) -> list[dict]:
    """The workload's pods on x1, one per state: a pod phase, or `Terminating` (a running pod
    with a deletionTimestamp)."""
    out = []
    for i, state in enumerate(states):
        if state == "Terminating":
            out.append(workload_pod(f"train-{i}", "train", node="x1", cpu="2", deleting=True))
        else:
            out.append(workload_pod(f"train-{i}", "train", node="x1", cpu="2", phase=state))
    return out


def cluster(x1_node: dict | None, *, x1_pods: Sequence[dict] = (), tolerations: Sequence[dict] = (),
            unhealthy_nodes: Sequence[str] = ()) -> list[dict]:
    objects = [*tas_setup(), node("x2", block="b1", rack="r1", cpu="4"), node("y1", block="b1", rack="r2", cpu="4")]
    if x1_node is not None:
        objects.append(x1_node)
    wl = workload("train", count=4, cpu="2", required=RACK, tolerations=tolerations)
    objects.append(admitted(wl, assignments={"main": domains_json([HOSTNAME], ASSIGNMENT)},
                            unhealthy_nodes=unhealthy_nodes))
    objects += [workload_pod(f"train-{i}", "train", node="x2", cpu="2") for i in (2, 3)]
    return [*objects, *x1_pods]


def simulate(x1_node: dict | None, *, pods: Sequence[str] = ("Running", "Running"), tolerations: Sequence[dict] = (),
             extra_pods: Sequence[dict] = (), **gate_values: bool) -> PassResult:
    """One pass over the cluster with x1 as given and the workload's pods on x1 in `pods`
    states. FailFast is off unless a test says otherwise, so a marked node stays listed."""
    gate_values.setdefault("TASFailedNodeReplacementFailFast", False)
    objects = cluster(x1_node, x1_pods=[*pods_on_x1(pods), *extra_pods], tolerations=tolerations)
    return run(objects, feature_gates=gates(**gate_values))


def marked(result: PassResult) -> tuple[list[str], list[str]]:
    """(the workload's unhealthyNodes, the triggers of its NodeMarkedUnhealthy decisions)."""
    wl = result_of(result, "train")
    triggers = [d.trigger for d in result.decisions if d.kind == NODE_UNHEALTHY and d.key == wl.key]
    return wl.unhealthy_nodes, triggers


def assert_marked(result: PassResult, trigger: str) -> None:
    assert marked(result) == (["x1"], [trigger])
    wl = result_of(result, "train")
    assert wl.status == "Admitted"
    (decision,) = [d for d in result.decisions if d.kind == NODE_UNHEALTHY]
    assert decision.node == "x1"
    assert decision.message == f"node x1 marked unhealthy for the workload: {trigger}"


def assert_not_marked(result: PassResult) -> None:
    assert marked(result) == ([], [])
    wl = result_of(result, "train")
    assert wl.status == "Admitted"
    assert domains(wl.pod_sets[0].assignment) == ASSIGNMENT
    assert result.decisions == []


# ---------------------------------------------------------------- deleted, no Ready condition


class TestGoneOrUnknown:
    def test_deleted_node(self):
        assert_marked(simulate(None, pods=()), "node deleted")

    def test_deleted_node_with_pods_still_reported_running(self):
        # a deleted node fails at once, whatever the pods bound to it report
        assert_marked(simulate(None, pods=("Running", "Running")), "node deleted")

    def test_node_without_a_ready_condition(self):
        assert_marked(simulate(x1(ready=None)), "node has no Ready condition")

    @pytest.mark.parametrize("rno", [True, False])
    def test_immediate_whatever_pod_termination_says(self, rno):
        result = simulate(x1(ready=None), TASReplaceNodeOnPodTermination=rno)
        assert_marked(result, "node has no Ready condition")


# ---------------------------------------------------------------- NotReady


class TestNotReady:
    @pytest.mark.parametrize("state", STOPPED)
    def test_pods_stopped(self, state):
        result = simulate(x1(ready="False", ready_since=-5), pods=(state, state))
        assert_marked(result, "node is NotReady and the workload's pods on it have stopped")

    def test_pods_stopped_in_different_ways(self):
        result = simulate(x1(ready="False", ready_since=-5), pods=("Failed", "Terminating"))
        assert_marked(result, "node is NotReady and the workload's pods on it have stopped")

    def test_ready_unknown_counts_as_not_ready(self):
        result = simulate(x1(ready="Unknown", ready_since=-5), pods=("Failed", "Failed"))
        assert_marked(result, "node is Ready=Unknown and the workload's pods on it have stopped")

    @pytest.mark.parametrize("pods", [("Running", "Running"), ("Running", "Failed"), ("Running", "Terminating")])
    def test_a_running_pod_keeps_the_node(self, pods):
        # TASReplaceNodeOnPodTermination (on by default): however long it has been NotReady
        assert_not_marked(simulate(x1(ready="False", ready_since=-3600), pods=pods))

    def test_only_the_workloads_own_pods_count(self):
        other = pod("web", node="x1", cpu="1")  # someone else's running pod on x1
        result = simulate(x1(ready="False", ready_since=-5), pods=("Failed", "Failed"), extra_pods=[other])
        assert_marked(result, "node is NotReady and the workload's pods on it have stopped")

    @pytest.mark.parametrize(("seconds", "is_marked"), [(45, True), (30, True), (29, False), (5, False)])
    def test_fixed_time_gate_marks_after_30s_even_with_running_pods(self, seconds, is_marked):
        result = simulate(x1(ready="False", ready_since=-seconds), TASReplaceNodeDueToNotReadyOverFixedTime=True)
        if is_marked:
            assert_marked(result, f"node is NotReady for {seconds}s")
        else:
            assert_not_marked(result)

    def test_not_ready_since_an_unknown_time(self):
        # no lastTransitionTime: NotReady since the zero time, long past the 30 s
        result = simulate(x1(ready="False"), TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "node is NotReady for an unknown time")

    def test_fixed_time_gate_still_marks_stopped_pods_at_once(self):
        result = simulate(x1(ready="False", ready_since=-5), pods=("Failed", "Failed"),
                          TASReplaceNodeDueToNotReadyOverFixedTime=True)
        assert_marked(result, "node is NotReady and the workload's pods on it have stopped")

    @pytest.mark.parametrize("pods", [("Running", "Running"), ("Failed", "Failed")])
    @pytest.mark.parametrize(("seconds", "is_marked"), [(45, True), (30, True), (29, False), (5, False)])
    def test_without_pod_termination_only_the_30s_count(self, pods, seconds, is_marked):
        result = simulate(x1(ready="False", ready_since=-seconds), pods=pods, TASReplaceNodeOnPodTermination=False)
        if is_marked:
            assert_marked(result, f"node is NotReady for {seconds}s")
        else:
            assert_not_marked(result)


# ---------------------------------------------------------------- taints and cordons


NO_SCHEDULE = taint("maintenance", "planned")
NO_EXECUTE = taint("maintenance", "planned", effect="NoExecute")


class TestTaints:
    def test_untolerated_no_schedule_waits_for_running_pods(self):
        assert_not_marked(simulate(x1(taints=[NO_SCHEDULE])))

    @pytest.mark.parametrize("state", STOPPED)
    def test_untolerated_no_schedule_once_the_pods_stopped(self, state):
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=(state, state))
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule and the workload's pods stopped there")

    def test_untolerated_no_schedule_without_pods(self):
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=())
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule and the workload's pods stopped there")

    def test_untolerated_no_schedule_at_once_without_pod_termination(self):
        result = simulate(x1(taints=[NO_SCHEDULE]), TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule")

    def test_untolerated_no_execute_waits_for_running_pods(self):
        assert_not_marked(simulate(x1(taints=[NO_EXECUTE])))

    def test_untolerated_no_execute_once_the_pods_stopped(self):
        result = simulate(x1(taints=[NO_EXECUTE]), pods=("Terminating", "Failed"))
        assert_marked(result, "untolerated taint maintenance=planned:NoExecute and the workload's pods stopped there")

    def test_untolerated_no_execute_at_once_without_pod_termination(self):
        result = simulate(x1(taints=[NO_EXECUTE]), TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint maintenance=planned:NoExecute")

    def test_taint_without_a_value(self):
        result = simulate(x1(taints=[taint("drain", effect="NoExecute")]), TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint drain:NoExecute")

    @pytest.mark.parametrize("pods", [("Running", "Running"), ("Failed", "Failed")])
    def test_prefer_no_schedule_is_ignored(self, pods):
        soft = taint("noisy", "yes", effect="PreferNoSchedule")
        assert_not_marked(simulate(x1(taints=[soft]), pods=pods, TASReplaceNodeOnPodTermination=False))

    @pytest.mark.parametrize("rno", [True, False])
    def test_tolerated_no_schedule(self, rno):
        tolerated = [toleration("maintenance", "planned", effect="NoSchedule")]
        result = simulate(x1(taints=[NO_SCHEDULE]), tolerations=tolerated, TASReplaceNodeOnPodTermination=rno)
        assert_not_marked(result)

    def test_tolerated_by_exists(self):
        tolerated = [toleration("maintenance", operator="Exists")]
        result = simulate(x1(taints=[NO_SCHEDULE, NO_EXECUTE]), tolerations=tolerated,
                          TASReplaceNodeOnPodTermination=False)
        assert_not_marked(result)

    def test_one_untolerated_taint_among_tolerated_ones(self):
        tolerated = [toleration("maintenance", "planned", effect="NoSchedule")]
        result = simulate(x1(taints=[NO_SCHEDULE, taint("gpu-broken", effect="NoExecute")]), tolerations=tolerated,
                          TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint gpu-broken:NoExecute")

    @pytest.mark.parametrize("pods", [("Running", "Running"), ("Failed", "Failed")])
    def test_taints_never_mark_without_the_gate(self, pods):
        result = simulate(x1(taints=[NO_SCHEDULE, NO_EXECUTE], unschedulable=True), pods=pods,
                          TASReplaceNodeOnNodeTaints=False, TASReplaceNodeOnPodTermination=False)
        assert_not_marked(result)


class TestTolerationSeconds:
    """A NoExecute taint tolerated for `tolerationSeconds`: tolerated until timeAdded + seconds."""

    @staticmethod
    def tolerating(seconds: int) -> list[dict]:
        return [toleration("maintenance", "planned", effect="NoExecute", seconds=seconds)]

    @pytest.mark.parametrize("added", [-301, -300])  # run out: timeAdded + 300 s <= now
    def test_run_out_counts_as_untolerated(self, added):
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=added)]),
                          tolerations=self.tolerating(300), TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint maintenance=planned:NoExecute")

    def test_run_out_waits_for_running_pods_with_pod_termination(self):
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=-600)]),
                          tolerations=self.tolerating(300))
        assert_not_marked(result)

    def test_run_out_and_pods_stopped(self):
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=-600)]),
                          pods=("Terminating", "Terminating"), tolerations=self.tolerating(300))
        assert_marked(result, "untolerated taint maintenance=planned:NoExecute and the workload's pods stopped there")

    @pytest.mark.parametrize("rno", [True, False])
    def test_not_yet_run_out_is_tolerated(self, rno):
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=-299)]),
                          tolerations=self.tolerating(300), TASReplaceNodeOnPodTermination=rno)
        assert_not_marked(result)

    def test_not_yet_run_out_marks_once_the_pods_stopped(self):
        # the pods are being evicted by the taint: once they are gone the node is lost to the workload
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=-10)]),
                          pods=("Terminating", "Failed"), tolerations=self.tolerating(300))
        assert_marked(result, "taint maintenance=planned:NoExecute tolerated only for a while and the "
                              "workload's pods stopped there")

    def test_tolerated_for_good_never_marks(self):
        result = simulate(x1(taints=[taint("maintenance", "planned", "NoExecute", time_added=-600)]),
                          pods=("Failed", "Failed"),
                          tolerations=[toleration("maintenance", "planned", effect="NoExecute")])
        assert_not_marked(result)

    def test_no_time_added_is_tolerated(self):
        result = simulate(x1(taints=[NO_EXECUTE]), tolerations=self.tolerating(300),
                          TASReplaceNodeOnPodTermination=False)
        assert_not_marked(result)


class TestCordon:
    """`spec.unschedulable: true` behaves like the node.kubernetes.io/unschedulable:NoSchedule taint."""

    TRIGGER = "untolerated taint node.kubernetes.io/unschedulable:NoSchedule"

    def test_waits_for_running_pods(self):
        assert_not_marked(simulate(x1(unschedulable=True)))

    def test_once_the_pods_stopped(self):
        result = simulate(x1(unschedulable=True), pods=("Succeeded", "Failed"))
        assert_marked(result, f"{self.TRIGGER} and the workload's pods stopped there")

    def test_at_once_without_pod_termination(self):
        assert_marked(simulate(x1(unschedulable=True), TASReplaceNodeOnPodTermination=False), self.TRIGGER)

    def test_tolerated_cordon(self):
        tolerated = [toleration("node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")]
        result = simulate(x1(unschedulable=True), tolerations=tolerated, TASReplaceNodeOnPodTermination=False)
        assert_not_marked(result)

    def test_not_when_the_taint_gate_is_off(self):
        result = simulate(x1(unschedulable=True), pods=("Failed", "Failed"), TASReplaceNodeOnNodeTaints=False)
        assert_not_marked(result)


# ---------------------------------------------------------------- pending pods on a tainted node


def pods_json(result: PassResult) -> dict[str, dict]:
    return {p["name"]: p for p in result_json(result)["pods"]}


class TestPendingPodsTerminated:
    """Pending, ungated pods stuck on a node marked for an untolerated taint are moved to Failed."""

    def pending(self, name: str, **kwargs: Any) -> dict:
        return workload_pod(name, "train", phase="Pending", cpu="2", **kwargs)

    def test_pending_pods_on_the_node_fail_running_and_gated_ones_stay(self):
        extra = [
            self.pending("selected", node_selector={HOSTNAME: "x1"}),  # ungated, waiting for x1
            self.pending("bound", node="x1"),  # bound to x1, not started
            self.pending("gated", node_selector={HOSTNAME: "x1"}, gates=["example.com/quota-check"]),
            self.pending("elsewhere", node_selector={HOSTNAME: "x2"}),
        ]
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=("Running",), extra_pods=extra,
                          TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule")
        out = pods_json(result)
        assert sorted(out) == ["bound", "selected"]
        for name in ("bound", "selected"):
            assert out[name]["phase"] == "Failed"
            assert out[name]["namespace"] == NAMESPACE
            assert out[name]["nodeName"] == "x1"
            assert out[name]["conditions"] == [{
                "type": "TerminatedByKueue", "status": "True", "reason": "UnschedulableOnAssignedNode",
                "message": "Pod terminated by Kueue NodeController due to node taint"}]
        terminated = [d for d in result.decisions if d.kind == POD_TERMINATED]
        assert sorted(d.message for d in terminated) == [
            f"pod {NAMESPACE}/bound was pending on x1 and was moved to Failed",
            f"pod {NAMESPACE}/selected was pending on x1 and was moved to Failed",
        ]
        assert all(d.node == "x1" and d.trigger for d in terminated)
        events = [(e.key, e.reason) for e in result.events if e.reason == "PodTerminatedByKueue"]
        assert sorted(events) == [(f"{NAMESPACE}/bound", "PodTerminatedByKueue"),
                                  (f"{NAMESPACE}/selected", "PodTerminatedByKueue")]

    def test_only_pending_pods_left_marks_the_node_and_fails_them(self):
        # with pod termination on, pending pods do not hold the node: it is marked, and they fail
        extra = [self.pending("stuck-0", node_selector={HOSTNAME: "x1"}),
                 self.pending("stuck-1", node_selector={HOSTNAME: "x1"})]
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=(), extra_pods=extra)
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule and the workload's pods stopped there")
        assert sorted(pods_json(result)) == ["stuck-0", "stuck-1"]

    def test_a_gated_pod_holds_the_node(self):
        extra = [self.pending("stuck", node_selector={HOSTNAME: "x1"}),
                 self.pending("gated", node_selector={HOSTNAME: "x1"}, gates=["example.com/quota-check"])]
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=(), extra_pods=extra)
        assert_not_marked(result)
        assert result_json(result)["pods"] == []

    def test_topology_gated_pods_are_left_to_the_ungater(self):
        extra = [self.pending("gated", gates=[TOPOLOGY_GATE])]
        result = simulate(x1(taints=[NO_SCHEDULE]), extra_pods=extra, TASReplaceNodeOnPodTermination=False)
        assert_marked(result, "untolerated taint maintenance=planned:NoSchedule")
        assert "Failed" not in [p.get("phase") for p in result_json(result)["pods"]]

    def test_not_while_running_pods_hold_the_node(self):
        extra = [self.pending("stuck", node_selector={HOSTNAME: "x1"})]
        result = simulate(x1(taints=[NO_SCHEDULE]), pods=("Running",), extra_pods=extra)
        assert_not_marked(result)
        assert result_json(result)["pods"] == []

    def test_only_for_taints(self):
        # a pending pod bound to a deleted node is left to Kubernetes' garbage collection
        extra = [self.pending("stuck", node="x1")]
        result = simulate(None, pods=("Failed",), extra_pods=extra)
        assert_marked(result, "node deleted")
        assert result.terminated_pods == []
        assert result_json(result)["pods"] == []

    def test_a_pending_pod_bound_to_a_not_ready_node_holds_it(self):
        # not terminated nor terminating: the node is not failed yet
        extra = [self.pending("stuck", node="x1")]
        result = simulate(x1(ready="False", ready_since=-60), pods=("Failed",), extra_pods=extra)
        assert_not_marked(result)
        assert result.terminated_pods == []


# ---------------------------------------------------------------- what a pass explains


class TestDecisions:
    SCENARIOS = [
        pytest.param(dict(x1_node=None), id="deleted"),
        pytest.param(dict(x1_node=x1(ready=None)), id="no-ready-condition"),
        pytest.param(dict(x1_node=x1(ready="False", ready_since=-5), pods=("Failed", "Failed")), id="not-ready"),
        pytest.param(dict(x1_node=x1(taints=[NO_SCHEDULE]), pods=("Failed",),
                          extra_pods=[workload_pod("stuck", "train", phase="Pending", node="x1")]), id="taint"),
        pytest.param(dict(x1_node=x1(unschedulable=True), TASReplaceNodeOnPodTermination=False), id="cordon"),
        pytest.param(dict(x1_node=None, TASFailedNodeReplacementFailFast=True), id="evicted"),
    ]

    @pytest.mark.parametrize("scenario", SCENARIOS)
    def test_every_decision_names_its_trigger_and_explains_itself(self, scenario):
        scenario = dict(scenario)
        result = simulate(scenario.pop("x1_node"), **scenario)
        assert result.decisions
        for decision in result.decisions:
            assert decision.key == f"{NAMESPACE}/train"
            assert decision.node == "x1"
            assert decision.kind
            assert decision.trigger.strip()
            assert decision.message.strip()
        for decision in result_json(result)["decisions"]:
            assert decision["trigger"] and decision["message"]

    def test_healthy_nodes_produce_no_decision(self):
        objects = cluster(x1(), x1_pods=pods_on_x1(("Running", "Running")))
        objects += [
            # a second workload on nodes that are all fine for it, one with a tolerated taint
            node("y2", block="b1", rack="r2", cpu="4", taints=[NO_SCHEDULE]),
            admitted(workload("web", count=2, cpu="1", preferred=RACK,
                              tolerations=[toleration("maintenance", operator="Exists")]),
                     assignments={"main": domains_json([HOSTNAME], [("y1", 1), ("y2", 1)])}),
            # a third one on a NotReady node whose pod still runs
            node("y3", block="b1", rack="r2", cpu="4", ready="False", ready_since=-3600),
            admitted(workload("db", count=1, cpu="1", required=RACK),
                     assignments={"main": domains_json([HOSTNAME], [("y3", 1)])}),
            workload_pod("db-0", "db", node="y3"),
        ]
        result = run(objects)
        assert result.decisions == []
        assert result_json(result)["decisions"] == []
        assert [(w.workload.name, w.status, w.unhealthy_nodes) for w in result.workloads] == [
            ("train", "Admitted", []), ("web", "Admitted", []), ("db", "Admitted", [])]
        assert [e for e in result.events if e.reason in ("EvictedDueToNodeFailures", "SecondPassFailed")] == []

    def test_a_node_already_listed_is_not_marked_again(self):
        objects = cluster(None, unhealthy_nodes=["x1"])
        result = run(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))
        assert marked(result) == (["x1"], [])
        assert [d.kind for d in result.decisions] == ["ReplacementFailed"]


class TestRecovery:
    """A node already listed in unhealthyNodes leaves the list only when the workload's pods
    are demonstrably running on it again (Ready, untainted, pods Running)."""

    def listed(self, states: Sequence[str]) -> PassResult:
        objects = cluster(x1(), x1_pods=pods_on_x1(states), unhealthy_nodes=["x1"])
        return run(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))

    def test_running_pods_recover_the_node(self):
        result = self.listed(("Running", "Running"))
        wl = result_of(result, "train")
        assert wl.unhealthy_nodes == []
        (recovered,) = [d for d in result.decisions if d.kind == "NodeRecovered"]
        assert recovered.node == "x1" and recovered.trigger and recovered.message
        assert [(d.values[-1], d.count) for ps in wl.pod_sets for d in ps.assignment.domains] == ASSIGNMENT

    def test_without_running_pods_it_stays_listed_for_replacement(self):
        result = self.listed(("Failed", "Failed"))
        assert [d.kind for d in result.decisions if d.kind == "NodeRecovered"] == []
