"""waitForPodsReady: blocked admission, eviction on timeout, requeue backoff and deactivation,
and the queue order of workloads evicted for it."""

from __future__ import annotations

from datetime import timedelta

from scheduler.config import parse_configuration
from scheduler.pods_ready import backoff

from .factories import (
    NOW,
    admitted,
    domains_json,
    grid,
    result_of,
    run,
    run_passes,
    tas_setup,
    timestamp,
    workload,
)
from .test_config import configuration

HOST = "kubernetes.io/hostname"


def pods_ready_config(**fields) -> object:
    return parse_configuration(configuration(waitForPodsReady={"timeout": "5m", **fields}))


def with_conditions(wl: dict, *conditions: dict) -> dict:
    types = {c["type"] for c in conditions}
    status = wl.setdefault("status", {})
    status["conditions"] = [c for c in status.get("conditions", []) if c["type"] not in types] + list(conditions)
    return wl


def condition(type_: str, status: str, *, reason: str = "", at: float = 0, message: str = "") -> dict:
    return {"type": type_, "status": status, "reason": reason or type_, "message": message,
            "lastTransitionTime": timestamp(at)}


def running(name: str, *, admitted_at: float = -60, ready: bool | None = None, ready_reason: str = "",
            ready_at: float = 0) -> dict:
    """An admitted workload of 2 CPUs on one node of the first rack (admitted `admitted_at`
    seconds from NOW); `ready` sets its PodsReady condition."""
    wl = admitted(workload(name, cpu="2", required=HOST),
                  assignments={"main": domains_json([HOST], [("b1-r1-n1", 1)])})
    extra = [condition("Admitted", "True", at=admitted_at, message="admitted")]
    if ready is not None:
        extra.append(condition("PodsReady", "True" if ready else "False", reason=ready_reason or "PodsReady",
                               at=ready_at))
    return with_conditions(wl, *extra)


def cluster() -> list[dict]:
    return tas_setup() + grid(blocks=1, racks=1, nodes=2, cpu="4")


class TestBlockedAdmission:
    def test_a_head_that_fits_waits_for_pods_ready(self):
        config = pods_ready_config(blockAdmission=True)
        result = run([*cluster(), running("busy"), workload("next", cpu="1")], config=config)
        wl = result_of(result, "next")
        assert wl.status == "Pending"
        assert wl.message == "waiting for all admitted workloads to be in PodsReady condition"
        reserved = next(c for c in wl.conditions if c.type == "QuotaReserved")
        assert (reserved.status, reserved.reason) == ("False", "Waiting")

    def test_ready_pods_unblock_it(self):
        config = pods_ready_config(blockAdmission=True)
        result = run([*cluster(), running("busy", ready=True), workload("next", cpu="1")], config=config)
        assert result_of(result, "next").status == "Admitted"

    def test_one_admission_at_a_time(self):
        """A workload admitted in the pass has no ready pods yet: the next one waits for it."""
        config = pods_ready_config(blockAdmission=True)
        result = run([*cluster(), workload("first", cpu="1", created=0), workload("second", cpu="1", created=1)],
                     config=config)
        assert result_of(result, "first").status == "Admitted"
        assert result_of(result, "second").message == "waiting for all admitted workloads to be in PodsReady condition"

    def test_without_block_admission_or_configuration_nothing_waits(self):
        objects = [*cluster(), running("busy"), workload("next", cpu="1")]
        assert result_of(run(objects, config=pods_ready_config()), "next").status == "Admitted"
        assert result_of(run(objects), "next").status == "Admitted"


