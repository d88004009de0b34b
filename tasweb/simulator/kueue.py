"""The simulator's stand-in for Kueue: with `kueue_profile` set and TAS_MODE observe, the
simulated cluster has a Kueue of its own, and the service beside it only observes, explains
and compares, as it does beside a real Kueue.

The stand-in is this same engine with other feature gates (`config.KUEUE_PROFILES`): a pass
over the mirror, as Kueue's scheduler and TAS controllers would make it, whose decisions are
written back as Kueue writes them, through the simulated API server: Workload status
(admission with its v1beta2 TopologyAssignment, conditions, unhealthyNodes), pods ungated
with their node selector, pods on unusable nodes failed. The service reads those writes as it
reads a real cluster's: workload_observed records each transition and notes each new
admission for the next observe pass to compare.

It builds its engine afresh every tick: meant for the embedded default's demo-sized cluster.
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.engine import Engine
from scheduler.features import FeatureGates
from scheduler.results import WorkloadResult
from tasweb.cluster import models as cluster
from tasweb.scheduling.selectors import engine_inputs
from tasweb.scheduling.services import (
    engine_pass_run,
    kueue_configuration,
    status_merged,
    workload_observed,
    workload_status_json,
)
from tasweb.simulator.config import SimulatorSettings, kueue_gates

logger = logging.getLogger(__name__)

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


@dataclass
class KueueReport:
    admitted: int = 0
    written: int = 0
    pods_ungated: int = 0
    pods_failed: int = 0


class StandInKueue:
    """One pass of the stand-in Kueue over the mirror, written through the tick's writer."""

    def __init__(self, writer: Any, config: SimulatorSettings, now: datetime) -> None:
        self.writer = writer
        self.now = now
        self.gates = FeatureGates.parse(kueue_gates(config))
        self.report = KueueReport()

    def run(self) -> KueueReport:
        engine = Engine.from_parsed(engine_inputs(), self.gates, config=kueue_configuration()[1])
        result = engine_pass_run(engine, self.now)
        self.write_workloads(result.workloads)
        self.write_pods(result)
        return self.report

    def write_workloads(self, results: list[WorkloadResult]) -> None:
        by_namespace: dict[str, set[str]] = defaultdict(set)
        for wr in results:
            by_namespace[wr.workload.namespace].add(wr.workload.name)
        rows = {}
        for namespace, names in by_namespace.items():
            for row in cluster.Workload.objects.filter(namespace=namespace, name__in=names):
                rows[row.key] = row
        for wr in results:
            row = rows.get(wr.key)
            if row is None:
                continue
            old = (row.raw.get("status") or {})
            status = status_merged(old, workload_status_json(wr))
            if status == old:
                continue
            raw = copy.deepcopy(row.raw)
            raw["status"] = status
            old_status, old_admission = row.status, old.get("admission")
            self.writer.put("Workload", raw)
            fresh = cluster.Workload.objects.get(uid=row.uid)
            workload_observed(workload=fresh, old_status=old_status, old_admission=old_admission, at=self.now)
            self.report.written += 1
            if status.get("admission") and not old_admission:
                self.report.admitted += 1

    def write_pods(self, result: Any) -> None:
        ungated = {(p.namespace, p.name): p for p in result.pods if p.ungated}
        failed = {(t.namespace, t.name): t for t in result.terminated_pods}
        wanted = {name for _, name in [*ungated, *failed]}
        if not wanted:
            return
        for row in cluster.Pod.objects.filter(name__in=wanted).order_by("id"):
            key = (row.namespace, row.name)
            raw = copy.deepcopy(row.raw)
            if key in ungated:
                spec = raw.setdefault("spec", {})
                gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != TOPOLOGY_GATE]
                if gates:
                    spec["schedulingGates"] = gates
                else:
                    spec.pop("schedulingGates", None)
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **ungated[key].node_selector}
                self.report.pods_ungated += 1
            elif key in failed:
                t = failed[key]
                raw["status"] = {**(raw.get("status") or {}), "phase": "Failed", "conditions": [
                    {"type": "TerminatedByKueue", "status": "True", "reason": t.reason, "message": t.message,
                     "lastTransitionTime": self.now.strftime("%Y-%m-%dT%H:%M:%SZ")}]}
                self.report.pods_failed += 1
            else:
                continue
            self.writer.put("Pod", raw)


def stand_in_kueue_run(*, writer: Any, config: SimulatorSettings, now: datetime) -> KueueReport:
    report = StandInKueue(writer, config, now).run()
    if report.written or report.pods_ungated or report.pods_failed:
        logger.debug("stand-in Kueue (%s): %d admitted, %d workloads written, %d pods ungated, %d failed",
                     config.kueue_profile, report.admitted, report.written, report.pods_ungated, report.pods_failed)
    return report


__all__ = ["KueueReport", "StandInKueue", "stand_in_kueue_run"]
