"""TASLeaderPodSetFeasibility through the service: TAS_FEATURE_GATES turns it on, and a pass
then places a PodSet group's leader by its own node constraints (off, by its workers')."""

from __future__ import annotations

import copy

import pytest

from tasweb.cluster.models import Workload, WorkloadStatus
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import services
from tasweb.scheduling.models import AssignmentDomain, PodSetAssignment

from .support import assert_results_whole, import_example_cluster, small_workload

pytestmark = [pytest.mark.services, pytest.mark.django_db]

BLOCK = "cloud.example.com/topology-block"
HOSTNAME = "kubernetes.io/hostname"


def leader_and_workers(name: str, leader_selector: dict[str, str]) -> dict:
    """A CPU-only leader with a node selector of its own and two GPU workers, one group, the
    block required."""
    obj = copy.deepcopy(small_workload(name))
    workers = obj["spec"]["podSets"][0]
    workers.update(name="workers", count=2, topologyRequest={"required": BLOCK, "podSetGroupName": "g"})
    leader = copy.deepcopy(workers)
    leader.update(name="leader", count=1, topologyRequest={"required": BLOCK, "podSetGroupName": "g"})
    leader["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    leader["template"]["spec"]["nodeSelector"] = leader_selector
    obj["spec"]["podSets"] = [leader, workers]
    return obj


def leader_nodes(row: Workload) -> list[str]:
    assignment = PodSetAssignment.objects.get(workload=row, pod_set="leader")
    return [d.values[-1] for d in AssignmentDomain.objects.filter(assignment=assignment).order_by("position")]


def test_with_the_gate_the_leader_goes_to_the_node_its_own_selector_names(settings):
    settings.TAS_FEATURE_GATES = "TASLeaderPodSetFeasibility=true"
    import_example_cluster()
    object_upsert(kind="Workload", obj=leader_and_workers("lws", {HOSTNAME: "b1-r1-n2"}))
    services.scheduling_pass_run()
    row = Workload.objects.get(namespace="ml", name="lws")
    assert row.status == WorkloadStatus.ADMITTED, row.message
    assert_results_whole()
    assert leader_nodes(row) == ["b1-r1-n2"]


@pytest.mark.parametrize("gates, admitted", [("", True), ("TASLeaderPodSetFeasibility=true", False)])
def test_a_leader_no_node_suits_is_admitted_only_without_the_gate(settings, gates, admitted):
    """Off (the default), the leader's own selector is not consulted, as in Kueue; on, the
    group waits with Kueue's reason instead of being admitted with a leader that cannot run."""
    settings.TAS_FEATURE_GATES = gates
    import_example_cluster()
    object_upsert(kind="Workload", obj=leader_and_workers("lws", {"accelerator": "none-has-it"}))
    services.scheduling_pass_run()
    row = Workload.objects.get(namespace="ml", name="lws")
    assert_results_whole()
    if admitted:
        assert row.status == WorkloadStatus.ADMITTED, row.message
    else:
        assert row.status == WorkloadStatus.INADMISSIBLE
        assert "couldn't assign flavors to pod set leader" in row.message and "allows to fit only" in row.message
