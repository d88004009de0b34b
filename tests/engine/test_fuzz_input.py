"""Bad input is refused with one line naming the file, object and field, never a traceback:
hostile files (deep nesting, huge integers and quantities, endless input, repeated keys),
objects Kueue's validation rejects, and random documents and mutations of a valid cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cli import main
from tests.mutations import documents, mutated, render

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    V1BETA2,
    admission_check,
    admitted,
    cluster_queue,
    domains_json,
    grid,
    local_queue,
    node,
    pod_set,
    resource_flavor,
    taint,
    tas_setup,
    timestamp,
    toleration,
    topology,
    workload,
    workload_pod,
)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def write(path: Path, text: str | bytes) -> str:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def dump(objects: list[dict]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)


def assert_refused(code: int, err: str, *fragments: str) -> None:
    assert code == 1, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


def cohort(name: str, parent: str | None = None) -> dict:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


# ---------------------------------------------------------------- hostile files


@pytest.mark.parametrize("command", ["simulate", "decode", "encode"])
def test_json_nested_100000_levels_is_refused(tmp_path, capsys, command):
    path = write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    assert_refused(*run_cli(capsys, command, path), "deep.json", "nested more than 100 levels")


def test_yaml_nested_100000_levels_is_refused(tmp_path, capsys):
    path = write(tmp_path / "deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert_refused(*run_cli(capsys, "simulate", path), "deep.yaml", "nested more than 100 levels")


def test_nesting_just_past_the_limit_is_refused_after_parsing(tmp_path, capsys):
    doc: Any = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}}
    inner: Any = doc
    for _ in range(100):
        inner["x"] = {}
        inner = inner["x"]
    path = write(tmp_path / "deep.json", json.dumps(doc))
    assert_refused(*run_cli(capsys, "simulate", path), "nested more than 100 levels")


def alias_bomb(levels: int) -> str:
    """A Workload whose unknown field holds 10^levels values in under a kilobyte of YAML."""
    lines = ['a0: &a0 ["x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    wl = dump([workload("bomb", count=1)]).rstrip("\n")
    return wl + "\nbogus:\n" + "\n".join("  " + line for line in lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, capsys):
    import time

    path = write(tmp_path / "bomb.yaml", dump(tas_setup()) + "---\n" + alias_bomb(9))
    started = time.monotonic()
    assert_refused(*run_cli(capsys, "simulate", path), "bomb.yaml", "YAML aliases expand to more than",
                   "excessive aliasing")
    assert time.monotonic() - started < 5


def test_a_yaml_value_that_contains_itself_is_refused(tmp_path, capsys):
    text = dump([workload("loop", count=1)]) + "bogus: &loop\n  again: *loop\n"
    path = write(tmp_path / "loop.yaml", dump(tas_setup()) + "---\n" + text)
    assert_refused(*run_cli(capsys, "simulate", path), "loop.yaml", "refers to a value that contains it")


def test_yaml_aliases_count_their_depth_where_they_are_used(tmp_path, capsys):
    deep: Any = {}
    inner = deep
    for _ in range(60):
        inner["x"] = {}
        inner = inner["x"]
    # 60 levels under an anchor, used 60 levels down: 120 levels once the alias is followed
    text = yaml.safe_dump({"deep": deep}).replace("deep:\n", "deep: &deep\n", 1)
    nest = "\n".join("  " * i + "y:" for i in range(60)) + " *deep\n"
    path = write(tmp_path / "aliased.yaml", text + nest)
    assert_refused(*run_cli(capsys, "simulate", path), "aliased.yaml", "nested more than 100 levels")


def test_yaml_aliases_that_share_a_template_are_read(tmp_path, capsys):
    # anchors hold within one document: the workloads are the items of one List
    template = '{name: main, count: 2, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}'
    pod_sets = [f"&main {template}", "*main", "*main"]
    items = "".join(f"- apiVersion: {V1BETA2}\n  kind: Workload\n  metadata: {{name: w{i}, namespace: default}}\n"
                    f"  spec: {{queueName: lq, podSets: [{p}]}}\n" for i, p in enumerate(pod_sets))
    path = write(tmp_path / "shared.yaml",
                 dump([*tas_setup(), *grid(cpu="4")]) + f"---\napiVersion: v1\nkind: List\nitems:\n{items}")
    code = main(["simulate", path, "--now", "2025-06-01T12:00:00Z", "--cycles", "all"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(w["status"] for w in json.loads(out)["workloads"]) == ["Admitted"] * 3


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_a_5000_digit_pod_count_names_the_field(tmp_path, capsys, suffix):
    wl = workload("train", count=1)
    text = json.dumps([*tas_setup(), wl]).replace('"count": 1', '"count": ' + "9" * 5000)
    if suffix == "yaml":
        text = dump(json.loads(text.replace("9" * 5000, "1"))).replace("count: 1", "count: " + "9" * 5000)
    path = write(tmp_path / f"big.{suffix}", text)
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", "spec.podSets[0].count",
                   "an integer of 5000 digits")


def test_a_100000_digit_quantity_names_the_field(tmp_path, capsys):
    n = node("x1", cpu="9" * 100_000)
    path = write(tmp_path / "big.yaml", dump([n]))
    assert_refused(*run_cli(capsys, "simulate", path), "Node/x1", "status.allocatable.cpu", "too long")


def test_a_5000_digit_count_in_an_assignment_is_refused(tmp_path, capsys):
    text = json.dumps({"levels": [HOSTNAME], "domains": [{"values": ["x1"], "count": 1}]})
    path = write(tmp_path / "ta.json", text.replace('"count": 1', '"count": ' + "9" * 5000))
    assert_refused(*run_cli(capsys, "decode", path), "domains[0].count")


def test_dev_zero_stops_at_the_size_limit(capsys, monkeypatch):
    monkeypatch.setenv("TAS_MAX_INPUT_BYTES", "65536")
    assert_refused(*run_cli(capsys, "simulate", "/dev/zero"), "/dev/zero", "larger than 65,536 bytes",
                   "TAS_MAX_INPUT_BYTES")


def test_a_file_over_the_limit_is_refused_and_one_at_it_is_read(tmp_path, capsys, monkeypatch):
    text = dump(tas_setup())
    path = write(tmp_path / "c.yaml", text)
    monkeypatch.setenv("TAS_MAX_INPUT_BYTES", str(len(text.encode()) - 1))
    assert_refused(*run_cli(capsys, "simulate", path), "larger than")
    monkeypatch.setenv("TAS_MAX_INPUT_BYTES", str(len(text.encode())))
    assert run_cli(capsys, "simulate", path)[0] == 0


@pytest.mark.parametrize("limit", ["lots", "\u00b2", "-1", "0"])
def test_a_bad_size_limit_is_reported(tmp_path, capsys, monkeypatch, limit):
    monkeypatch.setenv("TAS_MAX_INPUT_BYTES", limit)
    assert_refused(*run_cli(capsys, "simulate", write(tmp_path / "c.yaml", dump(tas_setup()))),
                   f"TAS_MAX_INPUT_BYTES={limit!r}")


def test_duplicate_yaml_keys_name_the_key_and_line(tmp_path, capsys):
    text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: {}\n  name: b\n"
    assert_refused(*run_cli(capsys, "simulate", write(tmp_path / "dup.yaml", text)),
                   "dup.yaml", "line 6", "duplicate key 'name'")


def test_duplicate_json_keys_name_the_key_and_file(tmp_path, capsys):
    text = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {}, "name": "b"}}'
    assert_refused(*run_cli(capsys, "simulate", write(tmp_path / "dup.json", text)),
                   "dup.json", "duplicate key 'name'")
    huge = text.replace('"labels": {}', '"n": ' + "9" * 5000)  # the slow path for huge integers checks too
    assert_refused(*run_cli(capsys, "simulate", write(tmp_path / "dup2.json", huge)), "duplicate key 'name'")


def test_yaml_merge_keys_are_not_duplicates(tmp_path, capsys):
    text = ("apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: &l {a: '1'}\n"
            "  annotations:\n    <<: *l\n    a: '2'\n")
    assert run_cli(capsys, "simulate", write(tmp_path / "merge.yaml", text))[0] == 0


# ---------------------------------------------------------------- objects Kueue rejects


def test_a_topology_assignment_of_1000_pods_for_a_pod_set_of_2_is_refused(tmp_path, capsys):
    wl = admitted(workload("train", count=2, cpu="1"),
                  assignments={"main": domains_json([HOSTNAME], [("x1", 1000)])})
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train",
                   "status.admission.podSetAssignments[0].topologyAssignment", "places 1000 pods")


def test_a_topology_assignment_in_another_topologys_levels_is_refused(tmp_path, capsys):
    wl = admitted(workload("train", count=2, cpu="1"),
                  assignments={"main": domains_json(["example.com/zone"], [("z1", 2)])})
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train",
                   "topologyAssignment.levels", "example.com/zone")


def test_an_assignment_at_some_levels_of_its_topology_is_read(tmp_path, capsys):
    wl = admitted(workload("train", count=2, cpu="1", required=RACK),
                  assignments={"main": domains_json([RACK], [("r1", 2)])})
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert run_cli(capsys, "simulate", path)[0] == 0


def test_negative_node_allocatable_is_refused(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", dump([node("x1", cpu="-4")]))
    assert_refused(*run_cli(capsys, "simulate", path), "Node/x1", "status.allocatable.cpu", "negative")


@pytest.mark.parametrize(("label", "value", "field", "reason"), [
    ("rack", "rack 1", "metadata.labels.rack", "'rack 1' is not a valid label value"),
    ("rack", "-r1", "metadata.labels.rack", "'-r1' is not a valid label value"),
    ("rack", "r" * 64, "metadata.labels.rack", "is not a valid label value"),
    ("bad key!", "x", "metadata.labels.bad key!", "'bad key!' is not a valid label key"),
    ("Example.com/rack", "r1", "metadata.labels.Example.com/rack", "is not a valid label key"),
])
def test_a_node_label_the_api_server_refuses_is_refused(tmp_path, capsys, label, value, field, reason):
    n = node("x1", cpu="4")
    n["metadata"].setdefault("labels", {})[label] = value
    path = write(tmp_path / "c.yaml", dump([n]))
    assert_refused(*run_cli(capsys, "simulate", path), "Node/x1", field, reason)


def test_node_labels_the_api_server_takes_are_read(tmp_path, capsys):
    n = node("x1", cpu="4")
    n["metadata"].setdefault("labels", {}).update({"example.com/rack": "r_1.a-b", "empty": "", "x" * 63: "y" * 63})
    path = write(tmp_path / "c.yaml", dump([n]))
    assert run_cli(capsys, "simulate", path)[0] == 0


def _set(obj: dict, path: str, value: object) -> dict:
    """`obj` with the field at dotted `path` (list indexes as numbers) set to `value`."""
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = obj
    for part in parents:
        target = target[part]
    target[last] = value
    return obj


def _cohort_with_quota(cpu: str) -> dict:
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": "pool"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "tas-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}


@pytest.mark.parametrize(("label", "field", "make"), [
    ("ClusterQueue/", "resources[0].nominalQuota",
     lambda: _set(tas_setup()[2], "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota", "-100")),
    ("ClusterQueue/", "resources[0].borrowingLimit",
     lambda: _set(tas_setup()[2], "spec.resourceGroups.0.flavors.0.resources.0.borrowingLimit", "-1")),
    ("ClusterQueue/", "resources[0].lendingLimit",
     lambda: _set(tas_setup()[2], "spec.resourceGroups.0.flavors.0.resources.0.lendingLimit", "-500m")),
    ("Cohort/pool", "resources[0].nominalQuota", lambda: _cohort_with_quota("-1")),
    ("Workload/default/train", "containers[0].resources.requests.cpu", lambda: workload("train", cpu="-100")),
    ("Workload/default/train", "containers[0].resources.limits.cpu",
     lambda: _set(workload("train", cpu="1"), "spec.podSets.0.template.spec.containers.0.resources.limits",
                  {"cpu": "-1"})),
    ("Workload/default/train", "spec.overhead.cpu",
     lambda: _set(workload("train", cpu="1"), "spec.podSets.0.template.spec.overhead", {"cpu": "-1"})),
    ("Workload/default/train", "podSetAssignments[0].resourceUsage.cpu",
     lambda: _set(admitted(workload("train", cpu="1"), assignments={}),
                  "status.admission.podSetAssignments.0.resourceUsage",
                  {"cpu": "-100"})),
])
def test_a_negative_amount_is_refused(tmp_path, capsys, label, field, make):
    """The API server refuses negative requests, limits and overhead, Kueue's webhooks negative
    quotas and usage: such an object would let a workload through with more than its share."""
    objects = [*tas_setup(), *grid(), make()]
    path = write(tmp_path / "c.yaml", dump(objects))
    assert_refused(*run_cli(capsys, "simulate", path), label, field, "must not be negative, got '-")


def _with_spec(kind: str, **spec: object) -> list[dict]:
    """tas_setup() with the spec fields of its object of `kind` set to `spec`."""
    objects = tas_setup()
    next(o for o in objects if o["kind"] == kind)["spec"].update(spec)
    return objects


def _queue(**spec: object) -> list[dict]:
    return _with_spec("ClusterQueue", **spec)


def _quota(*resources: dict, covered: tuple[str, ...] = ("cpu", "memory")) -> list[dict]:
    return [{"coveredResources": list(covered), "flavors": [{"name": "tas-flavor", "resources": list(resources)}]}]


CPU = {"name": "cpu", "nominalQuota": "100"}
MEMORY = {"name": "memory", "nominalQuota": "1Ti"}


@pytest.mark.parametrize(("objects", "label", "field", "message"), [
    (lambda: _queue(resourceGroups=_quota(MEMORY, CPU)), "ClusterQueue/", "flavors[0].resources[0].name",
     "must match the name in coveredResources[0] ('cpu')"),
    (lambda: _queue(resourceGroups=_quota({**CPU, "borrowingLimit": "1"}, MEMORY)), "ClusterQueue/",
     "resources[0].borrowingLimit", "must be nil when cohortName is empty"),
    (lambda: _queue(resourceGroups=_quota({**CPU, "lendingLimit": "1"}, MEMORY)), "ClusterQueue/",
     "resources[0].lendingLimit", "must be nil when cohortName is empty"),
    (lambda: _queue(cohortName="pool", resourceGroups=_quota({**CPU, "lendingLimit": "101"}, MEMORY)),
     "ClusterQueue/", "resources[0].lendingLimit", "must be less than or equal to the nominalQuota (100), got 101"),
    (lambda: [*tas_setup(), _set(_cohort_with_quota("10"), "spec.resourceGroups.0.flavors.0.resources.0.borrowingLimit",
                                 "1")],
     "Cohort/pool", "resources[0].borrowingLimit", "must be nil when parentName is empty"),
    (lambda: _queue(cohortName="Pool_A"), "ClusterQueue/", "spec.cohortName",
     "must be a lowercase RFC 1123 subdomain (a Cohort's name), got 'Pool_A'"),
    (lambda: _queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}), "ClusterQueue/",
     "spec.preemption.borrowWithinCohort.policy", "must be Never when reclaimWithinCohort is Never"),
    (lambda: _queue(admissionChecks=["prov"], admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]}),
     "ClusterQueue/", "spec:", "either admissionChecks or admissionChecksStrategy can be set, but not both"),
])
def test_a_queue_kueues_api_refuses_is_refused(tmp_path, capsys, objects, label, field, message):
    """Kueue's API and webhooks: quotas in the order of coveredResources, no borrowing or
    lending limit without a parent Cohort, lending at most the nominal quota, a Cohort's name,
    no borrowing beyond the cohort without reclaiming, one way to list admission checks."""
    path = write(tmp_path / "c.yaml", dump([*objects(), *grid()]))
    assert_refused(*run_cli(capsys, "simulate", path), label, field, message)


def test_limits_are_read_under_a_cohort(tmp_path, capsys):
    """The same limits, with a parent Cohort to borrow from and lend to, are read."""
    objects = _queue(cohortName="pool", resourceGroups=_quota({**CPU, "borrowingLimit": "1", "lendingLimit": "100"},
                                                              MEMORY))
    path = write(tmp_path / "c.yaml", dump([*objects, *grid(), workload("train")]))
    assert main(["simulate", path, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workloads"][0]["status"] == "Admitted"


def _flavor(**spec: object) -> list[dict]:
    return _with_spec("ResourceFlavor", **spec)


def _tolerating(*tolerations: dict) -> list[dict]:
    wl = workload("train")
    wl["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = list(tolerations)
    return [*tas_setup(), wl]


@pytest.mark.parametrize(("objects", "field", "message"), [
    (lambda: _flavor(nodeLabels={"a b": "x"}), "spec.nodeLabels.a b", "'a b' is not a valid label key"),
    (lambda: _flavor(nodeLabels={"pool": "x y"}), "spec.nodeLabels.pool", "'x y' is not a valid label value"),
    (lambda: _flavor(nodeLabels={f"l{i}": "v" for i in range(9)}), "spec.nodeLabels",
     "must have at most 8 entries, got 9"),
    (lambda: _flavor(nodeTaints=[{"key": "spot", "value": "true"}]), "spec.nodeTaints[0].effect", "is required"),
    (lambda: _flavor(nodeTaints=True), "spec.nodeTaints", "must be a list, got"),
    (lambda: _flavor(tolerations=1.5), "spec.tolerations", "must be a list, got"),
    (lambda: _flavor(nodeTaints=[{"key": f"k{i}", "effect": "NoSchedule"} for i in range(9)]), "spec.nodeTaints",
     "must have at most 8 entries, got 9"),
    (lambda: _flavor(nodeTaints=[{"key": "a b", "effect": "NoSchedule"}]), "spec.nodeTaints[0].key",
     "is not a valid label key"),
    (lambda: _flavor(tolerations=[{"key": "spot", "operator": "Gt", "value": "1"}]), "spec.tolerations[0].operator",
     "must be one of Equal, Exists, got 'Gt'"),
    (lambda: _flavor(topologyName="Default"), "spec.topologyName",
     "must be a lowercase RFC 1123 subdomain (a Topology's name), got 'Default'"),
    (lambda: _tolerating({"key": "spot", "operator": "Exists", "value": "true"}),
     "spec.podSets[0].template.spec.tolerations[0].value", "must be empty when operator is Exists, got 'true'"),
    (lambda: _tolerating({"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}),
     "spec.podSets[0].template.spec.tolerations[0].effect",
     "must be NoExecute when tolerationSeconds is set, got NoSchedule"),
    (lambda: _tolerating({"key": "spot", "value": "x y"}), "spec.podSets[0].template.spec.tolerations[0].value",
     "is not a valid label value"),
    (lambda: _tolerating({"key": "spot", "operator": "Exists", "effect": "Never"}),
     "spec.podSets[0].template.spec.tolerations[0].effect", "must be one of"),
])
def test_taints_tolerations_and_flavors_the_api_refuses_are_refused(tmp_path, capsys, objects, field, message):
    """The API server's checks of taints and tolerations (labels, an effect, no value beside
    Exists, tolerationSeconds for NoExecute only) and Kueue's of a ResourceFlavor (at most 8
    node labels, taints and tolerations; tolerations Equal or Exists; a Topology's name)."""
    path = write(tmp_path / "c.yaml", dump([*objects(), *grid()]))
    assert_refused(*run_cli(capsys, "simulate", path), field, message)


