"""Preemption in the scheduling cycle: who is evicted for whom, and what stays untouched."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.features import DEFAULT_GATES, FeatureGates

from .factories import (
    FLAVOR,
    HOSTNAME,
    LEVELS,
    NOW,
    RACK,
    admitted,
    cluster_queue,
    domains_json,
    local_queue,
    node,
    parse,
    resource_flavor,
    result_of,
    run,
    topology,
    workload,
)


def with_preemption(cq: dict, **policy: Any) -> dict:
    cq["spec"]["preemption"] = policy
    return cq


def on(wl: dict, placements: list[tuple[str, int]], *, cq: str = "cq") -> dict:
    """`wl` admitted in `cq` with its pods on the given hostnames."""
    return admitted(wl, assignments={"main": domains_json([HOSTNAME], placements)}, cluster_queue_name=cq)


def single_queue(*, quota: str = "8", within: str = "LowerPriority") -> list[dict]:
    """One rack of two 4-CPU nodes behind one ClusterQueue `cq` (LocalQueue `lq`)."""
    return [
        topology(),
        resource_flavor(),
        with_preemption(cluster_queue("cq", quota={"cpu": quota}), withinClusterQueue=within),
        local_queue("lq", cluster_queue_name="cq"),
        node("x1", block="b1", rack="r1", cpu="4"),
        node("x2", block="b1", rack="r1", cpu="4"),
    ]


def events_of(result, key: str, reason: str) -> list[str]:
    return [e.message for e in result.events if e.key == key and e.reason == reason]


class TestWithinClusterQueue:
    def test_lower_priority_workload_is_preempted(self):
        low = on(workload("low", queue="lq", count=4, required=HOSTNAME, priority=1), [("x1", 4)])
        other = on(workload("other", queue="lq", count=4, required=HOSTNAME, priority=5), [("x2", 4)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
        result = run([*single_queue(), low, other, high], cycles=1)

        preempted = result_of(result, "low")
        assert preempted.status == "Preempted"
        assert "Preempted to accommodate a workload (UID: uid-high" in preempted.message
        assert "due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq" \
            in preempted.message
        conditions = {c.type: c for c in preempted.conditions}
        assert conditions["Evicted"].reason == "Preempted"
        assert conditions["Preempted"].reason == "InClusterQueue"
        # the target keeps its quota until its pods are gone
        assert conditions["QuotaReserved"].status == "True"

        waiting = result_of(result, "high")
        assert waiting.status == "Pending"
        assert waiting.message.endswith(". Pending the preemption of 1 workload(s)")
        assert waiting.conditions[0].reason == "WaitingForPreemptedWorkloads"
        assert result_of(result, "other").status == "Admitted"
        assert events_of(result, "default/low", "EvictedDueToPreempted")
        assert events_of(result, "default/high", "PreemptedWorkload") == [
            "Preempted workload default/low (UID: uid-low) in ClusterQueue cq; preemptor effective priority: "
            "10 (base: 10, boost: 0); preemptee effective priority: 1 (base: 1, boost: 0)"]

    def test_the_lowest_priority_goes_first_and_only_what_is_needed(self):
        lowest = on(workload("lowest", queue="lq", count=2, required=HOSTNAME, priority=1), [("x1", 2)])
        low = on(workload("low", queue="lq", count=2, required=HOSTNAME, priority=2), [("x1", 2)])
        mid = on(workload("mid", queue="lq", count=4, required=HOSTNAME, priority=3), [("x2", 4)])
        high = workload("high", queue="lq", count=2, required=HOSTNAME, priority=10)
        result = run([*single_queue(), lowest, low, mid, high], cycles=1)
        assert result_of(result, "lowest").status == "Preempted"
        assert result_of(result, "low").status == "Admitted"
        assert result_of(result, "mid").status == "Admitted"

    def test_a_victim_that_turns_out_unneeded_is_put_back(self):
        # removal goes lowest priority first: `a` frees too little, `b` frees a whole node, so `a` stays
        a = on(workload("a", queue="lq", count=1, required=HOSTNAME, priority=1), [("x1", 1)])
        b = on(workload("b", queue="lq", count=4, required=HOSTNAME, priority=2), [("x2", 4)])
        c = on(workload("c", queue="lq", count=3, required=HOSTNAME, priority=5), [("x1", 3)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
        result = run([*single_queue(quota="100"), a, b, c, high], cycles=1)
        assert {n: result_of(result, n).status for n in "abc"} == {
            "a": "Admitted", "b": "Preempted", "c": "Admitted"}
        assert result_of(result, "high").message.endswith("Pending the preemption of 1 workload(s)")

    def test_equal_priority_is_not_preempted_under_lower_priority(self):
        peer = on(workload("peer", queue="lq", count=8, required=RACK, priority=5),
                  [("x1", 4), ("x2", 4)])
        newcomer = workload("newcomer", queue="lq", count=4, required=HOSTNAME, priority=5)
        result = run([*single_queue(), peer, newcomer], cycles=1)
        assert result_of(result, "peer").status == "Admitted"
        assert result_of(result, "newcomer").status == "Inadmissible"
        assert result_of(result, "newcomer").conditions[0].reason == "WaitingForQuota"

    def test_lower_or_newer_equal_priority_preempts_the_newer_peer(self):
        older = on(workload("older", queue="lq", count=8, required=RACK, priority=5, created=100),
                   [("x1", 4), ("x2", 4)])
        newcomer = workload("newcomer", queue="lq", count=4, required=HOSTNAME, priority=5, created=0)
        objects = single_queue(within="LowerOrNewerEqualPriority")
        result = run([*objects, older, newcomer], cycles=1)
        assert result_of(result, "older").status == "Preempted"

    def test_never_policy_leaves_the_workload_waiting(self):
        low = on(workload("low", queue="lq", count=8, required=RACK, priority=1), [("x1", 4), ("x2", 4)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
        result = run([*single_queue(within="Never"), low, high], cycles=1)
        assert result_of(result, "low").status == "Admitted"
        assert result_of(result, "high").status == "Inadmissible"
        assert not [e for e in result.events if e.reason in ("Preempted", "EvictedDueToPreempted")]

    def test_topology_decides_the_target_when_quota_is_not_short(self):
        # quota has room for everything; only x1's fragmentation keeps `high` out
        a = on(workload("a", queue="lq", count=3, required=HOSTNAME, priority=1), [("x1", 3)])
        b = on(workload("b", queue="lq", count=3, required=HOSTNAME, priority=1), [("x2", 3)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
        result = run([*single_queue(quota="100"), a, b, high], cycles=1)
        statuses = {name: result_of(result, name).status for name in ("a", "b")}
        assert sorted(statuses.values()) == ["Admitted", "Preempted"]
        assert result_of(result, "high").message.startswith(
            "couldn't assign flavors to pod set main: topology")

    def test_repeated_cycles_keep_waiting_for_the_victims(self):
        low = on(workload("low", queue="lq", count=8, required=RACK, priority=1), [("x1", 4), ("x2", 4)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)
        result = run([*single_queue(), low, high])  # cycles until nothing changes
        assert result_of(result, "low").status == "Preempted"
        assert result_of(result, "high").status == "Pending"
        assert len(events_of(result, "default/low", "EvictedDueToPreempted")) == 1


def two_queues_in_a_cohort(reclaim: str = "Any") -> list[dict]:
    """`cq-a` and `cq-b`, 4 CPUs of nominal quota each, in cohort `all`; 8 CPUs of nodes."""
    return [
        topology(),
        resource_flavor(),
        with_preemption(cluster_queue("cq-a", quota={"cpu": "4"}, cohort="all"), reclaimWithinCohort=reclaim),
        with_preemption(cluster_queue("cq-b", quota={"cpu": "4"}, cohort="all"), reclaimWithinCohort=reclaim),
        local_queue("lq-a", cluster_queue_name="cq-a"),
        local_queue("lq-b", cluster_queue_name="cq-b"),
        node("x1", block="b1", rack="r1", cpu="4"),
        node("x2", block="b1", rack="r1", cpu="4"),
    ]


class TestCohortReclamation:
    def test_reclaims_nominal_quota_lent_to_another_queue(self):
        borrower = on(workload("borrower", queue="lq-b", count=8, required=RACK, priority=100),
                      [("x1", 4), ("x2", 4)], cq="cq-b")
        owner = workload("owner", queue="lq-a", count=4, required=HOSTNAME, priority=0)
        result = run([*two_queues_in_a_cohort(), borrower, owner], cycles=1)
        target = result_of(result, "borrower")
        assert target.status == "Preempted"
        assert "due to reclamation within the cohort; preemptor path: /all/cq-a; preemptee path: /all/cq-b" \
            in target.message
        assert {c.type: c.reason for c in target.conditions}["Preempted"] == "InCohortReclamation"
        assert result_of(result, "owner").status == "Pending"

    def test_never_reclaim_leaves_the_borrower_alone(self):
        borrower = on(workload("borrower", queue="lq-b", count=8, required=RACK, priority=0),
                      [("x1", 4), ("x2", 4)], cq="cq-b")
        owner = workload("owner", queue="lq-a", count=4, required=HOSTNAME, priority=100)
        result = run([*two_queues_in_a_cohort(reclaim="Never"), borrower, owner], cycles=1)
        assert result_of(result, "borrower").status == "Admitted"
        assert result_of(result, "owner").status == "Inadmissible"

    def test_a_queue_within_its_nominal_quota_is_not_reclaimed_from(self):
        within = on(workload("within", queue="lq-b", count=4, required=HOSTNAME, priority=0), [("x2", 4)],
                    cq="cq-b")
        mine = on(workload("mine", queue="lq-a", count=4, required=HOSTNAME, priority=0), [("x1", 4)],
                  cq="cq-a")
        more = workload("more", queue="lq-a", count=4, required=HOSTNAME, priority=100)
        result = run([*two_queues_in_a_cohort(), within, mine, more], cycles=1)
        assert result_of(result, "within").status == "Admitted"
        assert result_of(result, "more").status == "Inadmissible"


    @staticmethod
    def two_preemptors_of_one_victim(gates: FeatureGates = DEFAULT_GATES) -> Any:
        objects = [*two_queues_in_a_cohort(),
                   with_preemption(cluster_queue("cq-c", quota={"cpu": "4"}, cohort="all"),
                                   reclaimWithinCohort="Any"),
                   local_queue("lq-c", cluster_queue_name="cq-c")]
        # cq-b borrows 4 CPUs and fills both nodes; quota is left (12 - 8) but no node has room
        borrower = on(workload("borrower", queue="lq-b", count=8, required=RACK, priority=0),
                      [("x1", 4), ("x2", 4)], cq="cq-b")
        first = workload("first", queue="lq-a", count=4, required=HOSTNAME, priority=10, created=0)
        second = workload("second", queue="lq-c", count=4, required=HOSTNAME, priority=10, created=10)
        result = run([*objects, borrower, first, second], cycles=1, feature_gates=gates)
        assert result_of(result, "borrower").status == "Preempted"
        assert result_of(result, "first").message.endswith("Pending the preemption of 1 workload(s)")
        assert len(events_of(result, "default/borrower", "EvictedDueToPreempted")) == 1
        return result

    def test_two_preemptors_never_share_a_victim_in_one_cycle(self):
        gates = DEFAULT_GATES.with_overrides(RecomputeAssignmentUponPreemptionTargetsOverlap=False)
        late = result_of(self.two_preemptors_of_one_victim(gates), "second")
        assert late.status == "Pending"
        assert late.message == "Workload has overlapping preemption targets with another workload"
        assert {c.type: c.reason for c in late.conditions}["QuotaReserved"] == "WaitingForQuota"

    def test_the_second_preemptor_waits_for_the_first_ones_victim_when_that_makes_room_for_both(self):
        # the borrower's 8 CPUs gone, "first" takes one node and "second" fits on the other
        late = result_of(self.two_preemptors_of_one_victim(), "second")
        assert late.status == "Pending"
        assert late.message == ("Workload has overlapping preemption targets with another workload, "
                                "but will fit after these preemptions complete")
        assert {c.type: c.reason for c in late.conditions}["QuotaReserved"] == "WaitingForPreemptedWorkloads"
        assert late.stop.step == "overlapping-targets"
        assert late.stop.verdict == "preempting"
        assert late.stop.blocking == ["default/borrower"]

    def test_the_waiting_preemptor_is_admitted_once_the_victim_is_gone(self):
        """What DeferredFit tells is what happens: once the one victim's eviction completes,
        the next pass admits both preemptors, each on its own node."""
        objects = [*two_queues_in_a_cohort(),
                   with_preemption(cluster_queue("cq-c", quota={"cpu": "4"}, cohort="all"),
                                   reclaimWithinCohort="Any"),
                   local_queue("lq-c", cluster_queue_name="cq-c"),
                   on(workload("borrower", queue="lq-b", count=8, required=RACK, priority=0),
                      [("x1", 4), ("x2", 4)], cq="cq-b"),
                   workload("first", queue="lq-a", count=4, required=HOSTNAME, priority=10, created=0),
                   workload("second", queue="lq-c", count=4, required=HOSTNAME, priority=10, created=10)]
        engine = Engine.from_parsed(parse(objects), DEFAULT_GATES)
        engine.run_pass(NOW)
        assert engine.decisions["default/second"].verdict == "preempting"
        engine.delete("Workload", "default/borrower")
        engine.run_pass(NOW + timedelta(seconds=1))
        hosts = {}
        for key in ("default/first", "default/second"):
            wl = engine.state.workload(key)
            assert wl.has_quota_reservation, key
            (psa,) = wl.admission.pod_set_assignments
            hosts[key] = [d.values[0] for d in psa.topology_assignment.domains]
        assert sorted(hosts.values()) == [["x1"], ["x2"]]


class TestPartialAdmission:
    def test_admits_the_largest_count_that_fits(self):
        blocker = on(workload("blocker", queue="lq", count=2, required=HOSTNAME, priority=100), [("x1", 2)])
        flexible = workload("flexible", queue="lq", count=8, min_count=4, required=RACK, priority=0)
        result = run([*single_queue(quota="100"), blocker, flexible], cycles=1)
        got = result_of(result, "flexible")
        assert got.status == "Admitted"
        (ps,) = got.pod_sets
        assert ps.count == 6
        assert sum(d.count for d in ps.assignment.domains) == 6

    def test_below_min_count_it_waits(self):
        blocker = on(workload("blocker", queue="lq", count=6, required=RACK, priority=100),
                     [("x1", 4), ("x2", 2)])
        flexible = workload("flexible", queue="lq", count=8, min_count=4, required=RACK, priority=0)
        result = run([*single_queue(quota="100"), blocker, flexible], cycles=1)
        assert result_of(result, "flexible").status != "Admitted"


class TestPolicyValidation:
    @pytest.mark.parametrize("field,value", [("withinClusterQueue", "Sometimes"), ("reclaimWithinCohort",
                                                                                 "LowerOrNewerEqualPriority")])
    def test_unknown_policies_are_rejected_with_the_field(self, field, value):
        cq = with_preemption(cluster_queue("cq"), **{field: value})
        with pytest.raises(InputError) as err:
            run([topology(levels=LEVELS), resource_flavor(name=FLAVOR), cq])
        assert f"spec.preemption.{field}" in str(err.value)
        assert value in str(err.value)


class TestReadmission:
    def test_a_preempted_workload_admitted_again_is_no_longer_evicted(self):
        requeued = workload("requeued", queue="lq", count=2, required=HOSTNAME, priority=0)
        requeued["status"] = {"conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "evicted"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate"},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": "Preempted to accommodate"},
        ]}
        result = run([*single_queue(), requeued], cycles=1)
        got = result_of(result, "requeued")
        assert got.status == "Admitted"
        conditions = {c.type: c for c in got.conditions}
        for cond_type in ("Evicted", "Preempted"):
            assert conditions[cond_type].status == "False"
            assert conditions[cond_type].reason == "QuotaReserved"
            assert conditions[cond_type].message == "Previously: Preempted to accommodate"


class TestExplanation:
    """What the why-pending explanation says of a workload that fits only by preemption."""

    @staticmethod
    def explain(objects: list[dict], name: str):
        from scheduler.cluster import ClusterState
        from scheduler.codec import decode_assignment
        from scheduler.explain import explain_workload
        from scheduler.parse import parse_objects

        from .factories import DEFAULT_GATES, FILE

        parsed = parse_objects([(FILE, obj) for obj in objects], decode_assignment=decode_assignment,
                               warn=lambda _m: None)
        state = ClusterState(parsed, DEFAULT_GATES, lambda _m: None)
        return explain_workload(state, next(w for w in state.workloads if w.name == name))

    def test_names_the_workloads_it_would_preempt(self):
        low = on(workload("low", queue="lq", count=4, required=HOSTNAME, priority=1), [("x1", 4)])
        other = on(workload("other", queue="lq", count=4, required=HOSTNAME, priority=5), [("x2", 4)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)

        why = self.explain([*single_queue(), low, other, high], "high")

        assert not why.fits
        [suggestion] = [s for s in why.suggestions if s.kind == "preemption"]
        assert suggestion.details["targets"] == [{"workload": "default/low", "reason": "InClusterQueue"}]
        assert "preempting 1 workload would make room for it now: default/low (prioritization in the ClusterQueue)" \
            in suggestion.message

    def test_says_when_no_workload_may_be_preempted(self):
        low = on(workload("low", queue="lq", count=4, required=HOSTNAME, priority=1), [("x1", 4)])
        other = on(workload("other", queue="lq", count=4, required=HOSTNAME, priority=5), [("x2", 4)])
        high = workload("high", queue="lq", count=4, required=HOSTNAME, priority=10)

        why = self.explain([*single_queue(within="Never"), low, other, high], "high")

        assert not why.fits
        assert "insufficient unused quota for cpu" in why.summary
        [suggestion] = why.suggestions
        assert suggestion.kind == "preemption" and suggestion.details["targets"] == []
        assert "no admitted workload may be preempted" in suggestion.message
