"""The simulator with a Kueue of its own (`kueue_profile`): the stand-in admits with another
profile of this engine, the service observes, and every admission is compared once."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tasweb.cluster import models as cluster
from tasweb.cluster.models import WorkloadStatus
from tasweb.scheduling.models import (
    AdmissionComparison,
    AdmissionToCompare,
    ComparisonCategory,
    EventKind,
    SchedulingPass,
    WorkloadEvent,
)
from tasweb.scheduling.services import status_merged
from tasweb.simulator.config import simulator_settings, stand_in_kueue
from tasweb.simulator.services import simulator_seed

from .conftest import START, quiet

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def with_kueue(settings):
    def use(profile: str):
        settings.TAS_SIMULATOR = {"kueue_profile": profile}
        settings.TAS_MODE = "observe"
        return quiet(initial_workloads=14, arrivals_per_minute=12, kueue_profile=profile,
                     runtime_min_seconds=20, runtime_max_seconds=40)
    return use


def test_the_stand_in_kueue_admits_and_the_service_compares_every_admission(run_ticks, with_kueue):
    config = with_kueue("BestFit")
    simulator_seed(config=config, now=START)

    def disagreement_seen() -> bool:
        return AdmissionComparison.objects.exclude(category=ComparisonCategory.SAME_DOMAINS).exists() and \
            AdmissionComparison.objects.filter(category=ComparisonCategory.SAME_DOMAINS).exists()

    reports = run_ticks(60, config=config, until=disagreement_seen)
    assert disagreement_seen(), list(AdmissionComparison.objects.values_list("category", flat=True))
    assert sum(r.kueue_admitted for r in reports) > 0
    # the service only observed: its passes admitted nothing, Kueue's admissions were observed
    assert set(SchedulingPass.objects.values_list("mode", flat=True)) == {"observe"}
    assert all(WorkloadEvent.objects.filter(kind=EventKind.ADMITTED).values_list("details__observed", flat=True))
    # once per admission: as many rows as admissions seen, none left to compare after the pass
    admitted = WorkloadEvent.objects.filter(kind=EventKind.ADMITTED).count()
    compared = AdmissionComparison.objects.count()
    assert 0 < compared <= admitted
    assert not AdmissionToCompare.objects.exists()
    pairs = list(AdmissionComparison.objects.values_list("workload_key", "admission"))
    assert len(pairs) == len(set(pairs))
    # the pods of Kueue's admissions are created, ungated by Kueue, bound and started
    run_ticks(4, config=config)
    running = cluster.Pod.objects.filter(tas=True, phase="Running")
    assert running.exists()
    assert not AdmissionToCompare.objects.exists()
    # LeastFreeCapacity (the engine's default for unconstrained requests) against Kueue's BestFit
    differing = AdmissionComparison.objects.filter(category__in=[ComparisonCategory.SAME_LEVEL_OTHER_DOMAINS,
                                                                 ComparisonCategory.DIFFERENT_LEVEL])
    for row in differing:
        assert row.engine and row.kueue and row.engine != row.kueue


def test_with_the_engines_own_profile_the_comparison_mostly_agrees(run_ticks, with_kueue):
    config = with_kueue("Default")
    simulator_seed(config=config, now=START)
    run_ticks(8, config=config)
    categories = list(AdmissionComparison.objects.values_list("category", flat=True))
    assert categories
    agreeing = categories.count(ComparisonCategory.SAME_DOMAINS)
    assert agreeing / len(categories) >= 0.7, categories


def test_without_a_profile_the_engine_admits_as_before(run_ticks, settings):
    settings.TAS_SIMULATOR = {}
    config = quiet(initial_workloads=6)
    simulator_seed(config=config, now=START)
    run_ticks(3, config=config)
    assert set(SchedulingPass.objects.values_list("mode", flat=True)) == {"control"}
    assert cluster.Workload.objects.filter(status=WorkloadStatus.ADMITTED).exists()
    assert not AdmissionComparison.objects.exists()


def test_the_profile_setting(settings):
    settings.TAS_SIMULATOR = {}
    assert simulator_settings({"TAS_SIM_KUEUE_PROFILE": "BestFit"}).kueue_profile == "BestFit"
    assert simulator_settings({}).kueue_profile == ""
    with pytest.raises(ImproperlyConfigured, match=r"TAS_SIM_KUEUE_PROFILE.*unknown profile 'Nope'"):
        simulator_settings({"TAS_SIM_KUEUE_PROFILE": "Nope"})
    settings.TAS_MODE = "control"
    assert not stand_in_kueue(quiet(kueue_profile="BestFit"))
    settings.TAS_MODE = "observe"
    assert stand_in_kueue(quiet(kueue_profile="BestFit"))


def test_a_condition_that_keeps_its_status_keeps_its_transition_time():
    old = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "a",
                           "lastTransitionTime": "2025-06-01T12:00:00Z"}]}
    new = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "b",
                           "lastTransitionTime": "2025-06-01T12:05:00Z"}]}
    assert status_merged(old, new)["conditions"][0]["lastTransitionTime"] == "2025-06-01T12:00:00Z"
    assert status_merged(old, new)["conditions"][0]["message"] == "b"
    assert "admission" not in status_merged({"admission": {}, **old}, new)
