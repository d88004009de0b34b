"""Why-pending never says that preemption or a finish could make room when it could not.

* A workload its flavor's topology cannot hold even with no admitted workload on the nodes:
  Kueue finds it with the simulate-empty check of the flavor assignment and keeps the first
  reason in the Workload's condition (quota short, or the placement on the nodes as they are);
  the record of the cycle and the explanation name the reason that holds for good.
* A workload that needs preemption, where the policies allow candidates but preempting them
  would not make room: it is not said that no workload may be preempted.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.engine import Engine
from scheduler.stops import NO_CANDIDATES, TOPOLOGY, TOPOLOGY_HELD, WAITS

from .factories import (
    HOSTNAME,
    NOW,
    RACK,
    admitted,
    domains_json,
    gates,
    grid,
    local_queue,
    parse,
    parse_one,
    pod_set,
    queue_with_policy,
    resource_flavor,
    topology,
    workload,
)


def suggestions(why) -> list:
    """Every suggestion, the workload's and its PodSets', as the API lists them."""
    return [*why.suggestions, *(s for ps in why.pod_sets for s in ps.suggestions)]


def cluster(quota: int) -> list[dict]:
    """Two racks of two 4-CPU nodes; a low-priority workload holds one node; `big` asks for
    three whole nodes in one rack, at a priority that may preempt it."""
    return [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"),
        queue_with_policy("cq", cpu=quota, within="LowerPriority"), local_queue("lq", cluster_queue_name="cq"),
        admitted(workload("low", queue="lq", cpu="4", priority=0, created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq"),
        workload("big", queue="lq", count=3, cpu="4", required=RACK, priority=10, created=-60),
    ]


@pytest.mark.parametrize("quota", [12, 100], ids=["quota-short", "quota-fits"])
def test_a_pod_set_no_rack_can_hold_is_said_never_to_fit(quota):
    engine = Engine.from_parsed(parse(cluster(quota)), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    assert why is not None and why.verdict == WAITS and not why.fits
    assert why.stop.step == TOPOLOGY and why.stop.details["withNoWorkloads"]
    assert "even with no admitted workload on its nodes" in why.summary
    assert "allows to fit only 2 out of 3 pod(s)" in why.summary
    # Kueue's condition message is left as Kueue writes it
    assert why.stop.reason.startswith("couldn't assign flavors to pod set main: ")
    kinds = [s.kind for s in suggestions(why)]
    assert "preemption" not in kinds and "free-capacity" not in kinds
    assert kinds[0] == "never-fits"
    assert "higher-level" in kinds  # the block holds four nodes
    assert not any("preempted" in s.message for s in suggestions(why))
    (pod_set,) = why.pod_sets
    assert not pod_set.fits and "allows to fit only 2 out of 3 pod(s)" in pod_set.reason
    # true: the next pass admits nothing, and preempts nothing
    outcome = engine.run_pass(NOW + timedelta(seconds=1))
    assert not engine.state.workload("default/big").has_quota_reservation
    assert engine.state.workload("default/low").has_quota_reservation
    assert not any(d.key == "default/low" for d in outcome.result.decisions)


def test_before_any_cycle_the_explanation_says_it_never_fits():
    engine = Engine.from_parsed(parse(cluster(12)), gates())
    why = engine.explain("default/big", NOW)
    assert why is not None and not why.fits
    kinds = [s.kind for s in suggestions(why)]
    assert "never-fits" in kinds and "preemption" not in kinds


def test_a_pod_set_that_fits_empty_racks_is_not_said_never_to_fit():
    """Two whole nodes fit an empty rack: the low-priority workload is preempted for it."""
    objects = cluster(12)
    objects[-1] = workload("big", queue="lq", count=2, cpu="4", required=RACK, priority=10, created=-60)
    objects[-2] = admitted(workload("low", queue="lq", count=3, cpu="4", priority=0, created=-600),
                           assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1), ("b1-r2-n1", 1),
                                                                          ("b1-r2-n2", 1)])},
                           cluster_queue_name="cq")
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/big", NOW)
    assert "never-fits" not in [s.kind for s in suggestions(why)]
    engine.run_pass(NOW)
    assert engine.state.workload("default/low").condition_true("Evicted") or \
        not engine.state.workload("default/low").has_quota_reservation


def test_candidates_that_would_not_make_room_are_not_said_to_be_none():
    """`big` needs two whole nodes in one rack and 4 more CPUs of quota. The policies let it
    preempt `low`, but each rack keeps a node of a higher-priority workload: preempting `low`
    frees quota and one node, not a rack."""
    objects = [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"),
        queue_with_policy("cq", cpu=16, within="LowerPriority"), local_queue("lq", cluster_queue_name="cq"),
        *(admitted(workload(name, queue="lq", cpu="4", priority=priority, created=-600 + i),
                   assignments={"main": domains_json([HOSTNAME], [(node, 1)])}, cluster_queue_name="cq")
          for i, (name, priority, node) in enumerate([("high-1", 20, "b1-r1-n1"), ("high-2", 20, "b1-r2-n1"),
                                                      ("low", 0, "b1-r1-n2")])),
        workload("big", queue="lq", count=2, cpu="4", required=RACK, priority=10, created=-60),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    before = engine.explain("default/big", NOW)
    [suggestion] = [s for s in suggestions(before) if s.kind == "preemption"]
    assert suggestion.details == {"targets": [], "candidates": 1}
    assert "no admitted workload may be preempted" not in suggestion.message
    assert "1 admitted workload may be preempted for it" in suggestion.message
    assert "preempting them, as far as the preemption rules allow, would not make room" in suggestion.message
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    assert why.verdict == WAITS and why.stop.step == NO_CANDIDATES and why.stop.details["candidates"] == 1
    assert "no admitted workload may be preempted" not in why.summary
    assert "1 admitted workload may be preempted for it under the preemption policies of ClusterQueue cq, " \
        "but preempting them, as far as the preemption rules allow, would not make room for it" in why.summary
    engine.run_pass(NOW + timedelta(seconds=1))
    assert engine.state.workload("default/low").has_quota_reservation
    assert not engine.state.workload("default/big").has_quota_reservation


def test_with_no_candidate_it_says_none_may_be_preempted():
    """The same `low` under a policy that preempts nothing."""
    objects = [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"),
        queue_with_policy("cq", cpu=8, within="Never"), local_queue("lq", cluster_queue_name="cq"),
        admitted(workload("low", queue="lq", cpu="4", priority=0, created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq"),
        workload("big", queue="lq", count=2, cpu="4", required=RACK, priority=10, created=-60),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    assert why.stop.step == NO_CANDIDATES and why.stop.details["candidates"] == 0
    assert "no admitted workload may be preempted for it under the preemption policies of ClusterQueue cq" \
        in why.summary


def test_a_level_that_holds_it_once_room_frees_up_is_suggested():
    """Two nodes of the block are busy: no level holds `big` now, the block does when idle."""
    objects = cluster(100)
    objects.insert(-1, admitted(workload("low-2", queue="lq", cpu="4", priority=0, created=-590),
                                assignments={"main": domains_json([HOSTNAME], [("b1-r2-n1", 1)])},
                                cluster_queue_name="cq"))
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    [higher] = [s for s in suggestions(why) if s.kind == "higher-level"]
    assert higher.details == {"level": "cloud.example.com/block", "domain": ["b1"], "idle": True}
    assert higher.message == ("would fit with `required: cloud.example.com/block` once room frees up: domain b1 "
                              "holds 4 pod(s) with no admitted workload on its nodes, 3 needed")


def racks_held_by_low_priority(within: str) -> list[dict]:
    """Quota to spare; each rack has one node taken by a low-priority workload, so `big` (two
    whole nodes in one rack) fits no rack as the nodes are."""
    return [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"),
        queue_with_policy("cq", cpu=100, within=within), local_queue("lq", cluster_queue_name="cq"),
        *(admitted(workload(name, queue="lq", cpu="4", priority=0, created=-600 + i),
                   assignments={"main": domains_json([HOSTNAME], [(node, 1)])}, cluster_queue_name="cq")
          for i, (name, node) in enumerate([("low-1", "b1-r1-n1"), ("low-2", "b1-r2-n1")])),
        workload("big", queue="lq", count=2, cpu="4", required=RACK, priority=10, created=-60),
    ]


def test_with_quota_to_spare_the_racks_preemption_frees_is_named_before_any_cycle():
    """Kueue turns a topology that has no room now into a preemption search; an answer
    computed before any cycle does the same, and names whom the next pass preempts."""
    engine = Engine.from_parsed(parse(racks_held_by_low_priority("LowerPriority")), gates())
    why = engine.explain("default/big", NOW)
    [preemption] = [s for s in suggestions(why) if s.kind == "preemption"]
    assert preemption.details["targets"] == [{"workload": "default/low-1", "reason": "InClusterQueue"}]
    assert preemption.message == ("preempting 1 workload would make room for it now: default/low-1 "
                                  "(prioritization in the ClusterQueue)")
    engine.run_pass(NOW)
    assert engine.state.workload("default/low-1").condition_true("Evicted")
    assert not engine.state.workload("default/low-2").condition_true("Evicted")
    after = engine.explain("default/big", NOW)
    assert after.verdict == "preempting" and "default/low-1" in after.summary


def test_with_quota_to_spare_and_no_candidate_it_waits_for_workloads_to_finish():
    engine = Engine.from_parsed(parse(racks_held_by_low_priority("Never")), gates())
    why = engine.explain("default/big", NOW)
    [preemption] = [s for s in suggestions(why) if s.kind == "preemption"]
    assert preemption.details == {"targets": [], "candidates": 0}
    assert "no admitted workload may be preempted" in preemption.message
    [freeing] = [s for s in suggestions(why) if s.kind == "free-capacity"]
    assert freeing.details == {"workloads": ["default/low-1"]}
    engine.run_pass(NOW)
    assert not any(engine.state.workload(k).condition_true("Evicted") for k in ("default/low-1", "default/low-2"))


def borrowing(count: int, running_on: list[str]) -> list[dict]:
    """`big` (in cq-a, 4 CPUs of its own) must borrow from cq-b, whose running workload uses
    all of cq-b's 8: the quota holds it back; `running_on` are the nodes that workload takes."""
    return [
        topology(), resource_flavor(), *grid(1, 2, 2, cpu="4"),
        queue_with_policy("cq-a", cpu=4, cohort="co"), queue_with_policy("cq-b", cpu=8, cohort="co"),
        local_queue("lq-a", cluster_queue_name="cq-a"), local_queue("lq-b", cluster_queue_name="cq-b"),
        admitted(workload("b-run", queue="lq-b", count=2, cpu="4", created=-600),
                 assignments={"main": domains_json([HOSTNAME], [(node, 1) for node in running_on])},
                 cluster_queue_name="cq-b"),
        workload("big", queue="lq-a", count=count, cpu="4", required=RACK, created=-60),
    ]


