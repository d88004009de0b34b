"""The shapes of the API's answers, with every field described (they make the OpenAPI
schema). Views build plain dicts with the selectors and these serializers document them;
large answers (capacity trees, 10,000-domain assignments) are not run through DRF fields."""

from __future__ import annotations

from rest_framework import serializers as s

from tasweb.cluster.models import WorkloadStatus
from tasweb.scheduling.models import ComparisonCategory, EventKind

QUANTITIES = "resource name -> quantity in Kubernetes notation (cpu \"32\", memory \"128Gi\", nvidia.com/gpu \"8\")"


def quantity_map(help_text: str) -> s.DictField:
    return s.DictField(child=s.CharField(), help_text=f"{help_text}; {QUANTITIES}")


def string_list(help_text: str, **kwargs) -> s.ListField:
    return s.ListField(child=s.CharField(), help_text=help_text, **kwargs)


def label_map(help_text: str, **kwargs) -> s.DictField:
    return s.DictField(child=s.CharField(allow_blank=True), help_text=help_text, **kwargs)


# ---------------------------------------------------------------- errors


class ErrorItemSerializer(s.Serializer):
    field = s.CharField(allow_blank=True, help_text="the parameter or field path at fault (\"\" when none)")
    message = s.CharField(help_text="what is wrong with it")
    object = s.CharField(required=False, allow_blank=True,
                         help_text="for objects of a what-if body: Kind/namespace/name of the object at fault")
    file = s.CharField(required=False, allow_blank=True, help_text="for what-if: \"request body\"")


class ErrorSerializer(s.Serializer):
    detail = s.CharField(help_text="one line for people")
    code = s.CharField(help_text="machine-readable reason: invalid, not_found, not_authenticated, "
                       "permission_denied, throttled, payload_too_large, parse_error, ...")
    errors = ErrorItemSerializer(many=True, help_text="one entry per field at fault (empty for errors that "
                                 "concern no field)")


# ---------------------------------------------------------------- topologies, flavors, trees


class TopologySerializer(s.Serializer):
    name = s.CharField(help_text="the Topology's name")
    levels = string_list("node labels of the levels, from the highest (e.g. block) to the lowest (e.g. "
                     "kubernetes.io/hostname)")
    flavors = string_list("ResourceFlavors that use this Topology (spec.topologyName)")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


class TaintSerializer(s.Serializer):
    key = s.CharField(help_text="taint key")
    value = s.CharField(allow_blank=True, help_text="taint value (may be empty)")
    effect = s.CharField(allow_blank=True, help_text="NoSchedule, PreferNoSchedule or NoExecute")
    timeAdded = s.CharField(allow_null=True, required=False, help_text="when the taint was added (RFC 3339), "
                            "null when unknown")


class ResourceFlavorSerializer(s.Serializer):
    name = s.CharField(help_text="the ResourceFlavor's name")
    nodeLabels = label_map("labels a node must carry to provide this flavor (spec.nodeLabels)")
    topologyName = s.CharField(allow_null=True, help_text="the Topology of a TAS flavor; null for a flavor "
                               "without topology")
    tas = s.BooleanField(help_text="whether the engine schedules this flavor topology-aware (a Topology it "
                         "can read, with nodes)")
    nodeTaints = s.ListField(child=s.JSONField(), help_text="spec.nodeTaints, as in the object")
    tolerations = s.ListField(child=s.JSONField(), help_text="spec.tolerations, as in the object")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


class DomainSerializer(s.Serializer):
    id = s.CharField(help_text="the domain's path of level values from the root joined by \"/\", e.g. b1/r3; "
                     "use it as the `domain` filter of workloads and history")
    level = s.IntegerField(help_text="index of the domain's level, 0 = the highest")
    levelKey = s.CharField(help_text="node label of the domain's level")
    name = s.CharField(help_text="the domain's value at its own level (e.g. r3)")
    values = string_list("values of every level from the root down to this domain")
    parent = s.CharField(allow_null=True, help_text="id of the parent domain; null at the highest level")
    nodes = s.IntegerField(help_text="nodes in the domain that the flavor selects and that can take pods")
    allocatable = quantity_map("allocatable capacity of those nodes")
    tasUsage = quantity_map("requests of the TAS workloads admitted in the domain")
    nonTasUsage = quantity_map("requests of other pods running on the domain's nodes")
    free = quantity_map("allocatable minus both usages (negative when over-committed)")
    workloads = string_list("Workloads (namespace/name) with pods in the domain, sorted, at most 50")
    workloadCount = s.IntegerField(help_text="number of Workloads with pods in the domain")


class TopologyTreeSerializer(s.Serializer):
    flavor = s.CharField(help_text="the TAS ResourceFlavor")
    topology = s.CharField(help_text="its Topology")
    levels = string_list("the Topology's levels, highest first")
    nodes = s.IntegerField(help_text="nodes in the tree")
    domains = DomainSerializer(many=True, help_text="every domain at every level (filtered by depth/domain when "
                               "asked), level by level from the highest, each level in path order")


# ---------------------------------------------------------------- nodes


class NodeSerializer(s.Serializer):
    name = s.CharField(help_text="the Node's name")
    hostname = s.CharField(help_text="its kubernetes.io/hostname label (the name TopologyAssignments use)")
    labels = label_map("all labels of the node")
    levels = label_map("the node's value for every topology level it has a label for: level -> value")
    allocatable = quantity_map("status.allocatable")
    taints = TaintSerializer(many=True, help_text="spec.taints")
    unschedulable = s.BooleanField(help_text="spec.unschedulable (cordoned)")
    ready = s.CharField(allow_null=True, help_text="status of the Ready condition: True, False or Unknown; null "
                        "when the node reports none")
    readySince = s.DateTimeField(allow_null=True, help_text="last transition time of the Ready condition")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


