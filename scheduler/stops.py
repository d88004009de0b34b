"""Where the scheduler stopped a waiting workload: the record why-pending and what-if tell.

A scheduling cycle decides on the heads of the queues only. For each head it does not admit
it writes one `StopRecord`: the step that stopped it (quota, a hold of another head, a
borrowing or lending limit, preemption, topology, ...) with the numbers the cycle itself
used. The engine keeps the latest record per workload between passes (`Engine.decisions`);
a parked equivalence class shares the record of the workload whose evaluation parked it.

What the cycle did not reach is answered on demand (`current_stop`): a workload behind
another in its ClusterQueue, in its requeue backoff, or not evaluated since it arrived or
changed. Only that last one is computed from scratch, and the record says so. A
ConcurrentAdmission parent is never a head: its record names its variants, which are.

Verdicts: `waits` means the next pass does not admit it unless something changes (an event
requeues it, a workload finishes, quota or nodes change); `fits` that the next pass admits
it; `preempting` that it is admitted once the workloads preempted for it are gone;
`not-evaluated` that no cycle decided on it yet (the next pass does).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.quantity import format_value
from scheduler.queue_status import waiting_summary
from scheduler.quota import FlavorResource, QuotaNode, QuotaTree, available_in, root_of

if TYPE_CHECKING:
    from scheduler.cluster import ClusterState
    from scheduler.model import ClusterQueue, Workload
    from scheduler.queues import QueueManager, UsageOrderedQueue

# the step that stopped the workload
NOT_HEAD = "not-head"
QUOTA = "quota"  # not enough unused quota
QUOTA_HELD = "quota-held"  # what it lacks is held this cycle by another head, or taken by an admission of the cycle
QUOTA_LIMIT = "quota-limit"  # a borrowingLimit or lendingLimit is what binds
EXCEEDS_QUOTA = "exceeds-quota"  # more than the ClusterQueue could ever get
NO_FLAVOR = "no-flavor"  # no flavor matches (resource not covered, node constraints, ...)
PREEMPTION_PENDING = "preemption-pending"  # preemptions issued, waiting for the targets to go
NO_CANDIDATES = "no-candidates"  # needs preemption, but the policies allow no target or none that would do
OVERLAPPING_TARGETS = "overlapping-targets"  # its targets are being preempted for another head
TOPOLOGY = "topology"  # quota fits but the TopologyAssignment does not, or no TopologyAssignment ever would
TOPOLOGY_HELD = "topology-held"  # the room was taken or held by another head in the cycle
FLAVORS_LEFT = "flavors-left"  # sent back to try its remaining flavors
PODS_READY = "waiting-pods-ready"  # waitForPodsReady blocks admission
ORPHAN = "orphan"  # its LocalQueue or ClusterQueue does not exist, or is stopped
BACKOFF = "backoff"  # in its requeue backoff
NOT_EVALUATED = "not-evaluated"  # no cycle decided on it yet
MISCONFIGURED = "misconfigured"  # namespace not selected by the ClusterQueue, or invalid resources
FAILED_CHECKS = "failed-admission-checks"  # an admission check of it is in Retry or Rejected
PREEMPTION_GATED = "preemption-gated"  # needs preemption, but a preemption gate is closed
PARENT = "concurrent-admission-parent"  # its ConcurrentAdmission variants are scheduled, not it

WAITS, FITS, PREEMPTING, UNDECIDED = "waits", "fits", "preempting", "not-evaluated"


@dataclass(slots=True)
class QuotaCheck:
    """One (flavor, resource) as the cycle counted it when it decided."""

    flavor: str
    resource: str
    requested: int
    available: int  # unused quota then: the cohort's, this cycle's admissions and holds included
    nominal: int
    used: int  # the ClusterQueue's usage then
    limit: str = ""  # the borrowingLimit / lendingLimit that binds, in words

    @property
    def fits(self) -> bool:
        return self.requested <= self.available

    @property
    def short(self) -> int:
        return max(0, self.requested - self.available)

    def text(self, field_name: str) -> str:
        return format_value(self.resource, getattr(self, field_name))


def _copied(value: Any) -> Any:
    """A copy of JSON-like containers (dicts, lists, tuples), as asdict copies them."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copied(v) for v in value)
    return value


