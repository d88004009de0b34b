"""The simulator's own bookkeeping. The cluster it simulates lives in the mirror
(tasweb.cluster), exactly as a real cluster's objects would."""

from __future__ import annotations

from django.db import models


class SimulatorState(models.Model):
    """One row: where the simulation stands."""

    seed = models.BigIntegerField(default=1)
    ticks = models.BigIntegerField(default=0)
    last_tick_at = models.DateTimeField(null=True, blank=True)
    # the last resourceVersion handed out; every write of the simulator takes the next one
    resource_version = models.BigIntegerField(default=0)
    # the shape the cluster was seeded with: {"blocks", "racks_per_block", "nodes_per_rack", ...}
    shape = models.JSONField(default=dict, blank=True)
    # nodes out of service: name -> {"kind": "failure" | "drain", "since": RFC 3339, "until": RFC 3339}
    outages = models.JSONField(default=dict, blank=True)
    # running totals of what ticks did (arrivals, failures, completions, ...)
    totals = models.JSONField(default=dict, blank=True)
    seeded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "simulator state"

    def __str__(self) -> str:
        return f"simulator after {self.ticks} ticks"
