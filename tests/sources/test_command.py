"""`manage.py tas_mirror` in a process of its own: Ctrl-C stops it cleanly, and a mirror
killed mid-stream resumes from its checkpoints when it starts again, with no event lost or
applied twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tasweb.cluster import models as cluster
from tasweb.scheduling.models import EventKind, WorkloadEvent
from tasweb.sources.kubeapi import MIRRORED_KINDS
from tasweb.sources.locks import lock_holder
from tasweb.sources.models import MirrorCheckpoint

from . import objects
from .conftest import in_sync, mirror_differences, wait_until
from .fakekube import FakeKube

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Mirror:
    """`manage.py tas_mirror` run against the test database and the fake API server."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.out = open(logs / "stdout", "a")  # noqa: SIM115 (closed in wait)
        self.err = open(logs / "stderr", "a")  # noqa: SIM115
        self.logs = logs
        self.process = subprocess.Popen([sys.executable, "manage.py", "tas_mirror"], cwd=PROJECT_ROOT, env=env,
                                        stdout=self.out, stderr=self.err)

    def wait(self, timeout: float = 30) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self.out.close()
            self.err.close()

    def output(self) -> str:
        return (self.logs / "stdout").read_text() + (self.logs / "stderr").read_text()


@pytest.fixture
def start_mirror(kube: FakeKube, kubeconfig: Path, tmp_path: Path) -> Iterator:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TAS_", "DJANGO_")) and k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="tasweb.settings.test",
        DATABASE_URL=f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        KUBECONFIG=str(kubeconfig),
        TAS_VAR_DIR=str(tmp_path / "var"),
        TAS_MODE="observe",
        TAS_MIRROR_LOCK_TTL_SECONDS="3",
        PYTHONUNBUFFERED="1",
    )
    started: list[Mirror] = []

    def start() -> Mirror:
        mirror = Mirror(env, tmp_path)
        started.append(mirror)
        return mirror

    yield start
    for mirror in started:
        if mirror.process.poll() is None:
            mirror.process.kill()
            mirror.wait()


def seed(kube: FakeKube) -> int:
    for obj in objects.small_cluster():
        kube.create(obj)
    return kube.resource_version


def test_ctrl_c_stops_the_mirror_cleanly(kube: FakeKube, start_mirror):
    seed(kube)
    mirror = start_mirror()
    wait_until(lambda: in_sync(kube), timeout=60, what="the mirror command's first sync")
    mirror.process.send_signal(signal.SIGINT)
    assert mirror.wait(30) == 0, mirror.output()
    output = mirror.output()
    assert "SIGINT: stopping the mirror" in output
    assert f"mirror stopped: {', '.join(sorted(MIRRORED_KINDS))} mirrored, {len(MIRRORED_KINDS)} list(s)" in output
    assert "Traceback" not in output
    assert all(lock_holder(f"mirror:{kind}") is None for kind in MIRRORED_KINDS)


def test_a_killed_mirror_resumes_without_losing_or_repeating_events(kube: FakeKube, start_mirror):
    listed_at = seed(kube)
    first = start_mirror()
    wait_until(lambda: in_sync(kube), timeout=60, what="the first sync")

    def node_events() -> int:
        return MirrorCheckpoint.objects.get(kind="Node").events_applied

    for i in range(60):
        kube.update("Node", f"b1-r1-n{1 + i % 2}", lambda n, i=i: n["metadata"]["labels"].update(generation=str(i)))
    wait_until(lambda: node_events() >= 5, what="some of the burst applied")
    first.process.kill()  # SIGKILL: no cleanup, locks left to expire
    first.wait()
    requests_at_kill = len(kube.requests)

    # the cluster moves on while no mirror runs
    kube.update("Workload", "train", lambda w: objects.kueue_admission(w, [("b1-r2-n1", 1), ("b1-r2-n2", 1)]),
                namespace="ml")
    kube.delete("Node", "b2-r2-n2")
    kube.create(objects.running_pod("inference-1", "b2-r1-n1"))

    second = start_mirror()
    wait_until(lambda: in_sync(kube), timeout=60, what="the restarted mirror")
    second.process.send_signal(signal.SIGINT)
    assert second.wait(30) == 0, second.output()

    # resumed from the checkpoints: the second process watched, it did not list
    collection_gets = [r for r in kube.requests[requests_at_kill:]
                       if r.method == "GET" and not r.path.endswith(("/v1beta2", "/v1beta1"))]
    assert collection_gets and all(r.query.get("watch") == "true" for r in collection_gets)
    # every event since the lists applied exactly once, across the kill
    assert sum(MirrorCheckpoint.objects.values_list("events_applied", flat=True)) == kube.events_since(listed_at)
    assert mirror_differences(kube) == []
    assert cluster.Node.objects.get(name="b1-r1-n2").labels["generation"] == "59"
    history = list(WorkloadEvent.objects.filter(workload_key="ml/train").order_by("at", "id")
                   .values_list("kind", flat=True))
    assert history == [EventKind.QUEUED, EventKind.ADMITTED]
