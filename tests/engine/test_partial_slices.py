"""TASPartialSlices (Kueue v0.19.6, on by default): a PodSet whose count is not a multiple of
its single slice layer's size is placed as whole slices plus one partial slice of the
remaining pods, held like any slice by one domain at the slice level.

The cluster is one block b1. Racks hold 4 pods a node (4 CPU, 1 CPU a pod) unless a test
builds its own. Every placement is checked for the invariant the ungater relies on: each
domain at the slice level holds whole slices, except the one named last, which holds the
partial slice.
"""

from __future__ import annotations

import pytest

from scheduler.assignment import TopologyAssignment
from scheduler.topology_assignment import (
    find_replacement_assignment,
    find_topology_assignment,
    partial_slice_size,
    slice_aligned,
    tail_last,
)

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    admitted,
    domains,
    domains_json,
    flavor_snapshot,
    gates,
    node,
    place,
    pod_set,
    tas_requests,
    tas_setup,
    workload,
)

LEVELS = (BLOCK, RACK, HOSTNAME)


def host(name: str, rack: str, cpu: int = 4, ready: str = "True") -> dict:
    return node(name, block="b1", rack=rack, cpu=str(cpu), pods="20", ready=ready)


def cluster(*nodes: dict) -> list[dict]:
    return [*tas_setup(quota={"cpu": 1000}), *nodes]


def sliced(count: int, *, size: int = 4, slice_level: str = RACK, **request) -> dict:
    request = request or {"required": BLOCK}
    return workload("train", count=count, cpu="1", slice_topology=slice_level, slice_size=size, **request)


def per_rack(assignment: TopologyAssignment, rack_of: dict[str, str]) -> list[tuple[str, int]]:
    """Pods per rack, in the order the assignment names the racks."""
    out: dict[str, int] = {}
    for dom in assignment.domains:
        rack = rack_of[dom.values[-1]]
        out[rack] = out.get(rack, 0) + dom.count
    return list(out.items())


def assert_whole_slices_then_partial(assignment: TopologyAssignment, rack_of: dict[str, str], size: int) -> None:
    racks = per_rack(assignment, rack_of)
    total = sum(n for _, n in racks)
    assert [n % size for _, n in racks[:-1]] == [0] * (len(racks) - 1), racks
    assert racks[-1][1] % size == total % size, racks


TWO_RACKS = (host("n1", "r1"), host("n2", "r1"), host("n3", "r2", cpu=2), host("n4", "r2", cpu=2))
RACK_OF = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2", "n5": "r1"}


@pytest.mark.parametrize(("count", "expected"), [
    # two whole slices fill r1; the partial slice of 2 goes to r2, on one node (BestFit)
    (10, [("n1", 4), ("n2", 4), ("n3", 2)]),
    # a partial slice of 3 needs both of r2's nodes, still one rack
    (11, [("n1", 4), ("n2", 4), ("n3", 2), ("n4", 1)]),
])
def test_whole_slices_and_the_partial_slice_each_in_one_rack(count, expected):
    assignment, reason = place(cluster(*TWO_RACKS), sliced(count))
    assert reason == ""
    assert domains(assignment) == expected
    assert assignment.pod_count == count
    assert_whole_slices_then_partial(assignment, RACK_OF, 4)


def test_the_domain_holding_the_partial_slice_is_named_last():
    """The ungater ranks pods in the order of the assignment's domains: r1 (the partial
    slice) sorts before r2 by its values, so its nodes are moved behind r2's."""
    nodes = (host("n1", "r1", cpu=2), host("n2", "r1", cpu=2), host("n3", "r2"), host("n4", "r2"))
    assignment, reason = place(cluster(*nodes), sliced(10))
    assert reason == ""
    assert domains(assignment) == [("n3", 4), ("n4", 4), ("n1", 2)]
    assert_whole_slices_then_partial(assignment, RACK_OF | {"n3": "r2", "n4": "r2"}, 4)


def test_a_rack_that_holds_both_takes_the_partial_slice_beside_its_whole_ones():
    """r1 has room for 2 slices and the 2 extra pods (12 pods), so nothing is opened in r2."""
    nodes = (host("n1", "r1"), host("n2", "r1"), host("n5", "r1"), host("n3", "r2"))
    assignment, reason = place(cluster(*nodes), sliced(10, required=RACK))
    assert reason == ""
    assert per_rack(assignment, RACK_OF) == [("r1", 10)]


