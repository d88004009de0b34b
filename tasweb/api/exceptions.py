"""Every API error as one JSON shape that names the field, never an HTML page or a 500:

    {"detail": "one line for people", "code": "invalid",
     "errors": [{"field": "status", "message": "...", "object": "...", "file": "..."}]}

Engine `InputError`s (a malformed what-if object) become 400 with the file, the object
(`Kind/namespace/name`) and the field path they carry.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from scheduler.errors import InputError


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


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, InputError):
        return Response(input_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(str(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
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