def with_more_quota(engine: Engine) -> bool:
    """Whether `big` is admitted once its ClusterQueue has quota to spare."""
    engine.upsert(parse_one(queue_with_policy("cq-a", cpu=100, cohort="co")))
    engine.run_pass(NOW + timedelta(seconds=5))
    return engine.state.workload("default/big").has_quota_reservation


@pytest.mark.parametrize("evaluated", [False, True], ids=["computed-now", "after-a-pass"])
def test_short_of_quota_with_room_on_the_nodes_says_only_the_quota_holds_it_back(evaluated):
    engine = Engine.from_parsed(parse(borrowing(2, ["b1-r1-n1", "b1-r1-n2"])), gates())
    if evaluated:
        engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    assert not why.fits and ("4 more needed" in why.summary or "short by 4 of cpu" in why.summary)
    [pod_set] = why.pod_sets
    assert not pod_set.fits and "insufficient unused quota" in pod_set.reason
    assert pod_set.levels and pod_set.levels[1].best_fits == 2  # rack r2 is free
    assert [s.kind for s in pod_set.suggestions] == ["quota-only"]
    assert "free-quota" in [s.kind for s in why.suggestions]
    assert with_more_quota(engine)  # true: quota was all it lacked


def test_short_of_quota_and_of_room_says_both_must_free_up():
    engine = Engine.from_parsed(parse(borrowing(2, ["b1-r1-n1", "b1-r2-n1"])), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    [pod_set] = why.pod_sets
    [full] = pod_set.suggestions
    assert full.kind == "topology-full" and "allows to fit only 1 out of 2 pod(s)" in full.message
    assert not with_more_quota(engine)  # true: the quota alone does not let it in


def test_short_of_quota_and_never_fitting_says_so():
    """Three whole nodes in a rack of two: no quota or finish ever makes room."""
    engine = Engine.from_parsed(parse(borrowing(3, ["b1-r1-n1", "b1-r2-n1"])), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    [pod_set] = why.pod_sets
    assert [s.kind for s in pod_set.suggestions] == ["never-fits"]
    assert "even with no admitted workload on its nodes" in pod_set.suggestions[0].message
    assert not with_more_quota(engine)


def one_queue(racks: int, nodes: int, cpu: str, *, quota: int = 100,
              running: tuple[tuple[str, str, tuple[str, ...]], ...] = (), pending: tuple[dict, ...] = ()) -> list[dict]:
    """One block of `racks` x `nodes` nodes of `cpu` CPUs, one ClusterQueue `cq` of `quota` CPUs
    (LocalQueue `lq`); `running`: (name, CPUs a pod, its nodes, one pod each) admitted in it;
    `pending`: the workloads that wait."""
    return [
        topology(), resource_flavor(), *grid(1, racks, nodes, cpu=cpu),
        queue_with_policy("cq", cpu=quota), local_queue("lq", cluster_queue_name="cq"),
        *(admitted(workload(name, queue="lq", count=len(on), cpu=pod_cpu, created=-600 + i),
                   assignments={"main": domains_json([HOSTNAME], [(node, 1) for node in on])}, cluster_queue_name="cq")
          for i, (name, pod_cpu, on) in enumerate(running)),
        *pending,
    ]


@pytest.mark.parametrize("evaluated", [False, True], ids=["computed-now", "after-a-pass"])
def test_only_the_pod_set_the_quota_failed_is_said_to_lack_quota(evaluated):
    """The quota counts PodSets in order: `learner` (1 CPU) fits the 2 CPUs left, `actors`
    (4 CPUs) is 3 short. The learner is not told the actors' reason."""
    objects = one_queue(2, 2, "4", quota=10, running=(("run", "4", ("b1-r1-n1", "b1-r1-n2")),), pending=(
        workload("two", queue="lq", created=-60, pod_sets=[pod_set("learner", required=HOSTNAME),
                                                           pod_set("actors", count=4, preferred=RACK)]),))
    engine = Engine.from_parsed(parse(objects), gates())
    if evaluated:
        engine.run_pass(NOW)
    why = engine.explain("default/two", NOW)
    assert not why.fits and ("3 more needed" in why.summary or "short by 3 of cpu" in why.summary)
    learner, actors = why.pod_sets
    assert learner.fits and "actors" not in learner.reason
    assert not actors.fits and "pod set actors: insufficient unused quota for cpu" in actors.reason
    assert [s.kind for s in learner.suggestions] == [s.kind for s in actors.suggestions] == ["quota-only"]
    if evaluated:  # the cycle's reason, of the actors alone
        assert actors.reason == why.stop.reason


def test_a_request_beyond_what_the_queue_can_ever_have_is_not_told_to_wait_for_finishes():
    engine = Engine.from_parsed(parse(borrowing(4, ["b1-r1-n1", "b1-r2-n1"])), gates())  # 16 CPUs > 4 + 8
    engine.run_pass(NOW)
    why = engine.explain("default/big", NOW)
    kinds = [s.kind for s in suggestions(why)]
    assert kinds == ["exceeds-quota"]
    assert "no workload finishing makes room" in why.suggestions[0].message


def test_a_pod_set_is_explained_on_top_of_the_pod_sets_placed_before_it():
    """Each PodSet fits a rack of two alone; `workers`, after `leader` took a node of the
    only rack with room, does not, as the flavor assigner counts it."""
    objects = one_queue(2, 2, "4", running=(("low", "4", ("b1-r1-n1", "b1-r1-n2")),), pending=(
        workload("job", queue="lq", created=-60, pod_sets=[
            pod_set("leader", count=1, cpu="4", required=RACK), pod_set("workers", count=2, cpu="4", required=RACK)]),))
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/job", NOW)
    leader, workers = why.pod_sets
    assert leader.fits and not workers.fits
    assert "allows to fit only 1 out of 2 pod(s)" in workers.reason


def test_a_pod_set_the_cycle_could_not_place_which_fits_now_keeps_the_cycles_reason_and_says_room_freed():
    """`big` needs two whole nodes in one rack; each rack has a node taken and no workload may
    be preempted: the cycle stops it (no candidates) on the topology. Once `a` finishes, the
    answer keeps the cycle's decision and reason for the PodSet, and says the nodes have room
    now, which the next pass confirms."""
    objects = one_queue(2, 2, "4", running=(("a", "4", ("b1-r1-n1",)), ("b", "4", ("b1-r2-n1",))), pending=(
        workload("big", queue="lq", count=2, cpu="4", required=RACK, created=-60),))
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    stopped = engine.explain("default/big", NOW)
    assert stopped.stop.step == NO_CANDIDATES and stopped.stop.details["podSet"] == "main"
    assert "room-freed" not in [s.kind for s in suggestions(stopped)]
    (pod_set,) = stopped.pod_sets
    assert not pod_set.fits and pod_set.reason == stopped.stop.details["reason"]

    engine.delete("Workload", "default/a")
    why = engine.explain("default/big", NOW + timedelta(seconds=1))
    assert why.stop.step == NO_CANDIDATES and why.verdict == WAITS and not why.fits
    (pod_set,) = why.pod_sets
    assert not pod_set.fits and pod_set.reason == stopped.stop.details["reason"]
    [freed] = [s for s in why.suggestions if s.kind == "room-freed"]
    assert freed.message.startswith("capacity has freed since the scheduling cycle decided")
    assert freed.details == {"podSet": "main"}
    # what it says is so: the next pass admits it
    engine.run_pass(NOW + timedelta(seconds=2))
    assert engine.state.workload("default/big").has_quota_reservation


def two_racks_one_node_taken_in_each(quota: int, *more: dict) -> list[dict]:
    """`big` needs two whole nodes in one rack; each rack has a node taken and no workload may
    be preempted: the cycle stops it (no candidates), on the topology when the quota (`quota`
    CPUs, 8 of them used) has room for its 8 CPUs, on the quota when it does not."""
    return one_queue(2, 2, "4", quota=quota, running=(("a", "4", ("b1-r1-n1",)), ("b", "4", ("b1-r2-n1",))),
                     pending=(workload("big", queue="lq", count=2, cpu="4", required=RACK, created=-60), *more))


def after_a_pass(objects: list[dict]) -> Engine:
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    return engine


def test_quota_used_since_the_cycle_is_said_beside_the_cycles_quota_lines():
    """The cycle found quota for `big` (its lines say so) and no room on the nodes; since, `c`
    took the quota's last 4 CPUs. The answer keeps the cycle's lines and says the quota has been
    used since, so that "the quota and room on the nodes must both free up" is not told beside
    lines that show the quota fitting; the next pass finds the quota short, as it says."""
    engine = after_a_pass(two_racks_one_node_taken_in_each(16))
    stopped = engine.explain("default/big", NOW)
    assert stopped.stop.step == NO_CANDIDATES and stopped.stop.details["podSet"] == "main"
    assert all(line.fits and line.source == "cycle" for line in stopped.quota)
    assert "quota-changed" not in [s.kind for s in suggestions(stopped)]

    c = admitted(workload("c", queue="lq", cpu="4", created=-30), cluster_queue_name="cq",
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n2", 1)])})
    engine.upsert(parse_one(c))
    why = engine.explain("default/big", NOW + timedelta(seconds=1))
    assert why.stop is stopped.stop and all(line.fits and line.source == "cycle" for line in why.quota)
    [used] = [s for s in why.suggestions if s.kind == "quota-changed"]
    assert used.message.startswith("quota has been used since the scheduling cycle decided: computed now, "
                                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
                                   "in flavor tas-flavor, 4 more needed")
    assert used.details["quotaFits"] is False
    (pod_set,) = why.pod_sets
    assert [s.kind for s in pod_set.suggestions] == ["topology-full"]
    # parked, `big` is not tried again until quota is released; a pass that tries it finds
    # the quota short, as said
    tried = after_a_pass(two_racks_one_node_taken_in_each(16, c)).explain("default/big", NOW)
    assert tried.stop.step == NO_CANDIDATES and any(not check.fits for check in tried.stop.quota), tried.stop.quota
    assert "quota-changed" not in [s.kind for s in suggestions(tried)]


def test_quota_freed_since_the_cycle_with_no_room_on_the_nodes_is_said_so():
    """The cycle stopped `big` on the quota (4 CPUs unused, 8 asked) with the nodes full too;
    its ClusterQueue's quota is raised since. The cycle's lines still show it short; the answer
    says the quota has room now and the topology has not, and the next pass stops it on the
    topology, with its quota fitting."""
    engine = after_a_pass(two_racks_one_node_taken_in_each(12))
    stopped = engine.explain("default/big", NOW)
    assert stopped.stop.step == NO_CANDIDATES and "podSet" not in stopped.stop.details
    assert any(not line.fits for line in stopped.quota)

    engine.upsert(parse_one(queue_with_policy("cq", cpu=100)))
    why = engine.explain("default/big", NOW + timedelta(seconds=1))
    assert why.verdict == WAITS and any(not line.fits and line.source == "cycle" for line in why.quota)
    [freed] = [s for s in why.suggestions if s.kind == "quota-changed"]
    assert freed.message.startswith("quota has freed since the scheduling cycle decided: computed now, the quota "
                                    "has room for it and the topology does not")
    assert freed.details == {"quotaFits": True}
    assert "room-freed" not in [s.kind for s in suggestions(why)]
    engine.run_pass(NOW + timedelta(seconds=2))
    again = engine.explain("default/big", NOW + timedelta(seconds=2))
    assert again.stop.details.get("podSet") == "main" and all(check.fits for check in again.stop.quota)
    assert not engine.state.workload("default/big").has_quota_reservation


def test_a_head_that_lost_its_room_to_a_reservation_of_the_cycle_is_told_so():
    """`hold` (older, 3 whole nodes in the rack, 2 of them free, no preemption allowed) reserves
    an empty rack's placement for the cycle; `small` was nominated on a free node, and once
    recomputed under that hold needs preemption it may not make. Its answer names the
    reservation, not the nodes as they are (on which it fits), and nothing claims room freed."""
    objects = [
        topology(), resource_flavor(), *grid(1, 1, 3, cpu="2"),
        queue_with_policy("cq-run", cpu=2), local_queue("lq-run", cluster_queue_name="cq-run"),
        queue_with_policy("cq-small", cpu=1), local_queue("lq-small", cluster_queue_name="cq-small"),
        queue_with_policy("cq-hold", cpu=6), local_queue("lq-hold", cluster_queue_name="cq-hold"),
        admitted(workload("run", queue="lq-run", cpu="2", created=-600),
                 assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])}, cluster_queue_name="cq-run"),
        workload("hold", queue="lq-hold", count=3, cpu="2", required=RACK, created=-120),
        workload("small", queue="lq-small", cpu="1", required=RACK, created=-60),
    ]
    engine = Engine.from_parsed(parse(objects), gates())
    engine.run_pass(NOW)
    why = engine.explain("default/small", NOW)
    assert why.stop.step == TOPOLOGY_HELD and why.stop.blocking == ["default/hold"]
    assert "after default/hold's reservation in this cycle" in why.summary
    (pod_set,) = why.pod_sets
    assert not pod_set.fits and "room-freed" not in [s.kind for s in suggestions(why)]
    held = engine.explain("default/hold", NOW)
    assert held.stop.step == NO_CANDIDATES and held.stop.details["podSet"] == "main"


