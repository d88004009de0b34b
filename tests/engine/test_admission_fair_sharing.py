"""Admission fair sharing: a ClusterQueue with `admissionScope.admissionMode:
UsageBasedAdmissionFairSharing` orders its workloads by their LocalQueues' usage first (Kueue's
KEP-4136), the usage sampled with a half-life and an entry penalty per admission."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.admission_fair_sharing import UsageEntry, alpha, entry_penalty, status_json, usage_order
from scheduler.cli import main
from scheduler.cluster import Charge
from scheduler.config import Configuration, parse_configuration
from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.model import Condition
from scheduler.queues import COMPACT_SLACK, Parked
from scheduler.quota import FlavorResource

from .factories import (
    CLUSTER_QUEUE,
    FLAVOR,
    NAMESPACE,
    NOW,
    V1BETA2,
    admitted,
    gates,
    local_queue,
    parse,
    resource_flavor,
    result_of,
    run,
    timestamp,
    workload,
)

HALF_LIFE = "5m"  # with a 5m sampling interval: a penalty of half the request


def afs_config(half_life: str = HALF_LIFE, weights: dict[str, float] | None = None) -> Configuration:
    section: dict[str, Any] = {"usageHalfLifeTime": half_life, "usageSamplingInterval": "5m"}
    if weights is not None:
        section["resourceWeights"] = weights
    return parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                "admissionFairSharing": section})


AFS = afs_config()


def clusterqueue(cpu: int, *, mode: str | None = "UsageBasedAdmissionFairSharing",
                 within: str = "Never") -> dict:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": within},
        "resourceGroups": [{"coveredResources": ["cpu"],
                            "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}],
    }
    if mode is not None:
        spec["admissionScope"] = {"admissionMode": mode}
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE}, "spec": spec}


def lq(name: str, consumed: dict[str, str] | None = None, *, sampled: float = 0, weight: str | None = None) -> dict:
    """A LocalQueue of the ClusterQueue; `consumed`: its status's consumedResources, sampled
    `sampled` seconds from NOW."""
    obj = local_queue(name)
    if weight is not None:
        obj["spec"]["fairSharing"] = {"weight": weight}
    if consumed is not None:
        obj["status"] = {"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": consumed, "lastUpdate": timestamp(sampled)}}}
    return obj


def cluster(cpu: int, *queues: dict, mode: str | None = "UsageBasedAdmissionFairSharing",
            within: str = "Never") -> list[dict]:
    return [resource_flavor(topology_name=None), clusterqueue(cpu, mode=mode, within=within), *queues]


def job(name: str, queue: str, *, cpu: str = "2", created: float = 0, priority: int | None = None) -> dict:
    return workload(name, queue=queue, cpu=cpu, created=created, priority=priority)


def statuses(result, *names: str) -> list[str]:
    """Each workload's status, "Pending" for one waiting whether parked or not."""
    return ["Pending" if (status := result_of(result, n).status) == "Inadmissible" else status for n in names]