class NodeDetailSerializer(NodeSerializer):
    workloads = string_list("Workloads (namespace/name) with pods assigned to this node")


# ---------------------------------------------------------------- queues


class ResourceQuotaSerializer(s.Serializer):
    name = s.CharField(help_text="resource name")
    nominalQuota = s.CharField(help_text="nominal quota")
    borrowingLimit = s.CharField(allow_null=True, help_text="borrowing limit; null when unlimited")
    lendingLimit = s.CharField(allow_null=True, help_text="lending limit; null when unlimited")
    usage = s.CharField(required=False, help_text="quota used by the Workloads that hold a reservation "
                        "(ClusterQueues only)")
    available = s.CharField(required=False, help_text="nominal quota minus usage, at least 0 (ClusterQueues only)")


class FlavorQuotaSerializer(s.Serializer):
    name = s.CharField(help_text="the ResourceFlavor")
    resources = ResourceQuotaSerializer(many=True, help_text="quota per resource")


class ResourceGroupSerializer(s.Serializer):
    coveredResources = string_list("resources this group covers")
    flavors = FlavorQuotaSerializer(many=True, help_text="flavors in order of preference, with their quota")


class QueueCountsSerializer(s.Serializer):
    waitingWorkloads = s.IntegerField(help_text="Workloads waiting for admission: status Pending or Inadmissible "
                                      "(the Workloads `/api/v1/workloads/?status=waiting` lists)")
    pendingWorkloads = s.IntegerField(help_text="Workloads in the queue, as Kueue counts them: the waiting ones "
                                      "and the Evicted and Preempted ones it has requeued")
    activePendingWorkloads = s.IntegerField(help_text="Workloads in the queue not found inadmissible (Pending, "
                                            "Evicted, Preempted)")
    inadmissibleWorkloads = s.IntegerField(help_text="Workloads in the queue the last pass found inadmissible")
    reservingWorkloads = s.IntegerField(help_text="Workloads holding quota (QuotaReserved or Admitted)")
    admittedWorkloads = s.IntegerField(help_text="Workloads admitted")


class ActiveConditionSerializer(s.Serializer):
    status = s.CharField(help_text="True when the queue takes workloads, False when it does not")
    reason = s.CharField(help_text="Kueue's reason: Ready, Stopped; for a ClusterQueue FlavorNotFound, "
                         "AdmissionCheckNotFound, AdmissionCheckInactive, TopologyNotFound or a MultiKueue misuse; for "
                         "a LocalQueue ClusterQueueDoesNotExist or ClusterQueueIsInactive")
    message = s.CharField(help_text="Kueue's message, e.g. \"Can't admit new workloads: references missing "
                          "ResourceFlavor(s): gpu.\"")


class ClusterQueueSerializer(s.Serializer):
    name = s.CharField(help_text="the ClusterQueue's name")
    cohort = s.CharField(allow_null=True, help_text="the Cohort it belongs to; null when none")
    queueingStrategy = s.CharField(allow_null=True, help_text="BestEffortFIFO or StrictFIFO")
    namespaceSelector = s.JSONField(allow_null=True, help_text="spec.namespaceSelector (matchLabels, "
                                    "matchExpressions): the namespaces whose workloads it admits, matched as Kueue "
                                    "matches it against the mirrored Namespaces' labels; {} selects every namespace, "
                                    "null none. Not checked while the mirror holds no Namespaces (the simulator)")
    stopPolicy = s.CharField(help_text="spec.stopPolicy: None, Hold (admits nothing more) or HoldAndDrain (also "
                             "evicts its admitted workloads)")
    active = ActiveConditionSerializer(allow_null=True, help_text="Kueue's Active condition of the ClusterQueue: "
                                       "whether it admits, and if not why; null when the engine cannot read it")
    cohortCycle = s.ListField(child=s.CharField(), allow_null=True,
                              help_text="when its Cohort's parent chain runs into a cycle of Cohorts: that chain, "
                                        "to the first Cohort it repeats. Kueue admits nothing here until the cycle "
                                        "is broken, though the Active condition says Ready; null otherwise")
    admissionMode = s.CharField(allow_null=True, help_text="spec.admissionScope.admissionMode: "
                                "UsageBasedAdmissionFairSharing or NoAdmissionFairSharing; null when unset")
    ordersByLocalQueueUsage = s.BooleanField(help_text="whether its workloads are ordered by their LocalQueues' "
                                             "usage first (admission fair sharing: the admissionMode above, Kueue's "
                                             "admissionFairSharing configured and its gate on)")
    flavors = string_list("ResourceFlavors of its resource groups")
    resourceGroups = ResourceGroupSerializer(many=True, help_text="quota and current usage per flavor and "
                                             "resource, as the engine counts them")
    localQueues = string_list("LocalQueues (namespace/name) that point to it")
    counts = QueueCountsSerializer(help_text="Workloads per state")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


class AdmissionFairSharingStatusSerializer(s.Serializer):
    consumedResources = s.DictField(child=s.CharField(), help_text="the decayed usage per resource, as quantities")
    lastUpdate = s.DateTimeField(required=False, help_text="when the usage was last sampled")


class LocalQueueFairSharingSerializer(s.Serializer):
    weight = s.FloatField(help_text="spec.fairSharing.weight (default 1): admission fair sharing divides the "
                          "LocalQueue's usage by it")
    usage = s.FloatField(allow_null=True, help_text="the number its ClusterQueue orders its workloads by, lowest "
                         "first: consumed resources and the penalties of admissions not yet sampled, weighed by "
                         "resourceWeights, divided by the weight; null without admissionFairSharing (or past any "
                         "number: weight 0)")
    ordersByUsage = s.BooleanField(help_text="whether its ClusterQueue orders by that usage")
    admissionFairSharingStatus = AdmissionFairSharingStatusSerializer(
        allow_null=True, help_text="status.fairSharing.admissionFairSharingStatus as last written (by Kueue, or by "
        "this service's passes where it admits); null when none was")


