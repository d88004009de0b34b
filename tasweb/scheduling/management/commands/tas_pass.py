"""Run one engine pass over the mirrored cluster and store its results."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from tasweb.scheduling.services import scheduling_pass_run


class Command(BaseCommand):
    help = "Run one scheduling pass (node failures, scheduling cycle, ungater) over the mirror."

    def handle(self, *args, **options) -> None:
        record = scheduling_pass_run()
        self.stdout.write(
            f"pass {record.id}: {record.workloads_seen} workloads, {record.admitted} admitted, "
            f"{record.evicted} evicted, {record.nodes_replaced} nodes replaced, {record.pods_ungated} pods ungated, "
            f"{record.pending} pending, {record.duration_ms} ms")