@pytest.mark.parametrize(("objects", "field", "message"), [
    (lambda: [*_with_spec("LocalQueue", clusterQueue="Team_Q"), workload("train")],
     "LocalQueue/default/lq: spec.clusterQueue",
     "must be a lowercase RFC 1123 subdomain (a ClusterQueue's name), got 'Team_Q'"),
    (lambda: [*tas_setup(), _set(workload("train"), "spec.queueName", "Team_Q")], "spec.queueName",
     "(a LocalQueue's name), got 'Team_Q'"),
    (lambda: [*tas_setup(), _set(workload("train"), "spec.priorityClassName", "High")], "spec.priorityClassName",
     "(a priority class's name), got 'High'"),
])
def test_a_reference_that_is_not_an_object_name_is_refused(tmp_path, capsys, objects, field, message):
    """Kueue's API: the names a LocalQueue and a Workload refer to are object names; such a
    reference could never find its object, and the workload would wait without saying why."""
    path = write(tmp_path / "c.yaml", dump([*objects(), *grid()]))
    assert_refused(*run_cli(capsys, "simulate", path), field, message)


def _layers(*layers: tuple[str, int]) -> list[dict]:
    return [{"topology": level, "size": size} for level, size in layers]


@pytest.mark.parametrize(("request_", "count", "field", "message"), [
    ({"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 5}, 4,
     "topologyRequest.podSetSliceSize", "must not exceed the PodSet's count 4, got 5"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 5))}, 4,
     "podsetSliceRequiredTopologyConstraints[0].size", "must not exceed the PodSet's count 4, got 5"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 3), (HOSTNAME, 1))}, 4,
     "podsetSliceRequiredTopologyConstraints[0].size",
     "must evenly divide the PodSet's count 4 when more than one layer is specified, got 3"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 4), (HOSTNAME, 3))}, 8,
     "podsetSliceRequiredTopologyConstraints[1].size", "must evenly divide the size 4 of the layer above, got 3"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4},
                                                                     {"topology": HOSTNAME}]}, 8,
     "podsetSliceRequiredTopologyConstraints[1].size", "is required"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": [{"topology": RACK}]}, 8,
     "podsetSliceRequiredTopologyConstraints[0].size", "is required"),
    ({"required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 4), (RACK, 2))}, 8,
     "podsetSliceRequiredTopologyConstraints[1].topology", "named by an earlier constraint"),
    ({"required": BLOCK, "podSetSliceSize": 2, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 2))}, 4,
     "topologyRequest.podsetSliceRequiredTopologyConstraints", "cannot be combined with"),
])
def test_slices_that_do_not_divide_the_pod_set_are_refused(tmp_path, capsys, request_, count, field, message):
    """KEP-2724 with TASPartialSlices (Kueue v0.19.6): a slice holds at most the PodSet; only a
    single layer may leave a partial last slice, so with more layers the coarsest divides the
    PodSet and each layer the layer above."""
    wl = workload("train", count=count, raw_topology_request=request_)
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", field, message)


