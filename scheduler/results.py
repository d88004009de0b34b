"""What a pass decides: per workload, per PodSet, per pod, and the events it emits."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scheduler.admission_fair_sharing import LocalQueueUsage
from scheduler.assignment import TopologyAssignment
from scheduler.errors import InputError
from scheduler.model import Condition, Workload

_NUMBERS = re.compile(r"\d+")


def message_shape(message: str) -> str:
    """A reason with its numbers masked: "4 more needed" and "6 more needed" are one reason."""
    return _NUMBERS.sub("#", message)


Answer = tuple[str, str]  # a result's status and its message_shape


class Answers:
    """The answer each waiting workload was last given, and the workloads given each answer.

    When a parked equivalence class of tens of thousands is parked again under the answer its
    members already have, finding that none needs a new result is one set difference (which
    reads the hashes the sets keep) instead of one lookup a member."""

    __slots__ = ("_given", "_of")

    def __init__(self, items: Iterable[tuple[str, Answer]] = ()) -> None:
        self._of: dict[str, Answer] = {}
        self._given: dict[Answer, set[str]] = {}
        for key, answer in items:
            self[key] = answer

    def __setitem__(self, key: str, answer: Answer) -> None:
        old = self._of.get(key)
        if old == answer:
            return
        if old is not None:
            self._forget(key, old)
        self._of[key] = answer
        self._given.setdefault(answer, set()).add(key)

    def pop(self, key: str, default: Answer | None = None) -> Answer | None:
        old = self._of.pop(key, None)
        if old is None:
            return default
        self._forget(key, old)
        return old

    def _forget(self, key: str, answer: Answer) -> None:
        """`key` no longer has `answer` (an answer nobody has any more is dropped)."""
        given = self._given[answer]
        given.discard(key)
        if not given:
            del self._given[answer]

    def get(self, key: str, default: Answer | None = None) -> Answer | None:
        return self._of.get(key, default)

    def __getitem__(self, key: str) -> Answer:
        return self._of[key]

    def __contains__(self, key: object) -> bool:
        return key in self._of

    def __len__(self) -> int:
        return len(self._of)

    def __iter__(self) -> Iterator[str]:
        return iter(self._of)

    def keys(self) -> Iterable[str]:
        return self._of.keys()

    def items(self) -> Iterable[tuple[str, Answer]]:
        return self._of.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Answers):
            return self._of == other._of
        return self._of == other

    __hash__ = None  # type: ignore[assignment]

    def give(self, keys: set[str], answer: Answer) -> list[str]:
        """Those of `keys` whose last answer is not `answer` (in no particular order); they are
        given it now."""
        given = self._given.get(answer)
        out = list(keys - given if given else keys)
        for key in out:
            self[key] = answer
        return out


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
    # False when the pass left the workload as it was (not a head of its queue this time,
    # nothing happened to it): its result restates its input and carries no new decision
    decided: bool = True
    # where the cycle stopped it (a scheduling.stops.StopRecord), for a head it did not admit
    stop: Any = None

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


# Kinds of Decision: what the pass did to a running workload, and why.
NODE_UNHEALTHY = "NodeMarkedUnhealthy"
NODE_RECOVERED = "NodeRecovered"
NODE_REPLACED = "NodeReplaced"
ASSIGNMENT_KEPT = "AssignmentKept"  # the failed node is not replaced (a single Pod's workload)
REPLACEMENT_FAILED = "ReplacementFailed"
WORKLOAD_EVICTED = "WorkloadEvicted"
WORKLOAD_PREEMPTED = "WorkloadPreempted"
POD_TERMINATED = "PodTerminated"


@dataclass(slots=True)
class Decision:
    """One explained decision about a running workload (the history the service records)."""

    key: str  # namespace/name of the workload
    kind: str
    node: str = ""
    trigger: str = ""  # what made the engine act: "node deleted", "untolerated taint k=v:NoSchedule", ...
    message: str = ""
    replacement: list[str] = field(default_factory=list)  # nodes that took the failed node's pods
    pod_set: str = ""


@dataclass(slots=True)
class PodTermination:
    """A pod the pass moved to Failed (pending on a node its workload can no longer use)."""

    namespace: str
    name: str
    node: str
    reason: str = "UnschedulableOnAssignedNode"
    message: str = "Pod terminated by Kueue NodeController due to node taint"


@dataclass(slots=True)
class PassResult:
    workloads: list[WorkloadResult] = field(default_factory=list)
    pods: list[PodResult] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    terminated_pods: list[PodTermination] = field(default_factory=list)
    # input that Kueue would tolerate at run time but that is almost certainly a mistake
    problems: list[InputError] = field(default_factory=list)
    # its scheduling cycles stopped early at the caller's request: more may be admissible now
    cut_short: bool = False
    # admission fair sharing: every LocalQueue's usage after the pass (filled by `simulate`)
    local_queues: list[LocalQueueUsage] = field(default_factory=list)
