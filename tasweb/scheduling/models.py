"""What the engine decided, and the history of every workload.

An admission is stored twice: `PodSetAssignment.encoded` is the v1beta2 TopologyAssignment
byte for byte as Kueue stores it, and `AssignmentDomain` holds one row per domain with
its full path of level values, so "which workloads are on rack r3" is one indexed query.
"""

from __future__ import annotations

from django.db import models

from tasweb.cluster.models import Workload

MAX_LEVELS = 8  # Kueue allows at most 8 topology levels


class SchedulingPass(models.Model):
    """One run of the engine over the mirrored cluster."""

    class Trigger(models.TextChoices):
        BEAT = "beat"
        CHANGE = "change"
        MANUAL = "manual"

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    mode = models.CharField(max_length=16, default="control")  # control | observe
    workloads_seen = models.IntegerField(default=0)
    admitted = models.IntegerField(default=0)
    evicted = models.IntegerField(default=0)
    nodes_replaced = models.IntegerField(default=0)
    pods_ungated = models.IntegerField(default=0)
    pending = models.IntegerField(default=0)
    duration_ms = models.IntegerField(default=0)
    # ClusterQueue -> the workload the engine keeps at its head while its preemptions complete
    # (Kueue's sticky preemptor), as the pass left them: what the queue pages and a restarted
    # scheduler take the heads from
    sticky_heads = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at"]


class PodSetAssignment(models.Model):
    # no index of its own: the unique (workload, pod_set) below starts with it and serves
    # every lookup by workload, and a pass inserts a row per admitted PodSet
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="pod_set_assignments",
                                 db_index=False)
    pod_set = models.CharField(max_length=253)
    flavor = models.CharField(max_length=253, blank=True, default="")  # the TAS flavor
    flavors = models.JSONField(default=dict)  # resource -> flavor
    count = models.IntegerField(default=0)
    levels = models.JSONField(default=list)  # the assignment's levels (hostname only when lowest)
    topology_levels = models.JSONField(default=list)  # every level of the flavor's Topology
    encoded = models.JSONField(null=True, blank=True)  # v1beta2 TopologyAssignment, as Kueue stores it
    delayed_topology_request = models.CharField(max_length=16, blank=True, default="")
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workload_id", "pod_set"]
        constraints = [models.UniqueConstraint(fields=["workload", "pod_set"], name="one_assignment_per_pod_set")]


class AssignmentDomain(models.Model):
    """One domain of a decoded assignment, with the values of every topology level."""

    assignment = models.ForeignKey(PodSetAssignment, on_delete=models.CASCADE, related_name="domains")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="assignment_domains")
    flavor = models.CharField(max_length=253, blank=True, default="")
    position = models.IntegerField()  # order in the assignment
    count = models.IntegerField()
    values = models.JSONField(default=list)  # full path, one value per topology level
    node = models.CharField(max_length=253, blank=True, default="")  # hostname when known
    level_0 = models.CharField(max_length=253, blank=True, default="")
    level_1 = models.CharField(max_length=253, blank=True, default="")
    level_2 = models.CharField(max_length=253, blank=True, default="")
    level_3 = models.CharField(max_length=253, blank=True, default="")
    level_4 = models.CharField(max_length=253, blank=True, default="")
    level_5 = models.CharField(max_length=253, blank=True, default="")
    level_6 = models.CharField(max_length=253, blank=True, default="")
    level_7 = models.CharField(max_length=253, blank=True, default="")

    class Meta:
        ordering = ["assignment_id", "position"]
        # a pass writes thousands of these: one index serves every filter by flavor and the
        # first levels (a prefix of it), and plain indexes leave out the LIKE twins that
        # `db_index` adds to text columns on PostgreSQL
        indexes = [
            models.Index(fields=["flavor", "level_0", "level_1", "level_2"]),
            models.Index(fields=["node"], name="scheduling_domain_node_idx"),
        ]


class EventKind(models.TextChoices):
    QUEUED = "Queued"
    PENDING = "Pending"
    ADMITTED = "Admitted"
    NODE_UNHEALTHY = "NodeMarkedUnhealthy"
    NODE_REPLACED = "NodeReplaced"
    REPLACEMENT_FAILED = "ReplacementFailed"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    FINISHED = "Finished"
    PODS_UNGATED = "PodsUngated"
    POD_TERMINATED = "PodTerminated"
    # the Workload left the cluster before it finished (its owner withdrew it, or it was
    # deleted): the last entry of its history, so a waiting one does not end on "Pending"
    DELETED = "Deleted"