def test_a_required_rack_without_room_for_the_partial_slice_says_so():
    """Each rack holds 2 whole slices (8 pods) but not the partial one beside them: the
    partial slice counts as a slice of its own in the message."""
    nodes = (host("n1", "r1"), host("n2", "r1"), host("n3", "r2"), host("n4", "r2"))
    assignment, reason = place(cluster(*nodes), sliced(10, required=RACK))
    assert assignment is None
    assert reason == 'topology "default" allows to fit only 2 out of 3 slice(s)'


def test_slices_at_the_hostname_level_put_the_partial_slice_on_one_node():
    nodes = (host("n1", "r1"), host("n2", "r1"), host("n3", "r2", cpu=2))
    assignment, reason = place(cluster(*nodes), sliced(7, slice_level=HOSTNAME))
    assert reason == ""
    assert domains(assignment) == [("n1", 4), ("n2", 3)]


def test_a_preferred_level_moves_up_when_no_rack_holds_the_partial_slice():
    assignment, reason = place(cluster(*TWO_RACKS), sliced(10, preferred=RACK))
    assert reason == ""
    assert domains(assignment) == [("n1", 4), ("n2", 4), ("n3", 2)]


def test_balanced_placement_leaves_a_pod_set_with_a_partial_slice_to_best_fit():
    """Kueue's BalancedPlacement spreads whole slices only; such a PodSet takes BestFit."""
    on = gates(TASBalancedPlacement=True)
    assert place(cluster(*TWO_RACKS), sliced(10, preferred=RACK), feature_gates=on) == \
        place(cluster(*TWO_RACKS), sliced(10, preferred=RACK))


def test_with_the_gate_off_the_pod_set_waits_with_a_reason_instead_of_losing_pods():
    assignment, reason = place(cluster(*TWO_RACKS), sliced(10), feature_gates=gates(TASPartialSlices=False))
    assert assignment is None
    assert reason == ("the count 10 of PodSet main is not a multiple of its slice size 4, which needs the "
                      "TASPartialSlices feature gate")


def test_a_pod_set_that_divides_is_placed_as_before_whatever_the_gate():
    on, off = place(cluster(*TWO_RACKS), sliced(8)), place(cluster(*TWO_RACKS), sliced(8),
                                                               feature_gates=gates(TASPartialSlices=False))
    assert on == off
    assert domains(on[0]) == [("n1", 4), ("n2", 4)]


def test_the_leader_and_the_partial_slice_are_costed_together():
    """A leader of 1 CPU with workers of 6 pods in slices of 4 on racks: every pod lands, the
    leader beside the workers in the required block, the slices whole."""
    group = {"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4,
             "podSetGroupName": "g"}
    wl = workload("train", pod_sets=[pod_set("leader", count=1, cpu="1", raw_topology_request=group),
                                     pod_set("workers", count=6, cpu="1", raw_topology_request=group)])
    nodes = (host("n1", "r1"), host("n2", "r1", cpu=1), host("n3", "r2", cpu=2))
    snap = flavor_snapshot(cluster(*nodes))
    leader, workers = tas_requests(wl)
    assignments, reason = find_topology_assignment(snap, workers, leader, gates=gates())
    assert reason == ""
    assert assignments["leader"].pod_count == 1
    assert assignments["workers"].pod_count == 6
    assert_whole_slices_then_partial(assignments["workers"], RACK_OF | {"n3": "r2"}, 4)
    used = {d.values[-1]: d.count for d in assignments["workers"].domains}
    for dom in assignments["leader"].domains:
        used[dom.values[-1]] = used.get(dom.values[-1], 0) + dom.count
    capacity = {"n1": 4, "n2": 1, "n3": 2}
    assert all(n <= capacity[name] for name, n in used.items()), used


def test_only_a_single_layer_has_a_partial_slice():
    wl = workload("train", count=10, cpu="1", required=BLOCK, slice_topology=RACK, slice_size=4)
    (request,) = tas_requests(wl)
    assert partial_slice_size(request.topology_request, 10) == 2
    assert partial_slice_size(request.topology_request, 8) == 0
    assert partial_slice_size(None, 10) == 0
    layers = {"required": BLOCK, "podsetSliceRequiredTopologyConstraints": [
        {"topology": RACK, "size": 4}, {"topology": HOSTNAME, "size": 2}]}
    (two,) = tas_requests(workload("train", count=8, raw_topology_request=layers))
    assert partial_slice_size(two.topology_request, 10) == 0  # more layers: never a partial slice


