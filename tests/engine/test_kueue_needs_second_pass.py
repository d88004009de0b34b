"""Kueue's TestNeedsSecondPass (pkg/workload/workload_test.go): which workloads the second-pass
queue takes, an admitted TAS workload with a node to replace or a reservation whose delayed
topology can now be placed, through the engine's `needs_second_pass`."""

from __future__ import annotations

import pytest

from scheduler.engine import needs_second_pass

from .factories import HOSTNAME, admitted, domains_json, parse_one, workload

ONE_LEVEL = [HOSTNAME]


def on_node(node: str, *, unhealthy: tuple[str, ...] = ("x0",), **kw) -> dict:
    """foo: PodSet one (1 pod, preferred at hostname), reserved and admitted on `node`."""
    wl = workload("foo", preferred=HOSTNAME, count=1, cpu="1")
    return admitted(wl, assignments={"main": domains_json(ONE_LEVEL, [(node, 1)])}, unhealthy_nodes=unhealthy, **kw)


def delayed(check_state: str) -> dict:
    """foo: PodSet one (required at hostname), quota reserved with a delayed topology (Pending),
    one check in `check_state`, not admitted."""
    wl = admitted(workload("foo", required=HOSTNAME, count=1, cpu="1"), assignments={})
    wl["status"]["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] = "Pending"
    wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != "Admitted"]
    wl["status"]["admissionChecks"] = [{"name": "prov-check", "state": check_state, "message": ""}]
    return wl


def evicted(wl: dict) -> dict:
    wl["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted", "message": ""})
    return wl


def on_hold(wl: dict) -> dict:
    wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"] + [
        {"type": "QuotaReserved", "status": "False", "reason": "OnHold", "message": "On hold"}]
    return wl


@pytest.mark.parametrize(("wl", "want"), [
    pytest.param(on_node("x0"), True, id="admitted workload with UnhealthyNode"),
    pytest.param(on_node("x0", unhealthy=()), False, id="admitted workload without UnhealthyNode"),
    pytest.param(on_node("x1"), False, id="admitted workload with UnhealthyNode, but no node in the assignment"),
    pytest.param(on_node("x0", finished=True), False, id="finished workload with UnhealthyNode"),
    pytest.param(evicted(on_node("x0")), False, id="evicted workload with UnhealthyNode"),
    pytest.param(delayed("Ready"), True,
                 id="quotaReserved and admission checks Ready when workload delayedTopologyRequest=Pending"),
    pytest.param(delayed("Pending"), False, id="quotaReserved and admission checks Pending"),
    pytest.param(workload("foo", required=HOSTNAME, count=1, cpu="1"), False, id="workload without quota"),
    pytest.param(on_hold(on_node("x0")), False, id="on-hold workload with UnhealthyNode"),
])
def test_needs_second_pass(wl, want):
    assert needs_second_pass(parse_one(wl)) is want


def test_a_delayed_topology_without_any_check_listed_is_not_taken():
    """needsSecondPassForDelayedAssignment asks for admission checks listed, all Ready: none
    listed is not "all Ready"."""
    wl = delayed("Ready")
    wl["status"]["admissionChecks"] = []
    assert needs_second_pass(parse_one(wl)) is False