class WorkloadEvent(models.Model):
    """One entry of a workload's history, with the explanation the engine gave."""

    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    workload_key = models.CharField(max_length=510)  # namespace/name, kept after deletion
    cluster_queue = models.CharField(max_length=253, blank=True, default="")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    at = models.DateTimeField(db_index=True)
    node = models.CharField(max_length=253, blank=True, default="")
    domain = models.CharField(max_length=1024, blank=True, default="")  # "b1/r3" path
    trigger = models.TextField(blank=True, default="")
    message = models.TextField(blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    scheduling_pass = models.ForeignKey(SchedulingPass, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-at", "-id"]
        # Every pass writes a row per admission, eviction or new reason, so each index costs.
        # A workload's history and a kind's are read through the two pairs with `at`; a
        # namespace's and a domain's subtree by prefix (`startswith`), which on PostgreSQL
        # needs the pattern operator class (it serves equality too); ClusterQueue and node by
        # equality.
        indexes = [
            models.Index(fields=["workload_key", "at"]),
            models.Index(fields=["kind", "at"]),
            models.Index(fields=["workload_key"], name="scheduling_event_key_like", opclasses=["varchar_pattern_ops"]),
            models.Index(fields=["domain"], name="scheduling_event_domain_like", opclasses=["varchar_pattern_ops"]),
            models.Index(fields=["cluster_queue"], name="scheduling_event_cq_idx"),
            models.Index(fields=["node"], name="scheduling_event_node_idx"),
        ]


class ClusterWrite(models.Model):
    """A change to send to the cluster (control mode), written in the same transaction as
    the decision that caused it, so a crash between deciding and sending loses nothing."""

    class Kind(models.TextChoices):
        WORKLOAD_STATUS = "WorkloadStatus"  # admission, topologyAssignment, unhealthyNodes, conditions
        POD_UNGATE = "PodUngate"  # remove the topology gate, add the node selector
        POD_FAIL = "PodFail"  # move a pending pod on an unusable node to Failed
        LOCAL_QUEUE_STATUS = "LocalQueueStatus"  # admission fair sharing: the LocalQueue's sampled usage

    kind = models.CharField(max_length=32, choices=Kind.choices)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True, db_index=True)
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["id"]


class WorkloadStop(models.Model):
    """Where the scheduler last stopped a waiting workload: the engine's `StopRecord` (the step,
    with the numbers the scheduling cycle used), written by the pass that decided on it and
    read by why-pending. One row per waiting workload; gone once it stops waiting."""

    workload_key = models.CharField(max_length=510, unique=True)  # namespace/name
    step = models.CharField(max_length=32)
    record = models.JSONField(default=dict)
    at = models.DateTimeField()
    scheduling_pass = models.ForeignKey(SchedulingPass, null=True, blank=True, on_delete=models.SET_NULL)


class AdmissionToCompare(models.Model):
    """A Workload seen gaining an admission it did not get from this service (observe mode:
    Kueue's). The next observe pass compares that admission with this engine's decision on the
    same snapshot (`AdmissionComparison`) and drops the row: only new admissions are compared."""

    workload_key = models.CharField(max_length=510, db_index=True)  # namespace/name
    uid = models.CharField(max_length=253, blank=True, default="")
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]


class ComparisonCategory(models.TextChoices):
    """How this engine's decision compares with Kueue's admission (see `scheduler.compare`)."""

    SAME_DOMAINS = "SameDomains"
    SAME_LEVEL_OTHER_DOMAINS = "SameLevelOtherDomains"
    DIFFERENT_LEVEL = "DifferentLevel"
    ENGINE_WOULD_NOT_ADMIT = "EngineWouldNotAdmit"
    NO_CAPACITY_FOR_KUEUE = "NoCapacityForKueue"


class AdmissionComparison(models.Model):
    """Kueue's admission of one workload beside this engine's decision on the same snapshot:
    one row per admission (a workload admitted again after an eviction gets another)."""

    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="comparisons")
    workload_key = models.CharField(max_length=510, db_index=True)  # namespace/name, kept after deletion
    namespace = models.CharField(max_length=253, db_index=True)
    uid = models.CharField(max_length=253, blank=True, default="")
    # which admission: Kueue's QuotaReserved transition time (or when it was seen, without one)
    admission = models.CharField(max_length=64)
    cluster_queue = models.CharField(max_length=253, blank=True, default="", db_index=True)
    flavor = models.CharField(max_length=253, blank=True, default="")
    category = models.CharField(max_length=32, choices=ComparisonCategory.choices, db_index=True)
    kueue = models.JSONField(default=list)  # per PodSet: levels, placement level, domains (with room)
    engine = models.JSONField(default=list)  # the same for this engine's placement; [] when it would not admit
    pod_sets = models.JSONField(default=dict)  # PodSet -> its category
    reason = models.TextField(blank=True, default="")
    stop = models.JSONField(null=True, blank=True)  # the engine's StopRecord when it would not admit
    admitted_at = models.DateTimeField(db_index=True)  # when the admission was seen
    compared_at = models.DateTimeField()
    scheduling_pass = models.ForeignKey(SchedulingPass, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-admitted_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["workload_key", "uid", "admission"],
                                               name="one_comparison_per_admission")]
        indexes = [models.Index(fields=["category", "admitted_at"])]