def test_a_leaders_slice_request_is_not_checked_against_its_one_pod(tmp_path, capsys):
    """A leader-and-workers group carries one request on both templates; the leader is placed
    as one pod beside the workers' slices, so only the workers' count is checked against it."""
    request = {"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 2, "podSetGroupName": "g"}
    wl = workload("train", pod_sets=[pod_set("leader", count=1, raw_topology_request=request),
                                     pod_set("workers", count=4, raw_topology_request=request)])
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert main(["simulate", path, "-o", "json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["workloads"]
    assert result["status"] == "Admitted"
    workers = pod_set("workers", count=3, min_count=1, raw_topology_request=request)
    wl = workload("train", pod_sets=[pod_set("leader", count=1, raw_topology_request=request), workers])
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "spec.podSets[1].topologyRequest.podSetSliceSize",
                   "must evenly divide the PodSet's count 3 when the PodSet sets minCount, got 2")


@pytest.mark.parametrize(("pod_sets", "field", "message"), [
    ([("leader", 1, {"required": BLOCK})], "spec.podSets[0].topologyRequest.podSetGroupName",
     "group 'g' can only hold exactly 2 PodSets (a leader and its workers), got 1"),
    ([("leader", 1, {"required": BLOCK}), ("a", 2, {"required": BLOCK}), ("b", 2, {"required": BLOCK})],
     "spec.podSets[0].topologyRequest.podSetGroupName", "got 3"),
    ([("leader", 2, {"required": BLOCK}), ("workers", 4, {"required": BLOCK})],
     "spec.podSets[0].topologyRequest.podSetGroupName",
     "group 'g' needs one PodSet of a single pod (its leader), got 'leader' with 2 pods and 'workers' with 4"),
    ([("leader", 1, {"required": RACK}), ("workers", 4, {"required": BLOCK})], "spec.podSets[1].topologyRequest",
     "PodSet 'workers' must ask for the same required or preferred topology as 'leader' in group 'g': "
     f"required {BLOCK!r} against required {RACK!r}"),
    ([("leader", 1, {"preferred": BLOCK}), ("workers", 4, {"required": BLOCK})], "spec.podSets[1].topologyRequest",
     f"required {BLOCK!r} against preferred {BLOCK!r}"),
    ([("leader", 1, {}), ("workers", 4, {"required": BLOCK})], "spec.podSets[1].topologyRequest",
     f"required {BLOCK!r} against no level"),
])
def test_a_pod_set_group_kueue_refuses_is_refused(tmp_path, capsys, pod_sets, field, message):
    """Kueue's job webhooks refuse such groups. A group is placed as one leader pod beside its
    workers, by the workers' request, so the engine would admit a leader of 2 pods with room
    for 1, place a third PodSet on its own, or ignore the leader's level."""
    wl = workload("train", pod_sets=[
        pod_set(name, count=count, raw_topology_request={**request, "podSetGroupName": "g"})
        for name, count, request in pod_sets])
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", field, message)


def test_a_pod_set_group_in_annotations_is_refused_where_it_is_written(tmp_path, capsys):
    annotations = {"kueue.x-k8s.io/podset-required-topology": BLOCK, "kueue.x-k8s.io/podset-group-name": "g"}
    wl = workload("train", pod_sets=[pod_set("leader", count=2), pod_set("workers", count=2)])
    for ps in wl["spec"]["podSets"]:
        ps["template"]["metadata"] = {"annotations": dict(annotations)}
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path),
                   "spec.podSets[0].template.metadata.annotations.kueue.x-k8s.io/podset-group-name",
                   "needs one PodSet of a single pod")