@dataclass(slots=True)
class StopRecord:
    step: str
    message: str  # the step in one line, with its numbers
    verdict: str = WAITS
    cluster_queue: str = ""
    reason: str = ""  # Kueue's condition message, when the cycle wrote one
    at: datetime | None = None  # the clock of the pass that decided
    pass_number: int = 0
    cycle: int = 0
    blocking: list[str] = field(default_factory=list)  # workloads that stop it (holders, head ahead, targets)
    quota: list[QuotaCheck] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    parked: bool = False  # parked as inadmissible until an event requeues it
    requeue_on: list[str] = field(default_factory=list)
    representative: str = ""  # the workload whose evaluation this record is
    computed_now: bool = False  # not the cycle's: computed when asked

    @property
    def never_fits(self) -> bool:
        """A PodSet its flavor could not hold even with no admitted workload on its nodes."""
        return self.step == TOPOLOGY and bool(self.details.get("withNoWorkloads"))

    def to_json(self) -> dict[str, Any]:
        """As `dataclasses.asdict` makes it (containers copied), with `at` in ISO 8601; written
        field by field: a pass writes tens of thousands of these, and asdict walks every value."""
        return {
            "step": self.step, "message": self.message, "verdict": self.verdict,
            "cluster_queue": self.cluster_queue, "reason": self.reason,
            "at": self.at.isoformat() if self.at is not None else None,
            "pass_number": self.pass_number, "cycle": self.cycle, "blocking": _copied(self.blocking),
            "quota": [{"flavor": q.flavor, "resource": q.resource, "requested": q.requested,
                       "available": q.available, "nominal": q.nominal, "used": q.used, "limit": q.limit}
                      for q in self.quota],
            "details": _copied(self.details), "parked": self.parked, "requeue_on": _copied(self.requeue_on),
            "representative": self.representative, "computed_now": self.computed_now,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StopRecord:
        values = dict(data)
        at = values.get("at")
        values["at"] = datetime.fromisoformat(at) if isinstance(at, str) else None
        values["quota"] = [QuotaCheck(**q) for q in values.get("quota") or []]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})

    def headline(self) -> str:
        """The message with where it comes from: the cycle (parked since when) or computed now."""
        if self.computed_now:
            return self.message
        text = self.message
        if self.parked:
            since = f"pass {self.pass_number}, cycle {self.cycle}"
            if self.at is not None:
                since += f", {self.at:%Y-%m-%dT%H:%M:%SZ}"
            text += f"; parked as inadmissible since {since}"
            if self.requeue_on:
                text += f", requeued by the next {' or '.join(self.requeue_on)}"
        return text


# ---------------------------------------------------------------- quota as the cycle sees it


def requested_by_resource(wl: Workload, state: ClusterState) -> dict[str, int]:
    from scheduler.flavorassigner import pod_set_needs

    totals: dict[str, int] = {}
    for ps in wl.pod_sets:
        for resource, value in pod_set_needs(ps, ps.count, state.config).items():
            totals[resource] = totals.get(resource, 0) + value
    return totals


def quota_checks(state: ClusterState, cq: ClusterQueue, requested: Mapping[FlavorResource, int] | None = None,
                 wl: Workload | None = None) -> list[QuotaCheck]:
    """The (flavor, resource) pairs asked for, against unused quota as the state counts it now:
    `requested` per flavor when the flavors are chosen, else every flavor that could provide
    each resource of `wl`."""
    tree = state.quota
    if cq.name not in tree.queues:
        return []
    pairs: dict[FlavorResource, int] = dict(requested or {})
    if not pairs and wl is not None:
        for resource, value in requested_by_resource(wl, state).items():
            for rg in cq.resource_groups:
                if resource in rg.covered_resources:
                    for fq in rg.flavors:
                        pairs[FlavorResource(fq.name, resource)] = value
    out = []
    for fr, value in pairs.items():
        if not value:
            continue
        available = max(tree.available(cq.name, fr), 0)
        limit = binding_limit(tree, cq.name, fr) if value > available else ""
        out.append(QuotaCheck(fr.flavor, fr.resource, value, available, tree.nominal(cq.name, fr),
                              tree.usage(cq.name, fr), limit))
    return out