class TestOrder:
    def test_the_local_queue_that_used_less_goes_first(self):
        objects = cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                          job("older", "a", created=-60), job("newer", "b"))
        assert statuses(run(objects, config=AFS), "older", "newer") == ["Pending", "Admitted"]

    @pytest.mark.parametrize("mode, config, feature_gates", [
        ("NoAdmissionFairSharing", AFS, gates()),
        (None, AFS, gates()),
        ("UsageBasedAdmissionFairSharing", None, gates()),  # Kueue needs the Configuration's section too
        ("UsageBasedAdmissionFairSharing", AFS, gates(AdmissionFairSharing=False)),
    ])
    def test_queue_order_otherwise(self, mode, config, feature_gates):
        objects = cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                          job("older", "a", created=-60), job("newer", "b"), mode=mode)
        warnings: list[str] = []
        result = run(objects, config=config, feature_gates=feature_gates, warnings=warnings)
        assert statuses(result, "older", "newer") == ["Admitted", "Pending"]
        assert warnings == []

    def test_usage_comes_before_priority(self):
        objects = cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                          job("urgent", "a", priority=1000, created=-60), job("routine", "b"))
        assert statuses(run(objects, config=AFS), "urgent", "routine") == ["Pending", "Admitted"]

    def test_within_a_local_queue_priority_then_time(self):
        objects = cluster(2, lq("a", {"cpu": "1"}), lq("b", {"cpu": "5"}),
                          job("first", "a", created=-60), job("urgent", "a", priority=10),
                          job("other", "b", created=-90))
        assert statuses(run(objects, config=AFS), "first", "urgent", "other") == ["Pending", "Admitted", "Pending"]

    def test_the_local_queue_weight_divides_its_usage(self):
        objects = cluster(2, lq("a", {"cpu": "10"}, weight="10"), lq("b", {"cpu": "2"}),
                          job("heavy", "a"), job("light", "b", created=-60))
        assert statuses(run(objects, config=AFS), "heavy", "light") == ["Admitted", "Pending"]

    def test_resource_weights(self):
        objects = cluster(2, lq("a", {"cpu": "10", "memory": "1"}), lq("b", {"cpu": "1", "memory": "2"}),
                          job("older", "a", created=-60), job("newer", "b"))
        # cpu weighs nothing: only memory tells the queues apart, and "a" used less of it
        result = run(objects, config=afs_config(weights={"cpu": 0}))
        assert statuses(result, "older", "newer") == ["Admitted", "Pending"]
        result = run(objects, config=afs_config(weights={"memory": 0}))
        assert statuses(result, "older", "newer") == ["Pending", "Admitted"]

    def test_a_local_queue_of_weight_zero_goes_last_once_it_used_anything(self):
        objects = cluster(2, lq("a", {"cpu": "1"}, weight="0"), lq("b", {"cpu": "50"}),
                          job("older", "a", created=-60), job("newer", "b"))
        assert statuses(run(objects, config=AFS), "older", "newer") == ["Pending", "Admitted"]
        # without usage, Go's 0/0 is NaN, which its comparison puts before any number
        objects = cluster(2, lq("a", weight="0"), lq("b", {"cpu": "1"}),
                          job("older", "a"), job("newer", "b", created=-60))
        assert statuses(run(objects, config=AFS), "older", "newer") == ["Admitted", "Pending"]


class TestPenalty:
    def test_each_admission_adds_its_penalty_within_the_pass(self):
        # "a" starts lower (0 against 0.4 CPU); admitting a1 adds half its 1 CPU (a half-life of one
        # sampling interval), so b1 goes next, then "a" again
        objects = cluster(2, lq("a", {"cpu": "0"}), lq("b", {"cpu": "400m"}),
                          job("a1", "a", cpu="1", created=-90), job("a2", "a", cpu="1", created=-80),
                          job("b1", "b", cpu="1"))
        result = run(objects, config=AFS)
        assert statuses(result, "a1", "a2", "b1") == ["Admitted", "Pending", "Admitted"]

    def test_without_a_penalty_the_queue_that_used_less_takes_everything(self):
        objects = cluster(2, lq("a", {"cpu": "0"}), lq("b", {"cpu": "400m"}),
                          job("a1", "a", cpu="1", created=-90), job("a2", "a", cpu="1", created=-80),
                          job("b1", "b", cpu="1"))
        # a half-life of 0: nothing is kept, no penalty, and both queues weigh 0: queue order
        result = run(objects, config=afs_config(half_life="0s"))
        assert statuses(result, "a1", "a2", "b1") == ["Admitted", "Admitted", "Pending"]

    def test_entry_penalty_formula(self):
        config = afs_config(half_life="10m").admission_fair_sharing
        penalty = entry_penalty({"cpu": 3000, "memory": 1024}, config)
        rate = 1 - 0.5 ** 0.5
        assert penalty == pytest.approx({"cpu": 3 * rate, "memory": 1024 * rate})


