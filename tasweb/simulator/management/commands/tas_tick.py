"""Advance the simulated cluster by hand, each tick followed by a scheduling pass."""

from __future__ import annotations

import time
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from tasweb.scheduling.models import SchedulingPass
from tasweb.scheduling.services import scheduling_pass_run
from tasweb.simulator.config import simulator_settings
from tasweb.simulator.models import SimulatorState
from tasweb.simulator.services import simulator_tick


class Command(BaseCommand):
    help = "Run simulator ticks, each followed by a scheduling pass (what the worker does every tick)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--ticks", type=int, default=1, help="how many ticks (default 1)")
        parser.add_argument("--no-pass", action="store_true", help="only tick; run no scheduling pass")
        parser.add_argument("--fast", action="store_true",
                            help="do not wait between ticks: simulated time advances by the tick interval")

    def handle(self, *args, ticks: int, no_pass: bool, fast: bool, **options) -> None:
        step = timedelta(seconds=simulator_settings().tick_seconds)
        now = timezone.now()
        last = SimulatorState.objects.values_list("last_tick_at", flat=True).first()
        if fast and last is not None and last + step > now:
            now = last + step  # simulated time never runs backwards
        for i in range(ticks):
            if not fast and i:
                time.sleep(step.total_seconds())
            moment = now + step * i if fast else timezone.now()
            report = simulator_tick(now=moment)
            line = report.summary()
            if not no_pass:
                record = scheduling_pass_run(now=moment, trigger=SchedulingPass.Trigger.MANUAL)
                line += (f" | pass {record.id}: {record.admitted} admitted, {record.evicted} evicted, "
                         f"{record.nodes_replaced} replaced, {record.pods_ungated} ungated, {record.pending} pending")
            self.stdout.write(line)
