"""Whole scheduling cycles from Kueue's TestScheduleForTASSchedulerLibrary (package
pkg/scheduler) that the conformance suite does not carry: each test builds
the case's cluster, runs one scheduling cycle with the case's feature gates, and checks what the
Go test checks (the new admissions with their topology assignments, the workloads left in the
queues and left inadmissible, and the events by key, type and reason; the Go test ignores the
events' messages)."""

from __future__ import annotations

from .factories import HOSTNAME, pod_set, resource_flavor, taint, toleration, topology
from .test_kueue_cycle_extra import (
    CPU,
    SINGLE_LEVEL,
    TAS_FLAVOR,
    assignment,
    cycle,
    events,
    left,
    main_queue,
    new_assignments,
    prov_check,
    reserved,
    single_level_setup,
    tas_node,
    tas_workload,
    want,
)

GPU_TAINT_KEY = "example.com/gpu"


def test_resource_flavor_toleration_reaches_the_simulated_pod():
    """TestScheduleForTASSchedulerLibrary: "SchedulerLibraryIntegration enabled: ResourceFlavor
    toleration reaches the simulated pod".

    The only node carries the NoSchedule taint example.com/gpu=present; the pod does not
    tolerate it, the ResourceFlavor does (operator Exists). The flavor's toleration counts for
    the pod, so it is placed on x1."""
    x1 = tas_node("x1", memory=None)
    x1["spec"]["taints"] = [taint(GPU_TAINT_KEY, "present")]
    flavor = resource_flavor(TAS_FLAVOR, topology_name=SINGLE_LEVEL, node_labels={"tas-node": "true"},
                             tolerations=[toleration(GPU_TAINT_KEY, operator="Exists")])
    foo = tas_workload("foo", pod_set("one", cpu="1", required=HOSTNAME))
    objects = [x1, topology(SINGLE_LEVEL, (HOSTNAME,)), flavor, *main_queue(), foo]
    result = cycle(objects, SchedulerLibraryIntegration=True)
    assert new_assignments(result, objects) == {
        "default/foo": want({"one": (CPU, 1, [("x1", 1)], None)})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert events(result) == [("default/foo", "Normal", "QuotaReserved"), ("default/foo", "Normal", "Admitted")]


def test_admission_check_pod_set_updates_node_selector_reaches_the_simulated_pod():
    """TestScheduleForTASSchedulerLibrary: "SchedulerLibraryIntegration enabled: admission check
    PodSetUpdates nodeSelector reaches the simulated pod".

    foo holds quota with its topology request delayed (Pending); its ProvisioningRequest check is
    Ready and adds the node selector dedicated=x2 to PodSet one. The second pass places the pod
    on x2, the only node the selector lets in, and admits foo with the delayed request Ready."""
    nodes = [tas_node("x1", memory=None), tas_node("x2", memory=None)]
    nodes[0]["metadata"]["labels"]["dedicated"] = "x1"
    nodes[1]["metadata"]["labels"]["dedicated"] = "x2"
    foo = reserved(tas_workload("foo", pod_set("one", cpu="1", required=HOSTNAME)),
                   assignment("one", {"cpu": "1000m"}, delayed="Pending"),
                   admitted=False, checks={"prov-check": "Ready"})
    foo["status"]["admissionChecks"][0]["podSetUpdates"] = [{"name": "one", "nodeSelector": {"dedicated": "x2"}}]
    objects = [*nodes, prov_check(), *single_level_setup(), *main_queue(admission_checks=("prov-check",)), foo]
    result = cycle(objects, SchedulerLibraryIntegration=True)
    assert new_assignments(result, objects) == {
        "default/foo": want({"one": (CPU, 1, [("x2", 1)], "Ready")})}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert events(result) == [("default/foo", "Normal", "Admitted")]