def binding_limit(tree: QuotaTree, cq: str, fr: FlavorResource) -> str:
    """The borrowingLimit or lendingLimit that makes unused quota smaller than the cohort's free
    capacity, in words; "" when none does."""
    node: QuotaNode | None = tree.queues.get(cq)
    while node is not None and node.parent is not None:
        quota = node.quotas.get(fr)
        parent_free = available_in(node.parent, fr)
        if quota is not None and quota.borrowing_limit is not None:
            in_parent = node.subtree[fr] - node.local_quota(fr)
            used_in_parent = max(0, node.usage[fr] - node.local_quota(fr))
            if in_parent - used_in_parent + quota.borrowing_limit < parent_free:
                kind = "Cohort" if node.is_cohort else "ClusterQueue"
                return (f"borrowingLimit {format_value(fr.resource, quota.borrowing_limit)} of {kind} {node.name}")
        lender = _lending_limited(node.parent, fr)
        if lender:
            return lender
        node = node.parent
    return ""


def _lending_limited(cohort: QuotaNode, fr: FlavorResource) -> str:
    """A member of `cohort` keeping unused quota to itself by its lendingLimit."""
    for child in cohort.children:
        quota = child.quotas.get(fr)
        if quota is not None and quota.lending_limit is not None and child.local_available(fr) > 0:
            kind = "Cohort" if child.is_cohort else "ClusterQueue"
            return (f"lendingLimit {format_value(fr.resource, quota.lending_limit)} of {kind} {child.name} "
                    f"(keeps {format_value(fr.resource, child.local_available(fr))} unused to itself)")
    return ""


def shortfall_text(checks: Iterable[QuotaCheck]) -> str:
    short = [c for c in checks if not c.fits]
    return "; ".join(f"short by {c.text('short')} of {c.resource} in flavor {c.flavor} "
                     f"({c.text('requested')} requested, {c.text('available')} unused)" for c in short)


def never_fits_text(flavor: str, reason: str) -> str:
    """A PodSet the flavor's topology cannot hold even with no admitted workload on its nodes
    (only what runs outside Kueue counted): no finish or preemption makes room for it."""
    return (f"it does not fit flavor {flavor} even with no admitted workload on its nodes, so no "
            f"preemption or finish makes room for it: {reason}")


def no_targets_text(candidates: int, policies: str) -> str:
    """Why a workload that needs preemption found no targets: no admitted workload may be
    preempted for it under `policies` (whose preemption policies, in words), or preempting the
    `candidates` that may be, as far as the preemption rules allow (borrowing, the fair sharing
    strategies), would not make room."""
    if not candidates:
        return (f"preemption could make room but no admitted workload may be preempted for it under the "
                f"preemption policies of {policies}")
    noun = "workload" if candidates == 1 else "workloads"
    return (f"{candidates} admitted {noun} may be preempted for it under the preemption policies of {policies}, "
            "but preempting them, as far as the preemption rules allow, would not make room for it")


# ---------------------------------------------------------------- requeue triggers


def preemption_stop(waiting: str, targets: Iterable[Any], checks: list[QuotaCheck], failure: str) -> StopRecord:
    """A head that fits only once `targets` (preemption targets: `.workload`, `.reason`) are
    gone; `waiting` starts the message ("waiting for the preemption of", ...)."""
    targets = list(targets)
    keys = [t.workload.key for t in targets]
    return StopRecord(PREEMPTION_PENDING, f"{waiting} {', '.join(keys)}: {shortfall_text(checks) or failure}",
                      verdict=PREEMPTING, blocking=keys, quota=checks,
                      details={"targets": [{"workload": t.workload.key, "reason": t.reason} for t in targets]})


def requeue_triggers(state: ClusterState, cq: ClusterQueue, *, topology_blocked: bool,
                     wl: Workload | None = None) -> list[str]:
    """What requeues a parked workload of `cq` (Kueue's requeue events, as the queue manager
    follows them)."""
    hold = state.namespace_hold(wl.namespace, cq) if wl is not None else ""
    if hold:
        assert wl is not None
        return [namespace_trigger(state, cq, wl.namespace, hold)]
    cycle = state.quota.cycle_of(cq)
    if cycle is not None:  # nothing but the cycle broken lets it admit
        return [f"change to ClusterQueue {cq.name} or to Cohort(s) {', '.join(sorted(set(cycle)))} that breaks "
                "the cycle"]
    node = state.quota.queues.get(cq.name)
    root = root_of(node) if node is not None else None
    where = f"cohort {root.name}" if root is not None and root is not node else f"ClusterQueue {cq.name}"
    flavors = ", ".join(sorted(set(cq.flavor_names())))
    out = [f"release of quota in {where} (a workload finishing, deleted or evicted)",
           f"change to ClusterQueue {cq.name}" + (", its cohort" if where.startswith("cohort") else ""),
           f"change to flavor(s) {flavors}, their Topology or nodes"]
    if topology_blocked:
        out.append(f"TAS capacity freed on flavor(s) {flavors} by any ClusterQueue")
    return out


