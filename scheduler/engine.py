"""The long-lived engine: the cache, the queue manager and the passes that run on them.

An `Engine` is built once (the cold start: `Engine.from_parsed`, or empty and fed object by
object) and then takes changes one object at a time through its verbs (`upsert`,
`delete`), as Kueue's controllers feed its cache and queue manager. A pass does what
docs/CLI.md lists, on the state as it is, and leaves the state as the pass left it:

1. node-failure handling for the admitted TAS workloads on nodes that are not healthy
   (and those already listing unhealthy nodes); a node newly found failed is replaced by
   a later pass, once the second-pass queue's backoff (1 s at first) has run out; then
   pending pods pinned to a node their workload has no assignment on (stray and late
   pods) are moved to Failed;
2. the second pass for the workloads whose turn in the second-pass queue has come
   (replacement of an unhealthy node, or a delayed topology request whose checks are Ready);
3. scheduling cycles over the queues' heads, until one admits, parks and sends back to
   try other flavors nothing (or the number of cycles asked for ran);
4. the topology ungater for the workloads with gated pods.

Nothing here scans every workload, pod or node: each step starts from an index the cache
keeps (workloads per node, pods per workload, pinned pods that changed, queue heads, the
second-pass queue).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from scheduler.admission_wait import (
    checks_out_of_sync,
    checks_satisfied,
    delayed_requeue,
    evict_by_checks,
    evicted_by_checks,
    retry_time,
    synced_checks,
)
from scheduler.cluster import Charge, ClusterState, holds_quota, is_pending, node_is_healthy
from scheduler.config import Configuration
from scheduler.cycle import SchedulingCycle, unchanged_result
from scheduler.eviction import evict_and_record, is_evicted
from scheduler.explain import WorkloadExplanation, explain_workload
from scheduler.features import FeatureGates
from scheduler.model import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    Node,
    Pod,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from scheduler.node_failure import NodeFailureController, has_assignment_on_unhealthy_node
from scheduler.parse import ParsedObjects
from scheduler.pods_ready import deactivate, time_out, timeout_deadline
from scheduler.queues import QueueManager
from scheduler.replacement import NodeReplacer
from scheduler.results import Answers, PassResult, WorkloadResult, message_shape
from scheduler.second_pass import SecondPass, admit_reservation, awaiting_second_pass
from scheduler.stop_policy import to_drain, to_withdraw, withdraw_reservation
from scheduler.stops import StopRecord, current_stop
from scheduler.stray_pods import StrayPodController
from scheduler.ungater import apply_ungating, ungate_pods, workloads_with_gated_pods


def needs_second_pass(wl: Workload) -> bool:
    """Kueue's NeedsSecondPass: an admitted TAS workload with an unhealthy node to replace, or
    a reserved one whose delayed topology request can now be placed."""
    if not holds_quota(wl) or is_evicted(wl):
        return False
    return has_assignment_on_unhealthy_node(wl) or awaiting_second_pass(wl)


@dataclass(slots=True)
class PassOutcome:
    """What one pass did: the events, decisions and pods in `result`; per workload it
    decided on, its result; which workloads the pass itself changed in any way (not the
    changes it was given); why replacements failed."""

    result: PassResult
    decided: dict[str, WorkloadResult] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)
    replacement_failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    cycles: int = 0
    admitted: int = 0
    parked: int = 0
    stopped: bool = False  # its cycles were cut short by the caller's `stop`


class Engine:
    def __init__(self, gates: FeatureGates | None = None, warn: Callable[[str], None] = lambda _m: None,
                 *, state: ClusterState | None = None, config: Configuration | None = None) -> None:
        self.state = state if state is not None else ClusterState(None, gates, warn, config=config)
        self.queues = QueueManager(self.state)
        self.passes = 0
        # per waiting workload, the answer last given for it (status and reason with numbers
        # masked): a workload parked again with its equivalents under the same answer gets no
        # new result (thousands can be parked and requeued at every release of quota)
        self.answered = Answers()
        # per waiting workload a cycle decided on, where it stopped it (its latest evaluation);
        # the members of a parked equivalence class share their representative's record
        self.decisions: dict[str, StopRecord] = {}
        self.sync(None)

    @classmethod
    def from_parsed(cls, parsed: ParsedObjects, gates: FeatureGates,
                    warn: Callable[[str], None] = lambda _m: None, *,
                    config: Configuration | None = None) -> Engine:
        """The cold start: every object at once; what needs a second pass gets it in the next pass."""
        return cls(state=ClusterState(parsed, gates, warn, config=config))

    @property
    def gates(self) -> FeatureGates:
        return self.state.gates

    # ------------------------------------------------------------ changes, one object at a time

    def upsert(self, obj: object, *, order: int | None = None) -> None:
        """Add or update one object (a model instance from `scheduler.parse`); `order` places a
        new workload in the engine's order (see ParsedObjects.workload_order)."""
        if isinstance(obj, Workload):
            self.state.upsert_workload(obj, order=order)
            return
        verb = _UPSERT.get(type(obj))
        if verb is None:
            raise TypeError(f"not an object the engine reads: {type(obj).__name__}")
        verb(self.state, obj)

    def delete(self, kind: str, key: str) -> None:
        """Delete one object by kind and key (`name`, or `namespace/name` for namespaced kinds)."""
        verb = _DELETE.get(kind)
        if verb is None:
            raise ValueError(f"not a kind the engine reads: {kind}")
        verb(self.state, key)

    def sync(self, now: datetime | None) -> dict[str, Workload | None]:
        """Bring the queues in line with the cache; keep the second-pass queue current."""
        if now is not None:
            self.queues.now = now
        changed = self.queues.sync()
        if now is not None and self.queues.backoff:
            self.queues.release_backoff(now)
        for key, wl in changed.items():
            # a workload that changed or stopped waiting: its record is about what it was
            self.decisions.pop(key, None)
            if wl is None or not is_pending(wl):
                self.answered.pop(key, None)
            if wl is not None and needs_second_pass(wl):
                if key not in self.queues.second_pass:
                    self.queues.queue_second_pass(key, now)
            else:
                self.queues.second_pass_done(key)
        return changed

    # ------------------------------------------------------------ the pass

    def run_pass(self, now: datetime, *, cycles: int | None = None, result: PassResult | None = None,
                 bulk_results: bool = True, stop: Callable[[], bool] | None = None) -> PassOutcome:
        """One pass (see the module docstring), `cycles` scheduling cycles at most (None: until
        nothing more can be admitted). Without `bulk_results`, workloads parked with an
        equivalent one get no result of their own (they can be thousands a cycle). `stop`,
        asked before each cycle but the first, ends the cycles early when it says so (a
        caller's time budget: a pass that admits thousands runs a cycle per admission)."""
        self.passes += 1
        outcome = PassOutcome(result if result is not None else PassResult())
        self.sync(now)  # changes made before the pass are not the pass's
        if self.state.sample_usage(now):
            self.sync(now)  # LocalQueues' usage sampled: their workloads' places in the heaps
        changed: set[str] = set()
        holds: list[Charge] = []
        try:
            self._deactivated(now, outcome, changed)
            self._pods_ready_timeouts(now, outcome, changed)
            self._sync_admission_checks(now, outcome, changed)
            self._delay_retries(now, outcome, changed)
            self._evict_by_checks(now, outcome, changed)
            self._drain_stopped_queues(now, outcome, changed)
            self._admit_checked_reservations(now, outcome, changed)
            self._node_failures(now, outcome, holds, changed)
            self._second_pass(now, outcome, changed)
            self._cycles(now, outcome, cycles, changed, bulk_results, stop)
            # Kueue's LocalQueue controller takes the penalties of the admissions in right after
            self.state.sample_usage(now, penalties_only=True)
            self._ungate(outcome)
        finally:
            for charge in reversed(holds):
                self.state.release_hold(charge)
        outcome.changed = changed | set(outcome.decided)
        return outcome

    def _rewritten(self, wl: Workload, outcome: PassOutcome) -> None:
        """A workload a step of the pass rewrote (conditions, checks, admission): charged as it now
        stands, and answered so."""
        self.state.workload_changed(wl)
        outcome.decided[wl.key] = unchanged_result(self.state, wl)

    def _deactivated(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """Kueue's workload controller on deactivated workloads: evicted (those holding quota keep
        it until their pods are gone)."""
        self._rewrite_each(self.state.to_deactivate, lambda wl: True, lambda wl: deactivate(wl, now, outcome.result),
                           now, outcome, changed)

    def _pods_ready_timeouts(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """waitForPodsReady: evict the admitted workloads whose pods did not get ready in time."""
        config = self.state.config.wait_for_pods_ready
        if config is None:
            return
        timed_out = [wl for wl in self.state.holders()
                     if (due := timeout_deadline(wl, config)) is not None and now >= due]
        for wl in self.state.in_order(w.key for w in timed_out):
            time_out(wl, config, now, outcome.result)
            self._rewritten(wl, outcome)
        changed |= set(self.sync(now))

    def _drain_stopped_queues(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """stopPolicy HoldAndDrain: evict the admitted workloads of the drained queues; take back
        the reservations still waiting for admission checks in stopped or missing queues."""
        drained = to_drain(self.state)
        for wl, (reason, message) in drained:
            evict_and_record(wl, reason, message, now, outcome.result)  # Kueue's workload.Evict
            self._rewritten(wl, outcome)
        withdrawn = to_withdraw(self.state)
        for wl, message in withdrawn:
            withdraw_reservation(wl, message, now)
            self._rewritten(wl, outcome)
        if drained or withdrawn:
            changed |= set(self.sync(now))

    def _rewrite_each(self, among: Iterable[str], due: Callable[[Workload], object],
                      rewrite: Callable[[Workload], None], now: datetime, outcome: PassOutcome,
                      changed: set[str]) -> None:
        """One workload-controller step: every workload `among` the keys that is `due`, in the
        state's order, rewritten (charged anew, answered), then the queues synced once."""
        workloads = self.state.workload_map
        keys = [key for key in among if due(workloads[key])]
        for wl in self.state.in_order(keys):
            rewrite(wl)
            self._rewritten(wl, outcome)
        if keys:
            changed |= set(self.sync(now))

    def _sync_admission_checks(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """Kueue's workload controller keeps a reservation's list of admission checks the one its
        ClusterQueue asks for (the missing ones added Pending, for their controllers to act on)."""
        state = self.state

        def list_required(wl: Workload) -> None:
            wl.admission_checks = synced_checks(state, wl)

        self._rewrite_each(state.reserved_not_admitted, partial(checks_out_of_sync, state), list_required, now,
                           outcome, changed)

    def _delay_retries(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """KEP-3258: a check in Retry that asks for a delay (requeueAfterSeconds) sets the
        workload's requeueAt, before the eviction it leads to; it is not queued again until then."""

        def delay(wl: Workload) -> None:
            wl.requeue_at = retry_time(wl)  # what `delayed_requeue` found later than its requeueAt

        self._rewrite_each(self.state.with_retry_delay, lambda wl: delayed_requeue(wl, now), delay, now, outcome,
                           changed)

    def _evict_by_checks(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """Kueue's workload controller on an admission check in Retry (evicted, queued again) or
        Rejected (deactivated)."""
        self._rewrite_each(self.state.with_failed_checks, evicted_by_checks,
                           lambda wl: evict_by_checks(wl, now, outcome.result), now, outcome, changed)

    def _admit_checked_reservations(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        """Kueue's workload controller: a reservation whose admission checks all turned Ready is
        admitted (one with a delayed topology waits for the second pass instead)."""
        state = self.state
        self._rewrite_each(state.reserved_not_admitted, partial(checks_satisfied, state),
                           lambda wl: outcome.result.events.append(admit_reservation(wl, now)), now, outcome,
                           changed)

    def _node_failures(self, now: datetime, outcome: PassOutcome, holds: list[Charge], changed: set[str]) -> None:
        state = self.state
        controller = NodeFailureController(state, now, outcome.result)
        controller.run(self.node_failure_candidates())
        for wl in controller.changed.values():
            state.workload_changed(wl)
        changed |= set(self.sync(now))
        queues = self.queues
        ready = state.in_order(queues.second_pass_ready(now))
        replacer = NodeReplacer(state, now, outcome.result,
                                told={w.key: told for w in ready if (told := queues.second_pass_failure(w.key))})
        replacer.run([w for w in ready if w.unhealthy_nodes])
        holds.extend(replacer.holds)
        outcome.replacement_failures.update(replacer.failures)
        for wl in ready:
            if wl.key in replacer.retry:
                queues.queue_second_pass(wl.key, now, queues.second_pass_iteration(wl.key), replacer.told[wl.key])
            elif wl.unhealthy_nodes or not awaiting_second_pass(wl):
                queues.second_pass_done(wl.key)
        for wl in replacer.changed.values():
            state.workload_changed(wl)
        changed |= set(self.sync(now))
        StrayPodController(state, now, outcome.result).run()

    def _second_pass(self, now: datetime, outcome: PassOutcome, changed: set[str]) -> None:
        state = self.state
        ready = [w for w in state.in_order(self.queues.second_pass_ready(now)) if awaiting_second_pass(w)]
        if not ready:
            return
        second = SecondPass(state, now, outcome.result)
        second.run(ready)
        outcome.decided.update(second.decided)
        for wl in ready:
            if wl.key in second.retry:
                self.queues.queue_second_pass(wl.key, now, self.queues.second_pass_iteration(wl.key))
            else:
                self.queues.second_pass_done(wl.key)
        changed |= set(self.sync(now))

    def _cycles(self, now: datetime, outcome: PassOutcome, max_cycles: int | None, changed: set[str],
                bulk_results: bool, stop: Callable[[], bool] | None = None) -> None:
        state = self.state
        # built before the cycle, so that what a cycle holds for a moment is never rebuilt away
        _ = state.tas_snapshots, state.quota
        while max_cycles is None or outcome.cycles < max_cycles:
            if stop is not None and outcome.cycles and stop():  # one cycle at least: a pass always moves on
                outcome.stopped = True
                break
            cycle = SchedulingCycle(state, self.queues, now, outcome.result)
            cycle.pass_number = self.passes
            cycle.bulk_keys = bulk_results
            cycle.answered = self.answered
            decided = cycle.run()
            self.note_decisions(decided)
            outcome.cycles += 1
            outcome.decided.update(decided)
            if bulk_results:
                outcome.decided.update(cycle.bulk_results(unanswered=self._unanswered))
            for key, result in decided.items():
                self.answered[key] = (result.status, message_shape(result.message))
            outcome.parked += cycle.parked
            outcome.admitted += cycle.admitted
            changed |= set(self.sync(now))
            # a head sent back to try the flavors it has left may be admitted on one of them next cycle
            if not decided or (cycle.admitted == 0 and cycle.parked == 0 and cycle.rescans == 0) or cycle.blocked:
                break

    def note_decisions(self, decided: dict[str, WorkloadResult]) -> None:
        for key, result in decided.items():
            if isinstance(result.stop, StopRecord):
                self.decisions[key] = result.stop
            else:
                self.decisions.pop(key, None)

    # ------------------------------------------------------------ why a workload waits

    def stop_record(self, key: str, now: datetime | None = None) -> StopRecord | None:
        """Where the scheduler stops the waiting workload `key` now (see `scheduler.stops`);
        None when no cycle has decided on it since it arrived or changed."""
        return current_stop(self.state, self.queues, self.decisions, key, now)

    def explain(self, key: str, now: datetime | None = None) -> WorkloadExplanation | None:
        """Why-pending for `key`: the cycle's record, with a fresh computation only for what it
        did not reach."""
        wl = self.state.workload(key)
        if wl is None:
            return None
        return explain_workload(self.state, wl, stop=self.stop_record(key, now))

    def _unanswered(self, keys: set[str], result: WorkloadResult) -> list[str]:
        """Those of `keys` to whom `result` gives another answer than the last they were given
        (they are given it now)."""
        return self.answered.give(keys, (result.status, message_shape(result.message)))

    def _ungate(self, outcome: PassOutcome) -> None:
        state = self.state
        pods = ungate_pods(state, workloads_with_gated_pods(state))
        outcome.result.pods = pods
        if pods:
            by_key = state.pod_map()
            current = [by_key[f"{p.namespace}/{p.name}"] for p in pods if f"{p.namespace}/{p.name}" in by_key]
            for pod in apply_ungating(current, pods):
                state.upsert_pod(pod)

    # ------------------------------------------------------------ indexes the pass starts from

    def node_failure_candidates(self) -> list[Workload]:
        """Admitted workloads assigned to a node that is not healthy, or listing unhealthy nodes."""
        return self.state.in_order(self.state.failure_candidates())

    # ------------------------------------------------------------ answers for every workload

    def results_for(self, keys: Iterable[str], outcome: PassOutcome) -> list[WorkloadResult]:
        from scheduler.cycle import unchanged_result

        out = []
        for key in keys:
            wl = self.state.workload(key)
            if wl is None:
                continue
            out.append(outcome.decided.get(key) or unchanged_result(self.state, wl))
        return out


def _upsert_map() -> dict[type, Callable[[ClusterState, object], None]]:
    return {
        Node: ClusterState.upsert_node,
        Pod: ClusterState.upsert_pod,
        Workload: ClusterState.upsert_workload,
        ClusterQueue: ClusterState.upsert_cluster_queue,
        LocalQueue: ClusterState.upsert_local_queue,
        Cohort: ClusterState.upsert_cohort,
        ResourceFlavor: ClusterState.upsert_flavor,
        Topology: ClusterState.upsert_topology,
        AdmissionCheck: ClusterState.upsert_admission_check,
        WorkloadPriorityClass: ClusterState.upsert_priority_class,
        Namespace: ClusterState.upsert_namespace,
    }


_UPSERT = _upsert_map()
_DELETE: dict[str, Callable[[ClusterState, str], None]] = {
    "Node": ClusterState.delete_node,
    "Pod": ClusterState.delete_pod,
    "Workload": ClusterState.delete_workload,
    "ClusterQueue": ClusterState.delete_cluster_queue,
    "LocalQueue": ClusterState.delete_local_queue,
    "Cohort": ClusterState.delete_cohort,
    "ResourceFlavor": ClusterState.delete_flavor,
    "Topology": ClusterState.delete_topology,
    "AdmissionCheck": ClusterState.delete_admission_check,
    "WorkloadPriorityClass": ClusterState.delete_priority_class,
    "Namespace": ClusterState.delete_namespace,
}

__all__ = ["Engine", "PassOutcome", "needs_second_pass", "node_is_healthy"]
