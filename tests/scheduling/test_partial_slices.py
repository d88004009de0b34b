"""A PodSet with a partial slice (TASPartialSlices) through the service: mirrored, admitted by
a pass, and stored with its decoded domains in the order Kueue publishes them, the slice-level
domain of the partial slice last, which is the order the ungater ranks pods in."""

from __future__ import annotations

import copy

import pytest

from scheduler.codec import decode_assignment
from tasweb.cluster.models import Workload, WorkloadStatus
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import services
from tasweb.scheduling.models import AssignmentDomain, PodSetAssignment

from .support import assert_results_whole, import_example_cluster, small_workload

pytestmark = [pytest.mark.services, pytest.mark.django_db]

RACK = "cloud.example.com/topology-rack"
BLOCK = "cloud.example.com/topology-block"


def sliced_workload(name: str, count: int, size: int) -> dict:
    obj = copy.deepcopy(small_workload(name))
    obj["spec"]["podSets"][0].update(count=count, topologyRequest={
        "required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": size})
    return obj


def test_a_partial_slice_is_admitted_and_stored_last():
    import_example_cluster()
    object_upsert(kind="Workload", obj=sliced_workload("partial", count=10, size=4))
    services.scheduling_pass_run()

    row = Workload.objects.get(namespace="ml", name="partial")
    assert row.status == WorkloadStatus.ADMITTED, row.raw.get("status")
    assert_results_whole()
    assignment = PodSetAssignment.objects.get(workload=row, pod_set="main")
    assert assignment.count == 10
    rack = assignment.topology_levels.index(RACK)
    per_rack: dict[str, int] = {}
    for domain in AssignmentDomain.objects.filter(assignment=assignment).order_by("position"):
        per_rack[domain.values[rack]] = per_rack.get(domain.values[rack], 0) + domain.count
    counts = list(per_rack.values())
    assert sum(counts) == 10
    assert all(n % 4 == 0 for n in counts[:-1]) and counts[-1] % 4 == 2, per_rack
    # the stored v1beta2 form, as Kueue publishes it, decodes to the same order
    (psa,) = row.raw["status"]["admission"]["podSetAssignments"]
    published = decode_assignment(psa["topologyAssignment"])
    stored = [(d.values[-1], d.count) for d in AssignmentDomain.objects.filter(assignment=assignment)
              .order_by("position")]
    assert [(d.values[-1], d.count) for d in published.domains] == stored


def test_with_the_gate_off_the_workload_waits_and_says_why(settings):
    settings.TAS_FEATURE_GATES = "TASPartialSlices=false"
    import_example_cluster()
    object_upsert(kind="Workload", obj=sliced_workload("partial", count=10, size=4))
    services.scheduling_pass_run()
    row = Workload.objects.get(namespace="ml", name="partial")
    assert row.status == WorkloadStatus.INADMISSIBLE
    assert "is not a multiple of its slice size 4, which needs the TASPartialSlices feature gate" in row.message