def test_a_group_of_two_single_pods_and_a_group_without_levels_are_read(tmp_path, capsys):
    """Kueue's own Workloads carry groups that name no level (its ungater's tests do), and a
    leader of one pod beside one worker is still a leader and its workers."""
    groups = [[pod_set("leader", count=1, raw_topology_request={"podSetGroupName": "g"}),
               pod_set("workers", count=3, raw_topology_request={"podSetGroupName": "g"})],
              [pod_set("leader", count=1, raw_topology_request={"required": BLOCK, "podSetGroupName": "g"}),
               pod_set("workers", count=1, raw_topology_request={"required": BLOCK, "podSetGroupName": "g"})]]
    for pod_sets in groups:
        path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), workload("train", pod_sets=pod_sets)]))
        assert main(["simulate", path, "-o", "json"]) == 0
        [result] = json.loads(capsys.readouterr().out)["workloads"]
        assert result["status"] == "Admitted"


def test_a_slice_size_annotation_larger_than_the_pod_set_is_refused_where_it_is_written(tmp_path, capsys):
    wl = workload("train", count=4)
    wl["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": {
        "kueue.x-k8s.io/podset-required-topology": BLOCK,
        "kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "6"}}
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path),
                   "spec.podSets[0].template.metadata.annotations.kueue.x-k8s.io/podset-slice-size",
                   "must not exceed the PodSet's count 4, got 6")


