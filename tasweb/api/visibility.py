"""Kueue's visibility API (`visibility.kueue.x-k8s.io`, v1beta1 and v1beta2): the pending
workloads of a ClusterQueue or a LocalQueue, as PendingWorkloadsSummary objects, at the
paths Kueue's API server extension serves them:

    /apis/visibility.kueue.x-k8s.io/{version}/clusterqueues/{name}/pendingworkloads
    /apis/visibility.kueue.x-k8s.io/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads

so a client built for Kueue (client-go's generated visibility client, `kubectl get --raw`)
whose server URL is this service reads them unchanged. `limit` (default 1000) and `offset`
(default 0) mean what they mean in Kueue; errors are Kubernetes Status objects.

With TAS_AUTH=kubernetes a reader sees a LocalQueue's list when they may list workloads in
its namespace (otherwise it is not found), and of a ClusterQueue's list the entries of
namespaces where they may: positions stay the positions in the whole queue, and `offset`
and `limit` count the entries shown.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasweb.api import selectors
from tasweb.api import serializers as out
from tasweb.api.kubeauth import access_scope
from tasweb.api.pagination import ascii_int, reject_null_characters, single_value
from tasweb.api.permissions import ReadOpenOrAuthenticated
from tasweb.cluster import models as cluster

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
DEFAULT_LIMIT = 1000  # Kueue's constants.DefaultPendingWorkloadsLimit
MAX_INT32 = 2**31 - 1  # the largest limit or offset: Kueue's are int32 too


def k8s_time(value) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any other path of the visibility API group (an empty queue name, an unknown resource):
    the Status the Kubernetes API server answers for a path it does not serve."""
    return JsonResponse(status_body(404, "NotFound", "the server could not find the requested resource"),
                        status=404)


def summary_json(api_version: str, items: list[selectors.PendingWorkload]) -> dict[str, Any]:
    """Kueue's PendingWorkloadsSummary; each item also carries `predictedStart` (this service's
    start-time estimate, null without one), a field Kueue's clients ignore."""
    predictions = selectors.predictions_of(f"{w.namespace}/{w.name}" for w in items)

    def item(w: selectors.PendingWorkload) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": w.name, "namespace": w.namespace, "creationTimestamp": k8s_time(w.created_at)}
        owners = [{key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
                  for ref in w.owner_references if isinstance(ref, dict)]
        if owners:
            meta["ownerReferences"] = owners
        return {"metadata": meta, "priority": w.priority, "localQueueName": w.local_queue,
                "positionInClusterQueue": w.position_in_cluster_queue,
                "positionInLocalQueue": w.position_in_local_queue,
                "predictedStart": predictions.get(f"{w.namespace}/{w.name}")}

    return {"kind": "PendingWorkloadsSummary", "apiVersion": f"{GROUP}/{api_version}",
            "metadata": {"creationTimestamp": None}, "items": [item(w) for w in items]}


def _non_negative(request: Request, name: str, default: int) -> int:
    raw = single_value(request, name)
    if raw is None:
        return default
    if raw == "":
        raise exceptions.ValidationError({name: ["must not be empty: leave the parameter out for the default"]})
    try:
        value = ascii_int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: [f"must be an integer, got {raw!r}"]}) from None
    if value < 0:
        raise exceptions.ValidationError({name: [f"must not be negative, got {value}"]})
    if value > MAX_INT32:
        raise exceptions.ValidationError({name: [f"must be at most {MAX_INT32}, got {value}"]})
    return value


class VisibilityApi(APIView):
    permission_classes = (ReadOpenOrAuthenticated,)
    renderer_classes = (JSONRenderer,)

    def handle_exception(self, exc: Exception) -> Response:
        """Errors as Kubernetes Status objects, which Kueue's clients decode."""
        response = super().handle_exception(exc)
        reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                  405: "MethodNotAllowed", 406: "NotAcceptable", 415: "UnsupportedMediaType", 429: "TooManyRequests",
                  503: "ServiceUnavailable"}.get(response.status_code, "InternalError")
        data = response.data if isinstance(response.data, dict) else {}
        message = data.get("detail") or reason
        if isinstance(exc, NotFoundObject):
            response.data = status_body(404, "NotFound", message, exc.details)
        else:
            response.data = status_body(response.status_code, reason, str(message))
        return response

    versioned = True  # its path names a version of the group

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        reject_null_characters(request, kwargs)
        if self.versioned and kwargs.get("api_version") not in VERSIONS:
            raise exceptions.NotFound(f"the server could not find the requested resource: {GROUP} has no "
                                      f"version {kwargs.get('api_version')!r} (versions: {', '.join(VERSIONS)})")

    def options_page(self, request: Request) -> tuple[int, int]:
        limit = _non_negative(request, "limit", DEFAULT_LIMIT) or DEFAULT_LIMIT  # Kueue defaults 0 to 1000
        return _non_negative(request, "offset", 0), limit


class NotFoundObject(exceptions.NotFound):
    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f'{kind}.{GROUP} "{name}" not found')
        self.details = {"name": name, "group": GROUP, "kind": kind}


PAGE_PARAMETERS = [
    OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": MAX_INT32},
                     description="position of the first pending workload to return, from 0 (default 0)"),
    OpenApiParameter("limit", {"type": "integer", "minimum": 0, "maximum": MAX_INT32},
                     description="most pending workloads to return (default 1000; 0 means the default)"),
]
VERSION_PARAMETER = OpenApiParameter("api_version", str, OpenApiParameter.PATH, enum=list(VERSIONS),
                                     description="the visibility API version: v1beta1 or v1beta2")
