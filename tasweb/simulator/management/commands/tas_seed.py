"""Seed the simulated cluster (idempotent)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from tasweb.simulator.services import simulator_seed


class Command(BaseCommand):
    help = ("Create the simulated cluster in the mirror: Topology, ResourceFlavor, ClusterQueue, LocalQueues, "
            "nodes and their non-TAS pods (shape from TAS_SIM_* variables). Seeding again changes nothing. "
            "Does nothing unless TAS_CLUSTER_SOURCE is simulator (or --force).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--force", action="store_true", help="seed whatever TAS_CLUSTER_SOURCE says")

    def handle(self, *args, force: bool, **options) -> None:
        source = settings.TAS_CLUSTER_SOURCE
        if source != "simulator" and not force:
            self.stdout.write(f"simulator: not seeded, the cluster source is {source!r}")
            return
        report = simulator_seed()
        self.stdout.write(f"simulator: {report.summary()}")
