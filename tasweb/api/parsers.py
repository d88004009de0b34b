"""Request body parsers with a size limit: JSON, and YAML for objects as kubectl prints them."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser

from scheduler.errors import InputError
from scheduler.loader import parse_text
from tasweb.api.exceptions import PayloadTooLarge


def max_body_bytes() -> int:
    return int(getattr(settings, "TAS_API_MAX_BODY_BYTES", 2 * 1024 * 1024))


class LengthRequired(APIException):
    status_code = 411
    default_detail = "the request body needs a Content-Length"
    default_code = "length_required"


def declared_length(meta: dict) -> int | None:
    """The Content-Length the request declares, None when it declares none or not a number."""
    declared = meta.get("CONTENT_LENGTH")
    return int(declared) if declared and declared.isascii() and declared.isdigit() else None


def body_length_check(meta: dict) -> None:
    """Before the body is read: a body sent without a Content-Length (chunked) is a 411, and a
    Content-Length that is not a number of bytes a 400. Django reads neither, and the body
    would be taken for an empty one."""
    declared = meta.get("CONTENT_LENGTH")
    if declared in (None, ""):
        if "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower():
            raise LengthRequired("the request body is sent chunked: send it with a Content-Length")
    elif declared_length(meta) is None:
        raise ParseError(f"Content-Length must be a number of bytes, got {declared!r}")


def read_bounded(stream, parser_context: dict | None) -> bytes:
    """The body, or 413 when it is larger than TAS_API_MAX_BODY_BYTES (declared or actual)."""
    limit = max_body_bytes()
    request = (parser_context or {}).get("request")
    declared = declared_length(request.META) if request is not None else None
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"request body is {declared} bytes; the limit is {limit} bytes")
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise PayloadTooLarge(f"request body is larger than the limit of {limit} bytes")
    return data


def max_json_depth() -> int:
    return int(getattr(settings, "TAS_API_MAX_JSON_DEPTH", 64))


def max_integer_digits() -> int:
    return int(getattr(settings, "TAS_API_MAX_INTEGER_DIGITS", 40))


def json_depth_check(text: str, limit: int) -> None:
    """400 when arrays and objects nest deeper than `limit`. Checked before parsing: the
    parser recurses once per level, so a body of 100,000 `[` exhausts the stack (a 500)."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                raise ParseError(f"request body: arrays and objects nest deeper than {limit} levels")
        elif char in "]}":
            depth -= 1


def bounded_int(limit: int):
    """json's parse_int that refuses integers longer than `limit` digits: Python would
    otherwise refuse (ValueError) or spend quadratic time on a 5,000-digit number."""

    def parse(literal: str) -> int:
        digits = len(literal.lstrip("-"))
        if digits > limit:
            raise ParseError(f"request body: an integer has {digits} digits; the limit is {limit}")
        return int(literal)

    return parse


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("request body is not UTF-8 text") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A key given twice in one object is refused (the parser would silently keep the last)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for i, key in enumerate(keys) if key in keys[:i])
        raise ParseError(f"request body: the key {twice!r} appears twice in one JSON object")
    return out


class BoundedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        text = _text(read_bounded(stream, parser_context))
        json_depth_check(text, max_json_depth())
        try:
            return json.loads(text, parse_int=bounded_int(max_integer_digits()), object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise ParseError(f"request body is not valid JSON: {exc.msg} at line {exc.lineno}, "
                             f"column {exc.colno}") from None
        except (RecursionError, ValueError) as exc:  # the checks above should leave none of these
            raise ParseError(f"request body is not valid JSON: {exc}") from None


class YAMLParser(BaseParser):
    """One or more YAML documents (`kubectl get ... -o yaml`); several become a list."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        text = _text(read_bounded(stream, parser_context))
        try:
            documents = parse_text(text, file="request body")
        except InputError as exc:
            raise ParseError(str(exc)) from None
        return documents[0] if len(documents) == 1 else documents
