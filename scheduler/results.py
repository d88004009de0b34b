"""What a pass decides: per workload, per PodSet, per pod, and the events it emits."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.assignment import TopologyAssignment
from scheduler.errors import InputError
from scheduler.model import Condition, Workload

ADMITTED = "Admitted"
QUOTA_RESERVED = "QuotaReserved"
PENDING = "Pending"
INADMISSIBLE = "Inadmissible"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
FINISHED = "Finished"


@dataclass(slots=True)
class PodSetResult:
    name: str
    count: int
    flavors: dict[str, str] = field(default_factory=dict)
    assignment: TopologyAssignment | None = None
    delayed_topology_request: str | None = None
    failure_reason: str = ""


@dataclass(slots=True)
class WorkloadResult:
    workload: Workload
    cluster_queue: str
    status: str
    message: str = ""
    pod_sets: list[PodSetResult] = field(default_factory=list)
    unhealthy_nodes: list[str] = field(default_factory=list)
    eviction_reason: str = ""
    conditions: list[Condition] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.workload.key


@dataclass(slots=True)
class PodResult:
    namespace: str
    name: str
    ungated: bool
    node_selector: dict[str, str]


@dataclass(slots=True)
class Event:
    key: str
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class PassResult:
    workloads: list[WorkloadResult] = field(default_factory=list)
    pods: list[PodResult] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # input that Kueue would tolerate at run time but that is almost certainly a mistake
    problems: list[InputError] = field(default_factory=list)