def namespace_trigger(state: ClusterState, cq: ClusterQueue, namespace: str, hold: str) -> str:
    """What requeues a workload its Namespace keeps parked: not the ClusterQueue's requeues."""
    return (f"{_namespace_requeue(state, cq, namespace)} (a requeue of ClusterQueue {cq.name} leaves it parked "
            f"while {hold})")


def _namespace_requeue(state: ClusterState, cq: ClusterQueue, namespace: str) -> str:
    """A change to its spec, or (Kueue's namespace handler) a relabel that makes the
    ClusterQueue select the Namespace; one created requeues nothing, the next requeue finds it."""
    relabel = f" or relabel of Namespace {namespace} that ClusterQueue {cq.name} selects" \
        if namespace in state.namespaces else ""
    return f"change to the Workload's spec{relabel}"


def namespace_stop(state: ClusterState, cq: ClusterQueue, namespace: str, hold: str,
                   now: datetime | None) -> StopRecord:
    """Why a workload parked with an equivalent (or before its ClusterQueue's namespaceSelector
    changed) stays parked: Kueue's QueueInadmissibleWorkloads leaves it there."""
    return StopRecord(MISCONFIGURED, f"parked as inadmissible: {hold}, so nomination would turn it away and "
                      f"a requeue of ClusterQueue {cq.name} leaves it parked; requeued by the next "
                      f"{_namespace_requeue(state, cq, namespace)}", cluster_queue=cq.name, parked=True,
                      requeue_on=[namespace_trigger(state, cq, namespace, hold)], computed_now=True, at=now)


# ---------------------------------------------------------------- what the cycle did not reach

VARIANTS_NAMED = 10  # variants a parent's record names in its message (details list them all)


def parent_stop(state: ClusterState, wl: Workload, now: datetime | None = None) -> StopRecord:
    """Why a ConcurrentAdmission parent waits: Kueue schedules the variants it owns (each
    limited to one flavor), never the parent; the record names them with their status."""
    from scheduler.cycle import unchanged_status

    variants = [(v.key, unchanged_status(v)) for v in state.variants_of(wl.key)]
    if variants:
        named = ", ".join(f"{key} ({status})" for key, status in variants[:VARIANTS_NAMED])
        more = f" and {len(variants) - VARIANTS_NAMED} more" if len(variants) > VARIANTS_NAMED else ""
        found = f"its variants: {named}{more}"
    else:
        found = "it has no variants yet (Kueue's ConcurrentAdmission controller makes one per flavor)"
    cq = state.cluster_queue_for(wl)
    return StopRecord(PARENT, f"a ConcurrentAdmission parent: the scheduler admits one of its variants, "
                      f"not the parent itself; {found}", cluster_queue=cq.name if cq is not None else "",
                      blocking=[key for key, _ in variants], computed_now=True, at=now,
                      details={"variants": [{"workload": key, "status": status} for key, status in variants]})


def backoff_cause(wl: Workload) -> str:
    """What put a waiting workload in its requeue backoff, from its Requeued condition (False
    until Kueue's workload controller finds the backoff over): a PodsReady timeout, or an
    eviction by an admission check, with the delays the checks' controllers asked for."""
    requeued = wl.condition("Requeued")
    if requeued is None or requeued.status != "False":
        return ""
    if requeued.reason == "PodsReadyTimeout":
        return f", after its PodsReady timeout (requeued {wl.requeue_count} time(s))"
    if requeued.reason == "AdmissionCheck":
        delays = [f"{c.name} {c.requeue_after_seconds}s" for c in wl.admission_checks if c.requeue_after_seconds]
        asked = f"; the delay its checks' controllers asked for: {', '.join(delays)}" if delays else ""
        return f", after its eviction by an admission check in Retry{asked}"
    return ""


