"""Why-pending tells the scheduler's own story, and its verdict is true.

On random small clusters (nodes in blocks and racks, ClusterQueues with and without a
cohort, quotas, borrowing limits, preemption policies, queueing strategies, priorities,
admitted and pending workloads), a long-lived engine runs a pass; then, for every waiting
workload, why-pending's verdict is checked against the next pass over the unchanged cluster:

* `fits`: the next pass admits it;
* `waits`: the next pass does not admit it;

and the explanation never contradicts itself: when the cycle stopped a workload on quota,
its quota lines are the cycle's numbers and one of them is short. A workload said never to
fit (`never-fits`) is not admitted even alone on the idle nodes, with quota to spare. What an
answer computed now says would make room does: without the workloads it names for
preemption, the workload fits; without those it waits to finish, its PodSet fits; a PodSet
said to be held back by the quota alone fits once the quota is ample, one said to lack room on
the nodes too does not. On the cluster the pass left, no answer says capacity has freed since
the cycle decided (`room-freed`) or that quota has (`quota-changed`); where an answer says
quota has been used since (by the cycles after the one that decided), a pass that tries it
again finds the quota short; and a PodSet's reason is its own.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cluster import is_pending
from scheduler.engine import Engine
from scheduler.explain import compute_explanation
from scheduler.stops import FITS, NO_CANDIDATES, NOT_EVALUATED, NOT_HEAD, QUOTA, QUOTA_HELD, QUOTA_LIMIT, WAITS

from .factories import (
    HOSTNAME,
    NOW,
    admitted,
    assert_no_new_overcommit,
    domains_json,
    gates,
    grid,
    local_queue,
    overcommitted_view,
    parse,
    parse_one,
    pod_set,
    queue_with_policy,
    resource_flavor,
    topology,
    workload,
)

QUOTA_STEPS = {QUOTA, QUOTA_HELD, QUOTA_LIMIT}
PODSET_REASON = "couldn't assign flavors to pod set "


@st.composite
def clusters(draw) -> tuple[list[dict], list[str]]:
    """Objects of a small cluster, and the keys of its pending workloads."""
    blocks, racks, per_rack = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    node_cpu = draw(st.integers(2, 6))
    nodes = grid(blocks, racks, per_rack, cpu=str(node_cpu))
    queues = draw(st.integers(1, 3))
    cohort = draw(st.booleans())
    objects: list[dict] = [topology(), resource_flavor(), *nodes]
    for i in range(queues):
        limit = draw(st.one_of(st.none(), st.integers(0, 4))) if cohort else None
        objects.append(queue_with_policy(
            f"cq-{i}", cpu=draw(st.integers(1, 12)), cohort="co" if cohort else None,
            reclaim=draw(st.sampled_from(["Never", "Any", "LowerPriority"])),
            within=draw(st.sampled_from(["Never", "LowerPriority"])),
            strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])), borrowing_limit=limit))
        objects.append(local_queue(f"lq-{i}", cluster_queue_name=f"cq-{i}"))
    free = {n["metadata"]["name"]: node_cpu for n in nodes}
    for j in range(draw(st.integers(0, 4))):  # running: one pod of 1-3 CPUs on a node with room
        cpu = draw(st.integers(1, 3))
        name = draw(st.sampled_from(sorted(free)))
        if free[name] < cpu:
            continue
        free[name] -= cpu
        cq = draw(st.integers(0, queues - 1))
        wl = workload(f"run-{j}", queue=f"lq-{cq}", cpu=str(cpu), priority=draw(st.integers(0, 1)),
                      created=-600 + j)
        objects.append(admitted(wl, assignments={"main": domains_json([HOSTNAME], [(name, 1)])},
                                cluster_queue_name=f"cq-{cq}"))
    pending = []
    for j in range(draw(st.integers(1, 7))):
        cq = draw(st.integers(0, queues - 1))
        # one PodSet, or two (a leader and its workers, say), each with its own request, placed
        # one after the other or, in one podSetGroupName, together
        names = ["main"] if draw(st.integers(0, 2)) else ["lead", "work"]
        group = "g" if len(names) == 2 and draw(st.booleans()) else None
        pod_sets = [draw(pod_sets_of(name, group)) for name in names]
        if group is not None:  # LeaderWorkerSet's shape: a leader of one pod and its workers, one level
            pod_sets[0]["count"] = 1
            pod_sets[1]["topologyRequest"] = dict(pod_sets[0]["topologyRequest"])
            if "podSetSliceSize" in pod_sets[1]["topologyRequest"]:  # the workers hold a slice at least
                pod_sets[1]["count"] = max(pod_sets[1]["count"], 2)
        objects.append(workload(f"wl-{j}", queue=f"lq-{cq}", pod_sets=pod_sets, priority=draw(st.integers(0, 3)),
                                created=draw(st.integers(-300, 0))))
        pending.append(f"default/wl-{j}")
    return objects, pending


@st.composite
def pod_sets_of(draw, name: str, group: str | None = None) -> dict:
    """A PodSet of 1-3 pods of 1-3 CPUs, with one of the topology requests (a PodSet of a
    group asks for a level: Kueue's job webhooks require one)."""
    topo = draw(st.sampled_from(["required-rack", "required-block", "preferred", "unconstrained", "implied",
                                 "sliced"]))
    kwargs: dict = {}
    count = draw(st.integers(1, 3))
    if topo == "sliced":  # slices of two pods on racks, with a partial slice when the count is odd
        kwargs = {"required": "cloud.example.com/block", "slice_topology": "cloud.example.com/rack", "slice_size": 2}
        count = draw(st.integers(2, 5))
    elif topo == "required-rack":
        kwargs["required"] = "cloud.example.com/rack"
    elif topo == "required-block":
        kwargs["required"] = "cloud.example.com/block"
    elif topo == "preferred":
        kwargs["preferred"] = "cloud.example.com/rack"
    elif topo == "unconstrained":
        kwargs["unconstrained"] = True
    if group is not None and not (kwargs.get("required") or kwargs.get("preferred")):
        kwargs = {"required": "cloud.example.com/rack"}
    return pod_set(name, count=count, cpu=str(draw(st.integers(1, 3))), group=group, **kwargs)


def waiting(engine: Engine) -> list[str]:
    return sorted(w.key for w in engine.state.workloads if is_pending(w))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_why_pending_verdict_is_what_the_next_pass_does(case):
    objects, _ = case
    engine = Engine.from_parsed(parse(objects), gates())
    for key in waiting(engine):  # nothing evaluated yet: computed now, and it claims nothing
        why = engine.explain(key, NOW)
        assert why is not None and why.verdict == NOT_EVALUATED and not why.fits
        check_room_claims(objects, key, why)
    before = overcommitted_view(engine.state)  # the running workloads may exceed a quota already
    engine.run_pass(NOW)
    assert_no_new_overcommit(before, after := overcommitted_view(engine.state))
    verdicts = {}
    never_fits = []
    quota_used_since = []
    for key in waiting(engine):
        why = engine.explain(key, NOW)
        assert why is not None
        verdicts[key] = why.verdict
        if any(s.kind == "never-fits" for ps in why.pod_sets for s in ps.suggestions):
            never_fits.append(key)
        # within a pass capacity only shrinks: on the cluster the pass left, nothing the cycle
        # decided on the capacity as it was fits now
        assert not any(s.kind == "room-freed" or (s.kind == "quota-changed" and s.details["quotaFits"])
                       for s in why.suggestions), (key, why.summary)
        if any(s.kind == "quota-changed" for s in why.suggestions):  # used by the cycles after its own
            quota_used_since.append((key, why.stop.pass_number))
        for ps in why.pod_sets:  # a PodSet's reason is its own, never another PodSet's
            if ps.reason.startswith(PODSET_REASON):
                assert ps.reason.removeprefix(PODSET_REASON).split(":")[0] == ps.name, (key, ps.name, ps.reason)
                assert ps.reason.count(PODSET_REASON) == 1, (key, ps.name, ps.reason)
        assert why.fits == (why.verdict == FITS)
        stop = why.stop
        assert stop is not None
        if stop.step in QUOTA_STEPS:  # the quota lines are the cycle's, and they agree with it
            assert why.quota and all(line.source == "cycle" for line in why.quota)
            assert any(not line.fits for line in why.quota), (key, why.summary, why.quota)
        if stop.step == NOT_HEAD:
            head = stop.details["head"]
            assert head != key and head in stop.message
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert_no_new_overcommit(after, overcommitted_view(engine.state))
    for key, verdict in verdicts.items():
        wl = engine.state.workload(key)
        now_admitted = wl is not None and wl.has_quota_reservation
        if verdict == FITS:
            assert now_admitted, (key, outcome.decided.get(key))
        elif verdict == WAITS:
            assert not now_admitted, (key, engine.decisions.get(key))
    for key, decided_in in quota_used_since:  # a pass that tries it again finds the quota short, as said
        again = engine.explain(key, NOW + timedelta(seconds=1))
        if again is not None and again.stop is not None and again.stop.pass_number != decided_in and \
                again.stop.quota and again.stop.step != NOT_HEAD:
            assert any(not check.fits for check in again.stop.quota), (key, again.summary)
    for key in never_fits:  # said never to fit: not even alone, on idle nodes, with quota to spare
        assert not admitted_alone(objects, key), key


def check_room_claims(objects: list[dict], key: str, why) -> None:
    """What the explanation says would make room does: with the workloads it would preempt
    gone, the workload fits quota and topology; with those it waits for gone, its PodSet fits
    the topology."""
    for suggestion in why.suggestions:
        if suggestion.kind == "preemption" and suggestion.details["targets"]:
            gone = {t["workload"] for t in suggestion.details["targets"]}
            assert explained_without(objects, key, gone).fits, (key, suggestion.message)
    for told in why.pod_sets:
        for suggestion in told.suggestions:
            if suggestion.kind == "free-capacity":
                after = explained_without(objects, key, set(suggestion.details["workloads"]))
                [same] = [p for p in after.pod_sets if p.name == told.name]
                # the topology holds it; the quota may still be short, which the explanation tells apart
                assert same.fits or "insufficient unused quota" in (same.reason or ""), (key, suggestion.message,
                                                                                          same.reason)
            elif suggestion.kind in ("higher-level", "fewer-pods") and not suggestion.details.get("idle"):
                after = explained_changed(objects, key, told.name, suggestion)
                [same] = [p for p in after.pod_sets if p.name == told.name]
                # the topology holds it; the quota may still be short, which the explanation tells apart
                assert same.fits or "insufficient unused quota" in (same.reason or ""), (key, suggestion.message,
                                                                                          same.reason)
            elif suggestion.kind in ("quota-only", "topology-full"):  # what more quota alone would do
                after = explained_with_quota(objects, key)
                [same] = [p for p in after.pod_sets if p.name == told.name]
                assert same.fits == (suggestion.kind == "quota-only"), (key, suggestion.message, same.reason)


def explained_without(objects: list[dict], key: str, gone: set[str]):
    """The workload `key` explained from scratch on the cluster without the workloads `gone`."""
    kept = [o for o in objects
            if o["kind"] != "Workload" or f"{o['metadata']['namespace']}/{o['metadata']['name']}" not in gone]
    engine = Engine.from_parsed(parse(kept), gates())
    return compute_explanation(engine.state, engine.state.workload(key))


def explained_changed(objects: list[dict], key: str, pod_set_name: str, suggestion):
    """The workload `key` explained from scratch with its PodSet changed as the suggestion says:
    the higher level required, or the fewer pods."""
    changed = copy.deepcopy(objects)
    for obj in changed:
        if obj["kind"] == "Workload" and f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" == key:
            for ps in obj["spec"]["podSets"]:
                if ps["name"] == pod_set_name:
                    if suggestion.kind == "higher-level":
                        ps["topologyRequest"]["required"] = suggestion.details["level"]
                    else:
                        ps["count"] = suggestion.details["count"]
    engine = Engine.from_parsed(parse(changed), gates())
    return compute_explanation(engine.state, engine.state.workload(key))


def explained_with_quota(objects: list[dict], key: str):
    """The workload `key` explained from scratch on the same cluster, every ClusterQueue with
    quota far beyond what it asks for."""
    more = [queue_with_policy(o["metadata"]["name"], cpu=1000) if o["kind"] == "ClusterQueue" else o for o in objects]
    engine = Engine.from_parsed(parse(more), gates())
    return compute_explanation(engine.state, engine.state.workload(key))


def admitted_alone(objects: list[dict], key: str) -> bool:
    """Whether the workload `key` is admitted by a pass over the same nodes with no other
    workload, and every ClusterQueue's quota far beyond what it asks for."""
    alone = []
    for obj in objects:
        if obj["kind"] == "Workload":
            if f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" == key:
                alone.append(obj)
        elif obj["kind"] == "ClusterQueue":
            alone.append(queue_with_policy(obj["metadata"]["name"], cpu=1000))
        else:
            alone.append(obj)
    engine = Engine.from_parsed(parse(alone), gates())
    engine.run_pass(NOW)
    wl = engine.state.workload(key)
    return wl is not None and wl.has_quota_reservation


def test_a_head_held_back_by_a_reservation_names_it():
    """The issue's case: a StrictFIFO head that needs preemption but finds no candidate stays at
    the front of its queue and reserves the cohort's quota every cycle; the head of another
    ClusterQueue that fits at nomination no longer does once the reservation is counted, pass
    after pass. Why-pending names the holder with the cycle's numbers, instead of "fits now"."""
    objects = [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="8"),
        queue_with_policy("cq-a", cpu=6, cohort="co", reclaim="Never", within="Never", strategy="StrictFIFO"),
        queue_with_policy("cq-b", cpu=2, cohort="co"),
        local_queue("lq-a", cluster_queue_name="cq-a"), local_queue("lq-b", cluster_queue_name="cq-b"),
        admitted(workload("a-running", queue="lq-a", cpu="4", priority=0, created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq-a"),
        # cq-a's head needs its 6 nominal CPUs, 4 of them used by a running workload it may not preempt: it
        # reserves the 2 left; cq-b's head borrows 1 of them to run its 3
        workload("big", queue="lq-a", cpu="6", priority=10, created=-60),
        workload("small", queue="lq-b", cpu="3", priority=0, created=-30),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    small = engine.explain("default/small", NOW)
    assert small is not None and small.verdict == WAITS and not small.fits
    assert small.stop.step == QUOTA_HELD and small.stop.blocking == ["default/big"]
    assert "default/big's reservation" in small.summary and "fits now" not in small.summary
    cpu = next(line for line in small.quota if line.resource == "cpu")
    assert cpu.source == "cycle" and not cpu.fits
    engine.run_pass(NOW + timedelta(seconds=1))
    assert not engine.state.workload("default/small").has_quota_reservation


def test_not_a_head_names_the_head_and_its_position():
    objects = [
        topology(), resource_flavor(), *grid(1, 1, 2, cpu="4"),
        queue_with_policy("cq-0", cpu=8, strategy="StrictFIFO"), local_queue("lq-0", cluster_queue_name="cq-0"),
        workload("huge", queue="lq-0", cpu="20", priority=5, created=-60),
        workload("one", queue="lq-0", cpu="1", created=-30),
        workload("two", queue="lq-0", cpu="1", created=-20),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    two = engine.explain("default/two", NOW)
    assert two.stop.step == NOT_HEAD and two.stop.blocking == ["default/huge"]
    assert two.stop.details["position"] == 3 and "StrictFIFO" in two.summary
    huge = engine.explain("default/huge", NOW)
    assert huge.stop.step != NOT_HEAD and not huge.stop.computed_now


def test_parked_equivalents_share_one_record():
    objects = [
        topology(), resource_flavor(), *grid(1, 1, 2, cpu="4"),
        queue_with_policy("cq-0", cpu=4), local_queue("lq-0", cluster_queue_name="cq-0"),
        admitted(workload("running", queue="lq-0", cpu="2", created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq-0"),
        *[workload(f"w{i}", queue="lq-0", cpu="3", created=-60 + i) for i in range(4)],
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    records = {key: engine.stop_record(key) for key in waiting(engine)}
    assert len({id(r) for r in records.values()}) == 1
    record = next(iter(records.values()))
    assert record.parked and record.step == NO_CANDIDATES and record.requeue_on
    why = engine.explain("default/w3", NOW)
    assert "parked as inadmissible since pass 1" in why.summary
    assert "short by 1 of cpu in flavor tas-flavor" in why.summary


def test_a_pod_set_short_of_quota_tells_the_cycles_numbers_as_the_quota_lines_do():
    """After the pass, another workload takes quota: the answer is still the cycle's (short
    by 2), and the PodSet's line does not tell the number counted now (short by 4)."""
    objects = [
        topology(), resource_flavor(), *grid(1, 1, 2, cpu="8"),
        queue_with_policy("cq", cpu=8, within="Never"), local_queue("lq", cluster_queue_name="cq"),
        admitted(workload("running", queue="lq", cpu="4", created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq"),
        workload("big", queue="lq", cpu="6", created=-60),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    engine.upsert(parse_one(admitted(workload("later", queue="lq", cpu="2", created=-30),
                                     assignments={"main": domains_json([HOSTNAME], [("b1-r1-n2", 1)])},
                                     cluster_queue_name="cq")))
    why = engine.explain("default/big", NOW)
    assert why.stop.quota and "2 more needed" in why.stop.reason
    [pod_set] = why.pod_sets
    assert pod_set.reason == why.stop.reason
    [cpu] = [line for line in why.quota if line.resource == "cpu"]
    assert cpu.source == "cycle" and cpu.short == "2"
