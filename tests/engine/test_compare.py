"""Side by side with Kueue (`scheduler.compare`): each category arises where it should, on
small clusters where Kueue's admission is written by hand, and the comparison leaves the
engine's state as it found it."""

from __future__ import annotations

from scheduler import compare
from scheduler.compare import common_domain, compare_admission, compare_admissions
from scheduler.engine import Engine

from .factories import (
    BLOCK,
    HOSTNAME,
    LEVELS,
    NOW,
    RACK,
    admitted,
    cluster_queue,
    domains_json,
    gates,
    grid,
    local_queue,
    node,
    parse,
    resource_flavor,
    tas_setup,
    topology,
    workload,
)

# 2 blocks x 2 racks x 2 nodes of 4 CPUs
CLUSTER = tas_setup() + grid(2, 2, 2, cpu="4")


def on_nodes(name: str, placed: list[tuple[str, int]], **kwargs) -> dict:
    """Workload `name` admitted by Kueue with its pods on these nodes (hostname-only levels)."""
    count = sum(n for _, n in placed)
    return admitted(workload(name, count=count, **kwargs),
                    assignments={"main": domains_json([HOSTNAME], placed)})


def engine_of(*objects: dict, feature_gates=None) -> Engine:
    return Engine.from_parsed(parse([*CLUSTER, *objects]), feature_gates or gates())


def compared(*objects: dict, key: str = "default/w") -> compare.Comparison:
    found = compare_admission(engine_of(*objects), key, NOW)
    assert found is not None
    return found


def test_same_domains_when_the_engine_would_have_put_the_pods_where_kueue_did():
    c = compared(on_nodes("w", [("b1-r1-n1", 2)], cpu="2", required=RACK))
    assert c.category == compare.SAME_DOMAINS and c.agrees
    assert [d.values for d in c.kueue[0].domains] == [("b1", "r1", "b1-r1-n1")]
    assert c.kueue[0].domains[0].room == 2  # its own admission is not counted against it
    assert c.engine[0].key() == c.kueue[0].key()
    assert c.pod_sets == {"main": compare.SAME_DOMAINS} and c.reason == "" and c.stop is None


def test_same_level_other_domains_when_both_fill_one_node_but_not_the_same():
    c = compared(on_nodes("w", [("b2-r2-n2", 2)], cpu="2", required=RACK))
    assert c.category == compare.SAME_LEVEL_OTHER_DOMAINS
    assert c.kueue[0].level == c.engine[0].level == HOSTNAME
    assert c.kueue[0].domain == ("b2", "r2", "b2-r2-n2")
    assert c.engine[0].domain != c.kueue[0].domain


def test_counts_must_match_for_same_domains():
    # the same two nodes of one rack, the pods spread otherwise over them
    busy = on_nodes("x", [("b1-r1-n1", 1)], cpu="2")
    c = compared(busy, on_nodes("w", [("b1-r1-n1", 2), ("b1-r1-n2", 3)], cpu="1", required=RACK))
    assert {d.values for d in c.engine[0].domains} == {d.values for d in c.kueue[0].domains}
    assert [d.count for d in c.engine[0].domains] == [1, 4]
    assert c.category == compare.SAME_LEVEL_OTHER_DOMAINS and c.kueue[0].level == RACK


def test_different_level_when_kueue_spreads_what_one_node_holds():
    c = compared(on_nodes("w", [("b1-r1-n1", 1), ("b1-r2-n1", 1)], cpu="2", preferred=RACK))
    assert c.kueue[0].level == BLOCK and c.kueue[0].domain == ("b1",)
    assert c.engine[0].level == HOSTNAME
    assert c.category == compare.DIFFERENT_LEVEL and not c.agrees


def test_engine_would_not_admit_a_workload_bigger_than_the_rack_it_requires():
    # three 4-CPU pods need three nodes; a rack has two: Kueue placed them across racks anyway
    c = compared(on_nodes("w", [("b1-r1-n1", 1), ("b1-r1-n2", 1), ("b1-r2-n1", 1)], cpu="4", required=RACK))
    assert c.category == compare.ENGINE_WOULD_NOT_ADMIT
    assert c.engine == []
    assert c.stop is not None and c.stop.step == "topology"
    assert c.reason == c.stop.message and "topology" in c.reason
    assert all(d.room == 1 for d in c.kueue[0].domains)  # Kueue's nodes do have room


