"""The API's endpoints. Thin: validate the query, call a selector, return its answer."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from prometheus_client.exposition import choose_encoder
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle

from tasweb.api import selectors
from tasweb.api import serializers as out
from tasweb.api.filters import (
    LEVEL_PREFIX,
    ClusterQueueFilter,
    CohortFilter,
    ComparisonFilter,
    ComparisonSummaryFilter,
    EventFilter,
    LevelFilterMixin,
    LocalQueueFilter,
    NodeFilter,
    ResourceFlavorFilter,
    TopologyFilter,
    WorkloadFilter,
    domain_path,
)
from tasweb.api.kubeauth import AccessScope, access_scope
from tasweb.api.metrics import metrics_registry
from tasweb.api.pagination import (
    PAGE_PARAM,
    PAGE_SIZE_PARAM,
    PagePagination,
    positive_int,
    reject_null_characters,
    reject_unknown_parameters,
    single_value,
)
from tasweb.api.parsers import BoundedJSONParser, YAMLParser, body_length_check
from tasweb.api.permissions import ClusterWideRead, ReadOpenOrAuthenticated, TokenRequired
from tasweb.api.renderers import (
    MetricsTextRenderer,
    OpenMetricsRenderer,
    Rendered,
    ReusableJSONRenderer,
    reusable_renderer_classes,
)
from tasweb.api.whatif import what_if
from tasweb.cluster import models as cluster
from tasweb.cluster.services import stop_policy_of
from tasweb.scheduling.models import WorkloadEvent

ERRORS = {
    400: OpenApiResponse(out.ErrorSerializer, description="a query parameter is invalid; the error names it"),
    401: OpenApiResponse(out.ErrorSerializer, description="no valid credentials (and anonymous reading is off)"),
    403: OpenApiResponse(out.ErrorSerializer, description="the credentials do not allow this (with "
                         "TAS_AUTH=kubernetes: cluster-wide objects need RBAC permission to list nodes)"),
}
NOT_FOUND = {404: OpenApiResponse(out.ErrorSerializer, description="no such object in the mirror (or, with "
                                  "TAS_AUTH=kubernetes, one in a namespace the reader may not list workloads of)")}
SERVER_ERRORS = {
    500: OpenApiResponse(out.ErrorSerializer, description="an unexpected error (logged by the service)"),
    503: OpenApiResponse(out.ErrorSerializer, description="the database is unreachable, or (TAS_AUTH=kubernetes) "
                         "the Kubernetes API server cannot verify the token; retry later"),
}


def error_responses(*codes: int) -> dict:
    merged = {**ERRORS, **NOT_FOUND}
    return {**{code: merged[code] for code in codes}, **SERVER_ERRORS}


LIST_ERRORS = {**error_responses(400, 401, 403),
               404: OpenApiResponse(out.ErrorSerializer, description="a page past the last one")}


def invalid_or_none(value: str) -> str | None:
    return value or None


class BaseApi(generics.GenericAPIView):
    permission_classes = (ReadOpenOrAuthenticated,)
    pagination_class = PagePagination
    filterset_class = None
    # query parameters the view reads itself, beside its filterset's and the pagination's
    query_parameters: tuple[str, ...] = ()

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        reject_null_characters(request, kwargs)
        reject_unknown_parameters(request, self.accepted_parameters(),
                                  (LEVEL_PREFIX,) if self.takes_level_shorthand() else ())

    @classmethod
    def accepted_parameters(cls) -> frozenset[str]:
        """Every query parameter the view takes (`format` chooses the renderer everywhere)."""
        names = {api_settings.URL_FORMAT_OVERRIDE, *cls.query_parameters}
        if cls.filterset_class is not None:
            names |= set(cls.filterset_class.base_filters)
        if cls.pagination_class is not None and issubclass(cls, ListApi):
            names |= {PAGE_PARAM, PAGE_SIZE_PARAM}
        return frozenset(names)

    @classmethod
    def takes_level_shorthand(cls) -> bool:
        return cls.filterset_class is not None and issubclass(cls.filterset_class, LevelFilterMixin)


# Views of the whole cluster: with TAS_AUTH=kubernetes, for users who may list nodes
CLUSTER_WIDE = (ReadOpenOrAuthenticated, ClusterWideRead)


def scope(request: Request) -> AccessScope:
    return access_scope(request)


class ListApi(BaseApi, generics.ListAPIView):
    """A paginated, filtered list; each view turns its page of rows into dicts."""

    def list(self, request: Request, *args, **kwargs) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.rows_json(page))

    def rows_json(self, rows: list) -> list[dict[str, Any]]:
        raise NotImplementedError


# ---------------------------------------------------------------- topologies and flavors


def topology_json(row: cluster.Topology, flavors: dict[str, list[str]]) -> dict[str, Any]:
    return {"name": row.name, "levels": list(row.levels), "flavors": flavors.get(row.name, []),
            "invalidReason": invalid_or_none(row.invalid_reason)}


def flavors_by_topology() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name, topology in cluster.ResourceFlavor.objects.order_by("name").values_list("name", "topology_name"):
        if topology:
            out[topology].append(name)
    return out


@extend_schema(tags=["topology"])
class TopologyListApi(ListApi):
    """Topologies: their levels and the ResourceFlavors that use them."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.TopologySerializer
    filterset_class = TopologyFilter

    def get_queryset(self) -> QuerySet:
        return cluster.Topology.objects.order_by("name")

    @extend_schema(operation_id="topologies_list", responses={200: out.TopologySerializer(many=True),
                                                              **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        flavors = flavors_by_topology()
        return [topology_json(row, flavors) for row in rows]


@extend_schema(tags=["topology"])
class TopologyDetailApi(BaseApi):
    """One Topology."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.TopologySerializer

    @extend_schema(operation_id="topologies_retrieve", responses={200: out.TopologySerializer,
                                                                  **error_responses(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        row = cluster.Topology.objects.filter(name=name).first()
        if row is None:
            raise NotFound(f"Topology {name!r} not found")
        return Response(topology_json(row, flavors_by_topology()))


def flavor_json(row: cluster.ResourceFlavor, tas: set[str]) -> dict[str, Any]:
    spec = (row.raw or {}).get("spec") or {}
    return {
        "name": row.name, "nodeLabels": dict(row.node_labels or {}), "topologyName": row.topology_name or None,
        "tas": row.name in tas, "nodeTaints": list(spec.get("nodeTaints") or []),
        "tolerations": list(spec.get("tolerations") or []), "invalidReason": invalid_or_none(row.invalid_reason),
    }


@extend_schema(tags=["topology"])
class FlavorListApi(ListApi):
    """ResourceFlavors: node labels, taints, tolerations and Topology."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.ResourceFlavorSerializer
    filterset_class = ResourceFlavorFilter

    def get_queryset(self) -> QuerySet:
        return cluster.ResourceFlavor.objects.order_by("name")

    @extend_schema(operation_id="flavors_list", responses={200: out.ResourceFlavorSerializer(many=True),
                                                           **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        tas = set(selectors.tas_flavor_names()) if rows else set()
        return [flavor_json(row, tas) for row in rows]


@extend_schema(tags=["topology"])
class FlavorDetailApi(BaseApi):
    """One ResourceFlavor."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.ResourceFlavorSerializer

    @extend_schema(operation_id="flavors_retrieve", responses={200: out.ResourceFlavorSerializer,
                                                               **error_responses(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        row = cluster.ResourceFlavor.objects.filter(name=name).first()
        if row is None:
            raise NotFound(f"ResourceFlavor {name!r} not found")
        return Response(flavor_json(row, set(selectors.tas_flavor_names())))


@extend_schema(tags=["topology"])
class FlavorTreeApi(BaseApi):
    """The capacity tree of a TAS ResourceFlavor: every domain at every level of its Topology
    with allocatable capacity, usage by TAS workloads and by other pods, free capacity per
    resource, node count and the Workloads in it, computed by the engine from the mirror."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.TopologyTreeSerializer
    query_parameters = ("depth", "domain")
    # JSON is rendered once per engine view (mirror version) and kept: 4.5 MB for 10,000 nodes
    renderer_classes = reusable_renderer_classes()

    @extend_schema(
        operation_id="flavors_tree",
        parameters=[
            OpenApiParameter("depth", {"type": "integer", "minimum": 1, "maximum": 8},
                             description="only the domains of the first DEPTH levels (1 = the highest level only)"),
            OpenApiParameter("domain", str, description="only this domain and the domains below it, named by its "
                             "level values from the root, e.g. b1/r3"),
        ],
        responses={200: out.TopologyTreeSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, name: str) -> Response:
        depth = positive_int(request, "depth", 0, 8) or None
        raw_domain = single_value(request, "domain")
        root = None
        if raw_domain:  # empty: no filter, as for the list endpoints' text parameters
            try:
                root = domain_path(raw_domain, "domain")
            except Exception as exc:  # a form error from the shared parser
                raise ValidationError(getattr(exc, "message_dict", {"domain": [str(exc)]})) from None
        if not cluster.ResourceFlavor.objects.filter(name=name).exists():
            raise NotFound(f"ResourceFlavor {name!r} not found")
        if root and not selectors.flavor_has_domain(flavor=name, values=root):
            raise NotFound(f"ResourceFlavor {name!r} has no domain {'/'.join(root)!r} in its topology")
        renderer = request.accepted_renderer
        if not scope(request).unrestricted:  # the workloads in each domain: those the reader may see
            tree = visible_tree(selectors.flavor_tree(flavor=name, depth=depth, root=root), scope(request))
        elif isinstance(renderer, ReusableJSONRenderer):
            context = self.get_renderer_context()
            indent = renderer.get_indent(request.accepted_media_type, context)
            body = selectors.flavor_tree_rendered(
                flavor=name, depth=depth, root=root, variant=indent,
                render=lambda tree: renderer.render(tree, request.accepted_media_type, context))
            tree = None if body is None else Rendered(body)
        else:  # the browsable API's HTML page
            tree = selectors.flavor_tree(flavor=name, depth=depth, root=root)
        if tree is None:
            raise NotFound(f"ResourceFlavor {name!r} has no topology the engine can use (no Topology, "
                           "or no nodes with its labels)")
        return Response(tree)


def visible_tree(tree: dict[str, Any] | None, reader: AccessScope) -> dict[str, Any] | None:
    """A capacity tree naming only the workloads of namespaces the reader may read."""
    if tree is None:
        return None
    domains = []
    for domain in tree["domains"]:
        shown = reader.visible_keys(domain["workloads"])
        hidden = len(domain["workloads"]) - len(shown)
        domains.append({**domain, "workloads": shown, "workloadCount": domain["workloadCount"] - hidden})
    return {**tree, "domains": domains}


# ---------------------------------------------------------------- nodes


def node_json(row: cluster.Node, level_keys: list[str]) -> dict[str, Any]:
    labels = row.labels or {}
    return {
        "name": row.name,
        "hostname": row.hostname or row.name,
        "labels": labels,
        "levels": {key: labels[key] for key in level_keys if key in labels},
        "allocatable": selectors.resources_text(row.allocatable or {}),
        "taints": [{"key": t.get("key", ""), "value": t.get("value") or "", "effect": t.get("effect") or "",
                    "timeAdded": t.get("timeAdded")} for t in row.taints or []],
        "unschedulable": row.unschedulable,
        "ready": row.ready or None,
        "readySince": row.ready_since,
        "invalidReason": invalid_or_none(row.invalid_reason),
    }


def level_keys_in_order() -> list[str]:
    keys: list[str] = []
    for levels in cluster.Topology.objects.order_by("name").values_list("levels", flat=True):
        keys += [key for key in levels if key not in keys]
    return keys


NODE_FIELDS = ("id", "name", "hostname", "labels", "allocatable", "taints", "unschedulable", "ready", "ready_since",
               "invalid_reason")


@extend_schema(tags=["nodes"])
class NodeListApi(ListApi):
    """Nodes of the mirror with their labels, level values, capacity, taints and readiness."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.NodeSerializer
    filterset_class = NodeFilter

    def get_queryset(self) -> QuerySet:
        return cluster.Node.objects.only(*NODE_FIELDS).order_by("name")

    @extend_schema(operation_id="nodes_list", responses={200: out.NodeSerializer(many=True), **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        keys = level_keys_in_order()
        return [node_json(row, keys) for row in rows]


@extend_schema(tags=["nodes"])
class NodeDetailApi(BaseApi):
    """One Node, with the Workloads that have pods assigned to it."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.NodeDetailSerializer

    @extend_schema(operation_id="nodes_retrieve", responses={200: out.NodeDetailSerializer,
                                                             **error_responses(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        row = cluster.Node.objects.only(*NODE_FIELDS).filter(name=name).first()
        if row is None:
            raise NotFound(f"Node {name!r} not found")
        hostnames = {row.name, row.hostname} - {""}
        keys = sorted({f"{ns}/{n}" for ns, n in cluster.Workload.objects.filter(
            selectors.workloads_on_node_q(node=row.hostname or row.name)
            | selectors.workloads_on_node_q(node=row.name)).values_list("namespace", "name")}) if hostnames else []
        return Response({**node_json(row, level_keys_in_order()), "workloads": scope(request).visible_keys(keys)})


# ---------------------------------------------------------------- queues


def cluster_queue_json(row: cluster.ClusterQueue, counts: dict, queues: dict[str, list[str]],
                       reader: AccessScope, activity: dict[str, dict[str, str]], by_usage: set[str],
                       chains: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    spec = (row.raw or {}).get("spec") or {}
    groups = selectors.cluster_queue_quota(name=row.name) if not row.invalid_reason else None
    return {
        "name": row.name,
        "cohort": row.cohort or None,
        "queueingStrategy": spec.get("queueingStrategy") or "BestEffortFIFO",
        "namespaceSelector": spec.get("namespaceSelector"),
        "stopPolicy": stop_policy_of(row.raw),
        "active": activity.get(row.name),
        "cohortCycle": list(chains[row.cohort]) if row.cohort in chains else None,
        "admissionMode": (spec.get("admissionScope") or {}).get("admissionMode") or None,
        "ordersByLocalQueueUsage": row.name in by_usage,
        "flavors": [f["name"] for g in groups or [] for f in g["flavors"]],
        "resourceGroups": groups or [],
        "localQueues": sorted(reader.visible_keys(queues.get(row.name, []))),
        "counts": counts.get(row.name, selectors.QueueCounts()).as_json(),
        "invalidReason": invalid_or_none(row.invalid_reason),
    }


def local_queues_by_cluster_queue() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for (namespace, name), cq in selectors.local_queue_targets().items():
        out[cq].append(f"{namespace}/{name}")
    return out


@extend_schema(tags=["queues"])
class ClusterQueueListApi(ListApi):
    """ClusterQueues: quota and usage per flavor and resource, LocalQueues, Workload counts."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.ClusterQueueSerializer
    filterset_class = ClusterQueueFilter

    def get_queryset(self) -> QuerySet:
        return cluster.ClusterQueue.objects.order_by("name")

    @extend_schema(operation_id="clusterqueues_list", responses={200: out.ClusterQueueSerializer(many=True),
                                                                 **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        counts, queues = selectors.cluster_queue_counts(), local_queues_by_cluster_queue()
        activity, by_usage = selectors.cluster_queue_activity(), selectors.cluster_queues_by_usage()
        chains = selectors.cohort_chains()
        return [cluster_queue_json(row, counts, queues, scope(self.request), activity, by_usage, chains)
                for row in rows]


@extend_schema(tags=["queues"])
class ClusterQueueDetailApi(BaseApi):
    """One ClusterQueue."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.ClusterQueueSerializer

    @extend_schema(operation_id="clusterqueues_retrieve", responses={200: out.ClusterQueueSerializer,
                                                                     **error_responses(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        row = cluster.ClusterQueue.objects.filter(name=name).first()
        if row is None:
            raise NotFound(f"ClusterQueue {name!r} not found")
        return Response(cluster_queue_json(row, selectors.cluster_queue_counts(), local_queues_by_cluster_queue(),
                                           scope(request), selectors.cluster_queue_activity(),
                                           selectors.cluster_queues_by_usage(), selectors.cohort_chains()))


def local_queue_json(row: cluster.LocalQueue, counts: dict, activity: dict[tuple[str, str], dict[str, str]],
                     fair_sharing: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return {"namespace": row.namespace, "name": row.name, "clusterQueue": row.cluster_queue,
            "stopPolicy": stop_policy_of(row.raw), "active": activity.get((row.namespace, row.name)),
            "counts": counts.get((row.namespace, row.name), selectors.QueueCounts()).as_json(),
            "fairSharing": fair_sharing.get((row.namespace, row.name)),
            "invalidReason": invalid_or_none(row.invalid_reason)}


@extend_schema(tags=["queues"])
class LocalQueueListApi(ListApi):
    """LocalQueues: the ClusterQueue each submits to and its Workload counts."""

    serializer_class = out.LocalQueueSerializer
    filterset_class = LocalQueueFilter

    def get_queryset(self) -> QuerySet:
        return cluster.LocalQueue.objects.filter(scope(self.request).workloads_q()).order_by("namespace", "name")

    @extend_schema(operation_id="localqueues_list", responses={200: out.LocalQueueSerializer(many=True),
                                                               **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        counts, activity = selectors.local_queue_counts(), selectors.local_queue_activity()
        fair_sharing = selectors.local_queue_fair_sharing()
        return [local_queue_json(row, counts, activity, fair_sharing) for row in rows]


@extend_schema(tags=["queues"])
class LocalQueueDetailApi(BaseApi):
    """One LocalQueue."""

    serializer_class = out.LocalQueueSerializer

    @extend_schema(operation_id="localqueues_retrieve", responses={200: out.LocalQueueSerializer,
                                                                   **error_responses(401, 403, 404)})
    def get(self, request: Request, namespace: str, name: str) -> Response:
        row = cluster.LocalQueue.objects.filter(namespace=namespace, name=name).first()
        if row is None or not scope(request).allows_namespace(namespace):
            raise NotFound(f"LocalQueue {namespace}/{name} not found")
        return Response(local_queue_json(row, selectors.local_queue_counts(), selectors.local_queue_activity(),
                                         selectors.local_queue_fair_sharing()))


def cohort_json(row: cluster.Cohort, relations: selectors.CohortRelations) -> dict[str, Any]:
    groups = selectors.cohort_quota(name=row.name) if not row.invalid_reason else None
    cycle = relations.cycles.get(row.name)
    return {"name": row.name, "parent": row.parent or None,
            "clusterQueues": sorted(relations.members.get(row.name, [])),
            "children": sorted(relations.children.get(row.name, [])), "resourceGroups": groups or [],
            "cycle": list(cycle) if cycle else None, "invalidReason": invalid_or_none(row.invalid_reason)}


@extend_schema(tags=["queues"])
class CohortListApi(ListApi):
    """Cohorts: their parent, child Cohorts, member ClusterQueues and own quota."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.CohortSerializer
    filterset_class = CohortFilter

    def get_queryset(self) -> QuerySet:
        return cluster.Cohort.objects.order_by("name")

    @extend_schema(operation_id="cohorts_list", responses={200: out.CohortSerializer(many=True),
                                                           **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        relations = selectors.cohort_relations()
        return [cohort_json(row, relations) for row in rows]


@extend_schema(tags=["queues"])
class CohortDetailApi(BaseApi):
    """One Cohort."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.CohortSerializer

    @extend_schema(operation_id="cohorts_retrieve", responses={200: out.CohortSerializer,
                                                               **error_responses(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        row = cluster.Cohort.objects.filter(name=name).first()
        if row is None:
            raise NotFound(f"Cohort {name!r} not found")
        return Response(cohort_json(row, selectors.cohort_relations()))


# ---------------------------------------------------------------- workloads


@extend_schema(tags=["workloads"])
class WorkloadListApi(ListApi):
    """Workloads, filtered and ordered; each with its status, queue and the reason for it."""

    serializer_class = out.WorkloadSummarySerializer
    filterset_class = WorkloadFilter

    def get_queryset(self) -> QuerySet:
        return selectors.workload_list().filter(scope(self.request).workloads_q()).order_by("namespace", "name")

    @extend_schema(operation_id="workloads_list", responses={200: out.WorkloadSummarySerializer(many=True),
                                                             **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        predictions = selectors.predictions_of(row.key for row in rows if row.status in selectors.QUEUED_STATUSES)
        return [selectors.workload_summary(row, predictions) for row in rows]


def workload_or_404(request: Request, namespace: str, name: str) -> cluster.Workload:
    """The workload; 404 when it does not exist, and when it is in a namespace the reader may
    not read (the same answer, so a reader learns nothing of other namespaces)."""
    row = selectors.workload_get(namespace=namespace, name=name)
    if row is None or not scope(request).allows_namespace(namespace):
        raise NotFound(f"Workload {namespace}/{name} not found")
    return row


@extend_schema(tags=["workloads"])
class WorkloadDetailApi(BaseApi):
    """One Workload in full: pod sets with their topology requests, conditions, the admission
    with every PodSet's TopologyAssignment encoded (byte-for-byte Kueue's v1beta2 JSON) and
    decoded (one row per domain with every level's value), unhealthy nodes."""

    serializer_class = out.WorkloadDetailSerializer

    @extend_schema(operation_id="workloads_retrieve", responses={200: out.WorkloadDetailSerializer,
                                                                 **error_responses(401, 403, 404)})
    def get(self, request: Request, namespace: str, name: str) -> Response:
        return Response(scope(request).redact(selectors.workload_detail(
            workload=workload_or_404(request, namespace, name))))


@extend_schema(tags=["workloads"])
class WorkloadAssignmentApi(BaseApi):
    """Only the admission of a Workload: per PodSet the TopologyAssignment encoded and decoded."""

    serializer_class = out.AssignmentSerializer

    @extend_schema(operation_id="workloads_assignment", responses={200: out.AssignmentSerializer,
                                                                   **error_responses(401, 403, 404)})
    def get(self, request: Request, namespace: str, name: str) -> Response:
        row = workload_or_404(request, namespace, name)
        return Response({"namespace": row.namespace, "name": row.name, "status": row.status,
                         "podSetAssignments": selectors.assignments_decoded(workload=row)})


@extend_schema(tags=["workloads"])
class WhyPendingApi(BaseApi):
    """Why a Workload waits: per PodSet the level asked for, the best domain at every level
    against what is needed, the nodes left out and why, quota against usage, and the smallest
    change that would make it fit. Computed by the engine on the mirror as it is now."""

    serializer_class = out.WhyPendingSerializer

    @extend_schema(operation_id="workloads_why_pending", responses={200: out.WhyPendingSerializer,
                                                                    **error_responses(401, 403, 404)})
    def get(self, request: Request, namespace: str, name: str) -> Response:
        row = workload_or_404(request, namespace, name)
        return Response(scope(request).redact(selectors.why_pending(workload=row)))


def event_json(row: WorkloadEvent) -> dict[str, Any]:
    return {"id": row.id, "workload": row.workload_key, "clusterQueue": row.cluster_queue, "kind": row.kind,
            "at": row.at, "node": row.node, "domain": row.domain, "trigger": row.trigger, "message": row.message,
            "details": row.details if isinstance(row.details, dict) else {"value": row.details},
            "schedulingPass": row.scheduling_pass_id}


@extend_schema(tags=["history"])
class HistoryApi(ListApi):
    """The history the service recorded, cluster-wide: placements, node failures,
    replacements, evictions, requeues, ungating; newest first."""

    serializer_class = out.EventSerializer
    filterset_class = EventFilter

    def get_queryset(self) -> QuerySet:
        return selectors.event_list().filter(scope(self.request).events_q()).order_by("-at", "-id")

    @extend_schema(operation_id="history_list", responses={200: out.EventSerializer(many=True),
                                                           **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        return scope(self.request).redact([event_json(row) for row in rows])


@extend_schema(tags=["history"])
class WorkloadHistoryApi(HistoryApi):
    """The history of one Workload, newest first (kept after the Workload is deleted)."""

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no URL kwargs
            return selectors.event_list().none()
        key = f"{self.kwargs['namespace']}/{self.kwargs['name']}"
        return selectors.event_list().filter(workload_key=key).order_by("-at", "-id")

    @extend_schema(operation_id="workloads_history", responses={200: out.EventSerializer(many=True),
                                                                **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        namespace, name = kwargs["namespace"], kwargs["name"]
        if not scope(request).allows_namespace(namespace):
            raise NotFound(f"Workload {namespace}/{name} not found")
        return self.list(request, *args, **kwargs)


# ---------------------------------------------------------------- side by side with Kueue


@extend_schema(tags=["comparison"])
class ComparisonListApi(ListApi):
    """Side by side with Kueue (observe mode): every admission Kueue made, beside what this
    engine would have decided on the same snapshot (the cluster as the observe pass that first
    saw the admission read it, that workload's admission taken back), newest first. The
    category says where they differ: SameDomains, SameLevelOtherDomains, DifferentLevel,
    EngineWouldNotAdmit (with the engine's reason) or NoCapacityForKueue (Kueue's domains lack
    room in this engine's view of usage)."""

    permission_classes = CLUSTER_WIDE  # both assignments name domains of the whole cluster
    serializer_class = out.ComparisonSerializer
    filterset_class = ComparisonFilter

    def get_queryset(self) -> QuerySet:
        return selectors.comparison_list().order_by("-admitted_at", "-id")

    @extend_schema(operation_id="comparison_list", responses={200: out.ComparisonSerializer(many=True),
                                                              **LIST_ERRORS})
    def get(self, request: Request, *args, **kwargs) -> Response:
        return self.list(request, *args, **kwargs)

    def rows_json(self, rows):
        return [selectors.comparison_json(row) for row in rows]


@extend_schema(tags=["comparison"])
class ComparisonSummaryApi(BaseApi):
    """The agreement rate with Kueue (the share of its admissions this engine would have placed
    on the same domains), overall and per time bucket, with the count of every category; the
    filters are those of the list."""

    permission_classes = CLUSTER_WIDE
    serializer_class = out.ComparisonSummarySerializer
    filterset_class = ComparisonSummaryFilter
    pagination_class = None

    def get_queryset(self) -> QuerySet:
        return selectors.comparison_list()

    @extend_schema(operation_id="comparison_summary", filters=True,
                   responses={200: out.ComparisonSummarySerializer, **error_responses(400, 401, 403)})
    def get(self, request: Request, *args, **kwargs) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        bucket = single_value(request, "bucket") or "hour"
        return Response(selectors.comparison_summary(queryset, bucket=bucket))


# ---------------------------------------------------------------- what-if


KUBERNETES_OBJECT = {
    "type": "object", "required": ["apiVersion", "kind"], "additionalProperties": True,
    "properties": {"apiVersion": {"type": "string", "minLength": 1, "pattern": r"\S"},
                   "kind": {"type": "string", "minLength": 1, "pattern": r"\S"}},
}
WHAT_IF_BODY = {
    "oneOf": [
        {**KUBERNETES_OBJECT, "description": "one Kubernetes object (a Workload, or any kind the engine reads), "
         "or a `kind: List` with at least one object in `items`"},
        {"type": "array", "items": KUBERNETES_OBJECT, "minItems": 1, "description": "several objects"},
    ]
}


@extend_schema(tags=["what-if"])
class WhatIfApi(BaseApi):
    """Where a Workload would be placed now, or why it would not fit, without changing
    anything: one engine pass (the same as `python -m scheduler simulate`) over the mirror with
    the posted objects added. Post a Workload, a JSON array of objects or a `kind: List`
    (JSON, or YAML with Content-Type application/yaml); objects with the kind, namespace and
    name of mirrored ones replace them for this pass. Needs a token; throttled."""

    permission_classes = (TokenRequired,)
    throttle_classes = (ScopedRateThrottle,)
    throttle_scope = "what-if"
    parser_classes = (BoundedJSONParser, YAMLParser)
    serializer_class = out.WhatIfSerializer

    @extend_schema(
        operation_id="what_if",
        request={"application/json": WHAT_IF_BODY, "application/yaml": WHAT_IF_BODY},
        responses={
            200: out.WhatIfSerializer,
            400: OpenApiResponse(out.ErrorSerializer, description="a malformed object (e.g. without apiVersion or "
                                 "kind), or no object at all: the error names the object (Kind/namespace/name) "
                                 "and the field"),
            401: ERRORS[401],
            403: ERRORS[403],
            411: OpenApiResponse(out.ErrorSerializer, description="the body was sent without a Content-Length "
                                 "(chunked)"),
            413: OpenApiResponse(out.ErrorSerializer, description="the body is larger than TAS_API_MAX_BODY_BYTES"),
            415: OpenApiResponse(out.ErrorSerializer, description="not JSON or YAML"),
            429: OpenApiResponse(out.ErrorSerializer, description="too many what-if requests; retry later"),
            **SERVER_ERRORS,
        },
        examples=[OpenApiExample("a Workload", request_only=True, value={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "try-me", "namespace": "ml"},
            "spec": {"queueName": "team-a", "podSets": [{
                "name": "workers", "count": 4,
                "topologyRequest": {"required": "cloud.example.com/topology-rack"},
                "template": {"spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}}]}})],
    )
    def post(self, request: Request) -> Response:
        body_length_check(request.META)
        return Response(what_if(body=request.data))


# ---------------------------------------------------------------- metrics


@extend_schema(exclude=True)  # Prometheus's text format, not JSON: described in the README
class MetricsApi(BaseApi):
    """Prometheus metrics: Kueue's queue and quota gauges, and the service's own (see
    tasweb/api/metrics.py). Read like the ClusterQueues: open while anonymous reading is,
    otherwise a token (Prometheus: `authorization: {type: Token, credentials: KEY}`)."""

    permission_classes = CLUSTER_WIDE
    renderer_classes = (OpenMetricsRenderer, MetricsTextRenderer, JSONRenderer)

    def get(self, request: Request) -> HttpResponse:
        encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
        return HttpResponse(encoder(metrics_registry()), content_type=content_type)