REQUIRED_A = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_A = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_A = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_A = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE_A = "kueue.x-k8s.io/podset-slice-size"
GROUP_A = "kueue.x-k8s.io/podset-group-name"
LAYERS_A = "kueue.x-k8s.io/podset-slice-required-topology-constraints"


def annotated(count: int, annotations: dict[str, str]) -> dict:
    wl = workload("train", count=count)
    wl["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": annotations}
    return wl


@pytest.mark.parametrize(("annotations", "key", "message"), [
    ({REQUIRED_A: BLOCK, UNCONSTRAINED_A: "true"}, "", f"must hold at most one of {REQUIRED_A}, {PREFERRED_A} "
     f"and {UNCONSTRAINED_A}; got {REQUIRED_A}, {UNCONSTRAINED_A}"),
    ({REQUIRED_A: "not a label!"}, REQUIRED_A, "'not a label!' is not a valid label key"),
    ({UNCONSTRAINED_A: "maybe"}, UNCONSTRAINED_A, "must be a boolean value (true or false), got 'maybe'"),
    ({UNCONSTRAINED_A: ""}, UNCONSTRAINED_A, "must be a boolean value (true or false), got ''"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK, SIZE_A: "two"}, SIZE_A, "must be a numeric value (an int32), got 'two'"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK, SIZE_A: "4294967296"}, SIZE_A, "must be a numeric value (an int32)"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK, SIZE_A: "0"}, SIZE_A, "must be greater than or equal to 1, got 0"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK}, SIZE_A, f"must be set when {SLICE_A} is set"),
    ({REQUIRED_A: BLOCK, SIZE_A: "2"}, SIZE_A, f"may not be set when {SLICE_A} is not set"),
    ({SIZE_A: "2"}, SIZE_A, f"may not be set when {SLICE_A} is not set"),
    ({REQUIRED_A: BLOCK, GROUP_A: "1234"}, GROUP_A, "must not be a number, got '1234'"),
    ({GROUP_A: "g"}, GROUP_A, f"may not be set when neither {PREFERRED_A} nor {REQUIRED_A} is set"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK, SIZE_A: "2", GROUP_A: "g"}, GROUP_A, f"may not be set when {SIZE_A} is set"),
    ({REQUIRED_A: BLOCK, LAYERS_A: "[{"}, LAYERS_A, 'must be a JSON list of {"topology": LEVEL, "size": PODS}'),
    ({REQUIRED_A: BLOCK, LAYERS_A: "{}"}, LAYERS_A, "must be a JSON list of layers, got a mapping"),
    ({REQUIRED_A: BLOCK, LAYERS_A: "[]"}, LAYERS_A, "must list 1 to 3 layers, got 0"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK, "size": 1}] * 4)}, LAYERS_A,
     "must list 1 to 3 layers, got 4"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK}])}, f"{LAYERS_A}[0].size", "is required"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK, "size": 0}])}, f"{LAYERS_A}[0].size",
     "must be >= 1, got 0"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": "a b", "size": 1}])}, f"{LAYERS_A}[0].topology",
     "is not a valid label key"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK, "size": 2}, {"topology": RACK, "size": 1}])},
     f"{LAYERS_A}[1].topology", "is named by an earlier constraint"),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK, "size": 4}, {"topology": HOSTNAME, "size": 3}])},
     f"{LAYERS_A}[1].size", "must evenly divide the size 4 of the layer above, got 3"),
    ({REQUIRED_A: BLOCK, SLICE_A: RACK, SIZE_A: "2", LAYERS_A: json.dumps([{"topology": RACK, "size": 2}])}, LAYERS_A,
     f"may not be set when {SLICE_A} is set"),
    ({REQUIRED_A: BLOCK, GROUP_A: "g", LAYERS_A: json.dumps([{"topology": RACK, "size": 2}])}, GROUP_A,
     f"may not be set when {LAYERS_A} is set"),
])
def test_topology_annotations_kueue_refuses_are_refused_at_the_annotation(tmp_path, capsys, annotations, key, message):
    """Kueue's job webhooks check a pod template's topology annotations before they become a
    topologyRequest; the error names the annotation, not a topologyRequest field it has not."""
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), annotated(8, annotations)]))
    field = "spec.podSets[0].template.metadata.annotations" + (f".{key}" if key else ":")
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", field, message)