def leader_and_workers() -> list[dict]:
    """One rack of two 2-CPU nodes, a 1-CPU workload running on the first; `two` asks for a
    leader and workers, two pods each, in the rack: after the leader, the workers never fit."""
    return one_queue(1, 2, "2", running=(("run", "1", ("b1-r1-n1",)),), pending=(
        workload("two", queue="lq", created=-60, pod_sets=[pod_set("lead", count=2, cpu="2", required=RACK),
                                                           pod_set("work", count=2, cpu="2", required=RACK)]),))


def test_a_pod_set_that_never_fits_after_the_one_before_it_is_offered_no_finish_or_room_now():
    """On its own, `work` would fit once `run` finishes; after `lead` it never does: the answer
    names `work` as never fitting and offers nothing that ignores `lead`."""
    engine = Engine.from_parsed(parse(leader_and_workers()), gates())
    for why in (engine.explain("default/two", NOW), (engine.run_pass(NOW), engine.explain("default/two", NOW))[1]):
        assert not why.fits
        lead, work = why.pod_sets
        assert lead.name == "lead" and not lead.suggestions  # its remedies would not admit the workload
        assert work.name == "work" and not work.fits
        assert [s.kind for s in work.suggestions] == ["never-fits"], work.suggestions
    engine.delete("Workload", "default/run")
    engine.run_pass(NOW + timedelta(seconds=1))
    assert not engine.state.workload("default/two").has_quota_reservation


