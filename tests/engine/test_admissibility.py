"""What Kueue's nomination checks before assigning flavors (workload.ValidateAdmissibility), how
it syncs Admitted from the workload's own admission checks, preemption gates, and requests too
large for int64 (Kueue's TestSchedule)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.eta import estimate
from scheduler.model import selector_text

from .factories import (
    CLUSTER_QUEUE,
    NOW,
    admitted,
    cluster_queue,
    container,
    gates,
    local_queue,
    parse,
    parse_one,
    pod_set,
    queue_with_policy,
    resource_flavor,
    result_of,
    run,
    workload,
)


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def plain_cluster(*extra: dict, selector: dict | None = None) -> list[dict]:
    cq = cluster_queue(quota={"cpu": "10"})
    if selector is not None:
        cq["spec"]["namespaceSelector"] = selector
    return [resource_flavor(topology_name=None), cq, local_queue(), *extra]


class TestNamespaceSelector:
    ENG = {"matchLabels": {"team": "eng"}}

    def test_a_namespace_the_selector_leaves_out_is_inadmissible(self):
        result = run(plain_cluster(namespace("default", team="sales"), workload("wl"), selector=self.ENG))
        wl = result_of(result, "wl")
        assert wl.status == "Inadmissible"
        assert wl.message == "workload namespace doesn't match ClusterQueue selector"

    def test_a_namespace_the_selector_matches_is_admitted(self):
        result = run(plain_cluster(namespace("default", team="eng"), workload("wl"), selector=self.ENG))
        assert result_of(result, "wl").status == "Admitted"

    def selective_queue(self, cpu: str) -> dict:
        obj = cluster_queue(quota={"cpu": cpu})
        obj["spec"]["namespaceSelector"] = self.ENG
        return obj

    def two_namespaces(self, *workloads: dict) -> Engine:
        """Namespaces eng (selected) and sales (not), each with a LocalQueue, and 1 CPU of quota."""
        objects = [resource_flavor(topology_name=None), self.selective_queue("1"), namespace("eng", team="eng"),
                   namespace("sales", team="sales"), local_queue(namespace="eng"), local_queue(namespace="sales"),
                   *workloads]
        return Engine.from_parsed(parse(objects), gates())

    def test_a_requeue_leaves_a_workload_of_an_unselected_namespace_parked(self):
        """Kueue's QueueInadmissibleWorkloads moves back only the workloads whose namespace the
        ClusterQueue selects: after the quota grows, the first cycle's head is the workload that
        fits, not the higher-priority one nomination would turn away again."""
        engine = self.two_namespaces(workload("outsider", namespace="sales", priority=100, cpu="1"),
                                     workload("big", namespace="eng", cpu="2"))
        first = engine.run_pass(NOW).decided
        assert (first["sales/outsider"].status, first["eng/big"].status) == ("Inadmissible", "Inadmissible")

        engine.upsert(parse_one(self.selective_queue("2")))  # requeues the ClusterQueue's parked workloads
        decided = engine.run_pass(NOW + timedelta(seconds=1), cycles=1).decided
        assert decided["eng/big"].status == "Admitted"
        assert "sales/outsider" not in decided
        assert "sales/outsider" in engine.queues.queues[CLUSTER_QUEUE].parked
        record = engine.stop_record("sales/outsider")
        assert record is not None
        assert record.headline().startswith("workload namespace doesn't match ClusterQueue selector; parked as "
                                            "inadmissible since pass")
        assert record.requeue_on == [
            "change to the Workload's spec or relabel of Namespace sales that ClusterQueue cq selects (a requeue "
            "of ClusterQueue cq leaves it parked while the namespaceSelector of ClusterQueue cq does not select its "
            "Namespace sales)"]
        prediction = estimate(engine, NOW + timedelta(seconds=1)).predictions["sales/outsider"]
        assert (prediction.start, prediction.reason) == (
            None, "not while the namespaceSelector of ClusterQueue cq does not select its Namespace sales")

    def test_an_equivalent_parked_with_it_stays_parked_while_the_rest_of_its_class_goes_back(self):
        """Equivalent workloads parked together for no fit (Kueue's bulk move) go back on a
        requeue, but for the one of a namespace the ClusterQueue does not select."""
        engine = self.two_namespaces(workload("first", namespace="eng", cpu="2", created=0),
                                     workload("second", namespace="sales", cpu="2", created=1))
        engine.run_pass(NOW, cycles=1)
        queue = engine.queues.queues[CLUSTER_QUEUE]
        assert set(queue.parked) == {"eng/first", "sales/second"}  # one evaluation parked both

        engine.upsert(parse_one(self.selective_queue("4")))
        decided = engine.run_pass(NOW + timedelta(seconds=1)).decided
        assert decided["eng/first"].status == "Admitted"
        assert "sales/second" not in decided
        assert set(queue.parked) == {"sales/second"}
        assert queue.parked["sales/second"].representative == "eng/first"
        # why-pending does not repeat its equivalent's no-fit answer, which a requeue ended for it
        record = engine.stop_record("sales/second")
        assert record is not None and record.parked
        assert record.message == (
            "parked as inadmissible: the namespaceSelector of ClusterQueue cq does not select its Namespace "
            "sales, so nomination would turn it away and a requeue of ClusterQueue cq leaves it parked; requeued "
            "by the next change to the Workload's spec or relabel of Namespace sales that ClusterQueue cq selects")

    def test_a_namespace_relabelled_into_a_selector_requeues_its_cluster_queue(self):
        """Namespaces change one at a time in a long-lived engine. As Kueue's namespace handler
        does, a relabel that makes a ClusterQueue select the namespace requeues that
        ClusterQueue (one that changes nothing for it does not), and the workload is admitted. A
        Namespace deleted leaves its workloads inadmissible."""
        engine = self.two_namespaces(workload("outsider", namespace="sales", cpu="1"))
        assert engine.run_pass(NOW).decided["sales/outsider"].status == "Inadmissible"

        engine.upsert(parse_one(namespace("sales", team="marketing")))  # still not selected
        assert "sales/outsider" not in engine.run_pass(NOW + timedelta(seconds=1)).decided
        engine.upsert(parse_one(namespace("sales", team="eng")))
        assert engine.run_pass(NOW + timedelta(seconds=2)).decided["sales/outsider"].status == "Admitted"

        engine.delete("Namespace", "eng")
        engine.upsert(parse_one(workload("late", namespace="eng", cpu="1")))
        decided = engine.run_pass(NOW + timedelta(seconds=3)).decided
        assert (decided["eng/late"].status, decided["eng/late"].message) == (
            "Inadmissible", 'workload namespace "eng" does not exist: namespaces "eng" not found')

    @pytest.mark.parametrize(("namespaces", "want"), [
        ([], ""),  # no Namespaces listed: not checked
        ([namespace("default", team="eng")], ""),
        ([namespace("default", team="sales")],
         "the namespaceSelector of ClusterQueue cq does not select its Namespace default"),
        ([namespace("other", team="eng")], "its Namespace default does not exist"),
    ])
    def test_namespace_hold(self, namespaces, want):
        engine = Engine.from_parsed(parse(plain_cluster(*namespaces, workload("wl"), selector=self.ENG)), gates())
        assert engine.state.namespace_hold("default", engine.state.cluster_queues[CLUSTER_QUEUE]) == want

    @pytest.mark.parametrize(("expression", "admits"), [
        ({"key": "team", "operator": "In", "values": ["eng", "ops"]}, True),
        ({"key": "team", "operator": "NotIn", "values": ["eng"]}, False),
        ({"key": "team", "operator": "Exists"}, True),
        ({"key": "team", "operator": "DoesNotExist"}, False),
    ])
    def test_match_expressions(self, expression, admits):
        result = run(plain_cluster(namespace("default", team="eng"), workload("wl"),
                                   selector={"matchExpressions": [expression]}))
        assert (result_of(result, "wl").status == "Admitted") is admits

    @pytest.mark.parametrize(("selector", "field", "reason"), [
        # Gt is a node selector operator only
        ({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]},
         "spec.namespaceSelector.matchExpressions[0].operator", "must be one of In, NotIn, Exists, DoesNotExist"),
        ({"matchExpressions": [{"key": "tier", "operator": "In"}]},
         "spec.namespaceSelector.matchExpressions[0].values", "must be non-empty for operator In"),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["5"]}]},
         "spec.namespaceSelector.matchExpressions[0].values", "must be empty for operator Exists"),
        ({"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
         "spec.namespaceSelector.matchExpressions[0].key", "is not a valid label key"),
        ({"matchLabels": {"team": "not a value"}}, "spec.namespaceSelector.matchLabels.team",
         "is not a valid label value"),
    ])
    def test_a_selector_the_api_server_refuses_is_refused(self, selector, field, reason):
        """Kueue's webhook checks the selector (metav1 ValidateLabelSelector); its cache could not
        turn such a selector into one, so the ClusterQueue would never be usable."""
        with pytest.raises(InputError) as caught:
            parse(plain_cluster(namespace("default", tier="5"), workload("wl"), selector=selector))
        assert caught.value.field == field, caught.value.render()
        assert reason in caught.value.reason

    def test_without_namespaces_in_the_input_nothing_is_checked(self):
        result = run(plain_cluster(workload("wl"), selector=self.ENG))
        assert result_of(result, "wl").status == "Admitted"

    def test_a_namespace_missing_from_those_listed_is_inadmissible(self):
        result = run(plain_cluster(namespace("other", team="eng"), workload("wl"), selector=self.ENG))
        wl = result_of(result, "wl")
        assert wl.status == "Inadmissible"
        assert "does not exist" in wl.message


def test_requests_above_limits_are_inadmissible_with_kueues_reason():
    spec_pod_set = pod_set("main", cpu=None)
    spec_pod_set["template"]["spec"]["containers"] = [container(cpu="2", limits={"cpu": "1"})]
    result = run(plain_cluster(workload("wl", pod_sets=[spec_pod_set])))
    wl = result_of(result, "wl")
    assert wl.status == "Inadmissible"
    assert wl.message == ('resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: '
                          '["cpu"]: requests must not exceed its limits')


class TestOwnAdmissionChecks:
    def with_check(self, state: str) -> dict:
        wl = workload("wl")
        wl["status"] = {"admissionChecks": [{"name": "check", "state": state, "message": ""}]}
        return wl

    def test_a_pending_check_of_its_own_keeps_it_from_being_admitted(self):
        wl = result_of(run(plain_cluster(self.with_check("Pending"))), "wl")
        assert wl.status == "QuotaReserved"
        admitted_condition = next(c for c in wl.conditions if c.type == "Admitted")
        assert (admitted_condition.status, admitted_condition.reason) == ("False", "UnsatisfiedAdmissionChecks")

    def test_its_checks_all_ready_admit_it(self):
        assert result_of(run(plain_cluster(self.with_check("Ready"))), "wl").status == "Admitted"


class TestPreemptionGates:
    def cluster(self, gate_position: str | None) -> list[dict]:
        low = admitted(workload("low", cpu="4", priority=0), assignments={"main": None})
        low["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "tas-flavor"}
        high = workload("high", cpu="4", priority=100, created=10)
        high["spec"]["preemptionGates"] = [{"name": "example.com/multikueue"}]
        if gate_position is not None:
            high["status"] = {"preemptionGates": [{"name": "example.com/multikueue", "position": gate_position}]}
        return [resource_flavor(topology_name=None), queue_with_policy("cq", cpu=4, within="LowerPriority"),
                local_queue(), low, high]

    def test_a_closed_gate_blocks_the_preemption(self):
        result = run(self.cluster(None), feature_gates=gates(MultiKueueOrchestratedPreemption=True))
        assert result_of(result, "low").status == "Admitted"
        high = result_of(result, "high")
        assert high.message == "Workload requires preemption, but it's gated"
        assert any(c.type == "BlockedOnPreemptionGates" and c.status == "True" for c in high.conditions)

    @pytest.mark.parametrize(("position", "feature_on"), [("Open", True), (None, False)])
    def test_an_open_gate_or_the_feature_off_lets_it_preempt(self, position, feature_on):
        result = run(self.cluster(position), feature_gates=gates(MultiKueueOrchestratedPreemption=feature_on))
        assert result_of(result, "low").status == "Preempted"


def test_requests_beyond_int64_saturate_and_leave_the_workload_pending():
    huge = pod_set("main", cpu="9223372036854775807")
    result = run(plain_cluster(workload("wl", pod_sets=[huge])))
    wl = result_of(result, "wl")
    assert wl.status == "Inadmissible"
    assert "current podset request (9223372036854775807m)" in wl.message


@pytest.mark.parametrize(("selector", "want"), [
    (None, ""),
    ({}, ""),
    ({"matchLabels": {"team": "eng", "env": "prod"}}, "env=prod,team=eng"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]},
                           {"key": "b", "operator": "NotIn", "values": ["z"]},
                           {"key": "c", "operator": "Exists"}, {"key": "d", "operator": "DoesNotExist"}]},
     "a in (x,y),b notin (z),c,!d"),
])
def test_selector_text(selector, want):
    assert selector_text(selector) == want
