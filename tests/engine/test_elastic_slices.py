"""Elastic workload slices with TAS: a new slice replaces an admitted one, keeping where its
pods run (ElasticJobsViaWorkloadSlices + ElasticJobsViaWorkloadSlicesWithTAS)."""

from __future__ import annotations

import json

import yaml

from scheduler.cli import main
from scheduler.model import ELASTIC_JOB, WORKLOAD_SLICE_REPLACEMENT_FOR

from .factories import (
    HOSTNAME,
    NAMESPACE,
    admitted,
    domains,
    domains_json,
    gates,
    node,
    pod_set,
    result_of,
    run,
    tas_setup,
    workload,
)

ELASTIC = gates(ElasticJobsViaWorkloadSlices=True, ElasticJobsViaWorkloadSlicesWithTAS=True)


def cluster(*cpus: str, quota: str = "100") -> list[dict]:
    """Hostname-level topology with nodes n1, n2, ... of the given CPUs."""
    return tas_setup(levels=(HOSTNAME,), quota={"cpu": quota}) + [
        node(f"n{i}", cpu=cpu) for i, cpu in enumerate(cpus, start=1)]


def old_slice(pod_sets: list[dict], assignments: dict[str, list[tuple[str, int]]]) -> dict:
    """The admitted slice `job-1` of an elastic job, each PodSet running on the given hosts."""
    return admitted(workload("job-1", pod_sets=pod_sets, created=0, annotations={ELASTIC_JOB: "true"}),
                    assignments={name: domains_json([HOSTNAME], doms) for name, doms in assignments.items()})


def new_slice(pod_sets: list[dict]) -> dict:
    return workload("job-2", pod_sets=pod_sets, created=10,
                    annotations={WORKLOAD_SLICE_REPLACEMENT_FOR: f"{NAMESPACE}/job-1", ELASTIC_JOB: "true"})


def assignment_of(result, name: str, pod_set_name: str = "main") -> list[tuple[str, int]]:
    ps = next(p for p in result_of(result, name).pod_sets if p.name == pod_set_name)
    return domains(ps.assignment)


