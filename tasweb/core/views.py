"""Plain views of the project that belong to no app."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """/favicon.ico: browsers ask for it on every page that names no icon (the API's,
    /healthz, the schema); the project's icon is an SVG among the static files."""
    return HttpResponseRedirect(static("favicon.svg"))
