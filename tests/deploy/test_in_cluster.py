"""In a pod of deploy/ the cluster is the pod's service account: the ConfigMap sets
TAS_KUBE_IN_CLUSTER=true, no KUBECONFIG is set, and Kubernetes mounts the token and the
cluster's CA where the client looks for them (here: files of the test, in their stead)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.config import incluster_config

from tasweb.sources.kubeapi import client_configuration


@pytest.fixture
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What a pod with a mounted service account token finds: the token, the CA, and the
    API server's address in its environment; no kubeconfig anywhere."""
    (tmp_path / "token").write_text("service-account-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.kube/config
    return tmp_path


@pytest.mark.parametrize("choice", ["true", ""])
def test_the_pods_service_account_is_the_clusters_credential(service_account: Path, settings, choice):
    """As the manifests set it (true), and as found when nothing says (a pod, no kubeconfig)."""
    settings.TAS_KUBE_IN_CLUSTER = choice
    settings.TAS_KUBE_CONTEXT = ""
    configuration = client_configuration()
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.ssl_ca_cert == str(service_account / "ca.crt")
    assert configuration.api_key["BearerToken"] == "bearer service-account-token"