class LocalQueueSerializer(s.Serializer):
    namespace = s.CharField(help_text="the LocalQueue's namespace")
    name = s.CharField(help_text="the LocalQueue's name")
    clusterQueue = s.CharField(help_text="the ClusterQueue it submits to")
    stopPolicy = s.CharField(help_text="spec.stopPolicy: None, Hold (admits nothing more) or HoldAndDrain (also "
                             "evicts its admitted workloads)")
    active = ActiveConditionSerializer(allow_null=True, help_text="Kueue's Active condition of the LocalQueue "
                                       "(reasons Ready, Stopped, ClusterQueueDoesNotExist, ClusterQueueIsInactive); "
                                       "null when the engine cannot read it")
    counts = QueueCountsSerializer(help_text="Workloads per state")
    fairSharing = LocalQueueFairSharingSerializer(allow_null=True, help_text="admission fair sharing: its weight and "
                                                  "usage; null when the engine cannot read it")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


class CohortSerializer(s.Serializer):
    name = s.CharField(help_text="the Cohort's name")
    parent = s.CharField(allow_null=True, help_text="the parent Cohort; null at the root")
    clusterQueues = string_list("ClusterQueues in this Cohort")
    children = string_list("Cohorts whose parent is this one")
    resourceGroups = ResourceGroupSerializer(many=True, help_text="quota the Cohort itself provides")
    cycle = s.ListField(child=s.CharField(), allow_null=True,
                        help_text="when its parent chain runs into a cycle of Cohorts: that chain, from this Cohort "
                                  "to the first one it repeats (Kueue holds every ClusterQueue under the cycle "
                                  "inactive until it is broken); null otherwise")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")


# ---------------------------------------------------------------- workloads


class PredictedDomainSerializer(s.Serializer):
    values = string_list("the domain's value at each level of the assignment")
    count = s.IntegerField(help_text="pods in the domain")


class PredictedTopologySerializer(s.Serializer):
    levels = string_list("the levels the assignment names")
    domains = PredictedDomainSerializer(many=True, help_text="one row per domain")


class PredictedPlacementSerializer(s.Serializer):
    podSet = s.CharField(help_text="the PodSet")
    count = s.IntegerField(help_text="pods it would admit")
    flavors = label_map("resource -> ResourceFlavor it would be assigned")
    flavor = s.CharField(allow_null=True, help_text="the flavor (the first of them by name); null when none")
    topologyAssignment = PredictedTopologySerializer(allow_null=True, help_text="the TopologyAssignment it would "
                                                     "get, decoded; null for a PodSet without topology")


class RuntimeEstimateSerializer(s.Serializer):
    low = s.FloatField(required=False, help_text="seconds, low end (p10 of the learned runs)")
    median = s.FloatField(required=False, help_text="seconds, the expected runtime")
    high = s.FloatField(required=False, help_text="seconds, high end (p90 of the learned runs)")
    source = s.CharField(required=False, help_text="where it comes from")
    detail = s.CharField(required=False, allow_blank=True, help_text="which annotation, deadline or class of runs")
    problems = string_list("annotations that could not be read (ignored)", required=False)


class CalibrationSerializer(s.Serializer):
    coverage = s.FloatField(help_text="the share of actual starts the range is calibrated to hold")
    outcomes = s.IntegerField(help_text="the earlier predictions, checked against their workloads' admission, it "
                              "was calibrated on: those that expected a wait in the same band as this one")
    waitFrom = s.FloatField(help_text="the band of expected waits (time - estimatedAt, at least a minute) this "
                            "prediction's is in, from this many seconds")
    waitTo = s.FloatField(allow_null=True, help_text="to this many seconds (excluded); null: no upper end")
    below = s.FloatField(help_text="`earliest` is this share of the expected wait (time - estimatedAt, at least a "
                         "minute) earlier than `playsEarliest`")
    above = s.FloatField(help_text="`latest` is this share of the expected wait later than `playsLatest`")


class PredictedStartSerializer(s.Serializer):
    time = s.DateTimeField(allow_null=True, help_text="when it is expected to be admitted (the play with median "
                           "runtimes); null when that play did not admit it (`reason` says why)")
    earliest = s.DateTimeField(allow_null=True, help_text="the start of the range: the plays' own "
                               "(`playsEarliest`), moved earlier as `calibration` says; null when no play admitted it")
    latest = s.DateTimeField(allow_null=True, help_text="the end of the range: the plays' own (`playsLatest`), "
                             "moved later as `calibration` says; null when the plays did not all admit it within "
                             "the horizon")
    playsEarliest = s.DateTimeField(allow_null=True, help_text="the range of the plays themselves (with sampled "
                                    "plays, their 10th percentile; else the play with low runtimes)")
    playsLatest = s.DateTimeField(allow_null=True, help_text="(with sampled plays, their 90th percentile; else the "
                                  "play with high runtimes)")
    calibration = CalibrationSerializer(allow_null=True, help_text="how the range was widened so that it holds the "
                                        "actual start `coverage` of the time, from what earlier predictions missed by "
                                        "(TAS_ETA_COVERAGE); null when it was not (off, or too few outcomes yet)")
    end = s.DateTimeField(allow_null=True, help_text="`time` plus its expected (median) runtime")
    source = s.ChoiceField(choices=["annotation", "activeDeadlineSeconds", "history", "default"],
                           help_text="where its expected runtime comes from: the kueue.x-k8s.io/expected-runtime "
                           "annotation, the pod templates' activeDeadlineSeconds, the history of finished "
                           "workloads, or the default")
    runtime = RuntimeEstimateSerializer(help_text="its expected runtime")
    placement = PredictedPlacementSerializer(many=True, help_text="per PodSet, the placement the play gave it; "
                                             "empty without a time")
    reason = s.CharField(allow_null=True, help_text="why there is no time (not within the horizon, out of the "
                         "estimate's time budget, not admitted when nothing more is due, never admitted since "
                         "its flavor's topology cannot hold it); null with one")
    playedUntil = s.DateTimeField(allow_null=True, help_text="with no time because the play stopped short (out of "
                                  "the estimate's time budget, or at the horizon): how far it got, without starting "
                                  "it; null otherwise")
    estimatedAt = s.DateTimeField(help_text="the time the queue was played forward from (the pass's)")


