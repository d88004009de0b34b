"""URL configuration. Apps add their API routes under /api/ and their pages at the root."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from tasweb.core.apis import HealthApi

urlpatterns = [
    path("healthz", HealthApi.as_view(), name="healthz"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
