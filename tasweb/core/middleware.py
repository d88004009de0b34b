"""Request guards every page and endpoint shares: input no view can store is refused before
any view runs, and every response carries the site's Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

NUL = "\x00"


def nul_location(request: HttpRequest) -> tuple[str, str] | None:
    """Where the request carries a NUL character, as (field, description): the path, or a
    named query parameter; None when it carries none.

    No stored name can hold one (PostgreSQL text refuses it), so such a request can only be
    a mistake or a probe; left to the views it becomes a database error, i.e. a 500."""
    if NUL in request.path:
        return "path", "the path"
    for key, values in request.GET.lists():
        if NUL in key:
            shown = key.replace(NUL, "%00")
            return shown, f"the name of query parameter {shown!r}"
        if any(NUL in value for value in values):
            return key, f"query parameter {key!r}"
    return None


def bad_request(request: HttpRequest, field: str, message: str,
                problem: str = "must not contain a NUL character") -> HttpResponse:
    """A 400 in the shape the caller reads: the API's JSON error (its `errors` saying
    `problem` of `field`), a Kubernetes Status for the visibility API, plain text for the
    dashboard."""
    if request.path.startswith("/apis/"):
        return JsonResponse({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": message, "reason": "BadRequest", "code": 400}, status=400)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message, "code": "invalid",
                             "errors": [{"field": field, "message": problem}]},
                            status=400)
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


class RejectNulMiddleware:
    """400 for a NUL character in the path or the query string, naming where it is, and for
    a query string of more parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            found = nul_location(request)
        except TooManyFieldsSent:
            most = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            return bad_request(request, "query", f"the query string has more than {most} parameters",
                               f"must hold at most {most} parameters")
        if found is not None:
            field, where = found
            return bad_request(request, field, f"{where} must not contain a NUL character (%00)")
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Adds `TAS_CONTENT_SECURITY_POLICY` to every response that does not set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "TAS_CONTENT_SECURITY_POLICY", "")
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


def with_policy(setting: str):
    """A view decorator: the view's responses carry the policy of `setting` instead of the site's."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            response = view(request, *args, **kwargs)
            response["Content-Security-Policy"] = getattr(settings, setting)
            return response
        return wrapped
    return decorate