def predicted_start_field() -> PredictedStartSerializer:
    return PredictedStartSerializer(allow_null=True, help_text="when the Workload is expected to start, from "
                                    "the queue played forward after the last pass (TAS_ETA_*); null when it is "
                                    "not queued, or no estimate covered it yet")


class WorkloadSummarySerializer(s.Serializer):
    namespace = s.CharField(help_text="the Workload's namespace")
    name = s.CharField(help_text="the Workload's name")
    uid = s.CharField(help_text="metadata.uid (or a stand-in for objects loaded without one)")
    queueName = s.CharField(allow_blank=True, help_text="the LocalQueue it was submitted to (spec.queueName)")
    clusterQueue = s.CharField(allow_null=True, help_text="the ClusterQueue that admitted it, or that its "
                               "LocalQueue points to; null when unknown")
    status = s.ChoiceField(choices=WorkloadStatus.choices, help_text="where the Workload stands, from its "
                           "conditions")
    message = s.CharField(allow_blank=True, help_text="the reason Kueue (or the engine) gives for the status: "
                          "why pending, why evicted")
    priority = s.IntegerField(help_text="spec.priority")
    podCount = s.IntegerField(help_text="pods over all pod sets")
    unhealthyNodes = string_list("status.unhealthyNodes: nodes the Workload must leave")
    createdAt = s.DateTimeField(allow_null=True, help_text="metadata.creationTimestamp")
    admittedAt = s.DateTimeField(allow_null=True, help_text="when it was admitted; null when it is not")
    finishedAt = s.DateTimeField(allow_null=True, help_text="when it finished; null when it has not")
    invalidReason = s.CharField(allow_null=True, help_text="why the engine cannot read the object; null when it can")
    predictedStart = predicted_start_field()


class SliceSplitSerializer(s.Serializer):
    topology = s.CharField(help_text="the level of the outermost slice layer: each slice is held by one domain there")
    size = s.IntegerField(help_text="pods in a whole slice")
    whole = s.IntegerField(help_text="whole slices: count / size")
    partial = s.IntegerField(help_text="pods of the partial last slice (TASPartialSlices, a single layer only): "
                             "count % size; 0 when the count divides")
    layers = s.IntegerField(help_text="slice layers the request names (more than one: "
                            "podsetSliceRequiredTopologyConstraints)")


class PodSetSerializer(s.Serializer):
    name = s.CharField(help_text="the PodSet's name")
    count = s.IntegerField(allow_null=True, help_text="number of pods")
    minCount = s.IntegerField(allow_null=True, help_text="minimum count for partial admission; null when unset")
    topologyRequest = s.JSONField(allow_null=True, help_text="spec.podSets[].topologyRequest as in the object "
                                  "(required / preferred / unconstrained level, slices, group), or "
                                  "{\"fromAnnotations\": ...} for the pod template annotations Kueue translates; "
                                  "null when the PodSet asks for no topology")
    requests = quantity_map("requests of one pod")
    slices = SliceSplitSerializer(allow_null=True, help_text="how the pods are cut into slices; null when the "
                                  "PodSet is not placed by slices (none asked for, or a group's one-pod leader)")


class DecodedDomainSerializer(s.Serializer):
    values = string_list("the domain's value at every level of the Topology, from the highest")
    count = s.IntegerField(help_text="pods in the domain")
    node = s.CharField(allow_null=True, help_text="the node (hostname) when the lowest level is the hostname")


class DecodedAssignmentSerializer(s.Serializer):
    levels = string_list("every level of the flavor's Topology, highest first")
    domains = DecodedDomainSerializer(many=True, help_text="one row per domain, in the assignment's order")


class IndividualValuesSerializer(s.Serializer):
    prefix = s.CharField(required=False, help_text="common prefix of the values")
    suffix = s.CharField(required=False, help_text="common suffix of the values")
    roots = string_list("the values without prefix and suffix, one per domain")


class LevelValuesSerializer(s.Serializer):
    universal = s.CharField(required=False, help_text="the one value every domain of the slice has")
    individual = IndividualValuesSerializer(required=False, help_text="one value per domain")


class PodCountsSerializer(s.Serializer):
    universal = s.IntegerField(required=False, help_text="the pod count of every domain of the slice")
    individual = s.ListField(child=s.IntegerField(), required=False, help_text="one pod count per domain")


class SliceSerializer(s.Serializer):
    domainCount = s.IntegerField(help_text="domains in the slice")
    valuesPerLevel = LevelValuesSerializer(many=True, help_text="values of the domains, one entry per level")
    podCounts = PodCountsSerializer(help_text="pods per domain")


class EncodedAssignmentSerializer(s.Serializer):
    levels = string_list("the levels the assignment names (only the hostname when it is the lowest level)")
    slices = SliceSerializer(many=True, help_text="the domains, compressed as Kueue's v1beta2 API stores them")