STATUS_RESPONSES = {
    400: OpenApiResponse(out.KubernetesStatusSerializer, description="a bad limit or offset (Status BadRequest)"),
    401: OpenApiResponse(out.KubernetesStatusSerializer, description="no valid credentials (Status Unauthorized)"),
    403: OpenApiResponse(out.KubernetesStatusSerializer, description="not allowed (Status Forbidden)"),
    404: OpenApiResponse(out.KubernetesStatusSerializer, description="no such queue, or no such API version "
                         "(Status NotFound)"),
    500: OpenApiResponse(out.KubernetesStatusSerializer, description="an unexpected error (Status InternalError)"),
    503: OpenApiResponse(out.KubernetesStatusSerializer, description="the database is unreachable, or the "
                         "Kubernetes API server cannot verify the token (Status ServiceUnavailable)"),
}


@extend_schema(tags=["visibility.kueue.x-k8s.io"])
class ClusterQueuePendingWorkloadsApi(VisibilityApi):
    """Kueue's `clusterqueues/{name}/pendingworkloads`: the ClusterQueue's pending Workloads
    in queue order (higher priority first, then older), with their positions in the
    ClusterQueue and in their LocalQueue."""

    @extend_schema(operation_id="visibility_clusterqueue_pendingworkloads",
                   parameters=[VERSION_PARAMETER, *PAGE_PARAMETERS],
                   responses={200: out.PendingWorkloadsSummarySerializer, **STATUS_RESPONSES})
    def get(self, request: Request, api_version: str, name: str) -> Response:
        offset, limit = self.options_page(request)
        if not cluster.ClusterQueue.objects.filter(name=name).exists():
            raise NotFoundObject("clusterqueue", name)
        items = selectors.pending_in_cluster_queue(name=name, offset=offset, limit=limit,
                                                   namespaces=access_scope(request).namespaces)
        return Response(summary_json(api_version, items))


@extend_schema(tags=["visibility.kueue.x-k8s.io"])
class LocalQueuePendingWorkloadsApi(VisibilityApi):
    """Kueue's `namespaces/{namespace}/localqueues/{name}/pendingworkloads`: the LocalQueue's
    pending Workloads in its ClusterQueue's order, with their positions in both queues."""

    @extend_schema(operation_id="visibility_localqueue_pendingworkloads",
                   parameters=[VERSION_PARAMETER, *PAGE_PARAMETERS],
                   responses={200: out.PendingWorkloadsSummarySerializer, **STATUS_RESPONSES})
    def get(self, request: Request, api_version: str, namespace: str, name: str) -> Response:
        offset, limit = self.options_page(request)
        cq = cluster.LocalQueue.objects.filter(namespace=namespace, name=name).values_list(
            "cluster_queue", flat=True).first()
        if cq is None or not access_scope(request).allows_namespace(namespace):
            raise NotFoundObject("localqueue", name)
        items = selectors.pending_in_local_queue(namespace=namespace, name=name, cluster_queue=cq, offset=offset,
                                                 limit=limit)
        return Response(summary_json(api_version, items))


@extend_schema(tags=["visibility.kueue.x-k8s.io"])
class VisibilityDiscoveryApi(VisibilityApi):
    """The APIResourceList of the visibility group version, for clients that discover it."""

    @extend_schema(operation_id="visibility_resources", parameters=[VERSION_PARAMETER],
                   responses={200: out.APIResourceListSerializer,
                              **{code: STATUS_RESPONSES[code] for code in (401, 403, 404, 500, 503)}})
    def get(self, request: Request, api_version: str) -> Response:
        def resource(name: str, kind: str, namespaced: bool, verbs: list[str], singular: str = "") -> dict:
            return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs}

        return Response({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{api_version}",
            "resources": [
                resource("clusterqueues", "ClusterQueue", False, [], "clusterqueue"),
                resource("clusterqueues/pendingworkloads", "PendingWorkloadsSummary", False, ["get"]),
                resource("localqueues", "LocalQueue", True, [], "localqueue"),
                resource("localqueues/pendingworkloads", "PendingWorkloadsSummary", True, ["get"]),
            ],
        }, status=status.HTTP_200_OK)


def _group() -> dict[str, Any]:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in reversed(VERSIONS)]  # preferred first
    return {"name": GROUP, "versions": versions, "preferredVersion": versions[0]}


@extend_schema(tags=["visibility.kueue.x-k8s.io"])
class APIGroupListApi(VisibilityApi):
    """`/apis`: the API groups this service serves (the visibility group), as the Kubernetes
    API server lists its own for clients that discover them."""

    versioned = False

    @extend_schema(operation_id="apis_groups", responses={200: out.APIGroupListSerializer,
                                                          **{code: STATUS_RESPONSES[code] for code in (401, 403)}})
    def get(self, request: Request) -> Response:
        return Response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]})


@extend_schema(tags=["visibility.kueue.x-k8s.io"])
class APIGroupApi(VisibilityApi):
    """`/apis/visibility.kueue.x-k8s.io`: the group's versions, the preferred one first."""

    versioned = False

    @extend_schema(operation_id="visibility_group", responses={200: out.APIGroupSerializer,
                                                               **{code: STATUS_RESPONSES[code] for code in (401, 403)}})
    def get(self, request: Request) -> Response:
        return Response({"kind": "APIGroup", "apiVersion": "v1", **_group()})
