"""The second pass of a workload whose topology waited for its admission checks (a
ProvisioningRequest): placed once the checks are Ready, and admitted with Kueue's event."""

from __future__ import annotations

import pytest

from .factories import (
    HOSTNAME,
    admission_check,
    cluster_queue,
    local_queue,
    node,
    resource_flavor,
    result_of,
    run,
    timestamp,
    topology,
    workload,
)


def reserved(wl: dict, *, reserved_at: str | None, check_state: str = "Ready") -> dict:
    """`wl` with its quota reserved, its TAS PodSet's topology delayed, and one check."""
    ps = wl["spec"]["podSets"][0]
    condition = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved"}
    if reserved_at is not None:
        condition["lastTransitionTime"] = reserved_at
    status = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{
            "name": ps["name"], "flavors": {"cpu": "tas-flavor"}, "count": ps["count"],
            "resourceUsage": {"cpu": str(ps["count"])}, "delayedTopologyRequest": "Pending"}]},
        "conditions": [condition],
        "admissionChecks": [{"name": "prov", "state": check_state, "message": ""}],
    }
    return {**wl, "status": status}


def cluster(wl: dict) -> list[dict]:
    return [topology(levels=(HOSTNAME,)), resource_flavor(), admission_check("prov"),
            cluster_queue(admission_checks=("prov",)), local_queue(), node("x1", cpu="4"), wl]


@pytest.mark.parametrize(("reserved_at", "shown"), [
    (timestamp(-31), "31s"),
    (timestamp(0), "0s"),
    (timestamp(-3600), "3600s"),
])
def test_the_admitted_event_gives_the_wait_since_the_reservation(reserved_at, shown):
    wl = reserved(workload("foo", count=2, cpu="1", required=HOSTNAME), reserved_at=reserved_at)
    result = run(cluster(wl))
    assert result_of(result, "foo").status == "Admitted"
    admitted = [e.message for e in result.events if e.key == "default/foo" and e.reason == "Admitted"]
    assert admitted == [f"Admitted by ClusterQueue cq, wait time since reservation was {shown}"]


def test_a_workload_whose_checks_are_not_ready_keeps_waiting():
    wl = reserved(workload("foo", count=2, cpu="1", required=HOSTNAME), reserved_at=timestamp(-5),
                  check_state="Pending")
    result = run(cluster(wl))
    assert result_of(result, "foo").status != "Admitted"
    assert not [e for e in result.events if e.key == "default/foo" and e.reason == "Admitted"]
