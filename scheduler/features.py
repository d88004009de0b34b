"""Kueue feature gates with their v0.19 defaults, parsed from Kueue's `K=V,...` syntax."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.errors import FlagError

# Every gate Kueue v0.19 knows, with its default at v0.19.
# Gates that change TAS behaviour are the ones the engine reads.
DEFAULTS: dict[str, bool] = {
    # Topology Aware Scheduling
    "TopologyAwareScheduling": True,
    "TASProfileMixed": True,
    "TASFailedNodeReplacement": True,
    "TASFailedNodeReplacementFailFast": True,
    "TASReplaceNodeOnPodTermination": True,
    "TASReplaceNodeDueToNotReadyOverFixedTime": False,
    "TASReplaceNodeOnNodeTaints": True,
    "SkipReassignmentForPodOwnedWorkloads": True,
    "TASBalancedPlacement": False,
    "TASAssignmentsEncodingByHostnamePrefix": True,
    "TASMultiLayerTopology": True,
    "TASHandleOverlappingFlavors": True,
    "TASRecomputeAssignmentWithinSchedulingCycle": True,
    "TASRespectNodeAffinityPreferred": False,
    "TASCacheNodeMatchResults": True,
    "TASCachingRemainingResources": True,
    "TASCacheTopologyTree": True,
    "TASValidateWorkloadSliceSize": True,
    # only lets Kueue's job webhooks accept a PodSet group with slices (v0.19.4); grouped sliced
    # PodSets are placed the same either way, as Kueue's scheduler does
    "TASGroupedPodSetSlicing": False,
    # Kueue v0.19.5 (off in its release branch): on, the leader of a PodSet group is placed on a
    # node its own node selector, tolerations and required affinity allow, anywhere in the
    # group's domain; off, it goes where its workers' constraints allow
    "TASLeaderPodSetFeasibility": False,
    # Kueue v0.19.6 (alpha, on by default): a PodSet whose count is not a multiple of its single
    # slice layer's size is placed with a partial last slice. Off, such a PodSet waits with a
    # reason instead of being placed short of pods
    "TASPartialSlices": True,
    "ElasticJobsViaWorkloadSlices": True,
    "ElasticJobsViaWorkloadSlicesWithTAS": False,
    "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": False,
    "VectorizedResourceRequests": True,
    # Scheduling, quota and preemption
    "PartialAdmission": True,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "PrioritySortingWithinCohort": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "FairSharingReevaluatePreemptionCandidates": False,
    "AdmissionFairSharing": True,
    "ReclaimablePods": True,
    "QuotaCheckStrategy": True,
    "ConcurrentAdmission": False,
    "SchedulingEquivalenceHashing": True,
    "SchedulingEquivalenceHashingIgnorePodSetName": True,
    "RecomputeAssignmentUponPreemptionTargetsOverlap": True,
    # Kueue v0.19.x (alpha): a head waiting for its preemptions is taken first across the
    # ClusterQueues of a cycle
    "PrioritizePreemptorWorkloads": False,
    # the kueue.x-k8s.io/priority-boost annotation added to the priority
    "PriorityBoost": False,
    "AdmissionGatedBy": True,
    "UnadmittedWorkloadsObservability": True,
    "UnadmittedWorkloadsExplicitStatus": False,
    "DynamicQuotaOrchestration": False,
    "SchedulerLibraryIntegration": False,
    "WorkloadPriorityClassDefaulting": False,
    # Everything else Kueue knows; accepted, not read by the engine
    "VisibilityOnDemand": True,
    "DisableWaitForPodsReady": False,
    "MultiKueue": True,
    "MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster": True,
    "MultiKueueAdaptersForCustomJobs": True,
    "MultiKueueKubeConfigPathValidation": False,
    "MultiKueueClusterProfile": False,
    "MultiKueueOrchestratedPreemption": False,
    "MultiKueueIncrementalDispatcherConfig": True,
    "MultiKueueIncrementalDispatcherRespectConfigOrder": True,
    "MultiKueueManagerQuotaAutomation": False,
    "MultiKueueRemoteSpecSync": True,
    "LocalQueueMetrics": True,
    "ManagedJobsNamespaceSelectorAlwaysRespected": True,
    "KueueDRAIntegration": True,
    "KueueDRAIntegrationExtendedResource": True,
    "KueueDRAIntegrationPartitionableDevices": True,
    "KueueDRAIntegrationConsumableCapacity": False,
    "KueueDRARejectWorkloadsWhenDRADisabled": True,
    "ReservedResourceNameValidation": True,
    "WorkloadRequestUseMergePatch": False,
    "FailureRecoveryPolicy": False,
    "TLSOptions": True,
    "RemoveFinalizersWithStrictPatch": True,
    "AssignQueueLabelsForPods": True,
    "CustomMetricLabels": False,
    "SparkApplicationIntegration": False,
    "ShortWorkloadNames": False,
    "FastQuotaReleaseInPodIntegration": False,
    "RejectUpdatesToCQWithInvalidOnFlavors": False,
    "FinishOrphanedWorkloads": True,
    "MetricForWorkloadCreationLatency": True,
    "WorkloadIdentifierAnnotations": True,
    "MetricsForCohorts": True,
    "CleanupProvisioningRequestsOnEviction": True,
    "DeferRayServiceFinalizationForRedisCleanup": True,
    "WorkloadValidateResourcesAreNonNegative": True,
    "WorkloadValidationForPodSetMetadata": True,
    "LWSImmutableGroupSize": True,
    "SkipAncestorCheckForDeletedWorkloads": True,
    "PodIntegrationValidateGroupOwner": True,
    "ValidateRayAndSparkJobUpdates": True,
    # added by Kueue's v0.19.4-v0.19.7 patch releases, for its controllers and job integrations
    "MultiKueueReuseClientConnectionConfigForWorkers": False,
    "DeploymentJobUIDLabel": False,
    "PodIntegrationCountSucceededPodsAsReady": False,
    "EnforceProvisioningPodTemplateContents": False,
    "PodGroupSchedulingShapeOrdering": True,
    "HighMaxParallelismWithinReconcile": True,
    # Kueue v0.19.6 (off there): its job webhooks and Workload builder reject a pod template's
    # podset-unconstrained-topology: "false"; off, it is an explicit request naming no level, which waits
    "TASRejectFalseUnconstrainedTopology": False,
}

# Kueue's gate dependencies: a gate reads as off while any gate it depends on is off, as Kueue's
# tests switch them (disabling a gate disables its dependents) and as its documentation's gate
# matrices play out (TASFailedNodeReplacementFailFast does nothing without TASFailedNodeReplacement)
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "TASFailedNodeReplacement": ("TopologyAwareScheduling",),
    "TASFailedNodeReplacementFailFast": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASReplaceNodeOnPodTermination": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASReplaceNodeDueToNotReadyOverFixedTime": ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    "TASBalancedPlacement": ("TopologyAwareScheduling",),
    "TASReplaceNodeOnNodeTaints": ("TopologyAwareScheduling",),
    "TASMultiLayerTopology": ("TopologyAwareScheduling",),
    "TASRespectNodeAffinityPreferred": ("TopologyAwareScheduling",),
    "UnadmittedWorkloadsExplicitStatus": ("UnadmittedWorkloadsObservability",),
    "TASHandleOverlappingFlavors": ("TopologyAwareScheduling",),
    "TASProfileMixed": ("TopologyAwareScheduling",),
    "TASRecomputeAssignmentWithinSchedulingCycle": ("TopologyAwareScheduling",),
    "ElasticJobsViaWorkloadSlicesWithTAS": ("ElasticJobsViaWorkloadSlices", "TopologyAwareScheduling"),
    "KueueDRAIntegrationExtendedResource": ("KueueDRAIntegration",),
    "KueueDRAIntegrationPartitionableDevices": ("KueueDRAIntegration",),
    "KueueDRAIntegrationConsumableCapacity": ("KueueDRAIntegration",),
    "FlavorFungibilityPreserveScanProgress": ("FlavorFungibility",),
    "SchedulingEquivalenceHashingIgnorePodSetName": ("SchedulingEquivalenceHashing",),
}

# gate values Kueue knows whose behaviour the engine does not have but which are taken (refusing
# them would stop runs that do not depend on them): whoever sets one is told
NOT_IMPLEMENTED: dict[tuple[str, bool], str] = {
    ("DynamicQuotaOrchestration", True): "quota is the ClusterQueues' and Cohorts' spec, not the effective "
                                         "quota their status may give",
    ("ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp", True): "a scaled-up workload slice is admitted "
                                                                     "whole or not at all",
    ("TASRejectFalseUnconstrainedTopology", True): "a pod template's kueue.x-k8s.io/podset-unconstrained-topology: "
                                                   "\"false\" is read, not rejected: an explicit TAS request "
                                                   "naming no level, its PodSet waits",
}

_TRUE = {"true": True, "false": False}


def gate_problem(name: str) -> str | None:
    """Why a gate of this name cannot be taken (Kueue has no such gate), or None."""
    if name not in DEFAULTS:
        return f"unknown feature gate {name!r}"
    return None


@dataclass(frozen=True)
class FeatureGates:
    """An immutable set of gate values; unset gates take their v0.19 default."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in sorted(self.overrides):
            problem = gate_problem(name)
            if problem is not None:
                raise FlagError(problem)
        # every gate resolved once, as an attribute of its own: the engine reads gates tens of
        # thousands of times a pass, and an attribute found is cheaper than `__getattr__`
        for name in DEFAULTS:
            object.__setattr__(self, name, self._resolved(name))

    def _resolved(self, name: str) -> bool:
        """The gate's value, off while a gate it depends on is off."""
        value = bool(self.overrides.get(name, DEFAULTS[name]))
        return value and all(self._resolved(p) for p in DEPENDENCIES.get(name, ()))

    def enabled(self, name: str) -> bool:
        if name not in DEFAULTS:
            raise KeyError(f"unknown feature gate {name!r}")
        return getattr(self, name)

    def __getattr__(self, name: str) -> bool:
        # gates.TASProfileMixed reads like Kueue's features.Enabled(features.TASProfileMixed)
        if name in DEFAULTS:
            return self.enabled(name)
        raise AttributeError(name)

    def warnings(self) -> list[str]:
        """The gates set to a value whose behaviour the engine does not have, each with what it
        does instead."""
        return [f"feature gate {name}={str(value).lower()} is taken but not implemented: {instead}"
                for (name, value), instead in NOT_IMPLEMENTED.items() if self.overrides.get(name) is value]

    def with_overrides(self, **values: bool) -> FeatureGates:
        return FeatureGates({**self.overrides, **values})

    def as_dict(self) -> dict[str, bool]:
        return {name: self.enabled(name) for name in DEFAULTS}

    @classmethod
    def parse(cls, text: str | None) -> FeatureGates:
        """Parse `Name=true,Other=false` as Kueue's --feature-gates flag does."""
        values: dict[str, bool] = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, raw = item.partition("=")
            name, raw = name.strip(), raw.strip().lower()
            if not sep or raw not in _TRUE:
                raise FlagError(f"--feature-gates: {item!r}: expected Name=true or Name=false")
            if name not in DEFAULTS:
                raise FlagError(f"--feature-gates: unknown feature gate {name!r}")
            values[name] = _TRUE[raw]
        return cls(values)


DEFAULT_GATES = FeatureGates()
