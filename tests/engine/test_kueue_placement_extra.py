"""Cases of Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/tas_cache_test.go)
beyond the conformance placement suite: a workload marked with unhealthy nodes before it
holds an admission, and leader/worker groups whose workers are placed in slices.

Fresh placements are checked on the flavor snapshot, as Kueue's test calls
`FindTopologyAssignmentsForFlavor`; cases whose outcome depends on the Workload object
(its `status.unhealthyNodes`, its admission) run one pass of the engine on that Workload.
Every assertion is the assignment (levels and domains, in order) or the failure reason the
Go case expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.assignment import TopologyAssignment
from scheduler.topology_assignment import find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    HOSTNAME,
    LEVELS,
    RACK,
    admitted,
    domains_json,
    flavor_snapshot,
    gates,
    node,
    pod_set,
    result_of,
    run,
    tas_requests,
    tas_setup,
    workload,
)

GROUP = "sameGroup"


def expected(*domains: tuple[str, int], levels: Sequence[str] = (HOSTNAME,)) -> tuple[tuple[str, ...], list]:
    """An assignment as (levels, [(values, count), ...]); a single value stands for itself."""
    return tuple(levels), [((v,) if isinstance(v, str) else tuple(v), c) for v, c in domains]


def shape(assignment: TopologyAssignment | None) -> tuple[tuple[str, ...], list]:
    assert assignment is not None
    return tuple(assignment.levels), [(tuple(d.values), d.count) for d in assignment.domains]


def host(name: str, *, block: str, rack: str, cpu: str, ready: str = "True") -> dict:
    return node(name, block=block, rack=rack, cpu=cpu, pods="10", ready=ready)


def leader(**kwargs) -> dict:
    """The leader of the group: one pod of 1 CPU, block required."""
    return pod_set("leader", count=1, cpu="1", required=BLOCK, group=GROUP, **kwargs)


# ---------------------------------------------------------------- marked without an admission


def marked(wl: dict, *nodes: str) -> dict:
    """`wl` pending, with `status.unhealthyNodes` set and no admission."""
    return {**wl, "status": {"unhealthyNodes": [{"name": n} for n in nodes]}}


def flat_cluster() -> list[dict]:
    """Hostname-only topology: x1 NotReady, x2 Ready, 1 CPU each."""
    return [
        *tas_setup(levels=(HOSTNAME,)),
        node("x1", cpu="1", pods="10", ready="False"),
        node("x2", cpu="1", pods="10"),
    ]


def test_marked_workload_without_admission_gets_fresh_placement():
    """Go case: "marked workload without admission gets fresh placement"."""
    wl = marked(workload("wl", count=1, cpu="1", required=HOSTNAME), "x1")
    result = result_of(run([*flat_cluster(), wl]), "wl")
    assert result.status == "Admitted", result.message
    (ps,) = result.pod_sets
    assert shape(ps.assignment) == expected(("x2", 1))


def test_marked_workload_without_admission_fails_with_a_reason_when_there_is_no_room():
    """Go case: "marked workload without admission fails with a reason when there is no room"."""
    wl = marked(workload("wl", count=2, cpu="1", required=HOSTNAME), "x1")
    result = result_of(run([*flat_cluster(), wl]), "wl")
    assert result.status != "Admitted"
    (ps,) = result.pod_sets
    assert ps.assignment is None
    assert ps.failure_reason == 'topology "default" allows to fit only 1 out of 2 pod(s)', result.message


# ---------------------------------------------------------------- grouped with leader and sliced workers


def place_group(objects: list[dict], pod_sets: list[dict], **gate_values: bool) -> dict:
    snap = flavor_snapshot(objects)
    requests = tas_requests(workload("wl", pod_sets=pod_sets))
    return find_topology_assignments_for_flavor(snap, requests, gates=gates(**gate_values))


def test_grouped_hostname_level_slicing_with_lower_leader_requirement():
    """Go case: "grouped with leader and sliced workers; hostname level slicing with lower
    leader requirement" (TASCacheNodeMatchResults on)."""
    objects = [*tas_setup(levels=LEVELS),
               host("x1", block="b1", rack="r1", cpu="5"),
               host("x2", block="b1", rack="r1", cpu="5")]
    workers = pod_set("workers", count=4, cpu="2", required=BLOCK, slice_topology=HOSTNAME, slice_size=2,
                      group=GROUP)
    result = place_group(objects, [leader(), workers], TASCacheNodeMatchResults=True)
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x1", 2), ("x2", 2))


def test_grouped_multi_layer_slicing_constraints_on_workers():
    """Go case: "grouped with leader and sliced workers; multi-layer slicing constraints on
    workers"."""
    objects = [*tas_setup(levels=LEVELS),
               host("x1", block="b1", rack="r1", cpu="5"),
               host("x2", block="b1", rack="r1", cpu="5"),
               host("x3", block="b1", rack="r2", cpu="5"),
               host("x4", block="b1", rack="r2", cpu="5")]
    workers = pod_set("workers", count=8, cpu="2", raw_topology_request={
        "required": BLOCK,
        "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}, {"topology": HOSTNAME, "size": 2}],
        "podSetGroupName": GROUP,
    })
    result = place_group(objects, [leader(), workers])
    assert result["leader"].failure == ""
    assert shape(result["leader"].assignment) == expected(("x1", 1))
    assert result["workers"].failure == ""
    assert shape(result["workers"].assignment) == expected(("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2))


def test_grouped_replace_unhealthy_node_with_sliced_workers():
    """Go case: "grouped with leader and sliced workers; replace unhealthy node with sliced
    workers" (TASCacheNodeMatchResults on). x2 is NotReady and listed unhealthy; its two
    workers (one slice of 2 at hostname level) must go together to the only node with room
    for both, x3."""
    objects = [*tas_setup(levels=LEVELS),
               host("x1", block="b1", rack="r1", cpu="500m"),
               host("x2", block="b1", rack="r1", cpu="5", ready="False"),
               host("x3", block="b1", rack="r1", cpu="5"),
               host("x4", block="b1", rack="r2", cpu="2"),
               host("x5", block="b1", rack="r2", cpu="2")]
    workers = pod_set("workers", count=4, cpu="2", required=BLOCK, slice_topology=HOSTNAME, slice_size=2,
                      group=GROUP)
    wl = admitted(workload("wl", pod_sets=[leader(), workers]), assignments={
        "leader": domains_json([HOSTNAME], [("x1", 1)]),
        "workers": domains_json([HOSTNAME], [("x1", 2), ("x2", 2)]),
    }, unhealthy_nodes=["x2"])
    result = result_of(run([*objects, wl], feature_gates=gates(TASCacheNodeMatchResults=True)), "wl")
    assert result.status == "Admitted", result.message
    by_name = {ps.name: ps for ps in result.pod_sets}
    assert by_name["workers"].failure_reason == ""
    assert shape(by_name["workers"].assignment) == expected(("x1", 2), ("x3", 2))
