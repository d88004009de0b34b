"""The sources' Celery tasks on a real worker, and their beat entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker

from tasweb.celery import app as celery_app
from tasweb.sources import mirror as mirror_module
from tasweb.sources.kubeapi import MIRRORED_KINDS
from tasweb.sources.locks import lock_holder
from tasweb.sources.tasks import mirror_kubernetes, send_cluster_writes

from . import objects
from .conftest import mirror_differences
from .fakekube import FakeKube

pytestmark = pytest.mark.services

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BEAT_TASKS = {"tasweb.sources.tasks.mirror_kubernetes", "tasweb.sources.tasks.send_cluster_writes"}

PRINT_BEAT = r"""
import json
from tasweb.settings import base
print(json.dumps({name: entry["task"] for name, entry in base.CELERY_BEAT_SCHEDULE.items()}))
"""


@pytest.fixture
def worker() -> Iterator[None]:
    """A real worker consuming the test settings' queue through Redis."""
    with start_worker(celery_app, pool="solo", concurrency=1, perform_ping_check=False, shutdown_timeout=10):
        yield


def beat_tasks(source: str, tmp_path: Path) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAS_", "DJANGO_"))}
    env.update(TAS_CLUSTER_SOURCE=source, TAS_VAR_DIR=str(tmp_path / "var"))
    done = subprocess.run([sys.executable, "-c", PRINT_BEAT], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]).values())


def test_beat_runs_both_tasks_only_for_the_kubernetes_source(tmp_path: Path):
    with_kubernetes = beat_tasks("kubernetes", tmp_path)
    assert with_kubernetes >= BEAT_TASKS
    assert all(task in celery_app.tasks for task in with_kubernetes)
    assert not BEAT_TASKS & beat_tasks("simulator", tmp_path)


@pytest.mark.django_db(transaction=True)
def test_the_mirror_task_runs_a_window_on_a_worker(kube: FakeKube, kubeconfig, settings, worker,
                                                   monkeypatch: pytest.MonkeyPatch):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MIRROR_LOCK_TTL_SECONDS = 5
    requested = []
    monkeypatch.setattr(mirror_module, "request_pass", lambda: requested.append(1))
    for obj in objects.small_cluster():
        kube.create(obj)

    summary = mirror_kubernetes.delay(window_seconds=3).get(timeout=60)

    assert summary["kinds"] == sorted(MIRRORED_KINDS) and summary["skipped"] == []
    assert summary["lists"] == len(MIRRORED_KINDS)
    assert mirror_differences(kube) == []
    assert requested, "a mirrored change asks for a scheduling pass"
    assert all(lock_holder(f"mirror:{kind}") is None for kind in MIRRORED_KINDS)  # released at the end


def test_the_tasks_do_nothing_without_the_kubernetes_source(settings):
    settings.TAS_CLUSTER_SOURCE = "simulator"
    assert "skipped" in mirror_kubernetes(window_seconds=1)
    assert "skipped" in send_cluster_writes()


def test_the_mirror_task_reports_a_missing_configuration(settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_KUBE_IN_CLUSTER = "false"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    outcome = mirror_kubernetes(window_seconds=1)
    assert "no Kubernetes configuration" in outcome["error"]


@pytest.mark.django_db(transaction=True)
def test_a_mirror_run_stuck_past_the_task_limit_is_stopped_and_frees_its_locks(
        kube: FakeKube, kubeconfig, settings, monkeypatch: pytest.MonkeyPatch):
    # the window ends before the limit; only a run stuck somewhere (here renewing its locks,
    # as on a Redis that stopped answering) reaches it, and the limit is not taken for a
    # failed renewal
    from tasweb.core.deadline import DeadlineExceeded

    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MIRROR_LOCK_TTL_SECONDS = 3
    settings.TAS_TASK_TIME_LIMIT = 4
    monkeypatch.setattr(mirror_module, "request_pass", lambda: None)
    monkeypatch.setattr(mirror_module.MirrorRunner, "_renew", lambda self: time.sleep(30))
    for obj in objects.small_cluster():
        kube.create(obj)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="mirror_kubernetes ran past its time limit of 4 s"):
        mirror_kubernetes(window_seconds=60)
    assert time.monotonic() - started < 4 + 15  # and the watches stopped within the join timeout
    assert all(lock_holder(f"mirror:{kind}") is None for kind in MIRRORED_KINDS)
    assert not [t for t in threading.enumerate() if t.name.startswith("mirror-") and t.is_alive()]
