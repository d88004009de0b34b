"""The dashboard's pages. Each view validates its input through a selector, builds its page
(`pages.py`) and renders it: whole, or with `?format=live` as the JSON a poll reads, or
`{"version": ..., "unchanged": true}` when nothing changed since the version the page holds.

Each page shows what the reader may read (`tasweb.api.kubeauth.access_scope`: everything,
unless a Kubernetes user is signed in with TAS_AUTH=kubernetes)."""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_safe

from tasweb.api.kubeauth import AuthUnavailable, access_scope
from tasweb.api.permissions import anonymous_read_allowed
from tasweb.dashboard import pages, selectors


def live_interval_ms() -> int:
    """How often a page asks for changes (TAS_DASHBOARD_POLL_MS, default 5 s; 0 turns polling off)."""
    return int(getattr(settings, "TAS_DASHBOARD_POLL_MS", 5000))


def error_page(request: HttpRequest, error: selectors.DashboardError) -> HttpResponse:
    return render(request, "dashboard/error.html", {"error": error, "nav": ""}, status=error.status)


def dashboard_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Read access as the API grants it; bad input becomes a 400/404 page naming the problem."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not (anonymous_read_allowed() or request.user.is_authenticated):
            if request.GET.get("format") == "live":  # a poll whose session ended
                return JsonResponse({"error": "Reading cluster state needs a signed-in user here.",
                                     "status": 403}, status=403)
            return redirect_to_login(request.get_full_path())
        try:
            return view(request, *args, **kwargs)
        except AuthUnavailable as exc:  # a review the API server could not answer: never shown anyway
            error = selectors.DashboardError(str(exc.detail))
            error.status, error.title = 503, "Service unavailable"
            if request.GET.get("format") == "live":
                return JsonResponse({"error": error.message, "status": error.status}, status=error.status)
            return error_page(request, error)
        except selectors.DashboardError as error:
            if request.GET.get("format") == "live":
                return JsonResponse({"error": error.message, "status": error.status}, status=error.status)
            return error_page(request, error)

    return require_safe(gzip_page(wrapper))


class RenderedPages:
    """The last few rendered bodies, by page, parameters and version: a page is built once per
    change of the cluster however many browsers show it or reload it."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.bodies: OrderedDict[tuple, tuple[bytes, str]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple) -> tuple[bytes, str] | None:
        with self.lock:
            found = self.bodies.get(key)
            if found is not None:
                self.bodies.move_to_end(key)
            return found

    def put(self, key: tuple, body: bytes, content_type: str) -> None:
        with self.lock:
            self.bodies[key] = (body, content_type)
            while len(self.bodies) > self.size:
                self.bodies.popitem(last=False)


rendered = RenderedPages()


def require_cluster_wide(request: HttpRequest) -> None:
    """Pages of the whole cluster: a Kubernetes user needs permission to list nodes."""
    scope = access_scope(request)
    if not scope.may_list_nodes:
        raise selectors.Forbidden(scope.nodes_denied_message(),
                                  hint="The Workloads, Queues and History pages show your namespaces.")


def respond(request: HttpRequest, build: Callable[[], pages.Page]) -> HttpResponse:
    params = _params_key(request)
    reader = access_scope(request)
    if not reader.unrestricted:  # a page per set of namespaces its readers may read
        params = (*params, ("reader", reader.key))
    version = selectors.live_version(request.path, params)
    live = request.GET.get("format") == "live"
    if live and request.GET.get("v") == version:
        return JsonResponse({"version": version, "unchanged": True})
    key = (request.path, params, version, live, live_interval_ms())
    cached = rendered.get(key)
    if cached is not None:
        return HttpResponse(cached[0], content_type=cached[1])
    page = build()
    if live:
        fragments = {key: render_to_string(template, page.context, request)
                     for key, template in page.fragments.items()}
        body = (f'{{"version":{json.dumps(version)},"fragments":{json.dumps(fragments)},'
                f'"figures":{page.figures_json()}}}')
        response = HttpResponse(body, content_type="application/json")
    else:
        context = {**page.context, "figures_json": page.figures_json(), "live_version": version,
                   "live_interval": live_interval_ms()}
        response = render(request, page.template, context)
    rendered.put(key, response.content, response["Content-Type"])
    return response


def _params_key(request: HttpRequest) -> tuple:
    return tuple(sorted((k, tuple(request.GET.getlist(k))) for k in request.GET if k not in ("format", "v")))


@dashboard_view
def home(request: HttpRequest) -> HttpResponse:
    return redirect("dashboard:topology" if access_scope(request).may_list_nodes else "dashboard:workloads")


@dashboard_view
def topology(request: HttpRequest) -> HttpResponse:
    require_cluster_wide(request)
    return respond(request, lambda: pages.topology_page(request.GET, access_scope(request)))


@dashboard_view
def workloads(request: HttpRequest) -> HttpResponse:
    return respond(request, lambda: pages.workload_list_page(request.GET, access_scope(request)))


@dashboard_view
def workload(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    scope = access_scope(request)
    selectors.workload_or_404(namespace, name, scope)
    return respond(request, lambda: pages.workload_page(namespace, name, request.GET, scope))


@dashboard_view
def why_pending(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """The why-pending explanation of one workload as a fragment, for the queues page, with
    the status and reason it was computed from: the page shows those in the entry's summary,
    so the badge and the explanation under it always come from the same read.

    A browser that opens the address itself (it prefers HTML) is sent to the workload's page,
    which shows the same explanation whole, instead of the fragment's JSON."""
    if request.get_preferred_type(["application/json", "text/html"]) == "text/html":
        return redirect(f"{reverse('dashboard:workload', args=(namespace, name))}#workload-why")
    page = pages.why_pending_fragment(namespace, name, access_scope(request))
    html = render_to_string(page.template, page.context, request)
    body = (f'{{"html":{json.dumps(html)},"workload":{json.dumps(page.context["workload"])},'
            f'"figures":{page.figures_json()}}}')
    return HttpResponse(body, content_type="application/json")


@dashboard_view
def history(request: HttpRequest) -> HttpResponse:
    return respond(request, lambda: pages.history_page(request.GET, access_scope(request)))


@dashboard_view
def queues(request: HttpRequest) -> HttpResponse:
    return respond(request, lambda: pages.queues_page(request.GET, access_scope(request)))


@dashboard_view
def comparison(request: HttpRequest) -> HttpResponse:
    require_cluster_wide(request)  # both assignments drawn on the cluster's heatmap
    return respond(request, lambda: pages.comparison_page(request.GET))
