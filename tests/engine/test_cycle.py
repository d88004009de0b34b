"""One scheduling pass through `scheduler.simulate.simulate`: order, quota, queues, usage."""

from __future__ import annotations

from .factories import (
    FLAVOR,
    HOSTNAME,
    RACK,
    admission_check,
    admitted,
    cluster_queue,
    domains,
    domains_json,
    gates,
    local_queue,
    node,
    pod,
    pod_set,
    resource_flavor,
    result_of,
    run,
    tas_setup,
    topology,
    workload,
)


def one_rack(**setup_kwargs) -> list[dict]:
    """A single rack of two 4-CPU nodes: room for 8 one-CPU pods."""
    return [
        *tas_setup(**setup_kwargs),
        node("x1", block="b1", rack="r1", cpu="4"),
        node("x2", block="b1", rack="r1", cpu="4"),
    ]


def assignment_of(result, name: str, pod_set: str = "main"):
    wl = result_of(result, name)
    (ps,) = [p for p in wl.pod_sets if p.name == pod_set]
    return ps.assignment


class TestOrder:
    def test_higher_priority_first_even_when_created_later(self):
        early = workload("early", count=8, required=RACK, priority=0, created=0)
        late = workload("late", count=8, required=RACK, priority=100, created=60)
        result = run([*one_rack(), early, late])
        assert result_of(result, "late").status == "Admitted"
        assert domains(assignment_of(result, "late")) == [("x1", 4), ("x2", 4)]
        assert result_of(result, "early").status != "Admitted"
        assert assignment_of(result, "early") is None

    def test_creation_order_within_a_priority(self):
        # names sort the other way round: only the creation time may decide
        first = workload("zz-first", count=8, required=RACK, created=0)
        second = workload("aa-second", count=8, required=RACK, created=30)
        result = run([*one_rack(), second, first])
        assert result_of(result, "zz-first").status == "Admitted"
        assert result_of(result, "aa-second").status != "Admitted"

    def test_priority_class(self):
        high = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high"}, "value": 1000}
        low = workload("low", count=8, required=RACK, created=0)
        urgent = workload("urgent", count=8, required=RACK, created=60)
        urgent["spec"]["priorityClassName"] = "high"
        result = run([*one_rack(), high, low, urgent])
        assert result_of(result, "urgent").status == "Admitted"
        assert result_of(result, "low").status != "Admitted"

    def test_later_workload_sees_what_the_earlier_one_took(self):
        a = workload("a", count=3, required=HOSTNAME, created=0)
        b = workload("b", count=3, required=HOSTNAME, created=10)
        result = run([*one_rack(), a, b])
        assert domains(assignment_of(result, "a")) == [("x1", 3)]
        assert domains(assignment_of(result, "b")) == [("x2", 3)]


class TestQuota:
    def test_request_above_nominal_quota(self):
        objects = [*one_rack(quota={"cpu": "4"}), workload("big", count=6, required=RACK)]
        wl = result_of(run(objects), "big")
        assert wl.status == "Inadmissible"
        assert wl.message.startswith("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
                                     f"{FLAVOR}")
        assert "(6) > maximum capacity (4)" in wl.message

    def test_quota_used_by_an_admitted_workload(self):
        running = admitted(workload("running", count=4, cpu="1"),
                           assignments={"main": domains_json([HOSTNAME], [("x1", 4)])})
        objects = [*one_rack(quota={"cpu": "8"}), running, workload("next", count=6, required=RACK)]
        wl = result_of(run(objects), "next")
        assert wl.status == "Inadmissible"
        assert wl.message == ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                              f"{FLAVOR}, 2 more needed")

    def test_quota_taken_earlier_in_the_same_pass(self):
        first = workload("first", count=4, created=0, unconstrained=True)
        second = workload("second", count=4, created=10, unconstrained=True)
        result = run([*one_rack(quota={"cpu": "6"}), first, second])
        assert result_of(result, "first").status == "Admitted"
        second_result = result_of(result, "second")
        assert second_result.status == "Inadmissible"
        assert "insufficient unused quota for cpu" in second_result.message

    def test_resource_not_covered_by_the_cluster_queue(self):
        wl = workload("gpu", count=1, extra={"example.com/gpu": "1"}, required=RACK)
        result = result_of(run([*one_rack(), wl]), "gpu")
        assert result.status == "Inadmissible"
        assert "example.com/gpu" in result.message


