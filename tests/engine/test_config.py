"""Kueue's manager Configuration: reading it, and what its resource section does to quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.config import (
    LESS_THAN_INITIAL_SHARE,
    NO_CONFIGURATION,
    PREEMPTION_STRATEGIES,
    effective_gates,
    parse_configuration,
    parse_duration,
)
from scheduler.errors import FlagError, InputError

from .factories import (
    BLOCK,
    CLUSTER_QUEUE,
    FLAVOR,
    V1BETA2,
    admitted,
    domains_json,
    gates,
    grid,
    local_queue,
    node,
    pod_set,
    resource_flavor,
    result_of,
    run,
    tas_setup,
    topology,
    workload,
)

HOST = "kubernetes.io/hostname"


def configuration(version: str = "v1beta2", **sections) -> dict:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **sections}


def credits(strategy: str = "Retain", per_cpu: str = "1", **extra) -> dict:
    return configuration(resources={"transformations": [
        {"input": "cpu", "strategy": strategy, "outputs": {"example.com/credits": per_cpu}, **extra}]})


class TestReading:
    def test_defaults_and_ignored_fields(self):
        config = parse_configuration(configuration(manageJobsWithoutQueueName=True, integrations={"frameworks": []}))
        assert config == NO_CONFIGURATION

    def test_every_scheduling_section(self):
        config = parse_configuration(configuration(
            resources={"excludeResourcePrefixes": ["example.com/"],
                       "transformations": [{"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace",
                                            "outputs": {"example.com/accelerator-memory": "5Gi"}}]},
            fairSharing={"preemptionStrategies": [LESS_THAN_INITIAL_SHARE]},
            waitForPodsReady={"timeout": "10m", "blockAdmission": True,
                              "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 3,
                                                    "backoffBaseSeconds": 10, "backoffMaxSeconds": 100}},
        ))
        rule = config.transformations["nvidia.com/mig-1g.5gb"]
        assert rule.strategy == "Replace" and rule.outputs["example.com/accelerator-memory"] == 5 * 2**30
        assert config.exclude_resource_prefixes == ("example.com/",)
        assert config.fair_sharing is not None
        assert config.fair_sharing.preemption_strategies == (LESS_THAN_INITIAL_SHARE,)
        wfpr = config.wait_for_pods_ready
        assert wfpr is not None and wfpr.timeout_seconds == 600 and wfpr.block_admission
        assert wfpr.requeuing_strategy.timestamp == "Creation"
        assert wfpr.requeuing_strategy.backoff_limit_count == 3
        assert (wfpr.requeuing_strategy.backoff_base_seconds, wfpr.requeuing_strategy.backoff_max_seconds) == (10, 100)

    def test_v1beta1_switches(self):
        off = parse_configuration(configuration("v1beta1", fairSharing={"enable": False},
                                                waitForPodsReady={"enable": False}))
        assert off.fair_sharing is None and off.wait_for_pods_ready is None
        on = parse_configuration(configuration("v1beta1", fairSharing={"enable": True},
                                               waitForPodsReady={"enable": True}))
        assert on.fair_sharing is not None and on.fair_sharing.preemption_strategies == PREEMPTION_STRATEGIES
        # v1beta1 blocks admission unless told otherwise; v1beta2 does not
        assert on.wait_for_pods_ready is not None and on.wait_for_pods_ready.block_admission
        v2 = parse_configuration(configuration(waitForPodsReady={"timeout": "5m"}))
        assert v2.wait_for_pods_ready is not None and not v2.wait_for_pods_ready.block_admission

    @pytest.mark.parametrize("doc, field, reason", [
        (credits(strategy="Keep"), "resources.transformations[0].strategy", "must be Retain or Replace"),
        (credits(strategy=[]), "resources.transformations[0].strategy", "must be Retain or Replace, got []"),
        (credits(strategy=""), "resources.transformations[0].strategy", "must be Retain or Replace, got ''"),
        (configuration(waitForPodsReady={"timeout": "\u0665m"}), "waitForPodsReady.timeout", "not a duration"),
        (credits(per_cpu="lots"), "resources.transformations[0].outputs.example.com/credits", "not a valid quantity"),
        (credits(per_cpu="-1"), "resources.transformations[0].outputs.example.com/credits", "must not be negative"),
        (configuration(resources={"transformations": [{"strategy": "Retain"}]}),
         "resources.transformations[0].input", "must be a resource name"),
        (configuration(resources={"transformations": [{"input": "cpu"}, {"input": "cpu"}]}),
         "resources.transformations[1].input", "transformed twice"),
        (configuration(resources={"excludeResourcePrefixes": "example.com/"}),
         "resources.excludeResourcePrefixes", "must be a list"),
        (configuration(fairSharing={"preemptionStrategies": ["Always"]}),
         "fairSharing.preemptionStrategies[0]", "must be one of"),
        (configuration(waitForPodsReady={"timeout": "five minutes"}), "waitForPodsReady.timeout", "not a duration"),
        (configuration(waitForPodsReady={"timeout": "87600000h"}), "waitForPodsReady.timeout",
         "longer than the longest duration, 2562047h47m16.854775807s"),
        (configuration(waitForPodsReady={"blockAdmission": "yes"}), "waitForPodsReady.blockAdmission",
         "must be true or false"),
        (configuration(waitForPodsReady={"requeuingStrategy": {"timestamp": "Admission"}}),
         "waitForPodsReady.requeuingStrategy.timestamp", "must be Eviction or Creation"),
        (configuration(waitForPodsReady={"requeuingStrategy": {"backoffBaseSeconds": -1}}),
         "waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "must be an integer"),
        (configuration(featureGates=["TASBalancedPlacement"]), "featureGates", "must be a mapping"),
        (configuration(featureGates={"TASBalancedPlacment": True}), "featureGates.TASBalancedPlacment",
         "unknown feature gate 'TASBalancedPlacment'"),
        (configuration(featureGates={"TASBalancedPlacement": "true"}), "featureGates.TASBalancedPlacement",
         "must be true or false, got 'true'"),
    ])
    def test_bad_values_name_the_field(self, doc, field, reason):
        with pytest.raises(InputError) as err:
            parse_configuration(doc, file="kueue.yaml")
        assert err.value.field == field
        assert reason in err.value.reason
        assert str(err.value).startswith("kueue.yaml: Configuration: ")

    def test_feature_gates_stand_for_the_flag(self):
        config = parse_configuration(configuration(featureGates={"TASBalancedPlacement": True,
                                                                 "TASProfileMixed": False}))
        assert dict(config.feature_gates) == {"TASBalancedPlacement": True, "TASProfileMixed": False}
        gates = effective_gates("", config)
        assert gates.TASBalancedPlacement and not gates.TASProfileMixed and gates.TASMultiLayerTopology
        assert effective_gates("TASBalancedPlacement=true", NO_CONFIGURATION).TASBalancedPlacement
        assert not effective_gates(None, None).TASBalancedPlacement

    def test_feature_gates_and_the_flag_never_mix(self):
        config = parse_configuration(configuration(featureGates={"TASBalancedPlacement": True}))
        with pytest.raises(FlagError, match="--feature-gates and the Configuration's featureGates both set"):
            effective_gates("TASProfileMixed=false", config)

    def test_not_a_configuration(self):
        with pytest.raises(InputError, match="expected kind Configuration"):
            parse_configuration({"apiVersion": "v1", "kind": "ConfigMap"})

    def test_durations(self):
        assert parse_duration("1h30m", "f") == 5400
        assert parse_duration("90s", "f") == 90
        assert parse_duration("0", "f") == 0
        assert parse_duration("1.5m", "f") == 90
        with pytest.raises(InputError):
            parse_duration("-5m", "f")
        with pytest.raises(InputError):
            parse_duration("5", "f")


class TestQuotaRequests:
    def test_retain_adds_outputs_per_whole_unit(self):
        config = parse_configuration(credits(per_cpu="2"))
        # 1500m of cpu is 2 whole units (rounded up, as Quantity.Value() does)
        assert config.quota_requests({"cpu": 1500, "memory": 10}) == {"cpu": 1500, "memory": 10,
                                                                       "example.com/credits": 4}

    def test_replace_drops_the_input(self):
        config = parse_configuration(credits(strategy="Replace"))
        assert config.quota_requests({"cpu": 3000}) == {"example.com/credits": 3}

    def test_replace_without_outputs_ignores_the_resource(self):
        config = parse_configuration(configuration(resources={"transformations": [
            {"input": "example.com/nic", "strategy": "Replace"}]}))
        assert config.quota_requests({"cpu": 1000, "example.com/nic": 2}) == {"cpu": 1000}

    def test_multiply_by(self):
        config = parse_configuration(configuration(resources={"transformations": [
            {"input": "example.com/gpu", "strategy": "Replace", "multiplyBy": "example.com/slices",
             "outputs": {"example.com/gpu-slices": "1"}}]}))
        assert config.quota_requests({"example.com/gpu": 2, "example.com/slices": 4}) == {
            "example.com/slices": 4, "example.com/gpu-slices": 8}

    def test_outputs_to_cpu_are_milli(self):
        config = parse_configuration(configuration(resources={"transformations": [
            {"input": "example.com/vcpu", "strategy": "Replace", "outputs": {"cpu": "500m"}}]}))
        assert config.quota_requests({"example.com/vcpu": 3}) == {"cpu": 1500}

    def test_excluded_prefixes_first(self):
        config = parse_configuration(configuration(resources={
            "excludeResourcePrefixes": ["example.com/"],
            "transformations": [{"input": "example.com/x", "outputs": {"other.io/y": "1"}}]}))
        assert config.quota_requests({"cpu": 1000, "example.com/x": 5}) == {"cpu": 1000}

    def test_no_configuration_is_the_identity(self):
        requests = {"cpu": 1000}
        assert NO_CONFIGURATION.quota_requests(requests) is requests


def credits_cluster(*, cpu_quota: str = "8", credit_quota: str = "2", node_extra: dict | None = None) -> list[dict]:
    """A TAS flavor for cpu and a flavor without topology for the credits cpu is charged in."""
    cq = {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE}, "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": ["cpu"],
             "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": cpu_quota}]}]},
            {"coveredResources": ["example.com/credits"],
             "flavors": [{"name": "credits", "resources": [{"name": "example.com/credits",
                                                              "nominalQuota": credit_quota}]}]},
        ]}}
    return [topology(levels=[HOST]), resource_flavor(), resource_flavor("credits", topology_name=None), cq,
            local_queue(), *(node(f"x{i}", labels={}, cpu="4", extra=node_extra) for i in (1, 2))]


class TestQuotaInTheCycle:
    def test_transformed_resource_is_charged_and_placed_by_the_pod_spec(self):
        config = parse_configuration(credits())
        result = run([*credits_cluster(), workload("a", count=2, cpu="1", required=HOST)], config=config)
        wl = result_of(result, "a")
        assert wl.status == "Admitted", wl.message
        assert wl.pod_sets[0].flavors == {"cpu": FLAVOR, "example.com/credits": "credits"}
        assert wl.workload.admission is not None
        assert dict(wl.workload.admission.pod_set_assignments[0].resource_usage) == {
            "cpu": 2000, "example.com/credits": 2}

    def test_the_output_quota_limits_admission(self):
        config = parse_configuration(credits())
        result = run([*credits_cluster(credit_quota="2"), workload("a", count=3, cpu="1", required=HOST)],
                     config=config)
        wl = result_of(result, "a")
        assert wl.status == "Inadmissible"
        assert "insufficient quota for example.com/credits in flavor credits" in wl.message
        assert "current podset request (3) > maximum capacity (2)" in wl.message

    def test_without_the_configuration_the_credits_are_not_asked_for(self):
        result = run([*credits_cluster(credit_quota="2"), workload("a", count=3, cpu="1", required=HOST)])
        assert result_of(result, "a").status == "Admitted"

    def test_admitted_usage_without_resource_usage_is_transformed(self):
        """An admission written without resourceUsage is charged what Kueue charges: the
        transformed requests. With 2 credits of 2 held, the next workload must wait."""
        config = parse_configuration(credits())
        holder = admitted(workload("holder", count=2, cpu="1", required=HOST),
                          assignments={"main": domains_json([HOST], [("x1", 2)])})
        holder["status"]["admission"]["podSetAssignments"][0]["flavors"] = {
            "cpu": FLAVOR, "example.com/credits": "credits"}
        result = run([*credits_cluster(credit_quota="2"), holder, workload("next", cpu="1", required=HOST)],
                     config=config)
        wl = result_of(result, "next")
        assert wl.status != "Admitted"
        assert "example.com/credits" in wl.message

    def test_excluded_resource_needs_no_quota(self):
        """Quota ignores it; the nodes still have to have it (placement reads the pod spec)."""
        config = parse_configuration(configuration(resources={"excludeResourcePrefixes": ["example.com/"]}))
        nic = {"example.com/nic": "1"}
        objects = [*credits_cluster(node_extra=nic),
                   workload("a", pod_sets=[pod_set(cpu="1", required=HOST, extra=nic)])]
        assert "unavailable in ClusterQueue" in result_of(run(objects), "a").message
        assert result_of(run(objects, config=config), "a").status == "Admitted"


class TestCommandLine:
    def test_config_flag(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all(
            [*credits_cluster(credit_quota="1"), workload("a", count=2, cpu="1", required=HOST)]))
        config = tmp_path / "kueue.yaml"
        config.write_text(yaml.safe_dump(credits()))
        assert main(["simulate", str(cluster), "--now", "2025-06-01T12:00:00Z"]) == 0
        assert json.loads(capsys.readouterr().out)["workloads"][0]["status"] == "Admitted"
        assert main(["simulate", str(cluster), "--config", str(config), "--now", "2025-06-01T12:00:00Z"]) == 0
        out = json.loads(capsys.readouterr().out)["workloads"][0]
        assert out["status"] == "Inadmissible"
        assert "example.com/credits" in out["message"]

    def test_feature_gates_from_the_config(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all([*tas_setup(), *grid(cpu="4"),
                                               workload("a", count=3, cpu="1", required=BLOCK)]))
        config = tmp_path / "kueue.yaml"
        config.write_text(yaml.safe_dump(configuration(featureGates={"TopologyAwareScheduling": False})))
        now = ["--now", "2025-06-01T12:00:00Z"]

        def output(*extra: str) -> str:
            assert main(["simulate", str(cluster), *now, *extra]) == 0
            return capsys.readouterr().out

        default, by_flag = output(), output("--feature-gates", "TopologyAwareScheduling=false")
        assert by_flag != default  # no TopologyAssignment without TAS
        assert output("--config", str(config)) == by_flag
        assert main(["simulate", str(cluster), *now, "--config", str(config),
                     "--feature-gates", "TASBalancedPlacement=true"]) == 2
        assert "--feature-gates and the Configuration's featureGates both set feature gates" in \
            capsys.readouterr().err

    def test_bad_config_is_one_clear_line(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all(grid(cpu="4")))
        config = tmp_path / "kueue.yaml"
        config.write_text(yaml.safe_dump(credits(strategy="Keep")))
        assert main(["simulate", str(cluster), "--config", str(config)]) == 1
        err = capsys.readouterr().err.strip()
        assert err == (f"error: {config}: Configuration: resources.transformations[0].strategy: "
                       "must be Retain or Replace, got 'Keep'")
        assert main(["simulate", str(cluster), "--config", str(tmp_path / "missing.yaml")]) == 1
        assert "missing.yaml: no such file" in capsys.readouterr().err


def ignore_undeclared(**resources) -> dict:
    return configuration(resources={"quotaCheckStrategy": "IgnoreUndeclared", **resources})


class TestQuotaCheckStrategy:
    """resources.quotaCheckStrategy (Kueue's KEP-7513): with IgnoreUndeclared, a resource no
    resource group of the ClusterQueue covers is left out of quota instead of blocking the
    workload; the topology placement still counts it against the nodes."""

    NIC = {"example.com/nic": "1"}

    def objects(self, *, nic_on_nodes: bool = True, count: int = 1) -> list[dict]:
        return [*credits_cluster(node_extra=self.NIC if nic_on_nodes else None),
                workload("a", pod_sets=[pod_set(count=count, cpu="1", required=HOST, extra=self.NIC)])]

    def test_reading(self):
        assert parse_configuration(ignore_undeclared()).quota_check_strategy == "IgnoreUndeclared"
        assert parse_configuration(configuration()).quota_check_strategy == ""
        with pytest.raises(InputError) as err:
            parse_configuration(configuration(resources={"quotaCheckStrategy": ["IgnoreUndeclared"]}))
        assert err.value.field == "resources.quotaCheckStrategy"

    @pytest.mark.parametrize("doc, reason", [
        (configuration(resources={"quotaCheckStrategy": "Ignore"}),
         "must be BlockUndeclared or IgnoreUndeclared, got 'Ignore'"),
        (ignore_undeclared(excludeResourcePrefixes=["example.com/"]),
         "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared"),
    ])
    def test_refused_while_the_gate_is_on(self, doc, reason):
        config = parse_configuration(doc, file="kueue.yaml")
        with pytest.raises(InputError) as err:
            effective_gates("", config)
        assert str(err.value) == f"kueue.yaml: Configuration: resources.quotaCheckStrategy: {reason}"
        # with the gate off Kueue ignores the field, and validates nothing of it
        assert not effective_gates("QuotaCheckStrategy=false", config).QuotaCheckStrategy
        gated_off = parse_configuration({**doc, "featureGates": {"QuotaCheckStrategy": False}})
        assert not effective_gates("", gated_off).QuotaCheckStrategy
        assert effective_gates("", parse_configuration(configuration(
            resources={"quotaCheckStrategy": "BlockUndeclared", "excludeResourcePrefixes": ["example.com/"]})))

    def test_undeclared_resource_no_longer_blocks(self):
        blocked = result_of(run(self.objects()), "a")
        assert blocked.status == "Inadmissible"
        assert "resource example.com/nic unavailable in ClusterQueue" in blocked.message
        wl = result_of(run(self.objects(), config=parse_configuration(ignore_undeclared())), "a")
        assert wl.status == "Admitted", wl.message
        assert wl.pod_sets[0].flavors == {"cpu": FLAVOR}
        assert wl.workload.admission is not None
        assert dict(wl.workload.admission.pod_set_assignments[0].resource_usage) == {"cpu": 1000}

    def test_blocks_again_with_the_gate_off(self):
        config = parse_configuration(ignore_undeclared())
        wl = result_of(run(self.objects(), config=config, feature_gates=gates(QuotaCheckStrategy=False)), "a")
        assert wl.status == "Inadmissible"
        assert "unavailable in ClusterQueue" in wl.message

    def test_explicit_block_undeclared_is_the_default(self):
        config = parse_configuration(configuration(resources={"quotaCheckStrategy": "BlockUndeclared"}))
        assert "unavailable in ClusterQueue" in result_of(run(self.objects(), config=config), "a").message

    def test_declared_resources_still_need_quota(self):
        config = parse_configuration(ignore_undeclared())
        wl = result_of(run([*credits_cluster(cpu_quota="1", node_extra=self.NIC),
                            workload("a", pod_sets=[pod_set(count=2, cpu="1", required=HOST, extra=self.NIC)])],
                           config=config), "a")
        assert wl.status == "Inadmissible"
        assert "insufficient quota for cpu in flavor" in wl.message

    def test_nodes_still_need_the_undeclared_resource(self):
        """Quota leaves it out; the topology placement does not (Kueue's KEP keeps TAS as is)."""
        config = parse_configuration(ignore_undeclared())
        wl = result_of(run(self.objects(nic_on_nodes=False), config=config), "a")
        assert wl.status == "Inadmissible"
        assert 'doesn\'t allow to fit any of 1 pod(s)' in wl.message
        assert 'excluded: resource "example.com/nic": 2' in wl.message

    def test_admitted_workload_is_charged_the_declared_resources_only(self):
        """Two one-cpu workloads on a quota of two cpus both fit: neither is charged its NIC, and
        the second finds the first's cpu taken (a third would not fit)."""
        config = parse_configuration(ignore_undeclared())
        objects = [*credits_cluster(cpu_quota="2", node_extra={"example.com/nic": "4"}),
                   *(workload(n, pod_sets=[pod_set(cpu="1", required=HOST, extra=self.NIC)], created=i)
                     for i, n in enumerate(("a", "b", "c")))]
        result = run(objects, config=config)
        assert [result_of(result, n).status for n in ("a", "b")] == ["Admitted", "Admitted"]
        assert result_of(result, "c").status != "Admitted"
        assert "cpu" in result_of(result, "c").message

    def test_command_line_refuses_the_mix_in_one_line(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all(self.objects()))
        config = tmp_path / "kueue.yaml"
        config.write_text(yaml.safe_dump(ignore_undeclared(excludeResourcePrefixes=["example.com/"])))
        assert main(["simulate", str(cluster), "--config", str(config)]) == 1
        assert capsys.readouterr().err.strip() == (
            f"error: {config}: Configuration: resources.quotaCheckStrategy: excludeResourcePrefixes is not "
            "allowed when quotaCheckStrategy is IgnoreUndeclared")
        config.write_text(yaml.safe_dump(ignore_undeclared()))
        assert main(["simulate", str(cluster), "--config", str(config), "--now", "2025-06-01T12:00:00Z"]) == 0
        assert json.loads(capsys.readouterr().out)["workloads"][0]["status"] == "Admitted"


def afs_cluster(mode: str | None = "UsageBasedAdmissionFairSharing") -> list[dict]:
    objects = [*tas_setup(), *grid(cpu="4"), workload("a", cpu="1")]
    if mode is not None:
        objects[2]["spec"]["admissionScope"] = {"admissionMode": mode}
    return objects


AFS = {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m", "resourceWeights": {"cpu": 0, "nvidia.com/gpu": 2.5}}


class TestAdmissionFairSharing:
    """admissionFairSharing is read and checked as Kueue checks it (what it changes in the order
    of the workloads: tests/engine/test_admission_fair_sharing.py)."""

    def test_reading_and_defaults(self):
        afs = parse_configuration(configuration(admissionFairSharing=AFS)).admission_fair_sharing
        assert afs is not None
        assert (afs.usage_half_life_seconds, afs.usage_sampling_interval_seconds) == (168 * 3600, 300)
        assert dict(afs.resource_weights) == {"cpu": 0.0, "nvidia.com/gpu": 2.5}
        empty = parse_configuration(configuration(admissionFairSharing={"usageSamplingInterval": "0"}))
        assert empty.admission_fair_sharing is not None
        assert empty.admission_fair_sharing.usage_sampling_interval_seconds == 300  # Kueue's default
        assert parse_configuration(configuration()).admission_fair_sharing is None

    @pytest.mark.parametrize("section, field, reason", [
        ({"usageHalfLifeTime": "-1h"}, "admissionFairSharing.usageHalfLifeTime", "must not be negative"),
        ({"usageSamplingInterval": "often"}, "admissionFairSharing.usageSamplingInterval", "is not a duration"),
        ({"resourceWeights": {"cpu": -1}}, "admissionFairSharing.resourceWeights.cpu", "must not be negative"),
        ({"resourceWeights": {"cpu": "heavy"}}, "admissionFairSharing.resourceWeights.cpu", "must be a number"),
        ({"resourceWeights": ["cpu"]}, "admissionFairSharing.resourceWeights", "must be a mapping"),
    ])
    def test_bad_values_name_the_field(self, section, field, reason):
        with pytest.raises(InputError) as err:
            parse_configuration(configuration(admissionFairSharing=section), file="kueue.yaml")
        assert err.value.field == field
        assert reason in err.value.reason

    def test_bad_admission_mode_names_the_field(self):
        with pytest.raises(InputError) as err:
            run(afs_cluster("ByUsage"))
        assert str(err.value).endswith(
            "ClusterQueue/cq: spec.admissionScope.admissionMode: must be one of UsageBasedAdmissionFairSharing, "
            "NoAdmissionFairSharing, got 'ByUsage'")

    def test_a_clusterqueue_that_asks_for_it_is_not_warned_about(self):
        config = parse_configuration(configuration(admissionFairSharing=AFS))
        warnings: list[str] = []
        result = run(afs_cluster(), config=config, warnings=warnings)
        assert result_of(result, "a").status == "Admitted"
        assert warnings == []


class TestUnknownFields:
    """Kueue decodes its Configuration strictly. A field the sections the engine reads do not
    have is an error naming it; a top-level name no Kueue version has is a warning (the
    sections the engine does not read differ from one Kueue version to the next)."""

    @pytest.mark.parametrize("doc, field", [
        (configuration(waitForPodsReady={"timeout": "5m", "blockAdmision": True}), "waitForPodsReady.blockAdmision"),
        (configuration(waitForPodsReady={"requeuingStrategy": {"backoffLimit": 3}}),
         "waitForPodsReady.requeuingStrategy.backoffLimit"),
        (configuration(fairSharing={"preemptionStrategy": ["LessThanInitialShare"]}), "fairSharing.preemptionStrategy"),
        (configuration(resources={"excludedResourcePrefixes": ["example.com/"]}), "resources.excludedResourcePrefixes"),
        (configuration(resources={"transformations": [{"input": "cpu", "output": {"x": "1"}}]}),
         "resources.transformations[0].output"),
        (configuration(admissionFairSharing={"usageHalfLife": "1h"}), "admissionFairSharing.usageHalfLife"),
    ])
    def test_unknown_field_of_a_read_section(self, doc, field):
        with pytest.raises(InputError) as err:
            parse_configuration(doc, file="kueue.yaml")
        assert err.value.field == field
        assert err.value.reason.startswith(f"unknown field {field.rsplit('.', 1)[-1]!r} (Kueue's Configuration has ")

    def test_every_field_of_a_read_section_is_known(self):
        config = parse_configuration(configuration(
            resources={"excludeResourcePrefixes": [], "transformations": [], "deviceClassMappings": []},
            waitForPodsReady={"timeout": "5m", "blockAdmission": False, "recoveryTimeout": "1m",
                              "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 1,
                                                    "backoffBaseSeconds": 1, "backoffMaxSeconds": 2}},
            fairSharing={"preemptionStrategies": ["LessThanInitialShare"]},
            admissionFairSharing={"usageHalfLifeTime": "1h", "usageSamplingInterval": "1m", "resourceWeights": {}},
            namespace="kueue-system", webhook={"port": 9443}, leaderElection={"leaderElect": True},
            metrics={"bindAddress": ":8443"}, health={}, internalCertManagement={"enable": True},
            clientConnection={"qps": 50}, integrations={"frameworks": ["batch/job"]}, multiKueue={},
            objectRetentionPolicies={}, managedJobsNamespaceSelector={}, controller={}, tls={}))
        assert config.unknown_fields == () and config.warnings() == []

    def test_unknown_top_level_field_is_a_warning(self):
        config = parse_configuration(configuration(waitForPodReady={"timeout": "5m"}), file="kueue.yaml")
        assert config.wait_for_pods_ready is None
        assert config.warnings() == ["kueue.yaml: Configuration: waitForPodReady: not a field of Kueue's "
                                     "Configuration (Kueue refuses unknown fields); ignored"]

    def test_the_command_line_prints_the_warning_and_runs(self, tmp_path: Path, capsys):
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump_all([*tas_setup(), *grid(cpu="4"), workload("a", cpu="1")]))
        config = tmp_path / "kueue.yaml"
        config.write_text(yaml.safe_dump(configuration(fairsharing={})))
        assert main(["simulate", str(cluster), "--config", str(config), "--now", "2025-06-01T12:00:00Z"]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["workloads"][0]["status"] == "Admitted"
        assert captured.err.strip() == (f"warning: {config}: Configuration: fairsharing: not a field of Kueue's "
                                        "Configuration (Kueue refuses unknown fields); ignored")