class TestSampling:
    def test_usage_decays_with_its_half_life(self):
        # "a" reported 8 CPUs one half-life ago and holds nothing now: 4 when sampled, below "b"'s 5
        objects = cluster(2, lq("a", {"cpu": "8"}, sampled=-300), lq("b", {"cpu": "5"}),
                          job("older", "b", created=-60), job("newer", "a"))
        assert statuses(run(objects, config=AFS), "older", "newer") == ["Pending", "Admitted"]
        # sampled less than an interval ago: not sampled again, 8 against 5
        objects = cluster(2, lq("a", {"cpu": "8"}, sampled=-299), lq("b", {"cpu": "5"}),
                          job("older", "b", created=-60), job("newer", "a"))
        assert statuses(run(objects, config=AFS), "older", "newer") == ["Admitted", "Pending"]

    def test_usage_decays_towards_what_the_queue_holds(self):
        holder = admitted(job("holder", "a", cpu="4"), assignments={}, resources=("cpu",))
        engine = Engine.from_parsed(parse(cluster(8, lq("a", {"cpu": "0"}, sampled=-600), lq("b"), holder)),
                                    gates(), config=AFS)
        engine.run_pass(NOW)
        usage = engine.state.lq_usage[f"{NAMESPACE}/a"]
        assert usage.consumed["cpu"] == pytest.approx(4 * 0.75)  # two half-lives towards 4
        assert usage.sampled_at == NOW
        assert engine.state.lq_usage[f"{NAMESPACE}/b"].consumed == {}

    def test_admissions_are_sampled_at_the_end_of_the_pass_and_count_in_the_next(self):
        engine = Engine.from_parsed(parse(cluster(4, lq("a", {"cpu": "0"}), lq("b", {"cpu": "500m"}),
                                                  job("a1", "a", cpu="2"))), gates(), config=AFS)
        engine.run_pass(NOW)
        a = engine.state.lq_usage[f"{NAMESPACE}/a"]
        assert a.consumed == pytest.approx({"cpu": 1.0})  # the penalty, taken in; no time has passed
        assert (a.penalty, a.has_penalty, a.sampled_at) == ({}, False, NOW)
        # "a" now used more than "b": b's workload goes first though it came later
        engine.upsert(parse_one_workload(job("a2", "a", cpu="2", created=5)))
        engine.upsert(parse_one_workload(job("b1", "b", cpu="2", created=6)))
        engine.upsert(parse_one_workload(job("a3", "a", cpu="2", created=4)))
        outcome = engine.run_pass(NOW + timedelta(seconds=10))
        assert {k: r.status for k, r in outcome.decided.items() if r.status == "Admitted"} == {
            f"{NAMESPACE}/b1": "Admitted"}

    def test_an_inactive_cluster_queue_samples_nothing(self):
        objects = cluster(2, lq("a", {"cpu": "8"}, sampled=-3600))
        objects[1]["spec"]["stopPolicy"] = "Hold"
        engine = Engine.from_parsed(parse(objects), gates(), config=AFS)
        engine.run_pass(NOW)
        assert engine.state.lq_usage[f"{NAMESPACE}/a"].consumed == {"cpu": 8.0}

    def test_alpha(self):
        assert alpha(300, 300) == 0.5
        assert alpha(0, 300) == 0.0
        assert alpha(300, 0) == 0.0
        assert usage_order(3.0, 2.0) == 1.5
        assert usage_order(3.0, 0.0) == math.inf
        assert usage_order(0.0, 0.0) == -math.inf

    def test_status_json(self):
        entry = UsageEntry({"cpu": 31.9995, "memory": 2048.0, "example.com/gpu": 1.25e-7}, NOW)
        assert status_json(entry) == {"consumedResources": {"cpu": "31999500u", "example.com/gpu": "125n",
                                                            "memory": "2048"},
                                      "lastUpdate": "2025-06-01T12:00:00Z"}
        assert status_json(UsageEntry()) == {"consumedResources": {}}

    def test_status_written_reads_back(self):
        entry = UsageEntry({"cpu": 1.5, "memory": 1536.25}, NOW)
        obj = lq("a")
        obj["status"] = {"fairSharing": {"admissionFairSharingStatus": status_json(entry)}}
        queue = parse([obj]).local_queues[0]
        assert dict(queue.consumed) == {"cpu": 1.5, "memory": 1536.25}
        assert queue.consumed_at == NOW

    def test_sample_takes_penalties_in(self):
        entry = UsageEntry({"cpu": 4.0}, NOW, {"cpu": 1.0}, True)
        entry.sample(NOW + timedelta(minutes=5), {"cpu": 2.0}, 300)
        assert entry.consumed == {"cpu": 4.0}  # 2 + 1 decayed and grown, plus the penalty of 1
        assert (entry.penalty, entry.has_penalty) == ({}, False)


