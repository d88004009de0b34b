"""Page-number pagination that stays cheap on 100,000-row tables.

The count is exact up to `TAS_API_EXACT_COUNT_LIMIT` matches (a `COUNT(*)` over a LIMITed
subquery) and a lower bound beyond it, flagged by `count_exact: false`; whether a next page
exists is known by fetching one row more than the page, never from the count.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

PAGE_PARAM = "page"
PAGE_SIZE_PARAM = "page_size"
MAX_PAGE = 10_000_000


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


NUL = "\x00"


def reject_null_characters(request: Request, path_values: dict) -> None:
    """A NUL in a parameter is a 400 naming it: no stored name can hold one (PostgreSQL text
    cannot), and the OpenAPI schema excludes it from every string parameter."""
    for name, value in path_values.items():
        if NUL in str(value):
            raise ValidationError({name: ["must not contain a NUL character"]})
    for name in request.query_params:
        if NUL in name or any(NUL in value for value in request.query_params.getlist(name)):
            raise ValidationError({name.replace(NUL, "\\x00"): ["must not contain a NUL character"]})


CACHE_BUSTER = "_"  # what HTTP clients add to keep a cache from answering (jQuery's cache: false)


def reject_unknown_parameters(request: Request, accepted: frozenset[str], prefixes: tuple[str, ...] = ()) -> None:
    """A query parameter the endpoint does not take is a 400 naming it and what it takes:
    ignored, a misspelt filter (`?clusterQueue=` for `?cluster_queue=`) would answer with
    every row as if it had filtered them."""
    unknown = sorted(name for name in request.query_params
                     if name not in accepted and name != CACHE_BUSTER and not name.startswith(prefixes))
    if not unknown:
        return
    takes = ", ".join(sorted(accepted)) + "".join(f", {prefix}KEY" for prefix in prefixes)
    errors = {}
    for name in unknown:
        snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).replace("-", "_")  # pageSize, page-size
        errors[name] = [f"is not a parameter of this endpoint{meant_hint(snake, accepted)}; it takes {takes}"]
    raise ValidationError(errors)


def closest_spelling(text: str, options: Iterable[str]) -> str:
    """The option `text` most likely stands for: the same but for case, else the closest
    spelling (ignoring case); "" when none is close."""
    by_folded: dict[str, str] = {}
    for option in options:
        by_folded.setdefault(option.casefold(), option)
    folded = text.casefold()
    if folded in by_folded:
        return by_folded[folded]
    close = difflib.get_close_matches(folded, list(by_folded), n=1, cutoff=0.75)
    return by_folded[close[0]] if close else ""


def meant_hint(text: str, options: Iterable[str]) -> str:
    """The hint " (did you mean X?)" when `text` looks like a misspelling of the option X, else ""."""
    meant = closest_spelling(text, options)
    return f" (did you mean {meant}?)" if meant else ""


def ascii_int(raw: str) -> int:
    """An integer written as ASCII digits with an optional leading '-': int() alone also takes
    spaces, '+', '_' and the digits of other scripts, which a query string should not carry."""
    digits = raw[1:] if raw.startswith("-") else raw
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(raw)
    return int(raw)


def single_value(request: Request, name: str) -> str | None:
    """The value of a query parameter that takes one, None when it is absent; a 400 when it
    is given more than once (which value was meant cannot be told)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ValidationError({name: [f"is given {len(values)} times; it takes one value"]})
    return values[0] if values else None


def positive_int(request: Request, name: str, default: int, maximum: int | None = None) -> int:
    raw = single_value(request, name)
    if raw is None:
        return default
    if raw == "":
        raise ValidationError({name: ["must not be empty: leave the parameter out for the default"]})
    try:
        value = ascii_int(raw)
    except ValueError:
        raise ValidationError({name: [f"must be a whole number, got {raw!r}"]}) from None
    if value < 1:
        raise ValidationError({name: [f"must be at least 1, got {value}"]})
    if maximum is not None and value > maximum:
        raise ValidationError({name: [f"must be at most {maximum}, got {value}"]})
    return value


class PagePagination(BasePagination):
    def paginate_queryset(self, queryset, request: Request, view=None) -> list:
        self.request = request
        max_size = _setting("TAS_API_MAX_PAGE_SIZE", 500)
        self.page_size = positive_int(request, PAGE_SIZE_PARAM, _setting("TAS_API_PAGE_SIZE", 50), max_size)
        self.page = positive_int(request, PAGE_PARAM, 1, MAX_PAGE)
        start = (self.page - 1) * self.page_size
        rows = list(queryset[start:start + self.page_size + 1])
        self.has_next = len(rows) > self.page_size
        rows = rows[:self.page_size]
        limit = _setting("TAS_API_EXACT_COUNT_LIMIT", 10_000)
        if not self.has_next and (rows or self.page == 1):
            self.count, self.count_exact = start + len(rows), True
        elif isinstance(queryset, Sequence):
            self.count, self.count_exact = len(queryset), True
        else:
            counted = queryset.order_by()[:limit + 1].count()  # counting needs no sort
            self.count, self.count_exact = min(counted, limit), counted <= limit
        if not rows and self.page > 1:
            last = max(1, -(-self.count // self.page_size))
            more = "" if self.count_exact else " or later"
            raise NotFound(f"page {self.page} is past the last page ({last}{more}) of {self.page_size} "
                           f"items per page")
        return rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response(self.envelope(data))

    def envelope(self, data: Any) -> dict[str, Any]:
        url = self.request.build_absolute_uri()
        previous = None
        if self.page > 1:
            previous = (remove_query_param(url, PAGE_PARAM) if self.page == 2
                        else replace_query_param(url, PAGE_PARAM, self.page - 1))
        return {
            "count": self.count,
            "countExact": self.count_exact,
            "page": self.page,
            "pageSize": self.page_size,
            "next": replace_query_param(url, PAGE_PARAM, self.page + 1) if self.has_next else None,
            "previous": previous,
            "results": data,
        }

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": ["count", "countExact", "page", "pageSize", "next", "previous", "results"],
            "properties": {
                "count": {"type": "integer", "description": "number of matching items (a lower bound when "
                          "countExact is false)"},
                "countExact": {"type": "boolean", "description": "false when more items match than the API "
                                "counts exactly (TAS_API_EXACT_COUNT_LIMIT); count is then a lower bound"},
                "page": {"type": "integer", "description": "this page's number, from 1"},
                "pageSize": {"type": "integer", "description": "items per page"},
                "next": {"type": "string", "format": "uri", "nullable": True,
                         "description": "URL of the next page, null on the last"},
                "previous": {"type": "string", "format": "uri", "nullable": True,
                             "description": "URL of the previous page, null on the first"},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view) -> list[dict]:
        max_size = _setting("TAS_API_MAX_PAGE_SIZE", 500)
        return [
            {"name": PAGE_PARAM, "required": False, "in": "query",
             "description": "page number, from 1; a page past the last one is a 404",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}},
            {"name": PAGE_SIZE_PARAM, "required": False, "in": "query",
             "description": f"items per page (default {_setting('TAS_API_PAGE_SIZE', 50)}, at most {max_size})",
             "schema": {"type": "integer", "minimum": 1, "maximum": max_size}},
        ]