class TestDeltaOnlyPlacement:
    def test_scale_up_keeps_the_running_pods_and_places_the_extra_ones_on_free_capacity(self):
        old = old_slice([pod_set(count=2, unconstrained=True)], {"main": [("n1", 1), ("n2", 1)]})
        new = new_slice([pod_set(count=4, unconstrained=True)])
        result = run([*cluster("2", "2", "2"), old, new], feature_gates=ELASTIC)
        assert result_of(result, "job-2").status == "Admitted"
        # n1 and n2 have one CPU left next to the kept pods: the two new pods fit together on n3
        assert assignment_of(result, "job-2") == [("n1", 1), ("n2", 1), ("n3", 2)]

    def test_scale_down_drops_the_last_pods_of_the_old_assignment(self):
        old = old_slice([pod_set(count=4, unconstrained=True)], {"main": [("n1", 1), ("n2", 3)]})
        new = new_slice([pod_set(count=2, unconstrained=True)])
        result = run([*cluster("4", "4"), old, new], feature_gates=ELASTIC)
        assert assignment_of(result, "job-2") == [("n1", 1), ("n2", 1)]

    def test_same_count_reuses_the_assignment_even_where_a_fresh_placement_differs(self):
        old = old_slice([pod_set(count=3, unconstrained=True)], {"main": [("n1", 1), ("n2", 2)]})
        new = new_slice([pod_set(count=3, unconstrained=True)])
        result = run([*cluster("4", "4"), old, new], feature_gates=ELASTIC)
        assert assignment_of(result, "job-2") == [("n1", 1), ("n2", 2)]
        fresh = run([*cluster("4", "4"), workload("alone", count=3, unconstrained=True)], feature_gates=ELASTIC)
        assert assignment_of(fresh, "alone") != [("n1", 1), ("n2", 2)]

    def test_leader_keeps_its_node_while_extra_workers_are_placed(self):
        pod_sets = [pod_set("leader", count=1, unconstrained=True, group="g"),
                    pod_set("workers", count=2, unconstrained=True, group="g")]
        old = old_slice(pod_sets, {"leader": [("n3", 1)], "workers": [("n1", 2)]})
        grown = [pod_set("leader", count=1, unconstrained=True, group="g"),
                 pod_set("workers", count=3, unconstrained=True, group="g")]
        result = run([*cluster("2", "2", "2"), old, new_slice(grown)], feature_gates=ELASTIC)
        assert assignment_of(result, "job-2", "leader") == [("n3", 1)]
        # the extra worker takes the tightest room the kept pods leave: next to the leader
        assert assignment_of(result, "job-2", "workers") == [("n1", 2), ("n3", 1)]

    def test_a_group_that_ran_on_a_node_now_gone_is_placed_afresh(self):
        pod_sets = [pod_set("leader", count=1, unconstrained=True, group="g"),
                    pod_set("workers", count=2, unconstrained=True, group="g")]
        old = old_slice(pod_sets, {"leader": [("gone", 1)], "workers": [("n1", 2)]})
        grown = [pod_set("leader", count=1, unconstrained=True, group="g"),
                 pod_set("workers", count=4, unconstrained=True, group="g")]
        result = run([*cluster("2", "3", "3"), old, new_slice(grown)], feature_gates=ELASTIC)
        assert result_of(result, "job-2").status == "Admitted"
        # the old slice's pods do not count: the whole group is placed as if the nodes were empty
        assert assignment_of(result, "job-2", "leader") == [("n1", 1)]
        assert assignment_of(result, "job-2", "workers") == [("n1", 1), ("n2", 3)]

    def test_without_the_tas_gate_the_new_slice_is_placed_afresh(self):
        old = old_slice([pod_set(count=3, unconstrained=True)], {"main": [("n1", 1), ("n2", 2)]})
        new = new_slice([pod_set(count=3, unconstrained=True)])
        result = run([*cluster("4", "4"), old, new], feature_gates=gates(ElasticJobsViaWorkloadSlices=True))
        assert result_of(result, "job-2").status == "Admitted"
        assert assignment_of(result, "job-2") != [("n1", 1), ("n2", 2)]


class TestUnsupportedTopologyRequests:
    def test_required_and_preferred_requests_are_rejected_with_kueues_message(self):
        for kind in ("required", "preferred"):
            old = old_slice([pod_set(count=1, **{kind: HOSTNAME})], {"main": [("n1", 1)]})
            new = new_slice([pod_set(count=2, **{kind: HOSTNAME})])
            result = run([*cluster("4", "4"), old, new], feature_gates=ELASTIC)
            replacement = result_of(result, "job-2")
            assert replacement.status == "Inadmissible"
            assert replacement.message == ("failed to assign flavors to pod set main: "
                                           f"{kind} topology is not supported with ElasticJobsViaWorkloadSlices")
            assert result_of(result, "job-1").status == "Admitted"  # still running as it was

    def test_a_workload_not_marked_elastic_keeps_its_topology_request(self):
        # the gates limit elastic jobs only: another workload's required topology is placed
        result = run([*cluster("4", "4"), workload("plain", count=2, required=HOSTNAME)], feature_gates=ELASTIC)
        assert result_of(result, "plain").status == "Admitted"
        assert assignment_of(result, "plain") == [("n1", 2)]

    def test_a_slice_not_marked_elastic_is_placed_afresh(self):
        # without the elastic-job annotation the new slice keeps no previous placement
        old = old_slice([pod_set(count=2, unconstrained=True)], {"main": [("n1", 1), ("n2", 1)]})
        new = new_slice([pod_set(count=4, unconstrained=True)])
        del new["metadata"]["annotations"][ELASTIC_JOB]
        result = run([*cluster("2", "2", "2"), old, new], feature_gates=ELASTIC)
        assert result_of(result, "job-2").status == "Admitted"
        assert assignment_of(result, "job-2") != [("n1", 1), ("n2", 1), ("n3", 2)]