class TestPreemption:
    def test_the_local_queue_that_used_more_is_preempted_first(self):
        # both hold 2 CPUs at priority 0; "b" was admitted later, which alone would make it the
        # first candidate, but "a" used more
        a = admitted(job("a-held", "a"), assignments={}, resources=("cpu",))
        b = admitted(job("b-held", "b"), assignments={}, resources=("cpu",))
        for wl, at in ((a, -600), (b, -60)):
            for cond in wl["status"]["conditions"]:
                cond["lastTransitionTime"] = timestamp(at)
        preemptor = job("urgent", "c", priority=100)
        objects = cluster(4, lq("a", {"cpu": "9"}), lq("b", {"cpu": "1"}), lq("c", {"cpu": "0"}), a, b, preemptor,
                          within="LowerPriority")
        result = run(objects, config=AFS)
        assert result_of(result, "a-held").status == "Preempted"
        assert result_of(result, "b-held").status == "Admitted"
        # without admission fair sharing, the one admitted later goes
        result = run(cluster(4, lq("a", {"cpu": "9"}), lq("b", {"cpu": "1"}), lq("c", {"cpu": "0"}), a, b, preemptor,
                             within="LowerPriority", mode=None), config=AFS)
        assert result_of(result, "b-held").status == "Preempted"
        assert result_of(result, "a-held").status == "Admitted"


    def test_usage_comes_before_priority_among_candidates(self):
        # Kueue's "workloads with higher LQ usage first": the candidate of higher priority goes
        # first when its LocalQueue used more
        a = admitted(job("a-held", "a", priority=10), assignments={}, resources=("cpu",))
        b = admitted(job("b-held", "b", priority=1), assignments={}, resources=("cpu",))
        objects = cluster(4, lq("a", {"cpu": "5"}), lq("b", {"cpu": "1"}), lq("c", {"cpu": "0"}), a, b,
                          job("urgent", "c", priority=100), within="LowerPriority")
        result = run(objects, config=AFS)
        assert (result_of(result, "a-held").status, result_of(result, "b-held").status) == ("Preempted", "Admitted")


class TestInput:
    @pytest.mark.parametrize("change, field, reason", [
        (lambda o: o["spec"].update(fairSharing={"weight": "-1"}), "spec.fairSharing.weight",
         "must be greater than or equal to 0"),
        (lambda o: o["spec"].update(fairSharing={"weight": "heavy"}), "spec.fairSharing.weight",
         "not a valid quantity"),
        (lambda o: o.update(status={"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": {"cpu": "-1"}, "lastUpdate": "2025-06-01T12:00:00Z"}}}),
         "status.fairSharing.admissionFairSharingStatus.consumedResources.cpu", "must not be negative"),
        (lambda o: o.update(status={"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": {"cpu": "1"}, "lastUpdate": "yesterday"}}}),
         "status.fairSharing.admissionFairSharingStatus.lastUpdate", "must be an RFC 3339 time"),
    ])
    def test_bad_values_name_the_field(self, change, field, reason):
        obj = lq("a")
        change(obj)
        with pytest.raises(InputError) as err:
            parse([obj])
        assert err.value.field.endswith(field)
        assert reason in err.value.reason

    def test_status_change_alone_moves_no_workload_elsewhere(self):
        engine = Engine.from_parsed(parse(cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                                                  job("older", "a", created=-60), job("newer", "b"))),
                                    gates(), config=AFS)
        # the status changes (Kueue sampled it): "a" now used less
        engine.upsert(parse([lq("a", {"cpu": "0"})]).local_queues[0])
        outcome = engine.run_pass(NOW)
        assert outcome.decided[f"{NAMESPACE}/older"].status == "Admitted"
        assert outcome.decided[f"{NAMESPACE}/newer"].status == "Inadmissible"