class TestQueues:
    def test_missing_local_queue(self):
        wl = workload("lost", count=1, queue="nowhere", required=RACK)
        result = result_of(run([*one_rack(), wl]), "lost")
        assert result.status == "Inadmissible"
        assert result.message == "LocalQueue nowhere doesn't exist"

    def test_missing_cluster_queue(self):
        objects = [topology(), resource_flavor(), local_queue(cluster_queue_name="gone"),
                   node("x1", block="b1", rack="r1"), workload("orphan", count=1, required=RACK)]
        result = result_of(run(objects), "orphan")
        assert result.status == "Inadmissible"
        assert result.message == "ClusterQueue gone doesn't exist"

    def test_local_queue_of_another_namespace_does_not_count(self):
        wl = workload("elsewhere", namespace="team-b", count=1, required=RACK)
        result = result_of(run([*one_rack(), wl]), "elsewhere", namespace="team-b")
        assert result.status == "Inadmissible"
        assert "doesn't exist" in result.message

    def test_admission_checks_give_quota_reserved(self):
        objects = [
            *one_rack(cq_kwargs={"admission_checks": ["prov"]}),
            admission_check("prov"),
            workload("checked", count=2, required=RACK),
        ]
        result = result_of(run(objects), "checked")
        assert result.status == "QuotaReserved"
        assert [(c.type, c.status) for c in result.conditions] == [("QuotaReserved", "True")]
        assert domains(result.pod_sets[0].assignment) == [("x1", 2)]

    def test_no_admission_checks_give_admitted(self):
        result = result_of(run([*one_rack(), workload("plain", count=2, required=RACK)]), "plain")
        assert result.status == "Admitted"
        assert [(c.type, c.status) for c in result.conditions] == [("QuotaReserved", "True"), ("Admitted", "True")]
        assert result.message.startswith("Quota reserved in ClusterQueue cq")


class TestImpliedTAS:
    def test_tas_only_cluster_queue_places_pod_sets_without_a_request(self):
        objects = [*one_rack(), pod("web", node="x2", cpu="1"), workload("plain", count=3)]
        result = result_of(run(objects), "plain")
        assert result.status == "Admitted"
        assert result.pod_sets[0].flavors == {"cpu": FLAVOR}
        # unconstrained: the fullest node that holds all three
        assert domains(result.pod_sets[0].assignment) == [("x2", 3)]

    def test_mixed_cluster_queue_uses_the_plain_flavor_without_a_request(self):
        objects = [topology(), resource_flavor(), resource_flavor("plain", topology_name=None),
                   cluster_queue(flavors=(FLAVOR, "plain")), local_queue(),
                   node("x1", block="b1", rack="r1"), workload("plain-wl", count=2)]
        result = result_of(run(objects), "plain-wl")
        assert result.status == "Admitted"
        assert result.pod_sets[0].flavors == {"cpu": "plain"}
        assert result.pod_sets[0].assignment is None

    def test_explicit_request_in_a_mixed_cluster_queue_takes_the_tas_flavor(self):
        objects = [topology(), resource_flavor("plain", topology_name=None), resource_flavor(),
                   cluster_queue(flavors=("plain", FLAVOR)), local_queue(),
                   node("x1", block="b1", rack="r1"), workload("tas-wl", count=2, required=RACK)]
        result = result_of(run(objects), "tas-wl")
        assert result.status == "Admitted"
        assert result.pod_sets[0].flavors["cpu"] == FLAVOR
        assert domains(result.pod_sets[0].assignment) == [("x1", 2)]


class TestAdmittedUsage:
    def running(self, *, finished: bool = False) -> dict:
        return admitted(workload("running", count=4, cpu="1"), finished=finished,
                        assignments={"main": domains_json([HOSTNAME], [("x1", 4)])})

    def test_admitted_workload_reduces_capacity(self):
        result = run([*one_rack(), self.running(), workload("big", count=5, required=RACK)])
        big = result_of(result, "big")
        assert big.status != "Admitted"
        # x1 is full: it counts as excluded by its CPUs
        reason = 'topology "default" allows to fit only 4 out of 5 pod(s). Total nodes: 2; excluded: resource "cpu": 1'
        assert big.message == f"couldn't assign flavors to pod set main: {reason}"
        assert big.pod_sets[0].failure_reason == reason

    def test_pending_workload_goes_around_it(self):
        result = run([*one_rack(), self.running(), workload("small", count=4, required=RACK)])
        assert domains(assignment_of(result, "small")) == [("x2", 4)]

    def test_admitted_workload_is_reported_unchanged(self):
        result = run([*one_rack(), self.running()])
        running = result_of(result, "running")
        assert running.status == "Admitted"
        assert domains(running.pod_sets[0].assignment) == [("x1", 4)]

    def test_finished_workload_holds_nothing(self):
        result = run([*one_rack(), self.running(finished=True), workload("big", count=8, required=RACK)])
        assert result_of(result, "running").status == "Finished"
        assert result_of(result, "big").status == "Admitted"
        assert domains(assignment_of(result, "big")) == [("x1", 4), ("x2", 4)]

    def test_finished_workload_frees_its_quota(self):
        objects = [*one_rack(quota={"cpu": "8"}), self.running(finished=True), workload("big", count=8, required=RACK)]
        assert result_of(run(objects), "big").status == "Admitted"

    def test_every_input_workload_is_reported(self):
        objects = [
            *one_rack(),
            self.running(),
            workload("a", count=1, required=RACK),
            workload("b", count=100, required=RACK),
            workload("c", queue="nope"),
        ]
        result = run(objects)
        assert [w.workload.name for w in result.workloads] == ["running", "a", "b", "c"]


