"""Feature gates: Kueue's dependencies between them. A gate reads as off while a gate it depends
on is off, as Kueue's tests switch them and as its gate matrices play out."""

from __future__ import annotations

import json

import pytest
import yaml

from scheduler.cli import main
from scheduler.features import DEFAULTS, DEPENDENCIES, FeatureGates

from .factories import BLOCK, grid, result_of, run, tas_setup, workload


def dependents_of(name: str) -> set[str]:
    out = {d for d, parents in DEPENDENCIES.items() if name in parents}
    for d in list(out):
        out |= dependents_of(d)
    return out


def test_every_dependency_names_known_gates():
    assert set(DEPENDENCIES) <= set(DEFAULTS)
    assert {p for parents in DEPENDENCIES.values() for p in parents} <= set(DEFAULTS)


@pytest.mark.parametrize("parent", sorted({p for parents in DEPENDENCIES.values() for p in parents}))
def test_a_gate_switched_off_switches_off_its_dependents(parent):
    everything_on = {name: True for name in dependents_of(parent)}
    gates = FeatureGates({**everything_on, parent: False})
    for name in dependents_of(parent):
        assert getattr(gates, name) is False, name
        assert gates.enabled(name) is False
        assert gates.as_dict()[name] is False
    # and on again, they are back
    assert all(getattr(FeatureGates(everything_on), name) for name in everything_on)


def test_gates_without_dependencies_keep_their_values():
    gates = FeatureGates.parse("TopologyAwareScheduling=false")
    assert gates.PartialAdmission and gates.FlavorFungibility and gates.PrioritySortingWithinCohort
    assert not gates.TASProfileMixed and not gates.TASFailedNodeReplacementFailFast


def test_fail_fast_needs_node_replacement():
    """Kueue's node-replacement matrix: TASFailedNodeReplacementFailFast does nothing without
    TASFailedNodeReplacement."""
    gates = FeatureGates.parse("TASFailedNodeReplacement=false,TASFailedNodeReplacementFailFast=true,"
                               "TASReplaceNodeOnPodTermination=true")
    assert not gates.TASFailedNodeReplacementFailFast and not gates.TASReplaceNodeOnPodTermination
    assert gates.TopologyAwareScheduling


def test_a_dependent_asked_for_without_its_dependency_changes_nothing():
    objects = [*tas_setup(), *grid(cpu="4"), workload("a", count=3, cpu="1", required=BLOCK)]
    off = run(objects, feature_gates=FeatureGates.parse("TopologyAwareScheduling=false"))
    also_balanced = run(objects, feature_gates=FeatureGates.parse(
        "TopologyAwareScheduling=false,TASBalancedPlacement=true,TASProfileMixed=true"))
    assert result_of(off, "a").status == result_of(also_balanced, "a").status == "Admitted"
    assert result_of(off, "a").pod_sets[0].assignment is None
    assert result_of(also_balanced, "a").pod_sets[0].assignment is None


@pytest.mark.parametrize("name", ["DynamicQuotaOrchestration", "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp",
                                  "TASRejectFalseUnconstrainedTopology"])
def test_a_gate_taken_without_its_behaviour_is_said(name):
    [warning] = FeatureGates.parse(f"{name}=true").warnings()
    assert warning.startswith(f"feature gate {name}=true is taken but not implemented: ")
    assert FeatureGates.parse(f"{name}=false").warnings() == []
    assert FeatureGates().warnings() == []


def test_the_command_line_prints_it_and_runs(tmp_path, capsys):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([*tas_setup(), *grid(cpu="4"), workload("a", cpu="1")]))
    assert main(["simulate", str(cluster), "--now", "2025-06-01T12:00:00Z",
                 "--feature-gates", "DynamicQuotaOrchestration=true"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["workloads"][0]["status"] == "Admitted"
    assert captured.err.strip() == ("warning: feature gate DynamicQuotaOrchestration=true is taken but not "
                                    "implemented: quota is the ClusterQueues' and Cohorts' spec, not the effective "
                                    "quota their status may give")


def test_an_unconstrained_false_annotation_asks_for_no_level():
    """Kueue's builder reads the annotation "false" as an explicit TAS request (its
    IsExplicitlyRequestingTAS counts `unconstrained` set at all) that names no level: no TAS
    flavor holds it and it waits (Kueue v0.19.6's TASRejectFalseUnconstrainedTopology, off by
    default, rejects the Job instead)."""
    wl = workload("a", cpu="1")
    wl["spec"]["podSets"][0]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "false"}}
    result = result_of(run([*tas_setup(), *grid(cpu="4"), wl]), "a")
    assert result.status != "Admitted"
    assert result.message == ("couldn't assign flavors to pod set main: Flavor \"tas-flavor\" does not contain the "
                              "requested level")