class PodSetAssignmentSerializer(s.Serializer):
    name = s.CharField(help_text="the PodSet")
    flavors = label_map("resource -> ResourceFlavor assigned")
    flavor = s.CharField(allow_null=True, help_text="the TAS flavor among them; null when none")
    count = s.IntegerField(help_text="pods admitted")
    delayedTopologyRequest = s.CharField(allow_null=True, help_text="Pending or Ready for a two-pass (provisioning) "
                                         "admission; null otherwise")
    levels = string_list("levels of the stored assignment")
    topologyLevels = string_list("every level of the flavor's Topology")
    encoded = EncodedAssignmentSerializer(allow_null=True, help_text="the v1beta2 TopologyAssignment exactly as "
                                          "Kueue stores it (keys in Kueue's order, so its compact JSON is "
                                          "byte-for-byte Kueue's); null for a pod set without topology")
    decoded = DecodedAssignmentSerializer(allow_null=True, help_text="the same assignment decoded, one row per "
                                          "domain with the value of every level; null without topology")


class AdmissionSerializer(s.Serializer):
    clusterQueue = s.CharField(allow_blank=True, help_text="the ClusterQueue that admitted the Workload")
    podSetAssignments = PodSetAssignmentSerializer(many=True, help_text="one per PodSet")


class AssignmentSerializer(s.Serializer):
    namespace = s.CharField(help_text="the Workload's namespace")
    name = s.CharField(help_text="the Workload's name")
    status = s.ChoiceField(choices=WorkloadStatus.choices, help_text="the Workload's status")
    podSetAssignments = PodSetAssignmentSerializer(many=True, help_text="one per admitted PodSet (empty when "
                                                   "not admitted)")


class WorkloadDetailSerializer(WorkloadSummarySerializer):
    podSets = PodSetSerializer(many=True, help_text="spec.podSets with their topology requests")
    conditions = s.ListField(child=s.JSONField(), help_text="status.conditions as in the object")
    admission = AdmissionSerializer(allow_null=True, help_text="status.admission with each PodSet's "
                                    "TopologyAssignment encoded and decoded; null when not admitted")
    object = s.JSONField(help_text="the Workload object as the source last reported it")


# ---------------------------------------------------------------- why pending


class SuggestionSerializer(s.Serializer):
    kind = s.ChoiceField(choices=["higher-level", "fewer-pods", "free-capacity", "free-quota", "preemption",
                                  "never-fits", "fits-now", "quota-only", "topology-full", "exceeds-quota",
                                  "room-freed", "quota-changed"],
                         help_text="the change that would make it fit")
    message = s.CharField(help_text="the change in plain words")
    details = s.DictField(help_text="its parameters: level and domain, count, workloads, ...")


class LevelFitSerializer(s.Serializer):
    level = s.CharField(help_text="a topology level")
    needed = s.IntegerField(help_text="pods (or slices) the PodSet needs")
    unit = s.ChoiceField(choices=["pod", "slice"], help_text="what needed and the fits count")
    bestDomain = string_list("the domain at this level that can take the most (path of values)")
    bestFits = s.IntegerField(help_text="how many it can take")
    domains = s.IntegerField(help_text="domains at this level")
    domainsThatFit = s.IntegerField(help_text="domains that can take all that is needed")
    totalFits = s.IntegerField(help_text="how many all the level's domains can take together")
    message = s.CharField(help_text="the same in plain words")


class ExclusionsSerializer(s.Serializer):
    nodesOfFlavor = s.IntegerField(help_text="nodes with the flavor's labels")
    inTopology = s.IntegerField(help_text="of those, the usable ones in the topology tree")
    notReady = s.IntegerField(help_text="excluded: not Ready (or being deleted)")
    unschedulable = s.IntegerField(help_text="excluded: cordoned")
    missingLevelLabel = s.IntegerField(help_text="excluded: no label for some topology level")
    taints = s.DictField(child=s.IntegerField(), help_text="excluded per taint the pod set does not tolerate")
    nodeSelector = s.IntegerField(help_text="excluded: not matching the pod set's nodeSelector")
    affinity = s.IntegerField(help_text="excluded: not matching its node affinity")
    resources = s.DictField(child=s.IntegerField(), help_text="excluded per resource: not enough free for one pod")
    messages = string_list("the exclusions in plain words")


class PodSetExplanationSerializer(s.Serializer):
    name = s.CharField(help_text="the PodSet")
    count = s.IntegerField(help_text="pods it asks for")
    flavor = s.CharField(allow_null=True, help_text="the flavor considered")
    mode = s.CharField(allow_null=True, help_text="required, preferred, unconstrained, implied or none")
    level = s.CharField(allow_null=True, help_text="the level asked for")
    sliceLevel = s.CharField(allow_null=True, help_text="the slice level, when slices are asked for")
    sliceSize = s.IntegerField(help_text="pods per slice (1 without slices)")
    fits = s.BooleanField(help_text="whether it would fit now")
    reason = s.CharField(allow_blank=True, help_text="the engine's reason, as Kueue words it")
    message = s.CharField(help_text="the PodSet's situation in plain words")
    levels = LevelFitSerializer(many=True, help_text="per level, highest first: the best domain against the need")
    exclusions = ExclusionsSerializer(allow_null=True, help_text="nodes left out and why; null when not computed")
    suggestions = SuggestionSerializer(many=True, help_text="smallest changes that would make this PodSet fit")


class QuotaLineSerializer(s.Serializer):
    flavor = s.CharField(help_text="ResourceFlavor")
    resource = s.CharField(help_text="resource")
    requested = s.CharField(help_text="what the Workload requests")
    nominal = s.CharField(help_text="nominal quota of the ClusterQueue")
    used = s.CharField(help_text="in use by admitted Workloads")
    available = s.CharField(help_text="nominal minus used")
    fits = s.BooleanField(help_text="whether the request fits in what is available")
    source = s.ChoiceField(choices=["cycle", "now"], help_text="cycle: the numbers the scheduling cycle used when it "
                           "decided (its holds and admissions included); now: computed when asked, the cycle's "
                           "decision overrides it")
    message = s.CharField(help_text="the line in plain words")


