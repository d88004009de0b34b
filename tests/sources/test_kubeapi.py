"""Which cluster the client talks to, and how API errors are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tasweb.sources.kubeapi import Discovery, KubeApi, KubeConfigError, NotServed, client_configuration, describe_error

from .fakekube import FakeKube


def two_context_kubeconfig(path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "staging",
        "clusters": [{"name": "staging", "cluster": {"server": "http://127.0.0.1:6001"}},
                     {"name": "prod", "cluster": {"server": "http://127.0.0.1:6002"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "staging", "context": {"cluster": "staging", "user": "u"}},
                     {"name": "prod", "context": {"cluster": "prod", "user": "u"}}],
    }))
    return path


def test_kubeconfig_and_its_current_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(two_context_kubeconfig(tmp_path / "config")))
    settings.TAS_KUBE_IN_CLUSTER = ""
    settings.TAS_KUBE_CONTEXT = ""
    assert client_configuration().host == "http://127.0.0.1:6001"
    settings.TAS_KUBE_CONTEXT = "prod"
    assert client_configuration().host == "http://127.0.0.1:6002"


def test_kubeconfig_wins_over_in_cluster_unless_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(two_context_kubeconfig(tmp_path / "config")))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    settings.TAS_KUBE_CONTEXT = ""
    settings.TAS_KUBE_IN_CLUSTER = ""
    assert client_configuration().host == "http://127.0.0.1:6001"
    # forced in-cluster, outside a pod: no service account token to read
    settings.TAS_KUBE_IN_CLUSTER = "true"
    with pytest.raises(KubeConfigError, match="no Kubernetes configuration"):
        client_configuration()


def test_a_missing_kubeconfig_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    settings.TAS_KUBE_IN_CLUSTER = "false"
    with pytest.raises(KubeConfigError, match="set KUBECONFIG"):
        client_configuration()


def test_discovery_names_a_kind_the_server_does_not_serve():
    kube_without_kueue = FakeKube(kueue_versions=()).start()
    try:
        configuration = client.Configuration()
        configuration.host = kube_without_kueue.url
        configuration.api_key = {"authorization": f"Bearer {kube_without_kueue.token}"}
        api = KubeApi(configuration)
        discovery = Discovery(api)
        assert discovery.resource("Node").api_version == "v1"
        with pytest.raises(NotServed, match="is Kueue installed"):
            discovery.resource("Workload")
        api.close()
    finally:
        kube_without_kueue.stop()


def test_api_errors_are_named_by_status_and_message():
    exc = ApiException(status=410, reason="Gone")
    exc.body = json.dumps({"kind": "Status", "message": "too old resource version: 5 (9)", "code": 410})
    assert describe_error(exc) == "410 Gone: too old resource version: 5 (9)"
    assert describe_error(OSError("connection refused")) == "OSError: connection refused"