def parse_one_workload(obj: dict):
    return parse([obj]).workloads[0]


class TestWhyPending:
    def test_a_workload_behind_the_head_is_told_both_local_queues_usage(self):
        engine = Engine.from_parsed(parse(cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                                                  job("older", "a", created=-60), job("newer", "b"))),
                                    gates(), config=AFS)
        engine.sync(NOW)
        record = engine.stop_record(f"{NAMESPACE}/older", NOW)
        assert record is not None and record.step == "not-head"
        assert record.message.startswith(
            f"not a head: behind workload {NAMESPACE}/newer in ClusterQueue {CLUSTER_QUEUE} (ordered by LocalQueue "
            f"usage first: its LocalQueue {NAMESPACE}/a used 10, the head's {NAMESPACE}/b 1), at position 2")
        assert (record.details["localQueueUsage"], record.details["headLocalQueueUsage"]) == (10.0, 1.0)

    def test_the_order_the_record_gives_is_the_one_the_pass_takes(self):
        objects = cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}),
                          job("older", "a", created=-60), job("newer", "b"))
        engine = Engine.from_parsed(parse(objects), gates(), config=AFS)
        engine.sync(NOW)
        head = engine.stop_record(f"{NAMESPACE}/older", NOW).details["head"]
        outcome = engine.run_pass(NOW, cycles=1)
        assert outcome.decided[head].status == "Admitted"


class TestOrderProperty:
    """Whatever the usage, weights and penalties, and however they change, the heaps give the
    order a sort by (usage, priority, time) gives: the why-pending positions and the pops."""

    @staticmethod
    def expected(engine: Engine) -> list[str]:
        state, queues = engine.state, engine.queues
        q = queues.queues[CLUSTER_QUEUE]
        return sorted(q.active, key=lambda k: (state.local_queue_usage(q.local_queue_of(k)), *queues.orders[k]))

    @staticmethod
    def actual(engine: Engine) -> list[str]:
        q = engine.queues.queues[CLUSTER_QUEUE]
        return sorted(q.active, key=lambda k: q.position(k)[0])

    @staticmethod
    def popped(engine: Engine) -> list[str]:
        q = engine.queues.queues[CLUSTER_QUEUE]
        out = []
        while (key := q.pop()) is not None:
            out.append(key)
        return out

    @settings(max_examples=300, deadline=None)
    @given(data=st.data())
    def test_heap_order_is_usage_then_queue_order(self, data):
        names = ["a", "b", "c"]
        amounts = st.sampled_from(["0", "500m", "1", "2", "10"])
        queues = [lq(n, {"cpu": data.draw(amounts)}, weight=data.draw(st.sampled_from([None, "1", "2", "0"])))
                  for n in names]
        jobs = [job(f"w{i}", data.draw(st.sampled_from(names)), cpu="100",  # too big: nothing admitted
                    created=data.draw(st.integers(-100, 0)), priority=data.draw(st.sampled_from([None, 0, 5, 7])))
                for i in range(data.draw(st.integers(1, 10)))]
        engine = Engine.from_parsed(parse(cluster(2, *queues, *jobs)), gates(), config=AFS)
        engine.sync(NOW)
        assert self.actual(engine) == self.expected(engine)
        steps = data.draw(st.integers(1, 5))
        for step in range(steps):
            name = data.draw(st.sampled_from(names))
            q = engine.queues.queues[CLUSTER_QUEUE]
            what = data.draw(st.sampled_from(["status", "penalty", "park", "leave", "unpark"]))
            if what == "status":
                weight = data.draw(st.sampled_from([None, "1", "2", "0"]))
                engine.upsert(parse([lq(name, {"cpu": data.draw(amounts)}, weight=weight)]).local_queues[0])
            elif what == "park" and q.active:  # found inadmissible: its equivalents with it
                key = data.draw(st.sampled_from(sorted(q.active)))
                q.park_class(q.class_of[key], Parked(key))
            elif what == "leave" and q.class_of:  # admitted elsewhere or deleted
                engine.delete("Workload", data.draw(st.sampled_from(sorted(q.class_of))))
            elif what == "unpark":
                q.unpark_all()
            elif what == "penalty":  # an admission's penalty, as the cycle charges it
                admitted_one = SimpleNamespace(local_queue_key=f"{NAMESPACE}/{name}")
                charge = Charge(CLUSTER_QUEUE, {FlavorResource(FLAVOR, "cpu"): data.draw(st.sampled_from([500, 3000]))})
                engine.state.charge_penalty(admitted_one, charge)
            engine.sync(NOW)
            if step < steps - 1 or data.draw(st.booleans()):
                assert self.actual(engine) == self.expected(engine)
        # the pops take them in that order too, whatever moved since the heaps were last right
        expected = self.expected(engine)
        assert self.popped(engine) == expected


