"""The overlays' ClusterRoles against the requests the code makes: the mirror (observe) and
the mirror plus the writer (control) run against the fake API server of tests/sources,
every request it received is mapped to the (apiGroup, resource, verb) the API server would
authorize, and the ClusterRole must allow each of them and grant nothing else."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client

from tasweb.scheduling.models import ClusterWrite
from tasweb.scheduling.services import scheduling_pass_run
from tasweb.sources.kubeapi import MIRRORED_KINDS
from tasweb.sources.tasks import send_cluster_writes
from tests.api.conftest import upsert, workload_object
from tests.kubeauth import NODES, WORKLOADS, kube_auth  # noqa: F401 - a fixture
from tests.sources import conftest as sources
from tests.sources import objects
from tests.sources.conftest import in_sync, mirror_differences, running_mirror, wait_until
from tests.sources.fakekube import FakeKube, Request

from .render import DEPLOY, composed, render

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# The fixtures of tests/sources: the fake API server, a kubeconfig naming it, and the
# mirror's and the writer's locks freed around each test.
kube = sources.kube
kubeconfig = sources.kubeconfig
free_locks = sources.free_locks

Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)

VERBS = {"PATCH": "patch", "POST": "create", "PUT": "update", "DELETE": "delete"}


def is_discovery(parts: list[str]) -> bool:
    """/api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>, /version: non-resource
    URLs, which the default ClusterRole system:discovery lets every authenticated client
    read. No ClusterRole of ours grants them, so they are left out of the comparison."""
    return (parts[:1] == ["api"] and len(parts) <= 2) or (parts[:1] == ["apis"] and len(parts) <= 3) or (
        parts == ["version"])


def permission(request: Request) -> Permission | None:
    """What the API server's authorizer checks for a request: None for discovery."""
    parts = [p for p in urlsplit(request.path).path.split("/") if p]
    if is_discovery(parts):
        return None
    if parts[0] == "api":
        group, rest = "", parts[2:]
    elif parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        raise AssertionError(f"not a Kubernetes API path: {request.method} {request.path}")
    watch_path = rest[0] == "watch"  # the old form: /api/v1/watch/...
    if watch_path:
        rest = rest[1:]
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]  # namespaced: the resource after the namespace
    resource, name, subresource = rest[0], (rest[1:2] or [None])[0], (rest[2:3] or [None])[0]
    if subresource:
        resource = f"{resource}/{subresource}"
    watch = watch_path or request.query.get("watch") in ("true", "1")
    if request.method != "GET":
        verb = VERBS[request.method]
    elif watch:
        verb = "watch"
    else:
        verb = "get" if name else "list"
    return group, resource, verb


def used(kube: FakeKube) -> set[Permission]:
    with kube.cond:
        requests = list(kube.requests)
    assert requests, "no request reached the API server"
    # each call was made and answered: none was refused or failed on the way
    failed = [f"{r.method} {r.path} -> {r.status}" for r in requests if permission(r) and not 200 <= r.status < 300]
    assert not failed, failed
    return {p for p in map(permission, requests) if p is not None}


def granted(overlay: str) -> set[Permission]:
    (role,) = [o for o in render(DEPLOY / "overlays" / overlay) if o["kind"] == "ClusterRole"]
    return rules_granted(role)


def rules_granted(role: dict) -> set[Permission]:
    out = set()
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def assert_least_privilege(overlay: str, calls: set[Permission]) -> None:
    rights = granted(overlay)
    assert not calls - rights, f"{overlay}: calls the ClusterRole does not allow: {sorted(calls - rights)}"
    assert not rights - calls, f"{overlay}: rights no call used: {sorted(rights - calls)}"


