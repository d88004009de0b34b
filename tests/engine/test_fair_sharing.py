"""Fair sharing: weights, Dominant Resource Shares, and what they change in admission order and
preemption (Kueue's fairSharing section of the manager Configuration)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main
from scheduler.cluster import ClusterState
from scheduler.config import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    Configuration,
    parse_configuration,
)
from scheduler.errors import InputError
from scheduler.explain import explain_workload
from scheduler.fair_sharing import DRS, MAX_INT64, FairShares, compare_drs
from scheduler.quota import FlavorResource

from .factories import (
    V1BETA2,
    admitted,
    cluster_state,
    gates,
    local_queue,
    parse,
    parse_one,
    resource_flavor,
    result_of,
    run,
    workload,
)

FLAVOR = "default-flavor"
GPU = "nvidia.com/gpu"
CPU_ONLY = FlavorResource(FLAVOR, "cpu")


def config(*strategies: str) -> Configuration:
    section: dict[str, Any] = {"preemptionStrategies": list(strategies)} if strategies else {}
    return parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                "fairSharing": section})


FAIR = config()


def quotas(resources: dict[str, object], limits: dict[str, dict[str, object]] | None = None) -> list[dict]:
    entries = []
    for name, nominal in resources.items():
        entry = {"name": name, "nominalQuota": str(nominal)}
        entry.update({k: str(v) for k, v in (limits or {}).get(name, {}).items()})
        entries.append(entry)
    return [{"coveredResources": list(resources), "flavors": [{"name": FLAVOR, "resources": entries}]}]


def queue(name: str, cohort: str | None, *, weight: object = None, reclaim: str = "Never",
          within: str = "Never", **resources: object) -> dict:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": quotas(resources or {"cpu": 0}),
                            "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": within}}
    if cohort is not None:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, *, weight: object = None, **resources: object) -> dict:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if resources:
        spec["resourceGroups"] = quotas(resources)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def lq(cq: str) -> dict:
    return local_queue(f"lq-{cq}", cluster_queue_name=cq)


def pending(name: str, cq: str, *, cpu: object, created: float = 0, priority: int | None = None,
            gpu: object = None) -> dict:
    extra = {GPU: gpu} if gpu is not None else None
    return workload(name, queue=f"lq-{cq}", cpu=str(cpu), extra=extra, created=created, priority=priority)


def running(name: str, cq: str, *, cpu: object, priority: int | None = None, gpu: object = None) -> dict:
    resources = ("cpu", GPU) if gpu is not None else ("cpu",)
    return admitted(pending(name, cq, cpu=cpu, priority=priority, gpu=gpu), assignments={},
                    cluster_queue_name=cq, flavor=FLAVOR, resources=resources)


def flavor() -> dict:
    return resource_flavor(FLAVOR, topology_name=None)


def status(result, name: str) -> str:
    return result_of(result, name).status


# ---------------------------------------------------------------- weights


class TestWeights:
    @pytest.mark.parametrize(("raw", "weight"), [(None, 1.0), ("2", 2.0), ("500m", 0.5), (0, 0.0), (3, 3.0),
                                                 ("1.5", 1.5), ("2k", 2000.0)])
    def test_quantities(self, raw, weight):
        cq = parse_one(queue("a", "all", weight=raw))
        co = parse_one(cohort("all", weight=raw))
        assert cq.fair_weight == weight and co.fair_weight == weight

    @pytest.mark.parametrize(("raw", "reason"), [
        ("-1", "must be greater than or equal to 0, got '-1'"),
        ("heavy", "'heavy' is not a valid quantity"),
        ("1n", "when not 0, must be greater than 1n, got '1n'"),
        ({"value": 1}, "is not a valid quantity"),
    ])
    def test_bad_values_name_the_object_and_field(self, raw, reason):
        for obj, label in ((queue("a", "all", weight=raw), "ClusterQueue/a"), (cohort("all", weight=raw),
                                                                               "Cohort/all")):
            with pytest.raises(InputError) as err:
                parse([obj])
            text = str(err.value)
            assert label in text and "spec.fairSharing.weight" in text and reason in text

    def test_weights_reach_the_quota_tree(self):
        state = cluster_state([flavor(), cohort("all", weight="3"), queue("a", "all", weight="0.5", cpu=1)])
        assert state.quota.queues["a"].fair_weight == 0.5
        assert state.quota.cohorts["all"].fair_weight == 3.0


# ---------------------------------------------------------------- Dominant Resource Share


def drs_tree() -> list[dict]:
    """root ── team (own quota: 2 cpu) ── a (4 cpu, 2 gpu, weight 2), b (2 cpu, 2 gpu)
         └── c (8 cpu, 4 gpu)
    Subtree quotas: team 8 cpu / 4 gpu, root 16 cpu / 8 gpu. a uses 8 cpu and 5 gpu, b 1 cpu, c 2 cpu."""
    return [
        flavor(), cohort("root"), cohort("team", "root", cpu=2, **{GPU: 0}),
        queue("a", "team", weight="2", cpu=4, **{GPU: 2}), queue("b", "team", cpu=2, **{GPU: 2}),
        queue("c", "root", cpu=8, **{GPU: 4}), lq("a"), lq("b"), lq("c"),
        running("a1", "a", cpu=8, gpu=5), running("b1", "b", cpu=1, gpu=0), running("c1", "c", cpu=2, gpu=0),
    ]


class TestDominantResourceShare:
    def test_hand_computed_shares(self):
        tree = cluster_state(drs_tree()).quota
        shares = FairShares()
        # a borrows 4 cpu and 3 gpu of what team can lend (16 cpu, 8 gpu): 250 and 375 per mille;
        # gpu dominates, weight 2 halves it
        a = shares.of(tree.queues["a"])
        assert (a.ratio, a.dominant_resource, a.precise, a.weighted_share) == (375.0, GPU, 187.5, 188)
        assert a.borrowing and a.borrowed == {FlavorResource(FLAVOR, "cpu"), FlavorResource(FLAVOR, GPU)}
        # team uses 9 cpu, 5 gpu against 8 and 4: 1/16 and 1/8 of what root can lend
        team = shares.of(tree.cohorts["team"])
        assert (team.ratio, team.dominant_resource, team.weighted_share) == (125.0, GPU, 125)
        assert shares.of(tree.queues["b"]) == DRS()  # within its quota
        assert shares.of(tree.queues["c"]).is_zero
        assert shares.of(tree.cohorts["root"]) == DRS()  # a root has nothing to borrow from
        # b with 4 more cpu borrows 3: 187.5 per mille
        b = shares.of(tree.queues["b"], {CPU_ONLY: 4000})
        assert (b.ratio, b.dominant_resource, b.weighted_share) == (187.5, "cpu", 188)

    def test_lending_limit_lowers_what_the_parent_can_lend(self):
        lender = queue("lender", "all")
        lender["spec"]["resourceGroups"] = quotas({"cpu": 8}, {"cpu": {"lendingLimit": 2}})
        objects = [flavor(), cohort("all"), queue("a", "all", cpu=4), lender, lq("a"), running("a1", "a", cpu=6)]
        tree = cluster_state(objects).quota
        # the cohort holds 4 + 2 lent: a borrows 2 of 6
        share = FairShares().of(tree.queues["a"])
        assert share.ratio == 2 * 1000 / 6

    def test_weight_zero_is_an_infinite_share_only_when_borrowing(self):
        objects = [flavor(), cohort("all"), queue("a", "all", weight=0, cpu=2), queue("b", "all", cpu=2),
                   lq("a"), running("a1", "a", cpu=1)]
        tree = cluster_state(objects).quota
        shares = FairShares()
        idle = shares.of(tree.queues["a"])
        assert not idle.zero_weight_borrows and idle.precise == 0
        borrowing = shares.of(tree.queues["a"], {CPU_ONLY: 2000})
        assert borrowing.zero_weight_borrows and borrowing.precise == math.inf
        assert borrowing.weighted_share == MAX_INT64
        heavy = shares.of(tree.queues["b"], {CPU_ONLY: 4000})
        assert compare_drs(borrowing, heavy) == 1 and compare_drs(heavy, borrowing) == -1


# ---------------------------------------------------------------- admission order


def order_cluster(*, weight_a: object = None, a_uses: int = 8, b_uses: int = 4) -> list[dict]:
    """a and b (4 cpu each) share a cohort with an idle 8-cpu pool: 16 cpu in all. Each head
    wants 4 cpu and both would borrow; only one fits. a's head is older."""
    objects = [flavor(), cohort("all"), queue("a", "all", weight=weight_a, cpu=4), queue("b", "all", cpu=4),
               queue("pool", "all", cpu=8), lq("a"), lq("b")]
    objects += [running(f"a{i}", "a", cpu=1) for i in range(a_uses)]
    objects += [running(f"b{i}", "b", cpu=1) for i in range(b_uses)]
    return [*objects, pending("a-next", "a", cpu=4, created=0), pending("b-next", "b", cpu=4, created=10)]