class StopSerializer(s.Serializer):
    step = s.CharField(help_text="the step that stopped the Workload: not-head, quota, quota-held, quota-limit, "
                       "exceeds-quota, no-flavor, preemption-pending, no-candidates, overlapping-targets, topology, "
                       "topology-held, flavors-left, waiting-pods-ready, misconfigured, failed-admission-checks, "
                       "preemption-gated, orphan, "
                       "backoff, concurrent-admission-parent (its variants are scheduled, not it), not-evaluated")
    message = s.CharField(help_text="the step in one line, with its numbers")
    verdict = s.ChoiceField(choices=["waits", "fits", "preempting", "not-evaluated"],
                            help_text="what the next pass does with it when nothing changes")
    evaluated = s.BooleanField(help_text="true: the scheduling cycle's record; false: computed when asked")
    blocking = string_list("the workloads that stop it: the head it is behind, the head holding the quota, "
                           "preemption targets, a ConcurrentAdmission parent's variants")
    at = s.CharField(allow_null=True, help_text="when the pass that decided ran (RFC 3339)")
    # "pass" is a Python keyword: the field is declared below
    cycle = s.IntegerField(allow_null=True, help_text="the scheduling cycle that decided")
    parked = s.BooleanField(help_text="parked as inadmissible until an event requeues it")
    requeueOn = string_list("the events that requeue it")
    representative = s.CharField(allow_null=True, help_text="the workload whose evaluation this is (a parked "
                                 "equivalence class shares one)")
    reason = s.CharField(allow_blank=True, help_text="Kueue's condition message the cycle wrote")
    details = s.DictField(help_text="the step's numbers: position and head, targets, pod set, level, limits, ...")


StopSerializer._declared_fields["pass"] = s.IntegerField(allow_null=True, help_text="the pass that decided")


class ExplanationSerializer(s.Serializer):
    clusterQueue = s.CharField(allow_null=True, help_text="the ClusterQueue considered")
    fits = s.BooleanField(help_text="true only when the next pass admits it (verdict fits)")
    verdict = s.ChoiceField(choices=["waits", "fits", "preempting", "not-evaluated"],
                            help_text="what the next pass does with it when nothing changes")
    summary = s.CharField(help_text="the reason in one line")
    stop = StopSerializer(allow_null=True, help_text="where the scheduler stopped it")
    quota = QuotaLineSerializer(many=True, help_text="requested against quota and usage")
    podSets = PodSetExplanationSerializer(many=True, help_text="per PodSet")
    suggestions = SuggestionSerializer(many=True, help_text="all suggestions, the Workload's and its PodSets'")


class AdmissionCheckStateSerializer(s.Serializer):
    name = s.CharField(help_text="the AdmissionCheck")
    state = s.ChoiceField(choices=["Pending", "Ready", "Retry", "Rejected"], help_text="as its controller set it")
    message = s.CharField(allow_blank=True, help_text="its controller's message")
    retryCount = s.IntegerField(allow_null=True, help_text="how many times the check asked for a retry (counted "
                                "at each eviction it caused)")
    requeueAfterSeconds = s.IntegerField(allow_null=True, help_text="the delay its controller asks for before the "
                                         "workload is tried again after an eviction (KEP-3258)")


class AdmissionWaitSerializer(s.Serializer):
    clusterQueue = s.CharField(help_text="the ClusterQueue the quota is reserved in")
    reservedSince = s.DateTimeField(allow_null=True, help_text="when the reservation was made (QuotaReserved)")
    step = s.ChoiceField(choices=["admission-checks", "second-pass", "reservation-taken-back", "evicted-by-check"],
                         help_text="what it waits for: its admission checks; the second pass placing its "
                                   "TopologyAssignment; or Kueue's workload controller, taking the reservation "
                                   "back (its queue stopped or gone) or acting on a check in Retry or Rejected")
    summary = s.CharField(help_text="the same in one line")
    admissionChecks = AdmissionCheckStateSerializer(
        many=True, help_text="the checks its ClusterQueue asks for on its flavors, by name, in the states the Workload "
                             "lists (Pending for one not listed yet, as Kueue's workload controller adds it)")
    delayedPodSets = s.ListField(child=s.CharField(), help_text="PodSets whose TopologyAssignment waits for "
                                 "the second pass")


class WhyPendingSerializer(s.Serializer):
    namespace = s.CharField(help_text="the Workload's namespace")
    name = s.CharField(help_text="the Workload's name")
    status = s.ChoiceField(choices=WorkloadStatus.choices, help_text="its stored status")
    message = s.CharField(allow_blank=True, help_text="its stored status message")
    pending = s.BooleanField(help_text="whether it waits (and so has an explanation)")
    summary = s.CharField(help_text="why it waits, in one line (or why there is nothing to explain)")
    explanation = ExplanationSerializer(allow_null=True, help_text="the engine's explanation; null when the "
                                        "Workload does not wait")
    admissionWait = AdmissionWaitSerializer(
        required=False, allow_null=True,
        help_text="for a QuotaReserved Workload: what it waits for before it is admitted")


# ---------------------------------------------------------------- history


class EventSerializer(s.Serializer):
    id = s.IntegerField(help_text="event id")
    workload = s.CharField(help_text="namespace/name of the Workload (kept after it is deleted)")
    clusterQueue = s.CharField(allow_blank=True, help_text="its ClusterQueue at the time")
    kind = s.ChoiceField(choices=EventKind.choices, help_text="what happened")
    at = s.DateTimeField(help_text="when")
    node = s.CharField(allow_blank=True, help_text="the node concerned (failures, replacements)")
    domain = s.CharField(allow_blank=True, help_text="the node's domain path, e.g. b1/r3/b1-r3-n2")
    trigger = s.CharField(allow_blank=True, help_text="what set it off (a taint, NotReady, a pass)")
    message = s.CharField(allow_blank=True, help_text="the explanation recorded")
    details = s.DictField(help_text="structured details: flavors, domains, replacement node, pods ungated, ...")
    schedulingPass = s.IntegerField(allow_null=True, help_text="id of the engine pass that recorded it")