def test_tail_last_and_alignment_read_the_slice_level_domains():
    snap = flavor_snapshot(cluster(*TWO_RACKS))
    rack = snap.tree.level_index(RACK)
    a = TopologyAssignment.of((HOSTNAME,), [(("n3",), 2), (("n1",), 4), (("n2",), 4)])
    moved = tail_last(snap, a, rack, 4)
    assert [(d.values[0], d.count) for d in moved.domains] == [("n1", 4), ("n2", 4), ("n3", 2)]
    assert not slice_aligned(snap, a, rack, 4)
    assert slice_aligned(snap, moved, rack, 4)
    split = TopologyAssignment.of((HOSTNAME,), [(("n1",), 3), (("n3",), 3)])
    assert tail_last(snap, split, rack, 4) == split  # no domain holds the partial slice alone
    assert not slice_aligned(snap, split, rack, 4)


# ---------------------------------------------------------------- node replacement


def running(nodes_down: str) -> tuple[list[dict], TopologyAssignment]:
    """`train` (10 pods, slices of 4 on racks) running on n1, n2 (r1) and n3 (r2, the partial
    slice); n5 in r1 is free; `nodes_down` is NotReady."""
    nodes = [host(n, RACK_OF[n] if n != "n3" else "r2", ready="False" if n == nodes_down else "True")
             for n in ("n1", "n2", "n5", "n3")]
    layout = [("n1", 4), ("n2", 4), ("n3", 2)]
    wl = admitted(sliced(10), assignments={"main": domains_json((HOSTNAME,), layout)})
    return [*cluster(*nodes), wl], TopologyAssignment.of((HOSTNAME,), [((n,), c) for n, c in layout])


def replace_node(down: str) -> tuple[TopologyAssignment | None, str]:
    objects, existing = running(down)
    snap = flavor_snapshot(objects)
    (request,) = tas_requests(sliced(10))
    merged, _, reason = find_replacement_assignment(snap, request, existing, down, gates=gates())
    return merged, reason


def test_a_node_of_a_whole_slice_is_replaced_in_its_rack():
    merged, reason = replace_node("n1")
    assert reason == ""
    assert [(d.values[0], d.count) for d in merged.domains] == [("n2", 4), ("n5", 4), ("n3", 2)]


def test_when_the_partial_slice_loses_every_pod_the_rack_now_last_takes_it_over():
    merged, reason = replace_node("n3")
    assert reason == ""
    assert [(d.values[0], d.count) for d in merged.domains] == [("n1", 4), ("n2", 4), ("n5", 2)]


# ---------------------------------------------------------------- why pending


def test_why_pending_counts_the_partial_slice_and_its_suggestions_hold():
    """Each rack holds 2 whole slices of 4 but not the partial slice beside them: the rack level
    says 2 of the 3 slices needed, and each suggestion is checked by placing what it says."""
    from datetime import timedelta

    from scheduler.engine import Engine

    from .factories import NOW, grid, local_queue, parse, queue_with_policy, resource_flavor, topology

    wl = workload("train", queue="lq", count=10, cpu="1", required=RACK, slice_topology=RACK, slice_size=4)
    objects = [topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"), queue_with_policy("cq", cpu=100),
               local_queue("lq", cluster_queue_name="cq"), wl]
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/train", NOW)
    (pod_set_why,) = why.pod_sets
    assert not pod_set_why.fits
    rack = next(fit for fit in pod_set_why.levels if fit.level == RACK)
    assert (rack.needed, rack.best_fits, rack.domains_that_fit) == (3, 2, 0)
    found = {s.kind: s for s in pod_set_why.suggestions}
    assert found["higher-level"].message == ("would fit with `required: cloud.example.com/block`: domain b1 "
                                             "has room for 4 slice(s), 3 needed")
    assert found["fewer-pods"].message == "8 pod(s) would fit now instead of 10"
    # true: at the block level it is placed, and 8 pods fit a rack
    cluster_objects = objects[:-1]
    assert place(cluster_objects, workload("train", count=10, cpu="1", required=BLOCK, slice_topology=RACK,
                                           slice_size=4))[1] == ""
    assert place(cluster_objects, workload("train", count=8, cpu="1", required=RACK, slice_topology=RACK,
                                           slice_size=4))[1] == ""
    # and the pass does not admit it as it is
    engine.run_pass(NOW + timedelta(seconds=1))
    assert not engine.state.workload("default/train").has_quota_reservation