def test_a_pod_set_after_one_that_does_not_fit_is_not_placed():
    """The flavor assigner stops at the first PodSet that does not fit (`lead`, 2 x 2 CPUs, with
    two of the rack's three nodes partly taken); `work` (1 CPU) is not placed, and not said to fit."""
    objects = one_queue(1, 3, "2", running=(("run-0", "1", ("b1-r1-n1",)), ("run-1", "1", ("b1-r1-n2",))), pending=(
        workload("two", queue="lq", created=-60, pod_sets=[pod_set("lead", count=2, cpu="2", required=RACK),
                                                           pod_set("work", count=1, cpu="1", required=RACK)]),))
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/two", NOW)
    lead, work = why.pod_sets
    assert not lead.fits and [s.kind for s in lead.suggestions] == ["fewer-pods", "free-capacity"]
    assert not work.fits and work.reason == "not placed: pod set lead before it does not fit"
    assert not work.suggestions


def test_the_pod_sets_of_a_group_are_explained_as_placed_together():
    """A leader (1 pod) and its workers (2 x 2 CPUs) of one podSetGroupName go in one rack; each
    rack has one free 4-CPU node: each fits alone, the group does not. The answer says so, and
    the finish it names lets the group in."""
    objects = one_queue(2, 2, "4", running=(("run", "4", ("b1-r1-n2", "b1-r2-n2")),), pending=(
        workload("g", queue="lq", created=-60, pod_sets=[
            pod_set("leader", count=1, cpu="1", required=RACK, group="g1"),
            pod_set("workers", count=2, cpu="2", required=RACK, group="g1")]),))
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/g", NOW)
    assert not why.fits and "have room for it now" not in why.summary
    leader, workers = why.pod_sets
    assert not leader.fits and "allows to fit only" in leader.reason
    assert not workers.fits and workers.reason == "not placed: placed with pod set leader as one group, which " \
                                                  "does not fit"
    [freeing] = [s for s in leader.suggestions if s.kind == "free-capacity"]
    assert freeing.details == {"workloads": ["default/run"]}
    engine.run_pass(NOW)
    assert not engine.state.workload("default/g").has_quota_reservation  # true: the group does not fit
    engine.delete("Workload", "default/run")
    engine.run_pass(NOW + timedelta(seconds=1))
    assert engine.state.workload("default/g").has_quota_reservation  # the finish it named let it in


