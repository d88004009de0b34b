"""Kueue's visibility API read by a real Kubernetes client: `kubectl get --raw` with a
kubeconfig whose server is this service, as a Kueue user reads pending workloads. kubectl
sends its own headers (`Accept`, `User-Agent`, `Kubectl-Command`, over https the kubeconfig's
token as `Bearer`) and decodes an error answer as a Kubernetes Status; what it prints is what
a user sees."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def self_signed(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1, made with openssl, and a server context holding it."""
    certificate, key = directory / "server.crt", directory / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(certificate)],
                   check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return certificate, context


def kubeconfig(path: Path, server_url: str, *, token: str | None = None, ca: Path | None = None) -> Path:
    cluster = {"server": server_url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "tas",
        "clusters": [{"name": "tas", "cluster": cluster}],
        "users": [{"name": "reader", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "tas", "context": {"cluster": "tas", "user": "reader"}}],
    }))
    return path


def kubectl_raw(config: Path, path: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "--kubeconfig", str(config), "get", "--raw", path],
                          capture_output=True, text=True, timeout=60, check=False)


def names(body: dict) -> list[tuple[str, str, int]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_kubectl_reads_a_cluster_queue_as_the_api_answers_it(server, client, tmp_path, version):
    path = f"{GROUP}/{version}/clusterqueues/cluster-queue/pendingworkloads"
    done = kubectl_raw(kubeconfig(tmp_path / "config", server), path)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == f"visibility.kueue.x-k8s.io/{version}"
    # what the client reads is what the service answers (queue order, positions)
    assert body == client.get(path).json()
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


def test_kubectl_over_http_sends_no_token_and_is_told_why_it_is_refused(server, tmp_path, token, settings):
    """kubectl sends a kubeconfig's token to an https server only (client-go sets it for TLS
    connections; kubernetes/kubectl#744), as the README says: over plain HTTP (a port-forward)
    it reads anonymously, which a closed service refuses."""
    settings.TAS_API_ANONYMOUS_READ = False
    config = kubeconfig(tmp_path / "config", server, token=token)
    refused = kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    # kubectl's words for a 401, with the Status message after them
    assert refused.returncode == 1
    assert "You must be logged in to the server (Authentication credentials were not provided.)" in refused.stderr
    settings.TAS_API_ANONYMOUS_READ = True
    assert kubectl_raw(config, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads").returncode == 0


def test_kubectl_over_https_reads_with_its_kubeconfig_token(transactional_db, queued, tmp_path, token, settings):
    settings.TAS_API_ANONYMOUS_READ = False
    certificate, context = self_signed(tmp_path)
    path = f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
    with live_server(tls=context) as url:
        signed_in = kubectl_raw(kubeconfig(tmp_path / "config", url, token=token, ca=certificate), path)
        wrong = kubectl_raw(kubeconfig(tmp_path / "wrong", url, token="not-a-token", ca=certificate), path)
    assert signed_in.returncode == 0, signed_in.stderr
    assert json.loads(signed_in.stdout)["kind"] == "PendingWorkloadsSummary"
    assert wrong.returncode == 1 and "You must be logged in to the server (Invalid token.)" in wrong.stderr
