"""`python -m scheduler simulate` per the CLI contract: output formats, bad input, bad flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.output import human_duration, humanize_wait_times, json_text

from .factories import (
    HOSTNAME,
    RACK,
    admitted,
    cluster_queue,
    domains_json,
    grid,
    local_queue,
    pod_set,
    resource_flavor,
    tas_setup,
    topology,
    workload,
)

ROOT = Path(__file__).resolve().parents[2]


def write_yaml(path: Path, objects: list[dict]) -> str:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return str(path)


@pytest.fixture
def cluster_file(tmp_path: Path) -> str:
    return write_yaml(tmp_path / "cluster.yaml", tas_setup() + grid(cpu="4"))


def workloads_file(tmp_path: Path, *objects: dict, name: str = "workloads.yaml") -> str:
    return write_yaml(tmp_path / name, list(objects))


def simulate(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, *parts: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    for part in parts:
        assert part in lines[0], (part, lines[0])


class TestJSON:
    def test_every_workload_with_its_assignment(self, capsys, tmp_path, cluster_file):
        running = admitted(workload("running", count=2, cpu="1"),
                           assignments={"main": domains_json([HOSTNAME], [("b2-r2-n2", 2)])})
        wl_file = workloads_file(
            tmp_path,
            running,
            workload("train", count=6, required=RACK),
            workload("huge", count=100, required=RACK),
            workload("lost", queue="nowhere"),
        )
        code, out, err = simulate(capsys, cluster_file, wl_file, "--now", "2025-06-01T12:00:00Z", "--cycles", "all")
        assert code == 0, err
        data = json.loads(out)
        assert set(data) >= {"workloads", "pods", "events"}
        by_name = {w["name"]: w for w in data["workloads"]}
        assert sorted(by_name) == ["huge", "lost", "running", "train"]

        train = by_name["train"]
        assert (train["namespace"], train["clusterQueue"], train["status"]) == ("default", "cq", "Admitted")
        (ps,) = train["podSets"]
        assert ps["name"] == "main" and ps["count"] == 6 and ps["flavors"] == {"cpu": "tas-flavor"}
        assert ps["levels"] == [HOSTNAME]
        # the running workload left exactly 6 free in rack b2/r2: the tightest fit
        assert ps["domains"] == [{"values": ["b2-r2-n1"], "count": 4}, {"values": ["b2-r2-n2"], "count": 2}]
        encoded = ps["topologyAssignment"]
        assert encoded["levels"] == [HOSTNAME]
        assert sum(s["domainCount"] for s in encoded["slices"]) == 2
        assert ps["delayedTopologyRequest"] is None
        assert [c["type"] for c in train["conditions"]] == ["QuotaReserved", "Admitted"]

        huge = by_name["huge"]
        assert huge["status"] in ("Pending", "Inadmissible")
        assert huge["podSets"][0]["topologyAssignment"] is None
        assert "allows to fit only 8 out of 100 pod(s)" in huge["podSets"][0]["failureReason"]
        assert huge["message"].startswith("couldn't assign flavors to pod set main: ")

        assert by_name["lost"]["status"] == "Inadmissible"
        assert by_name["running"]["status"] == "Admitted"
        assert by_name["running"]["podSets"][0]["domains"] == [{"values": ["b2-r2-n2"], "count": 2}]

        keys = [(e["key"], e["reason"]) for e in data["events"]]
        assert ("default/train", "QuotaReserved") in keys and ("default/train", "Admitted") in keys

    def test_the_text_is_the_json_modules_indented_text(self, capsys, tmp_path, cluster_file):
        """The JSON written is byte for byte what json.dumps(..., indent=2) gives for it, also
        where the quick writer cannot give it (a character beyond ASCII, an integer beyond 64 bits)."""
        wl_file = workloads_file(tmp_path, workload("train", count=6, required=RACK),
                                 workload("lost", queue="nowhere"), workload("huge", count=100))
        code, out, err = simulate(capsys, cluster_file, wl_file, "--now", "2025-06-01T12:00:00Z", "--cycles", "all")
        assert code == 0, err
        assert out == json.dumps(json.loads(out), indent=2) + "\n"
        assert len(out.splitlines()) > 100
        for data in ({"a": [1, {"b": None, "c": True}], "d": "x\"y\n", "e": [], "f": {}}, {"big": 2**70},
                     {"name": "caf\u00e9 \u2026"}, [], 0.5):
            assert json_text(data) == json.dumps(data, indent=2) + "\n"
        assert json.loads(json_text({"small": 1e-5})) == {"small": 1e-5}

    def test_json_list_and_kind_list_inputs(self, capsys, tmp_path):
        as_array = tmp_path / "array.json"
        as_array.write_text(json.dumps(tas_setup()), encoding="utf-8")
        as_list = tmp_path / "list.json"
        as_list.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                       "items": [*grid(blocks=1, racks=1, nodes=1, cpu="2"),
                                                 workload("w", count=2, required=RACK)]}), encoding="utf-8")
        code, out, _ = simulate(capsys, str(as_array), str(as_list))
        assert code == 0
        (wl,) = json.loads(out)["workloads"]
        assert wl["podSets"][0]["domains"] == [{"values": ["b1-r1-n1"], "count": 2}]

    def test_two_pod_sets(self, capsys, tmp_path, cluster_file):
        wl = workload("pair", pod_sets=[pod_set("a", count=4, required=HOSTNAME),
                                        pod_set("b", count=4, required=HOSTNAME)])
        code, out, _ = simulate(capsys, cluster_file, workloads_file(tmp_path, wl))
        assert code == 0
        (result,) = json.loads(out)["workloads"]
        assert [ps["domains"] for ps in result["podSets"]] == [
            [{"values": ["b1-r1-n1"], "count": 4}],
            [{"values": ["b1-r1-n2"], "count": 4}],
        ]

    def test_yaml_output(self, capsys, tmp_path, cluster_file):
        code, out, _ = simulate(capsys, cluster_file, workloads_file(tmp_path, workload("w", count=3, required=RACK)),
                                "-o", "yaml")
        assert code == 0
        data = yaml.safe_load(out)
        (wl,) = data["workloads"]
        assert wl["status"] == "Admitted"
        assert wl["podSets"][0]["domains"] == [{"values": ["b1-r1-n1"], "count": 3}]

    def test_table_output(self, capsys, tmp_path, cluster_file):
        wl_file = workloads_file(tmp_path, workload("train", count=6, required=RACK),
                                 workload("huge", count=100, required=RACK))
        code, out, _ = simulate(capsys, cluster_file, wl_file, "-o", "table", "--cycles", "all")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split() == ["WORKLOAD", "CLUSTERQUEUE", "STATUS", "PODSET", "PODS", "DOMAINS", "/", "REASON"]
        train = next(line for line in lines if line.startswith("default/train"))
        assert "Admitted" in train and "b1-r1-n1 (4), b1-r1-n2 (2)" in train
        huge = next(line for line in lines if line.startswith("default/huge"))
        assert "allows to fit only 8 out of 100 pod(s)" in huge

    def test_table_shows_wait_times_as_people_read_them_and_json_as_kueue_writes_them(self, capsys, tmp_path):
        # a flavor without topology: admitted with no domains, so the table shows the message
        plain = write_yaml(tmp_path / "plain.yaml", [topology(), resource_flavor(topology_name=None),
                                                     cluster_queue(), local_queue(), *grid(cpu="4"),
                                                     workload("plain", count=2)])
        later = "2026-12-01T04:00:00Z"  # 47318400 s after the workload's creation

        code, out, _ = simulate(capsys, plain, "-o", "table", "--now", later)
        assert code == 0
        row = next(line for line in out.splitlines() if line.startswith("default/plain"))
        assert row.endswith("Quota reserved in ClusterQueue cq, wait time since queued was 547d 16h")

        code, out, _ = simulate(capsys, plain, "--now", later)
        (wl,) = json.loads(out)["workloads"]
        assert wl["message"] == "Quota reserved in ClusterQueue cq, wait time since queued was 47318400s"

    def test_unknown_kinds_warn_on_stderr(self, capsys, tmp_path, cluster_file):
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
        code, out, err = simulate(capsys, cluster_file, workloads_file(tmp_path, config_map))
        assert code == 0
        assert json.loads(out)["workloads"] == []
        assert err.startswith("warning: ") and "ConfigMap" in err


class TestBadInput:
    def test_not_yaml_or_json(self, capsys, tmp_path, cluster_file):
        bad = tmp_path / "broken.yaml"
        bad.write_text("kind: Node\nmetadata: {name: [unclosed\n", encoding="utf-8")
        code, out, err = simulate(capsys, cluster_file, str(bad))
        assert code == 1
        assert out == ""
        assert_one_error_line(err, str(bad), "not valid YAML or JSON")

    def test_broken_json(self, capsys, tmp_path, cluster_file):
        bad = tmp_path / "broken.json"
        bad.write_text('{"kind": "Node", "metadata": ', encoding="utf-8")
        code, _, err = simulate(capsys, cluster_file, str(bad))
        assert code == 1
        assert_one_error_line(err, str(bad))

    def test_document_that_is_not_an_object(self, capsys, tmp_path, cluster_file):
        bad = tmp_path / "scalar.yaml"
        bad.write_text("just some words\n", encoding="utf-8")
        code, _, err = simulate(capsys, cluster_file, str(bad))
        assert code == 1
        assert_one_error_line(err, str(bad), "expected a Kubernetes object")

    def test_level_no_topology_has(self, capsys, tmp_path, cluster_file):
        # a valid Workload that Kueue keeps pending: a warning, not an error
        wl_file = workloads_file(tmp_path, workload("train", count=2, required="example.com/zone"))
        code, out, err = simulate(capsys, cluster_file, wl_file)
        assert code == 0
        (line,) = err.splitlines()
        assert line.startswith("warning: ") and "Traceback" not in err
        for part in (wl_file, "Workload/default/train", "spec.podSets[0].topologyRequest.required",
                     "example.com/zone"):
            assert part in line
        (wl,) = json.loads(out)["workloads"]
        assert (wl["name"], wl["status"]) == ("train", "Inadmissible")
        assert wl["message"] == ("couldn't assign flavors to pod set main: "
                                 "Flavor \"tas-flavor\" does not contain the requested level")
        assert wl["podSets"][0]["failureReason"] == "no requested topology level: example.com/zone"

    def test_slice_level_no_topology_has(self, capsys, tmp_path, cluster_file):
        wl = workload("train", count=2, required=RACK, slice_topology="example.com/zone", slice_size=1)
        code, out, _ = simulate(capsys, cluster_file, workloads_file(tmp_path, wl))
        assert code == 0
        (got,) = json.loads(out)["workloads"]
        assert got["status"] == "Inadmissible"
        assert got["podSets"][0]["failureReason"] == "no requested topology level for slices: example.com/zone"

    def test_flavor_whose_topology_does_not_exist(self, capsys, tmp_path):
        objects = tas_setup(flavor_kwargs={"topology_name": "missing"}) + grid(cpu="4")
        objects = [o for o in objects if o["kind"] != "Topology"]
        cluster = write_yaml(tmp_path / "cluster.yaml", objects)
        code, out, err = simulate(capsys, cluster, workloads_file(tmp_path, workload("train", required=RACK)))
        assert code == 0
        assert "ResourceFlavor/tas-flavor" in err and "spec.topologyName" in err
        assert ("warning: ClusterQueue/cq: inactive (TopologyNotFound): Can't admit new workloads: there is no "
                "Topology \"missing\" for TAS flavor \"tas-flavor\". None of its workloads is admitted") in err
        # Kueue holds the ClusterQueue inactive (TopologyNotFound) while its TAS flavor has no Topology
        (wl,) = json.loads(out)["workloads"]
        assert (wl["status"], wl["message"]) == ("Inadmissible", "ClusterQueue cq is inactive")

    def test_required_and_preferred(self, capsys, tmp_path, cluster_file):
        wl = workload("train", pod_sets=[pod_set(raw_topology_request={"required": RACK, "preferred": HOSTNAME})])
        code, out, err = simulate(capsys, cluster_file, workloads_file(tmp_path, wl))
        assert code == 1
        assert out == ""
        assert_one_error_line(err, "workloads.yaml", "Workload/default/train", "spec.podSets[0].topologyRequest",
                              "mutually exclusive")

    def test_negative_count(self, capsys, tmp_path, cluster_file):
        code, _, err = simulate(capsys, cluster_file, workloads_file(tmp_path, workload("train", count=-2)))
        assert code == 1
        assert_one_error_line(err, "workloads.yaml", "Workload/default/train", "spec.podSets[0].count", "-2")

    def test_unparseable_quantity(self, capsys, tmp_path, cluster_file):
        code, _, err = simulate(capsys, cluster_file, workloads_file(tmp_path, workload("train", cpu="1.5.5")))
        assert code == 1
        assert_one_error_line(err, "workloads.yaml", "Workload/default/train",
                              "spec.podSets[0].template.spec.containers[0].resources.requests.cpu", "1.5.5")

    def test_missing_file(self, capsys, tmp_path, cluster_file):
        missing = str(tmp_path / "missing.yaml")
        code, out, err = simulate(capsys, cluster_file, missing)
        assert code == 1
        assert out == ""
        assert_one_error_line(err, missing, "no such file")

    def test_directory_instead_of_a_file(self, capsys, tmp_path):
        code, _, err = simulate(capsys, str(tmp_path))
        assert code == 1
        assert_one_error_line(err, str(tmp_path))


class TestBadFlags:
    def test_unknown_feature_gate(self, capsys, cluster_file):
        code, out, err = simulate(capsys, cluster_file, "--feature-gates", "TASMakeItFaster=true")
        assert code == 2
        assert out == ""
        assert_one_error_line(err, "TASMakeItFaster")

    def test_feature_gate_without_a_boolean(self, capsys, cluster_file):
        code, _, err = simulate(capsys, cluster_file, "--feature-gates", "TASProfileMixed=maybe")
        assert code == 2
        assert_one_error_line(err, "TASProfileMixed")

    def test_known_feature_gates_are_accepted(self, capsys, tmp_path, cluster_file):
        wl_file = workloads_file(tmp_path, workload("w", count=5, unconstrained=True))
        code, out, _ = simulate(capsys, cluster_file, wl_file,
                                "--feature-gates", "TASProfileMixed=false,TASBalancedPlacement=false")
        assert code == 0
        assert json.loads(out)["workloads"][0]["status"] == "Admitted"

    def test_gates_of_kueues_later_patch_releases(self, capsys, tmp_path, cluster_file):
        """Gates Kueue's v0.19.4-v0.19.7 releases added are taken, those of its controllers and
        job integrations changing nothing here."""
        wl_file = workloads_file(tmp_path, workload("w", count=5, unconstrained=True))
        taken = ("PodGroupSchedulingShapeOrdering=true,DeploymentJobUIDLabel=true,TASPartialSlices=false,"
                 "TASLeaderPodSetFeasibility=false,MultiKueueReuseClientConnectionConfigForWorkers=true,"
                 "HighMaxParallelismWithinReconcile=false,TASRejectFalseUnconstrainedTopology=false")
        code, out, _ = simulate(capsys, cluster_file, wl_file, "--feature-gates", taken)
        assert code == 0
        assert json.loads(out)["workloads"][0]["status"] == "Admitted"
        code, out, _ = simulate(capsys, cluster_file, wl_file, "--feature-gates",
                                "TASPartialSlices=true,TASLeaderPodSetFeasibility=true")
        assert code == 0
        assert json.loads(out)["workloads"][0]["status"] == "Admitted"

    @pytest.mark.parametrize("value", ["true", "false"])
    def test_grouped_sliced_pod_sets_are_placed_whatever_the_webhook_gate_says(self, capsys, tmp_path,
                                                                                cluster_file, value):
        """TASGroupedPodSetSlicing (Kueue v0.19.4) only lets the job webhooks accept a group
        with slices; a Workload that has one is placed the same either way."""
        group = [pod_set("leader", count=1, required=RACK, group="g"),
                 pod_set("workers", count=4, required=RACK, slice_topology=HOSTNAME, slice_size=2, group="g")]
        wl_file = workloads_file(tmp_path, workload("lws", pod_sets=group))
        code, out, _ = simulate(capsys, cluster_file, wl_file)
        assert code == 0
        default = json.loads(out)["workloads"][0]
        code, out, _ = simulate(capsys, cluster_file, wl_file, "--feature-gates", f"TASGroupedPodSetSlicing={value}")
        assert code == 0
        [result] = json.loads(out)["workloads"]
        assert result["status"] == "Admitted" and result["podSets"] == default["podSets"]
        assert [d["count"] for d in result["podSets"][1]["domains"]] in ([2, 2], [4])

    def test_bad_now(self, capsys, cluster_file):
        code, out, err = simulate(capsys, cluster_file, "--now", "yesterday")
        assert code == 2
        assert out == ""
        assert_one_error_line(err, "--now", "yesterday")

    def test_empty_now(self, capsys, cluster_file):
        code, out, err = simulate(capsys, cluster_file, "--now", "")
        assert code == 2
        assert out == ""
        assert_one_error_line(err, "--now", "''")

    @pytest.mark.parametrize("cycles", ["\u00b2", "\u0661", "0", "-1", "1.5", " 3"])
    def test_bad_cycles(self, capsys, cluster_file, cycles):
        # a superscript two passes str.isdigit() but not int(); an Arabic-Indic one passes both
        code, out, err = simulate(capsys, cluster_file, "--cycles", cycles)
        assert code == 2
        assert out == ""
        assert_one_error_line(err, "--cycles", repr(cycles))

    def test_bad_output_format(self, capsys, cluster_file):
        code, _, err = simulate(capsys, cluster_file, "-o", "xml")
        assert code == 2
        assert_one_error_line(err)

    def test_no_files(self, capsys):
        code = main(["simulate"])
        _, err = capsys.readouterr()
        assert code == 2
        assert_one_error_line(err)


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "0s"), (42, "42s"), (60, "1m"), (61, "1m 1s"), (3600, "1h"), (11_100, "3h 5m"), (86_399, "23h 59m"),
    (86_400, "1d"), (90_000, "1d 1h"), (47_302_753, "547d 11h"),
])
def test_human_duration(seconds, shown):
    assert human_duration(seconds) == shown


def test_only_wait_times_are_humanized():
    assert humanize_wait_times("Admitted by ClusterQueue cq, wait time since reservation was 3700s") == \
        "Admitted by ClusterQueue cq, wait time since reservation was 1h 1m"
    unrelated = 'topology "default" allows to fit only 8 out of 100 pod(s); node x-120s is NotReady'
    assert humanize_wait_times(unrelated) == unrelated


def test_module_entry_point(tmp_path, cluster_file):
    wl_file = workloads_file(tmp_path, workload("train", count=6, required=RACK))
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", cluster_file, wl_file, "--now", "2025-06-01T12:00:00Z"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (wl,) = json.loads(proc.stdout)["workloads"]
    assert wl["status"] == "Admitted"
    assert wl["podSets"][0]["domains"] == [{"values": ["b1-r1-n1"], "count": 4}, {"values": ["b1-r1-n2"], "count": 2}]


def test_non_tas_pods_asking_beyond_int64_fill_their_node(capsys, tmp_path):
    from .factories import pod

    objects = [*tas_setup(), *grid(blocks=1, racks=1, nodes=2, cpu="4"),
               pod("big-1", node="b1-r1-n1", cpu="1e16"), pod("big-2", node="b1-r1-n1", cpu="1e16")]
    cluster = write_yaml(tmp_path / "cluster.yaml", objects)
    wl_file = workloads_file(tmp_path, workload("train", count=2, cpu="1", required=RACK))
    code, out, err = simulate(capsys, cluster, wl_file, "--now", "2025-06-01T12:00:00Z", "--cycles", "all")
    assert code == 0, err
    (wl,) = json.loads(out)["workloads"]
    assert wl["status"] == "Admitted"
    assert wl["podSets"][0]["domains"] == [{"values": ["b1-r1-n2"], "count": 2}]


def run_module(*args: str, stdin: str | bytes) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scheduler", *args], cwd=ROOT, capture_output=True,
                          input=stdin.encode() if isinstance(stdin, str) else stdin, timeout=60, check=False)


def test_a_file_named_dash_is_standard_input_beside_files(tmp_path, cluster_file):
    """`kubectl get workloads -o json | tas simulate cluster.yaml -`: the workloads piped in
    are read with the cluster's file, as the same objects in a file would be."""
    wl = workload("train", count=6, required=RACK)
    from_file = run_module("simulate", cluster_file, workloads_file(tmp_path, wl), "--now", "2025-06-01T12:00:00Z",
                           stdin="")
    piped = run_module("simulate", cluster_file, "-", "--now", "2025-06-01T12:00:00Z",
                       stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [wl]}))
    assert piped.returncode == from_file.returncode == 0, piped.stderr
    assert piped.stdout == from_file.stdout
    assert json.loads(piped.stdout)["workloads"][0]["status"] == "Admitted"


@pytest.mark.parametrize(("args", "stdin", "code", "error"), [
    (("simulate", "-", "-"), "{}", 2, "error: FILE: - (standard input) is given more than once; it can be read once"),
    (("simulate", "-"), b"\xff\xfe", 1, "error: standard input: not a text file (not UTF-8)"),
    (("simulate", "-"), "a: [1,2\n", 1, "error: standard input: not valid YAML or JSON at line 2"),
    (("decode", "-"), "[]\n---\n[]\n", 1, "error: standard input: expected one document, found 2"),
])
def test_bad_standard_input_is_named_standard_input(args, stdin, code, error):
    proc = run_module(*args, stdin=stdin)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.decode().startswith(error), proc.stderr
    assert b"Traceback" not in proc.stderr


def test_encode_and_decode_read_standard_input():
    decoded = {"levels": [HOSTNAME], "domains": [{"values": ["x1"], "count": 2}, {"values": ["x2"], "count": 1}]}
    encoded = run_module("encode", "-", stdin=json.dumps(decoded))
    assert encoded.returncode == 0, encoded.stderr
    back = run_module("decode", "-", stdin=encoded.stdout)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["domains"] == decoded["domains"]
