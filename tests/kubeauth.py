"""Kubernetes sign-in for tests: TAS_AUTH=kubernetes against the protocol-level fake API
server (tests/sources/fakekube.py), whose TokenReview and SubjectAccessReview answers come
from the test's token and RBAC tables. Import the fixture into a test module to use it."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasweb.api import kubeauth
from tests.sources.fakekube import FakeKube

WORKLOADS = ("kueue.x-k8s.io", "workloads")
NODES = ("", "nodes")


def point_at(server_url: str, token: str, path: Path) -> Path:
    """A kubeconfig naming the server, as an operator points the service at a cluster."""
    import json

    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server_url}}],
        "users": [{"name": "fake", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))
    return path


def closed_port_url() -> str:
    """A local address where nothing listens: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def kube_auth(settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeKube]:
    """TAS_AUTH=kubernetes with the fake server as the cluster; answers cached under a key
    prefix of the test's own, so no other test's answers are found."""
    server = FakeKube().start()
    monkeypatch.setenv("KUBECONFIG", str(point_at(server.url, server.token, tmp_path / "kubeconfig")))
    settings.TAS_KUBE_IN_CLUSTER = ""
    settings.TAS_KUBE_CONTEXT = ""
    settings.TAS_AUTH = "kubernetes"
    settings.TAS_AUTH_CACHE_SECONDS = 10
    monkeypatch.setattr(kubeauth, "CACHE_PREFIX", f"tasweb:kubeauth-test:{uuid.uuid4().hex}")
    kubeauth.kube_client_reset()
    yield server
    kubeauth.kube_client_reset()
    server.stop()