class TestOneCycle:
    """A single Kueue scheduling cycle admits at most one workload per ClusterQueue: the head."""

    def test_only_the_head_of_a_cluster_queue(self):
        a = workload("a", count=3, required=HOSTNAME, created=0)
        b = workload("b", count=3, required=HOSTNAME, created=10)
        result = run([*one_rack(), a, b], cycles=1)
        assert result_of(result, "a").status == "Admitted"
        assert result_of(result, "b").status == "Pending"
        assert result_of(result, "b").pod_sets[0].assignment is None

    def test_a_second_cycle_admits_the_next(self):
        a = workload("a", count=3, required=HOSTNAME, created=0)
        b = workload("b", count=3, required=HOSTNAME, created=10)
        result = run([*one_rack(), a, b], cycles=2)
        assert [result_of(result, n).status for n in "ab"] == ["Admitted", "Admitted"]

    def test_an_inadmissible_head_lets_the_next_one_through_in_the_next_cycle(self):
        big = workload("big", count=100, required=HOSTNAME, created=0)
        small = workload("small", count=1, required=HOSTNAME, created=10)
        one = run([*one_rack(), big, small], cycles=1)
        assert result_of(one, "big").status == "Inadmissible"
        assert result_of(one, "small").status == "Pending"
        two = run([*one_rack(), big, small], cycles=2)
        assert result_of(two, "small").status == "Admitted"


def test_a_workload_left_waiting_reports_why_its_quota_is_not_reserved():
    # not evaluated (no cycle runs): its message is the QuotaReserved reason, not the empty
    # "no reservation" of its Admitted condition
    wl = workload("waiting", count=1, cpu="1")
    wl["status"] = {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota for cpu",
         "lastTransitionTime": "2025-06-01T11:00:00Z"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "The workload has no reservation",
         "lastTransitionTime": "2025-06-01T11:00:00Z"}]}
    result = run([*tas_setup(), node("x1", block="b1", rack="r1", cpu="4"), wl], cycles=0)
    waiting = result_of(result, "waiting")
    assert waiting.status == "Pending"
    assert waiting.message == "insufficient quota for cpu"


def test_a_scaled_down_pod_set_holds_quota_only_for_its_remaining_pods():
    # admitted with 6 pods of 1 CPU (6 CPU of the 8 in quota), then scaled down to 2 pods:
    # it holds 2 CPU, so a 6-CPU workload fits; with 6 held it could not
    running = admitted(workload("scaled", count=2, cpu="1"),
                       assignments={"main": domains_json([HOSTNAME], [("x1", 6)])})
    running["status"]["admission"]["podSetAssignments"][0].update(count=6, resourceUsage={"cpu": "6"})
    nodes = [node(f"x{i}", block="b1", rack="r1", cpu="8") for i in (1, 2)]
    result = run([*tas_setup(quota={"cpu": "8"}), *nodes, running, workload("next", count=6, cpu="1")])
    assert result_of(result, "next").status == "Admitted"
    # and without the scale-down it waits for quota
    running["spec"]["podSets"][0]["count"] = 6
    result = run([*tas_setup(quota={"cpu": "8"}), *nodes, running, workload("next", count=6, cpu="1")])
    assert result_of(result, "next").status != "Admitted"
    assert "insufficient unused quota for cpu" in result_of(result, "next").message


def _two_heads_on_one_node(cpu: str = "4") -> list[dict]:
    """One node of `cpu` CPUs; ClusterQueue a's head takes 2 CPUs of it first in the cycle,
    then b's head, a leader and a worker of 2 CPUs each nominated together on that node, is
    checked against what is left (with 4 CPUs: room for either of its PodSets, not for both)."""
    wl = workload("group", queue="lq-b", created=1, pod_sets=[
        pod_set("leader", cpu="2", required=RACK, group="g"), pod_set("workers", cpu="2", required=RACK, group="g")])
    return [topology(), resource_flavor(), cluster_queue("cq-a"), cluster_queue("cq-b"),
            local_queue("lq-a", cluster_queue_name="cq-a"), local_queue("lq-b", cluster_queue_name="cq-b"),
            node("n1", block="b1", rack="r1", cpu=cpu),
            workload("first", queue="lq-a", cpu="2", required=HOSTNAME, created=0), wl]


def test_a_later_heads_pod_sets_on_one_node_are_checked_together():
    """Kueue's cycle checks each PodSet's domains on their own against what earlier heads left,
    so it would pin 6 CPUs of pods on the 4-CPU node; the engine counts them together: the
    group is recomputed and waits, and the node holds what it can."""
    for recompute in (True, False):
        result = run(_two_heads_on_one_node(), cycles=1,
                     feature_gates=gates(TASRecomputeAssignmentWithinSchedulingCycle=recompute))
        assert result_of(result, "first").status == "Admitted"
        group = result_of(result, "group")
        assert group.status != "Admitted", (recompute, group.message)
        assert all(ps.assignment is None for ps in group.pod_sets)


def test_pod_sets_that_fit_together_after_an_earlier_head_are_admitted():
    """The same with a 6-CPU node: both heads are admitted in the one cycle."""
    result = run(_two_heads_on_one_node(cpu="6"), cycles=1)
    assert result_of(result, "first").status == "Admitted"
    assert result_of(result, "group").status == "Admitted"
