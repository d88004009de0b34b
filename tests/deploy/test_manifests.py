"""deploy/: every overlay renders to objects the Kubernetes API accepts, runs the processes of
docker-compose.yml with the settings the code reads, and keeps each container locked down.

Rendered with kubectl's kustomize when installed, else with the fallback of render.py."""

from __future__ import annotations

import copy
import functools
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.tasweb.conftest import clean_env, run_python

from .render import DEPLOY, PROJECT_ROOT, build, composed, kustomize_command, render, render_with

OVERLAYS = ("observe", "control", "trial")
APP_IMAGE = "tas-service:latest"
APP_COMPONENTS = ("web", "worker", "scheduler", "beat")
SIGN_IN_RULES = {("authentication.k8s.io", "tokenreviews", "create"),
                 ("authorization.k8s.io", "subjectaccessreviews", "create")}
STRONG_KEY = "k3Q9vXy7LmN2pR8sT4uW6zA1bC5dE0fG-h_J+iK=oP%qS@tU!vW#xY$zZ^aB&cD*eF"


@functools.cache
def _rendered(path: str) -> tuple[dict, ...]:
    return tuple(render(Path(path)))


def rendered(path: Path) -> list[dict]:
    return copy.deepcopy(list(_rendered(str(path))))


@pytest.fixture(scope="module")
def sign_in_path(tmp_path_factory) -> Path:
    """The control overlay with the kubernetes-sign-in component, as a user's overlay adds it."""
    return composed(tmp_path_factory.mktemp("sign-in"), resources=[DEPLOY / "overlays" / "control"],
                    components=[DEPLOY / "components" / "kubernetes-sign-in"])


@pytest.fixture(scope="module")
def large_cluster_path(tmp_path_factory) -> Path:
    """The observe overlay with the large-cluster component."""
    return composed(tmp_path_factory.mktemp("large-cluster"), resources=[DEPLOY / "overlays" / "observe"],
                    components=[DEPLOY / "components" / "large-cluster"])


def overlay(name: str) -> list[dict]:
    return rendered(DEPLOY / "overlays" / name)


def of_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def app_deployments(objects: list[dict]) -> dict[str, dict]:
    """component -> Deployment of the service itself (not the trial's datastores)."""
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in of_kind(objects, "Deployment").values()
            if d["metadata"]["labels"]["app.kubernetes.io/name"] == "tas-service"}


def containers(deployment: dict) -> list[dict]:
    spec = deployment["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def settings_of(objects: list[dict]) -> dict[str, str]:
    (configmap,) = of_kind(objects, "ConfigMap").values()
    return configmap["data"]


def compose() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())["services"]


# ---------------------------------------------------------------- rendering and the API's schema


def model_class_name(obj: dict) -> str:
    """The kubernetes client's model of an object: V1Deployment for apps/v1 Deployment."""
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    return version[0].upper() + version[1:] + obj["kind"]


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_object_is_a_valid_kubernetes_object(name):
    api = client.ApiClient()
    try:
        for obj in overlay(name):
            label = f"{obj['kind']} {obj['metadata']['name']}"
            model_name = model_class_name(obj)
            assert hasattr(client, model_name), f"{label}: no model {model_name} in the kubernetes client"
            # required fields missing raise here (client-side validation)
            model = api._ApiClient__deserialize(copy.deepcopy(obj), model_name)
            # a misspelled or unknown field, or a value of the wrong type, does not come back
            assert api.sanitize_for_serialization(model) == obj, label
    finally:
        api.close()


@pytest.mark.parametrize("component", ["sign_in_path", "large_cluster_path"])
def test_the_components_render_valid_objects(component, request):
    api = client.ApiClient()
    try:
        for obj in rendered(request.getfixturevalue(component)):
            model = api._ApiClient__deserialize(copy.deepcopy(obj), model_class_name(obj))
            assert api.sanitize_for_serialization(model) == obj
    finally:
        api.close()


