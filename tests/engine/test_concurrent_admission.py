"""ConcurrentAdmission: a workload variant carrying kueue.x-k8s.io/allowed-resource-flavor takes
only the flavors it names (Kueue's flavor assigner skips the others), and variants allowed
different flavors are not one scheduling equivalence class."""

from __future__ import annotations

import pytest

from scheduler.cluster import ALLOWED_RESOURCE_FLAVOR_ANNOTATION, allowed_flavors
from scheduler.engine import Engine
from scheduler.eta import NEVER_AS_PARENT, estimate
from scheduler.explain import explain_workload
from scheduler.stops import PARENT as PARENT_STEP
from scheduler.stops import WAITS

from .factories import (
    NOW,
    cluster_queue,
    gates,
    local_queue,
    node,
    owner_reference,
    parse,
    parse_one,
    resource_flavor,
    result_of,
    run,
    workload,
)

ON_DEMAND, SPOT = "on-demand", "spot"
ON = gates(ConcurrentAdmission=True)


def cluster(*, on_demand_cpu: str = "4", spot_cpu: str = "4") -> list[dict]:
    cq = cluster_queue(flavors=(ON_DEMAND, SPOT), quota={"cpu": "4"})
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    flavors[0]["resources"][0]["nominalQuota"] = on_demand_cpu
    flavors[1]["resources"][0]["nominalQuota"] = spot_cpu
    return [resource_flavor(ON_DEMAND, topology_name=None), resource_flavor(SPOT, topology_name=None), cq,
            local_queue(), node("n1", labels={}, cpu="64")]


def variant(name: str, allowed: str | None, *, cpu: str = "1", created: float = 0) -> dict:
    annotations = {ALLOWED_RESOURCE_FLAVOR_ANNOTATION: allowed} if allowed is not None else None
    return workload(name, cpu=cpu, annotations=annotations, created=created)


@pytest.mark.parametrize("text, allowed", [
    (None, None),
    ("spot", ("spot",)),
    (" spot , on-demand ", ("spot", "on-demand")),
    ("", ()),
    ("  ", ()),
])
def test_reading_the_annotation(text, allowed):
    wl = parse_one(variant("v", text))
    assert allowed_flavors(wl) == allowed


def test_a_variant_takes_the_flavor_it_names():
    objects = [*cluster(), variant("v", SPOT)]
    assert result_of(run(objects, feature_gates=ON), "v").pod_sets[0].flavors == {"cpu": SPOT}
    # with the gate off the annotation means nothing: the first flavor that fits
    assert result_of(run(objects), "v").pod_sets[0].flavors == {"cpu": ON_DEMAND}


def test_a_workload_without_the_annotation_takes_any_flavor():
    assert result_of(run([*cluster(), variant("v", None)], feature_gates=ON), "v").pod_sets[0].flavors == {
        "cpu": ON_DEMAND}


@pytest.mark.parametrize("allowed", ["gpu-reserved", ""])
def test_no_allowed_flavor_in_the_clusterqueue(allowed):
    wl = result_of(run([*cluster(), variant("v", allowed)], feature_gates=ON), "v")
    assert wl.status == "Inadmissible"
    assert f"skipping flavor {ON_DEMAND} due to WorkloadAllowedResourceFlavorAnnotation annotation" in wl.message
    assert f"skipping flavor {SPOT} due to WorkloadAllowedResourceFlavorAnnotation annotation" in wl.message


def test_the_allowed_flavor_must_have_room():
    wl = result_of(run([*cluster(spot_cpu="1"), variant("v", SPOT, cpu="2")], feature_gates=ON), "v")
    assert wl.status == "Inadmissible"
    assert f"insufficient quota for cpu in flavor {SPOT}" in wl.message
    assert f"skipping flavor {ON_DEMAND} due to WorkloadAllowedResourceFlavorAnnotation annotation" in wl.message


def test_variants_of_different_flavors_are_not_one_equivalence_class():
    """Same shape, same priority: without the annotation in the hash, the on-demand variant's
    no-fit would stand for the spot variant too, and it would wait with it."""
    objects = [*cluster(on_demand_cpu="1"),
               variant("a-on-demand", ON_DEMAND, cpu="2", created=0), variant("a-spot", SPOT, cpu="2", created=1)]
    result = run(objects, feature_gates=ON)
    assert result_of(result, "a-on-demand").status == "Inadmissible"
    spot = result_of(result, "a-spot")
    assert spot.status == "Admitted", spot.message
    assert spot.pod_sets[0].flavors == {"cpu": SPOT}


PARENT = {"kueue.x-k8s.io/concurrent-admission-parent": "true"}


