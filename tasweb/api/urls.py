"""Routes of the REST API (`/api/v1/...`) and of Kueue's visibility API (`/apis/...`)."""

from django.urls import path, re_path

from tasweb.api import apis, index, visibility

app_name = "api"

v1 = [
    path("", index.ApiV1Api.as_view(), name="index"),
    path("topologies/", apis.TopologyListApi.as_view(), name="topology-list"),
    path("topologies/<str:name>/", apis.TopologyDetailApi.as_view(), name="topology-detail"),
    path("flavors/", apis.FlavorListApi.as_view(), name="flavor-list"),
    path("flavors/<str:name>/", apis.FlavorDetailApi.as_view(), name="flavor-detail"),
    path("flavors/<str:name>/tree/", apis.FlavorTreeApi.as_view(), name="flavor-tree"),
    path("nodes/", apis.NodeListApi.as_view(), name="node-list"),
    path("nodes/<str:name>/", apis.NodeDetailApi.as_view(), name="node-detail"),
    path("clusterqueues/", apis.ClusterQueueListApi.as_view(), name="clusterqueue-list"),
    path("clusterqueues/<str:name>/", apis.ClusterQueueDetailApi.as_view(), name="clusterqueue-detail"),
    path("localqueues/", apis.LocalQueueListApi.as_view(), name="localqueue-list"),
    path("localqueues/<str:namespace>/<str:name>/", apis.LocalQueueDetailApi.as_view(), name="localqueue-detail"),
    path("cohorts/", apis.CohortListApi.as_view(), name="cohort-list"),
    path("cohorts/<str:name>/", apis.CohortDetailApi.as_view(), name="cohort-detail"),
    path("workloads/", apis.WorkloadListApi.as_view(), name="workload-list"),
    path("workloads/<str:namespace>/<str:name>/", apis.WorkloadDetailApi.as_view(), name="workload-detail"),
    path("workloads/<str:namespace>/<str:name>/assignment/", apis.WorkloadAssignmentApi.as_view(),
         name="workload-assignment"),
    path("workloads/<str:namespace>/<str:name>/why-pending/", apis.WhyPendingApi.as_view(),
         name="workload-why-pending"),
    path("workloads/<str:namespace>/<str:name>/history/", apis.WorkloadHistoryApi.as_view(),
         name="workload-history"),
    path("history/", apis.HistoryApi.as_view(), name="history"),
    path("comparison/", apis.ComparisonListApi.as_view(), name="comparison-list"),
    path("comparison/summary/", apis.ComparisonSummaryApi.as_view(), name="comparison-summary"),
    path("what-if/", apis.WhatIfApi.as_view(), name="what-if"),
]

# /api/ itself, and a JSON 404 for every other path under /api/ (after the routes above)
api_root = [
    path("", index.ApiRootApi.as_view(), name="api-root"),
    re_path(r"^(?P<rest>.*)$", index.api_not_found, name=index.NOT_FOUND_ROUTE),
]

# Any version segment: an unknown version is a 404 Status, as Kubernetes answers it
_VISIBILITY = r"^apis/visibility\.kueue\.x-k8s\.io/(?P<api_version>[^/]+)"
visibility_urls = [
    re_path(r"^apis/?$", visibility.APIGroupListApi.as_view(), name="apis-groups"),
    re_path(r"^apis/visibility\.kueue\.x-k8s\.io/?$", visibility.APIGroupApi.as_view(), name="visibility-group"),
    re_path(rf"{_VISIBILITY}$", visibility.VisibilityDiscoveryApi.as_view(), name="visibility-resources"),
    re_path(rf"{_VISIBILITY}/clusterqueues/(?P<name>[^/]+)/pendingworkloads$",
            visibility.ClusterQueuePendingWorkloadsApi.as_view(), name="visibility-clusterqueue-pending"),
    re_path(rf"{_VISIBILITY}/namespaces/(?P<namespace>[^/]+)/localqueues/(?P<name>[^/]+)/pendingworkloads$",
            visibility.LocalQueuePendingWorkloadsApi.as_view(), name="visibility-localqueue-pending"),
    # every other path under /apis: the Status of a path the server does not serve
    re_path(r"^apis/(?P<rest>.*)$", visibility.not_found, name="visibility-not-found"),
]
