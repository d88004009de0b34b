"""The Kubernetes API as the mirror and the writer use it, through the official client.

Which cluster (the first that applies):

* ``TAS_KUBE_IN_CLUSTER=true``: the pod's service account (in-cluster config);
  ``TAS_KUBE_IN_CLUSTER=false`` never uses it;
* ``KUBECONFIG`` (one file, or several separated by ``:``), with ``TAS_KUBE_CONTEXT`` naming
  the context (default: the file's current-context);
* running in a pod (``KUBERNETES_SERVICE_HOST`` set) with no ``~/.kube/config``: in-cluster;
* ``~/.kube/config``.

Objects are read and written as raw JSON, not the client's model classes: the mirror keeps
them exactly as the API server sent them, Kueue's fields included, and a list of 50,000
pods is not turned into 50,000 model objects and back.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from django.conf import settings
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

log = logging.getLogger(__name__)

KUEUE_GROUP = "kueue.x-k8s.io"
# Newest first: Kueue v0.19 serves v1beta2; older installations only v1beta1.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
FIELD_MANAGER = "tas-service"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 60.0  # read timeout of lists, discovery and patches (not of watches)
DISCOVERY_TTL = 60.0


@dataclass(frozen=True)
class Resource:
    """One mirrored kind as the API server serves it."""

    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


CORE_RESOURCES = {
    "Node": Resource("Node", "", "v1", "nodes", namespaced=False),
    "Pod": Resource("Pod", "", "v1", "pods", namespaced=True),
    # what the ClusterQueues' namespaceSelectors are matched against
    "Namespace": Resource("Namespace", "", "v1", "namespaces", namespaced=False),
}
# kind -> (plural, namespaced); the version is found on the server
KUEUE_RESOURCES = {
    "Topology": ("topologies", False),
    "ResourceFlavor": ("resourceflavors", False),
    "ClusterQueue": ("clusterqueues", False),
    "LocalQueue": ("localqueues", True),
    "Cohort": ("cohorts", False),
    "AdmissionCheck": ("admissionchecks", False),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False),
    "Workload": ("workloads", True),
}
MIRRORED_KINDS = (*CORE_RESOURCES, *KUEUE_RESOURCES)


class KubeConfigError(Exception):
    """No usable cluster configuration."""


class Gone(Exception):
    """410 Gone: the resourceVersion is too old to watch from (or a continue token expired);
    the kind has to be listed again."""


class NotServed(Exception):
    """The API server serves no known version of the kind (e.g. Kueue is not installed)."""


class WatchError(Exception):
    """The watch stream said something the mirror cannot continue from (an ERROR event
    other than 410, a line that is not JSON)."""


# Everything after which the mirror or the writer tries again later.
CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, OSError, WatchError)


def describe_error(exc: BaseException) -> str:
    """One line naming what failed: the HTTP status and the API server's message, or the
    connection problem."""
    if isinstance(exc, ApiException):
        message = ""
        try:
            body = json.loads(exc.body) if exc.body else {}
            message = body.get("message", "") if isinstance(body, Mapping) else ""
        except (TypeError, ValueError):
            message = str(exc.body or "")[:500]
        return f"{exc.status} {exc.reason or ''}: {message}".strip().rstrip(":")
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return "read timeout: the API server sent nothing in time"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:1000]


# ---------------------------------------------------------------- configuration


def _in_cluster() -> bool:
    choice = (getattr(settings, "TAS_KUBE_IN_CLUSTER", "") or "").strip().lower()
    if choice in {"1", "true", "yes", "on"}:
        return True
    if choice in {"0", "false", "no", "off"}:
        return False
    if os.environ.get("KUBECONFIG"):
        return False
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not Path("~/.kube/config").expanduser().exists()


def client_configuration() -> client.Configuration:
    """The client configuration from KUBECONFIG / ~/.kube/config or the in-cluster service account."""
    configuration = client.Configuration()
    try:
        if _in_cluster():
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            kube_config.load_kube_config(
                config_file=os.environ.get("KUBECONFIG") or None,
                context=getattr(settings, "TAS_KUBE_CONTEXT", "") or None,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(
            f"no Kubernetes configuration: {exc} (set KUBECONFIG, provide ~/.kube/config, or run in a pod "
            f"with a service account; TAS_KUBE_CONTEXT picks a kubeconfig context)") from exc
    return configuration


# ---------------------------------------------------------------- watch streams


class WatchStream:
    """The events of one watch request, as dicts, in the order the server sent them.

    Iteration ends when the server ends the response (its timeoutSeconds); a connection
    dropped mid-stream or a read timeout raises a urllib3 error instead. `interrupt` may be
    called from another thread to end a read that is waiting for the server.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[dict]:
        pending: list[bytes] = []  # the start of a line that spans chunks (a big Workload does)
        for chunk in self._response.stream(amt=None, decode_content=True):
            *lines, rest = chunk.split(b"\n")
            if lines:
                lines[0] = b"".join((*pending, lines[0]))
                pending = []
                for line in lines:
                    if line.strip():
                        yield self._event(line)
            if rest:
                pending.append(rest)
        if pending and b"".join(pending).strip():
            yield self._event(b"".join(pending))

    @staticmethod
    def _event(line: bytes) -> dict:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise WatchError(f"the watch sent a line that is not JSON: {line[:200]!r}") from exc
        if not isinstance(event, dict):
            raise WatchError(f"the watch sent {type(event).__name__}, not an event object")
        return event

    def interrupt(self) -> None:
        try:
            self._response.shutdown()
        except Exception:  # the response may already be closed; nothing left to interrupt
            log.debug("interrupting a watch that is already closed", exc_info=True)

    def close(self) -> None:
        try:
            self._response.close()
            self._response.release_conn()
        except Exception:
            log.debug("closing a watch response failed", exc_info=True)