@pytest.mark.parametrize(("annotations", "request_"), [
    ({UNCONSTRAINED_A: "True"}, {"unconstrained": True}),
    ({UNCONSTRAINED_A: "1"}, {"unconstrained": True}),
    ({REQUIRED_A: BLOCK, LAYERS_A: json.dumps([{"topology": RACK, "size": 4}, {"topology": HOSTNAME, "size": 2}])},
     {"required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 4), (HOSTNAME, 2))}),
])
def test_topology_annotations_kueue_reads_are_placed_as_their_topology_request(tmp_path, capsys, annotations,
                                                                                request_):
    """Go's booleans (True, 1) for the unconstrained annotation, and the multi-layer slice
    annotation, are read as the job integrations write them into the topologyRequest."""
    placed = []
    for wl in (annotated(8, annotations), workload("train", count=8, raw_topology_request=request_)):
        path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(nodes=4), wl]))
        assert main(["simulate", path, "-o", "json"]) == 0
        [result] = json.loads(capsys.readouterr().out)["workloads"]
        assert result["status"] == "Admitted"
        placed.append(result["podSets"])
    assert placed[0] == placed[1]
    assert sum(d["count"] for d in placed[0][0]["domains"]) == 8


def _with_pods_request(wl: dict, containers: str) -> dict:
    spec = wl["spec"]["podSets"][0]["template"]["spec"]
    spec.setdefault(containers, [{"name": "init", "resources": {}}])
    spec[containers][0]["resources"]["requests"] = {"cpu": "1", "pods": "1"}
    return wl


@pytest.mark.parametrize(("make", "field", "message"), [
    (lambda: workload("train", pod_sets=[pod_set("a", count=2, min_count=1), pod_set("b", count=2, min_count=1)]),
     "spec.podSets", "at most one PodSet can use minCount, got 2: 'a', 'b'"),
    (lambda: _with_pods_request(workload("train"), "containers"),
     "spec.podSets[0].template.spec.containers[0].resources.requests.pods", "the key is reserved for Kueue's own use"),
    (lambda: _with_pods_request(workload("train"), "initContainers"),
     "spec.podSets[0].template.spec.initContainers[0].resources.requests.pods", "the key is reserved"),
    (lambda: _set(workload("train"), "status", {"admissionChecks": [
        {"name": "prov", "state": "Ready", "podSetUpdates": [{"name": "main"}, {"name": "workers"}]}]}),
     "status.admissionChecks[0].podSetUpdates[1].name", "names no PodSet of the workload: 'workers' (PodSets: 'main')"),
])
def test_a_workload_kueues_webhook_refuses_is_refused(tmp_path, capsys, make, field, message):
    """Kueue's Workload webhook: partial admission shrinks one PodSet only, `pods` is the
    resource Kueue counts itself, and an admission check's update of no PodSet would be lost."""
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), make()]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", field, message)