# ---------------------------------------------------------------- side by side with Kueue


class ComparedDomainSerializer(s.Serializer):
    values = string_list("the domain's value at every level of the Topology, from the root")
    count = s.IntegerField(help_text="pods placed there")
    room = s.IntegerField(required=False, help_text="Kueue's domains only: how many pods of the PodSet this "
                          "engine sees room for there, everything else admitted counted")


class ComparedPlacementSerializer(s.Serializer):
    podSet = s.CharField(help_text="the PodSet")
    flavor = s.CharField(help_text="the TAS ResourceFlavor")
    levels = string_list("every level of the Topology")
    level = s.CharField(allow_blank=True, help_text="the lowest level one domain of which holds every pod "
                        "(\"\" when they span several domains of the top level)")
    domain = string_list("that domain's path")
    pods = s.IntegerField(help_text="pods placed")
    domains = ComparedDomainSerializer(many=True, help_text="the TopologyAssignment's domains")


class ComparisonSerializer(s.Serializer):
    id = s.IntegerField(help_text="comparison id")
    workload = s.CharField(help_text="namespace/name of the Workload (kept after it is deleted)")
    namespace = s.CharField(help_text="its namespace")
    clusterQueue = s.CharField(allow_blank=True, help_text="the ClusterQueue Kueue admitted it to")
    flavor = s.CharField(allow_blank=True, help_text="the TAS ResourceFlavor of Kueue's assignment")
    category = s.ChoiceField(choices=ComparisonCategory.choices, help_text="SameDomains (agreement), "
                             "SameLevelOtherDomains, DifferentLevel, EngineWouldNotAdmit or NoCapacityForKueue")
    agrees = s.BooleanField(help_text="whether this engine would have placed it where Kueue did (SameDomains)")
    kueue = ComparedPlacementSerializer(many=True, help_text="Kueue's assignment, per PodSet")
    engine = ComparedPlacementSerializer(many=True, help_text="this engine's assignment on the same snapshot, per "
                                         "PodSet; empty when it would not admit the Workload")
    podSets = label_map("PodSet -> its category (the Workload takes the worst)")
    reason = s.CharField(allow_blank=True, help_text="why this engine would not admit it, or which of Kueue's "
                         "domains lack room in its view")
    stop = s.DictField(allow_null=True, help_text="this engine's stop record when it would not admit it (as "
                       "why-pending shows it)")
    admittedAt = s.DateTimeField(help_text="when Kueue's admission was seen")
    comparedAt = s.DateTimeField(help_text="when it was compared (the observe pass)")
    schedulingPass = s.IntegerField(allow_null=True, help_text="id of the observe pass that compared it")


class AgreementSerializer(s.Serializer):
    total = s.IntegerField(help_text="admissions compared")
    agreeing = s.IntegerField(help_text="of which SameDomains")
    agreementRate = s.FloatField(allow_null=True, help_text="agreeing / total; null when nothing was compared")
    categories = s.DictField(child=s.IntegerField(), help_text="count per category")


class AgreementBucketSerializer(AgreementSerializer):
    start = s.DateTimeField(help_text="the start of the bucket (UTC)")


class ComparisonSummarySerializer(s.Serializer):
    overall = AgreementSerializer(help_text="every comparison matching the filters")
    bucket = s.ChoiceField(choices=["minute", "hour", "day"], help_text="the length of the buckets")
    buckets = AgreementBucketSerializer(many=True, help_text="per time bucket of admittedAt, oldest first "
                                        "(buckets without comparisons are left out)")


# ---------------------------------------------------------------- what-if


class PlacementDomainSerializer(s.Serializer):
    values = string_list("the domain's value at every level of the Topology")
    count = s.IntegerField(help_text="pods in the domain")
    node = s.CharField(allow_null=True, help_text="the node, when the lowest level is the hostname")


class PlacementSerializer(s.Serializer):
    podSet = s.CharField(help_text="the PodSet")
    levels = string_list("every level of the Topology")
    domains = PlacementDomainSerializer(many=True, help_text="where its pods would go")


class ConditionSerializer(s.Serializer):
    type = s.CharField(help_text="condition type")
    status = s.CharField(help_text="True, False or Unknown")
    reason = s.CharField(allow_blank=True, help_text="machine-readable reason")
    message = s.CharField(allow_blank=True, help_text="message")
    lastTransitionTime = s.CharField(allow_null=True, help_text="RFC 3339 time")


class PassPodSetSerializer(s.Serializer):
    name = s.CharField(help_text="the PodSet")
    count = s.IntegerField(help_text="pods")
    flavors = label_map("resource -> ResourceFlavor")
    topologyAssignment = EncodedAssignmentSerializer(allow_null=True, help_text="v1beta2 encoded assignment; "
                                                     "null when not placed")
    levels = string_list("levels of the decoded assignment", required=False)
    domains = s.ListField(child=s.DictField(), required=False, help_text="decoded domains: {values, count}")
    delayedTopologyRequest = s.CharField(allow_null=True, help_text="Pending, Ready or null")
    failureReason = s.CharField(required=False, help_text="why this PodSet did not fit")


