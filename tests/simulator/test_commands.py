"""The simulator's beat entry, Celery task and management commands."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings

from tasweb.celery import app as celery_app
from tasweb.cluster import models as cluster
from tasweb.scheduling.models import SchedulingPass
from tasweb.simulator.models import SimulatorState

PROJECT_ROOT = Path(__file__).resolve().parents[2]

BEAT = r"""
import json
import logging
from tasweb.settings import base
entry = base.CELERY_BEAT_SCHEDULE.get("simulator-tick")
print(json.dumps(entry and {"task": entry["task"], "seconds": entry["schedule"].total_seconds()}))
"""


def beat_entry(**env: str) -> dict | None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TAS_", "DJANGO_"))}
    proc = subprocess.run([sys.executable, "-c", BEAT], cwd=PROJECT_ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_beat_ticks_the_simulator_only_when_it_is_the_cluster(tmp_path):
    var = str(tmp_path)
    assert beat_entry(TAS_VAR_DIR=var) == {"task": "tasweb.simulator.tasks.tick", "seconds": 2.0}
    assert beat_entry(TAS_VAR_DIR=var, TAS_SIM_TICK_SECONDS="1") == {"task": "tasweb.simulator.tasks.tick",
                                                                     "seconds": 1.0}
    assert beat_entry(TAS_VAR_DIR=var, TAS_CLUSTER_SOURCE="kubernetes") is None
    assert beat_entry(TAS_VAR_DIR=var, TAS_CLUSTER_SOURCE="none") is None


def test_the_tick_task_is_registered_under_the_name_beat_sends():
    from tasweb.simulator import tasks

    assert tasks.tick.name == "tasweb.simulator.tasks.tick"
    assert tasks.tick.name in celery_app.tasks


@pytest.mark.django_db
@pytest.mark.services
def test_tas_seed_and_tas_tick(settings):
    settings.TAS_SIMULATOR = {"initial_workloads": 4, "arrivals_per_minute": 0, "node_failures_per_minute": 0,
                              "drains_per_minute": 0}
    out = StringIO()
    call_command("tas_seed", stdout=out)
    assert "64 nodes; created" in out.getvalue()
    call_command("tas_seed", stdout=out)
    assert "already seeded, nothing changed" in out.getvalue()

    out = StringIO()
    call_command("tas_tick", "--ticks", "3", "--fast", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("tick 1: 4 arrivals")
    assert "| pass " in lines[0]
    assert SimulatorState.objects.get().ticks == 3
    assert SchedulingPass.objects.count() == 3
    assert cluster.Pod.objects.filter(tas=True).exists()


@pytest.mark.django_db
@pytest.mark.services
def test_tas_seed_leaves_a_real_cluster_alone():
    out = StringIO()
    with override_settings(TAS_CLUSTER_SOURCE="kubernetes"):
        call_command("tas_seed", stdout=out)
    assert "not seeded" in out.getvalue()
    assert not cluster.Node.objects.exists()


class NoStack:
    """The supervisor of tas_run, starting nothing: the test is about what comes before."""

    def __init__(self, programs, *, out) -> None:
        self.programs = programs

    def run(self) -> int:
        return 0


def seed_summary_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "64 nodes; created" in line]


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
@pytest.mark.parametrize("command", ["tas_seed", "tas_run"])
def test_the_seed_summary_is_printed_once(command, settings, caplog, monkeypatch):
    from tasweb.simulator.management.commands import tas_run

    monkeypatch.setattr(tas_run, "Supervisor", NoStack)
    settings.TAS_SIMULATOR = {"initial_workloads": 0}
    caplog.set_level(logging.INFO)  # what the terminal shows: the command's output and the INFO log
    out = StringIO()
    call_command(command, stdout=out)

    shown = out.getvalue() + "\n" + "\n".join(r.getMessage() for r in caplog.records)
    assert seed_summary_lines(shown) == [
        "simulator: 64 nodes; created 1 ClusterQueue, 2 LocalQueue, 64 Node, 67 Pod, 1 ResourceFlavor, "
        "1 Topology, 3 WorkloadPriorityClass"]


@pytest.mark.django_db
@pytest.mark.services
def test_the_tick_task_asks_for_a_pass_only_after_a_tick_that_wrote(settings, monkeypatch):
    from tasweb.simulator import tasks

    settings.TAS_SIMULATOR = {"initial_workloads": 2, "arrivals_per_minute": 0, "node_failures_per_minute": 0,
                              "drains_per_minute": 0}
    requested: list[int] = []
    monkeypatch.setattr(tasks, "request_pass", lambda: requested.append(1))
    call_command("tas_seed", stdout=StringIO())
    tasks.tick()  # submits the initial workloads
    assert len(requested) == 1
    tasks.tick()  # nothing admitted them, nothing arrives: a quiet tick
    assert len(requested) == 1
