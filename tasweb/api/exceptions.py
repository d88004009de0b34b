"""Every API error as one JSON shape that names the field, never an HTML page or a 500:

    {"detail": "one line for people", "code": "invalid",
     "errors": [{"field": "status", "message": "...", "object": "...", "file": "..."}]}

Engine `InputError`s (a malformed what-if object) become 400 with the file, the object
(`Kind/namespace/name`) and the field path they carry. A database that cannot be reached
is a 503 (code `database_unavailable`); any other unexpected error is a 500 (code
`server_error`), logged with its traceback, never Django's HTML page.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler, set_rollback

from scheduler.errors import InputError

log = logging.getLogger(__name__)


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "payload_too_large"


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """DRF's nested {field: [messages]} as a flat list of {field, message}."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            field = key if key != "non_field_errors" else ""
            out += _flatten(value, f"{prefix}.{field}" if prefix and field else (prefix or field))
        return out
    if isinstance(detail, list):
        out = []
        for item in detail:
            out += _flatten(item, prefix)
        return out
    return [{"field": prefix, "message": str(detail)}]


def input_error_body(exc: InputError) -> dict[str, Any]:
    return {
        "detail": str(exc),
        "code": "invalid",
        "errors": [{"field": exc.field, "message": exc.reason, "object": exc.obj, "file": exc.file}],
    }


def error_body(detail: str, code: str) -> dict[str, Any]:
    return {"detail": detail, "code": code, "errors": []}


def unexpected_error(exc: BaseException | None, path: str) -> tuple[int, dict[str, Any]]:
    """The status and JSON body for an exception no view handled: 503 when the database is
    unreachable, 500 otherwise. The traceback goes to the log, not to the client."""
    if isinstance(exc, OperationalError | InterfaceError):
        log.error("database unavailable while serving %s: %s", path, exc)
        return status.HTTP_503_SERVICE_UNAVAILABLE, error_body(
            "the database is unavailable; retry later", "database_unavailable")
    log.error("unexpected error while serving %s", path, exc_info=exc)
    return status.HTTP_500_INTERNAL_SERVER_ERROR, error_body(
        "unexpected server error; it has been logged", "server_error")


def error_response(status_code: int, detail: str, code: str) -> JsonResponse:
    """An error in the API's shape from a plain Django view (outside DRF)."""
    return JsonResponse(error_body(detail, code), status=status_code)


def _unknown_format(context: dict) -> exceptions.NotAcceptable | None:
    """DRF answers a `?format=` no renderer serves with Http404, as if the object were
    missing: it is a 406 naming the formats there are."""
    request, view = context.get("request"), context.get("view")
    asked = request.query_params.get(api_settings.URL_FORMAT_OVERRIDE) if request is not None else None
    if asked is None or view is None:
        return None
    formats = [renderer.format for renderer in view.get_renderers()]
    if asked in formats:
        return None
    return exceptions.NotAcceptable(f"format {asked!r} is not served here: use one of {', '.join(formats)}")


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, InputError):
        return Response(input_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(str(exc))
    if isinstance(exc, Http404):
        exc = _unknown_format(context) or exceptions.NotFound(str(exc) or "not found")
    response = exception_handler(exc, context)
    if response is None:
        set_rollback()
        request = context.get("request")
        code, body = unexpected_error(exc, getattr(request, "path", "?"))
        return Response(body, status=code)
    if not isinstance(exc, exceptions.APIException):
        return response
    detail = exc.detail
    if isinstance(detail, dict | list):
        errors = _flatten(detail)
        first = errors[0] if errors else {"field": "", "message": "invalid input"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        code = "invalid"
    else:
        errors = []
        message = str(detail)
        code = getattr(detail, "code", None) or exc.default_code
    response.data = {"detail": message, "code": code, "errors": errors}
    return response