class TestAdmissionOrder:
    def test_the_lower_share_goes_first(self):
        objects = order_cluster()
        classic = run(objects, cycles=1)
        # both borrow, same priority: the older one
        assert (status(classic, "a-next"), status(classic, "b-next")) == ("Admitted", "Pending")
        fair = run(objects, cycles=1, config=FAIR)
        # with its head a would borrow 8 of 16 (500), b 4 of 16 (250)
        assert (status(fair, "a-next"), status(fair, "b-next")) == ("Pending", "Admitted")
        assert "no longer fits" in result_of(fair, "a-next").message

    def test_weight_divides_the_share(self):
        fair = run(order_cluster(weight_a="4"), cycles=1, config=FAIR)
        # a: 500 / 4 = 125 < 250
        assert (status(fair, "a-next"), status(fair, "b-next")) == ("Admitted", "Pending")

    def test_weight_zero_goes_last(self):
        objects = order_cluster(a_uses=4, b_uses=8)
        fair = run(objects, cycles=1, config=FAIR)
        assert status(fair, "a-next") == "Admitted"  # 250 against 500
        zero = run(order_cluster(weight_a=0, a_uses=4, b_uses=8), cycles=1, config=FAIR)
        assert (status(zero, "a-next"), status(zero, "b-next")) == ("Pending", "Admitted")

    def test_a_head_within_nominal_on_its_flavors_goes_before_borrowers(self):
        # c borrows gpu (2 of 4: 500), a would borrow 1 of 8 cpu (125); c's head asks for cpu only, within
        # c's nominal quota, so it goes first (FairSharingPrioritizeNonBorrowing), whatever the shares
        objects = [flavor(), cohort("all"), queue("a", "all", cpu=4, **{GPU: 0}), queue("c", "all", cpu=4, **{GPU: 2}),
                   queue("pool", "all", cpu=0, **{GPU: 2}), lq("a"), lq("c"),
                   *[running(f"a{i}", "a", cpu=1) for i in range(4)], running("c-gpu", "c", cpu=0, gpu=4),
                   pending("a-next", "a", cpu=1, created=0), pending("c-next", "c", cpu=4, created=10)]
        fair = run(objects, cycles=1, config=FAIR)
        assert (status(fair, "a-next"), status(fair, "c-next")) == ("Pending", "Admitted")
        by_share = run(objects, cycles=1, config=FAIR, feature_gates=gates(FairSharingPrioritizeNonBorrowing=False))
        assert (status(by_share, "a-next"), status(by_share, "c-next")) == ("Admitted", "Pending")

    def test_hierarchy_compares_cohorts_at_each_level(self):
        # team-x as a whole borrows more than team-y, although its queue x borrows less than y
        objects = [flavor(), cohort("root"), cohort("team-x", "root"), cohort("team-y", "root"),
                   queue("x", "team-x", cpu=2), queue("x2", "team-x", cpu=0), queue("y", "team-y", cpu=2),
                   queue("pool", "root", cpu=12), lq("x"), lq("y"),
                   running("x2-1", "x2", cpu=6), running("x1", "x", cpu=2), running("y1", "y", cpu=2),
                   running("y2", "y", cpu=2),
                   pending("x-next", "x", cpu=2, created=0), pending("y-next", "y", cpu=4, created=10)]
        classic = run(objects, cycles=1)
        assert status(classic, "x-next") == "Admitted"  # older
        fair = run(objects, cycles=1, config=FAIR)
        # at root: team-x would use 10 of its 2 (borrow 8), team-y 8 of 2 (borrow 6)
        assert (status(fair, "x-next"), status(fair, "y-next")) == ("Pending", "Admitted")


