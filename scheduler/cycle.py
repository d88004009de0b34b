"""One scheduling pass over the pending workloads.

Workloads are taken in priority order (higher first), then by creation time, and admitted
one after another: a flavor for every PodSet within the ClusterQueue's nominal quota, then
a TAS placement for every PodSet that asks for one. What a workload takes is counted
before the next one is considered.
"""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.cluster import ClusterState, FlavorResource
from scheduler.flavorassigner import FlavorAssigner, FlavorAssignment
from scheduler.model import Admission, Condition, PodSetAssignment, Workload
from scheduler.results import (
    ADMITTED,
    EVICTED,
    FINISHED,
    INADMISSIBLE,
    PENDING,
    QUOTA_RESERVED,
    Event,
    PassResult,
    PodSetResult,
    WorkloadResult,
)

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_MAX_GO_DURATION_SECONDS = 9223372036.854775807


def wait_seconds(since: datetime | None, now: datetime) -> str:
    """Go's time.Since(t).Round(time.Second) as Kueue prints it (a zero time saturates)."""
    since = since or _GO_ZERO_TIME
    seconds = min((now - since).total_seconds(), _MAX_GO_DURATION_SECONDS)
    return f"{round(seconds)}s"


def queue_order_key(state: ClusterState, wl: Workload) -> tuple:
    return (-state.priority_of(wl), wl.creation_timestamp or _GO_ZERO_TIME, wl.namespace, wl.name)