class TestTimeout:
    def test_evicted_after_the_timeout_with_a_backoff(self):
        config = pods_ready_config(requeuingStrategy={"backoffBaseSeconds": 10})
        result = run([*cluster(), running("slow", admitted_at=-301), running("young", admitted_at=-299)],
                     config=config)
        slow = result_of(result, "slow")
        assert slow.status == "Evicted"
        evicted = next(c for c in slow.conditions if c.type == "Evicted")
        assert (evicted.reason, evicted.message) == ("PodsReadyTimeout", "Exceeded the PodsReady timeout default/slow")
        assert slow.workload.requeue_count == 1
        assert slow.workload.requeue_at == NOW + timedelta(seconds=10)
        assert result_of(result, "young").status == "Admitted"

    def test_a_later_requeue_time_already_set_is_kept(self):
        """requeueAt is shared with the admission checks' retry delays: the backoff does not
        shorten a later one."""
        config = pods_ready_config(requeuingStrategy={"backoffBaseSeconds": 10})
        wl = running("slow", admitted_at=-301)
        wl["status"]["requeueState"] = {"requeueAt": "2025-06-01T13:00:00Z"}
        slow = result_of(run([*cluster(), wl], config=config), "slow")
        assert slow.status == "Evicted"
        assert (slow.workload.requeue_count, slow.workload.requeue_at) == (1, NOW + timedelta(hours=1))

    def test_ready_pods_are_never_timed_out(self):
        result = run([*cluster(), running("fine", admitted_at=-3600, ready=True)], config=pods_ready_config())
        assert result_of(result, "fine").status == "Admitted"

    def test_recovery_timeout_counts_from_the_pods_becoming_unready(self):
        config = pods_ready_config(recoveryTimeout="1m")
        objects = [*cluster(),
                   running("lost", admitted_at=-3600, ready=False, ready_reason="WaitForRecovery", ready_at=-61),
                   running("recovering", admitted_at=-3600, ready=False, ready_reason="WaitForRecovery",
                           ready_at=-59)]
        result = run(objects, config=config)
        assert result_of(result, "lost").status == "Evicted"
        assert result_of(result, "recovering").status == "Admitted"

    def test_past_the_requeue_limit_it_is_deactivated(self):
        config = pods_ready_config(requeuingStrategy={"backoffLimitCount": 1})
        wl = running("tired", admitted_at=-600)
        wl["status"]["requeueState"] = {"count": 1}
        result = run([*cluster(), wl], config=config)
        tired = result_of(result, "tired")
        assert tired.status == "Evicted"
        assert not tired.workload.active
        reasons = {c.type: c.reason for c in tired.conditions}
        assert reasons["Evicted"] == "DeactivatedDueToRequeuingLimitExceeded"
        assert reasons["DeactivationTarget"] == "RequeuingLimitExceeded"
        # Kueue's event for an eviction: "EvictedDueTo" and the Evicted condition's reason
        assert [e.reason for e in result.events if e.key == "default/tired"] == [
            "EvictedDueToDeactivatedDueToRequeuingLimitExceeded"]

    def test_backoff_doubles_up_to_the_maximum(self):
        config = pods_ready_config(requeuingStrategy={"backoffBaseSeconds": 10, "backoffMaxSeconds": 50})
        assert [backoff(n, config.wait_for_pods_ready).total_seconds() for n in (1, 2, 3, 4)] == [10, 20, 40, 50]


class TestRequeueing:
    def requeued(self, name: str, *, at: float, created: float = 0) -> dict:
        """Pending again after a PodsReady timeout at `at`, in backoff until `at` + 60 s."""
        wl = workload(name, cpu="1", created=created)
        message = f"Exceeded the PodsReady timeout default/{name}"
        wl["status"] = {"requeueState": {"count": 1, "requeueAt": timestamp(at + 60)}}
        return with_conditions(wl, condition("Evicted", "True", reason="PodsReadyTimeout", at=at, message=message),
                               condition("QuotaReserved", "False", reason="Pending", at=at, message=message))

    def test_not_queued_before_its_backoff_ends(self):
        objects = [*cluster(), self.requeued("backing-off", at=-30)]
        result = run_passes(objects, passes=2, step=timedelta(seconds=20))  # NOW and NOW + 20 s
        assert result_of(result, "backing-off").status == "Pending"
        assert result_of(result, "backing-off").workload.admission is None
        later = run_passes(objects, passes=2, step=timedelta(seconds=40))  # NOW + 40 s: past NOW + 30 s
        assert result_of(later, "backing-off").status == "Admitted"

    def test_queue_order_is_the_eviction_time(self):
        """Evicted long after `newer` was created, the old workload queues behind it (Eviction);
        with the Creation strategy its creation time counts again."""
        objects = [*tas_setup(quota={"cpu": "1"}), *grid(blocks=1, racks=1, nodes=1, cpu="4"),
                   self.requeued("older", at=-3600, created=-7200), workload("newer", cpu="1", created=-5000)]
        eviction = run(objects, cycles=1, config=pods_ready_config())
        assert result_of(eviction, "newer").status == "Admitted"
        assert result_of(eviction, "older").status != "Admitted"
        creation = run(objects, cycles=1, config=pods_ready_config(requeuingStrategy={"timestamp": "Creation"}))
        assert result_of(creation, "older").status == "Admitted"
        assert result_of(creation, "newer").status != "Admitted"


def test_why_pending_in_the_backoff_names_the_pods_ready_timeout():
    from scheduler.stops import backoff_cause

    from .factories import parse_one

    wl = workload("slow", cpu="1")
    wl["status"] = {"requeueState": {"count": 2, "requeueAt": "2025-06-01T12:05:00Z"},
                    "conditions": [{"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
                                    "message": "Exceeded the PodsReady timeout default/slow"}]}
    assert backoff_cause(parse_one(wl)) == ", after its PodsReady timeout (requeued 2 time(s))"
    wl["status"]["conditions"][0]["status"] = "True"  # the backoff is over
    assert backoff_cause(parse_one(wl)) == ""