class TestReplacement:
    def test_the_old_slice_is_finished_as_replaced_when_the_new_one_is_admitted(self):
        old = old_slice([pod_set(count=2, unconstrained=True)], {"main": [("n1", 2)]})
        new = new_slice([pod_set(count=3, unconstrained=True)])
        result = run([*cluster("4", "4"), old, new], feature_gates=ELASTIC)
        replaced = result_of(result, "job-1")
        assert replaced.status == "Finished"
        finished = replaced.workload.condition("Finished")
        assert (finished.status, finished.reason) == ("True", "WorkloadSliceReplaced")
        assert finished.message == ("Replaced to accommodate a workload (UID: uid-job-2, JobUID: ) "
                                    "due to workload slice aggregation")
        assert (f"{NAMESPACE}/job-1", "WorkloadSliceReplaced") in [(e.key, e.reason) for e in result.events]

    def test_only_the_delta_needs_quota(self):
        # the old slice holds 4 of the 6 CPUs: its replacement needs 6 in all, 2 more
        old = old_slice([pod_set(count=4, unconstrained=True)], {"main": [("n1", 4)]})
        new = new_slice([pod_set(count=6, unconstrained=True)])
        result = run([*cluster("4", "4", quota="6"), old, new], feature_gates=ELASTIC)
        assert result_of(result, "job-2").status == "Admitted"
        assert assignment_of(result, "job-2") == [("n1", 4), ("n2", 2)]

    def test_the_old_slice_gives_its_capacity_back(self):
        # scaled down from 4 pods to 2 on the only node: the 2 CPUs it freed take another workload
        old = old_slice([pod_set(count=4, unconstrained=True)], {"main": [("n1", 4)]})
        new = new_slice([pod_set(count=2, unconstrained=True)])
        other = workload("other", count=2, unconstrained=True, created=20)
        result = run([*cluster("4", quota="4"), old, new, other], feature_gates=ELASTIC)
        assert result_of(result, "job-1").status == "Finished"
        assert assignment_of(result, "job-2") == [("n1", 2)]
        assert result_of(result, "other").status == "Admitted"
        assert assignment_of(result, "other") == [("n1", 2)]

    def test_a_replacement_that_names_no_admitted_slice_is_an_ordinary_workload(self):
        new = new_slice([pod_set(count=2, unconstrained=True)])
        result = run([*cluster("4"), new], feature_gates=ELASTIC)
        assert result_of(result, "job-2").status == "Admitted"


class TestCommandLine:
    def test_simulate_replaces_the_slice(self, capsys, tmp_path):
        old = old_slice([pod_set(count=2, unconstrained=True)], {"main": [("n1", 1), ("n2", 1)]})
        new = new_slice([pod_set(count=4, unconstrained=True)])
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump_all([*cluster("2", "2", "2"), old, new], sort_keys=False), encoding="utf-8")
        code = main(["simulate", str(path), "--now", "2025-06-01T12:00:00Z", "-o", "json", "--feature-gates",
                     "ElasticJobsViaWorkloadSlices=true,ElasticJobsViaWorkloadSlicesWithTAS=true"])
        out, err = capsys.readouterr()
        assert code == 0, err
        by_name = {w["name"]: w for w in json.loads(out)["workloads"]}
        assert by_name["job-1"]["status"] == "Finished"
        assert by_name["job-2"]["status"] == "Admitted"
        (ps,) = by_name["job-2"]["podSets"]
        assert ps["domains"] == [{"values": ["n1"], "count": 1}, {"values": ["n2"], "count": 1},
                                 {"values": ["n3"], "count": 2}]