def current_stop(state: ClusterState, queues: QueueManager, decisions: Mapping[str, StopRecord],
                 key: str, now: datetime | None = None) -> StopRecord | None:
    """The record that answers for the pending workload `key` now; None when it does not wait
    or no cycle has decided on it since it arrived or changed (the caller computes an answer)."""
    from scheduler.cluster import is_pending

    wl = state.workload(key)
    if wl is None or not is_pending(wl):
        return None
    until = queues.backoff.get(key)
    if until is not None:
        return StopRecord(BACKOFF, f"in its requeue backoff until {until:%Y-%m-%dT%H:%M:%SZ}{backoff_cause(wl)}",
                          details={"requeueAt": until.isoformat()}, computed_now=True, at=now)
    orphan = queues.orphans.get(key)
    if orphan is not None:
        message = waiting_summary(state, wl) or orphan.message
        return StopRecord(ORPHAN, message, cluster_queue=orphan.cluster_queue, computed_now=True, at=now)
    if state.waits_as_parent(wl):
        return parent_stop(state, wl, now)
    parked = queues.parked_info(key)
    if parked is not None:
        record = getattr(parked.result, "stop", None)
        cq = state.cluster_queues.get(queues.assigned.get(key) or "")
        hold = state.namespace_hold(wl.namespace, cq) if cq is not None else ""
        if hold:  # unless the cycle's own record of it already says so, its namespace keeps it parked
            assert cq is not None
            stop = namespace_stop(state, cq, wl.namespace, hold, now)
            if not (isinstance(record, StopRecord) and parked.representative == key
                    and record.requeue_on == stop.requeue_on):
                return stop
        if isinstance(record, StopRecord):
            return record
    cq_name = queues.assigned.get(key)
    q = queues.queues.get(cq_name or "")
    if q is None:
        return decisions.get(key)
    ahead, head = q.position(key)
    if head is not None and head != key:
        head_record = decisions.get(head)
        if head_record is not None and head_record.parked:
            head_record = None  # requeued since: the next pass evaluates it again
        # it stays behind only as long as the head waits: a head not evaluated yet, or whose
        # preemptions are under way, may go, and this workload's turn may come in the same pass
        verdict = WAITS if head_record is not None and head_record.verdict == WAITS else UNDECIDED
        why = f"{head} waits: {head_record.message}" if head_record is not None else \
            f"{head} has not been evaluated yet"
        strict = " (StrictFIFO: its head blocks the queue)" if q.strategy == "StrictFIFO" else \
            " (kept at the head until its preemptions complete)" if head == q.sticky else ""
        details: dict[str, object] = {"position": ahead + 1, "head": head,
                                      "headStep": head_record.step if head_record is not None else None}
        if q.by_usage:
            strict += by_usage_text(state, q, key, head, details)  # type: ignore[arg-type]
        return StopRecord(NOT_HEAD, f"not a head: behind workload {head} in ClusterQueue {cq_name}{strict}, "
                          f"at position {ahead + 1}; {why}", verdict=verdict,
                          cluster_queue=cq_name or "", blocking=[head], computed_now=True, at=now,
                          details=details)
    record = decisions.get(key)
    if record is not None and record.parked:
        return None  # requeued since it was parked: the next pass evaluates it again
    return record


def by_usage_text(state: ClusterState, q: UsageOrderedQueue, key: str, head: str, details: dict[str, object]) -> str:
    """What admission fair sharing has to do with a workload's place behind the head: the
    usage of both LocalQueues, which the ClusterQueue orders by first."""
    mine, theirs = q.local_queue_of(key), q.local_queue_of(head)
    if mine is None or theirs is None:
        return ""
    usage, head_usage = state.local_queue_usage(mine), state.local_queue_usage(theirs)
    details.update(localQueue=mine, localQueueUsage=_finite(usage), headLocalQueue=theirs,
                   headLocalQueueUsage=_finite(head_usage))
    if mine == theirs:
        return f" (ordered by LocalQueue usage first: both are in LocalQueue {mine})"
    return (f" (ordered by LocalQueue usage first: its LocalQueue {mine} used {usage:.4g}, "
            f"the head's {theirs} {head_usage:.4g})")


def _finite(value: float) -> float | None:
    """A number JSON can hold (a LocalQueue of weight 0 has an infinite usage): None if not."""
    return value if math.isfinite(value) else None


__all__ = ["QuotaCheck", "StopRecord", "current_stop", "parent_stop", "quota_checks", "requeue_triggers"]
