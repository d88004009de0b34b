"""The mirrored cluster: Kubernetes and Kueue objects as the source last reported them.

Every row keeps the object exactly as received (`raw`), plus the fields the API, the
dashboard and the engine filter on, extracted at write time. Rows are keyed by the
object's uid; `rv_number` (its resourceVersion) makes writes idempotent: an event older
than what is stored is ignored, so replays after a reconnect change nothing.
"""

from __future__ import annotations

from django.db import models


class MirroredObject(models.Model):
    # unique through a constraint, not `unique=True`: that would add on PostgreSQL a second
    # index (varchar_pattern_ops, for LIKE) which nothing uses and every insert pays for
    uid = models.CharField(max_length=128)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64, blank=True, default="")
    # resourceVersion as a number when it is one (etcd's are), for ordering events
    rv_number = models.BigIntegerField(default=0)
    raw = models.JSONField()
    # why the engine cannot read the object (it is kept, shown, and left out of passes)
    invalid_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(null=True, blank=True)  # metadata.creationTimestamp
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["uid"], name="%(app_label)s_%(class)s_uid_unique")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class Node(MirroredObject):
    hostname = models.CharField(max_length=253, blank=True, default="")
    labels = models.JSONField(default=dict)
    allocatable = models.JSONField(default=dict)  # resource -> integer value (milli-CPU, bytes, units)
    taints = models.JSONField(default=list)  # [{"key", "value", "effect", "timeAdded"}]
    unschedulable = models.BooleanField(default=False)
    ready = models.CharField(max_length=16, blank=True, default="")  # Ready condition status; "" = none
    ready_since = models.DateTimeField(null=True, blank=True)

    class Meta(MirroredObject.Meta):
        indexes = [
            models.Index(fields=["name"]),
            models.Index(fields=["ready"]),
            # the API's mirror version reads max(updated_at) of every mirrored table on each request
            models.Index(fields=["updated_at"], name="cluster_nod_updated_idx"),
            # by equality only: a plain index, without the LIKE twin `db_index` would add
            models.Index(fields=["hostname"], name="cluster_node_hostname_idx"),
        ]


class Pod(MirroredObject):
    node_name = models.CharField(max_length=253, blank=True, default="")
    phase = models.CharField(max_length=32, blank=True, default="")
    workload_name = models.CharField(max_length=253, blank=True, default="")  # kueue.x-k8s.io/workload
    pod_set = models.CharField(max_length=253, blank=True, default="")  # kueue.x-k8s.io/podset
    gated = models.BooleanField(default=False)  # carries the kueue.x-k8s.io/topology gate
    tas = models.BooleanField(default=False)  # carries a Kueue topology annotation
    deleting = models.BooleanField(default=False)
    requests = models.JSONField(default=dict)  # effective pod requests, integer values

    class Meta(MirroredObject.Meta):
        indexes = [
            models.Index(fields=["namespace", "workload_name"]),
            models.Index(fields=["namespace", "name"]),
            models.Index(fields=["updated_at"], name="cluster_pod_updated_idx"),  # see Node
            # by equality only: a plain index, without the LIKE twin `db_index` would add
            models.Index(fields=["node_name"], name="cluster_pod_node_name_idx"),
        ]


class Topology(MirroredObject):
    levels = models.JSONField(default=list)


class ResourceFlavor(MirroredObject):
    topology_name = models.CharField(max_length=253, blank=True, default="")
    node_labels = models.JSONField(default=dict)


class ClusterQueue(MirroredObject):
    cohort = models.CharField(max_length=253, blank=True, default="")


class LocalQueue(MirroredObject):
    cluster_queue = models.CharField(max_length=253, blank=True, default="", db_index=True)

    class Meta(MirroredObject.Meta):
        indexes = [models.Index(fields=["namespace", "name"])]


class Cohort(MirroredObject):
    parent = models.CharField(max_length=253, blank=True, default="")


class AdmissionCheck(MirroredObject):
    controller_name = models.CharField(max_length=253, blank=True, default="")


class WorkloadPriorityClass(MirroredObject):
    value = models.IntegerField(default=0)


class Namespace(MirroredObject):
    """What the ClusterQueues' namespaceSelectors are matched against."""

    labels = models.JSONField(default=dict)


class WorkloadStatus(models.TextChoices):
    PENDING = "Pending"
    INADMISSIBLE = "Inadmissible"
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    FINISHED = "Finished"


# The statuses of a workload waiting for admission: Pending (it will be looked at again as its
# queue moves) and Inadmissible (parked until an event could change the answer).
WAITING_STATUSES = (WorkloadStatus.PENDING, WorkloadStatus.INADMISSIBLE)


class Workload(MirroredObject):
    queue_name = models.CharField(max_length=253, blank=True, default="")
    cluster_queue = models.CharField(max_length=253, blank=True, default="")
    status = models.CharField(max_length=16, choices=WorkloadStatus.choices, default=WorkloadStatus.PENDING)
    # the reason Kueue (or the engine) gives for the status: why pending, why evicted
    message = models.TextField(blank=True, default="")
    priority = models.IntegerField(default=0)
    # the kueue.x-k8s.io/priority-boost annotation (0 without one, or for a value that is not an
    # int32): added to `priority` in queue order while the PriorityBoost gate is on
    priority_boost = models.IntegerField(default=0)
    # labelled kueue.x-k8s.io/concurrent-admission-parent: "true": while the ConcurrentAdmission
    # gate is on its variants are queued and scheduled, not it
    concurrent_admission_parent = models.BooleanField(default=False)
    pod_count = models.IntegerField(default=0)
    unhealthy_nodes = models.JSONField(default=list)
    admitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta(MirroredObject.Meta):
        # The API's list pages: a filter's equality columns first, then the page's order, so
        # PostgreSQL walks the index and stops after one page instead of sorting every match
        # (status + ClusterQueue in queue order; namespace + status, newest first). Name
        # search (`icontains`, i.e. UPPER(name) LIKE ...) has a pg_trgm GIN index on
        # PostgreSQL, made by migration 0002 outside the model state (SQLite has no GIN).
        indexes = [
            models.Index(fields=["namespace", "name"]),
            models.Index(fields=["status", "cluster_queue", "-priority", "created_at"],
                         name="cluster_wor_status_cq_prio_idx"),
            models.Index(fields=["namespace", "status", "created_at"], name="cluster_wor_ns_status_crt_idx"),
            models.Index(fields=["cluster_queue", "status", "priority", "created_at"]),
            models.Index(fields=["queue_name"]),
            models.Index(fields=["created_at"]),
            models.Index(fields=["updated_at"], name="cluster_wor_updated_idx"),  # see Node
        ]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class MirrorChange(models.Model):
    """One row of a mirrored table inserted, updated or deleted, noted by a database trigger
    on every mirrored table (migration 0004), whatever wrote it: the sources, the simulator,
    the scheduler's own results. The scheduler process reads the changes after the last one
    it applied and applies only those to its long-lived engine state."""

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=32)  # a key of KINDS; "" when a whole table was emptied
    row_id = models.BigIntegerField(null=True)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253, blank=True, default="")
    deleted = models.BooleanField(default=False)
    at = models.DateTimeField(null=True)  # when it was noted (for pruning by age)

    class Meta:
        db_table = "cluster_change"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


# kind -> model, for the mirror
KINDS: dict[str, type[MirroredObject]] = {
    "Node": Node,
    "Pod": Pod,
    "Topology": Topology,
    "ResourceFlavor": ResourceFlavor,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "Cohort": Cohort,
    "AdmissionCheck": AdmissionCheck,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "Namespace": Namespace,
    "Workload": Workload,
}