# ---------------------------------------------------------------- preemption


def preemption_cluster(*a_workloads: dict) -> list[dict]:
    """a, b and an idle lender c, 4 cpu each (12 in all), all used by a's workloads and b's 2 cpu;
    b wants 4 more cpu, which makes it borrow 2."""
    return [flavor(), cohort("all"), queue("a", "all", cpu=4), queue("b", "all", cpu=4, reclaim="Any"),
            queue("c", "all", cpu=4), lq("a"), lq("b"), *a_workloads, running("b1", "b", cpu=2),
            pending("b-new", "b", cpu=4)]


def preempted(result) -> dict[str, str]:
    """Preempted workloads with the reason of their Preempted condition."""
    out = {}
    for w in result.workloads:
        cond = w.workload.condition("Preempted")
        if w.status == "Preempted" and cond is not None:
            out[w.workload.name] = cond.reason
    return out


class TestPreemption:
    def test_a_heavy_borrower_is_preempted_where_classical_preemption_would_not(self):
        objects = preemption_cluster(*[running(f"a{i}", "a", cpu=2, priority=i) for i in range(5)])
        classic = run(objects, cycles=1)
        assert preempted(classic) == {}  # b would borrow, and borrowWithinCohort is Never
        fair = run(objects, cycles=1, config=FAIR)
        # b with its workload: 2/12 (167); a borrows 6/12 (500), 4/12 (333) after one goes, then 2/12 (167):
        # two of a's workloads, lowest priority first
        assert preempted(fair) == {"a0": "InCohortFairSharing", "a1": "InCohortFairSharing"}
        message = result_of(fair, "a0").message
        assert "due to Fair Sharing within the cohort" in message
        assert "preemptor path: /all/b; preemptee path: /all/a" in message
        assert "Pending the preemption of 2 workload(s)" in result_of(fair, "b-new").message

    def test_the_higher_share_is_preempted_not_the_lower_priority(self):
        # c needs 4 and stays within its nominal quota: classical reclaims the lowest priority
        # borrower (b), fair sharing the ClusterQueue with the highest share (a)
        objects = [flavor(), cohort("all"), queue("a", "all", cpu=4), queue("b", "all", cpu=4),
                   queue("c", "all", cpu=4, reclaim="Any"), lq("a"), lq("b"), lq("c"),
                   running("a1", "a", cpu=7, priority=5), running("b1", "b", cpu=5, priority=1),
                   pending("c-new", "c", cpu=4, priority=10)]
        assert preempted(run(objects, cycles=1)) == {"b1": "InCohortReclamation"}
        assert preempted(run(objects, cycles=1, config=FAIR)) == {"a1": "InCohortReclamation"}

    def big_and_small(self) -> list[dict]:
        # a borrows 6 with one 8-cpu workload and one 2-cpu of higher priority
        return preemption_cluster(running("a-big", "a", cpu=8, priority=0), running("a-small", "a", cpu=2, priority=1))

    def test_less_than_or_equal_to_final_share_spares_a_queue_it_would_push_below_the_preemptor(self):
        # without a-big, a would not borrow at all (0 < 167): refused; without a-small a still borrows
        # 4 (333 >= 167), taken, but 2 cpu are not enough
        result = run(self.big_and_small(), cycles=1, config=config(LESS_THAN_OR_EQUAL_TO_FINAL_SHARE))
        assert preempted(result) == {}
        assert status(result, "b-new") in ("Pending", "Inadmissible")

    def test_less_than_initial_share_compares_with_the_share_before(self):
        # 167 < 500: a-big goes, and it is enough
        result = run(self.big_and_small(), cycles=1, config=config(LESS_THAN_INITIAL_SHARE))
        assert preempted(result) == {"a-big": "InCohortFairSharing"}

    def test_both_strategies_in_order(self):
        # the first strategy takes a-small, the second a-big; a-small is then not needed after all
        result = run(self.big_and_small(), cycles=1, config=FAIR)
        assert preempted(result) == {"a-big": "InCohortFairSharing"}

    @pytest.mark.parametrize(("strategies", "targets"), [
        ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), []),
        ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE), ["default/a-big"]),
    ])
    def test_explanations_follow_fair_preemption(self, strategies, targets):
        state = ClusterState(parse(self.big_and_small()), config=config(*strategies))
        wl = state.workload("default/b-new")
        assert wl is not None
        (suggestion,) = [s for s in explain_workload(state, wl).suggestions if s.kind == "preemption"]
        assert [t["workload"] for t in suggestion.details["targets"]] == targets
        if not targets:
            assert "fair sharing preemption strategies" in suggestion.message

    def test_weight_zero_borrower_is_preempted_first(self):
        objects = [flavor(), cohort("all"), queue("a", "all", cpu=4), queue("z", "all", weight=0, cpu=4),
                   queue("c", "all", cpu=4, reclaim="Any"), lq("c"),
                   running("a1", "a", cpu=7, priority=0), running("z1", "z", cpu=5, priority=5),
                   pending("c-new", "c", cpu=4, priority=10)]
        # z borrows less (1 against 3) but its share is infinite
        assert preempted(run(objects, cycles=1, config=FAIR)) == {"z1": "InCohortReclamation"}

    def test_fair_sharing_off_changes_nothing(self):
        objects = preemption_cluster(*[running(f"a{i}", "a", cpu=2, priority=i) for i in range(5)])
        assert run(objects, cycles=1).workloads == run(objects, cycles=1, config=None).workloads


# ---------------------------------------------------------------- command line


class TestCommandLine:
    def test_simulate_with_fair_sharing(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all(order_cluster()))
        kueue = tmp_path / "kueue.yaml"
        kueue.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                         "fairSharing": {"preemptionStrategies": [
                                             LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE]}}))

        def statuses(*extra: str) -> dict[str, str]:
            assert main(["simulate", str(cluster), *extra, "--now", "2025-06-01T12:00:00Z"]) == 0
            out = json.loads(capsys.readouterr().out)
            return {w["name"]: w["status"] for w in out["workloads"] if w["name"].endswith("-next")}

        assert statuses() == {"a-next": "Admitted", "b-next": "Pending"}
        assert statuses("--config", str(kueue)) == {"a-next": "Pending", "b-next": "Admitted"}

    def test_strategies_in_the_wrong_order(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all(order_cluster()))
        kueue = tmp_path / "kueue.yaml"
        kueue.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                         "fairSharing": {"preemptionStrategies": [
                                             LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]}}))
        assert main(["simulate", str(cluster), "--config", str(kueue)]) == 1
        err = capsys.readouterr().err
        assert "fairSharing.preemptionStrategies" in err and "must come before" in err


