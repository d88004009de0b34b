"""The service follows Kueue's manager Configuration named by TAS_KUEUE_CONFIG: passes charge
quota as it says, what a pass writes carries the charged usage (so a rebuild from the
database charges the same), a changed file rebuilds the engine, and a bad file is reported
at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.checks import run_checks

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import runtime as rt
from tasweb.scheduling import services
from tests.engine.factories import HOSTNAME, pod_set, workload
from tests.engine.test_config import configuration, credits, credits_cluster
from tests.engine.test_incremental_state import quota_view

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def seed(*objects: dict) -> None:
    for obj in objects:
        object_upsert(kind=obj["kind"], obj=obj)


@pytest.fixture
def kueue_config(tmp_path: Path, settings):
    def write(doc: dict) -> Path:
        path = tmp_path / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(doc))
        settings.TAS_KUEUE_CONFIG = str(path)
        return path

    yield write
    services._configurations.clear()


def stored(name: str) -> cluster.Workload:
    return cluster.Workload.objects.get(name=name)


class TestConfigurationInPasses:
    def test_transformed_quota_is_charged_written_and_rebuilt(self, kueue_config):
        kueue_config(credits())
        seed(*credits_cluster(credit_quota="3"),
             workload("first", count=2, cpu="1", required=HOSTNAME, created=0),
             workload("second", count=2, cpu="1", required=HOSTNAME, created=10))
        services.scheduling_pass_run()
        first, second = stored("first"), stored("second")
        assert first.status == cluster.WorkloadStatus.ADMITTED
        psa = first.raw["status"]["admission"]["podSetAssignments"][0]
        assert psa["resourceUsage"] == {"cpu": "2", "example.com/credits": "2"}
        assert psa["flavors"] == {"cpu": "tas-flavor", "example.com/credits": "credits"}
        assert second.status == cluster.WorkloadStatus.INADMISSIBLE
        assert "insufficient unused quota for example.com/credits in flavor credits, 1 more needed" in second.message
        # the state built afresh from the database charges what the pass charged
        warm = rt.runtime_current()
        assert warm is not None
        fresh = rt.runtime_build(gates_text=services.engine_settings_key(), gates=services.feature_gates(),
                                 config=services.kueue_configuration()[1])
        assert quota_view(fresh.engine.state) == quota_view(warm.engine.state)

    def test_a_changed_file_rebuilds_the_engine_with_it(self, kueue_config):
        path = kueue_config(credits())
        seed(*credits_cluster(credit_quota="1"), workload("w", count=2, cpu="1", required=HOSTNAME))
        services.scheduling_pass_run()
        assert stored("w").status == cluster.WorkloadStatus.INADMISSIBLE
        before = rt.runtime_current()
        path.write_text(yaml.safe_dump(credits(per_cpu="0m")))  # a credit costs nothing now
        services.scheduling_pass_run()
        assert rt.runtime_current() is not before
        assert stored("w").status == cluster.WorkloadStatus.ADMITTED

    def test_a_bad_file_is_reported_at_start_up(self, kueue_config):
        kueue_config(credits(strategy="Keep"))
        errors = [e for e in run_checks() if e.id == "scheduling.E002"]
        assert len(errors) == 1
        assert "resources.transformations[0].strategy: must be Retain or Replace, got 'Keep'" in errors[0].msg

    def test_an_unknown_top_level_field_is_a_start_up_warning(self, kueue_config):
        path = kueue_config(configuration(waitForPodReady={"timeout": "5m"}))
        found = [(e.id, e.msg) for e in run_checks() if e.id.startswith("scheduling.")]
        assert found == [("scheduling.W001", f"TAS_KUEUE_CONFIG: {path}: Configuration: waitForPodReady: not a "
                                             "field of Kueue's Configuration (Kueue refuses unknown fields); ignored")]

    def test_an_unknown_field_of_a_read_section_is_an_error(self, kueue_config):
        kueue_config(configuration(waitForPodsReady={"timeout": "5m", "blockAdmision": True}))
        errors = [e for e in run_checks() if e.id.startswith("scheduling.")]
        assert [e.id for e in errors] == ["scheduling.E002"]
        assert "waitForPodsReady.blockAdmision: unknown field 'blockAdmision'" in errors[0].msg

    def test_no_file_is_kueues_defaults(self, settings):
        settings.TAS_KUEUE_CONFIG = ""
        assert services.kueue_configuration()[1] == services.NO_CONFIGURATION
        assert not [e for e in run_checks() if e.id.startswith("scheduling.")]


class TestFeatureGatesInTheFile:
    def test_the_files_gates_are_the_engines(self, kueue_config, settings):
        settings.TAS_FEATURE_GATES = ""
        kueue_config(configuration(featureGates={"TASBalancedPlacement": True, "TASProfileMixed": False}))
        seed(*credits_cluster(), workload("w", count=2, cpu="1", required=HOSTNAME))
        services.scheduling_pass_run()
        gates = rt.runtime_current().engine.state.gates
        assert gates.TASBalancedPlacement and not gates.TASProfileMixed
        assert not [e for e in run_checks() if e.id.startswith("scheduling.")]

    def test_gates_in_both_places_are_reported_at_start_up(self, kueue_config, settings):
        settings.TAS_FEATURE_GATES = "TASProfileMixed=false"
        kueue_config(configuration(featureGates={"TASBalancedPlacement": True}))
        errors = [e for e in run_checks() if e.id.startswith("scheduling.")]
        assert [e.id for e in errors] == ["scheduling.E001"]
        assert errors[0].msg.startswith("TAS_FEATURE_GATES and the Configuration's featureGates both set feature "
                                        "gates; Kueue takes one or the other")

    def test_a_bad_gate_in_the_file_is_reported_once(self, kueue_config, settings):
        settings.TAS_FEATURE_GATES = ""
        kueue_config(configuration(featureGates={"TASBalancedPlacment": True}))
        errors = [e for e in run_checks() if e.id.startswith("scheduling.")]
        assert [e.id for e in errors] == ["scheduling.E002"]
        assert "featureGates.TASBalancedPlacment: unknown feature gate 'TASBalancedPlacment'" in errors[0].msg


class TestQuotaCheckStrategyInTheService:
    def test_ignore_undeclared_admits_and_writes_the_declared_usage(self, kueue_config):
        kueue_config(configuration(resources={"quotaCheckStrategy": "IgnoreUndeclared"}))
        nic = {"example.com/nic": "1"}
        seed(*credits_cluster(node_extra=nic),
             workload("w", pod_sets=[pod_set(cpu="1", required=HOSTNAME, extra=nic)]))
        services.scheduling_pass_run()
        w = stored("w")
        assert w.status == cluster.WorkloadStatus.ADMITTED, w.message
        psa = w.raw["status"]["admission"]["podSetAssignments"][0]
        assert psa["flavors"] == {"cpu": "tas-flavor"}
        assert psa["resourceUsage"] == {"cpu": "1"}
        assert not [e for e in run_checks() if e.id.startswith("scheduling.")]

    def test_ignore_undeclared_with_excluded_prefixes_is_reported_at_start_up(self, kueue_config, settings):
        settings.TAS_FEATURE_GATES = ""
        path = kueue_config(configuration(resources={"quotaCheckStrategy": "IgnoreUndeclared",
                                                     "excludeResourcePrefixes": ["example.com/"]}))
        errors = [e for e in run_checks() if e.id.startswith("scheduling.")]
        assert [e.id for e in errors] == ["scheduling.E002"]
        assert errors[0].msg == (f"TAS_KUEUE_CONFIG: {path}: Configuration: resources.quotaCheckStrategy: "
                                 "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared")
        settings.TAS_FEATURE_GATES = "QuotaCheckStrategy=false"  # Kueue ignores the field then
        assert not [e for e in run_checks() if e.id.startswith("scheduling.")]


def test_a_gate_taken_without_its_behaviour_is_a_start_up_warning(settings):
    settings.TAS_FEATURE_GATES = "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp=true"
    settings.TAS_KUEUE_CONFIG = ""
    found = [(e.id, e.msg) for e in run_checks() if e.id.startswith("scheduling.")]
    assert found == [("scheduling.W002", "feature gate ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp=true "
                                         "is taken but not implemented: a scaled-up workload slice is admitted whole "
                                         "or not at all")]
