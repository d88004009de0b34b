"""The Admitted condition of a workload a cycle leaves without a quota reservation: with
UnadmittedWorkloadsObservability (on by default) Kueue writes Admitted=False beside
QuotaReserved=False, NoReservationUnsatisfiedChecks when a check it lists is not Ready;
without the gate it writes no Admitted condition at all."""

from __future__ import annotations

import pytest

from .factories import gates, grid, pod_set, result_of, run, tas_setup, workload


def too_big(**status: object) -> dict:
    wl = workload("big", pod_sets=[pod_set("main", count=1, cpu="64", unconstrained=True)])
    if status:
        wl["status"] = status
    return wl


def conditions(result, name: str = "big") -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in result_of(result, name).conditions}


def test_a_workload_left_pending_is_not_admitted_for_want_of_a_reservation():
    got = conditions(run(tas_setup(quota={"cpu": "8"}) + grid(cpu="4") + [too_big()], cycles=1))
    assert got["QuotaReserved"][0] == "False"
    assert got["Admitted"] == ("False", "NoReservation", "The workload has no reservation")


def test_a_check_not_ready_gives_the_other_reason():
    wl = too_big(admissionChecks=[{"name": "prov", "state": "Pending", "message": "",
                                   "lastTransitionTime": "2025-06-01T11:00:00Z"}])
    got = conditions(run(tas_setup(quota={"cpu": "8"}) + grid(cpu="4") + [wl], cycles=1))
    assert got["Admitted"] == ("False", "NoReservationUnsatisfiedChecks",
                               "The workload has no reservation and not all checks ready")


@pytest.mark.parametrize("observability", [True, False])
def test_the_condition_follows_the_observability_gate(observability):
    result = run(tas_setup(quota={"cpu": "8"}) + grid(cpu="4") + [too_big()], cycles=1,
                 feature_gates=gates(UnadmittedWorkloadsObservability=observability))
    assert ("Admitted" in conditions(result)) is observability
