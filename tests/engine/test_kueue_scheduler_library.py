"""Whole scheduling cycles from Kueue's TestScheduleForTASSchedulerLibrary (package
pkg/scheduler) that the conformance suite does not carry: each test builds
the case's cluster, runs one scheduling cycle with the case's feature gates, and checks what the
Go test checks (the new admissions with their topology assignments, the workloads left in the
queues and left inadmissible, and the events by key, type and reason; the Go test ignores the
events' messages). The tests after them come from TestScheduleForTASPreemptionSchedulerLibrary,
whose cases run with SchedulerLibraryIntegration on and also check the preempted workloads'
Evicted and Preempted conditions, the waiting preemptors' QuotaReserved and Admitted conditions
and, where the Go case compares them, the events' messages."""

from __future__ import annotations

from scheduler.results import PassResult

from .factories import (
    HOSTNAME,
    local_queue,
    pod_set,
    resource_flavor,
    taint,
    toleration,
    topology,
)
from .test_kueue_cycle_extra import (
    CPU,
    SINGLE_LEVEL,
    TAS_FLAVOR,
    assert_preempted_by_foo,
    assignment,
    condition,
    cycle,
    event_messages,
    events,
    foo_waits_for_preemption,
    left,
    main_queue,
    new_assignments,
    preempted_by_foo,
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


# ---------------------------------------------------------------- TestScheduleForTASPreemptionSchedulerLibrary
#
# The Go cases also check what Kueue's scheduler-framework simulator is asked to release
# (wantSimulatorPreemptions, wantSimulatorReleasedTogether) and, in the first case, make that
# simulator refuse; the engine has no such simulator, so the tests check what the cycle leaves.

FOO_NO_FIT = ('couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of '
              '1 pod(s). Total nodes: 1; excluded: resource "cpu": 1. Pending the preemption of 1 workload(s)')
NO_RESERVATION = ("False", "NoReservation", "The workload has no reservation")
PRIORITIES_3_1 = ("preemptor effective priority: 3 (base: 3, boost: 0); "
                  "preemptee effective priority: 1 (base: 1, boost: 0)")


def library_local_queues() -> list[dict]:
    """The LocalQueues of the Go test besides tas-main (the runner creates them all, whether or
    not the case defines their ClusterQueues)."""
    return [local_queue(f"tas-lq-{x}", cluster_queue_name=f"tas-cq-{x}") for x in "abc"]


def only_low_priority_cluster() -> list[dict]:
    """x1 (5 CPUs) is full with low-priority-admitted (priority 1, 5 CPUs); foo (priority 3)
    wants 2 CPUs, preferring a host, in the same ClusterQueue (withinClusterQueue LowerPriority)."""
    foo = tas_workload("foo", pod_set("one", cpu="2", preferred=HOSTNAME), priority=3, uid="wl-foo",
                       job_uid="job-foo")
    low = reserved(tas_workload("low-priority-admitted", pod_set("one", cpu="5", required=HOSTNAME), priority=1,
                                uid="low-priority-admitted-uid"),
                   assignment("one", {"cpu": "5"}, hosts=[("x1", 1)]))
    return [tas_node("x1", cpu="5", memory="5Gi"), *single_level_setup(), *main_queue(within="LowerPriority"),
            *library_local_queues(), foo, low]


def assert_only_low_priority_preempted(result: PassResult, objects: list[dict]) -> None:
    """foo waits for the preemption of low-priority-admitted, as both Go cases expect."""
    got_foo = foo_waits_for_preemption(result, objects)
    assert condition(got_foo, "QuotaReserved") == ("False", "WaitingForPreemptedWorkloads", FOO_NO_FIT)
    assert condition(got_foo, "Admitted") == NO_RESERVATION
    assert_preempted_by_foo(result, "low-priority-admitted")
    by_foo = preempted_by_foo()[2]
    assert sorted(event_messages(result)) == sorted([
        ("default/low-priority-admitted", "EvictedDueToPreempted", by_foo),
        ("default/low-priority-admitted", "Preempted", f"{by_foo}; {PRIORITIES_3_1}"),
        ("default/foo", "PreemptedWorkload", "Preempted workload default/low-priority-admitted (UID: "
                                             f"low-priority-admitted-uid) in ClusterQueue tas-main; {PRIORITIES_3_1}"),
        ("default/foo", "WaitingForPreemptedWorkloads", FOO_NO_FIT),
    ])
    assert sorted(events(result)) == sorted([
        ("default/low-priority-admitted", "Normal", "EvictedDueToPreempted"),
        ("default/low-priority-admitted", "Normal", "Preempted"),
        ("default/foo", "Normal", "PreemptedWorkload"),
        ("default/foo", "Warning", "WaitingForPreemptedWorkloads"),
    ])


def test_a_simulator_that_will_not_release_the_victim_does_not_stop_the_cycle():
    """TestScheduleForTASPreemptionSchedulerLibrary: "a simulator that will not release the
    victim does not stop the cycle".

    The Go case makes the simulator refuse to release low-priority-admitted and expects the
    cycle to go on as if it had: low-priority-admitted is preempted for foo, and foo waits."""
    objects = only_low_priority_cluster()
    result = cycle(objects, SchedulerLibraryIntegration=True)
    assert_only_low_priority_preempted(result, objects)


def test_only_low_priority_workload_is_preempted():
    """TestScheduleForTASPreemptionSchedulerLibrary: "only low priority workload is preempted".

    x1 has no room for foo's 2 CPUs while low-priority-admitted holds all 5; preempting it is
    enough, so foo preempts it and waits for its pods to stop."""
    objects = only_low_priority_cluster()
    result = cycle(objects, SchedulerLibraryIntegration=True)
    assert_only_low_priority_preempted(result, objects)
