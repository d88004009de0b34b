"""Parsing Kubernetes/Kueue JSON: located validation errors, effective pod requests, API shapes."""

from __future__ import annotations

import pytest

from scheduler.errors import InputError
from scheduler.parse import parse_objects

from .factories import (
    BLOCK,
    FILE,
    HOSTNAME,
    LEVELS,
    RACK,
    V1BETA1,
    admitted,
    cluster_queue,
    container,
    domains_json,
    node,
    parse,
    pod,
    pod_set,
    resource_flavor,
    taint,
    toleration,
    topology,
    workload,
)


def parse_error(*objects: dict) -> str:
    with pytest.raises(InputError) as info:
        parse(objects)
    message = str(info.value)
    assert "\n" not in message
    return message


def assert_located(message: str, obj: str, field: str) -> None:
    assert message.startswith(f"{FILE}: {obj}: {field}: "), message


# ---------------------------------------------------------------- Workloads


class TestWorkloadErrors:
    def test_required_and_preferred_together(self):
        wl = workload("train", pod_sets=[pod_set(raw_topology_request={"required": RACK, "preferred": BLOCK})])
        message = parse_error(wl)
        assert_located(message, "Workload/default/train", "spec.podSets[0].topologyRequest")
        assert "mutually exclusive" in message

    def test_unconstrained_with_required(self):
        wl = workload("train", pod_sets=[pod_set(raw_topology_request={"required": RACK, "unconstrained": True})])
        assert_located(parse_error(wl), "Workload/default/train", "spec.podSets[0].topologyRequest.unconstrained")

    def test_negative_count(self):
        message = parse_error(workload("train", count=-1))
        assert_located(message, "Workload/default/train", "spec.podSets[0].count")
        assert message.endswith("must be >= 0, got -1")

    def test_count_not_an_integer(self):
        wl = workload("train")
        wl["spec"]["podSets"][0]["count"] = "many"
        assert_located(parse_error(wl), "Workload/default/train", "spec.podSets[0].count")

    def test_min_count_above_count(self):
        message = parse_error(workload("train", count=2, min_count=3))
        assert_located(message, "Workload/default/train", "spec.podSets[0].minCount")
        assert "must be <= count (2), got 3" in message

    def test_error_in_second_pod_set_names_its_index(self):
        wl = workload("train", namespace="ml", pod_sets=[pod_set("a"), pod_set("b", cpu="lots")])
        message = parse_error(wl)
        assert_located(message, "Workload/ml/train",
                       "spec.podSets[1].template.spec.containers[0].resources.requests.cpu")
        assert "'lots'" in message

    def test_bad_quantity_in_limits(self):
        ps = pod_set(containers=[container(limits={"memory": "1.5.5Gi"})])
        message = parse_error(workload("train", pod_sets=[ps]))
        assert_located(message, "Workload/default/train",
                       "spec.podSets[0].template.spec.containers[0].resources.limits.memory")

    def test_bad_toleration_operator(self):
        ps = pod_set(tolerations=[toleration("gpu", "yes", operator="Matches")])
        message = parse_error(workload("train", pod_sets=[ps]))
        assert_located(message, "Workload/default/train", "spec.podSets[0].template.spec.tolerations[0].operator")
        assert "'Matches'" in message

    def test_equal_toleration_without_key(self):
        ps = pod_set(tolerations=[{"operator": "Equal", "value": "x"}])
        message = parse_error(workload("train", pod_sets=[ps]))
        assert_located(message, "Workload/default/train", "spec.podSets[0].template.spec.tolerations[0].operator")

    def test_invalid_level_label_key(self):
        wl = workload("train", required="not a/valid/key")
        assert_located(parse_error(wl), "Workload/default/train", "spec.podSets[0].topologyRequest.required")

    def test_pod_sets_must_not_be_empty(self):
        wl = workload("train", pod_sets=[])
        assert_located(parse_error(wl), "Workload/default/train", "spec.podSets")

    def test_pod_set_not_a_mapping(self):
        wl = workload("train", pod_sets=["main"])
        message = parse_error(wl)
        assert_located(message, "Workload/default/train", "spec.podSets[0]")
        assert "must be a mapping, got a string" in message

    def test_duplicate_pod_set_names(self):
        wl = workload("train", pod_sets=[pod_set("main"), pod_set("main")])
        assert_located(parse_error(wl), "Workload/default/train", "spec.podSets[1].name")

    def test_at_most_8_pod_sets(self):
        # Kueue's CRD: the API server refuses a Workload of more
        eight = workload("train", pod_sets=[pod_set(f"ps{i}") for i in range(8)])
        assert len(parse([eight]).workloads[0].pod_sets) == 8
        message = parse_error(workload("train", pod_sets=[pod_set(f"ps{i}") for i in range(9)]))
        assert_located(message, "Workload/default/train", "spec.podSets")
        assert "at most 8 PodSets, got 9" in message

    @pytest.mark.parametrize("name", ["Workers", "bad name", "under_score", "-lead", "x" * 64])
    def test_a_pod_set_name_is_a_dns_label(self, name):
        message = parse_error(workload("train", pod_sets=[pod_set(name)]))
        assert_located(message, "Workload/default/train", "spec.podSets[0].name")
        assert "must be a lowercase RFC 1123 label" in message

    def test_missing_spec(self):
        wl = workload("train")
        del wl["spec"]
        assert_located(parse_error(wl), "Workload/default/train", "spec")

    def test_bad_node_affinity_operator(self):
        ps = pod_set(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}})
        message = parse_error(workload("train", pod_sets=[ps]))
        assert_located(
            message, "Workload/default/train",
            "spec.podSets[0].template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
        )

    def test_bad_admission_assignment_is_located(self):
        wl = admitted(workload("done"), assignments={"main": {"levels": [HOSTNAME], "domains": "x1"}})
        message = parse_error(wl)
        field = "status.admission.podSetAssignments[0].topologyAssignment"
        assert message.startswith(f"{FILE}: Workload/default/done: {field}")