class SchedulingCycle:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult) -> None:
        self.state = state
        self.now = now
        self.result = result

    def pending_workloads(self) -> list[Workload]:
        pending = [w for w in self.state.workloads
                   if w.active and not w.has_quota_reservation and not w.is_finished]
        return sorted(pending, key=lambda w: queue_order_key(self.state, w))

    def run(self) -> dict[str, WorkloadResult]:
        decided: dict[str, WorkloadResult] = {}
        for wl in self.pending_workloads():
            decided[wl.key] = self.schedule(wl)
        return decided

    # ------------------------------------------------------------ one workload

    def schedule(self, wl: Workload) -> WorkloadResult:
        lq = self.state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        if lq is None:
            name = wl.queue_name or '""'
            return self.not_admitted(wl, "", f"LocalQueue {name} doesn't exist", INADMISSIBLE, "Pending")
        cq = self.state.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            return self.not_admitted(wl, lq.cluster_queue, f"ClusterQueue {lq.cluster_queue} doesn't exist",
                                     INADMISSIBLE, "Pending")
        assigner = FlavorAssigner(self.state, wl, cq)
        assignment = assigner.assign()
        if not assignment.ok:
            return self.not_admitted(wl, cq.name, assignment.failure, INADMISSIBLE, assignment.kind,
                                     failed_pod_set=assignment.failed_pod_set)
        placements = assigner.place(assignment)
        failed = next((name for name, p in placements.items() if p.failure), None)
        if failed is not None:
            message = f"couldn't assign flavors to pod set {failed}: {placements[failed].failure}"
            fits_empty = not any(p.failure for p in assigner.place(assignment, simulate_empty=True).values())
            status = PENDING if fits_empty else INADMISSIBLE
            return self.not_admitted(wl, cq.name, message, status, "TopologyPlacementFailed",
                                     failed_pod_set=failed, assignment=assignment)
        return self.admit(wl, cq.name, assignment, {n: p.assignment for n, p in placements.items()})

    def not_admitted(self, wl: Workload, cq: str, message: str, status: str, reason: str, *,
                     failed_pod_set: str = "", assignment: FlavorAssignment | None = None) -> WorkloadResult:
        pod_sets = []
        for ps in wl.pod_sets:
            flavors = {}
            if assignment is not None:
                psf = next((p for p in assignment.pod_sets if p.pod_set.name == ps.name), None)
                flavors = dict(psf.flavors) if psf else {}
            failure = message.split(": ", 1)[-1] if ps.name == failed_pod_set else ""
            pod_sets.append(PodSetResult(ps.name, ps.count, flavors, failure_reason=failure))
        self.result.events.append(Event(wl.key, "Warning", reason or "Pending", message))
        conditions = [Condition("QuotaReserved", "False", "Pending", message, self.now)]
        return WorkloadResult(wl, cq, status, message, pod_sets, list(wl.unhealthy_nodes), conditions=conditions)

    def admit(self, wl: Workload, cq_name: str, assignment: FlavorAssignment, tas: dict) -> WorkloadResult:
        cq = self.state.cluster_queues[cq_name]
        psas = []
        pod_sets = []
        for psf in assignment.pod_sets:
            ta = tas.get(psf.pod_set.name)
            psas.append(PodSetAssignment(psf.pod_set.name, dict(psf.flavors), psf.count, dict(psf.usage), ta,
                                         psf.delayed))
            pod_sets.append(PodSetResult(psf.pod_set.name, psf.count, dict(psf.flavors), ta, psf.delayed))
        wl.admission = Admission(cq_name, psas)
        for psa in psas:
            for resource, value in psa.resource_usage.items():
                self.state.quota_usage[cq_name][FlavorResource(psa.flavors[resource], resource)] += value
            ps = wl.pod_set(psa.name)
            if psa.topology_assignment is not None and ps is not None:
                self.state.add_tas_assignment_usage(psa, ps.spec.requests, sign=1)
        flavors = {f for psf in assignment.pod_sets for f in psf.flavors.values()}
        needs_checks = any(self.state.checks_on_flavor(cq, f) for f in flavors)
        status = QUOTA_RESERVED if needs_checks else ADMITTED
        queued = wait_seconds(wl.creation_timestamp, self.now)
        reserved = f"Quota reserved in ClusterQueue {cq_name}, wait time since queued was {queued}"
        conditions = [Condition("QuotaReserved", "True", "QuotaReserved", reserved, self.now)]
        self.result.events.append(Event(wl.key, "Normal", "QuotaReserved", reserved))
        if not needs_checks:
            admitted = f"Admitted by ClusterQueue {cq_name}, wait time since reservation was 0s"
            conditions.append(Condition("Admitted", "True", "Admitted", admitted, self.now))
            self.result.events.append(Event(wl.key, "Normal", "Admitted", admitted))
        # the workload now holds its admission, as later steps of the pass (the ungater) see it
        wl.conditions = [c for c in wl.conditions if c.type not in {"QuotaReserved", "Admitted"}] + conditions
        return WorkloadResult(wl, cq_name, status, reserved, pod_sets, list(wl.unhealthy_nodes),
                              conditions=list(wl.conditions))


def unchanged_result(state: ClusterState, wl: Workload) -> WorkloadResult:
    """A workload the pass left as it was: report its current state."""
    cq = state.cluster_queue_for(wl)
    evicted = wl.condition("Evicted")
    if wl.is_finished:
        status = FINISHED
    elif evicted is not None and evicted.status == "True":
        status = EVICTED
    elif wl.has_quota_reservation:
        status = ADMITTED if wl.is_admitted else QUOTA_RESERVED
    else:
        status = PENDING
    pod_sets = []
    for ps in wl.pod_sets:
        psa = wl.admission.assignment_for(ps.name) if wl.admission else None
        if psa is not None:
            pod_sets.append(PodSetResult(ps.name, psa.count if psa.count is not None else ps.count,
                                         dict(psa.flavors), psa.topology_assignment, psa.delayed_topology_request))
        else:
            pod_sets.append(PodSetResult(ps.name, ps.count))
    message = ""
    for cond_type in ("Finished", "Admitted", "QuotaReserved"):
        cond = wl.condition(cond_type)
        if cond is not None and cond.message:
            message = cond.message
            break
    eviction = evicted.message if status == EVICTED and evicted is not None else ""
    return WorkloadResult(wl, cq.name if cq else "", status, eviction or message, pod_sets,
                          list(wl.unhealthy_nodes), eviction_reason=eviction, conditions=list(wl.conditions))