def test_a_group_of_equal_counts_is_explained_with_the_leader_the_cycle_places():
    """With a leader and workers of one pod each, the group's leader is the PodSet placed second
    (`work`, 3 CPUs; `lead`, 1 CPU; both in one rack). Each rack's one 4-CPU node has a 1-CPU
    workload on it. The answer places the group in the workload's order, as the cycle does,
    and every finish it names lets the group in."""
    objects = one_queue(2, 1, "4", running=(("run-0", "1", ("b1-r1-n1",)), ("run-1", "1", ("b1-r2-n1",))), pending=(
        workload("g", queue="lq", created=-60, pod_sets=[
            pod_set("lead", count=1, cpu="1", required=RACK, group="g1"),
            pod_set("work", count=1, cpu="3", required=RACK, group="g1")]),))
    engine = Engine.from_parsed(parse(objects), gates())
    why = engine.explain("default/g", NOW)
    assert not why.fits
    claims = [s for ps in why.pod_sets for s in ps.suggestions if s.kind == "free-capacity"]
    assert claims
    engine.run_pass(NOW)
    assert not engine.state.workload("default/g").has_quota_reservation
    for claim in claims:  # each finish named lets the group in
        without = Engine.from_parsed(parse([o for o in objects if f"default/{o['metadata']['name']}"
                                            not in claim.details["workloads"]]), gates())
        without.run_pass(NOW)
        assert without.state.workload("default/g").has_quota_reservation, claim.message


@pytest.mark.parametrize("request_kwargs", [{"required": RACK}, {"required": HOSTNAME}, {"preferred": RACK},
                                            {"unconstrained": True}])
def test_a_flavor_without_nodes_is_explained_not_a_crash(request_kwargs):
    """A TAS flavor whose Topology has no node at all (a cluster not yet populated, every node of
    the pool deleted): the explanation names Kueue's placement failure and suggests no level."""
    objects = [topology(), resource_flavor(), queue_with_policy("cq", cpu=8),
               local_queue("lq", cluster_queue_name="cq"),
               workload("w", queue="lq", count=2, cpu="1", **request_kwargs)]
    engine = Engine.from_parsed(parse(objects), gates())
    outcome = engine.run_pass(NOW)
    why = engine.explain("default/w", NOW)
    assert not why.fits
    assert "it does not fit flavor tas-flavor even with no admitted workload on its nodes" in why.summary
    assert [ps.reason for ps in why.pod_sets] == [outcome.decided["default/w"].message.split(": ", 1)[1]]
    assert not [s for s in suggestions(why) if s.kind == "higher-level"]