# ---------------------------------------------------------------- other kinds


class TestOtherKindErrors:
    def test_topology_with_nine_levels(self):
        levels = [f"example.com/level-{i}" for i in range(9)]
        message = parse_error(topology(levels=levels))
        assert_located(message, "Topology/default", "spec.levels")
        assert "at most 8" in message

    def test_topology_with_eight_levels_is_fine(self):
        levels = [f"example.com/level-{i}" for i in range(7)] + [HOSTNAME]
        (parsed,) = parse([topology(levels=levels)]).topologies
        assert parsed.levels == tuple(levels)

    def test_topology_with_duplicate_levels(self):
        message = parse_error(topology(levels=[BLOCK, BLOCK, HOSTNAME]))
        assert_located(message, "Topology/default", "spec.levels[1].nodeLabel")
        assert "twice" in message

    def test_hostname_must_be_the_lowest_level(self):
        message = parse_error(topology(levels=[BLOCK, HOSTNAME, RACK]))
        assert_located(message, "Topology/default", "spec.levels")
        assert "lowest" in message

    def test_topology_without_levels(self):
        assert_located(parse_error(topology(levels=[])), "Topology/default", "spec.levels")

    def test_node_with_bad_allocatable(self):
        message = parse_error(node("x1", cpu="1.5.5"))
        assert_located(message, "Node/x1", "status.allocatable.cpu")

    def test_node_with_bad_taint_effect(self):
        message = parse_error(node("x1", taints=[taint("k", "v", effect="Sometimes")]))
        assert_located(message, "Node/x1", "spec.taints[0].effect")

    def test_pod_with_bad_toleration_operator(self):
        message = parse_error(pod("p0", tolerations=[toleration("k", operator="Sometimes")]))
        assert_located(message, "Pod/default/p0", "spec.tolerations[0].operator")

    def test_flavor_with_bad_toleration_operator(self):
        message = parse_error(resource_flavor(tolerations=[toleration("k", operator="Maybe")]))
        assert_located(message, "ResourceFlavor/tas-flavor", "spec.tolerations[0].operator")

    def test_cluster_queue_with_bad_nominal_quota(self):
        message = parse_error(cluster_queue(quota={"cpu": "a lot"}))
        assert_located(message, "ClusterQueue/cq", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")

    def test_missing_name(self):
        obj = node("x1")
        del obj["metadata"]["name"]
        assert_located(parse_error(obj), "Node/<unnamed>", "metadata.name")

    def test_missing_kind(self):
        obj = node("x1")
        del obj["kind"]
        assert_located(parse_error(obj), "object/x1", "kind")

    @pytest.mark.parametrize(("obj", "kind"), [("a string", "a string"), ([1, 2], "a list"), (7, "an integer")])
    def test_non_mapping_objects(self, obj, kind):
        with pytest.raises(InputError) as info:
            parse_objects([(FILE, obj)], decode_assignment=lambda d: d, warn=lambda _m: None)
        message = str(info.value)
        assert message.startswith(f"{FILE}: ")
        assert message.endswith(f"expected a Kubernetes object (a mapping), got {kind}")

    def test_unknown_kinds_are_skipped_with_a_warning(self):
        warnings: list[str] = []
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
        foreign_workload = {**workload("w"), "apiVersion": "example.com/v1"}
        parsed = parse([config_map, job, foreign_workload, node("x1")], warnings=warnings)
        assert [n.name for n in parsed.nodes] == ["x1"]
        assert parsed.workloads == []
        assert len(warnings) == 3
        assert warnings[0].startswith(f"{FILE}: ConfigMap/ns/cm: ")
        assert "ConfigMap" in warnings[0] and "skipped" in warnings[0]
        assert "Job/j" in warnings[1]
        assert "Workload/default/w" in warnings[2]


# ---------------------------------------------------------------- effective pod requests


def requests_of(ps: dict) -> dict[str, int]:
    (wl,) = parse([workload("w", pod_sets=[ps])]).workloads
    return dict(wl.pod_sets[0].spec.requests)


class TestPodRequests:
    def test_containers_are_summed(self):
        ps = pod_set(containers=[container("a", cpu="1", memory="1Gi"), container("b", cpu="500m", memory="512Mi")])
        assert requests_of(ps) == {"cpu": 1500, "memory": 1536 * 2**20}

    def test_init_containers_take_the_max(self):
        ps = pod_set(
            containers=[container("a", cpu="1"), container("b", cpu="1")],
            init_containers=[container("i1", cpu="3"), container("i2", cpu="1500m", memory="4Gi")],
        )
        # cpu: max(1 + 1, 3, 1.5) = 3; memory: max(0, 0, 4Gi)
        assert requests_of(ps) == {"cpu": 3000, "memory": 4 * 2**30}

    def test_sidecars_add_to_the_containers(self):
        ps = pod_set(
            containers=[container("main", cpu="2")],
            init_containers=[container("proxy", cpu="500m", restart_policy="Always")],
        )
        assert requests_of(ps) == {"cpu": 2500}

    def test_init_container_after_a_sidecar_runs_beside_it(self):
        ps = pod_set(
            containers=[container("main", cpu="1")],
            init_containers=[
                container("proxy", cpu="1", restart_policy="Always"),
                container("setup", cpu="3"),
            ],
        )
        # the main phase needs 1 + 1 = 2, but setup runs next to the proxy: 3 + 1 = 4
        assert requests_of(ps) == {"cpu": 4000}

    def test_init_container_before_a_sidecar_runs_alone(self):
        ps = pod_set(
            containers=[container("main", cpu="1")],
            init_containers=[
                container("setup", cpu="3"),
                container("proxy", cpu="1", restart_policy="Always"),
            ],
        )
        assert requests_of(ps) == {"cpu": 3000}

    def test_limits_stand_in_for_missing_requests(self):
        ps = pod_set(containers=[container("a", cpu="1", limits={"cpu": "4", "memory": "2Gi"})])
        assert requests_of(ps) == {"cpu": 1000, "memory": 2 * 2**30}

    def test_overhead_is_added(self):
        ps = pod_set(cpu="1", overhead={"cpu": "250m", "memory": "64Mi"})
        assert requests_of(ps) == {"cpu": 1250, "memory": 64 * 2**20}

    def test_pod_level_requests_stand_for_the_pod(self):
        ps = pod_set(containers=[container("a", cpu="1"), container("b", cpu="1")], overhead={"cpu": "100m"})
        ps["template"]["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
        # the pod-level cpu (4) covers the containers' 2; memory only the pod level asks for
        assert requests_of(ps) == {"cpu": 4100, "memory": 2**30}

    def test_pod_level_request_below_the_containers_counts_the_containers(self):
        ps = pod_set(containers=[container("a", cpu="8")], overhead={"cpu": "250m"})
        ps["template"]["spec"]["resources"] = {"requests": {"cpu": "0"}}
        assert requests_of(ps) == {"cpu": 8250}

    def test_pod_level_request_below_the_init_containers_counts_their_peak(self):
        ps = pod_set(containers=[container("a", cpu="1")], init_containers=[container("i", cpu="3")])
        ps["template"]["spec"]["resources"] = {"requests": {"cpu": "2"}}
        assert requests_of(ps) == {"cpu": 3000}

    def test_extended_resources(self):
        ps = pod_set(cpu="2", extra={"nvidia.com/gpu": "8"})
        assert requests_of(ps) == {"cpu": 2000, "nvidia.com/gpu": 8}

    def test_pod_objects_use_the_same_rules(self):
        obj = pod("p0", node="x1", containers=[container("a", cpu="1"), container("b", cpu="1")],
                  init_containers=[container("i", cpu="5")], overhead={"cpu": "100m"})
        (parsed,) = parse([obj]).pods
        assert dict(parsed.spec.requests) == {"cpu": 5100}
        assert parsed.node_name == "x1"


# ---------------------------------------------------------------- shapes and defaults


class TestShapes:
    def test_topology_request_from_pod_template_annotations(self):
        ps = pod_set()
        ps["template"]["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": RACK}}
        (wl,) = parse([workload("w", pod_sets=[ps])]).workloads
        tr = wl.pod_sets[0].topology_request
        assert tr is not None and tr.preferred == RACK and tr.required is None

    def test_defaults(self):
        raw = workload("w")
        del raw["metadata"]["namespace"]
        del raw["spec"]["podSets"][0]["name"]
        del raw["spec"]["podSets"][0]["count"]
        (wl,) = parse([raw]).workloads
        assert (wl.namespace, wl.pod_sets[0].name, wl.pod_sets[0].count) == ("default", "main", 1)

    def test_cluster_queue_cohort_v1beta1_and_v1beta2(self):
        old = cluster_queue("old", cohort="team", api_version=V1BETA1)
        new = cluster_queue("new", cohort="team")
        assert old["spec"]["cohort"] == "team" and new["spec"]["cohortName"] == "team"
        parsed = parse([old, new]).cluster_queues
        assert [(cq.name, cq.cohort) for cq in parsed] == [("old", "team"), ("new", "team")]
        assert parsed[0].resource_groups == parsed[1].resource_groups

    def test_topology_assignment_v1beta1_domains_and_v1beta2_slices(self):
        v1beta1 = domains_json([BLOCK, RACK], [(["b1", "r1"], 2), (["b1", "r2"], 3)])
        v1beta2 = {"levels": [BLOCK, RACK], "slices": [{
            "domainCount": 2,
            "valuesPerLevel": [{"universal": "b1"}, {"individual": {"prefix": "r", "roots": ["1", "2"]}}],
            "podCounts": {"individual": [2, 3]},
        }]}
        old = admitted(workload("old", count=5, api_version=V1BETA1), assignments={"main": v1beta1})
        new = admitted(workload("new", count=5), assignments={"main": v1beta2})
        mixed = admitted(workload("mixed", count=5), assignments={"main": v1beta1})
        parsed = parse([old, new, mixed]).workloads
        decoded = [wl.admission.pod_set_assignments[0].topology_assignment for wl in parsed]
        assert decoded[0] == decoded[1] == decoded[2]
        assert decoded[0].levels == (BLOCK, RACK)
        assert [(d.values, d.count) for d in decoded[0].domains] == [(("b1", "r1"), 2), (("b1", "r2"), 3)]

    def test_node_readiness_and_flags(self):
        parsed = parse([
            node("ok"),
            node("down", ready="False"),
            node("unknown", ready=None),
            node("cordoned", unschedulable=True),
            node("going", deleted=True),
        ]).nodes
        assert {n.name: n.schedulable_and_ready for n in parsed} == {
            "ok": True, "down": False, "unknown": False, "cordoned": False, "going": False,
        }

    def test_levels_of_the_default_topology(self):
        (parsed,) = parse([topology()]).topologies
        assert parsed.levels == LEVELS
        assert parsed.lowest_is_hostname and parsed.levels[-1] == HOSTNAME


def _mutated(obj: dict, path: tuple, value: object) -> dict:
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("obj", "path", "value", "label", "field"),
    [
        (workload("w"), ("spec", "podSets"), {"main": 1}, "Workload/default/w", "spec.podSets"),
        (workload("w"), ("spec", "podSets", 0, "template", "spec", "containers"), "c", "Workload/default/w",
         "spec.podSets[0].template.spec.containers"),
        (workload("w"), ("spec", "priority"), "high", "Workload/default/w", "spec.priority"),
        (workload("w"), ("metadata", "creationTimestamp"), "yesterday", "Workload/default/w",
         "metadata.creationTimestamp"),
        (workload("w"), ("spec", "podSets", 0, "topologyRequest"), {"required": 5}, "Workload/default/w",
         "spec.podSets[0].topologyRequest.required"),
        (workload("w"), ("spec", "podSets", 0, "topologyRequest"),
         {"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 0}, "Workload/default/w",
         "spec.podSets[0].topologyRequest.podSetSliceSize"),
        (node("x1"), ("metadata", "labels", "zone"), ["a"], "Node/x1", "metadata.labels.zone"),
        (node("x1"), ("status", "allocatable"), ["cpu"], "Node/x1", "status.allocatable"),
        (topology(), ("spec", "levels", 0), BLOCK, "Topology/default", "spec.levels[0]"),
    ],
)
def test_wrong_types_are_located(obj, path, value, label, field):
    assert_located(parse_error(_mutated(obj, path, value)), label, field)


# ---------------------------------------------------------------- PodSets parsed once per template


class TestPodSetsShared:
    """Workloads of one template share their parsed PodSet; anything parsing reads tells
    them apart, and an invalid PodSet is reported as ever, whatever was parsed before."""

    @staticmethod
    def pod_sets(*objects: dict) -> list:
        return [wl.pod_sets[0] for wl in parse(objects).workloads]

    def test_same_template_one_pod_set_other_labels_too(self):
        a, b = workload("a", count=2, cpu="3", required=RACK), workload("b", count=2, cpu="3", required=RACK)
        b["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"job-name": "b", "controller-uid": "u-b"}}
        first, second = self.pod_sets(a, b)
        assert first is second and first.count == 2 and first.spec.requests["cpu"] == 3000

    @pytest.mark.parametrize(("change", "read"), [
        ({"count": 3}, lambda ps: ps.count),
        ({"cpu": "4"}, lambda ps: ps.spec.requests["cpu"]),
        ({"preferred": RACK, "required": None}, lambda ps: ps.topology_request.preferred),
        ({"min_count": 1}, lambda ps: ps.min_count),
    ])
    def test_what_parsing_reads_tells_them_apart(self, change, read):
        base = {"count": 2, "cpu": "3", "required": RACK}
        first, second = self.pod_sets(workload("a", **base), workload("b", **{**base, **change}))
        assert first is not second and read(first) != read(second)

    def test_template_annotations_tell_them_apart(self):
        a, b = workload("a"), workload("b")
        for wl, level in ((a, RACK), (b, BLOCK)):
            wl["spec"]["podSets"][0]["template"]["metadata"] = {
                "annotations": {"kueue.x-k8s.io/podset-required-topology": level}}
        first, second = self.pod_sets(a, b)
        assert (first.topology_request.required, second.topology_request.required) == (RACK, BLOCK)

    def test_an_invalid_copy_of_a_parsed_template_is_still_refused(self):
        good = workload("good", count=2)
        bad = workload("bad", count=2)
        bad["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"zone": ["a"]}
        parse([good])
        assert_located(parse_error(good, bad), "Workload/default/bad",
                       "spec.podSets[0].template.spec.nodeSelector.zone")

    def test_a_template_json_cannot_hold_is_parsed_on_its_own(self):
        wl = workload("odd", count=2)
        wl["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {1: "a"}
        assert_located(parse_error(wl), "Workload/default/odd", "spec.podSets[0].template.spec.nodeSelector")


class TestWorkloadKey:
    def test_the_key_is_namespace_slash_name_and_follows_a_replace(self):
        import dataclasses

        (wl,) = parse([workload("a", namespace="team-a")]).workloads
        assert wl.key == "team-a/a"
        renamed = dataclasses.replace(wl, name="b", namespace="team-b")
        assert renamed.key == "team-b/b" and wl.key == "team-a/a"
        assert dataclasses.replace(wl, priority=7).key == "team-a/a"
        assert renamed != wl and dataclasses.replace(renamed, name="a", namespace="team-a") == wl