def parent(name: str = "job") -> dict:
    wl = workload(name, cpu="1")
    wl["metadata"]["labels"] = dict(PARENT)
    return wl


def test_a_parent_is_not_scheduled_its_variants_are():
    """Kueue keeps a parent off its ClusterQueue's heap while the gate is on."""
    result = run([*cluster(), parent(), variant("job-variant-spot", SPOT)], feature_gates=ON)
    assert result_of(result, "job-variant-spot").status == "Admitted"
    job = result_of(result, "job")
    assert job.status == "Pending"
    assert job.workload.admission is None
    # with the gate off the label means nothing: the parent is a workload like any other
    assert result_of(run([*cluster(), parent()]), "job").status == "Admitted"


def test_only_the_label_value_true_makes_a_parent():
    wl = parent()
    wl["metadata"]["labels"] = {"kueue.x-k8s.io/concurrent-admission-parent": "sample-job"}
    assert result_of(run([*cluster(), wl], feature_gates=ON), "job").status == "Admitted"


# ---------------------------------------------------------------- why a parent waits

def owned_variant(name: str, allowed: str, *, cpu: str = "1") -> dict:
    wl = variant(name, allowed, cpu=cpu)
    wl["metadata"]["ownerReferences"] = [owner_reference("Workload", "job", api_version="kueue.x-k8s.io/v1beta2")]
    return wl


def engine_after_pass(objects: list[dict], feature_gates=ON) -> Engine:
    engine = Engine.from_parsed(parse(objects), feature_gates, lambda _msg: None)
    engine.run_pass(NOW)
    return engine


def test_why_a_parent_waits_names_its_variants_not_a_fit():
    """The parent is never evaluated: why-pending must not say the next pass decides on it."""
    engine = engine_after_pass([*cluster(on_demand_cpu="0"), parent(),
                                owned_variant("job-variant-on-demand", ON_DEMAND),
                                owned_variant("job-variant-spot", SPOT)])
    out = engine.explain("default/job", NOW)
    assert out.stop.step == PARENT_STEP
    assert not out.fits
    assert out.summary.startswith("a ConcurrentAdmission parent: the scheduler admits one of its variants")
    assert "default/job-variant-on-demand (Pending), default/job-variant-spot (Admitted)" in out.summary
    assert out.stop.details["variants"] == [
        {"workload": "default/job-variant-on-demand", "status": "Pending"},
        {"workload": "default/job-variant-spot", "status": "Admitted"}]


def test_a_parent_without_variants_is_not_said_to_fit():
    """With no record of a cycle (the service's case), the answer is still the parent's."""
    engine = engine_after_pass([*cluster(), parent()])
    wl = engine.state.workload("default/job")
    out = explain_workload(engine.state, wl, stop=None)
    assert out.stop.step == PARENT_STEP and out.verdict == WAITS and not out.fits
    assert "it has no variants yet" in out.summary
    assert "room for it" not in out.summary


def test_without_the_gate_a_parent_label_explains_nothing():
    engine = engine_after_pass([*cluster(on_demand_cpu="0", spot_cpu="0"), parent()], feature_gates=gates())
    assert engine.explain("default/job", NOW).stop.step != PARENT_STEP


def test_the_variants_follow_their_owner_references():
    state = engine_after_pass([*cluster(), parent(), owned_variant("a", SPOT), owned_variant("b", SPOT)]).state
    assert [w.name for w in state.variants_of("default/job")] == ["a", "b"]
    state.delete_workload("default/a")
    orphaned = owned_variant("b", SPOT)
    orphaned["metadata"]["ownerReferences"] = []
    state.upsert_workload(parse_one(orphaned))
    assert state.variants_of("default/job") == []
    assert "default/job" not in state.owned_workloads


def test_a_parent_gets_no_start_estimate_and_is_told_why():
    engine = engine_after_pass([*cluster(on_demand_cpu="0", spot_cpu="0"), parent(),
                                owned_variant("job-variant-spot", SPOT)])
    predictions = estimate(engine, NOW).predictions
    assert predictions["default/job"].start is None
    assert predictions["default/job"].reason == NEVER_AS_PARENT
    assert predictions["default/job-variant-spot"].reason != NEVER_AS_PARENT


def test_a_parent_is_routed_again_when_its_queue_changes():
    """A parent kept off its queue is still followed: when its LocalQueue moves to a missing
    ClusterQueue it is an orphan, as a state built afresh finds it."""
    engine = engine_after_pass([*cluster(), parent()])
    engine.upsert(parse_one(local_queue(cluster_queue_name="missing")))
    outcome = engine.run_pass(NOW)
    assert outcome.decided["default/job"].message == "ClusterQueue missing doesn't exist"
    assert engine.stop_record("default/job", NOW).step == "orphan"
