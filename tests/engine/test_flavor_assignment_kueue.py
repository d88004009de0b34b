"""Flavor assignment as Kueue's TestAssignFlavors (pkg/scheduler/flavorassigner) has it: PodSet
groups share their flavors, a flavor is judged by its own node label keys only, the untolerated
taint reads as Go prints it, and a TAS PodSet with two TAS flavors is not admitted."""

from __future__ import annotations

import re

from .factories import (
    HOSTNAME,
    admitted,
    cluster_queue,
    local_queue,
    pod_set,
    resource_flavor,
    result_of,
    run,
    taint,
    topology,
    workload,
)


def flavors(result, pod_set_name: str = "main") -> dict:
    return next(ps.flavors for ps in result.pod_sets if ps.name == pod_set_name)


def test_pod_set_group_gets_one_flavor_for_its_summed_requests():
    # "multiple flavors, leader worker set, leader and workers request the same resources fits"
    objects = [
        resource_flavor("one", topology_name=None, node_labels={"type": "one"}),
        resource_flavor("two", topology_name=None, node_labels={"type": "two"}),
        cluster_queue(flavors=("one", "two"), quota={"cpu": "4"}),
        local_queue(),
        workload("wl", pod_sets=[pod_set("worker", count=4, cpu="2", group="g"),
                                 pod_set("leader", count=1, cpu="1", group="g")]),
    ]
    objects[2]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] = "9"
    wl = result_of(run(objects), "wl")
    assert wl.status == "Admitted"
    assert flavors(wl, "worker") == {"cpu": "two"}
    assert flavors(wl, "leader") == {"cpu": "two"}  # alone, the leader would fit flavor one


def test_pod_set_group_fails_together_with_shared_reasons():
    # "... workers request GPU, leader does not request GPU, does not fit, without group it would fit"
    cq = cluster_queue(flavors=("one", "two"), quota={"cpu": "4", "example.com/gpu": "4"})
    cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"] = [
        {"name": "cpu", "nominalQuota": "5"}, {"name": "example.com/gpu", "nominalQuota": "0"}]
    objects = [
        resource_flavor("one", topology_name=None), resource_flavor("two", topology_name=None), cq, local_queue(),
        workload("wl", pod_sets=[pod_set("worker", count=4, cpu="1", extra={"example.com/gpu": "1"}, group="g"),
                                 pod_set("leader", count=1, cpu="1", group="g")]),
    ]
    wl = result_of(run(objects, cycles=1), "wl")
    reasons = ("insufficient quota for cpu in flavor one, previously considered podsets requests (0) + current "
               "podset request (5) > maximum capacity (4), insufficient quota for example.com/gpu in flavor two, "
               "previously considered podsets requests (0) + current podset request (4) > maximum capacity (0)")
    assert wl.status == "Inadmissible"
    assert wl.message == (f"couldn't assign flavors to pod set worker: {reasons}; "
                          f"couldn't assign flavors to pod set leader: {reasons}")


def test_flavor_judged_by_its_own_label_keys():
    # "multiple flavors with different label keys, selector only uses flavor's own keys" and
    # "labelless flavor in group with labeled flavor, workload uses labeled selector"
    objects = [
        resource_flavor("label-x-a", topology_name=None, node_labels={"x": "a"}),
        resource_flavor("label-xy-b", topology_name=None, node_labels={"x": "b", "y": "k"}),
        cluster_queue(flavors=("label-x-a", "label-xy-b"), quota={"cpu": "4"}),
        local_queue(),
        workload("wl", node_selector={"x": "a", "y": "g"}),
    ]
    assert flavors(result_of(run(objects), "wl")) == {"cpu": "label-x-a"}
    objects = [
        resource_flavor("default", topology_name=None),
        resource_flavor("two", topology_name=None, node_labels={"type": "two"}),
        cluster_queue(flavors=("default", "two"), quota={"cpu": "4"}),
        local_queue(),
        workload("wl", node_selector={"type": "two"}),
    ]
    assert flavors(result_of(run(objects), "wl")) == {"cpu": "default"}


def test_untolerated_taint_reads_as_go_prints_the_struct():
    # "multiple flavors, fits while skipping tainted flavor"
    objects = [
        resource_flavor("tainted", topology_name=None, node_taints=[taint("instance", "spot")]),
        resource_flavor("two", topology_name=None, node_labels={"type": "two"}),
        cluster_queue(flavors=("tainted", "two"), quota={"cpu": "4"}),
        local_queue(),
        workload("wl", cpu="3"),
    ]
    result = run(objects)
    assert flavors(result_of(result, "wl")) == {"cpu": "two"}
    (reserved,) = [e for e in result.events if e.reason == "QuotaReserved"]
    assert reserved.message.endswith(
        "Flavors considered: main: tainted(NoFit;untolerated taint {instance spot NoSchedule <nil>} in flavor tainted)")


def test_two_tas_flavors_in_one_pod_set_are_not_admitted():
    # "multiple TAS flavors assigned to different resources in the same PodSet leads to NoFit"
    cq = cluster_queue(flavors=("tas-a",), quota={"cpu": "10"})
    cq["spec"]["resourceGroups"].append({"coveredResources": ["memory"], "flavors": [
        {"name": "tas-b", "resources": [{"name": "memory", "nominalQuota": "10Mi"}]}]})
    objects = [
        topology("topo-a", levels=(HOSTNAME,)), topology("topo-b", levels=(HOSTNAME,)),
        resource_flavor("tas-a", topology_name="topo-a"), resource_flavor("tas-b", topology_name="topo-b"),
        cq, local_queue(),
        workload("wl", cpu="1", memory="1Mi", required=HOSTNAME),
    ]
    wl = result_of(run(objects, cycles=1), "wl")
    assert wl.status == "Inadmissible"
    assert wl.message == "failed to assign flavors to pod set main: more than one TAS flavor assigned: tas-a, tas-b"


def test_a_groups_pod_sets_are_assigned_side_by_side_even_when_apart_in_the_spec():
    # TestScheduleForTASPreemption "preemption with a PodSet group whose members are not
    # adjacent": Kueue assigns group by group, so its message lists leader, worker, other
    cq = cluster_queue(flavors=("one",), quota={"cpu": "4"})
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    low = admitted(workload("low", count=4, cpu="1", priority=0), assignments={}, flavor="one")
    foo = workload("foo", priority=100, pod_sets=[
        pod_set("leader", count=1, cpu="1", group="g"),
        pod_set("other", count=2, cpu="1"),
        pod_set("worker", count=1, cpu="1", group="g")])
    objects = [resource_flavor("one", topology_name=None), cq, local_queue(), low, foo]
    wl = result_of(run(objects, cycles=1), "foo")
    assert wl.status == "Pending"
    assert re.findall(r"couldn't assign flavors to pod set (\w+):", wl.message) == ["leader", "worker", "other"]
    assert wl.message.endswith("Pending the preemption of 1 workload(s)")