def test_slices_that_divide_the_pod_set_are_placed_whole(tmp_path, capsys):
    wl = workload("train", count=8, raw_topology_request={
        "required": BLOCK, "podsetSliceRequiredTopologyConstraints": _layers((RACK, 4), (HOSTNAME, 2))})
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(nodes=4), wl]))
    assert main(["simulate", path, "-o", "json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["workloads"]
    assert result["status"] == "Admitted"
    assert sum(d["count"] for d in result["podSets"][0]["domains"]) == 8


def test_an_object_given_twice_is_refused(tmp_path, capsys):
    """A second copy would silently replace the first (the later one of two Topologies, say)."""
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), workload("train")]))
    assert_refused(*run_cli(capsys, "simulate", path, path), "Topology/", "appears twice", f"first in {path}")
    other = write(tmp_path / "d.yaml", dump([workload("train", count=2)]))
    assert_refused(*run_cli(capsys, "simulate", path, other), f"{other}: Workload/default/train", "appears twice")


def test_objects_of_one_name_in_two_namespaces_are_two_objects(tmp_path, capsys):
    second = workload("train", namespace="other")
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), workload("train"), second]))
    assert run_cli(capsys, "simulate", path)[0] == 0


@pytest.mark.parametrize(("names", "index", "message"), [
    (["main", "main"], 1, "PodSet 'main' is assigned twice"),
    (["workers"], 0, "names no PodSet of the workload ('main'): 'workers'"),
])
def test_an_admission_that_does_not_match_the_pod_sets_is_refused(tmp_path, capsys, names, index, message):
    wl = admitted(workload("train", cpu="1"), assignments={})
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    wl["status"]["admission"]["podSetAssignments"] = [{**psa, "name": name} for name in names]
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train",
                   f"status.admission.podSetAssignments[{index}].name", message)


def _cq_with(path: str, value: object) -> dict:
    return _set(tas_setup()[2], path, value)


def _second_group(covered: list[str], flavor: str) -> dict:
    cq = tas_setup()[2]
    cq["spec"]["resourceGroups"].append({"coveredResources": covered, "flavors": [
        {"name": flavor, "resources": [{"name": r, "nominalQuota": "1"} for r in covered]}]})
    return cq


@pytest.mark.parametrize(("make", "field", "message"), [
    (lambda: _cq_with("spec.queueingStrategy", "Bogus"), "spec.queueingStrategy",
     "must be one of BestEffortFIFO, StrictFIFO, got 'Bogus'"),
    (lambda: _cq_with("spec.stopPolicy", "Bogus"), "spec.stopPolicy", "must be one of None, Hold, HoldAndDrain"),
    (lambda: _cq_with("spec.admissionChecks", [None]), "spec.admissionChecks[0]", "must be an AdmissionCheck's name"),
    (lambda: _cq_with("spec.namespaceSelector", "abc"), "spec.namespaceSelector", "must be a mapping"),
    (lambda: _cq_with("spec.resourceGroups.0.coveredResources", ["cpu", "memory", "cpu"]),
     "resourceGroups[0].coveredResources[2]", "resource 'cpu' is listed twice"),
    (lambda: _cq_with("spec.resourceGroups.0.coveredResources", ["cpu", "memory", "example.com/gpu"]),
     "resourceGroups[0].flavors[0].resources", "has no quota for 'example.com/gpu'"),
    (lambda: _cq_with("spec.resourceGroups.0.flavors.0.resources.1.name", "cpu"),
     "resourceGroups[0].flavors[0].resources[1].name", "resource 'cpu' is listed twice"),
    (lambda: _second_group(["example.com/gpu"], "tas-flavor"), "resourceGroups[1].flavors[0].name",
     "flavor 'tas-flavor' is listed twice"),
    (lambda: _second_group(["cpu"], "other-flavor"), "resourceGroups[1].coveredResources[0]",
     "covered by another resource group"),
])
def test_a_cluster_queue_kueue_would_refuse_is_refused(tmp_path, capsys, make, field, message):
    setup = tas_setup()
    setup[2] = make()
    path = write(tmp_path / "c.yaml", dump([*setup, *grid(), workload("train")]))
    assert_refused(*run_cli(capsys, "simulate", path), "ClusterQueue/", field, message)


@pytest.mark.parametrize(("make", "field", "message"), [
    (lambda: workload("Train_1"), "metadata.name", "must be a lowercase RFC 1123 subdomain"),
    (lambda: workload("x" * 10_000), "metadata.name", "(10000 characters)"),
    (lambda: workload("train", namespace="../../x"), "metadata.namespace", "must be a lowercase RFC 1123 label"),
    (lambda: workload("train", namespace="a.b"), "metadata.namespace", "got 'a.b'"),
    (lambda: node("node one"), "metadata.name", "got 'node one'"),
    (lambda: workload("train", required="example.com/rack\n"), "topologyRequest.required",
     "is not a valid label key"),
])
def test_names_the_api_server_would_refuse_are_refused(tmp_path, capsys, make, field, message):
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), make()]))
    assert_refused(*run_cli(capsys, "simulate", path), field, message)


@pytest.mark.parametrize(("entry", "shown"), [(5, "5"), (None, "None"), ([1], "[1]"), ("", "''")])
def test_an_unhealthy_node_that_names_no_node_is_refused(tmp_path, capsys, entry, shown):
    """It was read as a node named '5' or 'None', and the workload evicted for it."""
    wl = admitted(workload("train", cpu="1"), assignments={})
    wl["status"]["unhealthyNodes"] = [{"name": "b1-r1-n1"}, entry]
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), *grid(), wl]))
    assert_refused(*run_cli(capsys, "simulate", path), "Workload/default/train", "status.unhealthyNodes[1]",
                   f"got {shown}")


@pytest.mark.parametrize("count", [10**30, 2**31])
def test_a_pod_set_count_over_int32_is_refused(tmp_path, capsys, count):
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), workload("train", count=count)]))
    assert_refused(*run_cli(capsys, "simulate", path), "spec.podSets[0].count", "at most 2147483647")


def test_a_pod_set_count_of_int32_max_is_read(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), workload("train", count=2**31 - 1)]))
    assert run_cli(capsys, "simulate", path)[0] == 0


