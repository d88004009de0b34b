"""Topology requests a flavor's topology cannot answer: a level it lacks, or no Topology at all.

Kueue's flavor assigner rejects such a flavor before any placement (checkPodSetAndFlavorMatchForTAS:
"does not contain the requested level", "information missing in TAS cache"); its placement,
reached when flavors are already assigned (node replacement, second pass), gives the
placement's own reason ("no requested topology level for slices: ..."), which the cycle
wraps into "couldn't assign flavors to pod set ...: ...".
"""

from __future__ import annotations

import pytest

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    admitted,
    cluster_queue,
    domains_json,
    gates,
    grid,
    local_queue,
    node,
    pod_set,
    resource_flavor,
    result_of,
    run,
    tas_setup,
    topology,
    workload,
)

LACKS_LEVEL = "couldn't assign flavors to pod set main: Flavor \"tas-flavor\" does not contain the requested level"


def pending(wl: dict, objects: list[dict] | None = None):
    result = run([*(objects if objects is not None else tas_setup() + grid()), wl])
    return result_of(result, wl["metadata"]["name"])


@pytest.mark.parametrize(("request_kwargs", "placement_reason"), [
    ({"required": "example.com/zone"}, "no requested topology level: example.com/zone"),
    ({"preferred": "example.com/zone"}, "no requested topology level: example.com/zone"),
    ({"required": BLOCK, "slice_topology": "example.com/zone", "slice_size": 1},
     "no requested topology level for slices: example.com/zone"),
])
def test_a_level_the_topology_lacks(request_kwargs, placement_reason):
    wl = pending(workload("train", count=2, **request_kwargs))
    assert wl.status == "Inadmissible"
    assert wl.message == LACKS_LEVEL  # the flavor assigner's words, in the condition and the event
    condition = next(c for c in wl.conditions if c.type == "QuotaReserved")
    assert (condition.status, condition.reason, condition.message) == ("False", "NoMatchingFlavor", LACKS_LEVEL)
    # the PodSet's failure: what the placement says of the request on that topology
    (ps,) = wl.pod_sets
    assert ps.failure_reason == placement_reason


def test_an_inner_slice_layer_the_topology_lacks():
    ps = pod_set(count=4, raw_topology_request={"required": BLOCK, "podsetSliceRequiredTopologyConstraints": [
        {"topology": RACK, "size": 4}, {"topology": "example.com/zone", "size": 2}]})
    wl = pending(workload("train", pod_sets=[ps]))
    assert (wl.status, wl.message) == ("Inadmissible", LACKS_LEVEL)
    assert wl.pod_sets[0].failure_reason == "no requested topology level for additional slice layer: example.com/zone"


def test_the_level_is_in_the_second_flavor():
    objects = [topology(), topology("zones", levels=("example.com/zone", HOSTNAME)),
               resource_flavor(), resource_flavor("zoned", topology_name="zones", node_labels={"kind": "zoned"}),
               cluster_queue(flavors=("tas-flavor", "zoned")), local_queue(),
               *grid(), node("z1", labels={"kind": "zoned", "example.com/zone": "z"})]
    wl = pending(workload("train", required="example.com/zone"), objects)
    assert wl.status == "Admitted"
    assert wl.pod_sets[0].flavors == {"cpu": "zoned"}


def test_the_flavors_topology_does_not_exist():
    # Kueue holds the ClusterQueue inactive (TopologyNotFound): its workloads are not even tried
    objects = [topology(), resource_flavor(topology_name="missing"), cluster_queue(), local_queue(), *grid()]
    wl = pending(workload("train", required=RACK), objects)
    assert (wl.status, wl.message) == ("Inadmissible", "ClusterQueue cq is inactive")
    assert wl.pod_sets[0].failure_reason == ""


def test_a_replacement_on_a_topology_that_lost_the_slice_level():
    # admitted with rack slices, then the Topology lost its rack level; a node fails
    nodes = [node(f"b1-r1-n{n}", block="b1", rack="r1", cpu="2") for n in (1, 2, 3)]
    nodes[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    wl = workload("train", count=2, cpu="1", required=BLOCK, slice_topology=RACK, slice_size=2)
    wl = admitted(wl, assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1), ("b1-r1-n2", 1)])},
                  unhealthy_nodes=["b1-r1-n1"])
    objects = [*tas_setup(levels=(BLOCK, HOSTNAME)), *nodes, wl]
    result = run(objects, feature_gates=gates(TASFailedNodeReplacementFailFast=False))
    failed = [e.message for e in result.events if e.reason == "SecondPassFailed"]
    assert failed == [f"couldn't assign flavors to pod set main: no requested topology level for slices: {RACK}"]
    assert result_of(result, "train").pod_sets[0].failure_reason == f"no requested topology level for slices: {RACK}"


# ---------------------------------------------------------------- why-pending on odd topologies

ODD_NODES = {
    "no nodes": [],
    "one node": [node("x1", block="b1", rack="r1", cpu="2")],
    "nodes without topology labels": [node("x1", cpu="8"), node("x2", cpu="8")],
    "not ready, cordoned and tainted only": [
        node("x1", block="b1", rack="r1", ready="False"), node("x2", block="b1", rack="r1", unschedulable=True),
        node("x3", block="b1", rack="r2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])],
    "a grid": grid(cpu="2"),
}
ODD_REQUESTS = [
    {"required": BLOCK}, {"required": RACK}, {"required": HOSTNAME}, {"preferred": RACK}, {"unconstrained": True},
    {"required": RACK, "slice_topology": HOSTNAME, "slice_size": 2},
    {"required": BLOCK, "slice_topology": RACK, "slice_size": 4},
    {"required": "example.com/zone"},
]


@pytest.mark.parametrize("nodes", sorted(ODD_NODES))
def test_every_waiting_workload_is_explained_whatever_the_nodes(nodes):
    """Why-pending answers for every request shape on clusters short of nodes, labels or healthy
    nodes: an answer that agrees with the pass (never an exception, which the API would turn
    into an error for the user asking)."""
    from scheduler.engine import Engine

    from .factories import NOW, parse

    workloads = [workload(f"w{i}", count=4, cpu="1", created=i, **kwargs) for i, kwargs in enumerate(ODD_REQUESTS)]
    engine = Engine.from_parsed(parse([*tas_setup(), *ODD_NODES[nodes], *workloads]), gates())
    outcome = engine.run_pass(NOW)
    for wl in workloads:
        key = f"default/{wl['metadata']['name']}"
        why = engine.explain(key, NOW)
        admitted_now = engine.state.workload(key).is_admitted
        assert why is not None and why.summary, key
        assert (outcome.decided[key].status == "Admitted") == admitted_now
        if not admitted_now:
            assert not why.fits, (key, why.summary)
