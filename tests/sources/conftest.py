"""Fixtures for the Kubernetes source: a fake API server, a kubeconfig pointing at it, and a
mirror running in the background against it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from tasweb.cluster.models import KINDS
from tasweb.cluster.services import HEARTBEATING_KINDS, heartbeat_only
from tasweb.sources.kubeapi import MIRRORED_KINDS, KubeApi
from tasweb.sources.locks import lock_key
from tasweb.sources.mirror import MirrorOptions, MirrorRunner

from .fakekube import KINDS as FAKE_KINDS
from .fakekube import FakeKube

# Fast enough for tests, the same code paths as production.
FAST = MirrorOptions(page_size=2, watch_timeout=30, backoff_base=0.05, backoff_cap=0.4, lock_ttl=5, tick=0.05,
                     join_timeout=10)


def _free_locks() -> None:
    cache.delete_many([lock_key(f"mirror:{kind}") for kind in MIRRORED_KINDS] + [lock_key("cluster-writes")])


@pytest.fixture(autouse=True)
def free_locks() -> Iterator[None]:
    _free_locks()
    yield
    _free_locks()


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    server = FakeKube().start()
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings) -> Path:
    """KUBECONFIG naming the fake server, as a user would point the service at a cluster."""
    path = tmp_path / "kubeconfig"
    path.write_text(kube.kubeconfig())
    monkeypatch.setenv("KUBECONFIG", str(path))
    settings.TAS_KUBE_IN_CLUSTER = ""
    settings.TAS_KUBE_CONTEXT = ""
    return path


def wait_until(predicate: Callable[[], Any], *, timeout: float = 20, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def running_mirror(*, options: MirrorOptions = FAST, kinds=None, **overrides: Any) -> Iterator[MirrorRunner]:
    """A mirror run in a background thread until the block ends (a clean stop)."""
    api = KubeApi.from_settings()
    runner = MirrorRunner(kinds=kinds, api=api, options=replace(options, **overrides))
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["summary"] = runner.run()
        except BaseException as exc:  # surfaced by the test below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="test-mirror", daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        runner.stop.set()
        thread.join(20)
        api.close()
        assert not thread.is_alive(), "the mirror did not stop"
        if "error" in outcome:
            raise outcome["error"]
        runner.result = outcome.get("summary")


def mirror_differences(kube: FakeKube) -> list[str]:
    """How the mirror differs from the server: objects missing or extra, other
    resourceVersions or contents. Empty when the mirror equals the server (a Node that
    differs only by heartbeats, which the mirror does not store, is equal)."""
    out = []
    for kind, model in KINDS.items():
        server = {o["metadata"]["uid"]: o for o in kube.objects(kind)}
        rows = {row.uid: row for row in model.objects.all()}
        for uid in server.keys() - rows.keys():
            out.append(f"{kind} {server[uid]['metadata']['name']}: missing")
        for uid in rows.keys() - server.keys():
            out.append(f"{kind} {rows[uid].name}: not on the server")
        for uid in server.keys() & rows.keys():
            obj, row = server[uid], rows[uid]
            if kind in HEARTBEATING_KINDS and heartbeat_only(row.raw, obj):
                continue
            if row.resource_version != obj["metadata"]["resourceVersion"]:
                out.append(f"{kind} {row.name}: resourceVersion {row.resource_version}, "
                           f"server {obj['metadata']['resourceVersion']}")
            elif row.raw != obj:
                out.append(f"{kind} {row.name}: content differs")
    return out


def watching(kube: FakeKube, kind: str) -> bool:
    plural = FAKE_KINDS[kind][0]
    with kube.cond:
        return any(w.plural == plural for w in kube.open_watches)


def in_sync(kube: FakeKube) -> bool:
    """The mirror equals the server and every kind is being watched."""
    return not mirror_differences(kube) and all(watching(kube, kind) for kind in MIRRORED_KINDS)
