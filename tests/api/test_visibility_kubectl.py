"""Kueue's visibility API read by a real Kubernetes client: `kubectl get --raw` with a
kubeconfig whose server is this service, as a Kueue user reads pending workloads. kubectl
sends its own headers (`Accept`, `User-Agent`, `Kubectl-Command`) and decodes an error
answer as a Kubernetes Status; what it prints is what a user sees."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client

from tests.dashboard.browser import live_server

pytestmark = [pytest.mark.services]

GROUP = "/apis/visibility.kueue.x-k8s.io"


def kubectl_path() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found on PATH: these tests read the visibility API with the real client")
    return found


@pytest.fixture
def server(transactional_db, queued) -> Iterator[str]:
    """The service, serving the queued workloads of tests/api/conftest.py over HTTP."""
    with live_server() as url:
        yield url


def kubeconfig(path: Path, server_url: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "tas",
        "clusters": [{"name": "tas", "cluster": {"server": server_url}}],
        "users": [{"name": "reader", "user": {}}],
        "contexts": [{"name": "tas", "context": {"cluster": "tas", "user": "reader"}}],
    }))
    return path


def kubectl_raw(config: Path, path: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "--kubeconfig", str(config), "get", "--raw", path],
                          capture_output=True, text=True, timeout=60, check=False)


def names(body: dict) -> list[tuple[str, str, int]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_kubectl_reads_a_cluster_queue_as_the_api_answers_it(server, tmp_path, version):
    path = f"{GROUP}/{version}/clusterqueues/cluster-queue/pendingworkloads"
    done = kubectl_raw(kubeconfig(tmp_path / "config", server), path)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == f"visibility.kueue.x-k8s.io/{version}"
    # what the client reads is what the service answers (queue order, positions)
    assert body == Client(HTTP_HOST="localhost").get(path).json()
    listed = names(body)
    assert [position for *_, position in listed] == list(range(len(listed)))
    keys = [(ns, name) for ns, name, _ in listed]
    assert keys.index(("ml", "b-high")) < keys.index(("ml", "a-low"))


def test_kubectl_pages_and_reads_a_local_queue(server, tmp_path):
    config = kubeconfig(tmp_path / "config", server)
    everything = names(json.loads(kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/"
                                                      "pendingworkloads").stdout))
    page = kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads?offset=1&limit=2")
    assert page.returncode == 0, page.stderr
    assert names(json.loads(page.stdout)) == everything[1:3]
    local = kubectl_raw(config, f"{GROUP}/v1beta2/namespaces/research/localqueues/team-b/pendingworkloads")
    assert local.returncode == 0, local.stderr
    items = json.loads(local.stdout)["items"]
    assert [(i["metadata"]["name"], i["localQueueName"], i["positionInLocalQueue"]) for i in items] == \
        [("c-research", "team-b", 0), ("d-research", "team-b", 1)]


def test_kubectl_prints_the_status_of_a_queue_that_does_not_exist(server, tmp_path):
    config = kubeconfig(tmp_path / "config", server)
    missing = kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/nope/pendingworkloads")
    assert missing.returncode == 1
    assert 'Error from server (NotFound): clusterqueue.visibility.kueue.x-k8s.io "nope" not found' in missing.stderr
    bad = kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads?limit=-1")
    assert bad.returncode == 1
    assert "Error from server (BadRequest)" in bad.stderr and "limit" in bad.stderr


def test_kubectl_says_why_a_service_closed_to_anonymous_reads_refuses_it(server, tmp_path, settings):
    """kubectl sends a kubeconfig's token to https servers only (the Django test client covers
    `Bearer`); over http it reads anonymously and must be told why it is refused."""
    settings.TAS_API_ANONYMOUS_READ = False
    config = kubeconfig(tmp_path / "config", server)
    refused = kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    # kubectl's words for a 401, with the Status message after them
    assert refused.returncode == 1
    assert "You must be logged in to the server (Authentication credentials were not provided.)" in refused.stderr
    settings.TAS_API_ANONYMOUS_READ = True
    assert kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads").returncode == 0