# ---------------------------------------------------------------- the API


class KubeApi:
    """Lists, watches and patches of the mirrored kinds, as raw JSON."""

    def __init__(self, configuration: client.Configuration) -> None:
        self.configuration = configuration
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    @classmethod
    def from_settings(cls) -> KubeApi:
        return cls(client_configuration())

    def clone(self) -> KubeApi:
        """A client of its own on the same configuration (one per watching thread)."""
        return type(self)(self.configuration)

    def close(self) -> None:
        self.api_client.close()

    # -------------------------------------------------------------- reads

    def _collection(self, resource: Resource, *, timeout: tuple[float, float], **params: Any):
        params = {name: value for name, value in params.items() if value is not None}
        common = {"_preload_content": False, "_request_timeout": timeout}
        if resource.group == "" and resource.plural == "nodes":
            return self.core.list_node(**params, **common)
        if resource.group == "" and resource.plural == "pods":
            return self.core.list_pod_for_all_namespaces(**params, **common)
        if resource.group == "" and resource.plural == "namespaces":
            return self.core.list_namespace(**params, **common)
        return self.custom.list_cluster_custom_object(resource.group, resource.version, resource.plural,
                                                      **params, **common)

    @staticmethod
    def _json(response: urllib3.BaseHTTPResponse) -> dict:
        try:
            return json.loads(response.data)
        finally:
            response.release_conn()

    def list_page(self, resource: Resource, *, limit: int, continue_token: str | None) -> dict:
        response = self._collection(resource, limit=limit, _continue=continue_token,
                                    timeout=(CONNECT_TIMEOUT, REQUEST_TIMEOUT))
        return self._json(response)

    def list_all(self, resource: Resource, *, page_size: int) -> tuple[list[dict], str]:
        """Every object of the kind, page by page (`limit` / `continue`), and the list's
        resourceVersion. Items get their kind and apiVersion, which list responses omit."""
        items: list[dict] = []
        token: str | None = None
        restarts = 0
        while True:
            try:
                page = self.list_page(resource, limit=page_size, continue_token=token)
            except ApiException as exc:
                if exc.status == 410 and token is not None and restarts < 3:
                    # the continue token expired mid-list: start over, for a consistent list
                    items, token, restarts = [], None, restarts + 1
                    continue
                raise
            for item in page.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                return items, str(meta.get("resourceVersion") or "")

    def watch(self, resource: Resource, *, resource_version: str, timeout_seconds: int,
              read_timeout: float) -> WatchStream:
        """Changes after `resource_version`, BOOKMARK events included; the server ends the
        response after `timeout_seconds`. A 410 answer raises `Gone`."""
        try:
            response = self._collection(
                resource, watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                timeout_seconds=int(timeout_seconds), timeout=(CONNECT_TIMEOUT, read_timeout))
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(describe_error(exc)) from exc
            raise
        return WatchStream(response)

    def api_resources(self, group: str, version: str) -> set[str] | None:
        """Names of the resources a group version serves; None when it is not served."""
        try:
            response = self.custom.get_api_resources(group, version, _preload_content=False,
                                                     _request_timeout=(CONNECT_TIMEOUT, REQUEST_TIMEOUT))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        body = self._json(response)
        return {str(r.get("name")) for r in body.get("resources") or [] if "/" not in str(r.get("name"))}

    # -------------------------------------------------------------- writes

    def patch_workload_status(self, resource: Resource, namespace: str, name: str, body: dict) -> dict:
        return self.patch_status(resource, namespace, name, body)

    def patch_status(self, resource: Resource, namespace: str, name: str, body: dict) -> dict:
        """A merge patch of a namespaced Kueue object's status subresource."""
        response = self.custom.patch_namespaced_custom_object_status(
            resource.group, resource.version, namespace, resource.plural, name, body,
            field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH, _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, REQUEST_TIMEOUT))
        return self._json(response)

    def patch_pod(self, namespace: str, name: str, body: dict) -> dict:
        response = self.core.patch_namespaced_pod(
            name, namespace, body, field_manager=FIELD_MANAGER, _content_type=STRATEGIC_MERGE_PATCH,
            _preload_content=False, _request_timeout=(CONNECT_TIMEOUT, REQUEST_TIMEOUT))
        return self._json(response)

    def patch_pod_status(self, namespace: str, name: str, body: dict) -> dict:
        response = self.core.patch_namespaced_pod_status(
            name, namespace, body, field_manager=FIELD_MANAGER, _content_type=STRATEGIC_MERGE_PATCH,
            _preload_content=False, _request_timeout=(CONNECT_TIMEOUT, REQUEST_TIMEOUT))
        return self._json(response)


