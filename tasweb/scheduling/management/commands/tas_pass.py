"""Run one engine pass over the mirrored cluster and store its results."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from tasweb.scheduling.models import SchedulingPass
from tasweb.scheduling.services import leader_pass_run


class Command(BaseCommand):
    help = ("Run one scheduling pass (node failures, scheduling cycle, ungater) over the mirror, as the "
            "scheduler's leader: while a worker's pass holds the leader lock, the pass is asked of it instead.")

    def handle(self, *args, **options) -> None:
        outcome = leader_pass_run(trigger=SchedulingPass.Trigger.MANUAL)
        record = outcome.scheduling_pass
        if record is None:
            self.stdout.write("another worker is the scheduler's leader and is running a pass; "
                              "a pass was requested from it")
            return
        self.stdout.write(
            f"pass {record.id}: {record.workloads_seen} workloads, {record.admitted} admitted, "
            f"{record.evicted} evicted, {record.nodes_replaced} nodes replaced, {record.pods_ungated} pods ungated, "
            f"{record.pending} pending, {record.duration_ms} ms")