def test_engine_would_not_admit_beyond_the_quota_it_counts():
    objects = [topology(levels=LEVELS), resource_flavor(), cluster_queue(quota={"cpu": "2"}), local_queue(),
               *grid(1, 1, 2, cpu="4"),
               on_nodes("other", [("b1-r1-n2", 1)], cpu="2"), on_nodes("w", [("b1-r1-n1", 1)], cpu="2")]
    found = compare_admission(Engine.from_parsed(parse(objects), gates()), "default/w", NOW)
    assert found is not None and found.category == compare.ENGINE_WOULD_NOT_ADMIT
    assert found.stop is not None and found.stop.step in ("quota", "no-candidates")


def test_no_capacity_for_kueue_when_its_node_is_full_in_the_engines_view():
    c = compared(on_nodes("x", [("b1-r1-n1", 1)], cpu="4"), on_nodes("w", [("b1-r1-n1", 2)], cpu="2"))
    assert c.category == compare.NO_CAPACITY_FOR_KUEUE
    assert c.kueue[0].domains[0].room == 0 and c.kueue[0].domains[0].short
    assert "b1/r1/b1-r1-n1 has room for 0 of its 2 pod(s)" in c.reason
    assert c.engine  # the engine would have placed it elsewhere: kept for the picture


def test_no_capacity_for_kueue_on_a_node_the_engine_finds_not_ready():
    objects = [*tas_setup(), node("b1-r1-n1", block="b1", rack="r1", cpu="4", ready="False"),
               node("b1-r1-n2", block="b1", rack="r1", cpu="4"),
               on_nodes("w", [("b1-r1-n1", 1)], cpu="2")]
    c = compare_admission(Engine.from_parsed(parse(objects), gates()), "default/w", NOW)
    assert c is not None and c.category == compare.NO_CAPACITY_FOR_KUEUE
    assert c.kueue[0].domains[0].values == ("b1", "r1", "b1-r1-n1")  # its path from the node's labels


def test_each_newly_admitted_workload_is_compared_with_the_others_still_admitted():
    # Kueue admitted both onto one node in the same interval: each fits beside the other
    a = on_nodes("a", [("b1-r1-n1", 1)], cpu="2")
    b = on_nodes("b", [("b1-r1-n1", 1)], cpu="2")
    engine = engine_of(a, b)
    found = {c.key: c for c in compare_admissions(engine, ["default/a", "default/b"], NOW)}
    assert set(found) == {"default/a", "default/b"}
    for c in found.values():
        assert c.kueue[0].domains[0].room == 1  # the other one holds the node's other 2 CPUs
        assert c.category != compare.NO_CAPACITY_FOR_KUEUE


def test_a_comparison_leaves_the_state_as_it_found_it():
    objects = [on_nodes("a", [("b1-r1-n1", 2)], cpu="2"), on_nodes("b", [("b2-r1-n1", 1)], cpu="2"),
               workload("pending-1", count=3, cpu="2", required=RACK, created=10),
               workload("pending-2", count=1, cpu="4", unconstrained=True, created=20)]
    fresh = engine_of(*objects)
    touched = engine_of(*objects)
    assert len(compare_admissions(touched, ["default/a", "default/b"], NOW)) == 2
    for engine in (fresh, touched):
        engine.run_pass(NOW)

    def outcome(engine: Engine) -> dict:
        return {key: (wl.admission.pod_set_assignments[0].topology_assignment if wl.admission else None,
                      [c.type for c in wl.conditions]) for key, wl in engine.state.workload_map.items()}

    assert outcome(touched) == outcome(fresh)
    snaps = touched.state.tas_snapshots["tas-flavor"], fresh.state.tas_snapshots["tas-flavor"]
    assert (snaps[0].remaining() == snaps[1].remaining()).all()


def test_workloads_without_a_topology_assignment_or_admission_are_not_compared():
    plain = admitted(workload("plain", count=1, cpu="1"), assignments={})
    waiting = workload("waiting", count=1, cpu="1")
    engine = engine_of(plain, waiting)
    assert compare_admissions(engine, ["default/plain", "default/waiting", "default/gone"], NOW) == []


def test_the_placement_level_is_the_lowest_one_holding_every_pod():
    assert common_domain(LEVELS, [("b1", "r1", "n1"), ("b1", "r1", "n2")]) == (RACK, ("b1", "r1"))
    assert common_domain(LEVELS, [("b1", "r1", "n1")]) == (HOSTNAME, ("b1", "r1", "n1"))
    assert common_domain(LEVELS, [("b1", "r1", "n1"), ("b2", "r1", "n1")]) == ("", ())
    assert common_domain(LEVELS, []) == ("", ())


def test_agreement_rate():
    assert compare.agreement_rate({}) is None
    assert compare.agreement_rate({compare.SAME_DOMAINS: 3, compare.DIFFERENT_LEVEL: 1}) == 0.75