class TestKueueScheduleForAFS:
    """The cases of Kueue's TestScheduleForAFS (pkg/scheduler): a half-life of 10 s sampled
    every second, a ClusterQueue of 8 CPUs, LocalQueues of weight 1 whose usage is set at the
    start, and the scheduler run once per workload."""

    @staticmethod
    def run(usage: dict[str, str], jobs: list[dict], *, feature_gates=None):
        config = parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                      "admissionFairSharing": {"usageHalfLifeTime": "10s",
                                                               "usageSamplingInterval": "1s"}})
        queues = [lq(n, {"cpu": usage[n]} if n in usage else None, weight="1") for n in ("a", "b", "c")]
        return run(cluster(8, *queues, *jobs), config=config, cycles=len(jobs),
                   feature_gates=feature_gates or gates())

    def test_admits_the_workload_of_the_less_active_local_queue(self):
        result = self.run({"a": "8", "b": "2"}, [job("wl-a1", "a", cpu="8"), job("wl-b1", "b", cpu="8", created=1)])
        assert statuses(result, "wl-a1", "wl-b1") == ["Pending", "Admitted"]

    def test_without_it_queue_order_decides(self):
        result = self.run({"a": "8", "b": "2"}, [job("wl-a1", "a", cpu="8"), job("wl-b1", "b", cpu="8", created=1)],
                          feature_gates=gates(AdmissionFairSharing=False))
        assert statuses(result, "wl-a1", "wl-b1") == ["Admitted", "Pending"]

    def test_admits_one_workload_from_each_local_queue_when_quota_is_limited(self):
        result = self.run({"a": "4", "b": "4"}, [job("wl-a1", "a", cpu="4"), job("wl-a2", "a", cpu="4", created=1),
                                                 job("wl-b1", "b", cpu="4", created=2),
                                                 job("wl-b2", "b", cpu="4", created=3)])
        assert statuses(result, "wl-a1", "wl-a2", "wl-b1", "wl-b2") == ["Admitted", "Pending", "Admitted", "Pending"]

    def test_schedules_normally_when_queues_have_equal_usage(self):
        result = self.run({"a": "2", "b": "2", "c": "2"},
                          [job("wl-a1", "a", cpu="4"), job("wl-b1", "b", cpu="3"), job("wl-c1", "c", cpu="1")])
        assert statuses(result, "wl-a1", "wl-b1", "wl-c1") == ["Admitted"] * 3

    def test_admits_the_workload_of_a_local_queue_without_usage_yet(self):
        result = self.run({"a": "8"}, [job("wl-a1", "a", cpu="8"), job("wl-b1", "b", cpu="8", created=1)])
        assert statuses(result, "wl-a1", "wl-b1") == ["Pending", "Admitted"]
        assert result_of(result, "wl-a1").message == (
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor tas-flavor, "
            "8 more needed")