class WhatIfWorkloadSerializer(s.Serializer):
    namespace = s.CharField(help_text="namespace")
    name = s.CharField(help_text="name")
    clusterQueue = s.CharField(allow_blank=True, help_text="the ClusterQueue")
    status = s.CharField(help_text="what the pass would make of it: Admitted, QuotaReserved, Pending, "
                         "Inadmissible, ...")
    message = s.CharField(allow_blank=True, help_text="the reason Kueue would write in its condition")
    podSets = PassPodSetSerializer(many=True, help_text="per PodSet, as `python -m scheduler simulate -o json`")
    unhealthyNodes = string_list("unhealthy nodes")
    evictionReason = s.CharField(required=False, help_text="set when the pass would evict or preempt it")
    conditions = ConditionSerializer(many=True, help_text="conditions it would get")
    placement = PlacementSerializer(many=True, help_text="where each placed PodSet's pods would go, with every "
                                    "level's value")
    explanation = ExplanationSerializer(allow_null=True, help_text="why it would not be admitted (the "
                                        "why-pending explanation after the pass); null when admitted")


class WhatIfChangeSerializer(s.Serializer):
    namespace = s.CharField(help_text="namespace of a mirrored Workload the pass would change")
    name = s.CharField(help_text="its name")
    clusterQueue = s.CharField(allow_null=True, help_text="its ClusterQueue")
    statusBefore = s.CharField(help_text="its stored status")
    status = s.CharField(help_text="its status after the pass")
    message = s.CharField(allow_blank=True, help_text="the reason")


class PassEventSerializer(s.Serializer):
    key = s.CharField(help_text="namespace/name")
    type = s.CharField(help_text="Normal or Warning")
    reason = s.CharField(help_text="event reason (QuotaReserved, Admitted, Pending, ...)")
    message = s.CharField(allow_blank=True, help_text="event message")


class WhatIfSerializer(s.Serializer):
    workloads = WhatIfWorkloadSerializer(many=True,
                                         help_text="the posted Workloads after the pass, in the order posted")
    changes = WhatIfChangeSerializer(many=True, help_text="mirrored Workloads whose status the pass would change, "
                                     "in the order they entered the mirror")
    events = PassEventSerializer(many=True, help_text="events the pass would emit for the posted Workloads")
    warnings = string_list("objects skipped and other warnings")
    objects = s.DictField(child=s.IntegerField(), help_text="kind -> number of posted objects read")


# ---------------------------------------------------------------- Kueue visibility


class PendingWorkloadMetaSerializer(s.Serializer):
    name = s.CharField(help_text="the Workload's name")
    namespace = s.CharField(help_text="its namespace")
    creationTimestamp = s.DateTimeField(allow_null=True, help_text="its creationTimestamp")
    ownerReferences = s.ListField(child=s.DictField(), required=False,
                                  help_text="its ownerReferences (apiVersion, kind, name, uid)")


class PendingWorkloadSerializer(s.Serializer):
    metadata = PendingWorkloadMetaSerializer(help_text="the Workload's metadata")
    priority = s.IntegerField(help_text="the Workload's priority")
    localQueueName = s.CharField(allow_blank=True, help_text="the LocalQueue it was submitted to")
    positionInClusterQueue = s.IntegerField(help_text="its position in the ClusterQueue, from 0")
    positionInLocalQueue = s.IntegerField(help_text="its position in the LocalQueue, from 0")
    predictedStart = predicted_start_field()  # not Kueue's: this service's estimate


class PendingWorkloadsSummarySerializer(s.Serializer):
    kind = s.ChoiceField(choices=["PendingWorkloadsSummary"], help_text="always PendingWorkloadsSummary")
    apiVersion = s.CharField(help_text="visibility.kueue.x-k8s.io/v1beta1 (or v1beta2, as requested)")
    metadata = s.DictField(help_text="object metadata (creationTimestamp: null, as Kueue returns it)")
    items = PendingWorkloadSerializer(many=True, help_text="pending Workloads in queue order from `offset`")


class KubernetesStatusSerializer(s.Serializer):
    kind = s.CharField(help_text="Status")
    apiVersion = s.CharField(help_text="v1")
    metadata = s.DictField(help_text="empty")
    status = s.CharField(help_text="Failure")
    message = s.CharField(help_text="what went wrong")
    reason = s.CharField(help_text="NotFound, BadRequest, Unauthorized, Forbidden")
    details = s.DictField(required=False, help_text="name, group and kind of the object")
    code = s.IntegerField(help_text="HTTP status code")


class APIResourceSerializer(s.Serializer):
    name = s.CharField(help_text="resource (or resource/subresource) name")
    singularName = s.CharField(allow_blank=True, help_text="singular name")
    namespaced = s.BooleanField(help_text="whether it lives in a namespace")
    kind = s.CharField(help_text="kind")
    verbs = string_list("verbs served")


class GroupVersionSerializer(s.Serializer):
    groupVersion = s.CharField(help_text="visibility.kueue.x-k8s.io/<version>")
    version = s.CharField(help_text="v1beta2 or v1beta1")


class APIGroupEntrySerializer(s.Serializer):
    name = s.CharField(help_text="visibility.kueue.x-k8s.io")
    versions = GroupVersionSerializer(many=True, help_text="the versions served, the preferred one first")
    preferredVersion = GroupVersionSerializer()


class APIGroupSerializer(APIGroupEntrySerializer):
    """One group as its own document: an entry of APIGroupList with its kind and apiVersion."""

    kind = s.CharField(help_text="APIGroup")
    apiVersion = s.CharField(help_text="v1")


class APIGroupListSerializer(s.Serializer):
    kind = s.CharField(help_text="APIGroupList")
    apiVersion = s.CharField(help_text="v1")
    groups = APIGroupEntrySerializer(many=True, help_text="the API groups this service serves")


class APIResourceListSerializer(s.Serializer):
    kind = s.CharField(help_text="APIResourceList")
    apiVersion = s.CharField(help_text="v1")
    groupVersion = s.CharField(help_text="visibility.kueue.x-k8s.io/<version>")
    resources = APIResourceSerializer(many=True, help_text="the resources served")