# ---------------------------------------------------------------- any cluster, any request

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cpus=st.lists(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=3), min_size=1, max_size=3),
                  min_size=1, max_size=2),
    whole=st.integers(1, 3),
    tail=st.integers(0, 4),
    size=st.integers(2, 5),
    mode=st.sampled_from(["required-block", "required-rack", "preferred-rack", "preferred-block"]),
    slice_level=st.sampled_from([RACK, HOSTNAME]),
    with_leader=st.booleans(),
)
def test_a_placement_keeps_every_pod_whole_slices_and_the_capacity(cpus, whole, tail, size, mode, slice_level,
                                                                   with_leader):
    """Whatever the cluster: a placement that succeeds places every pod, on nodes with room for
    them (the leader's pod included), each slice-level domain holding whole slices but the last,
    which holds the partial slice; the required level is kept. And a rack with room for every
    pod (the leader's too) is always found for a block-required PodSet sliced by racks."""
    count = whole * size + tail % size
    nodes, rack_of, block_of, room = [], {}, {}, {}
    for b, racks in enumerate(cpus):
        for r, hosts in enumerate(racks):
            for n, cpu in enumerate(hosts):
                name = f"b{b}-r{r}-n{n}"
                nodes.append(node(name, block=f"b{b}", rack=f"b{b}-r{r}", cpu=str(cpu), pods="50"))
                rack_of[name], block_of[name], room[name] = f"b{b}-r{r}", f"b{b}", cpu
    kind, level = mode.split("-")
    request = {kind: BLOCK if level == "block" else RACK, "podSetSliceRequiredTopology": slice_level,
               "podSetSliceSize": size}
    if with_leader:
        request["podSetGroupName"] = "g"
        wl = workload("train", pod_sets=[pod_set("leader", count=1, cpu="1", raw_topology_request=request),
                                         pod_set("workers", count=count, cpu="1", raw_topology_request=request)])
    else:
        wl = workload("train", pod_sets=[pod_set("workers", count=count, cpu="1", raw_topology_request=request)])
    snap = flavor_snapshot(cluster(*nodes))
    requests = tas_requests(wl)
    leader, workers = (requests[0], requests[1]) if with_leader else (None, requests[0])
    assignments, reason = find_topology_assignment(snap, workers, leader, gates=gates())
    event("placed" if not reason else "not placed")
    rack_room: dict[str, int] = {}
    for name, cpu in room.items():
        rack_room[rack_of[name]] = rack_room.get(rack_of[name], 0) + cpu
    if mode == "required-block" and slice_level == RACK and max(rack_room.values()) >= count + with_leader:
        assert not reason, (reason, rack_room, count, size)  # one rack holds every pod: it is found
    if reason:
        return
    event("with a partial slice" if count % size else "whole slices only")
    placed = assignments["workers"]
    assert placed.pod_count == count
    used: dict[str, int] = {}
    for a in assignments.values():
        for dom in a.domains:
            used[dom.values[-1]] = used.get(dom.values[-1], 0) + dom.count
    assert all(n <= room[name] for name, n in used.items()), (used, room)
    if with_leader:
        assert assignments["leader"].pod_count == 1
    group_of = rack_of if slice_level == RACK else {name: name for name in rack_of}
    slice_domains: dict[str, int] = {}
    for dom in placed.domains:
        slice_domains[group_of[dom.values[-1]]] = slice_domains.get(group_of[dom.values[-1]], 0) + dom.count
    counts = list(slice_domains.values())
    assert all(n % size == 0 for n in counts[:-1]) and counts[-1] % size == count % size, (slice_domains, size)
    if kind == "required":
        holder = block_of if level == "block" else rack_of
        everything = [d.values[-1] for a in assignments.values() for d in a.domains]
        assert len({holder[name] for name in everything}) == 1
