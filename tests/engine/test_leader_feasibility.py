"""TASLeaderPodSetFeasibility (Kueue v0.19.5, off by default): the leader of a PodSet group is
placed on a node its own node selector, tolerations and required node affinity allow, anywhere
in the domain the group shares, rather than on one of its workers' nodes.

Off, the leader follows its workers' constraints (Kueue's behaviour before the gate, and the
default): a leader whose own selector no node matches is admitted with its workers, and its
pod then stays Pending. On, a node only the leader may use holds the leader and no worker, and
a group whose leader fits nowhere in the domain is not admitted.
"""

from __future__ import annotations

import json

import pytest

from scheduler.codec import decode_assignment
from scheduler.explain import explain_workload
from scheduler.placement import PodSetPlacement
from scheduler.topology_assignment import find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    HOSTNAME,
    LEVELS,
    RACK,
    cluster_state,
    flavor_snapshot,
    gates,
    node,
    pod_set,
    taint,
    tas_requests,
    tas_setup,
    workload,
)
from .test_cli import simulate, write_yaml
from .test_kueue_placement_extra import expected, shape
from .test_kueue_placement_more import place_all

GROUP = "group"
GATE = "TASLeaderPodSetFeasibility"


def host(name: str, *, rack: str = "r1", labels: dict | None = None, cpu: str = "5", taints=()) -> dict:
    return node(name, block="b1", rack=rack, labels=labels, cpu=cpu, pods="10", taints=taints)


def group(leader: dict | None = None, workers: int = 2, level: str = BLOCK, **leader_spec) -> list[dict]:
    """A leader (one pod) and its workers, one podSetGroupName, `required` at `level`."""
    return [
        leader or pod_set("leader", count=1, cpu="1", required=level, group=GROUP, **leader_spec),
        pod_set("workers", count=workers, cpu="1", required=level, group=GROUP),
    ]


def placed(result: dict[str, PodSetPlacement]) -> dict[str, object]:
    assert [p.failure for p in result.values()] == ["", ""], result
    return {name: shape(p.assignment) for name, p in result.items()}


def test_with_the_gate_the_leader_takes_the_node_its_own_selector_picks():
    """Only x2 carries accelerator=true: the leader goes there, and the workers, who may use
    both nodes, join it (BestFit keeps the group on the fewest nodes)."""
    objects = [*tas_setup(levels=LEVELS), host("x1"), host("x2", labels={"accelerator": "true"})]
    result = placed(place_all(objects, group(node_selector={"accelerator": "true"}), **{GATE: True}))
    assert result == {"leader": expected(("x2", 1)), "workers": expected(("x2", 2))}


def test_without_the_gate_the_leaders_own_selector_is_not_consulted():
    objects = [*tas_setup(levels=LEVELS), host("x1"), host("x2", labels={"accelerator": "true"})]
    result = placed(place_all(objects, group(node_selector={"accelerator": "true"}), **{GATE: False}))
    assert result == {"leader": expected(("x1", 1)), "workers": expected(("x1", 2))}


def test_a_node_only_the_leader_tolerates_holds_the_leader_and_no_worker():
    """x2 is tainted; the leader tolerates the taint, its workers do not. The leader takes x2
    (more room left for the workers on x1), the workers stay off it."""
    tainted = [taint("dedicated", "leader")]
    objects = [*tas_setup(levels=LEVELS), host("x1", cpu="2"), host("x2", cpu="1", taints=tainted)]
    leader = pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP,
                     tolerations=[{"key": "dedicated", "operator": "Equal", "value": "leader",
                                   "effect": "NoSchedule"}])
    result = placed(place_all(objects, group(leader), **{GATE: True}))
    assert result == {"leader": expected(("x2", 1)), "workers": expected(("x1", 2))}
    # without the gate the leader is held to its workers' nodes: x1 has no room for three pods
    off = place_all(objects, group(leader), **{GATE: False})
    assert off["workers"].failure != ""


def test_with_the_gate_a_leader_no_node_suits_is_not_placed():
    """Kueue's message counts what the roomiest block holds for the workers: the group fails
    because no domain has a place for its leader."""
    objects = [*tas_setup(levels=LEVELS), host("x1"), host("x2")]
    result = place_all(objects, group(node_selector={"accelerator": "true"}), **{GATE: True})
    reasons = {p.failure for p in result.values()}
    assert reasons == {'topology "default" allows to fit only 10 out of 2 pod(s)'}
    assert all(p.assignment is None for p in result.values())