def test_a_priority_over_int32_is_refused(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", dump([*tas_setup(), workload("train", priority=2**40)]))
    assert_refused(*run_cli(capsys, "simulate", path), "spec.priority")


# ---------------------------------------------------------------- fuzzing


def _valid_cluster() -> list[dict]:
    wl = admitted(workload("held", count=2, cpu="1"), assignments={"main": domains_json([HOSTNAME], [("x1", 2)])})
    return [*tas_setup(), *grid(1, 1, 2), wl, workload("waiting", count=2, cpu="1", required=RACK)]


VALID = _valid_cluster()


def _rich_cluster() -> list[dict]:
    """A cluster that sets most of the fields the engine reads: a tainted flavor and its
    tolerations, a Cohort, a ClusterQueue with preemption, fair sharing, admission fair sharing
    and an admission check, a LocalQueue with its usage status, a priority class, a NotReady
    and a tainted node, an admitted workload with its pods, multi-layer slices, a PodSet group
    and a partial admission."""
    spot = taint("spot", "true")
    flavor = resource_flavor(node_taints=[spot], tolerations=[toleration("spot", "true", effect="NoSchedule")])
    cq = cluster_queue(cohort="org", admission_checks=["prov"])
    cq["spec"].update(preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                  "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
                      fairSharing={"weight": "2"}, queueingStrategy="StrictFIFO",
                      admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    lq = local_queue()
    lq["spec"]["fairSharing"] = {"weight": "1"}
    lq["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "1500m"}, "lastUpdate": timestamp(-30)}}}
    nodes = grid(1, 2, 2)
    nodes[0]["status"]["conditions"][0].update(status="False", lastTransitionTime=timestamp(-10))
    nodes[1]["spec"]["taints"] = [taint("maintenance", effect="NoExecute", time_added=-5)]
    held = admitted(workload("held", count=2, cpu="1", required=RACK),
                    assignments={"main": domains_json([HOSTNAME], [("x1", 1), ("x2", 1)])})
    sliced = workload("sliced", count=4, cpu="1", raw_topology_request={
        "required": BLOCK, "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 2},
                                                                      {"topology": HOSTNAME, "size": 1}]})
    sliced["spec"]["priorityClassName"] = "high"
    group = workload("group", pod_sets=[pod_set("leader", count=1, required=RACK, group="g"),
                                        pod_set("workers", count=3, required=RACK, group="g", min_count=2)])
    return [
        topology(), flavor, {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        cq, lq, admission_check("prov"),
        {"apiVersion": V1BETA2, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
        *nodes, held, workload_pod("held-0", "held", node="x1"), workload_pod("held-1", "held", node="x2"),
        sliced, group, workload("small", cpu="500m", unconstrained=True, priority=5),
    ]


RICH = _rich_cluster()

def check_cli_run(capsys: pytest.CaptureFixture[str], *argv: str) -> None:
    """`main(argv)` returns 0, 1 or 2 and, failing, prints a single error line (besides
    one-line warnings about objects it skips)."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code in (0, 1, 2), code
    if code != 0:
        lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
        assert len(lines) == 1 and lines[0].startswith("error: "), err


# more examples for a longer hunt: TAS_FUZZ_EXAMPLES=5000
FUZZ = settings(max_examples=int(os.environ.get("TAS_FUZZ_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(doc=documents, as_yaml=st.booleans(), command=st.sampled_from(["simulate", "decode", "encode"]))
def test_random_documents_never_crash_the_cli(tmp_path, capsys, doc, as_yaml, command):
    check_cli_run(capsys, command, write(tmp_path / "doc.txt", render(doc, as_yaml)))


@FUZZ
@given(data=st.data(), as_yaml=st.booleans(), rich=st.booleans())
def test_mutated_clusters_never_crash_the_cli(tmp_path, capsys, data, as_yaml, rich):
    cluster = mutated(data, RICH if rich else VALID)
    check_cli_run(capsys, "simulate", write(tmp_path / "cluster.txt", render(cluster, as_yaml)))


def test_the_rich_cluster_is_read_and_scheduled(tmp_path, capsys):
    """The mutations start from a cluster the engine takes: each one tests the field it breaks."""
    code = main(["simulate", write(tmp_path / "rich.yaml", dump(RICH)), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {w["name"] for w in out["workloads"]} >= {"held", "sliced", "group", "small"}


@FUZZ
@given(blob=st.binary(max_size=300), command=st.sampled_from(["simulate", "decode", "encode"]))
def test_random_bytes_never_crash_the_cli(tmp_path, capsys, blob, command):
    check_cli_run(capsys, command, write(tmp_path / "blob.bin", blob))


@FUZZ
@given(data=st.data())
def test_truncated_and_spliced_cluster_files_never_crash_the_cli(tmp_path, capsys, data):
    text = dump(VALID) if data.draw(st.booleans()) else json.dumps(VALID)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    insert = data.draw(st.sampled_from(["", "[", "{", ":", "- ", "\t", "&a ", "*a", "!!python/object ", "\x00",
                                        "9" * 5000, "key: 1\nkey: 2\n"]))
    check_cli_run(capsys, "simulate", write(tmp_path / "cluster.txt", text[:cut] + insert + text[cut:]))


@FUZZ
@given(doc=documents, as_yaml=st.booleans())
def test_random_configurations_never_crash_the_cli(tmp_path, capsys, doc, as_yaml):
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "x": doc}
    if isinstance(doc, dict):
        config.update(doc)
    cluster = write(tmp_path / "cluster.yaml", dump(VALID))
    check_cli_run(capsys, "simulate", cluster, "--config", write(tmp_path / "config.txt", render(config, as_yaml)))


def test_running_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    def exhausted(path: str) -> list:
        raise MemoryError

    monkeypatch.setattr("scheduler.loader.read_objects", exhausted)
    assert_refused(*run_cli(capsys, "simulate", write(tmp_path / "c.yaml", "")), "out of memory")
