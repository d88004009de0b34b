"""What each Workload status means, for the OpenAPI schema and the `status` filter, and the
`waiting` value of that filter: every status of a workload waiting for admission."""

from __future__ import annotations

from collections.abc import Iterable

from tasweb.cluster.models import WAITING_STATUSES, WorkloadStatus

STATUS_MEANINGS: dict[str, str] = {
    WorkloadStatus.PENDING: "waiting for admission; the scheduler looks at it again as its queue moves",
    WorkloadStatus.INADMISSIBLE: "waiting for admission; the last scheduling pass found that it cannot be "
    "admitted now (not enough quota, or no topology domain with room for its pods), so it is parked until "
    "an event could change that (a workload finishing, a node recovering, a quota change). Most waiting "
    "Workloads are in this status",
    WorkloadStatus.QUOTA_RESERVED: "holds quota in its ClusterQueue and has a TopologyAssignment, and waits "
    "for its admission checks (e.g. a ProvisioningRequest) before it is admitted",
    WorkloadStatus.ADMITTED: "admitted: quota reserved and every admission check passed; its pods run on the "
    "nodes of its TopologyAssignment",
    WorkloadStatus.EVICTED: "was admitted and lost its admission (e.g. a failed node it could not be moved "
    "off, pods not ready in time); it releases its quota and is queued again",
    WorkloadStatus.PREEMPTED: "was evicted to make room for a Workload of higher priority (or with a better "
    "fair share); it is queued again",
    WorkloadStatus.FINISHED: "its job has completed (succeeded or failed); it holds no quota",
}

# The `status` filter's extra value: Pending and Inadmissible together.
WAITING = "waiting"
STATUS_FILTER_CHOICES = [*((status, STATUS_MEANINGS[status]) for status in WorkloadStatus.values),
                         (WAITING, "Pending or Inadmissible: every Workload waiting for admission")]


def status_list_markdown() -> str:
    return "\n".join(f"* `{status}`: {STATUS_MEANINGS[status]}" for status in WorkloadStatus.values)


def statuses_wanted(values: Iterable[str]) -> list[str]:
    """The statuses a `status` filter asks for, with `waiting` expanded."""
    out: list[str] = []
    for value in values:
        for status in WAITING_STATUSES if value == WAITING else (value,):
            if status not in out:
                out.append(status)
    return out