def test_the_leader_stays_in_the_domain_the_group_requires():
    """The leader's node is in rack r2, its workers' room in r1: with the rack required, the
    group fits in neither rack (the leader's r2 holds one worker only)."""
    objects = [
        *tas_setup(levels=LEVELS),
        host("x1", rack="r1"),
        host("x2", rack="r2", cpu="2", labels={"accelerator": "true"}),
    ]
    result = place_all(objects, group(node_selector={"accelerator": "true"}, workers=2, level=RACK),
                       **{GATE: True})
    assert all(p.failure for p in result.values())
    # with the block required the leader and the workers share b1 across the racks
    result = placed(place_all(objects, group(node_selector={"accelerator": "true"}, workers=2), **{GATE: True}))
    assert result["leader"] == expected(("x2", 1))
    assert sum(d[1] for d in result["workers"][1]) == 2


def test_the_leaders_required_affinity_is_its_own():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["x1"]}]}]}}}
    objects = [*tas_setup(levels=LEVELS), host("x1", cpu="1"), host("x2")]
    # x1 holds one pod: the leader, which may only go there; the workers take x2
    result = placed(place_all(objects, group(affinity=affinity), **{GATE: True}))
    assert result == {"leader": expected(("x1", 1)), "workers": expected(("x2", 2))}


def test_an_invalid_leader_selector_is_the_reason_with_the_gate():
    objects = [*tas_setup(levels=LEVELS), host("x1")]
    result = place_all(objects, group(node_selector={"accelerator": "-bad-"}), **{GATE: True})
    assert {p.failure for p in result.values()} == {
        'invalid node selectors: map[accelerator:-bad-], reason: values[0][accelerator]: Invalid value: "-bad-": '
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character"}


@pytest.mark.parametrize("value, leader_node", [("true", "x2"), ("false", "x1")])
def test_the_command_line_takes_the_gate(capsys, tmp_path, value, leader_node):
    """`simulate --feature-gates TASLeaderPodSetFeasibility=...` admits the group, the leader
    on the node the gate puts it on."""
    cluster = write_yaml(tmp_path / "cluster.yaml",
                         [*tas_setup(levels=LEVELS), host("x1"), host("x2", labels={"accelerator": "true"})])
    wl = write_yaml(tmp_path / "workloads.yaml",
                    [workload("w", pod_sets=group(node_selector={"accelerator": "true"}))])
    code, out, err = simulate(capsys, cluster, wl, "--feature-gates", f"{GATE}={value}")
    assert code == 0, err
    (result,) = json.loads(out)["workloads"]
    assert result["status"] == "Admitted"
    leader = next(ps for ps in result["podSets"] if ps["name"] == "leader")
    decoded = decode_assignment(leader["topologyAssignment"])
    assert [(d.values, d.count) for d in decoded.domains] == [((leader_node,), 1)]


@pytest.mark.parametrize("gate, excluded_by_selector", [(False, 0), (True, 2)])
def test_why_pending_counts_the_leader_by_the_constraints_its_placement_applies(gate, excluded_by_selector):
    """Twelve workers do not fit the block's ten pods. Without the gate the leader's own
    selector plays no part, and why-pending must not say it excludes nodes; with the gate it
    excludes both nodes, and the leader fits nowhere."""
    objects = [*tas_setup(levels=LEVELS), host("x1"), host("x2")]
    wl = workload("w", pod_sets=group(node_selector={"accelerator": "true"}, workers=12))
    state = cluster_state([*objects, wl], feature_gates=gates(**{GATE: gate}))
    explanation = explain_workload(state, next(iter(state.workloads)))
    leader, workers = explanation.pod_sets
    assert not leader.fits and leader.reason == 'topology "default" allows to fit only 10 out of 12 pod(s)'
    assert leader.exclusions is not None and leader.exclusions.node_selector == excluded_by_selector
    block = leader.levels[0]
    assert (block.level, block.best_fits) == (BLOCK, 0 if gate else 10)
    assert workers.reason == "not placed: placed with pod set leader as one group, which does not fit"


@pytest.mark.parametrize("own_selector, own_leaves", [(None, False), ({"accelerator": "true"}, True)])
def test_a_leader_with_its_workers_constraints_is_counted_as_without_the_gate(own_selector, own_leaves):
    """With the gate on, a leader whose node constraints are its workers' is counted on their
    leaves, the counters kept as with the gate off; one with its own gets its own leaves."""
    objects = [*tas_setup(levels=LEVELS), host("x1"), host("x2", labels={"accelerator": "true"})]
    snap = flavor_snapshot(objects, feature_gates=gates(**{GATE: True}))
    spec = {} if own_selector is None else {"node_selector": own_selector}
    requests = tas_requests(workload("w", pod_sets=group(**spec)))
    result = find_topology_assignments_for_flavor(snap, requests, gates=gates(**{GATE: True}))
    assert [p.failure for p in result.values()] == ["", ""]
    (counts,) = snap.phase1_cache.values()
    assert (counts.leader_visited is not None) is own_leaves
