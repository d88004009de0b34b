"""The long-lived engine's queues: Kueue's order, parking, the events that requeue, StrictFIFO,
reservations held for one cycle, the second-pass backoff."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.model import Condition
from scheduler.queues import second_pass_delay
from scheduler.results import Answers

from .factories import (
    HOSTNAME,
    NOW,
    RACK,
    admitted,
    domains_json,
    gates,
    local_queue,
    node,
    parse,
    parse_one,
    pod,
    queue_with_policy,
    resource_flavor,
    tas_setup,
    topology,
    workload,
)


def engine_of(objects, **gate_values) -> Engine:
    return Engine.from_parsed(parse(objects), gates(**gate_values))


def one(objects):
    (obj,) = objects
    return parse_one(obj)


def cq(name: str, *, cpu: int, **kwargs) -> dict:
    return queue_with_policy(name, cpu=cpu, **kwargs)


def base(*queues: dict, nodes: int = 4, cpu: str = "4") -> list[dict]:
    objects = [topology(), resource_flavor(), *queues]
    objects += [local_queue(f"lq-{q['metadata']['name']}", cluster_queue_name=q["metadata"]["name"]) for q in queues]
    objects += [node(f"x{i}", block="b1", rack="r1", cpu=cpu) for i in range(1, nodes + 1)]
    return objects


def job(name: str, queue: str, *, count: int = 1, cpu: str = "1", priority: int | None = None,
        created: float = 0, **kwargs) -> dict:
    kwargs.setdefault("required", RACK)
    return workload(name, queue=f"lq-{queue}", count=count, cpu=cpu, priority=priority, created=created, **kwargs)


def statuses(engine: Engine, outcome) -> dict[str, str]:
    return {k.split("/")[1]: r.status for k, r in outcome.decided.items()}


def admitted_names(outcome) -> set[str]:
    return {k.split("/")[1] for k, r in outcome.decided.items() if r.status in ("Admitted", "QuotaReserved")}


def finish(engine: Engine, name: str) -> None:
    wl = engine.state.workload(f"default/{name}")
    engine.upsert(dataclasses.replace(wl, conditions=[*wl.conditions,
                                                      Condition("Finished", "True", "Succeeded", "done", NOW)]))


class TestOrder:
    def test_one_head_per_cluster_queue_per_cycle_in_priority_then_creation_order(self):
        engine = engine_of([*base(cq("a", cpu=16)), job("late-high", "a", priority=10, created=30),
                            job("early", "a", created=0), job("late", "a", created=20)])
        order = [admitted_names(engine.run_pass(NOW, cycles=1)) for _ in range(3)]
        assert order == [{"late-high"}, {"early"}, {"late"}]

    def test_a_cycle_costs_its_heads_not_the_pending_workloads(self):
        objects = [*base(cq("a", cpu=1)), job("fits", "a")]
        objects += [job(f"big-{i}", "a", count=2, created=i + 1) for i in range(200)]
        engine = engine_of(objects)
        outcome = engine.run_pass(NOW)
        assert admitted_names(outcome) == {"fits"}
        # the 200 equivalent workloads are parked by one evaluation, not 200
        nominated = [e for e in outcome.result.events if e.key.startswith("default/big-")]
        assert len(nominated) == 1
        assert engine.queues.parked_count() == 200
        assert outcome.cycles == 3  # admits "fits", parks the 200, finds no head


class TestAnswers:
    def test_the_book_gives_only_those_whose_answer_changes(self):
        book = Answers([("a", ("Inadmissible", "no room")), ("b", ("Inadmissible", "no room"))])
        assert sorted(book.give({"a", "b", "c"}, ("Inadmissible", "no room"))) == ["c"]
        assert book.give({"a", "b", "c"}, ("Inadmissible", "no room")) == []
        assert sorted(book.give({"a", "c"}, ("Pending", "waiting"))) == ["a", "c"]
        assert book.get("a") == ("Pending", "waiting") and book["b"] == ("Inadmissible", "no room")
        # "a" left the old answer's keys: given that answer again, it is answered again
        assert book.give({"a", "b"}, ("Inadmissible", "no room")) == ["a"]
        assert book.pop("a") == ("Inadmissible", "no room") and book.pop("a") is None
        assert book.give({"a"}, ("Inadmissible", "no room")) == ["a"]
        assert len(book) == 3 and set(book) == {"a", "b", "c"} and "d" not in book
        assert book == Answers(book.items()) and book == dict(book.items())

    def test_a_class_parked_again_under_the_same_answer_gets_no_new_results(self):
        objects = [*base(cq("a", cpu=1)), job("fits", "a")]
        objects += [job(f"big-{i}", "a", count=2, created=i + 1) for i in range(50)]
        engine = engine_of(objects)
        first = engine.run_pass(NOW)
        assert len([k for k in first.decided if "/big-" in k]) == 50
        finish(engine, "fits")  # quota freed in the ClusterQueue: the class is requeued, and parked again
        again = engine.run_pass(NOW + timedelta(seconds=10))
        assert engine.queues.parked_count() == 50
        assert len([k for k in again.decided if "/big-" in k]) == 1  # only the one evaluated


class TestParking:
    def test_best_effort_fifo_parks_the_head_and_the_next_one_runs(self):
        engine = engine_of([*base(cq("a", cpu=4)), job("too-big", "a", count=8, created=0),
                            job("small", "a", count=2, created=10)])
        outcome = engine.run_pass(NOW)
        assert statuses(engine, outcome) == {"too-big": "Inadmissible", "small": "Admitted"}
        assert engine.queues.is_parked("default/too-big")

    def test_equivalent_workloads_are_parked_with_the_one_evaluated(self):
        engine = engine_of([*base(cq("a", cpu=2)), job("first", "a", count=2, created=0),
                            *[job(f"same-{i}", "a", count=2, created=10 + i) for i in range(3)],
                            job("other", "a", count=1, cpu="2", created=20)])
        outcome = engine.run_pass(NOW)
        result = {k.split("/")[1]: (r.status, r.message) for k, r in outcome.decided.items()}
        assert result["first"][0] == "Admitted"
        same = {result[f"same-{i}"] for i in range(3)}
        assert len(same) == 1 and next(iter(same))[0] == "Inadmissible"
        assert result["other"][0] == "Inadmissible"
        events = {e.key for e in outcome.result.events if e.type == "Warning"}
        assert len([k for k in events if "same-" in k]) == 1  # one evaluation stands for all three

    def test_a_pass_without_bulk_results_parks_and_counts_the_same(self):
        """A pass that makes no results for the workloads parked with an equivalent one (the
        start-time plays) keeps no list of them, and parks and counts them all the same."""
        def objects():
            return [*base(cq("a", cpu=2)), job("first", "a", count=2, created=0),
                    *[job(f"same-{i}", "a", count=2, created=10 + i) for i in range(40)],
                    job("other", "a", count=1, cpu="2", created=60)]
        with_results, without = engine_of(objects()), engine_of(objects())
        full = with_results.run_pass(NOW)
        lean = without.run_pass(NOW, bulk_results=False)
        assert (lean.parked, lean.admitted, lean.cycles) == (full.parked, full.admitted, full.cycles)
        assert lean.parked == 41 and without.queues.parked_count() == with_results.queues.parked_count() == 41
        assert len([k for k in full.decided if "/same-" in k]) == 40
        assert len([k for k in lean.decided if "/same-" in k]) == 1  # only the one evaluated

    def test_without_equivalence_hashing_each_workload_is_evaluated(self):
        engine = engine_of([*base(cq("a", cpu=2)), job("first", "a", count=2, created=0),
                            *[job(f"same-{i}", "a", count=2, created=10 + i) for i in range(3)]],
                           SchedulingEquivalenceHashing=False)
        outcome = engine.run_pass(NOW)
        warned = {e.key for e in outcome.result.events if e.type == "Warning"}
        assert warned == {f"default/same-{i}" for i in range(3)}

    def test_strict_fifo_head_blocks_the_queue(self):
        engine = engine_of([*base(cq("a", cpu=4, strategy="StrictFIFO")), job("too-big", "a", count=8, created=0),
                            job("small", "a", count=2, created=10)])
        outcome = engine.run_pass(NOW)
        assert statuses(engine, outcome) == {"too-big": "Pending"}
        assert not engine.queues.is_parked("default/too-big")
        assert engine.state.workload("default/small").admission is None

    def test_a_parked_workload_that_did_not_change_stays_parked(self):
        engine = engine_of([*base(cq("a", cpu=4)), job("too-big", "a", count=8)])
        engine.run_pass(NOW)
        engine.upsert(dataclasses.replace(engine.state.workload("default/too-big")))
        engine.sync(NOW)
        assert engine.queues.is_parked("default/too-big")

    def test_a_changed_workload_leaves_the_parked_ones(self):
        engine = engine_of([*base(cq("a", cpu=4)), job("too-big", "a", count=8)])
        engine.run_pass(NOW)
        engine.upsert(one([job("too-big", "a", count=4)]))
        outcome = engine.run_pass(NOW)
        assert statuses(engine, outcome) == {"too-big": "Admitted"}


class TestStickyPreemptor:
    """A head waiting for its preemptions stays at the head of its BestEffortFIFO ClusterQueue
    (Kueue's preemptorWorkload): a workload of higher priority that comes in meanwhile does not
    take what the preemption frees."""

    def engine(self, strategy: str | None = None) -> Engine:
        objects = [*base(cq("a", cpu=4, within="LowerPriority", strategy=strategy)),
                   admitted(job("low", "a", count=1, cpu="4", priority=0),
                            assignments={"main": domains_json([HOSTNAME], [("x1", 1)])}, cluster_queue_name="a"),
                   job("preemptor", "a", count=1, cpu="4", priority=10, created=10)]
        engine = engine_of(objects)
        first = engine.run_pass(NOW, cycles=1)
        assert statuses(engine, first) == {"preemptor": "Pending", "low": "Preempted"}
        engine.upsert(one([job("urgent", "a", count=1, cpu="4", priority=100, created=20)]))
        return engine

    def test_the_preemptor_keeps_the_head_and_is_admitted_once_its_target_is_gone(self):
        engine = self.engine()
        assert engine.queues.queues["a"].sticky == "default/preemptor"
        waiting = engine.run_pass(NOW, cycles=1)
        assert set(waiting.decided) == {"default/preemptor"}  # "urgent", of higher priority, is not the head
        engine.delete("Workload", "default/low")
        admitted_now = engine.run_pass(NOW, cycles=1)
        assert admitted_names(admitted_now) == {"preemptor"}
        assert engine.queues.queues["a"].sticky is None  # admitted: it left the queue

    def test_why_pending_says_why_the_head_stays(self):
        engine = self.engine()
        engine.sync(NOW)
        stop = engine.stop_record("default/urgent", NOW)
        assert stop.blocking == ["default/preemptor"]
        assert "behind workload default/preemptor in ClusterQueue a (kept at the head until its preemptions " \
               "complete), at position 2" in stop.message

    def test_strict_fifo_has_no_sticky_head(self):
        engine = self.engine(strategy="StrictFIFO")
        assert engine.queues.queues["a"].sticky is None
        waiting = engine.run_pass(NOW, cycles=1)
        assert "default/urgent" in waiting.decided and "default/preemptor" not in waiting.decided

    def test_going_back_for_another_reason_ends_it(self):
        engine = self.engine()
        engine.upsert(one([cq("a", cpu=2, within="LowerPriority")]))  # now it can never fit: parked
        engine.run_pass(NOW, cycles=1)
        q = engine.queues.queues["a"]
        assert q.sticky is None and engine.queues.is_parked("default/preemptor")
        engine.upsert(one([cq("a", cpu=4, within="LowerPriority")]))
        engine.delete("Workload", "default/low")
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"urgent"}

    def test_a_state_built_again_takes_the_heads_it_is_given(self):
        def objects(strategy=None):
            return [*base(cq("a", cpu=4, within="LowerPriority", strategy=strategy)),
                    admitted(job("low", "a", count=1, cpu="4", priority=0),
                             assignments={"main": domains_json([HOSTNAME], [("x1", 1)])}, cluster_queue_name="a"),
                    job("preemptor", "a", count=1, cpu="4", priority=10, created=10),
                    job("urgent", "a", count=1, cpu="4", priority=100, created=20)]
        heads = {"a": "default/preemptor", "missing": "default/urgent", "b": "default/nothing"}
        restored = engine_of(objects())
        restored.queues.restore_sticky(heads)
        assert restored.queues.sticky_heads() == {"a": "default/preemptor"}
        assert set(restored.run_pass(NOW, cycles=1).decided) == {"default/preemptor", "default/low"}
        strict = engine_of(objects(strategy="StrictFIFO"))
        strict.queues.restore_sticky(heads)
        assert strict.queues.sticky_heads() == {}
        assert "default/urgent" in strict.run_pass(NOW, cycles=1).decided

    def test_deleting_it_ends_it(self):
        engine = self.engine()
        engine.delete("Workload", "default/preemptor")
        engine.sync(NOW)
        assert engine.queues.queues["a"].sticky is None


class TestHeadsAcrossClusterQueues:
    """The order in which a cycle takes the heads of the ClusterQueues of a cohort (Kueue's
    classical iterator): what one head takes, a head after it cannot."""

    def two_heads(self, **gate_values) -> Engine:
        # a cohort of 4 CPUs, both heads borrowing: only the first one taken fits
        objects = [*base(cq("a", cpu=2, cohort="co"), cq("b", cpu=2, cohort="co")),
                   job("old", "b", cpu="4", priority=0, created=0), job("high", "a", cpu="4", priority=100, created=10)]
        return engine_of(objects, **gate_values)

    def test_the_higher_priority_head_goes_first(self):
        assert admitted_names(self.two_heads().run_pass(NOW, cycles=1)) == {"high"}

    def test_without_priority_sorting_within_cohort_the_older_head_goes_first(self):
        engine = self.two_heads(PrioritySortingWithinCohort=False)
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"old"}

    def preemptor_and_thief(self, strategy: str | None = None, **gate_values) -> Engine:
        """"low1" and "low2" in `a` borrow `b`'s 2 CPUs. "preemptor", in `a`, evicts one of
        them; "thief", of higher priority in `b`, cannot reclaim its quota and waits. Once the
        target is gone both heads fit within their nominal quota, and only one of them fits."""
        objects = [*base(cq("a", cpu=2, cohort="co", within="LowerPriority", strategy=strategy),
                         cq("b", cpu=2, cohort="co"), nodes=4, cpu="2"),
                   *(admitted(job(f"low{i}", "a", cpu="2", priority=0, created=i),
                              assignments={"main": domains_json([HOSTNAME], [(f"x{i}", 1)])}, cluster_queue_name="a")
                     for i in (1, 2)),
                   job("thief", "b", cpu="2", priority=50, created=5),
                   job("preemptor", "a", cpu="2", priority=10, created=10)]
        engine = engine_of(objects, **gate_values)
        first = engine.run_pass(NOW)  # "thief" is tried first and holds the quota for that cycle
        (target,) = [k for k, r in first.decided.items() if r.status == "Preempted"]
        assert statuses(engine, first) == {"preemptor": "Pending", target.split("/")[1]: "Preempted",
                                           "thief": "Inadmissible"}
        engine.delete("Workload", target)
        return engine

    def test_a_preemptor_waiting_for_its_targets_loses_what_the_first_frees_without_the_gate(self):
        engine = self.preemptor_and_thief()
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"thief"}

    def test_prioritize_preemptor_workloads_keeps_what_its_targets_free_for_it(self):
        engine = self.preemptor_and_thief(PrioritizePreemptorWorkloads=True)
        assert engine.queues.is_preemptor(engine.state.workload("default/preemptor"), "a")
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"preemptor"}

    def test_a_strict_fifo_preemptor_goes_first_too(self):
        engine = self.preemptor_and_thief("StrictFIFO", PrioritizePreemptorWorkloads=True)
        assert engine.queues.queues["a"].sticky is None  # not kept at the head of its own queue
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"preemptor"}

    def test_a_preemptor_whose_spec_changed_is_one_no_more(self):
        engine = self.preemptor_and_thief(PrioritizePreemptorWorkloads=True)
        wl = engine.state.workload("default/preemptor")
        engine.upsert(dataclasses.replace(wl, generation=wl.generation + 1))
        assert not engine.queues.is_preemptor(engine.state.workload("default/preemptor"), "a")
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"thief"}


BOOST = "kueue.x-k8s.io/priority-boost"


class TestPriorityBoost:
    """PriorityBoost: the priority-boost annotation is added to the priority wherever Kueue
    compares priorities (the queue's order, preemption); without the gate it is ignored."""

    def queue(self, boost: str, **gate_values) -> Engine:
        return engine_of([*base(cq("a", cpu=4)), job("first", "a", cpu="4", priority=10, created=0),
                          job("boosted", "a", cpu="4", priority=0, created=10, annotations={BOOST: boost})],
                         **gate_values)

    def test_a_boost_moves_a_workload_up_its_queue(self):
        assert admitted_names(self.queue("20", PriorityBoost=True).run_pass(NOW, cycles=1)) == {"boosted"}

    def test_without_the_gate_the_annotation_is_ignored(self):
        assert admitted_names(self.queue("20").run_pass(NOW, cycles=1)) == {"first"}

    @pytest.mark.parametrize("boost", ["ten", "1.5", " 20", "2147483648", ""])
    def test_a_value_that_is_not_an_int32_is_no_boost(self, boost):
        assert admitted_names(self.queue(boost, PriorityBoost=True).run_pass(NOW, cycles=1)) == {"first"}

    def test_a_new_boost_moves_a_waiting_workload(self):
        engine = self.queue("5", PriorityBoost=True)
        engine.upsert(one([job("boosted", "a", cpu="4", priority=0, created=10, annotations={BOOST: "+11"})]))
        assert admitted_names(engine.run_pass(NOW, cycles=1)) == {"boosted"}

    def preemption(self, **gate_values) -> Engine:
        # "long" has run its time: its boost of -60 lets a workload of priority 80 preempt it
        return engine_of([*base(cq("a", cpu=4, within="LowerPriority")),
                          admitted(job("long", "a", cpu="4", priority=100, annotations={BOOST: "-60"}),
                                   assignments={"main": domains_json([HOSTNAME], [("x1", 1)])},
                                   cluster_queue_name="a"),
                          job("incoming", "a", cpu="4", priority=80, created=10)], **gate_values)

    def test_a_negative_boost_makes_a_workload_preemptible(self):
        engine = self.preemption(PriorityBoost=True)
        assert statuses(engine, engine.run_pass(NOW, cycles=1)) == {"incoming": "Pending", "long": "Preempted"}

    def test_without_the_gate_it_is_not(self):
        engine = self.preemption()
        assert statuses(engine, engine.run_pass(NOW, cycles=1)) == {"incoming": "Inadmissible"}


class TestRequeue:
    """Parked workloads come back on the events Kueue requeues on, and only then."""

    def blocked_by_quota(self) -> Engine:
        objects = [*base(cq("a", cpu=4, cohort="co"), cq("b", cpu=0, cohort="co"), cq("c", cpu=4), nodes=8),
                   job("holder", "a", count=4), job("other", "c", count=4),
                   job("waiting", "b", count=2, created=10)]
        engine = engine_of(objects)
        outcome = engine.run_pass(NOW)
        assert admitted_names(outcome) == {"holder", "other"}
        assert engine.queues.is_parked("default/waiting")
        return engine

    def test_a_workload_finishing_in_the_cohort_requeues(self):
        engine = self.blocked_by_quota()
        finish(engine, "holder")
        assert admitted_names(engine.run_pass(NOW)) == {"waiting"}

    def test_a_workload_deleted_in_the_cohort_requeues(self):
        engine = self.blocked_by_quota()
        engine.delete("Workload", "default/holder")
        assert admitted_names(engine.run_pass(NOW)) == {"waiting"}

    def test_quota_freed_in_another_cohort_does_not(self):
        engine = self.blocked_by_quota()
        finish(engine, "other")
        outcome = engine.run_pass(NOW)
        assert outcome.decided == {}
        assert engine.queues.is_parked("default/waiting")

    def test_a_quota_change_requeues(self):
        engine = self.blocked_by_quota()
        engine.upsert(one([cq("b", cpu=2, cohort="co")]))
        assert admitted_names(engine.run_pass(NOW)) == {"waiting"}

    def test_a_new_node_requeues_what_waits_for_topology(self):
        engine = engine_of([*base(cq("a", cpu=64), nodes=1), job("wide", "a", count=2, cpu="4", required=RACK)])
        engine.run_pass(NOW)
        assert engine.queues.is_parked("default/wide")
        engine.upsert(one([node("x9", block="b1", rack="r1", cpu="4")]))
        assert admitted_names(engine.run_pass(NOW)) == {"wide"}

    def test_a_non_tas_pod_stopping_requeues(self):
        engine = engine_of([*base(cq("a", cpu=64), nodes=1), pod("daemon", node="x1", cpu="3"),
                            job("needs-two", "a", count=1, cpu="2", required=HOSTNAME)])
        engine.run_pass(NOW)
        assert engine.queues.is_parked("default/needs-two")
        engine.delete("Pod", "default/daemon")
        assert admitted_names(engine.run_pass(NOW)) == {"needs-two"}

    def test_tas_capacity_freed_in_another_cohort_requeues_what_waits_for_topology(self):
        # Kueue requeues only the finishing workload's cohort; a workload waiting for nodes
        # (not quota) in another cohort would wait for an unrelated event while they sit free
        objects = [*base(cq("a", cpu=64, cohort="one"), cq("b", cpu=64, cohort="two"), nodes=2),
                   job("holder", "a", count=2, cpu="4", required=RACK),
                   job("waiting", "b", count=2, cpu="4", required=RACK, created=10)]
        engine = engine_of(objects)
        engine.run_pass(NOW)
        assert engine.queues.is_parked("default/waiting")
        finish(engine, "holder")
        assert admitted_names(engine.run_pass(NOW)) == {"waiting"}


class TestReservationsLastOneCycle:
    """A head that needs preemption but finds no candidates holds the capacity it would use
    for its cycle only (Kueue's snapshot): the workloads behind it get the free quota in the
    following cycles of the same pass."""

    def objects(self) -> list[dict]:
        # cohort of 16 CPU; "urgent" needs 12 in team-a (nominal 8, so it must reclaim what
        # team-b borrows, and team-a's policy may not), while 8 CPU sit free
        queues = [cq("team-a", cpu=8, cohort="co", reclaim="Never"), cq("team-b", cpu=8, cohort="co")]
        out = [*base(*queues, nodes=8, cpu="8"), admitted(job("running", "team-b", count=1, cpu="8"),
                                                          assignments={"main": domains_json([HOSTNAME], [("x1", 1)])},
                                                          cluster_queue_name="team-b")]
        out.append(job("urgent", "team-a", count=1, cpu="12", priority=1000, required=HOSTNAME))
        out += [job(f"small-{i}", "team-a", count=1, cpu="2", created=10 + i) for i in range(4)]
        return out

    def test_the_free_quota_is_used_in_the_same_pass(self):
        engine = engine_of(self.objects())
        outcome = engine.run_pass(NOW)
        assert outcome.decided["default/urgent"].status == "Inadmissible"
        assert admitted_names(outcome) == {f"small-{i}" for i in range(4)}

    def test_in_the_first_cycle_the_reservation_holds(self):
        engine = engine_of(self.objects())
        first = engine.run_pass(NOW, cycles=1)
        assert admitted_names(first) == set()
        second = engine.run_pass(NOW, cycles=1)
        assert admitted_names(second) == {"small-0"}
        (cpu,) = engine.state.charges["default/small-0"].quota
        assert engine.state.quota.usage("team-a", cpu) == 2000  # millicores


class TestSecondPassBackoff:
    @pytest.mark.parametrize(("iteration", "seconds"), [(1, 1), (2, 2), (3, 4), (5, 16), (6, 30), (20, 30)])
    def test_delay(self, iteration, seconds):
        assert second_pass_delay(iteration) == timedelta(seconds=seconds)

    def objects(self, *, room: bool) -> list[dict]:
        nodes = [node("x2", block="b1", rack="r1", cpu="4"), node("x3", block="b1", rack="r1", cpu="4")]
        busy = [] if room else [pod("busy-2", node="x2", cpu="4"), pod("busy-3", node="x3", cpu="4")]
        running = admitted(workload("train", count=2, cpu="2", required=RACK),
                           assignments={"main": domains_json([HOSTNAME], [("x1", 2)])})
        return [*tas_setup(), *nodes, *busy, running]

    def test_a_node_found_failed_is_replaced_a_second_later(self):
        engine = engine_of(self.objects(room=True), TASFailedNodeReplacementFailFast=False)
        first = engine.run_pass(NOW)
        assert [d.kind for d in first.result.decisions] == ["NodeMarkedUnhealthy"]
        assert engine.run_pass(NOW + timedelta(milliseconds=500)).result.decisions == []
        third = engine.run_pass(NOW + timedelta(seconds=1))
        assert [d.kind for d in third.result.decisions] == ["NodeReplaced"]

    def test_a_failed_replacement_is_retried_after_a_doubling_backoff(self):
        engine = engine_of(self.objects(room=False), TASFailedNodeReplacementFailFast=False)
        engine.run_pass(NOW)
        tries, decided = [], []
        for ms in range(0, 8000, 250):
            result = engine.run_pass(NOW + timedelta(milliseconds=ms)).result
            if any(e.reason == "SecondPassFailed" for e in result.events):
                tries.append(ms)
            decided += [ms for d in result.decisions if d.kind == "ReplacementFailed"]
        assert tries == [1000, 3000, 7000]  # 1 s, then 2 s, then 4 s later
        assert decided == [1000]  # the retries failed the same way: the history gains no line

    def test_a_retry_failing_another_way_is_a_new_decision(self):
        engine = engine_of(self.objects(room=False), TASFailedNodeReplacementFailFast=False)
        engine.run_pass(NOW)
        first = [d.message for d in engine.run_pass(NOW + timedelta(seconds=1)).result.decisions]
        engine.upsert(dataclasses.replace(engine.state.cluster_queues["cq"], stop_policy="Hold"))
        second = [d.message for d in engine.run_pass(NOW + timedelta(seconds=3)).result.decisions]
        assert len(first) == 1 and first[0].startswith("couldn't assign flavors to pod set")
        assert second == ["node x1 not replaced: ClusterQueue cq is inactive"]


def test_an_orphan_is_not_told_again_after_a_backoff():
    """A workload told its ClusterQueue is missing, then in a requeue backoff, is not told
    again when the backoff runs out and it is still an orphan: the answer has not changed
    (nor after a restart, which knows the answers the service read back)."""
    engine = engine_of([*base(cq("a", cpu=4)), local_queue("lq-b", cluster_queue_name="b"), job("w", "b")])
    first = engine.run_pass(NOW)
    assert first.decided["default/w"].message == "ClusterQueue b doesn't exist"
    wl = engine.state.workload("default/w")
    engine.upsert(dataclasses.replace(wl, requeue_at=NOW + timedelta(seconds=5)))
    assert "default/w" not in engine.run_pass(NOW + timedelta(seconds=1)).decided
    assert "default/w" not in engine.run_pass(NOW + timedelta(seconds=6)).decided
    restarted = engine_of([*base(cq("a", cpu=4)), local_queue("lq-b", cluster_queue_name="b"), job("w", "b")])
    restarted.answered = Answers(engine.answered.items())
    assert "default/w" not in restarted.run_pass(NOW + timedelta(seconds=7)).decided