def test_the_fallback_renderer_renders_as_kustomize_does(sign_in_path, large_cluster_path):
    """So that the tests mean the same where no kubectl is installed."""
    command = kustomize_command()
    if command is None:
        pytest.skip("no kubectl or kustomize to compare with: the tests use the fallback renderer")

    def normal(objects: list[dict]) -> list[str]:
        return sorted(json.dumps(obj, sort_keys=True) for obj in objects)

    for path in [*(DEPLOY / "overlays" / name for name in OVERLAYS), sign_in_path, large_cluster_path]:
        assert normal(build(path)) == normal(render_with(command, path)), path


def test_the_fallback_renderer_refuses_what_it_does_not_know(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({"resources": [], "namePrefix": "x-"}))
    with pytest.raises(NotImplementedError, match="namePrefix"):
        build(tmp_path)
    # a list whose items have no name: its merge strategy depends on the field's schema
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["a"]}]}}}}
    patch = copy.deepcopy(deployment)
    patch["spec"]["template"]["spec"]["containers"][0]["args"] = ["b"]
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(deployment))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(patch))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({"resources": ["d.yaml"],
                                                                  "patches": [{"path": "p.yaml"}]}))
    with pytest.raises(NotImplementedError, match="named items"):
        build(tmp_path)


# ---------------------------------------------------------------- security


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_container_runs_unprivileged_read_only_and_bounded(name):
    objects = overlay(name)
    deployments = of_kind(objects, "Deployment")
    assert deployments
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        assert all("hostPath" not in volume for volume in pod.get("volumes", []))
        app = deployment["metadata"]["labels"]["app.kubernetes.io/name"] == "tas-service"
        for container in containers(deployment):
            label = f"{deployment['metadata']['name']}/{container['name']}"
            sc = container["securityContext"]
            assert sc["runAsNonRoot"] is True, label
            assert sc["readOnlyRootFilesystem"] is True, label
            assert sc["allowPrivilegeEscalation"] is False, label
            assert sc["capabilities"] == {"drop": ["ALL"]}, label
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, label
            assert not sc.get("privileged"), label
            assert sc["runAsUser"] != 0, label
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) == {"cpu", "memory"}, (label, bound)
            if app:
                # the image's user, and the two folders the service writes to as volumes
                assert container["image"] == APP_IMAGE and container["imagePullPolicy"] == "IfNotPresent", label
                assert sc["runAsUser"] == 10001, label
                mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                assert set(mounts) == {"/tmp", "/app/var"}, label
                volumes = {v["name"]: v for v in pod["volumes"]}
                assert all("emptyDir" in volumes[mounts[path]] for path in mounts), label
    assert settings_of(objects)["TAS_VAR_DIR"] == "/app/var"
    namespace = of_kind(objects, "Namespace")["tas-system"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("name", OVERLAYS)
def test_only_the_worker_holds_a_token_for_the_api_server(name):
    objects = overlay(name)
    assert of_kind(objects, "ServiceAccount")["tas"]["automountServiceAccountToken"] is False
    for deployment in of_kind(objects, "Deployment").values():
        spec = deployment["spec"]["template"]["spec"]
        component = deployment["metadata"]["labels"].get("app.kubernetes.io/component")
        assert spec["automountServiceAccountToken"] is (component == "worker"), deployment["metadata"]["name"]
        if deployment["metadata"]["labels"]["app.kubernetes.io/name"] == "tas-service":
            assert spec["serviceAccountName"] == "tas"


@pytest.mark.parametrize("name", OVERLAYS)
def test_network_policies_let_in_only_web_and_out_only_what_the_service_uses(name):
    policies = of_kind(overlay(name), "NetworkPolicy")
    app = policies["tas-service"]["spec"]
    assert app["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "tas-service"}}
    assert set(app["policyTypes"]) == {"Ingress", "Egress"} and not app.get("ingress")
    egress = {(p["protocol"], p["port"]) for rule in app["egress"] for p in rule["ports"]}
    assert all(set(rule) == {"ports"} for rule in app["egress"])
    assert egress == {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 6379), ("TCP", 443), ("TCP", 6443)}
    web = policies["tas-web"]["spec"]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    assert web["policyTypes"] == ["Ingress"]
    assert [p for rule in web["ingress"] for p in rule["ports"]] == [{"protocol": "TCP", "port": 8000}]


# ---------------------------------------------------------------- the processes


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_processes_are_those_of_docker_compose(name):
    deployments = app_deployments(overlay(name))
    assert set(deployments) == set(APP_COMPONENTS)
    services = compose()
    for component in ("worker", "scheduler", "beat"):
        (container,) = deployments[component]["spec"]["template"]["spec"]["containers"]
        assert container["command"] == services[component]["command"], component
    web = deployments["web"]["spec"]["template"]["spec"]
    (migrate,) = web["initContainers"]
    script = migrate["command"][-1]
    assert script.index("migrate --noinput") < script.index("tas_seed")
    assert services["web"]["command"].startswith(f"sh -c \"{script.split(' && ')[0]}")
    (server,) = web["containers"]
    assert server["command"][:2] == ["gunicorn", "tasweb.wsgi"]
    assert server["command"][server["command"].index("--bind") + 1] == "0.0.0.0:8000"
    # the others start once the database is migrated
    for component in ("worker", "scheduler", "beat"):
        (wait,) = deployments[component]["spec"]["template"]["spec"]["initContainers"]
        assert "migrate --check" in wait["command"][-1]
    assert deployments["beat"]["spec"]["replicas"] == 1
    assert deployments["beat"]["spec"]["strategy"] == {"type": "Recreate"}
    assert deployments["scheduler"]["spec"]["replicas"] == 1


@pytest.mark.parametrize("name", OVERLAYS)
def test_web_is_served_on_port_80_and_probed_on_its_health_endpoints(name):
    objects = overlay(name)
    (server,) = app_deployments(objects)["web"]["spec"]["template"]["spec"]["containers"]
    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    ready, live = server["readinessProbe"]["httpGet"], server["livenessProbe"]["httpGet"]
    assert (ready["path"], ready["port"]) == ("/healthz", "http")
    assert (live["path"], live["port"]) == ("/healthz/live", "http")
    allowed = settings_of(objects)["DJANGO_ALLOWED_HOSTS"].split(",")
    for probe in (ready, live):
        (host,) = [h["value"] for h in probe["httpHeaders"] if h["name"] == "Host"]
        assert host in allowed  # Django answers 400 to a Host it does not serve
    service = of_kind(objects, "Service")["tas-web"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "tas-service",
                                           "app.kubernetes.io/component": "web"}
    # the Celery processes: compose's checks, not HTTP
    deployments = app_deployments(objects)
    for component in ("worker", "scheduler"):
        (container,) = deployments[component]["spec"]["template"]["spec"]["containers"]
        check = container["livenessProbe"]["exec"]["command"][-1]
        hostname = "scheduler" if component == "scheduler" else "celery"
        assert check.startswith(f"celery -A tasweb inspect ping --destination {hostname}@$HOSTNAME")
    (beat,) = deployments["beat"]["spec"]["template"]["spec"]["containers"]
    assert "celerybeat-schedule" in beat["livenessProbe"]["exec"]["command"][-1]


# ---------------------------------------------------------------- settings and secrets


@pytest.mark.parametrize(("name", "mode"), [("observe", "observe"), ("control", "control"), ("trial", "observe")])
def test_each_overlay_sets_its_mode_and_the_kubernetes_source(name, mode):
    objects = overlay(name)
    data = settings_of(objects)
    assert data["TAS_MODE"] == mode
    assert data["TAS_CLUSTER_SOURCE"] == "kubernetes" and data["TAS_KUBE_IN_CLUSTER"] == "true"
    assert data["DJANGO_SETTINGS_MODULE"] == "tasweb.settings.production"
    assert "TAS_AUTH" not in data
    # every process reads the same settings and secrets, the ConfigMap by its hashed name
    (configmap_name,) = of_kind(objects, "ConfigMap")
    assert configmap_name.startswith("tas-settings-")
    for deployment in app_deployments(objects).values():
        for container in containers(deployment):
            assert container["envFrom"] == [{"configMapRef": {"name": configmap_name}},
                                            {"secretRef": {"name": "tas-secrets"}}]


def test_the_production_overlays_carry_no_secret_and_the_trial_marks_its_own():
    for name in ("observe", "control"):
        assert not of_kind(overlay(name), "Secret"), name
    secrets = of_kind(overlay("trial"), "Secret")
    assert set(secrets) == {"tas-secrets", "tas-trial-postgres"}
    values = secrets["tas-secrets"]["stringData"]
    assert set(values) == {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL"}
    assert values["DJANGO_SECRET_KEY"].startswith("trial-only")
    assert "published" in secrets["tas-secrets"]["metadata"]["annotations"]["tas-service/trial-only"]
    assert values["DATABASE_URL"].startswith("postgres://tas:trial-only@tas-postgres:5432/")
    assert values["REDIS_URL"].startswith("redis://tas-redis:6379/")
    datastores = of_kind(overlay("trial"), "Deployment")
    assert {"tas-postgres", "tas-redis"} <= set(datastores)
    for name in ("tas-postgres", "tas-redis"):
        volumes = datastores[name]["spec"]["template"]["spec"]["volumes"]
        assert all("emptyDir" in volume for volume in volumes)


def _environment(name: str) -> dict[str, str]:
    """What the processes of an overlay find in their environment: the ConfigMap, and the
    trial's Secret or one of the shape the README asks for."""
    objects = overlay(name)
    env = dict(settings_of(objects))
    secret = of_kind(objects, "Secret").get("tas-secrets")
    env.update(secret["stringData"] if secret else {
        "DJANGO_SECRET_KEY": STRONG_KEY, "DATABASE_URL": "postgres://tas:password@db.example.com:5432/tas",
        "REDIS_URL": "redis://redis.example.com:6379/0"})
    return env


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_production_settings_accept_each_overlays_environment(name, tmp_path):
    env = _environment(name)
    env["TAS_VAR_DIR"] = str(tmp_path)  # /app/var is the image's
    code = (
        "import json, django; django.setup()\n"
        "from django.conf import settings\n"
        "from django.core.management import call_command\n"
        "from tasweb.sources.kubeapi import _in_cluster\n"
        "call_command('check', '--deploy', '--fail-level', 'WARNING')\n"
        "print(json.dumps({'mode': settings.TAS_MODE, 'source': settings.TAS_CLUSTER_SOURCE,\n"
        "  'in_cluster': _in_cluster(), 'debug': settings.DEBUG, 'beat': sorted(settings.CELERY_BEAT_SCHEDULE),\n"
        "  'ssl_redirect': settings.SECURE_SSL_REDIRECT}))\n")
    proc = run_python(code, env=clean_env(**env, PYTHONPATH=str(PROJECT_ROOT)))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["mode"] == env["TAS_MODE"] and result["source"] == "kubernetes"
    assert result["in_cluster"] is True and result["debug"] is False
    assert {"sources-mirror-kubernetes", "sources-send-cluster-writes"} <= set(result["beat"])
    # HTTPS everywhere but in the trial, which is reached by port-forward over plain HTTP
    assert result["ssl_redirect"] is (name != "trial")


# ---------------------------------------------------------------- RBAC in the manifests


def rules_of(objects: list[dict], role: str) -> set[tuple[str, str, str]]:
    rules = of_kind(objects, "ClusterRole")[role]["rules"]
    out = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, nonResourceURLs
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field] and all("*" not in value for value in rule[field]), rule
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_overlay_binds_one_cluster_role_to_the_service_account(name):
    objects = overlay(name)
    assert set(of_kind(objects, "ClusterRole")) == {"tas"}
    assert not of_kind(objects, "Role") and not of_kind(objects, "RoleBinding")
    (binding,) = of_kind(objects, "ClusterRoleBinding").values()
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "tas"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tas", "namespace": "tas-system"}]
    assert not rules_of(objects, "tas") & SIGN_IN_RULES


def test_control_grants_observes_reads_plus_patches_only():
    observe, control = rules_of(overlay("observe"), "tas"), rules_of(overlay("control"), "tas")
    assert observe < control
    assert {verb for _, _, verb in observe} == {"list", "watch"}
    assert {verb for _, _, verb in control - observe} == {"patch"}
    assert rules_of(overlay("trial"), "tas") == observe


def test_the_sign_in_component_adds_the_review_rights_and_turns_it_on(sign_in_path):
    objects = rendered(sign_in_path)
    assert rules_of(objects, "tas-kubernetes-sign-in") == SIGN_IN_RULES
    assert rules_of(objects, "tas") == rules_of(overlay("control"), "tas")
    binding = of_kind(objects, "ClusterRoleBinding")["tas-kubernetes-sign-in"]
    assert binding["roleRef"]["name"] == "tas-kubernetes-sign-in"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tas", "namespace": "tas-system"}]
    assert settings_of(objects)["TAS_AUTH"] == "kubernetes"
    # web will review the tokens: it mounts the service account's now
    deployments = app_deployments(objects)
    assert deployments["web"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert deployments["scheduler"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def unhashed(obj: Any) -> Any:
    """`obj` with the generated settings' name without its hash (it changes with any setting)."""
    return json.loads(re.sub(r'"tas-settings-[a-z0-9]{10}"', '"tas-settings"', json.dumps(obj)))


def test_the_large_cluster_component_gives_web_room_for_its_views(large_cluster_path):
    objects, base = unhashed(rendered(large_cluster_path)), unhashed(overlay("observe"))
    assert settings_of(objects)["WEB_CONCURRENCY"] == "2" and settings_of(base)["WEB_CONCURRENCY"] == "3"
    web = {c["name"]: c for c in containers(app_deployments(objects)["web"])}
    base_web = {c["name"]: c for c in containers(app_deployments(base)["web"])}
    assert web["web"]["resources"] == {"requests": {"cpu": base_web["web"]["resources"]["requests"]["cpu"],
                                                    "memory": "2Gi"},
                                       "limits": {"cpu": base_web["web"]["resources"]["limits"]["cpu"],
                                                  "memory": "4Gi"}}
    # the rest as it was: the init container, the other Deployments, the other settings
    assert web["migrate"] == base_web["migrate"]
    assert {k: v for k, v in web["web"].items() if k != "resources"} == {
        k: v for k, v in base_web["web"].items() if k != "resources"}
    for name, deployment in app_deployments(objects).items():
        if name != "web":
            assert containers(deployment) == containers(app_deployments(base)[name]), name
    assert {k: v for k, v in settings_of(objects).items() if k != "WEB_CONCURRENCY"} == {
        k: v for k, v in settings_of(base).items() if k != "WEB_CONCURRENCY"}


def test_the_readme_commands_name_what_exists():
    readme = (PROJECT_ROOT / "README.md").read_text()
    for name in OVERLAYS:
        assert f"kubectl apply -k deploy/overlays/{name}" in readme
    assert "kubectl -n tas-system port-forward svc/tas-web 8000:80" in readme
    assert "deploy/components/kubernetes-sign-in" in readme and "TAS_AUTH=kubernetes" in readme
    assert "deploy/components/large-cluster" in readme
    for line in readme.splitlines():
        if line.strip().startswith("kubectl apply -k "):
            target = shlex.split(line)[3]
            assert (PROJECT_ROOT / target / "kustomization.yaml").is_file(), line
