"""The API's entry points: `/api/` and `/api/v1/` list what there is to read (links), and any
other path under `/api/` is a JSON 404 in the API's error shape, not Django's HTML page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as s
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from tasweb.api.apis import error_responses
from tasweb.api.exceptions import error_response
from tasweb.api.pagination import reject_unknown_parameters
from tasweb.api.permissions import ReadOpenOrAuthenticated

# The collections of /api/v1/, by the name of their route (detail routes hang off them).
V1_RESOURCES = {
    "topologies": ("api:topology-list", "Topologies and their levels"),
    "flavors": ("api:flavor-list", "ResourceFlavors; flavors/NAME/tree/ is a TAS flavor's capacity tree"),
    "nodes": ("api:node-list", "Nodes with labels, level values, capacity, taints and readiness"),
    "clusterqueues": ("api:clusterqueue-list", "ClusterQueues: quota, usage and Workload counts"),
    "localqueues": ("api:localqueue-list", "LocalQueues and their Workload counts"),
    "cohorts": ("api:cohort-list", "Cohorts and their quota"),
    "workloads": ("api:workload-list", "Workloads; NS/NAME/ for one, with assignment/, why-pending/, history/"),
    "history": ("api:history", "recorded events, newest first"),
    "comparison": ("api:comparison-list", "Kueue's admissions beside this engine's decisions (observe mode); "
                   "summary/ for the agreement rate"),
    "what-if": ("api:what-if", "POST a Workload: where it would be placed now, or why not"),
}


class LinkSerializer(s.Serializer):
    href = s.URLField(help_text="absolute URL")
    description = s.CharField(help_text="what it serves")


class ApiRootSerializer(s.Serializer):
    versions = s.DictField(child=LinkSerializer(), help_text="API versions by name")
    schema = s.URLField(help_text="the OpenAPI 3 document")
    docs = s.URLField(help_text="the API documentation (Swagger UI)")


class ApiVersionSerializer(s.Serializer):
    version = s.CharField(help_text="this version's name")
    resources = s.DictField(child=LinkSerializer(), help_text="the collections of this version by name")
    schema = s.URLField(help_text="the OpenAPI 3 document")


def _link(request: Request, route: str, description: str) -> dict[str, str]:
    return {"href": request.build_absolute_uri(reverse(route)), "description": description}


class IndexApi(APIView):
    permission_classes = (ReadOpenOrAuthenticated,)

    @classmethod
    def accepted_parameters(cls) -> frozenset[str]:
        return frozenset({api_settings.URL_FORMAT_OVERRIDE})

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        reject_unknown_parameters(request, self.accepted_parameters())


@extend_schema(tags=["index"])
class ApiRootApi(IndexApi):
    """What the API serves: its versions, the OpenAPI document and the documentation."""

    @extend_schema(operation_id="api_root", responses={200: ApiRootSerializer, **error_responses(401, 403)})
    def get(self, request: Request) -> Response:
        return Response({
            "versions": {"v1": _link(request, "api:index", "version 1 of the REST API")},
            "schema": request.build_absolute_uri(reverse("api-schema")),
            "docs": request.build_absolute_uri(reverse("api-docs")),
        })


@extend_schema(tags=["index"])
class ApiV1Api(IndexApi):
    """The collections of version 1, each with its URL."""

    @extend_schema(operation_id="api_v1", responses={200: ApiVersionSerializer, **error_responses(401, 403)})
    def get(self, request: Request) -> Response:
        return Response({
            "version": "v1",
            "resources": {name: _link(request, route, text) for name, (route, text) in V1_RESOURCES.items()},
            "schema": request.build_absolute_uri(reverse("api-schema")),
        })


NOT_FOUND_ROUTE = "not-found"


@csrf_exempt  # any method: a write to no endpoint is a 404, not a CSRF page
def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any path under /api/ that no endpoint serves. Like APPEND_SLASH, a GET without the
    trailing slash of an endpoint is redirected to it; any other method is told the path."""
    if not request.path.endswith("/"):
        try:
            match = resolve(f"{request.path}/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != NOT_FOUND_ROUTE:
            if request.method in ("GET", "HEAD"):
                query = request.META.get("QUERY_STRING", "")
                return HttpResponsePermanentRedirect(f"{request.path}/" + (f"?{query}" if query else ""))
            return error_response(404, f"no API endpoint at {request.path}: the endpoint is {request.path}/ "
                                       "(with the trailing slash)", "not_found")
    return error_response(404, f"no API endpoint at {request.path}; GET /api/v1/ lists them", "not_found")