class TestParking:
    """Kueue parks equivalent workloads by their hash alone: those of every LocalQueue of the
    ClusterQueue go together, and come back together."""

    def test_equivalents_of_every_local_queue_are_parked_and_requeued_together(self):
        objects = cluster(2, lq("a", {"cpu": "0"}), lq("b", {"cpu": "500m"}), lq("c", {"cpu": "2"}),
                          job("a1", "a"), job("a2", "a", created=1), job("b1", "b", created=2))
        engine = Engine.from_parsed(parse(objects), gates(), config=AFS)
        outcome = engine.run_pass(NOW)
        assert outcome.decided[f"{NAMESPACE}/a1"].status == "Admitted"
        assert engine.queues.is_parked(f"{NAMESPACE}/a2") and engine.queues.is_parked(f"{NAMESPACE}/b1")
        # an equivalent arriving in a third LocalQueue is parked on arrival
        engine.upsert(parse([job("c1", "c", created=3)]).workloads[0])
        engine.sync(NOW)
        assert engine.queues.is_parked(f"{NAMESPACE}/c1")
        # a1 finishes: its quota comes back, and every equivalent is tried again, by usage first
        a1 = engine.state.workload(f"{NAMESPACE}/a1")
        engine.upsert(dataclasses.replace(a1, conditions=[*a1.conditions, Condition(
            "Finished", "True", "Succeeded", "done", NOW)]))
        outcome = engine.run_pass(NOW + timedelta(seconds=1))
        # a took 2 CPUs (a penalty of 1): b (0.5) goes before a (1) and c (2)
        assert outcome.decided[f"{NAMESPACE}/b1"].status == "Admitted"
        assert [k for k, r in outcome.decided.items() if r.status == "Admitted"] == [f"{NAMESPACE}/b1"]