def test_the_mapping_of_requests_to_permissions():
    def request(method: str, path: str, **query: str) -> Request:
        return Request(method, path, query, {})

    assert permission(request("GET", "/api/v1/nodes", limit="500")) == ("", "nodes", "list")
    assert permission(request("GET", "/api/v1/pods", watch="true")) == ("", "pods", "watch")
    assert permission(request("GET", "/api/v1/watch/pods")) == ("", "pods", "watch")
    assert permission(request("GET", "/api/v1/namespaces/ml/pods/p")) == ("", "pods", "get")
    assert permission(request("GET", "/api/v1/namespaces/ml")) == ("", "namespaces", "get")
    assert permission(request("PATCH", "/api/v1/namespaces/ml/pods/p/status")) == ("", "pods/status", "patch")
    assert permission(request("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/w/status")) == (
        "kueue.x-k8s.io", "workloads/status", "patch")
    assert permission(request("POST", "/apis/authentication.k8s.io/v1/tokenreviews")) == (
        "authentication.k8s.io", "tokenreviews", "create")
    assert permission(request("DELETE", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq")) == (
        "kueue.x-k8s.io", "clusterqueues", "delete")
    for path in ("/api", "/api/v1", "/apis", "/apis/kueue.x-k8s.io", "/apis/kueue.x-k8s.io/v1beta2", "/version"):
        assert permission(request("GET", path)) is None, path


def mirror_until_in_sync(kube: FakeKube, *, observe: bool) -> None:
    """Lists of every kind, their watches, and watch events of every type."""
    for obj in objects.small_cluster():
        kube.create(obj)
    with running_mirror(observe=observe):
        wait_until(lambda: in_sync(kube), what="the first list and watch of every kind")
        kube.create(objects.node("b3-r1-n1", block="b3", rack="r1"))
        kube.update("Workload", "train", lambda w: w["spec"].update(priority=5), namespace="ml")
        kube.delete("Pod", "inference-0", namespace="serving")
        # a re-list after the watch's history is gone (410)
        kube.expire("Node")
        wait_until(lambda: not mirror_differences(kube), what="the watched changes")


def test_observe_grants_exactly_what_the_mirror_uses(kube: FakeKube, kubeconfig: Path, settings):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MODE = "observe"
    mirror_until_in_sync(kube, observe=True)
    calls = used(kube)
    # every mirrored kind was listed and watched
    assert {(g, r) for g, r, v in calls if v == "list"} == {(g, r) for g, r, v in calls if v == "watch"}
    assert len({r for _, r, _ in calls}) == len(MIRRORED_KINDS)
    assert_least_privilege("observe", calls)
    assert_least_privilege("trial", calls)


def test_control_grants_exactly_what_the_mirror_and_the_writer_use(kube: FakeKube, kubeconfig: Path,
                                                                   settings):
    settings.TAS_CLUSTER_SOURCE = "kubernetes"
    settings.TAS_MODE = "control"
    mirror_until_in_sync(kube, observe=False)
    # the engine's decisions: the workload admitted (its status), its pods ungated
    scheduling_pass_run(send_to_cluster=True, observe=False)
    # and a pod failed off an unhealthy node, as the engine's node-failure handling writes it
    condition = {"type": "TerminatedByKueue", "status": "True", "reason": "NodeFailure",
                 "message": "node b1-r1-n1 is unhealthy", "lastTransitionTime": "2025-06-01T12:00:00Z"}
    ClusterWrite.objects.create(kind=ClusterWrite.Kind.POD_FAIL, namespace="ml", name="train-0",
                                payload={"status": {"phase": "Failed", "conditions": [condition]}})
    # and a LocalQueue's admission fair sharing status, as a pass that sampled it writes it
    ClusterWrite.objects.create(kind=ClusterWrite.Kind.LOCAL_QUEUE_STATUS, namespace="ml", name="team-a",
                                payload={"status": {"fairSharing": {"admissionFairSharingStatus": {
                                    "consumedResources": {"cpu": "1500m"}, "lastUpdate": "2025-06-01T12:00:00Z"}}}})
    summary = send_cluster_writes()
    assert summary["failed"] == summary["abandoned"] == summary["gone"] == 0, summary
    kinds = set(ClusterWrite.objects.filter(sent_at__isnull=False).values_list("kind", flat=True))
    assert kinds == {ClusterWrite.Kind.WORKLOAD_STATUS, ClusterWrite.Kind.POD_UNGATE, ClusterWrite.Kind.POD_FAIL,
                     ClusterWrite.Kind.LOCAL_QUEUE_STATUS}
    assert not ClusterWrite.objects.filter(sent_at__isnull=True).exists()
    assert_least_privilege("control", used(kube))


def test_the_sign_in_component_grants_exactly_what_kubernetes_sign_in_uses(kube_auth: FakeKube, tmp_path: Path):  # noqa: F811
    """TAS_AUTH=kubernetes: web reviews a reader's token, then asks what the reader may list
    (namespaces' workloads, nodes); the component's ClusterRole allows those calls and no more."""
    upsert(workload_object("w", namespace="ml", queue="team-a"))
    kube_auth.add_token("eyJ.reader.sig", "reader")
    kube_auth.allow("reader", "list", *WORKLOADS, namespace="ml")
    kube_auth.allow("reader", "list", *NODES)
    reader = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION="Bearer eyJ.reader.sig")
    assert reader.get("/api/v1/workloads/").status_code == 200
    assert reader.get("/api/v1/nodes/").status_code == 200
    path = composed(tmp_path / "sign-in", resources=[DEPLOY / "overlays" / "observe"],
                    components=[DEPLOY / "components" / "kubernetes-sign-in"])
    (role,) = [o for o in render(path)
               if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "tas-kubernetes-sign-in"]
    calls = used(kube_auth)
    assert calls == {("authentication.k8s.io", "tokenreviews", "create"),
                     ("authorization.k8s.io", "subjectaccessreviews", "create")}
    rights = rules_granted(role)
    assert calls == rights, f"used {sorted(calls)}, granted {sorted(rights)}"