class PredictionRun(models.Model):
    """The estimate the stored predictions come from: one row, replaced by each estimate that
    is stored. What is the same for every prediction of an estimate is kept here, so that an
    estimate writes only the predictions that changed."""

    estimated_at = models.DateTimeField()  # the time the queue was played forward from (the pass's)
    # wall clock when the estimate was stored (the dashboard's cue to refresh)
    predicted_at = models.DateTimeField()
    scheduling_pass = models.ForeignKey(SchedulingPass, null=True, blank=True, on_delete=models.SET_NULL)
    predictions = models.PositiveIntegerField(default=0)  # the waiting workloads it covered
    # the runtimes its predictions used, by WorkloadPrediction.runtime_key: low, median, high
    # (seconds), source, detail, problems. Kept once here, since they move whenever a workload
    # of their class starts or ends, and would otherwise change every prediction of the class.
    runtimes = models.JSONField(default=dict)
    # how far the play its times come from got when it stopped short (out of its time budget,
    # or at the horizon): its predictions without a start, for that reason, were not started
    # by then (scheduler.eta.Estimate.played_until)
    played_until = models.DateTimeField(null=True, blank=True)
    # the prediction rows it inserted, updated and deleted (the others were the same already)
    inserted = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)


class WorkloadPrediction(models.Model):
    """When a waiting workload is expected to start: the start-time estimate (`scheduler.eta`)
    run on the engine state a pass committed (`PredictionRun`). One row per waiting workload;
    each estimate writes the rows that differ from what it predicts and deletes those of
    workloads no longer waiting."""

    workload_key = models.CharField(max_length=510)  # namespace/name, unique (see Meta)
    namespace = models.CharField(max_length=253)
    local_queue = models.CharField(max_length=510, blank=True, default="")  # namespace/name
    cluster_queue = models.CharField(max_length=253, blank=True, default="")
    start = models.DateTimeField(null=True, blank=True)  # None: not within the horizon (see reason)
    earliest = models.DateTimeField(null=True, blank=True)  # the range shown: calibrated, when it was
    latest = models.DateTimeField(null=True, blank=True)
    plays_earliest = models.DateTimeField(null=True, blank=True)  # the plays' own range
    plays_latest = models.DateTimeField(null=True, blank=True)
    # how the range was calibrated (`scheduler.calibration`): coverage, outcomes, below, above; {} when not
    calibration = models.JSONField(default=dict)
    end = models.DateTimeField(null=True, blank=True)  # start + the median expected runtime
    source = models.CharField(max_length=32, blank=True, default="")  # the runtime source
    runtime_key = models.TextField(blank=True, default="")  # its runtime in PredictionRun.runtimes
    placement = models.JSONField(default=list)  # per PodSet: count, flavors, TopologyAssignment
    reason = models.TextField(blank=True, default="")  # why there is no start

    class Meta:
        ordering = ["start", "workload_key"]
        # rows are rewritten often: plain indexes, without the LIKE twins `unique` and
        # `db_index` add to text columns on PostgreSQL (nothing searches these by pattern);
        # none on a column an estimate changes, so that its UPDATEs stay on the row's page
        # without touching an index (PostgreSQL's heap-only tuples), given the room left there
        constraints = [models.UniqueConstraint(fields=["workload_key"], name="scheduling_prediction_key_unique")]
        indexes = [models.Index(fields=["namespace"], name="scheduling_prediction_ns_idx"),
                   models.Index(fields=["cluster_queue"], name="scheduling_prediction_cq_idx")]


class PredictionSnapshot(models.Model):
    """A prediction kept to be checked once its workload is admitted: at most one per waiting
    workload every TAS_ETA_SNAPSHOT_SECONDS, for TAS_ETA_SNAPSHOT_RETENTION_SECONDS. Those whose
    workloads were admitted since are the outcomes that calibrate the ranges shown
    (`scheduler.calibration`)."""

    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    made_at = models.DateTimeField()  # the time the queue was played forward from
    start = models.DateTimeField()
    earliest = models.DateTimeField()  # the plays' own range
    latest = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["namespace", "name", "made_at"]), models.Index(fields=["made_at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} at {self.made_at.isoformat()}"