class TestCommandLine:
    """`simulate` prints each LocalQueue's usage after the pass when it keeps any."""

    def write(self, tmp_path, config: bool) -> list[str]:
        cluster_file = tmp_path / "cluster.yaml"
        cluster_file.write_text(yaml.safe_dump_all(cluster(2, lq("a", {"cpu": "10"}), lq("b", {"cpu": "1"}, weight="2"),
                                                           job("older", "a", created=-60), job("newer", "b"))))
        args = ["simulate", str(cluster_file), "--cycles", "all", "--now", "2025-06-01T12:00:00Z"]
        if config:
            config_file = tmp_path / "kueue.yaml"
            config_file.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                   "kind": "Configuration", "admissionFairSharing": {
                                                       "usageHalfLifeTime": "5m", "usageSamplingInterval": "5m"}}))
            args += ["--config", str(config_file)]
        return args

    def test_json(self, tmp_path, capsys):
        assert main([*self.write(tmp_path, config=True), "-o", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [w["name"] for w in out["workloads"] if w["status"] == "Admitted"] == ["newer"]
        assert out["localQueues"] == [
            {"namespace": NAMESPACE, "name": "a", "clusterQueue": CLUSTER_QUEUE, "weight": 1.0, "usage": 10.0,
             "ordersByUsage": True, "admissionFairSharingStatus": {"consumedResources": {"cpu": "10"},
                                                                   "lastUpdate": "2025-06-01T12:00:00Z"}},
            # b's 1 CPU and its admission's penalty (half of 2 CPUs), divided by its weight of 2
            {"namespace": NAMESPACE, "name": "b", "clusterQueue": CLUSTER_QUEUE, "weight": 2.0, "usage": 1.0,
             "ordersByUsage": True, "admissionFairSharingStatus": {"consumedResources": {"cpu": "2"},
                                                                   "lastUpdate": "2025-06-01T12:00:00Z"}}]

    def test_table_and_none_without_it(self, tmp_path, capsys):
        assert main([*self.write(tmp_path, config=True), "-o", "table"]) == 0
        table = capsys.readouterr().out
        assert table.split("\n\n")[1].splitlines() == [
            "LOCALQUEUE  CLUSTERQUEUE  USAGE  WEIGHT  CONSUMED",
            f"{NAMESPACE}/b   {CLUSTER_QUEUE}            1      2       cpu 2",
            f"{NAMESPACE}/a   {CLUSTER_QUEUE}            10     1       cpu 10"]
        assert main([*self.write(tmp_path, config=False), "-o", "json"]) == 0
        assert "localQueues" not in json.loads(capsys.readouterr().out)

    def test_a_local_queue_whose_first_workload_is_parked_takes_its_place_by_the_next(self):
        # equal usage: priority decides across LocalQueues; x1 (10) does not fit and is parked,
        # then y1 (5) goes before x2 (0), though x2 is in the LocalQueue that had the first place
        objects = cluster(2, lq("x", {"cpu": "1"}), lq("y", {"cpu": "1"}),
                          job("x1", "x", cpu="4", priority=10), job("x2", "x", priority=0),
                          job("y1", "y", priority=5, created=5))
        result = run(objects, config=AFS, cycles=2)
        assert statuses(result, "x1", "x2", "y1") == ["Pending", "Pending", "Admitted"]

    def test_a_local_queue_whose_first_workload_left_takes_its_place_by_the_next(self):
        objects = cluster(2, lq("x", {"cpu": "1"}), lq("y", {"cpu": "1"}),
                          job("x1", "x", priority=10), job("x2", "x", priority=0), job("y1", "y", priority=5))
        engine = Engine.from_parsed(parse(objects), gates(), config=AFS)
        engine.sync(NOW)
        engine.delete("Workload", f"{NAMESPACE}/x1")
        outcome = engine.run_pass(NOW, cycles=1)
        assert [k for k, r in outcome.decided.items() if r.status == "Admitted"] == [f"{NAMESPACE}/y1"]

    @pytest.mark.parametrize("mode", ["UsageBasedAdmissionFairSharing", None])
    def test_the_heaps_stay_bounded_however_often_parked_workloads_are_requeued(self, mode):
        objects = cluster(2, lq("a"), lq("b"), *[job(f"w{i}", "ab"[i % 2], cpu="4", priority=i % 50)
                                                 for i in range(300)], mode=mode)
        engine = Engine.from_parsed(parse(objects), gates(), config=AFS)
        engine.run_pass(NOW)
        q = engine.queues.queues[CLUSTER_QUEUE]
        for k in range(1000):  # a release of quota requeues them all, and a cycle parks them again
            engine.queues.requeue_inadmissible()
            engine.run_pass(NOW + timedelta(seconds=k + 1), cycles=1)
        bound = 2 * len(q.classes) + COMPACT_SLACK
        assert len(q.heap) <= bound
        assert all(len(heap) <= bound for heap in getattr(q, "local_heaps", {}).values())
        assert len(q) == 300  # nothing lost on the way

    @pytest.mark.parametrize("mode", ["UsageBasedAdmissionFairSharing", None])
    def test_a_queue_forgets_the_classes_that_left(self, mode):
        # without hashing every workload is a class of its own: what is admitted or deleted goes
        objects = cluster(4, lq("a"), lq("b"), *[job(f"w{i}", "ab"[i % 2], cpu="1", created=i) for i in range(40)],
                          mode=mode)
        engine = Engine.from_parsed(parse(objects), gates(SchedulingEquivalenceHashing=False), config=AFS)
        engine.run_pass(NOW)
        for i in range(40):
            engine.delete("Workload", f"{NAMESPACE}/w{i}")
        engine.run_pass(NOW + timedelta(seconds=1))
        q = engine.queues.queues[CLUSTER_QUEUE]
        assert (len(q), q.classes, q._ids, q._shapes) == (0, {}, {}, {})