class Discovery:
    """Which version of each Kueue kind the server serves: v1beta2 when it can, else v1beta1.

    Shared by the threads of one mirror run; answers are kept for a minute, so a Kueue
    installed or upgraded while the mirror runs is picked up.
    """

    def __init__(self, api: KubeApi, *, ttl: float = DISCOVERY_TTL) -> None:
        self.api = api
        self.ttl = ttl
        self._lock = threading.Lock()
        self._served: dict[str, tuple[float, set[str] | None]] = {}

    def _resources(self, version: str) -> set[str] | None:
        with self._lock:
            cached = self._served.get(version)
            if cached is not None and time.monotonic() - cached[0] < self.ttl:
                return cached[1]
            served = self.api.api_resources(KUEUE_GROUP, version)
            self._served[version] = (time.monotonic(), served)
            return served

    def resource(self, kind: str) -> Resource:
        if kind in CORE_RESOURCES:
            return CORE_RESOURCES[kind]
        try:
            plural, namespaced = KUEUE_RESOURCES[kind]
        except KeyError:
            raise NotServed(f"kind {kind!r} is not mirrored (known: {', '.join(MIRRORED_KINDS)})") from None
        for version in KUEUE_VERSIONS:
            if plural in (self._resources(version) or ()):
                return Resource(kind, KUEUE_GROUP, version, plural, namespaced)
        raise NotServed(f"{kind}: the API server serves {plural} in none of "
                        f"{', '.join(f'{KUEUE_GROUP}/{v}' for v in KUEUE_VERSIONS)} (is Kueue installed?)")
