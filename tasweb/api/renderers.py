"""A JSON renderer that can be handed a body it rendered before.

Large answers that only change with the mirror (the capacity tree of a 10,000-node flavor
is 4.5 MB of JSON) are rendered once per engine view and kept as bytes; serialising them
again took longer than the rest of the request.
"""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.settings import api_settings


class Rendered(bytes):
    """A response body this renderer produced earlier for the same data and indent."""


class ReusableJSONRenderer(JSONRenderer):
    """DRF's JSONRenderer, except that a `Rendered` body is sent as it is."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None):
        if isinstance(data, Rendered):
            return bytes(data)
        return super().render(data, accepted_media_type, renderer_context)


def reusable_renderer_classes() -> list[type]:
    """The API's renderers, with its JSONRenderer able to send a `Rendered` body."""
    return [ReusableJSONRenderer if cls is JSONRenderer else cls for cls in api_settings.DEFAULT_RENDERER_CLASSES]


class MetricsTextRenderer(BaseRenderer):
    """Prometheus's text format: what a scrape asks for. The metrics view answers with the
    exposition itself; this renders its errors (a 401, a 403) as one line of text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None):
        detail = data.get("detail", data) if isinstance(data, dict) else data
        return f"{detail}\n".encode()


class OpenMetricsRenderer(MetricsTextRenderer):
    """OpenMetrics, which Prometheus asks for first."""

    media_type = "application/openmetrics-text"
    format = "openmetrics"
